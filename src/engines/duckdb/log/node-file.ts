import { closeSync, fstatSync, fsyncSync, ftruncateSync, openSync, readSync, renameSync, writeSync } from 'node:fs';
import { MerkleLog, type NodeStore } from '../../../ledger/log/merkle-log.js';
import type { Hash } from '../../../ledger/log/merkle.js';

/**
 * The global log's node file beside a DuckDB database (`<db>.merkle`): the
 * complete subtrees' hashes in the order appends complete them, after a
 * 16-byte header. The file is derived data; it is synced before a
 * checkpoint signs a root computed from it.
 */

const MAGIC = Buffer.from('COTMRKL1', 'ascii');
const HEADER_BYTES = 16;
const HASH_BYTES = 32;

/** The node file of a database file. */
export function nodeFilePath(databasePath: string): string {
  return `${databasePath}.merkle`;
}

/** A node file that is not one (its header damaged): derived data, which the server rebuilds from the rows. */
export class NodeFileDamage extends Error {}

/**
 * The tree stored in `path` (created if missing), cut to its last whole append. A writable file whose header is
 * damaged is moved aside to `<path>.damaged-<time>` and started afresh, and `onDamaged` is told where it went: the
 * server then rebuilds the tree from the rows. Read-only (offline verification), it throws NodeFileDamage instead.
 */
export function openNodeFile(path: string, readOnly = false, onDamaged: (movedTo: string, detail: string) => void = () => undefined): MerkleLog {
  if (readOnly) return MerkleLog.over(new FileNodeStore(path, openSync(path, 'r'), true));
  // 'a+' creates the file without truncating it, and appends regardless of position on Linux; reopen for positioned writes.
  closeSync(openSync(path, 'a+'));
  try {
    return MerkleLog.over(new FileNodeStore(path, openSync(path, 'r+'), false));
  } catch (err) {
    if (!(err instanceof NodeFileDamage)) throw err;
    const movedTo = `${path}.damaged-${new Date().toISOString().replace(/[:.]/g, '-')}`;
    renameSync(path, movedTo);
    onDamaged(movedTo, err.message);
    return MerkleLog.over(new FileNodeStore(path, openSync(path, 'w+'), false));
  }
}

class FileNodeStore implements NodeStore {
  private stored: number;

  constructor(
    path: string,
    private readonly fd: number,
    private readonly readOnly: boolean,
  ) {
    const bytes = fstatSync(fd).size;
    if (bytes === 0 && !readOnly) {
      writeSync(fd, Buffer.concat([MAGIC, Buffer.alloc(HEADER_BYTES - MAGIC.length)]), 0, HEADER_BYTES, 0);
    } else {
      const head = Buffer.alloc(MAGIC.length);
      readSync(fd, head, 0, MAGIC.length, 0);
      if (!head.equals(MAGIC)) {
        closeSync(fd);
        throw new NodeFileDamage(
          `${path} is not a cotwire Merkle node file (its header is ${JSON.stringify(head.toString('latin1'))}, not "COTMRKL1"). It is derived data: the server rebuilds it from the ledgers' rows when it starts`,
        );
      }
    }
    this.stored = Math.max(0, Math.floor((bytes - HEADER_BYTES) / HASH_BYTES));
  }

  count(): number {
    return this.stored;
  }

  read(position: number): Hash {
    if (position >= this.stored) throw new RangeError(`Merkle node ${position} is not stored`);
    const out = Buffer.allocUnsafe(HASH_BYTES);
    const n = readSync(this.fd, out, 0, HASH_BYTES, HEADER_BYTES + position * HASH_BYTES);
    if (n !== HASH_BYTES) throw new Error(`short read of Merkle node ${position}`);
    return out;
  }

  readRange(position: number, count: number): Buffer {
    if (position + count > this.stored) throw new RangeError(`Merkle nodes ${position}..${position + count - 1} are not stored`);
    const out = Buffer.allocUnsafe(count * HASH_BYTES);
    for (let at = 0; at < out.length; ) {
      const n = readSync(this.fd, out, at, out.length - at, HEADER_BYTES + position * HASH_BYTES + at);
      if (n === 0) throw new Error(`short read of Merkle nodes from ${position}`);
      at += n;
    }
    return out;
  }

  write(hashes: readonly Hash[]): void {
    if (hashes.length === 0) return;
    const buf = hashes.length === 1 ? (hashes[0] as Hash) : Buffer.concat(hashes as Hash[]);
    let at = 0;
    while (at < buf.length) at += writeSync(this.fd, buf, at, buf.length - at, HEADER_BYTES + this.stored * HASH_BYTES + at);
    this.stored += hashes.length;
  }

  truncate(count: number): void {
    // Read-only (offline verification): the file stays as it is; only its whole appends are used.
    if (!this.readOnly) ftruncateSync(this.fd, HEADER_BYTES + count * HASH_BYTES);
    this.stored = count;
  }

  sync(): void {
    if (!this.readOnly) fsyncSync(this.fd);
  }

  close(): void {
    closeSync(this.fd);
  }
}
