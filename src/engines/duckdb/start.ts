import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { authPolicy, checkListenAuth, loadTls, StartupError } from '../../server/startup.js';
import { dirname } from 'node:path';
import type { AddressInfo } from 'node:net';
import { ConfigError } from '../../config/load.js';
import type { Config } from '../../config/schema.js';
import { DuckDBEngine, rewriteDatabaseFile, type EngineCompression } from './adapter/engine.js';
import type { Engine, EngineConnection } from '../../engine/port.js';
import { EngineHandlerFactory } from './handler/factory.js';
import { AdvisoryLocks } from './handler/advisory-locks.js';
import { EngineSlots } from './handler/engine-calls.js';
import { Guard } from './guard/guard.js';
import { SecurityEventLog } from '../../ledger/security-events.js';
import type { LedgerCatalog } from '../../ledger/chain/catalog.js';
import { LedgerWriter } from './ledger/writer.js';
import { Journal } from './ledger/journal.js';
import { recordHashVersionSql } from '../../ledger/chain/hash-version.js';
import { REDACTIONS_DDL, REDACTIONS_INDEX_DDL, REDACTIONS_TABLE } from '../../ledger/erasure/redactions.js';
import { Redactor } from './erasure/redactor.js';
import { RETENTION_DDL, RETENTION_INDEX_DDL, RETENTION_TABLE } from '../../ledger/erasure/retention-sql.js';
import { Retention, RetentionJob, type RetainedSession } from './erasure/retention.js';
import { STEP_TYPES, STEPS_DDL, STEPS_INDEX_DDL, STEPS_TABLE, type LedgerTable } from '../../ledger/chain/schema.js';
import { PgError } from '../../errors/pg-error.js';
import { SqlState } from '../../errors/sqlstate.js';
import { LedgerShapes } from '../../ledger/chain/shapes.js';
import { Quarantine } from './ledger/quarantine.js';
import { SECURITY_EVENTS_DDL, SECURITY_EVENTS_TABLE } from '../../ledger/security-events.js';
import { CHECKPOINTS_DDL, CHECKPOINTS_TABLE } from '../../ledger/log/checkpoint-schema.js';
import { CheckpointIssuer } from '../../ledger/log/checkpoints.js';
import { sinkFor } from '../../ledger/log/checkpoint-sinks.js';
import { MerkleLog } from '../../ledger/log/merkle-log.js';
import { generateKey, parseSigner, type NoteSigner } from '../../ledger/log/note.js';
import { proofFunctions } from './dialect/proof-sql.js';
import { PROOF_SQL_FUNCTIONS } from '../../ledger/sql-functions.js';
import { ANALYTICS_FUNCTIONS } from '../../ledger/sql-functions.js';
import { readKeyFile, writeKeyFile } from '../../ledger/log/signing-key.js';
import { LedgerAuditor } from './log/auditor.js';
import { SessionCache } from './handler/session-cache.js';
import { auditFunctions } from './dialect/audit-sql.js';
import { AUDIT_SQL_FUNCTIONS } from '../../ledger/sql-functions.js';
import { COMPAT_CATALOG, COTWIRE_SQL_FUNCTIONS, CompatRewriter, engineSetup } from './catalog/compat.js';
import { DeclaredStore } from './catalog/declared.js';
import { OpsServer, PrometheusObserver } from '../../server/metrics.js';
import { NO_OBSERVER } from '../../observe/observer.js';
import type { Logger } from '../../log/logger.js';
import { PgServer } from '../../server/server.js';
import { HashedEmbedder } from '../../embedding/hashed.js';
import { OpenAIEmbedder } from '../../embedding/openai.js';
import type { Embedder } from '../../embedding/provider.js';
import type { Observer } from '../../observe/observer.js';
import { openVectorTable, vectorMismatch } from './search/embeddings.js';
import { EmbeddingWorker } from './search/embedding-worker.js';
import { QueryVectors, searchMacros } from './search/search-sql.js';
import { SEARCH_SQL_FUNCTIONS } from '../../ledger/sql-functions.js';
import { openNodeFile, nodeFilePath } from './log/node-file.js';
import { duckdbLedgers } from './ledger/catalog-source.js';

export interface RunningServer {
  readonly kind: 'duckdb';
  /** Removes (or, dry, lists) the sessions whose last step is older than `days`, as the retention job does. */
  retain(days: number, dryRun: boolean, actor: string): Promise<RetainedSession[]>;
  readonly address: AddressInfo;
  /** Where /healthz and /metrics listen, when enabled. */
  readonly metricsAddress: AddressInfo | null;
  readonly server: PgServer;
  readonly engine: Engine;
  readonly securityLog: SecurityEventLog;
  readonly writer: LedgerWriter;
  readonly ledgers: LedgerCatalog;
  readonly auditor: LedgerAuditor;
  /** Recently read sessions (ledger.sessionCacheMB), or null when off. */
  readonly sessionCache: SessionCache | null;
  readonly merkle: MerkleLog;
  readonly checkpoints: CheckpointIssuer;
  /** The background embedding of selected steps, or null when embedding is off or the vectors are another model's. */
  readonly embeddings: EmbeddingWorker | null;
  /** Stops accepting, drains connections (bounded), checkpoints and closes the database. */
  close(): Promise<void>;
}

/** The composition root: the only place where concrete classes are created and wired. */
export async function startServer(config: Config, log: Logger, runtime: ServerRuntime = { threadPoolSize: 64 }): Promise<RunningServer> {
  const known: readonly string[] = STEP_TYPES;
  if (config.ledger.embeddingAlwaysTypes.some((t) => !known.includes(t))) {
    // A misspelt type would silently never be embedded.
    throw new ConfigError(
      `invalid configuration: ledger.embeddingAlwaysTypes = ${JSON.stringify(config.ledger.embeddingAlwaysTypes)}; expected step types, each one of ${STEP_TYPES.join(', ')}`,
    );
  }
  checkListenAuth(config);
  const secureContext = loadTls(config);
  // A rewrite that fails (a full disk) is logged and retried at the next stop: the erasure itself is done.
  if (config.database.path !== ':memory:') await rewriteIfErased(config.database.path, config.database.compression, log).catch(() => undefined);
  const engine = await openEngine(config.database.path, config.database.compression);
  const prometheus = config.metrics.port === null ? null : new PrometheusObserver();
  const observer = prometheus ?? NO_OBSERVER;
  const builtins = await engine.builtinFunctionNames();
  const guard = await Guard.create({
    prefixes: config.guard.protectedPrefixes,
    reservedFunctions: new Set([
      ...builtins,
      ...COTWIRE_SQL_FUNCTIONS,
      ...PROOF_SQL_FUNCTIONS,
      ...ANALYTICS_FUNCTIONS,
      ...AUDIT_SQL_FUNCTIONS,
      ...SEARCH_SQL_FUNCTIONS,
      'cot_clock_micros',
    ]),
    engineSettings: await engine.settingNames(),
    reservedNames: [COMPAT_CATALOG],
  });
  // Server-internal connection: the default ledger and the security ledger exist before any client connects.
  const internal = await engine.connect();
  let shapes: LedgerShapes;
  try {
    shapes = LedgerShapes.open(config.database.path === ':memory:' ? null : LedgerShapes.pathFor(config.database.path));
  } catch (err) {
    internal.close();
    await engine.close();
    throw new StartupError((err as Error).message);
  }
  // The server's own ledgers are created with a new database. One recorded before and gone now was
  // dropped behind the server: it is not recreated empty, but stays missing, fails closed and is reported.
  for (const [name, ddl] of [
    [STEPS_TABLE, STEPS_DDL],
    [CHECKPOINTS_TABLE, CHECKPOINTS_DDL],
    [SECURITY_EVENTS_TABLE, SECURITY_EVENTS_DDL],
    [REDACTIONS_TABLE, REDACTIONS_DDL],
    [RETENTION_TABLE, RETENTION_DDL],
  ] as const) {
    if (shapes.expected('main', name) === undefined) await createServerLedger(internal, name, ddl);
  }
  const ledgers = duckdbLedgers(internal, (name) => guard.names.isProtected(name), shapes);
  const damage = await ledgers.damaged();
  for (const d of damage) {
    log.error(
      { ledger: `${d.schema}.${d.name}`, kind: d.kind },
      `ledger ${d.schema}.${d.name} is damaged: ${d.reason}; it fails closed (appends refused), the other ledgers are served. See docs/security.md, "Damaged ledgers"`,
    );
  }
  if (!damage.some((d) => d.schema === 'main' && d.name === STEPS_TABLE)) for (const ddl of STEPS_INDEX_DDL) await internal.run(ddl);
  if (!damage.some((d) => d.schema === 'main' && d.name === REDACTIONS_TABLE)) await internal.run(REDACTIONS_INDEX_DDL);
  if (!damage.some((d) => d.schema === 'main' && d.name === RETENTION_TABLE)) await internal.run(RETENTION_INDEX_DDL);
  let signer: NoteSigner;
  let merkle: MerkleLog;
  let writer: LedgerWriter;
  try {
    signer = loadSigner(config, log);
    merkle = config.database.path === ':memory:' ? MerkleLog.inMemory() : openNodeFile(nodeFilePath(config.database.path));
  } catch (err) {
    internal.close();
    await engine.close();
    throw new StartupError((err as Error).message);
  }
  try {
    writer = await LedgerWriter.open(engine, ledgers, {
      journalPath: config.database.path === ':memory:' ? null : Journal.pathFor(config.database.path),
      observer,
      onApplyError: (err) => log.error({ err }, 'applying journaled ledger rows to the database failed; retrying'),
      log: merkle,
      embeddingSample: { rate: config.ledger.embeddingSampleRate, alwaysTypes: new Set(config.ledger.embeddingAlwaysTypes) },
      onJournalDamage: (tail, path, missing) => {
        if (tail.lost !== null && missing > 0) {
          log.error(
            { journal: path, offset: tail.offset, afterSeq: String(tail.lost.afterSeq), beforeSeq: String(tail.lost.beforeSeq), missing },
            `the ledger journal ${path} is damaged: ${tail.detail}. ${missing} acknowledged appends between ledger_seq ${tail.lost.afterSeq} and ${tail.lost.beforeSeq} are in neither the journal nor the database; everything else it holds was applied. The audit reports them missing; keep the journal file for investigation and compare with the checkpoints (cotwire verify --checkpoint)`,
          );
        } else if (tail.kind === 'unrecognized') {
          log.info({ journal: path, offset: tail.offset }, `the ledger journal ends at offset ${tail.offset}: ${tail.detail}`);
        } else {
          log.warn(
            { journal: path, offset: tail.offset, kind: tail.kind },
            `the ledger journal ${path} ends with a damaged record: ${tail.detail}. Every whole record before it was applied. A record torn by a crash was never acknowledged; if the machine did not crash while writing, compare with the checkpoints (cotwire verify --checkpoint)`,
          );
        }
      },
      quarantine: Quarantine.at(config.database.path === ':memory:' ? null : Quarantine.pathFor(config.database.path)),
      onQuarantine: (names, rows, reason, path) =>
        log.error(
          { ledgers: names, rows, quarantine: path },
          `${rows} acknowledged rows of ${names.join(', ')} cannot be applied: ${reason}. They are kept in ${String(path)}; the audit reports them missing until the ledger is repaired`,
        ),
    });
  } catch (err) {
    merkle.close();
    internal.close();
    await engine.close();
    throw new StartupError(`cannot open the ledger journal: ${(err as Error).message}`);
  }
  writer.onLogError = (err) => log.error({ err }, "writing the global log's node file failed; its leaves are kept in memory and written with the next commit");
  if (writer.logFrozen !== null) {
    log.error(
      { leaves: merkle.size },
      `the global log stops at ${merkle.size} leaves and no checkpoint will be signed: ${writer.logFrozen}; the ledgers were altered outside the server. Run \`cotwire verify --db ${config.database.path} --checkpoint <saved checkpoints> --key <verifier key>\` to find what changed`,
    );
  }
  for (const f of proofFunctions(merkle)) await engine.registerFunction(f);
  const steps = (await ledgers.all()).find((t) => t.isSteps);
  const sessionCache = steps === undefined || config.ledger.sessionCacheMB === 0 ? null : new SessionCache(steps, config.ledger.sessionCacheMB * 1024 * 1024);
  const stepsServed = !damage.some((d) => d.schema === 'main' && d.name === STEPS_TABLE);
  const search = await openSearch(config, engine, internal, observer, log, stepsServed ? () => writer.appliedSeq : null);
  writer.onDurable = (tables) => {
    sessionCache?.appended(tables);
    search.worker?.appended(tables);
  };
  const advisoryLocks = new AdvisoryLocks();
  const declared = new DeclaredStore(config.database.path === ':memory:' ? null : `${config.database.path}.pgtypes`);
  for (const sql of declared.loadSql()) await internal.run(sql);
  await declared.loaded(internal);
  await engine.registerFunction(advisoryLocks.engineFunction());
  // The audit reads on a connection of its own, beside the writer's and the clients'.
  const auditConn = await engine.connect();
  const auditor = new LedgerAuditor(
    auditConn,
    ledgers,
    {
      log: merkle,
      appliedSeq: () => writer.appliedSeq,
      integratedSeq: () => writer.settledSeq(),
      knownHeads: () => writer.knownHeads(),
      logStopped: () => writer.logFrozen,
      fingerprints: {
        track: () => writer.trackFingerprints(),
        between: (from, to) => writer.fingerprintsBetween(from, to),
        forget: (seq) => writer.forgetFingerprints(seq),
      },
    },
    observer,
    (f) =>
      log.error(
        { kind: f.kind, ledger: f.ledger, chain: f.chainKey, firstSeq: f.firstSeq, lastSeq: f.lastSeq, rows: f.rows },
        `ledger audit: ${f.kind}${f.ledger === null ? '' : ` in ${f.ledger}`}${f.chainKey === null ? '' : ` chain ${JSON.stringify(f.chainKey)}`}${f.firstSeq === null ? '' : ` ledger_seq ${f.firstSeq}..${String(f.lastSeq)}`}: ${f.detail}`,
      ),
    (err) => log.error({ err }, 'ledger audit failed'),
    (changed) => log.warn({ ledgers: changed }, `${changed.join(', ')} changed without the writer (the watch saw it); a full audit runs now`),
  );
  for (const f of auditFunctions(() => auditor.latest)) await engine.registerFunction(f);
  const checkpointTable = await ledgers.find(['main', CHECKPOINTS_TABLE]).catch(() => null);
  const [lastCheckpoint] =
    checkpointTable === null
      ? []
      : ((await internal.query(`SELECT tree_size, ledger_seq FROM main.${CHECKPOINTS_TABLE} ORDER BY ledger_seq DESC LIMIT 1`)) as Array<[bigint, bigint]>);
  const checkpoints = new CheckpointIssuer(
    writer,
    { size: () => merkle.size, root: (n) => merkle.root(n), sync: () => merkle.sync() },
    checkpointTable,
    signer,
    config.checkpoint.sinks.map((t) => sinkFor(t)),
    {
      intervalMs: config.checkpoint.intervalSeconds * 1000,
      maxLeaves: config.checkpoint.maxLeaves,
      onSinkError: (sink, err, attempt) => log.warn({ err, sink, attempt }, 'writing a checkpoint to a sink failed; retrying'),
      onIssueError: (err) => log.error({ err }, 'issuing a checkpoint failed'),
    },
    lastCheckpoint === undefined ? null : { size: Number(lastCheckpoint[0]), record: Number(lastCheckpoint[1]) },
  );
  const securityLog = await SecurityEventLog.open(ledgers, writer, (err) => log.error({ err }, 'recording a security event failed'));
  const erasureConn = await engine.connect();
  const erasureHooks = {
    changed: (table: LedgerTable, key: string) => {
      if (table.isSteps) sessionCache?.invalidate(key);
    },
    erased: () => {
      markErased(config.database.path);
      // Verification joins the records of erasure once there are some.
      ledgers.invalidate();
    },
  };
  const redactor = new Redactor(erasureConn, ledgers, writer, erasureHooks);
  // Each runs its own transactions, one at a time: a connection each, so that the two never share one.
  const retentionConn = await engine.connect();
  const retention = new Retention(retentionConn, ledgers, writer, erasureHooks);
  const retain = async (days: number, dryRun: boolean, actor: string, reason: string): Promise<RetainedSession[]> => {
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
  const auth = authPolicy(config);
  const server = new PgServer({
    host: config.listen.host,
    port: config.listen.port,
    maxMessageSize: config.limits.maxMessageSize,
    maxConnections: config.limits.maxConnections,
    tls: secureContext,
    auth,
    observer,
    slowStatementMs: config.log.slowStatementMs,
    startupTimeoutMs: config.limits.startupTimeoutMs,
    maxPreparedStatements: config.limits.maxPreparedStatements,
    maxPortals: config.limits.maxPortals,
    handlers: new EngineHandlerFactory(engine, config.database.name, {
      observer,
      guard,
      securityLog,
      ledgers,
      writer,
      rewriter: new CompatRewriter(config.database.name),
      maxContentBytes: config.ledger.maxContentBytes,
      statementTimeoutMs: config.limits.statementTimeoutMs,
      maxAppendBytes: config.limits.maxAppendBytes,
      advisoryLocks,
      declared,
      auditReport: () => auditor.latest,
      sessionCache,
      search: { vectors: search.vectors, macros: search.macros },
      erasure: {
        redact: async (request) => {
          const record = await redactor.redact(request);
          await writer.scrubJournal();
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
      },
      idleInTransactionTimeoutMs: config.limits.idleInTransactionTimeoutMs,
      // Clients' calls get the pool but a reserve, so that the writer, the applier and the audit always get through.
      engineSlots: new EngineSlots(Math.max(1, runtime.threadPoolSize - RESERVED_ENGINE_THREADS)),
    }),
    log,
  });
  let address: AddressInfo;
  try {
    address = await server.listen();
  } catch (err) {
    await search.close();
    await securityLog.close();
    await writer.close();
    merkle.close();
    internal.close();
    await engine.close();
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EADDRINUSE') {
      throw new StartupError(`port ${config.listen.port} on ${config.listen.host} is already in use; stop the other server or choose another port with --port`);
    }
    throw new StartupError(`cannot listen on ${config.listen.host}:${config.listen.port}: ${(err as Error).message}`);
  }
  auditor.start(config.ledger.verifyIntervalSeconds * 1000, config.ledger.watchIntervalSeconds * 1000);
  const retentionJob =
    config.ledger.retentionDays === 0
      ? null
      : new RetentionJob(
          () => retain(config.ledger.retentionDays, false, 'the retention job', `ledger.retentionDays = ${config.ledger.retentionDays}`),
          (err) => log.error({ err }, 'the retention job failed; it runs again within the hour'),
        );
  retentionJob?.start();
  checkpoints.start();
  search.worker?.start();
  const sinkNames = config.checkpoint.sinks.map((t) => sinkFor(t).name);
  if (sinkNames.length > 0) {
    log.info(
      { checkpointSinks: sinkNames },
      `signed checkpoints are written to ${sinkNames.join(', ')}; keep a copy where whoever can change the database cannot`,
    );
  } else if (config.database.path !== ':memory:') {
    log.warn('checkpoint.sinks is empty: no signed checkpoint leaves the database file, so an offline check has nothing to hold the file against');
  }
  let ops: OpsServer | null = null;
  let metricsAddress: AddressInfo | null = null;
  if (prometheus !== null) {
    ops = new OpsServer(prometheus, () => server.isListening);
    try {
      metricsAddress = await ops.listen(config.metrics.host, config.metrics.port as number);
    } catch (err) {
      await server.close(0);
      await auditor.stop();
      auditConn.close();
      await search.close();
      await checkpoints.close(0);
      await securityLog.close();
      await writer.close();
      merkle.close();
      internal.close();
      await engine.close();
      throw new StartupError(`cannot listen for metrics on ${config.metrics.host}:${String(config.metrics.port)}: ${(err as Error).message}`);
    }
  }
  let closing: Promise<void> | null = null;
  return {
    kind: 'duckdb',
    address,
    metricsAddress,
    server,
    engine,
    securityLog,
    writer,
    ledgers,
    auditor,
    sessionCache,
    merkle,
    checkpoints,
    embeddings: search.worker,
    retain: (days, dryRun, actor) => retain(days, dryRun, actor, `retention of sessions older than ${days} days, run by ${actor}`),
    close: () => {
      closing ??= (async () => {
        await server.close(config.limits.shutdownGraceMs);
        await retentionJob?.stop();
        await auditor.stop();
        auditConn.close();
        await search.close();
        await ops?.close();
        // The last checkpoint covers every acknowledged append, the refusals recorded before it included.
        await securityLog.close();
        await checkpoints.close(config.limits.shutdownGraceMs);
        await writer.close();
        merkle.sync();
        merkle.close();
        await Promise.all([retention.idle(), redactor.idle()]);
        erasureConn.close();
        retentionConn.close();
        internal.close();
        try {
          await engine.checkpoint();
        } catch (err) {
          log.warn({ err }, 'checkpoint at shutdown failed');
        }
        await engine.close();
        if (config.database.path !== ':memory:') await rewriteIfErased(config.database.path, config.database.compression, log).catch(() => undefined);
      })();
      return closing;
    },
  };
}

/** The configured embedders: one for the steps, and one for search texts, which waits less before it gives up. */
export function embeddersFor(c: Config['embedding'], observer: Observer): { readonly steps: Embedder; readonly queries: Embedder } {
  if (c.provider === 'builtin') {
    const builtin = new HashedEmbedder({ dimensions: c.dimensions });
    return { steps: builtin, queries: builtin };
  }
  const options = {
    url: c.url as string,
    model: c.model,
    dimensions: c.dimensions,
    apiKey: c.apiKey,
    timeoutMs: c.timeoutMs,
    batchSize: c.batchSize,
    maxRetries: c.maxRetries,
    sendDimensions: c.sendDimensions,
    events: {
      request: (seconds: number, ok: boolean) => observer.embeddingRequest(seconds, ok),
      retry: () => observer.embeddingFailed('retry'),
    },
  };
  return {
    steps: new OpenAIEmbedder(options),
    // A search is a client waiting: one retry, within ten seconds.
    queries: new OpenAIEmbedder({ ...options, maxRetries: Math.min(1, c.maxRetries), timeoutMs: Math.min(c.timeoutMs, 10_000) }),
  };
}

interface Search {
  readonly vectors: QueryVectors;
  readonly macros: readonly string[];
  readonly worker: EmbeddingWorker | null;
  close(): Promise<void>;
}

/** The vector table, the background embedding of selected steps, and cot_search()'s query side. */
async function openSearch(
  config: Config,
  engine: Engine,
  internal: EngineConnection,
  observer: Observer,
  log: Logger,
  /** The writer's applied ledger_seq; null when the steps ledger is damaged. */
  appliedSeq: (() => number) | null,
): Promise<Search> {
  const c = config.embedding;
  const embedders = embeddersFor(c, observer);
  const state = appliedSeq !== null ? await openVectorTable(internal, c.dimensions) : null;
  const mismatch = state === null ? null : vectorMismatch(state, c.model, c.dimensions);
  if (mismatch !== null && c.enabled) log.warn({ model: c.model }, `semantic search is off until the vectors match the configuration: ${mismatch}`);
  const vectors = new QueryVectors(embedders.queries, () =>
    !c.enabled ? 'embedding.enabled is false' : state === null ? 'the steps ledger is damaged' : mismatch,
  );
  await engine.registerFunction(vectors.engineFunction());
  const macros = searchMacros(c.dimensions);
  if (!c.enabled || appliedSeq === null || mismatch !== null) return { vectors, macros, worker: null, close: async () => undefined };
  const conn = await engine.connect();
  let unavailableSince: number | null = null;
  const worker = new EmbeddingWorker(conn, embedders.steps, {
    appliedSeq,
    observer,
    onUnavailable: (err, retryInMs) => {
      unavailableSince ??= Date.now();
      log.error(
        { err: err.message, provider: c.provider, url: c.url, queued: worker.queueDepth, retryInMs },
        'the embedding provider failed; selected steps wait in the queue (appends are not affected)',
      );
    },
    onRejected: (step, err) =>
      log.error({ traceId: step.traceId, err: err.message }, 'the embedding provider refused a step; it is skipped until the next start'),
    onError: (err) => log.error({ err }, 'embedding selected steps failed; retrying'),
    onRecovered: () => {
      log.info({ downSeconds: unavailableSince === null ? 0 : Math.round((Date.now() - unavailableSince) / 1000) }, 'the embedding provider answers again');
      unavailableSince = null;
    },
  });
  return {
    vectors,
    macros,
    worker,
    close: async () => {
      await worker.stop();
      conn.close();
    },
  };
}

/**
 * The checkpoint signing key: the configured key file; without one, a key
 * file beside the database, created on the first start (an in-memory
 * database signs with a key of its own lifetime).
 */
function loadSigner(config: Config, log: Logger): NoteSigner {
  if (config.checkpoint.keyFile !== null) return readKeyFile(config.checkpoint.keyFile);
  const name = `cotwire.local/${config.database.name}`;
  if (config.database.path === ':memory:') return parseSigner(generateKey(name).signerKey);
  const path = `${config.database.path}.key`;
  if (existsSync(path)) return readKeyFile(path);
  const verifierKey = writeKeyFile(path, name);
  log.warn(
    { keyFile: path, verifierKey },
    'created a checkpoint signing key beside the database; anyone who can rewrite the database can also sign with it. Generate one with `cotwire keygen`, keep it elsewhere, and set checkpoint.keyFile',
  );
  return readKeyFile(path);
}

/** Threads kept for the writer's journal, the applier, the audit and the server's own queries. */
const RESERVED_ENGINE_THREADS = 8;

/** What the process gives the server besides its configuration. */
export interface ServerRuntime {
  /** libuv's thread pool, which DuckDB's calls run on (cli.ts sizes it with UV_THREADPOOL_SIZE before it starts). */
  readonly threadPoolSize: number;
}

async function openEngine(path: string, compression: EngineCompression): Promise<Engine> {
  if (path !== ':memory:') {
    try {
      mkdirSync(dirname(path), { recursive: true });
    } catch (err) {
      throw new StartupError(`cannot create the directory for the database file ${path}: ${(err as Error).message}`);
    }
  }
  try {
    return await DuckDBEngine.open({ path, setup: engineSetup(), compression });
  } catch (err) {
    const reason = (err as Error).message.split('\n')[0] ?? 'unknown error';
    throw new StartupError(`cannot open the database file ${path}: ${reason}`);
  }
}

/** Creates one of the server's own ledgers if the database lacks it, chained with the current hash version. */
async function createServerLedger(conn: EngineConnection, name: string, ddl: string): Promise<void> {
  const [[exists]] = (await conn.query(
    `SELECT count(*) > 0 FROM system.main.duckdb_tables() WHERE database_name = current_database() AND schema_name = 'main' AND table_name = $1`,
    [name],
  )) as [[boolean]];
  if (exists) return;
  const [[catalog]] = (await conn.query('SELECT current_database()')) as [[string]];
  await conn.run('BEGIN');
  try {
    await conn.run(ddl);
    await conn.run(recordHashVersionSql({ catalog, schema: 'main', name }));
    await conn.run('COMMIT');
  } catch (err) {
    await conn.run('ROLLBACK');
    throw err;
  }
}

/** Rewrites a stopped server's database file now, and clears a pending rewrite. */
export async function compactDatabaseFile(
  path: string,
  compression: EngineCompression,
): Promise<{ readonly bytesBefore: number; readonly bytesAfter: number }> {
  const result = await rewriteDatabaseFile(path, compression);
  rmSync(`${path}.erased`, { force: true });
  return result;
}

/** Marks the database file for a rewrite: values were redacted or rows removed, and their bytes may linger in freed blocks. */
function markErased(path: string): void {
  if (path === ':memory:') return;
  const marker = `${path}.erased`;
  if (!existsSync(marker)) writeFileSync(marker, `${new Date().toISOString()}\n`, { mode: 0o600 });
}

/**
 * Rewrites the database file when something was erased from it: at the
 * stop, and at the start after a stop that did not get to it.
 */
async function rewriteIfErased(path: string, compression: EngineCompression, log: Logger): Promise<void> {
  const marker = `${path}.erased`;
  if (!existsSync(marker)) return;
  if (!existsSync(path)) {
    rmSync(marker, { force: true });
    return;
  }
  try {
    const { bytesBefore, bytesAfter } = await rewriteDatabaseFile(path, compression);
    rmSync(marker, { force: true });
    log.info({ database: path, bytesBefore, bytesAfter }, 'rewrote the database file, so that no redacted value or removed row survives in its freed blocks');
  } catch (err) {
    log.error(
      { err, database: path },
      `rewriting the database file after an erasure failed; it is retried at the next stop or start, or run \`cotwire compact --db ${path}\``,
    );
    throw err;
  }
}
