import type { Config } from '../../../config/schema.js';
import type { Engine } from '../../../engine/port.js';
import { PgError } from '../../../errors/pg-error.js';
import { SqlState } from '../../../errors/sqlstate.js';
import type { LedgerCatalog } from '../../../ledger/chain/catalog.js';
import type { LedgerTable } from '../../../ledger/chain/schema.js';
import type { Logger } from '../../../log/logger.js';
import type { DisposeStack } from '../../../server/dispose-stack.js';
import { Redactor } from '../../../ledger/erasure/redactor.js';
import { checkRetentionFloor, Retention, RetentionJob, type RetainedSession } from '../../../ledger/erasure/retention.js';
import type { ConnectionServices } from '../handler/context.js';
import type { SessionCache } from '../handler/session-cache.js';
import type { StepStore } from '../steps-store/store.js';
import type { LedgerWriter } from '../ledger/writer.js';
import type { LedgerAuditor } from '../log/auditor.js';
import { markErased } from './file.js';
import { duckdbErasureStore } from '../erasure/store.js';

type ErasureService = ConnectionServices['erasure'];

/** Redaction and retention, as the server carries them out. */
export interface Erasure {
  /** What cot_redact() and cot_retain() call. */
  readonly service: ErasureService;
  /** Removes (or, dry, lists) the sessions whose last step is older than `days`, recorded with `reason`. */
  retain(days: number, dryRun: boolean, actor: string, reason: string): Promise<RetainedSession[]>;
}

/**
 * The redactor and retention, each on a connection of its own, since each
 * runs its own transactions one at a time; a redaction a stop interrupted
 * after its record was written is finished first. At the stop both finish
 * what they are doing before their connections close.
 */
export async function openErasure(
  config: Config,
  log: Logger,
  engine: Engine,
  ledgers: LedgerCatalog,
  writer: LedgerWriter,
  auditor: LedgerAuditor,
  copies: { readonly sessionCache: SessionCache | null; readonly stepStore: StepStore | null },
  stack: DisposeStack,
): Promise<Erasure> {
  const erasureConn = stack.use(await engine.connect(), (c) => c.close());
  const retentionConn = stack.use(await engine.connect(), (c) => c.close());
  const hooks = {
    changed: (table: LedgerTable, key: string) => {
      if (!table.isSteps) return;
      copies.sessionCache?.invalidate(key);
      copies.stepStore?.forget(key);
    },
    // Marked first: killed between the engine's change and `erased`, the next start still rewrites the file.
    erasing: () => markErased(config.database.path),
    erased: async () => {
      await writer.scrubJournal();
      markErased(config.database.path);
      // Verification joins the records of erasure once there are some.
      ledgers.invalidate();
    },
  };
  const redactor = new Redactor(duckdbErasureStore(erasureConn), ledgers, writer, hooks);
  const retention = new Retention(duckdbErasureStore(retentionConn), ledgers, writer, hooks);
  stack.defer(async () => {
    await Promise.all([retention.idle(), redactor.idle()]);
  });
  const retain = async (days: number, dryRun: boolean, actor: string, reason: string): Promise<RetainedSession[]> => {
    checkRetentionFloor(days, config.ledger.retentionFloorDays);
    if (!dryRun) auditor.expectRemoval();
    const removed = await retention.run({ cutoff: new Date(Date.now() - days * 86_400_000), dryRun, actor, reason });
    if (!dryRun && removed.length > 0) {
      auditor.audit().catch((err: unknown) => log.error({ err }, 'ledger audit failed'));
      await engine.checkpoint().catch((err: unknown) => log.warn({ err }, 'checkpoint after retention failed; the next one moves it out of the WAL'));
      log.info(
        { sessions: removed.length, steps: removed.reduce((n, r) => n + r.stepCount, 0), actor },
        `retention removed ${removed.length} sessions older than ${days} days; each is recorded in _cot_retention`,
      );
    }
    return removed;
  };
  const finished = await redactor.complete();
  if (finished > 0) log.warn({ redactions: finished }, `finished ${finished} redactions a stop had interrupted after their record was written`);
  const service: ErasureService = {
    redact: async (request) => {
      const record = await redactor.redact(request);
      // The change leaves DuckDB's WAL for the file; the file itself is rewritten at the stop.
      await engine.checkpoint().catch((err: unknown) => log.warn({ err }, 'checkpoint after a redaction failed; the next one moves it out of the WAL'));
      return record;
    },
    retain: (dryRun, actor) => {
      const days = config.ledger.retentionDays;
      if (days === 0) {
        return Promise.reject(
          new PgError(SqlState.ObjectNotInPrerequisiteState, 'ledger.retentionDays is 0: sessions are kept forever, and there is nothing to retain', {
            hint: 'Set ledger.retentionDays in the configuration, or run `cotwire retain --db <file> --days <n>` with the server stopped.',
          }),
        );
      }
      return retain(days, dryRun, actor, `ledger.retentionDays = ${days}, run by ${actor}`);
    },
  };
  return { service, retain };
}

/** The hourly retention job, when ledger.retentionDays is set; it stops first at the unwind. */
export function startRetentionJob(config: Config, log: Logger, erasure: Erasure, stack: DisposeStack): void {
  const days = config.ledger.retentionDays;
  if (days === 0) return;
  const job = new RetentionJob(
    () => erasure.retain(days, false, 'the retention job', `ledger.retentionDays = ${days}`),
    (err) => log.error({ err }, 'the retention job failed; it runs again within the hour'),
  );
  job.start();
  stack.defer(() => job.stop());
}
