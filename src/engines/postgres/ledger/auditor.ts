import type { SqlConnection } from '../../../engine/port.js';
import type { LedgerCatalog } from '../../../ledger/chain/catalog.js';
import { qualifiedName } from '../../../ledger/chain/schema.js';
import type { Observer } from '../../../observe/observer.js';
import { chainVerifier } from '../dialect/verify.js';
import { PG_SCHEMA } from './names.js';
import { type AuditFinding, chainBreakFinding, gapFinding } from '../../../ledger/log/audit-finding.js';
import { recordedLosses } from '../../../ledger/log/log-events.js';

/**
 * The background audit on a PostgreSQL engine, shared by every instance:
 * at start-up and then every interval, whichever instance claims the round
 * first (a row of cotwire.audit_state, claimed for one interval) recomputes
 * every chain with the README's SQL and holds the ledgers' rows against the
 * global log's size, and writes what it found to cotwire.audit, which
 * cot_audit() lists. Findings are logged once per audit, and the metrics
 * say when an audit last completed. Between rounds each instance watches
 * (watch()): a count that disagrees with cot_audit() runs an audit at once.
 */
export class PgAuditor {
  private timer: NodeJS.Timeout | null = null;
  private watchTimer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private stopped = false;

  constructor(
    private readonly conn: SqlConnection,
    private readonly catalog: LedgerCatalog,
    private readonly observer: Observer,
    private readonly instance: string,
    private readonly intervalMs: number,
    private readonly onFinding: (finding: AuditFinding) => void,
    private readonly onError: (err: unknown) => void,
    /** How often the watch counts the rows against the log (0: no watch). */
    private readonly watchMs = 0,
  ) {}

  start(): void {
    const round = (): void => this.exclusive(() => this.audit(false));
    round();
    // A round a stopped instance claimed is taken over once its claim lapses: asked again well within the interval.
    this.timer = setInterval(round, Math.max(1000, Math.min(this.intervalMs, 60_000)));
    this.timer.unref();
    if (this.watchMs > 0) {
      const look = (): void => this.exclusive(() => this.watch());
      // At the start too: rows deleted while every instance was stopped are found within seconds, not at the next round.
      setImmediate(look);
      this.watchTimer = setInterval(look, this.watchMs);
      this.watchTimer.unref();
    }
  }

  /** Runs an audit or a look unless one is running: one at a time on the auditor's connection. */
  private exclusive(task: () => Promise<unknown>): void {
    if (this.stopped || this.running !== null) return;
    this.running = task()
      .then(
        () => undefined,
        (err: unknown) => {
          if (!this.stopped) this.onError(err);
        },
      )
      .finally(() => {
        this.running = null;
      });
  }

  /**
   * Between rounds: the ledgers' rows counted against the global log's size
   * (the first half of an audit, one count per ledger). When that says other
   * than what cot_audit() lists (rows deleted or added behind the servers
   * since), a full audit runs now, whichever instance had the round. A
   * change that keeps the count (an edit) waits for the round.
   */
  async watch(): Promise<AuditFinding[] | null> {
    const now = await this.logFindings();
    const listed = (await this.conn.query(
      `SELECT kind, row_count FROM ${PG_SCHEMA}.audit WHERE kind IN ('missing', 'unlogged') AND ledger IS NULL ORDER BY kind`,
    )) as Array<[string, bigint | string]>;
    const said = listed.map(([k, n]) => `${k}:${Number(n)}`).join(',');
    const seen = now.map((f) => `${f.kind}:${f.rows}`).join(',');
    if (said === seen) return null;
    return this.audit(true);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer !== null) clearInterval(this.timer);
    if (this.watchTimer !== null) clearInterval(this.watchTimer);
    await this.running;
  }

  /** Audits now if the round is this instance's (or `force`); answers the findings, or null when another instance has the round. */
  async audit(force: boolean): Promise<AuditFinding[] | null> {
    if (!force && !(await this.claim())) return null;
    const findings: AuditFinding[] = [];
    const verdicts = await chainVerifier(this.conn, this.catalog).verify(null);
    for (const v of verdicts) if (!v.valid) findings.push(chainBreakFinding(v));
    findings.push(...(await this.logFindings()));
    for (const loss of await recordedLosses(this.conn, await this.catalog.all())) findings.push(gapFinding(loss));
    await this.conn.run('BEGIN');
    try {
      await this.conn.query(`DELETE FROM ${PG_SCHEMA}.audit`);
      for (const f of findings) {
        await this.conn.query(
          `INSERT INTO ${PG_SCHEMA}.audit (kind, ledger, chain_key, first_seq, last_seq, row_count, detail, audited_at) VALUES ($1, $2, $3, $4::int8, $5::int8, $6::int8, $7, pg_catalog.now())`,
          [
            f.kind,
            f.ledger,
            f.chainKey,
            f.firstSeq === null ? null : String(f.firstSeq),
            f.lastSeq === null ? null : String(f.lastSeq),
            String(f.rows),
            f.detail,
          ],
        );
      }
      await this.conn.query(`UPDATE ${PG_SCHEMA}.audit_state SET completed_at = pg_catalog.now(), completed_by = $1`, [this.instance]);
      await this.conn.run('COMMIT');
    } catch (err) {
      await this.conn.run('ROLLBACK').catch(() => undefined);
      throw err;
    }
    // A recorded gap was said when it was recorded; it is listed at every audit, not logged as a failure.
    for (const f of findings) if (f.kind !== 'gap') this.onFinding(f);
    this.observer.audited(verdicts.length, findings);
    return findings;
  }

  /** The round is this instance's when no round was claimed within the interval. */
  private async claim(): Promise<boolean> {
    const rows = await this.conn.query(
      `UPDATE ${PG_SCHEMA}.audit_state SET claimed_by = $1, claimed_at = pg_catalog.clock_timestamp()
       WHERE claimed_at < pg_catalog.clock_timestamp() - $2::interval RETURNING 1`,
      [this.instance, `${this.intervalMs} milliseconds`],
    );
    return rows.length > 0;
  }

  /**
   * The rows of every ledger, and those retention removed (as its records
   * account for them), against the global log's size: every leaf has its
   * row, and no row is outside the log.
   */
  private async logFindings(): Promise<AuditFinding[]> {
    const tables = await this.catalog.all();
    if (tables.length === 0) return [];
    const counts = tables.map((t) => `SELECT count(*) AS n, max(ledger_seq) AS top FROM ${qualifiedName(t)}`).join(' UNION ALL ');
    const retention = tables.find((t) => t.name === '_cot_retention');
    const lost = (await recordedLosses(this.conn, tables)).reduce((n, l) => n + l.rows, 0);
    const retained = `${retention === undefined ? '0' : `(SELECT coalesce(sum(step_count), 0) FROM ${qualifiedName(retention)})`} + ${lost}`;
    const [[rows, top, removed, size]] = (await this.conn.query(
      `SELECT coalesce(sum(n), 0)::int8, coalesce(max(top), 0)::int8, ${retained}::int8, (SELECT size FROM ${PG_SCHEMA}.log_head) FROM (${counts}) AS c`,
    )) as [[bigint, bigint, bigint, bigint]];
    const held = Number(rows) + Number(removed);
    const logged = Number(size);
    if (held < logged)
      return [
        {
          kind: 'missing',
          ledger: null,
          chainKey: null,
          firstSeq: null,
          lastSeq: null,
          rows: logged - held,
          detail: `the global log has ${logged} leaves, and the ledgers hold ${rows} rows (${removed} more removed by retention or recorded as lost): ${logged - held} rows are gone`,
        },
      ];
    if (held > logged || Number(top) > logged)
      return [
        {
          kind: 'unlogged',
          ledger: null,
          chainKey: null,
          firstSeq: logged + 1,
          lastSeq: Number(top),
          rows: Math.max(held - logged, 1),
          detail: `the ledgers hold rows the global log does not (${held} rows and retained steps, ${logged} leaves, the highest ledger_seq ${top})`,
        },
      ];
    return [];
  }
}
