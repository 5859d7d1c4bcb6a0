import { closeSync, fstatSync, fsyncSync, ftruncateSync, openSync, readSync, writeSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { lp } from './canonical.js';
import { consistencyProof, inclusionProof, nodeHash, rootOf, type Hash, type SubtreeReader } from './merkle.js';

/**
 * The global log's Merkle tree, kept beside the database (`<db>.merkle`).
 *
 * The file holds every complete subtree's hash in the order appends
 * complete them: the leaf at position m, then each parent it completes,
 * lowest first. So the node (level, index) sits at a position computable
 * from its coordinates alone, an append writes O(log n) hashes at the end,
 * and a root or a proof reads O(log n) of them. The file is derived data:
 * it can always be rebuilt from the ledgers' rows, and it is synced before
 * a checkpoint signs a root it computed.
 */

const MAGIC = Buffer.from('COTMRKL1', 'ascii');
const HEADER_BYTES = 16;
const HASH_BYTES = 32;

/** Hashes stored once m leaves have been appended: 2m - popcount(m). */
export function nodesFor(leaves: number): number {
  let ones = 0;
  for (let m = leaves; m > 0; m = Math.floor(m / 2)) ones += m % 2;
  return 2 * leaves - ones;
}

/** Where (level, index) is stored: it is completed by the leaf at (index + 1)·2^level - 1. */
export function positionOf(level: number, index: number): number {
  const before = (index + 1) * 2 ** level - 1;
  return nodesFor(before) + level;
}

/** The most leaves whose nodes fit in `count` stored hashes. */
export function leavesIn(count: number): number {
  let m = Math.floor(count / 2);
  while (m < count && nodesFor(m + 1) <= count) m++;
  while (m > 0 && nodesFor(m) > count) m--;
  return m;
}

interface NodeStore {
  count(): number;
  read(position: number): Hash;
  /** `count` consecutive hashes from `position`, in one buffer. */
  readRange(position: number, count: number): Buffer;
  write(hashes: readonly Hash[]): void;
  truncate(count: number): void;
  sync(): void;
  close(): void;
}

/** Nodes in one growing buffer: 32 bytes each, no object per node. */
class MemoryNodeStore implements NodeStore {
  private buf = Buffer.alloc(64 * HASH_BYTES);
  private stored = 0;
  count(): number {
    return this.stored;
  }
  read(position: number): Hash {
    if (position >= this.stored) throw new RangeError(`Merkle node ${position} is not stored`);
    return Buffer.from(this.buf.subarray(position * HASH_BYTES, (position + 1) * HASH_BYTES));
  }
  readRange(position: number, count: number): Buffer {
    if (position + count > this.stored) throw new RangeError(`Merkle nodes ${position}..${position + count - 1} are not stored`);
    return Buffer.from(this.buf.subarray(position * HASH_BYTES, (position + count) * HASH_BYTES));
  }
  write(hashes: readonly Hash[]): void {
    const needed = (this.stored + hashes.length) * HASH_BYTES;
    if (needed > this.buf.length) {
      const grown = Buffer.alloc(Math.max(needed, this.buf.length * 2));
      this.buf.copy(grown, 0, 0, this.stored * HASH_BYTES);
      this.buf = grown;
    }
    for (const h of hashes) h.copy(this.buf, this.stored++ * HASH_BYTES);
  }
  truncate(count: number): void {
    this.stored = Math.min(count, this.stored);
  }
  sync(): void {}
  close(): void {}
}

class FileNodeStore implements NodeStore {
  private stored: number;

  constructor(
    private readonly fd: number,
    private readonly readOnly: boolean,
  ) {
    const bytes = fstatSync(fd).size;
    if (bytes === 0 && !readOnly) {
      writeSync(fd, Buffer.concat([MAGIC, Buffer.alloc(HEADER_BYTES - MAGIC.length)]), 0, HEADER_BYTES, 0);
    } else {
      const head = Buffer.alloc(MAGIC.length);
      readSync(fd, head, 0, MAGIC.length, 0);
      if (!head.equals(MAGIC)) throw new Error('not a cotwire Merkle node file');
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

/**
 * The tree over the leaves appended so far. The right edge (the newest
 * complete subtree at each level) is kept in memory: it is all an append
 * needs, so appending never reads the file.
 */
export class MerkleLog {
  private leaves = 0;
  /** frontier[level]: the hash of the last complete subtree at that level, if the tree has one. */
  private frontier: Hash[] = [];
  readonly read: SubtreeReader = (level, index) => this.store.read(positionOf(level, index));

  private constructor(private readonly store: NodeStore) {}

  /** The node file of a database file. */
  static pathFor(databasePath: string): string {
    return `${databasePath}.merkle`;
  }

  /** A tree kept in memory only (an in-memory database). */
  static inMemory(): MerkleLog {
    return new MerkleLog(new MemoryNodeStore());
  }

  /** The tree stored in `path` (created if missing), cut to its last whole append. */
  static openFile(path: string, readOnly = false): MerkleLog {
    const fd = openSync(path, readOnly ? 'r' : 'a+');
    // 'a+' appends regardless of position on Linux; reopen for positioned writes.
    let store: FileNodeStore;
    if (readOnly) {
      store = new FileNodeStore(fd, true);
    } else {
      closeSync(fd);
      store = new FileNodeStore(openSync(path, 'r+'), false);
    }
    const log = new MerkleLog(store);
    log.truncate(leavesIn(store.count()));
    return log;
  }

  get size(): number {
    return this.leaves;
  }

  /** Forgets every leaf from `leaves` on. */
  truncate(leaves: number): void {
    if (leaves > this.leaves && leaves > leavesIn(this.store.count())) throw new RangeError(`the Merkle log holds fewer than ${leaves} leaves`);
    const nodes = nodesFor(leaves);
    if (this.store.count() > nodes) this.store.truncate(nodes);
    this.leaves = leaves;
    this.frontier = [];
    for (let level = 0; 2 ** level <= leaves; level++) {
      const last = Math.floor(leaves / 2 ** level) - 1;
      this.frontier[level] = this.read(level, last);
    }
  }

  /** Integrates leaf hashes, in order; one write for all of them, and nothing changes if it fails. */
  append(leafHashes: readonly Hash[]): void {
    const out: Hash[] = [];
    const frontier = [...this.frontier];
    let leaves = this.leaves;
    for (const leaf of leafHashes) {
      out.push(leaf);
      let hash = leaf;
      let index = leaves;
      let level = 0;
      // A right child completes its parent; the left sibling is the level's frontier as it stood.
      while (index % 2 === 1) {
        const left = frontier[level] as Hash;
        frontier[level] = hash;
        hash = nodeHash(left, hash);
        index = (index - 1) / 2;
        level++;
        out.push(hash);
      }
      frontier[level] = hash;
      leaves++;
    }
    this.store.write(out);
    this.frontier = frontier;
    this.leaves = leaves;
  }

  /**
   * The leaf hashes from index `from` up to `to` (exclusive), read in one
   * pass: a leaf and the parents it completes are stored together, so the
   * leaves of a range lie in one stretch of the file.
   */
  leafRange(from: number, to: number): Hash[] {
    this.check(to);
    if (from >= to) return [];
    const start = nodesFor(from);
    const nodes = this.store.readRange(start, nodesFor(to - 1) + 1 - start);
    const out: Hash[] = [];
    for (let i = from; i < to; i++) {
      const at = (nodesFor(i) - start) * HASH_BYTES;
      out.push(nodes.subarray(at, at + HASH_BYTES));
    }
    return out;
  }

  root(size = this.leaves): Hash {
    this.check(size);
    return rootOf(size, this.read);
  }

  inclusion(index: number, size = this.leaves): Hash[] {
    this.check(size);
    return inclusionProof(index, size, this.read);
  }

  consistency(older: number, newer = this.leaves): Hash[] {
    this.check(newer);
    return consistencyProof(older, newer, this.read);
  }

  /** Makes every stored node durable: before a checkpoint signs a root computed from them. */
  sync(): void {
    this.store.sync();
  }

  close(): void {
    this.store.close();
  }

  private check(size: number): void {
    if (!Number.isSafeInteger(size) || size < 0 || size > this.leaves) {
      throw new RangeError(`the log has ${this.leaves} leaves; a tree of ${size} is not available`);
    }
  }
}

export const LEAF_VERSION = 'cotwire/leaf/v1';

/** The part of a leaf's data that is the same for every row of a table: lp(version) || lp(schema) || lp(table). */
export function leafPrefix(schema: string, table: string): Buffer {
  return Buffer.concat([lp(LEAF_VERSION), lp(schema), lp(table)]);
}

/** SHA-256(0x00 || lp(version) || lp(schema) || lp(table) || lp(chain key) || lp(current_hash)). */
export function rowLeafHash(prefix: Buffer, chainKey: string, currentHash: string): Hash {
  return createHash('sha256').update(LEAF_BYTE).update(prefix).update(lp(chainKey)).update(lp(currentHash)).digest();
}

const LEAF_BYTE = Buffer.from([0]);
