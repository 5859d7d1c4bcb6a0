import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api';
import type { EngineConnection } from '../../src/engine/port.js';
import { startTestServer, type TestServer } from '../fixtures/server.js';

/** The data every security test protects or uses, loaded identically into bare DuckDB and into cotwire. */
export const FIXTURE = `
CREATE TABLE _cot_steps (id INTEGER PRIMARY KEY, session_id VARCHAR, content VARCHAR, confidence DOUBLE);
INSERT INTO _cot_steps VALUES (1, 's1', 'observe', 0.5), (2, 's1', 'decide', 0.9), (3, 's2', 'act', 0.7);
CREATE TABLE "_COT_Events" (id INTEGER PRIMARY KEY, kind VARCHAR);
INSERT INTO "_COT_Events" VALUES (1, 'start'), (2, 'stop');
CREATE SCHEMA audit;
CREATE TABLE audit._cot_x (id INTEGER, note VARCHAR);
INSERT INTO audit._cot_x VALUES (1, 'n1'), (2, 'n2');
CREATE TABLE notes (id INTEGER PRIMARY KEY, body VARCHAR);
INSERT INTO notes VALUES (1, 'hello'), (2, 'world'), (3, 'again');
CREATE TABLE scratch (id INTEGER, v VARCHAR);
CREATE TABLE audit.log (id INTEGER, line VARCHAR);
INSERT INTO audit.log VALUES (1, 'x');
`;

export type Query = (sql: string) => Promise<unknown[][]>;

const PROTECTED = `lower(table_name) LIKE '\\_cot%' ESCAPE '\\' AND table_name <> '_cot_security_events'`;

function json(v: unknown): string {
  return JSON.stringify(v, (_, x: unknown) => (typeof x === 'bigint' ? x.toString() : x));
}

/**
 * Everything an attack could change that must not change: the ledgers'
 * definitions, rows, comments and indexes, objects that could shadow them,
 * the built-in functions' answers and the engine's global settings. Read
 * from a connection that bypasses cotwire.
 */
export async function protectedState(query: Query): Promise<string> {
  const parts: unknown[] = [];
  // A probe that fails (the table is gone) is itself part of the state.
  const q: Query = (sql) => query(sql).catch((err: unknown) => [[`error: ${(err as Error).message.split('\n')[0]}`]]);
  const tables = await q(`SELECT schema_name, table_name, sql, comment FROM duckdb_tables() WHERE ${PROTECTED} ORDER BY ALL`);
  parts.push(tables);
  for (const [schema, table] of tables as Array<[string, string]>) {
    parts.push(await q(`SELECT * FROM "${schema}"."${table.replaceAll('"', '""')}" ORDER BY ALL`));
  }
  parts.push(await q(`SELECT table_name, column_name, comment, column_default FROM duckdb_columns() WHERE ${PROTECTED} ORDER BY ALL`));
  parts.push(await q(`SELECT table_name, index_name, sql FROM duckdb_indexes() WHERE ${PROTECTED} ORDER BY ALL`));
  parts.push(await q(`SELECT view_name FROM duckdb_views() WHERE NOT internal AND lower(view_name) LIKE '\\_cot%' ESCAPE '\\' ORDER BY ALL`));
  parts.push(await q(`SELECT sequence_name FROM duckdb_sequences() WHERE lower(sequence_name) LIKE '\\_cot%' ESCAPE '\\' ORDER BY ALL`));
  parts.push(await q(`SELECT type_name FROM duckdb_types() WHERE lower(type_name) LIKE '\\_cot%' ESCAPE '\\' ORDER BY ALL`));
  parts.push(
    await q(
      `SELECT schema_name, function_name FROM duckdb_functions() WHERE NOT internal AND function_name NOT IN ('version', 'current_user', 'session_user', 'current_database') ORDER BY ALL`,
    ),
  );
  parts.push(await q(`SELECT database_name FROM duckdb_databases() WHERE NOT internal ORDER BY ALL`));
  parts.push(await q(`SELECT database_name, schema_name FROM duckdb_schemas() ORDER BY ALL`));
  parts.push(
    await q(
      `SELECT current_schema(), sha256('probe'), md5('probe'), lower('ABC'), upper('abc'), length('abc'), now() > TIMESTAMPTZ '2020-01-01', gen_random_uuid() IS NOT NULL, (SELECT x FROM (VALUES (2), (1)) t(x) ORDER BY x LIMIT 1)`,
    ),
  );
  parts.push(
    await q(
      `SELECT name, value FROM duckdb_settings() WHERE name IN ('threads', 'memory_limit', 'default_order', 'default_null_order', 'default_collation', 'enable_profiling', 'preserve_insertion_order', 'checkpoint_threshold', 'wal_autocheckpoint', 'max_memory', 'enable_object_cache', 'immediate_transaction_mode', 'enable_progress_bar', 'errors_as_json', 'search_path') ORDER BY ALL`,
    ),
  );
  parts.push(await q(`SELECT count(*) FROM _cot_steps`));
  return json(parts);
}

/** A bare DuckDB database with the fixture: the attacks are first shown to work here. */
export class BareDuckDB {
  private constructor(
    readonly dir: string,
    readonly instance: DuckDBInstance,
    readonly conn: DuckDBConnection,
  ) {}

  static async create(root: string): Promise<BareDuckDB> {
    const dir = mkdtempSync(join(root, 'bare-'));
    const instance = await DuckDBInstance.create(join(dir, 'test.duckdb'));
    const conn = await instance.connect();
    await conn.run(FIXTURE);
    writeHostFiles(dir);
    return new BareDuckDB(dir, instance, conn);
  }

  readonly query: Query = async (sql) => (await this.conn.runAndReadAll(sql)).getRowsJS() as unknown[][];

  /** The state seen by the attacking connection and by a fresh one (global effects show there). */
  async state(): Promise<string> {
    const fresh = await this.instance.connect();
    try {
      return `${await protectedState(this.query)}|${await protectedState(async (sql) => (await fresh.runAndReadAll(sql)).getRowsJS() as unknown[][])}|${hostState(this.dir)}`;
    } finally {
      fresh.closeSync();
    }
  }

  /** Closes the database and deletes its directory: hundreds are made per run. */
  close(): void {
    this.conn.closeSync();
    this.instance.closeSync();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Files an attack may read, and the directory where it would leave files. */
export function writeHostFiles(dir: string): void {
  writeFileSync(join(dir, 'secret.csv'), 'token\nhunter2\n');
  writeFileSync(join(dir, 'forged.csv'), '9,s9,forged,1.0\n');
  writeFileSync(join(dir, 'forged2.csv'), '9,forged\n');
  mkdirSync(join(dir, 'out'), { recursive: true });
}

/** What is on disk next to the database: new files, and the write-ahead log's size. */
export function hostState(dir: string, includeWal = true): string {
  const out = readdirSync(join(dir, 'out')).sort();
  const wal = join(dir, 'test.duckdb.wal');
  // On bare DuckDB a CHECKPOINT shows as a shorter log. Through cotwire the log
  // grows with every refusal that is recorded, so it is not compared there.
  const walSize = includeWal && existsSync(wal) ? statSync(wal).size : -1;
  return json([
    out,
    walSize,
    readdirSync(dir)
      .filter((f) => !f.startsWith('test.duckdb') && f !== 'tmp' && !f.startsWith('.tmp'))
      .sort(),
  ]);
}

export function tempRoot(): string {
  return mkdtempSync(join(tmpdir(), 'cotwire-guard-'));
}

/** A cotwire server holding the security fixture, with a connection that bypasses the server. */
export async function startFixtureServer(
  overrides: Record<string, unknown> = {},
  admin: { user?: string; password?: string } = {},
): Promise<{ server: TestServer; internal: EngineConnection }> {
  // No checkpoint during the attacks: the checkpoint ledger is part of the state they must not change.
  const server = await startTestServer({ checkpoint: { keyFile: null, intervalSeconds: 86_400, maxLeaves: 100_000_000, sinks: [] }, ...overrides });
  const internal = await server.duckdb.engine.connect();
  // The security fixture brings its own _cot_steps. Through cotwire its ledgers are real
  // ones: created by the server (which adds the chain columns) and appended by the writer.
  await internal.run('DROP TABLE main._cot_steps');
  server.running.ledgers.invalidate();
  const creator = await server.client(admin);
  // One statement at a time: a ledger takes appends once the transaction that created it commits.
  for (const statement of FIXTURE.split(';\n').filter((x) => x.trim() !== '')) await creator.query(statement);
  await creator.end();
  return { server, internal };
}
