import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api';
import { FIXTURE } from '../fixture.js';

/** The ledgers of the fixture, qualified as both databases name them. */
export const LEDGER_TABLES = ['test.main._cot_steps', 'test.main."_COT_Events"', 'test.audit._cot_x'] as const;

/** The built-in functions, whose names a user macro must not take. */
export const BUILTINS = '(SELECT function_name FROM duckdb_functions() WHERE internal)';

const CHAIN_COLUMNS = ['step_index INTEGER', 'prev_hash VARCHAR', 'current_hash VARCHAR', 'created_at TIMESTAMPTZ', 'ledger_seq BIGINT'];

/** Global engine settings a client could change for everyone. */
const SETTINGS = [
  'threads',
  'memory_limit',
  'default_order',
  'default_null_order',
  'default_collation',
  'preserve_insertion_order',
  'enable_profiling',
  'checkpoint_threshold',
  'errors_as_json',
  'immediate_transaction_mode',
];

const LIKE_LEDGER = (column: string): string => `lower(${column}) LIKE '\\_cot%' ESCAPE '\\'`;

/**
 * Everything the differential suite calls protected, as one string: the
 * ledgers' rows that `rows` selects, every object with a ledger name (temp
 * ones included) with its definition, columns, comments and indexes, macros
 * that shadow a built-in or use a ledger or cotwire name, the catalog
 * database's objects, the attached databases and the global settings.
 */
export function protectedStateSql(rows: string, builtins: string, withFunctions = true, withGlobals = true): string {
  const parts = [
    ...LEDGER_TABLES.map((t) => `(SELECT count(*)::VARCHAR || ':' || coalesce(sum(hash(ledger_row))::VARCHAR, '') FROM ${t} ledger_row WHERE ${rows})`),
    `(SELECT list_sort(list(database_name || '.' || schema_name || '.' || table_name || ':' || coalesce(sql, '') || ':' || coalesce(comment, '')))::VARCHAR FROM duckdb_tables() WHERE ${LIKE_LEDGER('table_name')})`,
    `(SELECT list_sort(list(table_name || '.' || column_name || ':' || data_type || ':' || coalesce(column_default, '') || ':' || coalesce(comment, '')))::VARCHAR FROM duckdb_columns() WHERE ${LIKE_LEDGER('table_name')})`,
    `(SELECT list_sort(list(table_name || '.' || index_name))::VARCHAR FROM duckdb_indexes() WHERE ${LIKE_LEDGER('table_name')})`,
    `(SELECT list_sort(list(database_name || '.' || schema_name || '.' || view_name || ':' || sql))::VARCHAR FROM duckdb_views() WHERE NOT internal AND (${LIKE_LEDGER('view_name')} OR database_name = 'cotwire_pg'))`,
    `(SELECT list_sort(list(schema_name || '.' || table_name))::VARCHAR FROM duckdb_tables() WHERE database_name = 'cotwire_pg')`,
    // Listing functions costs more than everything else together: only a statement that names them can add one.
    withFunctions
      ? `(SELECT list_sort(list(DISTINCT database_name || '.' || schema_name || '.' || function_name))::VARCHAR FROM duckdb_functions() WHERE NOT internal AND database_name <> 'cotwire_pg'
       AND (function_name IN ${builtins} OR ${LIKE_LEDGER('function_name')} OR lower(function_name) LIKE 'cot\\_%' ESCAPE '\\'))`
      : `'functions unread'`,
    // Databases and settings change only outside transactions (ATTACH, DETACH, SET, PRAGMA).
    withGlobals
      ? `(SELECT list_sort(list(database_name))::VARCHAR FROM duckdb_databases() WHERE database_name NOT IN ('system', 'temp'))`
      : `'databases unread'`,
    withGlobals
      ? `(SELECT list_sort(list(name || '=' || value))::VARCHAR FROM duckdb_settings() WHERE name IN (${SETTINGS.map((s) => `'${s}'`).join(', ')}))`
      : `'settings unread'`,
  ];
  return `SELECT concat_ws(' | ', ${parts.join(', ')})`;
}

/** The fixture as cotwire holds it, in one round trip. */
const SETUP = [
  "ATTACH ':memory:' AS test; USE test",
  FIXTURE,
  ...LEDGER_TABLES.flatMap((table) => [
    ...CHAIN_COLUMNS.map((column) => `ALTER TABLE ${table} ADD COLUMN ${column}`),
    `UPDATE ${table} SET step_index = 0, prev_hash = '', current_hash = 'h', created_at = TIMESTAMPTZ '2026-01-01 00:00:00+00', ledger_seq = 1`,
  ]),
  "ATTACH ':memory:' AS cotwire_pg; CREATE SCHEMA cotwire_pg.pg; CREATE VIEW cotwire_pg.pg.pg_class AS SELECT 1 AS oid; CREATE SEQUENCE s1",
].join(';\n');

/** Statements whose effect a rolled-back transaction would not undo, or that manage transactions themselves. */
const NOT_TRANSACTIONAL =
  /\b(ATTACH|DETACH|TRANSACTION|CHECKPOINT|VACUUM|PRAGMA|BEGIN|COMMIT|ROLLBACK|ABORT|RESET|USE|START)\b|(?<!\bUPDATE\b[^;]*)\bSET\b|(?<!\bCASE\b[^;]*)\bEND\b/i;

/** On bare DuckDB a ledger row is protected once it carries chain values: a plain append (chain NULL) is what the writer does too. */
const CHAINED_ROWS = 'NOT (step_index IS NULL AND prev_hash IS NULL AND current_hash IS NULL AND created_at IS NULL AND ledger_seq IS NULL)';

/**
 * Bare DuckDB holding the fixture as cotwire holds it: the same database
 * name, the ledgers with chain columns, a stand-in for cotwire's catalog
 * database. Each statement's effect is read by comparing the protected
 * state before and after it on the same connection (so a transaction it
 * leaves open counts).
 */
export class BareOracle {
  private instance: DuckDBInstance | null = null;
  private conn: DuckDBConnection | null = null;
  private state = '';
  private ran = 0;

  private async open(): Promise<DuckDBConnection> {
    this.conn?.closeSync();
    // One instance serves every database: a new connection drops what the last one held
    // (temporary objects, prepared statements, USE), and the fixture's databases are attached anew.
    const instance = this.instance ?? (await DuckDBInstance.create(':memory:'));
    const conn = await instance.connect();
    await conn.run('USE memory; DETACH DATABASE IF EXISTS test; DETACH DATABASE IF EXISTS cotwire_pg');
    await conn.run(SETUP);
    this.instance = instance;
    this.conn = conn;
    this.state = await this.read(true);
    this.quickStates = new Map([
      ['false,false', await this.read(false, false)],
      ['true,false', await this.read(true, false)],
      ['false,true', await this.read(false, true)],
      ['true,true', this.state],
    ]);
    this.ran = 0;
    return conn;
  }

  /** The protected state as each cheaper reading of it sees it. */
  private quickStates = new Map<string, string>();

  private async read(withFunctions: boolean, withGlobals = true): Promise<string> {
    const conn = this.conn as DuckDBConnection;
    const query = async (): Promise<string> =>
      String((await conn.runAndReadAll(protectedStateSql(CHAINED_ROWS, BUILTINS, withFunctions, withGlobals))).getRows()[0]?.[0]);
    try {
      return await query();
    } catch {
      // A failed statement leaves its transaction aborted: what it wrote is gone with it.
      await conn.run('ROLLBACK').catch(() => undefined);
      return query().catch((e: unknown) => `error: ${(e as Error).message.split('\n')[0] ?? ''}`);
    }
  }

  /** Whether `sql` changes protected state on bare DuckDB, and DuckDB's error if it failed. */
  changes(sql: string): Promise<{ changed: boolean; error: string | null }> {
    return this.once(sql);
  }

  /**
   * The same question on a database just opened, so that nothing an earlier
   * statement left behind is taken for this one's effect.
   */
  async confirm(sql: string): Promise<{ changed: boolean; error: string | null }> {
    await this.open();
    return this.once(sql);
  }

  private async once(sql: string): Promise<{ changed: boolean; error: string | null }> {
    const conn = this.conn === null || this.ran >= 1000 ? await this.open() : this.conn;
    this.ran++;
    const functions = /macro|function/i.test(sql);
    // A statement that does not manage transactions or touch what transactions do not cover runs
    // inside one that is rolled back afterwards: its effect is read, then undone, at no rebuild.
    const contained = !NOT_TRANSACTIONAL.test(sql);
    if (contained) await conn.run('BEGIN TRANSACTION');
    let error: string | null = null;
    try {
      await conn.run(sql);
    } catch (err) {
      error = (err as Error).message.split('\n')[0] ?? 'error';
    }
    const after = await this.read(functions, !contained);
    await conn.run('ROLLBACK').catch(() => undefined);
    await conn.run('DEALLOCATE PREPARE p').catch(() => undefined);
    const changed = after !== this.quickStates.get(`${functions},${!contained}`);
    // A contained statement was rolled back; whatever else another did (USE, DETACH, a setting,
    // a committed change) is undone by starting again.
    if (!contained) await this.open();
    return { changed, error };
  }

  close(): void {
    this.conn?.closeSync();
    this.instance?.closeSync();
  }
}
