import type { EngineConnection } from '../../../engine/port.js';
import type { Observer } from '../../../observe/observer.js';
import type { LedgerCatalog } from '../../../ledger/chain/catalog.js';
import type { MerkleLog } from '../../../ledger/log/merkle-log.js';
import { chainBreakFinding, gapFinding, missingRunFinding } from '../../../ledger/log/audit-finding.js';
import { accountedSeqs, recordedLosses } from '../../../ledger/log/log-events.js';
import { seqRuns } from '../../../ledger/erasure/retention-sql.js';
import { absentSeqs } from './log-resume.js';
import { reconcile, type AuditFinding, type KnownHead } from './reconcile.js';
import { chainVerifier, type Pacing } from '../dialect/verify.js';
import { addFingerprints, NO_ROWS, observeFingerprint, sameFingerprint, type Fingerprint } from '../ledger/fingerprint.js';
import { qualifiedName } from '../../../ledger/chain/schema.js';

/**
 * The audit works in slices (a row group of leaves, or the chains of about
 * 200,000 rows) and rests three times as long as each slice took: it takes
 * four times as long, and leaves the writer and the clients most of the
 * machine (docs/benchmarks.md has what it still costs appends).
 */
const AUDIT_ROWS_PER_SLICE = 200_000;

/** Missing ledger_seq the start's first look lists one by one; past them, the full audit tells the rest. */
const MAX_GAP_SEQS = 1_000_000;

/** Ends an audit that stop() cut short; nothing is reported for it. */
class AuditStopped extends Error {}

/** One audit's outcome: what was read, and everything found wrong. */
export interface AuditReport {
  readonly startedAt: Date;
  readonly finishedAt: Date;
  /** Chains recomputed. */
  readonly chains: number;
  /** Rows held against the global log. */
  readonly rows: number;
  readonly leaves: number;
  /** Leaves of the log whose rows retention removed: accounted for by records, not missing. */
  readonly retained: number;
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
  /** The watch's side of the writer (engines/duckdb/ledger/fingerprint.ts): what it appended, summed per ledger. */
  readonly fingerprints?: {
    track(): void;
    between(from: number, to: number): ReadonlyMap<string, Fingerprint> | null;
    forget(seq: number): void;
  };
}

/** What the last full audit saw, summed per ledger: the watch compares against it and what was appended since. */
interface Baseline {
  readonly seq: number;
  readonly byTable: ReadonlyMap<string, Fingerprint>;
}

/**
 * Audits the ledgers in the background, at start-up and then every
 * interval: rows are held against the global log (engines/duckdb/log/reconcile.ts) and
 * every chain is recomputed, in one snapshot. So a deletion, a cut tail, a
 * re-chained edit or a row written behind the server is logged, counted
 * and listed by cot_audit() within one interval, without anyone asking.
 */
export class LedgerAuditor {
  private timer: NodeJS.Timeout | null = null;
  private watchTimer: NodeJS.Timeout | null = null;
  /** What the last full audit saw; null before it, and once the watch saw a change. */
  private baseline: Baseline | null = null;
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
  /** Between slices an audit rests; once stopped it ends there instead of reading on. */
  private readonly pacing: Pacing = {
    rowsPerSlice: AUDIT_ROWS_PER_SLICE,
    pause: async (busyMs) => {
      if (!this.stopped) await new Promise((resolve) => setTimeout(resolve, Math.max(1, 3 * busyMs)));
      if (this.stopped) throw new AuditStopped('the audit was stopped');
    },
  };

  constructor(
    private readonly conn: EngineConnection,
    private readonly catalog: LedgerCatalog,
    private readonly sources: AuditSources,
    private readonly observer: Observer,
    private readonly onFinding: (finding: AuditFinding) => void,
    private readonly onError: (err: unknown) => void,
    /** The watch saw these ledgers change; a full audit follows. */
    private readonly onChange: (ledgers: readonly string[]) => void = () => undefined,
  ) {}

  /**
   * Starts auditing: a full audit at once and every `intervalMs` (0: at
   * start-up only), and between them the watch every `watchMs` (0: none),
   * which starts a full audit as soon as a ledger's fingerprint is not what
   * the last audit saw plus what the writer appended since.
   */
  start(intervalMs: number, watchMs = 0): void {
    const run = (): void => {
      if (this.stopped || this.busy || this.queued !== null) return;
      this.audit().catch((err: unknown) => {
        if (!this.stopped) this.onError(err);
      });
    };
    // A full audit of a large ledger takes a while, paced as it is: rows gone while the server was
    // stopped are looked for first, in one pass over the sequence, and reported at once.
    this.tail = this.tail
      .then(() => this.gapsFirst())
      .catch((err: unknown) => {
        if (!this.stopped) this.onError(err);
      });
    run();
    if (intervalMs > 0) {
      this.timer = setInterval(run, intervalMs);
      this.timer.unref();
    }
    const { fingerprints } = this.sources;
    if (watchMs > 0 && fingerprints !== undefined) {
      fingerprints.track();
      this.watchTimer = setInterval(() => {
        if (this.stopped || this.busy || this.queued !== null || this.baseline === null) return;
        const next = this.tail.then(() => this.watch());
        this.tail = next.catch((err: unknown) => {
          if (!this.stopped) this.onError(err);
        });
      }, watchMs);
      this.watchTimer.unref();
    }
  }

  /**
   * The start's first look: every ledger_seq up to the applied one either has its row or is
   * accounted for by a record; the runs that have neither are reported now (cot_audit(), the
   * log, the metrics) as missing, without their chains, which the full audit after it names.
   */
  private async gapsFirst(): Promise<void> {
    const log = this.sources.log;
    if (log === null || this.stopped) return;
    const upTo = Math.min(log.size, this.sources.appliedSeq());
    const ledgers = await this.catalog.all();
    if (upTo === 0 || ledgers.length === 0) return;
    const startedAt = new Date();
    const counts = (await this.conn.query(
      ledgers.map((t) => `SELECT count(*) FROM ${qualifiedName(t)} WHERE ledger_seq BETWEEN 1 AND ${upTo}`).join(' UNION ALL '),
    )) as Array<[bigint | number]>;
    const accounted = await accountedSeqs(this.conn, ledgers);
    const present = counts.reduce((n, [c]) => n + Number(c), 0);
    if (present + accounted.size >= upTo) return;
    const ranges = seqRuns(await absentSeqs(this.conn, ledgers, 0, upTo + 1, MAX_GAP_SEQS), accounted);
    if (ranges.length === 0 || this.latest !== null) return;
    const findings = ranges.map(([first, last]) =>
      missingRunFinding(
        first,
        last,
        `acknowledged rows ledger_seq ${first}..${last} are gone from the database (found at start-up; the full audit that follows names their ledgers and chains)`,
      ),
    );
    for (const f of findings) this.onFinding(f);
    this.observer.audited(0, findings);
    this.latest = { startedAt, finishedAt: new Date(), chains: 0, rows: present, leaves: upTo, retained: accounted.size, findings };
  }

  /**
   * One look at every ledger's fingerprint up to the applied sequence. A
   * difference starts a full audit, which says what changed; none moves the
   * baseline forward.
   */
  private async watch(): Promise<void> {
    const baseline = this.baseline;
    const fingerprints = this.sources.fingerprints;
    if (baseline === null || fingerprints === undefined) return;
    const applied = this.sources.appliedSeq();
    const appended = fingerprints.between(baseline.seq, applied);
    if (appended === null) return;
    const expected = new Map<string, Fingerprint>();
    const changed: string[] = [];
    for (const table of await this.catalog.all()) {
      const name = qualifiedName(table);
      const want = addFingerprints(baseline.byTable.get(name) ?? NO_ROWS, appended.get(name) ?? NO_ROWS);
      expected.set(name, want);
      const seen = await observeFingerprint(this.conn, table, applied);
      // Read after the query: every row the writer could have put there by then is numbered up to it.
      const { acknowledged } = await this.sources.integratedSeq();
      if (!sameFingerprint(seen.fingerprint, want) || seen.unnumbered > 0 || seen.maxSeq > acknowledged) changed.push(`${table.schema}.${table.name}`);
    }
    if (changed.length > 0) {
      this.baseline = null;
      this.onChange(changed);
      this.audit().catch(this.onError);
      return;
    }
    this.baseline = { seq: applied, byTable: expected };
    fingerprints.forget(applied);
  }

  /**
   * The server itself is about to remove rows (retention): the watch stops
   * comparing until the next full audit takes a new baseline, so that the
   * removal is not reported as a change behind the writer.
   */
  expectRemoval(): void {
    this.baseline = null;
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
    if (this.watchTimer !== null) clearInterval(this.watchTimer);
    // A full audit of a large ledger reads for minutes: shutting down does not wait for it.
    if (this.busy) this.conn.interrupt();
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
    let retained = 0;
    let chains = 0;
    let baseline: Baseline | null = null;
    await this.conn.run('BEGIN TRANSACTION READ ONLY');
    try {
      const { log } = this.sources;
      if (log !== null) {
        const r = await reconcile(this.conn, ledgers, log, {
          applied,
          integrated: () => this.sources.integratedSeq(),
          heads: [...this.heads, ...this.sources.knownHeads()],
          pause: this.pacing.pause,
        });
        findings.push(...r.findings);
        for (const loss of await recordedLosses(this.conn, ledgers)) findings.push(gapFinding(loss));
        rows = r.rows;
        leaves = r.leaves;
        retained = r.retained;
        this.heads = r.heads;
      }
      // The watch's baseline is this snapshot, damage and all: it looks for what changes next.
      const byTable = new Map<string, Fingerprint>();
      for (const table of ledgers) byTable.set(qualifiedName(table), (await observeFingerprint(this.conn, table, applied)).fingerprint);
      baseline = { seq: applied, byTable };
      // The ledgers read before the snapshot: one created since is not in it (the next audit has it).
      const verdicts = await chainVerifier(this.conn, { all: async () => ledgers }, this.pacing).verify(null);
      chains = verdicts.length;
      for (const v of verdicts) if (!v.valid) findings.push(chainBreakFinding(v));
    } finally {
      await this.conn.run('ROLLBACK').catch(() => undefined);
    }
    this.baseline = baseline;
    this.sources.fingerprints?.forget(applied);
    // A recorded gap was said when it was recorded; it is listed at every audit, not logged as a failure.
    for (const f of findings) if (f.kind !== 'gap') this.onFinding(f);
    this.observer.audited(chains, findings);
    const report: AuditReport = { startedAt, finishedAt: new Date(), chains, rows, leaves, retained, findings };
    this.latest = report;
    return report;
  }
}
