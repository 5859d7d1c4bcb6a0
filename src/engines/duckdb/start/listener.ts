import type tls from 'node:tls';
import type { Config } from '../../../config/schema.js';
import type { Engine } from '../../../engine/port.js';
import type { LedgerCatalog } from '../../../ledger/chain/catalog.js';
import type { SecurityEventLog } from '../../../ledger/security-events.js';
import type { Logger } from '../../../log/logger.js';
import type { Observer } from '../../../observe/observer.js';
import type { DisposeStack } from '../../../server/dispose-stack.js';
import { PgServer } from '../../../server/server.js';
import { wireOptions } from '../../../server/startup.js';
import { CompatRewriter, connectionSetup } from '../catalog/compat.js';
import { catalogSnapshot } from '../handler/catalog-mode.js';
import { ledgerMacroGroups } from '../handler/ledger-macros.js';
import type { DeclaredStore } from '../catalog/declared.js';
import type { Guard } from '../guard/guard.js';
import type { AdvisoryLocks } from '../handler/advisory-locks.js';
import type { ForeignKeyRegistry } from '../handler/key-registry.js';
import type { Backends } from '../handler/backends.js';
import type { ConnectionServices } from '../handler/context.js';
import { EngineSlots } from '../handler/engine-calls.js';
import { EngineHandlerFactory } from '../handler/factory.js';
import type { SessionCache } from '../handler/session-cache.js';
import type { StepStore } from '../steps-store/store.js';
import type { LedgerWriter } from '../ledger/writer.js';
import type { LedgerAuditor } from '../log/auditor.js';
import type { Search } from './search.js';

/** Threads kept for the writer's journal, the applier, the audit and the server's own queries. */
const RESERVED_ENGINE_THREADS = 8;

/** What the wire's handlers are given: every part the statement pipeline reaches. */
export interface ListenerParts {
  /** The wire's TLS, loaded before anything else opened. */
  readonly tls: tls.SecureContext | null;
  readonly engine: Engine;
  readonly guard: Guard;
  readonly securityLog: SecurityEventLog;
  readonly ledgers: LedgerCatalog;
  readonly writer: LedgerWriter;
  readonly advisoryLocks: AdvisoryLocks;
  readonly backends: Backends;
  readonly declared: DeclaredStore;
  readonly foreignKeys: ForeignKeyRegistry;
  readonly auditor: LedgerAuditor;
  readonly sessionCache: SessionCache | null;
  readonly stepStore: StepStore | null;
  readonly search: Search;
  readonly erasure: ConnectionServices['erasure'];
  /** libuv's thread pool, which DuckDB's calls run on. */
  readonly threadPoolSize: number;
}

/** The wire: one handler pipeline per client connection over its own engine connection (not listening yet). */
export function wireServer(config: Config, log: Logger, observer: Observer, parts: ListenerParts, stack: DisposeStack): PgServer {
  const search = { vectors: parts.search.vectors, macros: parts.search.macros };
  // The snapshot's connection is made like a client's (session 0 has no session to reach), so its pg_proc lists the same functions.
  const snapshot = catalogSnapshot(
    () => parts.engine.connect(),
    connectionSetup(parts.engine.version, 'cotwire', config.database.name, 'admin', null, { id: 0, secret: '' }),
    () => ledgerMacroGroups({ ledgers: parts.ledgers, search }),
    {
      refreshed: (ms) => log.debug({ durationMs: Math.round(ms) }, 'catalog snapshot refreshed'),
      failed: (err) => log.warn({ err }, 'refreshing the catalog snapshot failed; catalog reads use the live views until a refresh succeeds'),
    },
  );
  // Closed after the listener has drained and before the engine closes: a refresh due after DDL would otherwise run on a stopped server.
  stack.defer(() => snapshot.close());
  const server = new PgServer({
    ...wireOptions(config),
    tls: parts.tls,
    observer,
    handlers: new EngineHandlerFactory(parts.engine, config.database.name, {
      observer,
      guard: parts.guard,
      securityLog: parts.securityLog,
      ledgers: parts.ledgers,
      writer: parts.writer,
      rewriter: new CompatRewriter(config.database.name),
      maxContentBytes: config.ledger.maxContentBytes,
      newLedgerHashVersion: config.ledger.hashVersion,
      statementTimeoutMs: config.limits.statementTimeoutMs,
      maxAppendBytes: config.limits.maxAppendBytes,
      advisoryLocks: parts.advisoryLocks,
      backends: parts.backends,
      declared: parts.declared,
      foreignKeys: parts.foreignKeys,
      auditReport: () => parts.auditor.latest,
      lostRanges: parts.writer.lostRanges,
      sessionCache: parts.sessionCache,
      stepStore: parts.stepStore,
      search,
      erasure: parts.erasure,
      catalogSnapshot: snapshot,
      idleInTransactionTimeoutMs: config.limits.idleInTransactionTimeoutMs,
      // Clients' calls get the pool but a reserve, so that the writer, the applier and the audit always get through.
      engineSlots: new EngineSlots(Math.max(1, parts.threadPoolSize - RESERVED_ENGINE_THREADS)),
    }),
    log,
  });
  // pg_cancel_backend and pg_terminate_backend reach another session through the server, which holds them all.
  parts.backends.attach((pid, signal) => server.signal(pid, signal));
  return server;
}
