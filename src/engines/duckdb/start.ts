import { ForeignKeyRegistry } from './handler/key-registry.js';
import type { AddressInfo } from 'node:net';
import { ConfigError } from '../../config/load.js';
import type { Config } from '../../config/schema.js';
import type { Engine } from '../../engine/port.js';
import type { LedgerCatalog } from '../../ledger/chain/catalog.js';
import { STEP_TYPES } from '../../ledger/chain/schema.js';
import type { CheckpointIssuer } from '../../ledger/log/checkpoints.js';
import { sinkFor } from '../../ledger/log/checkpoint-sinks.js';
import type { MerkleLog } from '../../ledger/log/merkle-log.js';
import { SecurityEventLog } from '../../ledger/security-events.js';
import type { Logger } from '../../log/logger.js';
import { NO_OBSERVER } from '../../observe/observer.js';
import { startParts } from '../../server/dispose-stack.js';
import { PrometheusObserver } from '../../server/metrics.js';
import type { PgServer } from '../../server/server.js';
import { checkListenAuth, listenOrExplain, loadTls } from '../../server/startup.js';
import { openHttp } from '../../http/open.js';
import { DeclaredStore } from './catalog/declared.js';
import type { RetainedSession } from '../../ledger/erasure/retention.js';
import { AdvisoryLocks } from './handler/advisory-locks.js';
import { Backends } from './handler/backends.js';
import { SessionCache } from './handler/session-cache.js';
import { openStepStore } from './start/steps-store.js';
import type { StepStore } from './steps-store/store.js';
import type { LedgerWriter } from './ledger/writer.js';
import type { LedgerAuditor } from './log/auditor.js';
import type { EmbeddingWorker } from './search/embedding-worker.js';
import { openAudit, openCheckpoints, startAudit } from './start/audit.js';
import { openErasure, startRetentionJob } from './start/erasure.js';
import { wireServer } from './start/listener.js';
import { openLog } from './start/log.js';
import { openSearch } from './start/search.js';
import { openStore } from './start/store.js';

export { embeddersFor } from './start/search.js';
export { compactDatabaseFile } from './start/file.js';

export interface RunningServer {
  readonly kind: 'duckdb';
  /** Removes (or, dry, lists) the sessions whose last step is older than `days`, as the retention job does. */
  retain(days: number, dryRun: boolean, actor: string): Promise<RetainedSession[]>;
  readonly address: AddressInfo;
  /** Where /healthz and /metrics listen, when enabled. */
  /** The HTTP listener's address (/healthz, /metrics, OTLP, the viewer), or null when it is off. */
  readonly httpAddress: AddressInfo | null;
  readonly server: PgServer;
  readonly engine: Engine;
  readonly securityLog: SecurityEventLog;
  readonly writer: LedgerWriter;
  readonly ledgers: LedgerCatalog;
  readonly auditor: LedgerAuditor;
  /** Recently read sessions (ledger.sessionCacheMB), or null when off. */
  readonly sessionCache: SessionCache | null;
  /** `_cot_steps` as a row store (ledger.stepStore), or null when off or in memory. */
  readonly stepStore: StepStore | null;
  readonly merkle: MerkleLog;
  readonly checkpoints: CheckpointIssuer;
  /** The background embedding of selected steps, or null when embedding is off or the vectors are another model's. */
  readonly embeddings: EmbeddingWorker | null;
  /** Stops accepting, drains connections (bounded), checkpoints and closes the database. */
  close(): Promise<void>;
}

/** What the process gives the server besides its configuration. */
export interface ServerRuntime {
  /** libuv's thread pool, which DuckDB's calls run on (cli.ts sizes it with UV_THREADPOOL_SIZE before it starts). */
  readonly threadPoolSize: number;
}

/**
 * The DuckDB wing's start-up: the only place where its concrete classes are
 * created and wired. Each part opens what it needs and pushes what undoes
 * it on one stack, which a part that fails to start, or the stop, unwinds
 * in reverse: the listener and the background jobs first, the writer after
 * the last checkpoint, the database file last.
 */
export async function startServer(config: Config, log: Logger, runtime: ServerRuntime = { threadPoolSize: 64 }): Promise<RunningServer> {
  const known: readonly string[] = STEP_TYPES;
  if (config.ledger.embeddingAlwaysTypes.some((t) => !known.includes(t))) {
    // A misspelt type would silently never be embedded.
    throw new ConfigError(
      `invalid configuration: ledger.embeddingAlwaysTypes = ${JSON.stringify(config.ledger.embeddingAlwaysTypes)}; expected step types, each one of ${STEP_TYPES.join(', ')}`,
    );
  }
  checkListenAuth(config);
  const tls = loadTls(config);
  let started = false;
  const { value: running, stack } = await startParts(async (stack) => {
    const { engine, internal, guard, ledgers, stepsServed } = await openStore(config, log, stack, () => started);
    const prometheus = config.http.port === null ? null : new PrometheusObserver();
    const observer = prometheus ?? NO_OBSERVER;
    const ledgerLog = await openLog(config, log, engine, ledgers, observer, stack);
    const { merkle, writer } = ledgerLog;
    const steps = (await ledgers.all()).find((t) => t.isSteps);
    const sessionCache = steps === undefined || config.ledger.sessionCacheMB === 0 ? null : new SessionCache(steps, config.ledger.sessionCacheMB * 1024 * 1024);
    const search = await openSearch(config, engine, internal, observer, log, stepsServed ? () => writer.appliedSeq : null);
    stack.defer(() => search.close());
    const stepStore = await openStepStore(config, log, engine, writer, steps, stack);
    writer.onDurable = (tables) => {
      stepStore?.appended(tables);
      sessionCache?.appended(tables);
      search.worker?.appended(tables);
    };
    stepStore?.startFill();
    const advisoryLocks = new AdvisoryLocks();
    const backends = new Backends();
    const declared = new DeclaredStore(config.database.path === ':memory:' ? null : `${config.database.path}.pgtypes`);
    for (const sql of declared.loadSql()) await internal.run(sql);
    await declared.loaded(internal);
    const foreignKeys = await ForeignKeyRegistry.open(internal);
    await engine.registerFunction(advisoryLocks.engineFunction());
    await engine.registerFunction(backends.engineFunction());
    const auditor = await openAudit(engine, ledgers, ledgerLog, observer, log, stack);
    const checkpoints = await openCheckpoints(config, log, internal, ledgers, ledgerLog, stack);
    const securityLog = await SecurityEventLog.open(ledgers, writer, (err) => log.error({ err }, 'recording a security event failed'));
    stack.defer(() => securityLog.close());
    const erasure = await openErasure(config, log, engine, ledgers, writer, auditor, { sessionCache, stepStore: stepStore?.store ?? null }, stack);
    const server = wireServer(
      config,
      log,
      observer,
      {
        tls: tls?.context ?? null,
        engine,
        guard,
        securityLog,
        ledgers,
        writer,
        advisoryLocks,
        backends,
        declared,
        foreignKeys,
        auditor,
        sessionCache,
        stepStore: stepStore?.store ?? null,
        search,
        erasure: erasure.service,
        threadPoolSize: runtime.threadPoolSize,
      },
      stack,
    );
    // The background jobs start before the wire listens, so that they stop only after it has drained: the stop
    // closes the listener first.
    startAudit(auditor, config, stack);
    startRetentionJob(config, log, erasure, stack);
    checkpoints.start();
    search.worker?.start();
    // Open before the wire listens and closed after it drains, so that /healthz answers 503 throughout the drain.
    const httpAddress = await openHttp({ prometheus, server, config, tls, log, stack, verifierKey: () => checkpoints.verifierKey });
    const address = await listenOrExplain(server, config, stack);
    const sinkNames = config.checkpoint.sinks.map((t) => sinkFor(t).name);
    if (sinkNames.length > 0) {
      log.info(
        { checkpointSinks: sinkNames },
        `signed checkpoints are written to ${sinkNames.join(', ')}; keep a copy where whoever can change the database cannot`,
      );
    } else if (config.database.path !== ':memory:') {
      log.warn('checkpoint.sinks is empty: no signed checkpoint leaves the database file, so an offline check has nothing to hold the file against');
    }
    return {
      address,
      httpAddress,
      server,
      engine,
      securityLog,
      writer,
      ledgers,
      auditor,
      sessionCache,
      stepStore: stepStore?.store ?? null,
      merkle,
      checkpoints,
      embeddings: search.worker,
      retain: (days: number, dryRun: boolean, actor: string) =>
        erasure.retain(days, dryRun, actor, `retention of sessions older than ${days} days, run by ${actor}`),
    };
  });
  started = true;
  return { kind: 'duckdb', ...running, close: () => stack.unwind(config.limits.shutdownGraceMs) };
}
