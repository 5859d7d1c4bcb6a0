import type { EngineConnection } from '../../../engine/port.js';
import type { Quarantine } from './quarantine.js';
import { qualifiedName, type LedgerTable } from '../../../ledger/chain/schema.js';

/** Chained rows of one ledger, in sequence order. */
export interface TableRows {
  readonly table: LedgerTable;
  readonly rows: ReadonlyArray<ReadonlyArray<string | null>>;
}

/** Rows taken into one engine transaction at most. */
const ROWS_PER_APPLY = 20_000;
/** After a failed apply, the next attempt waits this long. */
const RETRY_MS = 1_000;
/**
 * Rows wait this long for others to join them, unless a reader needs them
 * sooner: an engine transaction and an appender flush cost about the same
 * for one row as for hundreds (docs/benchmarks.md), and each one's WAL sync
 * and synchronous flush delay the journal writes that acknowledge appends.
 * One connection appending: 100 ms gave 2.0-2.5k appends/s against
 * 1.5-1.9k at 10 ms, and a lower p90; 300 ms no more.
 */
const GATHER_MS = 100;
/** ... or until this many are waiting. */
const GATHER_ROWS = 2_000;

/**
 * Brings journaled rows into DuckDB, in sequence order, many group commits
 * per engine transaction, on a connection of its own. Readers wait here
 * (`visible`) until DuckDB holds every row acknowledged before their
 * statement, so that no client reads around an append it was told of.
 */
export class LedgerApplier {
  private pending: Array<{ readonly tables: readonly TableRows[]; readonly lastSeq: bigint; readonly rows: number }> = [];
  private pendingRows = 0;
  private applied: bigint;
  private enqueued: bigint;
  private running = false;
  private failure: unknown = null;
  private retry: NodeJS.Timeout | null = null;
  private gather: NodeJS.Timeout | null = null;
  /** `lenient` waiters (readers) are let go on a full disk; the writer's are not. */
  private waiters: Array<{ readonly seq: bigint; readonly resolve: () => void; readonly reject: (err: unknown) => void; readonly lenient: boolean }> = [];

  constructor(
    private readonly conn: EngineConnection,
    appliedSeq: bigint,
    private readonly onError: (err: unknown) => void,
    private readonly damage: DamageTriage | null = null,
  ) {
    this.applied = appliedSeq;
    this.enqueued = appliedSeq;
  }

  /** The ledger_seq up to which DuckDB holds every journaled row. */
  get appliedSeq(): bigint {
    return this.applied;
  }

  /**
   * Why applying fails now when it is a full disk, else null. Appends are
   * then refused (53100) until space is freed and applying succeeds again,
   * and reads do not wait for rows that cannot arrive before that.
   */
  get diskFull(): Error | null {
    return this.failure !== null && isDiskFull(this.failure) ? (this.failure as Error) : null;
  }

  /** Rows waiting for DuckDB. */
  get backlog(): number {
    return this.pendingRows;
  }

  /**
   * A group commit went to DuckDB directly, after every journaled row (the
   * writer drained first): DuckDB holds every row up to `lastSeq`.
   */
  committedDirectly(lastSeq: bigint): void {
    if (this.pending.length > 0 || lastSeq <= this.applied) return;
    this.applied = lastSeq;
    this.enqueued = lastSeq;
    this.waiters = this.waiters.filter((w) => {
      if (w.seq > this.applied) return true;
      w.resolve();
      return false;
    });
  }

  /** Takes a group commit's rows, already durable in the journal. */
  enqueue(tables: readonly TableRows[], lastSeq: bigint): void {
    const rows = tables.reduce((n, t) => n + t.rows.length, 0);
    this.pending.push({ tables, lastSeq, rows });
    this.pendingRows += rows;
    this.enqueued = lastSeq;
    if (this.pendingRows >= GATHER_ROWS) this.start();
    else if (this.gather === null && !this.running && this.retry === null) {
      this.gather = setTimeout(() => this.start(), GATHER_MS);
      this.gather.unref();
    }
  }

  private start(): void {
    if (this.gather !== null) clearTimeout(this.gather);
    this.gather = null;
    if (!this.running && this.retry === null) void this.run();
  }

  /**
   * Null when DuckDB already holds every row up to `seq` (by default, every
   * row acknowledged so far); otherwise a promise that settles when it does,
   * or rejects while applying fails.
   */
  visible(seq: bigint = this.enqueued): Promise<void> | null {
    // With a full disk, reads go on with what the database holds: the journal keeps the rest.
    if (this.applied < seq && this.diskFull !== null) return null;
    return this.applying(seq, true);
  }

  /** Waits until DuckDB holds every enqueued row; rejects while applying fails, a full disk included. */
  async drain(): Promise<void> {
    await this.applying(this.enqueued, false);
  }

  private applying(seq: bigint, lenient: boolean): Promise<void> | null {
    if (this.applied >= seq) return null;
    if (this.failure !== null) return Promise.reject(this.failure);
    const wait = new Promise<void>((resolve, reject) => this.waiters.push({ seq, resolve, reject, lenient }));
    this.start();
    return wait;
  }

  /** Stops, and closes the connection; rows not yet applied stay in the journal for the next start. */
  close(): void {
    if (this.retry !== null) clearTimeout(this.retry);
    if (this.gather !== null) clearTimeout(this.gather);
    this.retry = null;
    this.gather = null;
    const err = new Error('the ledger writer is closed');
    for (const w of this.waiters.splice(0)) w.reject(err);
    this.conn.close();
  }

  private async run(): Promise<void> {
    this.running = true;
    try {
      while (this.pending.length > 0) {
        let take = 0;
        let rows = 0;
        while (take < this.pending.length && (take === 0 || rows + (this.pending[take]?.rows ?? 0) <= ROWS_PER_APPLY)) {
          rows += this.pending[take]?.rows ?? 0;
          take++;
        }
        const batch = this.pending.slice(0, take);
        try {
          await this.apply(batch.flatMap((b) => b.tables));
        } catch (err) {
          if (
            await this.setAsideDamaged(
              err,
              batch.flatMap((b) => b.tables.map((t) => t.table)),
            )
          )
            continue;
          this.failure = err;
          this.onError(err);
          for (const w of this.waiters.splice(0)) {
            if (w.lenient && isDiskFull(err)) w.resolve();
            else w.reject(err);
          }
          this.retry = setTimeout(() => {
            this.retry = null;
            void this.run();
          }, RETRY_MS);
          this.retry.unref();
          return;
        }
        this.failure = null;
        this.pending.splice(0, take);
        this.pendingRows -= rows;
        this.applied = (batch.at(-1) as { lastSeq: bigint }).lastSeq;
        this.waiters = this.waiters.filter((w) => {
          if (w.seq > this.applied) return true;
          w.resolve();
          return false;
        });
        // What arrived meanwhile gathers more rows first, unless a reader waits for it.
        if (this.pending.length > 0 && this.waiters.length === 0 && this.pendingRows < GATHER_ROWS) {
          this.gather = setTimeout(() => this.start(), GATHER_MS);
          this.gather.unref();
          return;
        }
      }
    } finally {
      this.running = false;
    }
  }

  /**
   * After a failed apply: when some of the batch's ledgers were dropped or
   * reshaped behind the server, their rows (in the whole backlog) cannot be
   * applied ever; they are kept in the quarantine and the others go on.
   */
  private async setAsideDamaged(err: unknown, tables: readonly LedgerTable[]): Promise<boolean> {
    if (this.damage === null) return false;
    const found = await this.damage.triage(err, tables).catch(() => null);
    if (found === null || found.names.size === 0) return false;
    const damaged = (t: TableRows): boolean => found.names.has(qualifiedName(t.table));
    const setAside = this.pending.flatMap((p) => p.tables.filter(damaged));
    try {
      this.damage.quarantine.keep(
        setAside.map((t) => ({ schema: t.table.schema, name: t.table.name, rows: t.rows })),
        found.reason,
      );
    } catch (keepErr) {
      // Not kept anywhere else: they stay in the journal and the backlog, and applying is retried.
      this.onError(keepErr);
      return false;
    }
    this.damage.onSetAside(setAside, found.reason);
    const removed = setAside.reduce((n, t) => n + t.rows.length, 0);
    this.pending = this.pending.map((p) => {
      const tables = p.tables.filter((t) => !damaged(t));
      return { tables, lastSeq: p.lastSeq, rows: tables.reduce((n, t) => n + t.rows.length, 0) };
    });
    this.pendingRows -= removed;
    return true;
  }

  /** One engine transaction: all of the batch's rows, or none. */
  private async apply(parts: readonly TableRows[]): Promise<void> {
    const byTable = new Map<string, { table: LedgerTable; rows: Array<ReadonlyArray<string | null>> }>();
    for (const { table, rows } of parts) {
      const name = qualifiedName(table);
      let entry = byTable.get(name);
      if (entry === undefined) {
        entry = { table, rows: [] };
        byTable.set(name, entry);
      }
      for (const row of rows) entry.rows.push(row);
    }
    await inTransaction(this.conn, async () => {
      for (const { table, rows } of byTable.values()) await appendRows(this.conn, table, rows);
    });
  }
}

/** Whether an error is the disk running out of space (DuckDB's message, or the operating system's code). */
export function isDiskFull(err: unknown): boolean {
  const e = err as { code?: string; message?: string } | null;
  return e?.code === 'ENOSPC' || e?.code === '53100' || /No space left on device|disk is full/i.test(String(e?.message ?? ''));
}

/** How the applier tells a ledger that can no longer take rows from a passing failure, and where their rows go. */
export interface DamageTriage {
  /** The qualified names of those of `tables` that were dropped or reshaped behind the server, and why; null if none. */
  triage(err: unknown, tables: readonly LedgerTable[]): Promise<{ readonly names: ReadonlySet<string>; readonly reason: string } | null>;
  readonly quarantine: Quarantine;
  onSetAside(parts: readonly TableRows[], reason: string): void;
}

/** Appends full ledger rows (every column's text, table order) through the engine's appender. */
export function appendRows(conn: EngineConnection, table: LedgerTable, rows: ReadonlyArray<ReadonlyArray<string | null>>): Promise<void> {
  return conn.append(
    table,
    table.columns.map((c) => ({ epochMicros: c.type.toUpperCase() === 'TIMESTAMP WITH TIME ZONE' })),
    rows,
  );
}

export async function inTransaction(conn: EngineConnection, work: () => Promise<void>): Promise<void> {
  await conn.run('BEGIN TRANSACTION');
  try {
    await work();
    await conn.run('COMMIT');
  } catch (err) {
    await conn.run('ROLLBACK').catch(() => undefined);
    throw err;
  }
}
