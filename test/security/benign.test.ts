import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rmSync } from 'node:fs';
import type pg from 'pg';
import type { EngineConnection } from '../../src/engine/port.js';
import type { TestServer } from '../fixtures/server.js';
import { BENIGN } from './benign.js';
import { BareDuckDB, startFixtureServer, tempRoot } from './fixture.js';

let server: TestServer;
let internal: EngineConnection;
let client: pg.Client;
let bare: BareDuckDB;
let root: string;

const raw = { getTypeParser: () => (v: string) => v } as unknown as pg.CustomTypesConfig;

/** A bare DuckDB value in PostgreSQL's text form, for the simple types the benign statements return. */
function text(v: unknown): string | null {
  if (v === null || v === undefined) return null;
  if (typeof v === 'boolean') return v ? 't' : 'f';
  return String(v);
}

beforeAll(async () => {
  ({ server, internal } = await startFixtureServer());
  client = await server.client();
  root = tempRoot();
  bare = await BareDuckDB.create(root);
});

afterAll(async () => {
  bare.close();
  internal.close();
  await server[Symbol.asyncDispose]();
  rmSync(root, { recursive: true, force: true });
});

/** Columns cotwire adds to a ledger it creates (with a cotwire/v3 ledger's salt); bare DuckDB has no such thing. */
const CHAIN = new Set(['step_index', 'prev_hash', 'current_hash', 'created_at', 'ledger_seq', 'row_salt']);

/**
 * Ordinary tables and ledgers alike, as both databases should hold them
 * after each statement: every column a client writes (the chain columns
 * cotwire adds to new ledgers are left out).
 */
async function dataState(q: (sql: string) => Promise<unknown[][]>): Promise<string> {
  const tables = await q(
    "SELECT schema_name, table_name FROM duckdb_tables() WHERE table_name NOT IN ('_cot_security_events', '_cot_checkpoints', '_cot_embeddings', '_cot_redactions', '_cot_retention', '_cot_log_events') AND NOT temporary AND database_name <> 'cotwire_pg' AND schema_name <> '_cot_catalog' ORDER BY ALL",
  );
  const parts: unknown[] = [tables];
  for (const [schema, table] of tables as Array<[string, string]>) {
    const columns = (await q(`SELECT column_name FROM duckdb_columns() WHERE schema_name = '${schema}' AND table_name = '${table}' ORDER BY column_index`))
      .map((r) => String(r[0]))
      .filter((c) => !CHAIN.has(c));
    parts.push(await q(`SELECT ${columns.map((c) => `"${c}"`).join(', ')} FROM "${schema}"."${table}" ORDER BY ALL`));
  }
  return JSON.stringify(parts, (_, x: unknown) => (typeof x === 'bigint' ? x.toString() : x));
}

describe('benign statements pass the guard with the results they have on bare DuckDB', () => {
  it('has at least 80 of them', () => {
    expect(BENIGN.length).toBeGreaterThanOrEqual(80);
  });

  it.each(BENIGN.map((s) => [s.sql, s] as const))('%s', async (_, statement) => {
    const reader = await bare.conn.runAndReadAll(statement.sql);
    const expected = reader.getRowsJS() as unknown[][];
    const got = await client.query({ text: statement.sql, rowMode: 'array', types: raw });
    // cotwire's ledgers hold the chain columns too; bare DuckDB's tables have none.
    const keep = got.fields.flatMap((f, i) => (CHAIN.has(f.name) && !reader.columnNames().includes(f.name) ? [] : [i]));
    let rows = (got.rows as (string | null)[][]).map((r) => keep.map((i) => r[i] ?? null));
    // Statements that describe a ledger's columns list the chain columns as rows.
    if (/^(DESCRIBE|SUMMARIZE|PRAGMA table_info)\b/i.test(statement.sql) && !/\bSELECT\b/i.test(statement.sql)) {
      rows = rows.filter((r) => !r.some((cell) => cell !== null && CHAIN.has(cell)));
    }
    if (got.fields.length === 0 && reader.columnNames().join() === 'Count') {
      // DuckDB answers DML with a Count row; PostgreSQL with the count in the command tag.
      if (expected.length > 0) expect(got.rowCount).toBe(Number(expected[0]?.[0]));
    } else if (got.fields.length === 0) {
      expect(expected.length === 0 || reader.columnNames().join() === 'Count').toBe(true);
    } else if (statement.rows === 'count') {
      expect(rows.length).toBe(expected.length);
    } else {
      expect(rows).toEqual(expected.map((r) => r.map(text)));
    }
    // The internal connection bypasses cotwire: wait until DuckDB holds every acknowledged append.
    await server.running.writer.visible();
    expect(await dataState((sql) => internal.query(sql))).toBe(await dataState(bare.query));
  });
});
