import type { Config } from '../../../config/schema.js';
import type { LedgerCatalog } from '../../../ledger/chain/catalog.js';
import type { Logger } from '../../../log/logger.js';
import type { Observer } from '../../../observe/observer.js';
import type { DisposeStack } from '../../../server/dispose-stack.js';
import { isConnectionLoss, PostgresConnection } from '../adapter/connection.js';
import type { EngineHealth } from '../adapter/health.js';
import { PgAuditor } from '../ledger/auditor.js';

/**
 * The background audit, on a connection of its own as the engine URL's
 * role, every ledger.verifyIntervalSeconds (at start-up only when 0): the
 * instances take turns (ledger/auditor.ts). It stops first at the unwind.
 */
export async function startAudit(
  config: Config,
  log: Logger,
  url: string,
  ledgers: LedgerCatalog,
  observer: Observer,
  instance: string,
  health: EngineHealth,
  stack: DisposeStack,
): Promise<PgAuditor> {
  const conn = stack.use(await PostgresConnection.open(url, 'cotwire audit', { health }), (c) => c.close());
  const intervalMs = config.ledger.verifyIntervalSeconds * 1000;
  const auditor = new PgAuditor(
    conn,
    ledgers,
    observer,
    instance,
    intervalMs > 0 ? intervalMs : 24 * 3_600_000,
    (f) => log.error({ finding: f }, `audit: ${f.kind} in ${f.ledger ?? 'the global log'}: ${f.detail}`),
    // An engine that is down is reported once, where it is found down (EngineHealth).
    (err) => {
      if (!isConnectionLoss(err)) log.error({ err }, 'the ledger audit failed; it runs again at the next interval');
    },
    config.ledger.watchIntervalSeconds * 1000,
  );
  auditor.start();
  stack.defer(() => auditor.stop());
  return auditor;
}
