import type { AddressInfo } from 'node:net';
import type { Config } from '../../config/schema.js';
import { redactUrl } from '../../config/load.js';
import { PgBackend } from './adapter/backend.js';
import { PostgresConnection, urlAs } from './adapter/connection.js';
import { PgError } from '../../errors/pg-error.js';
import { SqlState } from '../../errors/sqlstate.js';
import { ProtectedNames } from '../../guard/names.js';
import { PostgresGuard } from './guard.js';
import { ANALYTICS_FUNCTIONS } from '../../ledger/sql-functions.js';
import { AUDIT_SQL_FUNCTIONS } from '../../ledger/sql-functions.js';
import { LedgerCatalog } from '../../ledger/chain/catalog.js';
import { readPostgresTables } from './ledger/catalog.js';
import { pgLedgerDdl } from './ledger/ledger-create.js';
import { pgLedgerFunctions } from './dialect/verify-sql.js';
import { pgRoles } from './ledger/names.js';
import { PgLedgerWriter } from './ledger/writer.js';
import { installPostgres, leadSigning, releaseSigning, rolePasswords, sharedSignerKey } from './ledger/install.js';
import { CHECKPOINTS_TABLE } from '../../ledger/log/checkpoint-schema.js';
import { CheckpointIssuer } from '../../ledger/log/checkpoints.js';
import { sinkFor } from '../../ledger/log/checkpoint-sinks.js';
import { generateKey, parseSigner } from '../../ledger/log/note.js';
import { PG_SCHEMA } from './ledger/names.js';
import { readKeyFile } from '../../ledger/log/signing-key.js';
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { PROOF_SQL_FUNCTIONS } from '../../ledger/sql-functions.js';
import { SEARCH_SQL_FUNCTIONS } from '../../ledger/sql-functions.js';
import { SecurityEventLog } from '../../ledger/security-events.js';
import type { Logger } from '../../log/logger.js';
import { authPolicy, checkListenAuth, loadTls, StartupError } from '../../server/startup.js';
import { OpsServer, PrometheusObserver } from '../../server/metrics.js';
import { NO_OBSERVER } from '../../observe/observer.js';
import { PgServer } from '../../server/server.js';
import { ProxyHandlerFactory } from './handler/factory.js';

/**
 * The composition root of a server whose engine is PostgreSQL
 * (engine.kind: postgres). It shares the wire front, authentication, the
 * roles and the writer's chain with the DuckDB server, and leaves the rest
 * to PostgreSQL: each client connection gets a backend of its own, as a role
 * that can read the ledgers and not change them (docs/scaling.md).
 */

export interface RunningPostgresServer {
  readonly kind: 'postgres';
  readonly address: AddressInfo;
  readonly metricsAddress: AddressInfo | null;
  readonly server: PgServer;
  readonly writer: PgLedgerWriter;
  readonly ledgers: LedgerCatalog;
  readonly securityLog: SecurityEventLog;
  readonly checkpoints: CheckpointIssuer;
  /** This instance's name in the signing lease. */
  readonly instance: string;
  close(): Promise<void>;
}

export async function startPostgresServer(config: Config, log: Logger): Promise<RunningPostgresServer> {
  checkListenAuth(config);
  const url = config.engine.url;
  if (url === null) throw new StartupError('engine.kind is postgres, but engine.url is not set');
  const secureContext = loadTls(config);
  const prefix = config.engine.rolePrefix;
  const roles = pgRoles(prefix);
  let admin: PostgresConnection;
  try {
    admin = await PostgresConnection.open(url, 'cotwire');
  } catch (err) {
    throw new StartupError(`cannot connect to the PostgreSQL engine at ${redactUrl(url)}: ${(err as Error).message}`);
  }
  const closers: Array<() => Promise<void> | void> = [() => admin.close()];
  const closeAll = async (): Promise<void> => {
    for (const c of closers.reverse()) await c();
  };
  try {
    const names = new ProtectedNames(config.guard.protectedPrefixes);
    const report = await installPostgres(admin, prefix, (n) => names.isProtected(n));
    for (const action of report.actions) log.info({ engine: redactUrl(url) }, `init-postgres: ${action}`);
    const passwords = await rolePasswords(admin, prefix);
    const writerUrl = urlAs(url, roles.writer, passwords.writer);
    const clientUrl = urlAs(url, roles.client, passwords.client);
    const prometheus = config.metrics.port === null ? null : new PrometheusObserver();
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
    const writerConn = await PostgresConnection.open(writerUrl, 'cotwire writer', { pipeline: true, prepare: true });
    closers.push(() => writerConn.close());
    const writer = await PgLedgerWriter.open(writerConn, {
      observer,
      embeddingSample: { rate: config.ledger.embeddingSampleRate, alwaysTypes: new Set(config.ledger.embeddingAlwaysTypes) },
    });
    closers.push(() => writer.close());
    const signer =
      config.checkpoint.keyFile !== null
        ? readKeyFile(config.checkpoint.keyFile)
        : parseSigner(await sharedSignerKey(admin, () => generateKey(`cotwire.local/${config.database.name}`).signerKey));
    const leaseConn = await PostgresConnection.open(writerUrl, 'cotwire signer');
    closers.push(() => leaseConn.close());
    const instance = `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
    const leaseMs = 2 * config.checkpoint.intervalSeconds * 1000 + 5000;
    const checkpointTable = (await ledgers.all()).find((t) => t.name === CHECKPOINTS_TABLE) ?? null;
    const checkpoints = new CheckpointIssuer(
      writer,
      {
        size: async () => Number(((await leaseConn.query(`SELECT size FROM ${PG_SCHEMA}.log_head`)) as [[bigint]])[0][0]),
        root: async (n) => Buffer.from(((await leaseConn.query('SELECT public.cot_log_root($1)', [String(n)])) as [[string]])[0][0], 'base64'),
        // A commit in PostgreSQL is durable: its nodes with it.
        sync: () => undefined,
      },
      checkpointTable,
      signer,
      config.checkpoint.sinks.map((t) => sinkFor(t)),
      {
        intervalMs: config.checkpoint.intervalSeconds * 1000,
        maxLeaves: config.checkpoint.maxLeaves,
        onSinkError: (sink, err, attempt) => log.warn({ err, sink, attempt }, 'writing a checkpoint to a sink failed; retrying'),
        onIssueError: (err) => log.error({ err }, 'issuing a checkpoint failed'),
        lead: async () => {
          if (!(await leadSigning(leaseConn, instance, leaseMs))) return null;
          const [last] = (await leaseConn.query(`SELECT tree_size, ledger_seq FROM public.${CHECKPOINTS_TABLE} ORDER BY ledger_seq DESC LIMIT 1`)) as Array<
            [bigint, bigint]
          >;
          return last === undefined ? { size: 0, record: 0 } : { size: Number(last[0]), record: Number(last[1]) };
        },
      },
      null,
    );
    closers.push(async () => {
      await checkpoints.close(config.limits.shutdownGraceMs);
      await releaseSigning(leaseConn, instance).catch(() => undefined);
    });
    const securityLog = await SecurityEventLog.open(ledgers, writer, (err) => log.error({ err }, 'recording a security event failed'));
    closers.push(() => securityLog.close());
    // The server's own DDL runs on a connection of its own, as the owner, one statement at a time.
    const owner = await PostgresConnection.open(url, 'cotwire owner');
    closers.push(() => owner.close());
    let ddl: Promise<void> = Promise.resolve();
    const createLedger = (create: Record<string, unknown>): Promise<void> => {
      const run = ddl.then(async () => {
        const made = pgLedgerDdl(create, roles);
        const [[exists]] = (await owner.query(`SELECT to_regclass($1) IS NOT NULL`, [`public."${made.name.replaceAll('"', '""')}"`])) as [[boolean]];
        if (exists) {
          if (made.ifNotExists) return;
          throw new PgError(SqlState.DuplicateTable, `relation "${made.name}" already exists`);
        }
        await owner.run('BEGIN');
        try {
          await owner.run(`SET LOCAL ROLE ${roles.owner}`);
          for (const sql of made.statements) await owner.run(sql);
          // Read in this transaction, which alone sees the new table yet.
          const table = await new LedgerCatalog(owner, (n) => names.isProtected(n), null, readPostgresTables(prefix)).find(['main', made.name]);
          if (table !== null) for (const sql of pgLedgerFunctions(table, roles)) await owner.run(sql);
          await owner.run('COMMIT');
        } catch (err) {
          await owner.run('ROLLBACK').catch(() => undefined);
          throw err;
        }
        ledgers.created(made.name);
      });
      ddl = run.catch(() => undefined);
      return run;
    };
    const server = new PgServer({
      host: config.listen.host,
      port: config.listen.port,
      maxMessageSize: config.limits.maxMessageSize,
      maxConnections: config.limits.maxConnections,
      tls: secureContext,
      auth: authPolicy(config),
      observer,
      slowStatementMs: config.log.slowStatementMs,
      startupTimeoutMs: config.limits.startupTimeoutMs,
      maxPreparedStatements: config.limits.maxPreparedStatements,
      maxPortals: config.limits.maxPortals,
      handlers: new ProxyHandlerFactory(
        (applicationName) => PgBackend.open(clientUrl, applicationName === '' ? 'cotwire client' : applicationName),
        { guard, securityLog, observer },
        {
          ledgers,
          writer,
          maxContentBytes: config.ledger.maxContentBytes,
          maxAppendBytes: config.limits.maxAppendBytes,
          query: (sql, params) => admin.query(sql, params),
          createLedger,
          idleInTransactionTimeoutMs: config.limits.idleInTransactionTimeoutMs,
        },
        config.limits.statementTimeoutMs,
      ),
      log,
    });
    let address: AddressInfo;
    try {
      address = await server.listen();
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'EADDRINUSE') {
        throw new StartupError(
          `port ${config.listen.port} on ${config.listen.host} is already in use; stop the other server or choose another port with --port`,
        );
      }
      throw new StartupError(`cannot listen on ${config.listen.host}:${config.listen.port}: ${(err as Error).message}`);
    }
    let ops: OpsServer | null = null;
    let metricsAddress: AddressInfo | null = null;
    if (prometheus !== null) {
      ops = new OpsServer(prometheus, () => server.isListening);
      try {
        metricsAddress = await ops.listen(config.metrics.host, config.metrics.port as number);
      } catch (err) {
        await server.close(0);
        throw new StartupError(`cannot listen for metrics on ${config.metrics.host}:${String(config.metrics.port)}: ${(err as Error).message}`);
      }
    }
    checkpoints.start();
    log.info({ engine: redactUrl(url), roles, instance }, `the engine is PostgreSQL ${report.serverVersion}`);
    let closing: Promise<void> | null = null;
    return {
      kind: 'postgres',
      address,
      metricsAddress,
      server,
      writer,
      ledgers,
      securityLog,
      checkpoints,
      instance,
      close: () => {
        closing ??= (async () => {
          await server.close(config.limits.shutdownGraceMs);
          await ops?.close();
          await closeAll();
        })();
        return closing;
      },
    };
  } catch (err) {
    await closeAll();
    // What the engine says (a role of another database, a missing privilege) is for the operator, in one line.
    if (err instanceof PgError)
      throw new StartupError(`the PostgreSQL engine at ${redactUrl(url)}: ${err.message}${err.hint === undefined ? '' : ` (${err.hint})`}`);
    throw err;
  }
}

async function loadGuardParser(): Promise<void> {
  const { loadModule } = await import('libpg-query');
  await loadModule();
}
