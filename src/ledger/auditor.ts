import type { EngineConnection } from '../engine/port.js';
import type { Observer } from '../observe/observer.js';
import type { LedgerCatalog } from './catalog.js';
import type { MerkleLog } from './merkle-log.js';
import { reconcile, type AuditFinding, type FindingKind, type KnownHead } from './reconcile.js';
import { verifyLedgers } from './verify.js';

/** One audit's outcome: what was read, and everything found wrong. */
export interface AuditReport {
  readonly startedAt: Date;
  readonly finishedAt: Date;
  /** Chains recomputed. */
  readonly chains: number;
  /** Rows held against the global log. */
  readonly rows: number;
  readonly leaves: number;
  readonly findings: readonly AuditFinding[];
}

/** What the audit needs to know of the writer and the log. */
export interface AuditSources {
  /** The global log, or null when the server keeps none. */
  readonly log: MerkleLog | null;
  /** The ledger_seq up to which the engine holds every acknowledged row. */
  appliedSeq(): number;
  /** Once the commit in flight (if any) has settled: the last ledger_seq acknowledged, and the log's size. */
  integratedSeq(): Promise<{ readonly acknowledged: number; readonly logged: number }>;
  /** Chain heads the writer holds in memory. */
  knownHeads(): Iterable<KnownHead>;
  /** Why the log stopped growing at start-up, or null. */
  logStopped(): string | null;
}

/**
 * Audits the ledgers in the background, at start-up and then every
 * interval: rows are held against the global log (ledger/reconcile.ts) and
 * every chain is recomputed, in one snapshot. So a deletion, a cut tail, a
 * re-chained edit or a row written behind the server is logged, counted
 * and listed by cot_audit() within one interval, without anyone asking.
 */
export class LedgerAuditor {
  private timer: NodeJS.Timeout | null = null;
  /** Audits run one after another: this settles when the last one asked for has ended. */
  private tail: Promise<unknown> = Promise.resolve();
  /** An audit asked for that has not started yet. */
  private queued: Promise<AuditReport> | null = null;
  private busy = false;
  private stopped = false;
  /** Chain heads as the last audit found them intact: where a tail cut since is recognised. */
  private heads: KnownHead[] = [];
  /** The last completed audit, or null before the first one ends. */
  latest: AuditReport | null = null;

  constructor(
    private readonly conn: EngineConnection,
    private readonly catalog: LedgerCatalog,
    private readonly sources: AuditSources,
    private readonly observer: Observer,
    private readonly onFinding: (finding: AuditFinding) => void,
    private readonly onError: (err: unknown) => void,
  ) {}

  /** Starts auditing; `intervalMs` 0 audits once, at start-up only. */
  start(intervalMs: number): void {
    const run = (): void => {
      if (this.stopped || this.busy || this.queued !== null) return;
      this.audit().catch(this.onError);
    };
    run();
    if (intervalMs > 0) {
      this.timer = setInterval(run, intervalMs);
      this.timer.unref();
    }
  }

  /** An audit that starts after this call: now, or once the one running ends (callers in between share it). */
  audit(): Promise<AuditReport> {
    if (this.queued !== null) return this.queued;
    const next = this.tail.then(() => {
      this.queued = null;
      return this.run();
    });
    this.queued = next;
    this.tail = next.catch(() => undefined);
    return next;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer !== null) clearInterval(this.timer);
    await this.tail;
  }

  private async run(): Promise<AuditReport> {
    this.busy = true;
    try {
      return await this.audited();
    } finally {
      this.busy = false;
    }
  }

  private async audited(): Promise<AuditReport> {
    const startedAt = new Date();
    // Read before the snapshot opens: every row up to it is in the snapshot.
    const applied = this.sources.appliedSeq();
    // A fresh look at the catalog: a ledger dropped or reshaped behind the server shows up here.
    this.catalog.invalidate();
    const ledgers = await this.catalog.all();
    const findings: AuditFinding[] = (await this.catalog.damaged()).map((d) => ({
      kind: d.kind,
      ledger: `${d.schema}.${d.name}`,
      chainKey: null,
      firstSeq: null,
      lastSeq: null,
      rows: 0,
      detail: `${d.reason}; appends to it are refused`,
    }));
    const stopped = this.sources.logStopped();
    if (stopped !== null) {
      findings.push({ kind: 'log_stopped', ledger: null, chainKey: null, firstSeq: null, lastSeq: null, rows: 0, detail: stopped });
    }
    let rows = 0;
    let leaves = 0;
    let chains = 0;
    await this.conn.run('BEGIN TRANSACTION READ ONLY');
    try {
      const { log } = this.sources;
      if (log !== null) {
        const r = await reconcile(this.conn, ledgers, log, {
          applied,
          integrated: () => this.sources.integratedSeq(),
          heads: [...this.heads, ...this.sources.knownHeads()],
        });
        findings.push(...r.findings);
        rows = r.rows;
        leaves = r.leaves;
        this.heads = r.heads;
      }
      const verdicts = await verifyLedgers(this.conn, this.catalog, null);
      chains = verdicts.length;
      for (const v of verdicts) {
        if (v.valid) continue;
        findings.push({
          kind: (v.breakKind ?? 'edited') as FindingKind,
          ledger: v.table,
          chainKey: v.chainKey,
          firstSeq: null,
          lastSeq: null,
          rows: 1,
          detail: `the chain breaks at step ${String(v.firstBrokenIndex)} (${String(v.breakKind)}): expected ${String(v.expectedHash)}, found ${String(v.actualHash)}`,
        });
      }
    } finally {
      await this.conn.run('ROLLBACK').catch(() => undefined);
    }
    for (const f of findings) this.onFinding(f);
    this.observer.audited(chains, findings);
    const report: AuditReport = { startedAt, finishedAt: new Date(), chains, rows, leaves, findings };
    this.latest = report;
    return report;
  }
}
