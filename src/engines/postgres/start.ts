import type { AddressInfo } from 'node:net';
import { redactUrl } from '../../config/load.js';
import type { Config } from '../../config/schema.js';
import { PgError } from '../../errors/pg-error.js';
import { SqlState } from '../../errors/sqlstate.js';
import { ProtectedNames } from '../../guard/names.js';
import { LedgerCatalog } from '../../ledger/chain/catalog.js';
import type { CheckpointIssuer } from '../../ledger/log/checkpoints.js';
import { SecurityEventLog } from '../../ledger/security-events.js';
import { ANALYTICS_FUNCTIONS, AUDIT_SQL_FUNCTIONS, PROOF_SQL_FUNCTIONS, SEARCH_SQL_FUNCTIONS } from '../../ledger/sql-functions.js';
import type { Logger } from '../../log/logger.js';
import { NO_OBSERVER } from '../../observe/observer.js';
import { startParts, type DisposeStack } from '../../server/dispose-stack.js';
import { PrometheusObserver } from '../../server/metrics.js';
import { PgServer } from '../../server/server.js';
import { checkListenAuth, listenOrExplain, loadTls, StartupError, wireOptions } from '../../server/startup.js';
import { openHttp } from '../../http/open.js';
import { engineRefusedConnection, PgBackend } from './adapter/backend.js';
import { PostgresConnection, urlAs } from './adapter/connection.js';
import { PostgresGuard } from './guard.js';
import { ProxyHandlerFactory } from './handler/factory.js';
import { readPostgresTables } from './ledger/catalog.js';
import { installPostgres, rolePasswords } from './ledger/install.js';
import { AGENT_ID_SETTING, ORG_ID_SETTING, pgRoles } from './ledger/names.js';
import { PgLedgerWriter, WRITER_SETUP } from './ledger/writer.js';
import { EngineHealth } from './adapter/health.js';
import { openCheckpoints } from './start/checkpoints.js';
import { openErasure } from './start/erasure.js';
import { startAudit } from './start/audit.js';
import { openSearch } from './start/search.js';
import type { PgAuditor } from './ledger/auditor.js';
import type { RetainedSession } from '../../ledger/erasure/retention.js';
import { ledgerDdl } from './start/ledger-ddl.js';

/**
 * The composition root of a server whose engine is PostgreSQL
 * (engine.kind: postgres). It shares the wire front, authentication, the
 * roles and the writer's chain with the DuckDB server, and leaves the rest
 * to PostgreSQL: each client connection gets a backend of its own, as the
 * PostgreSQL role of its cotwire role, which can read the ledgers and not
 * change them (docs/scaling.md).
 */

export interface RunningPostgresServer {
  readonly kind: 'postgres';
  readonly address: AddressInfo;
  /** The HTTP listener's address (/healthz, /metrics, OTLP, the viewer), or null when it is off. */
  readonly httpAddress: AddressInfo | null;
  readonly server: PgServer;
  readonly writer: PgLedgerWriter;
  readonly ledgers: LedgerCatalog;
  readonly securityLog: SecurityEventLog;
  readonly checkpoints: CheckpointIssuer;
  /** This instance's name in the signing lease. */
  readonly instance: string;
  /** The background audit; audit(true) runs one now. */
  readonly auditor: PgAuditor;
  /** Removes (or, dry, lists) the sessions whose last step is older than `days`, as ledger.retentionDays does. */
  retain(days: number, dryRun: boolean, actor: string): Promise<RetainedSession[]>;
  close(): Promise<void>;
}

/**
 * Each part opens what it needs and pushes what undoes it on one stack,
 * which a part that fails to start, or the stop, unwinds in reverse: the
 * listener first, then the server's own DDL, the security log, the last
 * checkpoint and the lease, the writer, and the engine connections last.
 */
export async function startPostgresServer(config: Config, log: Logger): Promise<RunningPostgresServer> {
  checkListenAuth(config);
  const url = config.engine.url;
  if (url === null) throw new StartupError('engine.kind is postgres, but engine.url is not set');
  const tls = loadTls(config);
  try {
    const { value, stack } = await startParts((stack) => openParts(config, log, url, tls, stack));
    return { kind: 'postgres', ...value, close: () => stack.unwind(config.limits.shutdownGraceMs) };
  } catch (err) {
    // What the engine says (a role of another database, a missing privilege) is for the operator, in one line.
    if (err instanceof PgError)
      throw new StartupError(`the PostgreSQL engine at ${redactUrl(url)}: ${err.message}${err.hint === undefined ? '' : ` (${err.hint})`}`);
    throw err;
  }
}

async function openParts(
  config: Config,
  log: Logger,
  url: string,
  tls: ReturnType<typeof loadTls>,
  stack: DisposeStack,
): Promise<Omit<RunningPostgresServer, 'kind' | 'close'>> {
  const prefix = config.engine.rolePrefix;
  const roles = pgRoles(prefix);
  const health = stack.use(new EngineHealth(url, log, redactUrl(url)), (h) => h.stop());
  // The writer's calls and the lease's are short: past this, their connection is taken for lost (a network cut).
  const { answerTimeoutMs } = config.engine;
  let admin: PostgresConnection;
  try {
    admin = stack.use(await PostgresConnection.open(url, 'cotwire', { health }), (c) => c.close());
  } catch (err) {
    throw new StartupError(`cannot connect to the PostgreSQL engine at ${redactUrl(url)}: ${(err as Error).message}`);
  }
  const names = new ProtectedNames(config.guard.protectedPrefixes);
  const report = await installPostgres(admin, prefix, (n) => names.isProtected(n), config.ledger.hashVersion);
  for (const action of report.actions) log.info({ engine: redactUrl(url) }, `init-postgres: ${action}`);
  const passwords = await rolePasswords(admin, prefix);
  const serverUrl = urlAs(url, roles.server, passwords.server);
  const clientUrls = {
    reader: urlAs(url, roles.reader, passwords.reader),
    writer: urlAs(url, roles.writer, passwords.writer),
    admin: urlAs(url, roles.admin, passwords.admin),
  };
  const prometheus = config.http.port === null ? null : new PrometheusObserver();
  const observer = prometheus ?? NO_OBSERVER;
  const guard = new PostgresGuard(
    names,
    new Set([
      'cot_verify',
      'cot_verify_all',
      'cot_replay',
      'cot_trace',
      'cot_sessions',
      ...PROOF_SQL_FUNCTIONS,
      ...ANALYTICS_FUNCTIONS,
      ...AUDIT_SQL_FUNCTIONS,
      ...SEARCH_SQL_FUNCTIONS,
    ]),
  );
  await loadGuardParser();
  const ledgers = new LedgerCatalog(admin, (n) => names.isProtected(n), null, readPostgresTables(prefix));
  const writerConn = stack.use(
    await PostgresConnection.open(serverUrl, 'cotwire writer', { pipeline: true, prepare: true, setup: WRITER_SETUP, health, answerTimeoutMs }),
    (c) => c.close(),
  );
  const writer = stack.use(
    await PgLedgerWriter.open(writerConn, {
      observer,
      health,
      checker: stack.use(await PostgresConnection.open(serverUrl, 'cotwire writer check', { health, answerTimeoutMs }), (c) => c.close()),
      embeddingSample: { rate: config.ledger.embeddingSampleRate, alwaysTypes: new Set(config.ledger.embeddingAlwaysTypes) },
      sessionOwner: config.ledger.sessionOwner,
    }),
    (w) => w.close(),
  );
  const { checkpoints, instance } = await openCheckpoints(config, log, admin, serverUrl, ledgers, writer, stack, health);
  const securityLog = stack.use(await SecurityEventLog.open(ledgers, writer, (err) => log.error({ err }, 'recording a security event failed')), (s) =>
    s.close(),
  );
  const createLedger = await ledgerDdl(url, prefix, roles, names, ledgers, stack, health, config.ledger.hashVersion);
  const erasure = await openErasure(config, log, url, roles, ledgers, writer, health, stack);
  const auditor = await startAudit(config, log, url, ledgers, observer, instance, health, stack);
  const search = await openSearch(config, log, url, ledgers, observer, health, stack, instance);
  const server = new PgServer({
    ...wireOptions(config),
    tls: tls?.context ?? null,
    observer,
    handlers: new ProxyHandlerFactory(
      (info, applicationName) =>
        // While the engine is down a client is told at once, not after a connection attempt of its own times out.
        (health.reachable
          ? Promise.resolve()
          : Promise.reject(new PgError(SqlState.ConnectionFailure, `cannot reach the PostgreSQL engine: ${health.why}`))
        ).then(() =>
          PgBackend.open(
            info.role === 'admin' ? clientUrls.admin : info.role === 'writer' ? clientUrls.writer : clientUrls.reader,
            applicationName === '' ? 'cotwire client' : applicationName,
            // What cot_agent_id() answers; a client cannot set it (the guard refuses SET cotwire.*).
            { [AGENT_ID_SETTING]: info.identity.agent_id ?? '', [ORG_ID_SETTING]: info.identity.org_id ?? '' },
            answerTimeoutMs,
          ).catch((err: unknown) => {
            // The engine refusing connections (none listening, starting up, shutting down) is down; any other refusal
            // (too many connections, a password) may be this backend's alone: one probe tells.
            if (engineRefusedConnection(err)) health.lost(err as Error);
            else health.suspect(err as Error);
            throw err;
          }),
        ),
      { guard, securityLog, observer },
      {
        ledgers,
        writer,
        maxContentBytes: config.ledger.maxContentBytes,
        maxAppendBytes: config.limits.maxAppendBytes,
        query: (sql, params) => admin.query(sql, params),
        ledgerDdl: createLedger,
        idleInTransactionTimeoutMs: config.limits.idleInTransactionTimeoutMs,
        erasure: erasure.service,
        search,
      },
      config.limits.statementTimeoutMs,
    ),
    log,
  });
  // Open before the wire listens and closed after it drains, so that /healthz answers 503 throughout the drain.
  const httpAddress = await openHttp({
    prometheus,
    server,
    config,
    tls,
    log,
    stack,
    engineReachable: () => health.reachable,
    verifierKey: () => checkpoints.verifierKey,
  });
  const address = await listenOrExplain(server, config, stack);
  checkpoints.start();
  log.info({ engine: redactUrl(url), roles, instance }, `the engine is PostgreSQL ${report.serverVersion}`);
  return { address, httpAddress, server, writer, ledgers, securityLog, checkpoints, instance, retain: erasure.retain, auditor };
}

async function loadGuardParser(): Promise<void> {
  const { loadModule } = await import('libpg-query');
  await loadModule();
}
