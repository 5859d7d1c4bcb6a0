import type { CutChain } from '../../../ledger/chain/cut.js';
import { closeSync, existsSync, fsyncSync, openSync, readFileSync, renameSync, writeSync } from 'node:fs';

/** What a damaged record was: its path, what is wrong, and where it was moved to (null when it was kept). */
export type HeadRecordDamage = (detail: string, movedTo: string | null) => void;

/** A chain's head as the writer last made it durable. */
export interface RecordedHead {
  readonly index: number;
  readonly hash: string;
  readonly seq: number;
}

const HEADER = 'cotwire chain heads 1';
/** How often noted heads reach the file: a crash forgets at most this much of them, which only narrows the check. */
const FLUSH_MS = 500;

/**
 * Every chain's head as the writer last made it durable, kept beside the
 * database (`<db>.heads`) so that a start can tell a chain whose tail was cut
 * from the file while the server was stopped: its rows end before the
 * recorded head. The rows alone cannot tell, as the writer resumes each
 * chain from them. Lines are appended as heads move and the file is rewritten
 * whole when it grows past twice what it holds. It is written without fsync:
 * a record that lags the rows (after a power loss) only narrows the check,
 * while one that leads them cannot happen, as heads are noted once durable.
 */
export class ChainHeadRecord {
  private readonly heads = new Map<string, Map<string, RecordedHead>>();
  /** Heads noted since the last flush, by ledger and key: a chain that moved twice is written once. */
  private readonly dirty = new Map<string, readonly [string, string, RecordedHead]>();
  private lines = 0;
  private live = 0;
  private fd: number | null = null;
  private timer: NodeJS.Timeout | null = null;

  private constructor(readonly path: string | null) {}

  static pathFor(databasePath: string): string {
    return `${databasePath}.heads`;
  }

  /** A record that keeps nothing on disk (an in-memory database). */
  static none(): ChainHeadRecord {
    return new ChainHeadRecord(null);
  }

  /**
   * Reads the record at `path`. `found` is false when there was none (a new
   * database, one written by an older server, or a deleted file). A line that
   * is not a head is skipped and reported; a last line cut short by a crash is
   * skipped silently.
   */
  static open(path: string, onDamage: HeadRecordDamage): { record: ChainHeadRecord; found: boolean } {
    const record = new ChainHeadRecord(path);
    const found = existsSync(path);
    if (found) {
      const text = readFileSync(path, 'utf8');
      const lines = text.split('\n');
      const last = lines.pop() ?? '';
      if (lines[0] !== HEADER) {
        // Kept for whoever investigates; the check starts again from the heads the writer makes.
        const movedTo = `${path}.damaged-${new Date().toISOString().replace(/[:.]/g, '-')}`;
        renameSync(path, movedTo);
        onDamage(`${path} does not start with "${HEADER}"`, movedTo);
      } else {
        let bad = 0;
        for (const line of lines.slice(1)) {
          if (line === '') continue;
          if (!record.load(line)) bad += 1;
        }
        if (bad > 0) onDamage(`${bad} lines of ${path} are not chain heads and were skipped`, null);
        // A last line without its newline is a write a crash cut short.
        if (last !== '') record.load(last);
      }
    }
    record.compact();
    return { record, found };
  }

  /** The heads recorded for a ledger (`schema.name`), if any. */
  expected(ledger: string): ReadonlyMap<string, RecordedHead> | undefined {
    return this.heads.get(ledger);
  }

  /** Notes a durable head; it reaches the file within FLUSH_MS, or at close. */
  note(ledger: string, key: string, head: RecordedHead): void {
    this.set(ledger, key, head);
    if (this.path === null) return;
    this.dirty.set(`${ledger}\u0000${key}`, [ledger, key, head]);
    this.timer ??= setTimeout(() => {
      this.timer = null;
      this.flush();
    }, FLUSH_MS).unref();
  }

  /** Forgets every head recorded for a ledger (one created anew under its name). */
  dropLedger(ledger: string): void {
    for (const key of [...(this.heads.get(ledger)?.keys() ?? [])]) this.note(ledger, key, { index: -1, hash: '', seq: 0 });
  }

  /** Writes the noted heads; rewrites the file when it has grown past twice what it holds. */
  flush(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    if (this.fd === null || this.dirty.size === 0) return;
    let text = '';
    for (const [l, k, h] of this.dirty.values()) text += `${lineOf(l, k, h)}\n`;
    this.lines += this.dirty.size;
    this.dirty.clear();
    if (this.lines > 2 * this.live + 4096) {
      this.compact();
      return;
    }
    writeSync(this.fd, text);
  }

  close(): void {
    this.flush();
    if (this.fd !== null) closeSync(this.fd);
    this.fd = null;
  }

  private set(ledger: string, key: string, head: RecordedHead): void {
    let m = this.heads.get(ledger);
    if (m === undefined) {
      m = new Map();
      this.heads.set(ledger, m);
    }
    if (!m.has(key)) this.live += 1;
    m.set(key, head);
  }

  private load(line: string): boolean {
    let v: unknown;
    try {
      v = JSON.parse(line);
    } catch {
      return false;
    }
    if (!Array.isArray(v) || v.length !== 5) return false;
    const [ledger, key, index, hash, seq] = v as unknown[];
    if (typeof ledger !== 'string' || typeof key !== 'string' || !Number.isSafeInteger(index) || typeof hash !== 'string' || !Number.isSafeInteger(seq))
      return false;
    this.set(ledger, key, { index: index as number, hash, seq: seq as number });
    return true;
  }

  /** The whole record in a new file, moved over the old one: a crash leaves one or the other. */
  private compact(): void {
    if (this.path === null) return;
    if (this.fd !== null) closeSync(this.fd);
    const tmp = `${this.path}.tmp`;
    const fd = openSync(tmp, 'w');
    try {
      const out: string[] = [HEADER];
      for (const [ledger, m] of this.heads) for (const [key, head] of m) out.push(lineOf(ledger, key, head));
      writeSync(fd, `${out.join('\n')}\n`);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, this.path);
    this.fd = openSync(this.path, 'a');
    this.lines = this.live;
  }
}

function lineOf(ledger: string, key: string, head: RecordedHead): string {
  return JSON.stringify([ledger, key, head.index, head.hash, head.seq]);
}

/** The chains of one ledger whose rows end before their recorded heads. */
export function cutChains(
  ledger: string,
  recorded: ReadonlyMap<string, RecordedHead> | undefined,
  present: ReadonlyMap<string, { readonly index: number; readonly hash: string }>,
): CutChain[] {
  const out: CutChain[] = [];
  if (recorded === undefined) return out;
  for (const [key, rec] of recorded) {
    // A chain whose loss was accepted when no row of it was left.
    if (rec.index < 0) continue;
    const now = present.get(key);
    if (now === undefined || now.index < rec.index || (now.index === rec.index && now.hash !== rec.hash)) {
      out.push({ ledger, key, recorded: rec, present: now === undefined ? null : { index: now.index, hash: now.hash } });
    }
  }
  return out;
}
