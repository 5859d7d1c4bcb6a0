import { randomUUID } from 'node:crypto';
import { PgError } from '../../errors/pg-error.js';
import { SqlState } from '../../errors/sqlstate.js';
import type { LedgerAppender } from '../chain/append.js';
import type { LedgerCatalog } from '../chain/catalog.js';
import { quoteIdent, quoteLiteral, type LedgerTable } from '../chain/schema.js';
import { encodeSeqs, retainable, RETENTION_TABLE } from './retention-sql.js';
import type { ErasureStore } from './store.js';
import type { RetainedResult as RetainedSession } from '../../engine/erasure-call.js';
import { OneAtATime } from './one-at-a-time.js';

/** One session that retention removes (or, in a dry run, would remove), as cot_retain() answers it. */
export type { RetainedResult as RetainedSession } from '../../engine/erasure-call.js';

export interface RetentionRun {
  /** Sessions whose last step is older than this are removed. */
  readonly cutoff: Date;
  readonly dryRun: boolean;
  readonly reason: string;
  /** Who or what runs it: the job, a CLI user, an admin over SQL. */
  readonly actor: string;
}

export interface RetentionHooks {
  changed(table: LedgerTable, chainKey: string): void;
  erased(): void | Promise<void>;
  /** Said before rows are removed (see RedactorHooks.erasing). */
  erasing?(): void | Promise<void>;
}

/**
 * Refuses a period shorter than ledger.retentionFloorDays, however it was
 * asked for: the configured one (which the configuration already holds to
 * the floor, unless a caller built its own), `cotwire retain --days`, or a
 * caller's. A dry run too, so that nobody is shown a plan the floor forbids.
 * 22023, as PostgreSQL refuses a setting's value outside its range.
 */
export function checkRetentionFloor(days: number, floorDays: number): void {
  if (floorDays > 0 && days < floorDays) {
    throw new PgError(SqlState.InvalidParameterValue, `a retention period of ${days} days is shorter than ledger.retentionFloorDays (${floorDays})`, {
      detail: "Articles 19(1) and 26(6) of the EU AI Act keep a high-risk AI system's logs at least six months.",
      hint: `Keep sessions ${floorDays} days or more, or set ledger.retentionFloorDays: 0 if the system is not a high-risk AI system under the Act.`,
    });
  }
}

/** Sessions per batch: one append of their records, then one DELETE. */
const BATCH = 1000;

interface Candidate {
  readonly key: string;
  readonly count: number;
  readonly firstIndex: number;
  readonly lastIndex: number;
  readonly firstSeq: bigint;
  readonly lastSeq: bigint;
  readonly lastAtMicros: bigint;
  readonly finalHash: string;
  readonly seqs: bigint[];
}

/**
 * Removes whole sessions older than the cutoff, ledger by ledger. The
 * records are appended (chained, in the global log, and durable in the
 * engine) before the rows go, so a crash in between leaves sessions that
 * are both recorded and present, which verify as they are; the next run
 * removes them under the records already written.
 */
export class Retention {
  private readonly runs = new OneAtATime();

  /** Resolves once the runs asked for so far have ended. */
  idle(): Promise<void> {
    return this.runs.idle();
  }

  constructor(
    private readonly store: ErasureStore,
    private readonly catalog: LedgerCatalog,
    private readonly writer: LedgerAppender,
    private readonly hooks: RetentionHooks,
  ) {}

  run(run: RetentionRun): Promise<RetainedSession[]> {
    return this.runs.run(() => this.runOnce(run));
  }

  private async runOnce(run: RetentionRun): Promise<RetainedSession[]> {
    const records = await this.catalog.find(['main', RETENTION_TABLE]);
    if (records === null) throw new Error(`the database has no ${RETENTION_TABLE} ledger to record retention in`);
    await this.writer.visible();
    const out: RetainedSession[] = [];
    for (const table of (await this.catalog.all()).filter((t) => retainable(t) && t.catalog === records.catalog)) {
      const candidates = await this.candidates(table, run.cutoff);
      for (let i = 0; i < candidates.length; i += BATCH) {
        const batch = candidates.slice(i, i + BATCH);
        out.push(...(run.dryRun ? batch.map((c) => session(table, c, null)) : await this.remove(table, records, batch, run)));
      }
    }
    if (!run.dryRun && out.length > 0) await this.hooks.erased();
    return out;
  }

  /** Sessions whose last step is older than the cutoff, with what their records say. */
  private async candidates(table: LedgerTable, cutoff: Date): Promise<Candidate[]> {
    const rows = (await this.store.conn.query(this.store.sessionsSql(table), [cutoff.toISOString()])) as Array<
      [string | null, bigint, number, number, bigint, bigint, bigint, string, string]
    >;
    return rows
      .filter((r) => r[0] !== null)
      .map(([k, count, firstIndex, lastIndex, firstSeq, lastSeq, lastAt, finalHash, seqs]) => ({
        key: k as string,
        count: Number(count),
        firstIndex: Number(firstIndex),
        lastIndex: Number(lastIndex),
        firstSeq: BigInt(firstSeq),
        lastSeq: BigInt(lastSeq),
        lastAtMicros: BigInt(lastAt),
        finalHash,
        seqs: seqs.split(',').map((s) => BigInt(s)),
      }));
  }

  private async remove(table: LedgerTable, records: LedgerTable, batch: readonly Candidate[], run: RetentionRun): Promise<RetainedSession[]> {
    const ledger = `${table.schema}.${table.name}`;
    const ids = batch.map(() => randomUUID());
    await this.writer.append([
      {
        table: records,
        rows: batch.map((c, i) => [
          ids[i] as string,
          ledger,
          c.key,
          String(c.count),
          String(c.firstIndex),
          String(c.lastIndex),
          String(c.firstSeq),
          String(c.lastSeq),
          encodeSeqs(c.seqs),
          String(c.lastAtMicros),
          c.finalHash,
          run.reason,
          run.actor,
        ]),
      },
    ]);
    await this.writer.visible();
    // Only the recorded rows go: a step appended to one of these sessions since has a higher ledger_seq.
    const bounds = batch.map((c) => `(${quoteLiteral(c.key)}, ${String(c.lastSeq)})`).join(', ');
    const target = this.store.relation(table);
    const key = quoteIdent(table.chainKey as string);
    const matched = `EXISTS (SELECT 1 FROM (VALUES ${bounds}) AS cot_r(k, s) WHERE cot_r.k = CAST(${target}.${key} AS VARCHAR) AND ${target}.ledger_seq <= cot_r.s)`;
    const vectors = table.isSteps ? await this.store.vectors() : null;
    await this.hooks.erasing?.();
    await this.store.change(
      [table],
      [
        ...(vectors === null ? [] : [{ sql: `DELETE FROM ${vectors} WHERE trace_id IN (SELECT trace_id FROM ${target} WHERE ${matched})` }]),
        { sql: `DELETE FROM ${target} WHERE ${matched}` },
      ],
    );
    for (const c of batch) this.hooks.changed(table, c.key);
    return batch.map((c, i) => session(table, c, ids[i] as string));
  }
}

function session(table: LedgerTable, c: Candidate, retentionId: string | null): RetainedSession {
  return {
    ledger: `${table.schema}.${table.name}`,
    chainKey: c.key,
    stepCount: c.count,
    firstSeq: String(c.firstSeq),
    lastSeq: String(c.lastSeq),
    lastStepAt: new Date(Number(c.lastAtMicros / 1000n)),
    finalHash: c.finalHash,
    retentionId,
  };
}

/** ledger.retentionDays at work: a run shortly after the start, then one an hour. */
export class RetentionJob {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<unknown> = Promise.resolve();
  private stopped = false;

  constructor(
    private readonly runOnce: () => Promise<unknown>,
    private readonly onError: (err: unknown) => void,
    private readonly intervalMs = 3_600_000,
    private readonly firstAfterMs = 10_000,
  ) {}

  start(): void {
    this.schedule(this.firstAfterMs);
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.running = this.runOnce()
        .catch(this.onError)
        .finally(() => this.schedule(this.intervalMs));
    }, ms);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer !== null) clearTimeout(this.timer);
    await this.running;
  }
}
