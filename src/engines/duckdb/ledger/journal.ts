import { createHash } from 'node:crypto';
import { closeSync, constants, existsSync, fstatSync, fsyncSync, openSync, readSync, unlinkSync, write, writeSync } from 'node:fs';
import { dirname } from 'node:path';
import { promisify } from 'node:util';
import { PgError } from '../../../errors/pg-error.js';
import { SqlState } from '../../../errors/sqlstate.js';

/**
 * The ledger writer's append journal: a file beside the database where each
 * group commit's chained rows are made durable with one synchronous write,
 * so that an append is acknowledged in about the time of one fsync rather
 * than a DuckDB commit (docs/benchmarks.md). The rows reach DuckDB shortly
 * after (engines/duckdb/ledger/applier.ts); after a crash, the server replays the records
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

/**
 * How reading the journal ended. `clean`: zeros, or a record older than the
 * last (the file is reused from its start). `torn`: a record that runs past
 * the end of the file. `corrupt`: a record whose hash or contents are wrong.
 * `unrecognized`: bytes that are no record (what is left of an older
 * record after reuse looks the same as damage). Records that carry on the
 * sequence after a damaged one are read too: they were written, and so
 * acknowledged, after it.
 */
export interface JournalTail {
  readonly kind: 'clean' | 'torn' | 'corrupt' | 'unrecognized';
  /** Where reading first stopped, in bytes. */
  readonly offset: number;
  readonly detail: string;
  /** Valid records found after the damage: the sequence numbers between them and the records before are lost. */
  readonly lost: { readonly afterSeq: bigint; readonly beforeSeq: bigint } | null;
}

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

  /** Opens (creating it if need be) the journal, and returns the records it holds and how reading them ended. */
  static open(path: string): { journal: Journal; records: JournalRecord[]; tail: JournalTail } {
    const existed = existsSync(path);
    // O_DSYNC: each write returns once its data is on the disk.
    const fd = openSync(path, constants.O_RDWR | constants.O_CREAT | constants.O_DSYNC, 0o600);
    const journal = new Journal(path, fd);
    const { records, tail } = existed ? journal.readAll() : { records: [], tail: CLEAN_START };
    const size = fstatSync(fd).size;
    if (size < PREALLOCATED) {
      const zeros = Buffer.alloc(2 ** 20);
      for (let at = size; at < PREALLOCATED; at += zeros.length) writeSync(fd, zeros, 0, Math.min(zeros.length, PREALLOCATED - at), at);
      fsyncSync(fd);
    }
    if (!existed) syncDirectory(path);
    return { journal, records, tail };
  }

  /**
   * Reads every valid record from the start of the file, then looks past
   * the first one that is not for records that carry on the sequence, and
   * positions the next write after the last record read.
   */
  private readAll(): { records: JournalRecord[]; tail: JournalTail } {
    const size = fstatSync(this.fd).size;
    const file = Buffer.alloc(size);
    for (let at = 0; at < size; ) {
      const n = readSync(this.fd, file, at, size - at, at);
      if (n === 0) break;
      at += n;
    }
    const records: JournalRecord[] = [];
    // Sequence numbers start at 1.
    let last = 0n;
    let read = readRecord(file, 0, last);
    while (read.record !== null) {
      records.push(read.record);
      last = read.record.lastSeq;
      read = readRecord(file, read.end, last);
    }
    const stop = read.end;
    let tail: JournalTail = { kind: read.kind, offset: stop, detail: read.detail, lost: null };
    let end = stop;
    if (read.kind !== 'clean') {
      // Records written after the damaged one were acknowledged after it: keep them, and say what is lost between.
      for (let at = file.indexOf(MAGIC, stop + 1); at >= 0; at = file.indexOf(MAGIC, at + 1)) {
        const next = readRecord(file, at, last);
        if (next.record === null) continue;
        tail = { ...tail, lost: { afterSeq: last, beforeSeq: next.record.firstSeq } };
        read = next;
        while (read.record !== null) {
          records.push(read.record);
          last = read.record.lastSeq;
          end = read.end;
          read = readRecord(file, read.end, last);
        }
        break;
      }
    }
    this.offset = end;
    return { records, tail };
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
      const full = (err as NodeJS.ErrnoException).code === 'ENOSPC';
      throw new PgError(
        full ? SqlState.DiskFull : SqlState.IoError,
        `could not write to the ledger journal ${this.path}: ${full ? 'No space left on device' : (err as Error).message}`,
        { hint: 'Nothing was appended. Free space on the disk that holds the database file (or fix it), then retry.' },
      );
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

  /**
   * Overwrites the whole file with zeros and starts again at its beginning,
   * synchronously, so that no append can interleave: after a redaction or a
   * retention run, the rows' old texts must not survive in records left
   * behind for reuse. Only when DuckDB holds every journaled row.
   */
  scrub(): void {
    const size = fstatSync(this.fd).size;
    const zeros = Buffer.alloc(Math.min(size, 2 ** 20));
    for (let at = 0; at < size; at += zeros.length) writeSync(this.fd, zeros, 0, Math.min(zeros.length, size - at), at);
    fsyncSync(this.fd);
    this.offset = 0;
  }

  /** Closes the file; `remove` deletes it, when DuckDB holds every row it recorded. */
  close(remove: boolean): void {
    if (this.fd < 0) return;
    closeSync(this.fd);
    this.fd = -1;
    if (remove) unlinkSync(this.path);
  }
}

const CLEAN_START: JournalTail = { kind: 'clean', offset: 0, detail: 'a new journal', lost: null };

type ReadResult =
  | { readonly record: JournalRecord; readonly end: number }
  | { readonly record: null; readonly end: number; readonly kind: JournalTail['kind']; readonly detail: string };

/** The record at `at`, if it is whole, matches its hash and carries on the sequence after `last`. */
function readRecord(file: Buffer, at: number, last: bigint): ReadResult {
  const stopped = (kind: JournalTail['kind'], detail: string): ReadResult => ({ record: null, end: at, kind, detail });
  const rest = file.subarray(at);
  if (file[at] === 0 && rest.every((b) => b === 0)) return stopped('clean', 'zeros follow the last record');
  if (at + HEADER > file.length || !file.subarray(at, at + MAGIC.length).equals(MAGIC)) {
    return stopped('unrecognized', `the ${rest.length} bytes from offset ${at} are no record (left over from reusing the journal, or damage)`);
  }
  const length = file.readUInt32BE(at + MAGIC.length);
  const end = at + HEADER + length;
  if (end > file.length) return stopped('torn', `the record at offset ${at} claims ${length} bytes, but the file ends after ${file.length - at - HEADER}`);
  const payload = file.subarray(at + HEADER, end);
  if (
    !createHash('sha256')
      .update(payload)
      .digest()
      .equals(file.subarray(at + MAGIC.length + 4, at + HEADER))
  ) {
    return stopped(
      'corrupt',
      `the record at offset ${at} (${length} bytes) does not match its SHA-256: torn by a crash while it was written, or damaged since`,
    );
  }
  const record = decode(payload);
  if (record === null) return stopped('corrupt', `the record at offset ${at} matches its hash but cannot be read`);
  // An older record: the file was reused from its start, and what follows is history.
  if (record.firstSeq <= last) return stopped('clean', `an older record (ledger_seq ${record.firstSeq}) follows the last one`);
  return { record, end };
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
