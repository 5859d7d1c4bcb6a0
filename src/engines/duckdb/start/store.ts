import { KEYS_SCHEMA } from '../catalog/foreign-keys.js';
import { serverShareMB, type Config } from '../../../config/schema.js';
import type { Engine, EngineConnection } from '../../../engine/port.js';
import { recordHashVersionSql } from '../../../ledger/chain/hash-version.js';
import type { LedgerCatalog, LedgerDamage } from '../../../ledger/chain/catalog.js';
import { addSaltColumnSql, HASH_VERSION_V3, type HashVersion, STEPS_DDL, STEPS_INDEX_DDL, STEPS_TABLE } from '../../../ledger/chain/schema.js';
import { LedgerShapes } from '../../../ledger/chain/shapes.js';
import { REDACTIONS_DDL, REDACTIONS_INDEX_DDL, REDACTIONS_TABLE } from '../../../ledger/erasure/redactions.js';
import { RETENTION_DDL, RETENTION_INDEX_DDL, RETENTION_TABLE } from '../../../ledger/erasure/retention-sql.js';
import { LOG_EVENTS_DDL, LOG_EVENTS_TABLE } from '../../../ledger/log/log-events.js';
import { CHECKPOINTS_DDL, CHECKPOINTS_TABLE } from '../../../ledger/log/checkpoint-schema.js';
import { SECURITY_EVENTS_DDL, SECURITY_EVENTS_TABLE } from '../../../ledger/security-events.js';
import { ANALYTICS_FUNCTIONS, AUDIT_SQL_FUNCTIONS, PROOF_SQL_FUNCTIONS, SEARCH_SQL_FUNCTIONS } from '../../../ledger/sql-functions.js';
import type { Logger } from '../../../log/logger.js';
import type { DisposeStack } from '../../../server/dispose-stack.js';
import { StartupError } from '../../../server/startup.js';
import { COMPAT_CATALOG, COTWIRE_SQL_FUNCTIONS } from '../catalog/compat.js';
import { Guard } from '../guard/guard.js';
import { duckdbLedgers } from '../ledger/catalog-source.js';
import { openEngine, rewriteIfErased } from './file.js';

/** The database file opened, with the server's own ledgers and the guard that protects them. */
export interface Store {
  readonly engine: Engine;
  /** The server's own connection: its ledgers' DDL, the catalog's reads. */
  readonly internal: EngineConnection;
  readonly guard: Guard;
  readonly ledgers: LedgerCatalog;
  /** Ledgers dropped or reshaped behind the server, which fail closed. */
  readonly damage: readonly LedgerDamage[];
  /** Whether `_cot_steps` is served (not damaged). */
  readonly stepsServed: boolean;
}

/**
 * Opens the database file (rewriting it first if an erasure's rewrite is
 * pending), creates the server's own ledgers in a new database, and reads
 * which ledgers are damaged. At the stop, once `started()` says the server
 * ran, the engine checkpoints its WAL into the file and the file is
 * rewritten if anything was erased from it.
 */
export async function openStore(config: Config, log: Logger, stack: DisposeStack, started: () => boolean): Promise<Store> {
  const path = config.database.path;
  // A rewrite that fails (a full disk) is logged and retried at the next stop: the erasure itself is done.
  if (path !== ':memory:') await rewriteIfErased(path, config.database.compression, log).catch(() => undefined);
  // The server's own buffers are counted in the same ceiling: the engine gets what they leave.
  const memory = { memoryMB: config.limits.memoryMB - serverShareMB(config.limits), spillMB: config.limits.spillMB };
  const engine = stack.use(await openEngine(path, config.database.compression, memory), async (e) => {
    if (started()) {
      try {
        await e.checkpoint();
      } catch (err) {
        log.warn({ err }, 'checkpoint at shutdown failed');
      }
    }
    await e.close();
    if (started() && path !== ':memory:') await rewriteIfErased(path, config.database.compression, log).catch(() => undefined);
  });
  const guard = await Guard.create({
    prefixes: config.guard.protectedPrefixes,
    reservedFunctions: new Set([
      ...(await engine.builtinFunctionNames()),
      ...COTWIRE_SQL_FUNCTIONS,
      ...PROOF_SQL_FUNCTIONS,
      ...ANALYTICS_FUNCTIONS,
      ...AUDIT_SQL_FUNCTIONS,
      ...SEARCH_SQL_FUNCTIONS,
      'cot_clock_micros',
    ]),
    engineSettings: await engine.settingNames(),
    reservedNames: [
      {
        name: COMPAT_CATALOG,
        message: "is reserved for the server's PostgreSQL catalog",
        hint: 'Query pg_catalog and information_schema by their PostgreSQL names.',
      },
      {
        name: KEYS_SCHEMA,
        message: "is reserved for the server's record of foreign keys",
        hint: 'Read the keys in pg_constraint or information_schema.referential_constraints.',
      },
    ],
  });
  // Server-internal connection: the default ledger and the security ledger exist before any client connects.
  const internal = stack.use(await engine.connect(), (c) => c.close());
  let shapes: LedgerShapes;
  try {
    shapes = LedgerShapes.open(path === ':memory:' ? null : LedgerShapes.pathFor(path));
  } catch (err) {
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
    [LOG_EVENTS_TABLE, LOG_EVENTS_DDL],
  ] as const) {
    if (shapes.expected('main', name) === undefined) await createServerLedger(internal, name, ddl, config.ledger.hashVersion);
  }
  const ledgers = duckdbLedgers(internal, (name) => guard.names.isProtected(name), shapes);
  const damage = await ledgers.damaged();
  for (const d of damage) {
    log.error(
      { ledger: `${d.schema}.${d.name}`, kind: d.kind },
      `ledger ${d.schema}.${d.name} is damaged: ${d.reason}; it fails closed (appends refused), the other ledgers are served. See docs/security.md, "Damaged ledgers"`,
    );
  }
  const served = (name: string): boolean => !damage.some((d) => d.schema === 'main' && d.name === name);
  if (served(STEPS_TABLE)) for (const ddl of STEPS_INDEX_DDL) await internal.run(ddl);
  if (served(REDACTIONS_TABLE)) await internal.run(REDACTIONS_INDEX_DDL);
  if (served(RETENTION_TABLE)) await internal.run(RETENTION_INDEX_DDL);
  return { engine, internal, guard, ledgers, damage, stepsServed: served(STEPS_TABLE) };
}

/** Creates one of the server's own ledgers if the database lacks it, chained with the current hash version. */
async function createServerLedger(conn: EngineConnection, name: string, ddl: string, version: HashVersion): Promise<void> {
  const [[exists]] = (await conn.query(
    `SELECT count(*) > 0 FROM system.main.duckdb_tables() WHERE database_name = current_database() AND schema_name = 'main' AND table_name = $1`,
    [name],
  )) as [[boolean]];
  if (exists) return;
  const [[catalog]] = (await conn.query('SELECT current_database()')) as [[string]];
  await conn.run('BEGIN');
  try {
    await conn.run(ddl);
    if (version === HASH_VERSION_V3) await conn.run(addSaltColumnSql({ catalog, schema: 'main', name }));
    await conn.run(recordHashVersionSql({ catalog, schema: 'main', name }, version));
    await conn.run('COMMIT');
  } catch (err) {
    await conn.run('ROLLBACK');
    throw err;
  }
}
