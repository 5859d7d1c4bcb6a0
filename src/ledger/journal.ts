import { createHash } from 'node:crypto';
import { closeSync, constants, existsSync, fstatSync, fsyncSync, openSync, readSync, unlinkSync, write, writeSync } from 'node:fs';
import { dirname } from 'node:path';
import { promisify } from 'node:util';
import { PgError } from '../errors/pg-error.js';
import { SqlState } from '../errors/sqlstate.js';

/**
 * The ledger writer's append journal: a file beside the database where each
 * group commit's chained rows are made durable with one synchronous write,
 * so that an append is acknowledged in about the time of one fsync rather
 * than a DuckDB commit (docs/benchmarks.md). The rows reach DuckDB shortly
 * after (ledger/applier.ts); after a crash, the server replays the records
 * DuckDB does not have yet before it accepts a connection.
 *
 * A record is `COTJ`, the payload's length (u32, big endian), the payload's
 * SHA-256, then the payload (JSON). Reading stops at the first record that
 * is torn, does not match its hash, or does not carry on the sequence: the
 * file is preallocated with zeros and reused from its start once DuckDB has
 * every row, so what follows the last record is zeros or older records.
 */

export interface JournalTable {
  readonly schema: string;
  readonly name: string;
  /** Full rows: the texts of every column, in table order. */
  readonly rows: ReadonlyArray<ReadonlyArray<string | null>>;
}

export interface JournalRecord {
  /** The global sequence numbers of the record's first and last rows. */
  readonly firstSeq: bigint;
  readonly lastSeq: bigint;
  readonly tables: readonly JournalTable[];
}

const MAGIC = Buffer.from('COTJ');
const HEADER = MAGIC.length + 4 + 32;
/** Written once with zeros, so that a synchronous write does not also have to grow the file. */
const PREALLOCATED = 16 * 2 ** 20;
/** Once DuckDB has every row and the journal is past this, the next record goes to its start again. */
const REUSE_AFTER = 8 * 2 ** 20;

const writeAt = promisify(write);

export class Journal {
  private offset = 0;

  private constructor(
    private readonly path: string,
    private fd: number,
  ) {}

  /** The path of the journal that belongs to a database file. */
  static pathFor(databasePath: string): string {
    return `${databasePath}.journal`;
  }

  /** Opens (creating it if need be) the journal, and returns the records it holds. */
  static open(path: string): { journal: Journal; records: JournalRecord[] } {
    const existed = existsSync(path);
    // O_DSYNC: each write returns once its data is on the disk.
    const fd = openSync(path, constants.O_RDWR | constants.O_CREAT | constants.O_DSYNC, 0o600);
    const journal = new Journal(path, fd);
    const records = existed ? journal.readAll() : [];
    const size = fstatSync(fd).size;
    if (size < PREALLOCATED) {
      const zeros = Buffer.alloc(2 ** 20);
      for (let at = size; at < PREALLOCATED; at += zeros.length) writeSync(fd, zeros, 0, Math.min(zeros.length, PREALLOCATED - at), at);
      fsyncSync(fd);
    }
    if (!existed) syncDirectory(path);
    return { journal, records };
  }

  /** Reads every valid record from the start of the file, and positions the next write after them. */
  private readAll(): JournalRecord[] {
    const size = fstatSync(this.fd).size;
    const file = Buffer.alloc(size);
    for (let at = 0; at < size; ) {
      const n = readSync(this.fd, file, at, size - at, at);
      if (n === 0) break;
      at += n;
    }
    const records: JournalRecord[] = [];
    let at = 0;
    let last = -1n;
    while (at + HEADER <= size && file.subarray(at, at + MAGIC.length).equals(MAGIC)) {
      const length = file.readUInt32BE(at + MAGIC.length);
      const end = at + HEADER + length;
      if (end > size) break;
      const payload = file.subarray(at + HEADER, end);
      if (
        !createHash('sha256')
          .update(payload)
          .digest()
          .equals(file.subarray(at + MAGIC.length + 4, at + HEADER))
      )
        break;
      const record = decode(payload);
      if (record === null || record.firstSeq <= last) break;
      records.push(record);
      last = record.lastSeq;
      at = end;
    }
    this.offset = at;
    return records;
  }

  /** Writes a record; resolves once it is durable. A failed write leaves the journal as it was. */
  async append(record: JournalRecord): Promise<void> {
    const payload = Buffer.from(encode(record), 'utf8');
    const buf = Buffer.allocUnsafe(HEADER + payload.length);
    MAGIC.copy(buf, 0);
    buf.writeUInt32BE(payload.length, MAGIC.length);
    createHash('sha256')
      .update(payload)
      .digest()
      .copy(buf, MAGIC.length + 4);
    payload.copy(buf, HEADER);
    let written = 0;
    try {
      while (written < buf.length) {
        const { bytesWritten } = await writeAt(this.fd, buf, written, buf.length - written, this.offset + written);
        written += bytesWritten;
      }
    } catch (err) {
      throw new PgError(SqlState.IoError, `could not write to the ledger journal ${this.path}: ${(err as Error).message}`, {
        hint: 'Nothing was appended. Check the disk that holds the database file, then retry.',
      });
    }
    this.offset += buf.length;
  }

  /**
   * Called when DuckDB holds every journaled row: the next record may go to
   * the start of the file again. Nothing is erased; the records left behind
   * carry lower sequence numbers, which is where reading stops.
   */
  reuseIfLarge(): void {
    if (this.offset >= REUSE_AFTER) this.offset = 0;
  }

  /** Closes the file; `remove` deletes it, when DuckDB holds every row it recorded. */
  close(remove: boolean): void {
    if (this.fd < 0) return;
    closeSync(this.fd);
    this.fd = -1;
    if (remove) unlinkSync(this.path);
  }
}

function encode(record: JournalRecord): string {
  return JSON.stringify({
    first: record.firstSeq.toString(),
    last: record.lastSeq.toString(),
    tables: record.tables,
  });
}

function decode(payload: Buffer): JournalRecord | null {
  try {
    const raw = JSON.parse(payload.toString('utf8')) as { first: string; last: string; tables: JournalTable[] };
    return { firstSeq: BigInt(raw.first), lastSeq: BigInt(raw.last), tables: raw.tables };
  } catch {
    return null;
  }
}

/** A new file's name is durable only once its directory is synced. */
function syncDirectory(path: string): void {
  let fd: number | null = null;
  try {
    fd = openSync(dirname(path), 'r');
    fsyncSync(fd);
  } catch {
    // Some file systems cannot sync a directory; the file's own sync still holds its data.
  } finally {
    if (fd !== null) closeSync(fd);
  }
}
