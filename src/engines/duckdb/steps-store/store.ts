import { createHash } from 'node:crypto';
import { closeSync, fsyncSync, openSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { open, type Database, type RootDatabase } from 'lmdb';
import type { LedgerTable } from '../../../ledger/chain/schema.js';
import type { TableRows } from '../ledger/applier.js';
import { STORED_ROW_FORMAT, type StepPrinter, storedRow, zonedColumns } from './stored-row.js';

/**
 * `_cot_steps` as a row store beside DuckDB: each step as the engine would
 * print it (stored-row.ts: its DataRow message, from the canonical texts
 * the writer hashed), keyed by (session, step_index), and each trace_id
 * pointing at its (session, step_index). A cold replay is one B-tree range
 * read and a step one or two lookups, where DuckDB fetches a session's
 * scattered rows column by column (about 1 ms a row).
 *
 * Why it can be simple: the ledger never updates a row. The writer puts
 * every durable append here before it acknowledges it (`appended`); a
 * redaction or a retention removes the session's rows and marks the session
 * as one this store no longer answers (`forget`): its reads go to the
 * engine until the store is rebuilt. The files are removed whenever
 * DuckDB's file is rewritten after an erasure (start/file.ts), so erased
 * bytes leave both at once, and the store is then rebuilt from the ledger.
 *
 * It is LMDB (the `lmdb` package) without syncs: a crashed process loses
 * nothing that was committed (the pages are in the OS), and after a crash
 * of the machine (a new boot id with no clean close recorded) the store is
 * thrown away and rebuilt. Verification never reads it.
 */

/** A row's canonical texts, in the table's column order. */
export type StepTexts = ReadonlyArray<string | null>;

/** A step the store answers with: as stored (stored-row.ts), or, until LMDB has written it, its canonical texts. */
export type StoredStep = Buffer | StepTexts;

/** Meta keys: how far the store is filled, and how it was last closed. */
const FILLED = 'filled';
const CLEAN = 'clean';
const BOOT = 'boot';
const LAYOUT = 'layout';
const LAST = 'last';
/** LMDB refuses keys over 1,978 bytes; a longer session id is keyed by its digest in a namespace of its own. */
const LONG_KEY_BYTES = 1_000;
/**
 * How the store's keys and trace_id entries are written (its rows are bytes: stored-row.ts): whoever
 * opens its file reads them with these options. Uncompressed: lmdb-js's LZ4 from 200 bytes took a
 * third off the file, but doubled the time to write a row and slowed a session's read by 6-13%
 * (docs/benchmarks.md).
 */
export const STEP_STORE_ENCODING = { encoding: 'msgpack' } as const;
/** How long appended rows wait to be written together. */
const FLUSH_MS = 5;

type SessionKey = [0 | 1, string];
type RowKey = [0 | 1, string, number];

/** The file of a database file's row store of `_cot_steps` (LMDB keeps its lock beside it, `-lock`). */
export function stepStorePath(databasePath: string): string {
  return `${databasePath}.steps`;
}

/** Removes a row store's files. */
export function removeStepStore(path: string): void {
  rmSync(path, { force: true });
  rmSync(`${path}-lock`, { force: true });
  rmSync(`${path}-size`, { force: true });
}

/**
 * LMDB maps its file and trusts it: a file cut shorter than its pages
 * (a copy stopped half way, a truncate) makes the first read of a missing
 * page a SIGBUS, which kills the process before it can say anything, at
 * every start. An LMDB file never shrinks, so the size it had at the last
 * open or close (`-size`, beside it) is a floor: a file below it is thrown
 * away and rebuilt. A missing record (a store an earlier version wrote)
 * proves nothing either way.
 */
function cutShort(path: string): boolean {
  let recorded: number;
  try {
    recorded = Number(readFileSync(`${path}-size`, 'utf8'));
  } catch {
    return false;
  }
  let size: number;
  try {
    size = statSync(path).size;
  } catch {
    return false;
  }
  return Number.isFinite(recorded) && size < recorded;
}

function recordSize(path: string): void {
  try {
    writeFileSync(`${path}-size`, String(statSync(path).size));
  } catch {
    // Without the record the next start opens the file as an earlier version did.
  }
}

export interface StepStoreOptions {
  /** The store's file. */
  readonly path: string;
  /** `_cot_steps`, whose rows are kept. */
  readonly steps: LedgerTable;
  /** How its rows are printed, once, as they are written. */
  readonly printer: StepPrinter;
}

export class StepStore {
  /** Reads answered, for the tests and the metrics. */
  readonly stats = { sessions: 0, steps: 0, forgotten: 0 };
  private readonly column: { readonly session: number; readonly traceId: number; readonly stepIndex: number; readonly seq: number; readonly hash: number };
  /** The positions of the timestamp with time zone columns, whose microseconds follow each stored message. */
  readonly zoned: readonly number[];
  /** Whether every row up to `filled` is here: until the fill from the ledger is done, nothing is answered. */
  private complete = false;
  /** Steps queued for LMDB's write thread and not yet committed, by session (in step order) and by trace_id. */
  private readonly unwritten = { sessions: new Map<string, StepTexts[]>(), traces: new Map<string, StepTexts>() };
  /** Appended rows (and the mark they advance) not yet handed to LMDB, and the timer that will. */
  private queued: { rows: StepTexts[]; mark: bigint | null } = { rows: [], mark: null };
  private flushing: NodeJS.Timeout | null = null;
  /** A write failed in this run: reads go to the engine, and the store is not marked clean at the stop. */
  private broken = false;
  /** The last queued write, and what waits on it. */
  private writes: Promise<unknown> = Promise.resolve();
  private forgetting: Promise<unknown> = Promise.resolve();
  private last: { readonly seq: bigint; readonly hash: string } | null;
  /** Told when a queued write fails; the store then answers nothing more in this run. */
  onError: (err: unknown) => void = () => undefined;

  private constructor(
    private readonly env: RootDatabase,
    private readonly rows: Database<Buffer, RowKey>,
    private readonly traces: Database<RowKey, string>,
    private readonly forgotten: Database<1, SessionKey>,
    private readonly meta: Database<string | number | boolean, string>,
    readonly steps: LedgerTable,
    readonly path: string,
    private readonly printer: StepPrinter,
  ) {
    this.zoned = zonedColumns(steps);
    const stored = meta.get(LAST);
    const [seq, hash] = typeof stored === 'string' ? stored.split(' ') : [];
    this.last = seq === undefined ? null : { seq: BigInt(seq), hash: hash ?? '' };
    const names = steps.columns.map((c) => c.name);
    this.column = {
      session: names.indexOf('session_id'),
      traceId: names.indexOf('trace_id'),
      stepIndex: names.indexOf('step_index'),
      seq: names.indexOf('ledger_seq'),
      hash: names.indexOf('current_hash'),
    };
  }

  /**
   * Opens the store, or makes a new one when its files are missing, were
   * left by a machine that crashed, or hold another layout of `_cot_steps`.
   */
  static async open(options: StepStoreOptions): Promise<StepStore> {
    // The encoding and the printing are part of the layout: a store written otherwise is rebuilt, not misread.
    const columns = options.steps.columns.map((c) => `${c.name}:${c.type}`).join(',');
    const layout = `${columns};${STEP_STORE_ENCODING.encoding};${STORED_ROW_FORMAT};${options.printer.layout};${options.printer.fingerprint}`;
    if (cutShort(options.path)) removeStepStore(options.path);
    let store = StepStore.openFiles(options);
    const unsafe = store.meta.get(CLEAN) !== true && store.meta.get(BOOT) !== undefined && store.meta.get(BOOT) !== bootId();
    if (unsafe || (store.meta.get(LAYOUT) !== undefined && store.meta.get(LAYOUT) !== layout)) {
      await store.env.close();
      removeStepStore(options.path);
      store = StepStore.openFiles(options);
    }
    store.env.transactionSync(() => {
      store.meta.putSync(LAYOUT, layout);
      store.meta.putSync(BOOT, bootId());
      store.meta.putSync(CLEAN, false);
    });
    recordSize(options.path);
    return store;
  }

  private static openFiles(options: StepStoreOptions): StepStore {
    watchLmdbRejections();
    // The map starts small and lmdb-js grows it as rows arrive: a terabyte reserved per server would
    // run a process holding many of them out of address space.
    const env = open({ path: options.path, noSubdir: true, noSync: true, maxDbs: 8, ...STEP_STORE_ENCODING });
    return new StepStore(
      env,
      env.openDB<Buffer, RowKey>({ name: 'rows', encoding: 'binary' }),
      env.openDB<RowKey, string>({ name: 'traces' }),
      env.openDB<1, SessionKey>({ name: 'forgotten' }),
      env.openDB<string | number | boolean, string>({ name: 'meta' }),
      options.steps,
      options.path,
      options.printer,
    );
  }

  /** Throws the files away and starts empty: the store did not match the ledger. */
  async reset(): Promise<StepStore> {
    await this.env.close();
    removeStepStore(this.path);
    return StepStore.open({ path: this.path, steps: this.steps, printer: this.printer });
  }

  /** The highest ledger_seq up to which the store holds every step (0 when empty). */
  get filled(): bigint {
    const v = this.meta.get(FILLED);
    return typeof v === 'string' ? BigInt(v) : 0n;
  }

  /** The fill from the ledger reached the writer's first append of this run: every step is here. */
  markComplete(): void {
    this.complete = true;
  }

  /** The result columns its rows are printed for. */
  get layout(): string {
    return this.printer.layout;
  }

  get ready(): boolean {
    return this.complete;
  }

  /** Writing failed: the store answers nothing more in this run (the next start fills what is missing). */
  disable(): void {
    this.complete = false;
  }

  /**
   * The writer's durable appends, put here before they are acknowledged.
   * LMDB's write thread commits them; until it has, reads find them in
   * `unwritten`, so a step is readable from the moment it is acknowledged.
   */
  appended(tables: readonly TableRows[]): void {
    let last: bigint | null = null;
    let put: StepTexts[] = [];
    for (const { table, rows } of tables) {
      if (table.name === this.steps.name && table.schema === this.steps.schema) put = put.length === 0 ? (rows as StepTexts[]) : put.concat(rows);
      const seq = rows[rows.length - 1]?.[seqColumn(table)];
      if (seq !== null && seq !== undefined && (last === null || BigInt(seq) > last)) last = BigInt(seq);
    }
    // Only a complete store advances its mark: until the fill catches up, rows below it may be missing.
    const mark = this.complete ? last : null;
    if (put.length === 0 && mark === null) return;
    for (const row of put) {
      this.hold(row);
      this.queued.rows.push(row);
    }
    if (mark !== null) this.queued.mark = mark;
    // One LMDB batch per few milliseconds, not per commit: a batch costs 30-60 µs of the event loop,
    // which a single connection's appends would otherwise pay one by one.
    this.flushing ??= setTimeout(() => this.flush(), FLUSH_MS).unref();
  }

  /** Hands the rows queued since the last flush to LMDB's write thread, in one batch. */
  private flush(): void {
    if (this.flushing !== null) clearTimeout(this.flushing);
    this.flushing = null;
    const { rows, mark } = this.queued;
    if (rows.length === 0 && mark === null) return;
    this.queued = { rows: [], mark: null };
    let written: Promise<unknown>;
    try {
      const stored = this.stored(rows);
      written = this.env.batch(() => {
        this.putRows(rows, stored);
        if (mark !== null) this.meta.put(FILLED, String(mark));
      });
    } catch (err) {
      this.failed(err);
      return;
    }
    this.writes = written.then(
      () => this.release(rows),
      (err: unknown) => this.failed(err),
    );
  }

  /** Rows read from the ledger by the fill, all at or below `upTo`, committed before it resolves. */
  async filledFromLedger(rows: readonly StepTexts[], upTo: bigint): Promise<void> {
    try {
      const stored = this.stored(rows);
      await this.env.batch(() => {
        this.putRows(rows, stored);
        this.meta.put(FILLED, String(upTo));
      });
    } catch (err) {
      handledCommitError(err);
      throw err;
    }
  }

  /** The rows as the store keeps them; throws when the engine cannot print one (the store then stops answering). */
  private stored(rows: readonly StepTexts[]): Buffer[] {
    if (rows.length === 0) return [];
    const frames = this.printer.print(rows);
    if (frames === null) throw new Error('the engine cannot print the steps of _cot_steps from their canonical texts');
    return rows.map((row, i) => storedRow(frames[i] as Buffer, row, this.zoned));
  }

  /** Queues the rows' puts, inside a batch (LMDB commits a batch whole, in order). */
  private putRows(rows: readonly StepTexts[], stored: readonly Buffer[]): void {
    let last: StepTexts | null = null;
    for (const [i, row] of rows.entries()) {
      const key = rowKey(row[this.column.session] ?? '', Number(row[this.column.stepIndex]));
      this.rows.put(key, stored[i] as Buffer);
      this.traces.put(String(row[this.column.traceId]), key);
      if (last === null || BigInt(row[this.column.seq] ?? 0) > BigInt(last[this.column.seq] ?? 0)) last = row;
    }
    if (last !== null && (this.last === null || BigInt(last[this.column.seq] ?? 0) > this.last.seq)) {
      this.last = { seq: BigInt(last[this.column.seq] ?? 0), hash: String(last[this.column.hash]) };
      this.meta.put(LAST, `${this.last.seq} ${this.last.hash}`);
    }
  }

  private hold(row: StepTexts): void {
    const session = sessionKeyText(row[this.column.session] ?? '');
    const rows = this.unwritten.sessions.get(session);
    if (rows === undefined) this.unwritten.sessions.set(session, [row]);
    else rows.push(row);
    this.unwritten.traces.set(String(row[this.column.traceId]), row);
  }

  private release(rows: readonly StepTexts[]): void {
    const gone = new Set(rows);
    for (const row of rows) {
      const traceId = String(row[this.column.traceId]);
      if (this.unwritten.traces.get(traceId) === row) this.unwritten.traces.delete(traceId);
      const session = sessionKeyText(row[this.column.session] ?? '');
      const held = this.unwritten.sessions.get(session);
      if (held === undefined) continue;
      const rest = held.filter((r) => !gone.has(r));
      if (rest.length === 0) this.unwritten.sessions.delete(session);
      else this.unwritten.sessions.set(session, rest);
    }
  }

  private failed(err: unknown): void {
    handledCommitError(err);
    this.broken = true;
    this.complete = false;
    this.queued = { rows: [], mark: null };
    this.unwritten.sessions.clear();
    this.unwritten.traces.clear();
    this.onError(err);
  }

  /** The step with the highest ledger_seq held, which start-up holds against the ledger's row. */
  get lastStep(): { readonly seq: bigint; readonly hash: string } | null {
    return this.last;
  }

  /** A session's steps in step order, or null when the store cannot answer for it. */
  session(session: string): StoredStep[] | null {
    if (!this.complete) return null;
    const key = sessionKey(session);
    if (this.forgotten.get(key) !== undefined) return null;
    const unwritten = this.unwritten.sessions.get(sessionKeyText(session));
    // The write thread may have committed some of the held steps since: the held copies stand for those.
    const first = unwritten !== undefined && unwritten.length > 0 ? Number(unwritten[0]?.[this.column.stepIndex]) : Number.MAX_SAFE_INTEGER;
    const out: StoredStep[] = [];
    for (const { value } of this.rows.getRange({ start: [key[0], key[1]], end: [key[0], key[1], first] })) out.push(value);
    if (unwritten !== undefined) for (const row of unwritten) out.push(row);
    this.stats.sessions++;
    return out;
  }

  /**
   * One step by its trace_id (lower-case text); 'absent' when the ledger has no such step (the store
   * holds every step); null when the store cannot answer for it.
   */
  step(traceId: string): StoredStep | 'absent' | null {
    if (!this.complete) return null;
    const unwritten = this.unwritten.traces.get(traceId);
    const key = unwritten === undefined ? this.traces.get(traceId) : rowKey(unwritten[this.column.session] ?? '', 0);
    if (key === undefined) return 'absent';
    // A forgotten session's trace ids stay, pointing at it, so that its steps are read from the engine.
    if (this.forgotten.get([key[0], key[1]]) !== undefined) return null;
    const row = unwritten ?? this.rows.get(key);
    if (row === undefined) return null;
    this.stats.steps++;
    return row;
  }

  /** A redaction or a retention changed the session's stored rows: its copies go, and the engine answers for it. */
  forget(session: string): void {
    // Its rows still queued go to the write thread now, so that the removal after the pending writes takes them too.
    this.flush();
    const key = sessionKey(session);
    this.unwritten.sessions.delete(sessionKeyText(session));
    const remove = (): void => {
      this.env.transactionSync(() => {
        for (const at of this.rows.getKeys({ start: [key[0], key[1]], end: [key[0], key[1], Number.MAX_SAFE_INTEGER] })) this.rows.removeSync(at);
        this.forgotten.putSync(key, 1);
      });
    };
    remove();
    // Puts of its rows still queued for the write thread land after this: they go as soon as they have.
    this.forgetting = Promise.all([this.forgetting, this.writes.then(remove, remove).catch((err: unknown) => this.failed(err))]);
    this.stats.forgotten++;
  }

  /** Marks the store clean once its pages are on disk, so that a crash of the machine after the stop costs no rebuild. */
  async close(): Promise<void> {
    this.flush();
    await this.writes;
    await this.forgetting;
    // A store that failed to write (a full disk) is not marked clean: the next start holds it against the ledger again.
    let clean = !this.broken;
    try {
      await this.env.committed;
    } catch {
      clean = false;
    }
    try {
      if (clean) {
        syncFile(this.path);
        this.env.transactionSync(() => this.meta.putSync(CLEAN, true));
        syncFile(this.path);
      }
    } catch (err) {
      // Its file was deleted behind the server: there is nothing to mark, and the next start rebuilds it.
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    } finally {
      // Whatever failed, the files are let go (a full disk's filesystem must be able to unmount).
      await this.env.close();
      recordSize(this.path);
    }
  }
}

function syncFile(path: string): void {
  const fd = openSync(path, 'r+');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

function sessionKey(session: string): SessionKey {
  return Buffer.byteLength(session, 'utf8') <= LONG_KEY_BYTES ? [0, session] : [1, createHash('sha256').update(session, 'utf8').digest('hex')];
}

function sessionKeyText(session: string): string {
  const [space, id] = sessionKey(session);
  return `${space}:${id}`;
}

function rowKey(session: string, stepIndex: number): RowKey {
  const [space, id] = sessionKey(session);
  return [space, id, stepIndex];
}

/** The kernel's id of this boot: a store left unclean by another boot may have lost pages it thought written. */
function bootId(): string {
  try {
    return readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
  } catch {
    // Without it, any unclean close counts as a crash of the machine.
    return `unknown-${process.pid}-${Date.now()}`;
  }
}

/** Where each ledger keeps ledger_seq among its columns, looked up once per table. */
const SEQ_COLUMNS = new WeakMap<LedgerTable, number>();
function seqColumn(table: LedgerTable): number {
  let at = SEQ_COLUMNS.get(table);
  if (at === undefined) {
    at = table.columns.findIndex((c) => c.name === 'ledger_seq');
    SEQ_COLUMNS.set(table, at);
  }
  return at;
}

/**
 * lmdb-js fails a write with an error whose `commitError` is a second promise, rejected with the
 * cause (ENOSPC) and watched by nobody: unhandled, it would stop the process. Whoever catches the
 * write's error handles that one too.
 */
function handledCommitError(err: unknown): void {
  const commit = (err as { commitError?: unknown } | null)?.commitError;
  if (commit instanceof Promise) commit.catch(() => undefined);
}

/** lmdb-js's own failed commit, which the store has reported through the write that failed. */
function isLmdbCommitFailure(reason: unknown): boolean {
  return reason instanceof Error && ('commitError' in reason || reason.message.startsWith('No space left on device: Attempting to write page'));
}

let lmdbRejectionsWatched = false;

/**
 * A failed commit (a full disk) also rejects a promise lmdb-js keeps to itself, out of any caller's
 * reach: left unhandled it would stop the server, whose store only stops answering. Any other
 * unhandled rejection still stops the process, as it does without this listener.
 */
function watchLmdbRejections(): void {
  if (lmdbRejectionsWatched) return;
  lmdbRejectionsWatched = true;
  process.on('unhandledRejection', (reason) => {
    if (isLmdbCommitFailure(reason)) return;
    throw reason;
  });
}
