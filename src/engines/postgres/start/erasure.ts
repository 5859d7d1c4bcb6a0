import type { Config } from '../../../config/schema.js';
import type { ErasureService } from '../../../engine/erasure-call.js';
import { PgError } from '../../../errors/pg-error.js';
import { SqlState } from '../../../errors/sqlstate.js';
import type { LedgerCatalog } from '../../../ledger/chain/catalog.js';
import { Redactor } from '../../../ledger/erasure/redactor.js';
import { checkRetentionFloor, Retention, RetentionJob, type RetainedSession } from '../../../ledger/erasure/retention.js';
import type { Logger } from '../../../log/logger.js';
import type { DisposeStack } from '../../../server/dispose-stack.js';
import { PostgresConnection } from '../adapter/connection.js';
import type { EngineHealth } from '../adapter/health.js';
import { postgresErasureStore } from '../ledger/erasure-store.js';
import type { PgRoles } from '../ledger/names.js';
import type { PgLedgerWriter } from '../ledger/writer.js';

/** Redaction and retention, as the server carries them out. */
export interface PgErasure {
  /** What cot_redact() and cot_retain() call. */
  readonly service: ErasureService;
  /** Removes (or, dry, lists) the sessions whose last step is older than `days`. */
  retain(days: number, dryRun: boolean, actor: string): Promise<RetainedSession[]>;
}

/**
 * Redaction and retention on a PostgreSQL engine: the same redactor and
 * retention as on DuckDB (ledger/erasure/), each on a connection of its own
 * as the engine URL's role, which takes the owner role for its changes. A
 * redaction a stop interrupted after its record was written is finished
 * first; with ledger.retentionDays set, retention runs shortly after the
 * start and then hourly. Several instances may run it at once: a session
 * one removed is no longer a candidate for the next.
 */
export async function openErasure(
  config: Config,
  log: Logger,
  url: string,
  roles: PgRoles,
  ledgers: LedgerCatalog,
  writer: PgLedgerWriter,
  health: EngineHealth,
  stack: DisposeStack,
): Promise<PgErasure> {
  const open = async (name: string): Promise<PostgresConnection> => stack.use(await PostgresConnection.open(url, name, { health }), (c) => c.close());
  // Verification joins the records of erasure once there are some.
  const hooks = { changed: () => undefined, erased: () => ledgers.invalidate() };
  const redactor = new Redactor(postgresErasureStore(await open('cotwire erasure'), roles), ledgers, writer, hooks);
  const retention = new Retention(postgresErasureStore(await open('cotwire retention'), roles), ledgers, writer, hooks);
  stack.defer(async () => {
    await Promise.all([retention.idle(), redactor.idle()]);
  });
  const finished = await redactor.complete();
  if (finished > 0) log.warn({ redactions: finished }, `finished ${finished} redactions a stop had interrupted after their record was written`);
  const configured = config.ledger.retentionDays;
  const retain = async (days: number, dryRun: boolean, actor: string, reason: string): Promise<RetainedSession[]> => {
    checkRetentionFloor(days, config.ledger.retentionFloorDays);
    const removed = await retention.run({ cutoff: new Date(Date.now() - days * 86_400_000), dryRun, actor, reason });
    if (!dryRun && removed.length > 0)
      log.info(
        { sessions: removed.length, steps: removed.reduce((n, r) => n + r.stepCount, 0), actor },
        `retention removed ${removed.length} sessions older than ${days} days; each is recorded in _cot_retention`,
      );
    return removed;
  };
  if (configured > 0) {
    const job = new RetentionJob(
      () => retain(configured, false, 'the retention job', `ledger.retentionDays = ${configured}`),
      (err) => log.error({ err }, 'the retention job failed; it runs again within the hour'),
    );
    job.start();
    stack.defer(() => job.stop());
  }
  const service: ErasureService = {
    redact: (request) => redactor.redact(request),
    retain: (dryRun, actor) =>
      configured === 0
        ? Promise.reject(
            new PgError(SqlState.ObjectNotInPrerequisiteState, 'ledger.retentionDays is 0: sessions are kept forever, and there is nothing to retain', {
              hint: 'Set ledger.retentionDays in the configuration of every instance.',
            }),
          )
        : retain(configured, dryRun, actor, `ledger.retentionDays = ${configured}, run by ${actor}`),
  };
  return { service, retain: (days, dryRun, actor) => retain(days, dryRun, actor, `older than ${days} days, run by ${actor}`) };
}
