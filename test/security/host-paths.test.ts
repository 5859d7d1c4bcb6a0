import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULTS } from '../../src/config/schema.js';
import { makeScramVerifier } from '../../src/session/scram.js';
import { rng } from '../fixtures/rng.js';
import { startTestServer, type TestServer } from '../fixtures/server.js';

/**
 * Where the server keeps its files (the database, its temp and secret
 * directories) never reaches a client. Generated statements, in many
 * spellings, run first on a bare DuckDB locked down as cotwire locks its
 * engine: those that show the bare database's own paths there are the
 * attacks. Through cotwire, as a reader, a writer and an admin, over both
 * protocols, each must be
 * refused with 42501, or answer without any of the server's paths.
 */

const RELATIONS = ['duckdb_databases', 'duckdb_settings', 'pragma_database_list', 'duckdb_temporary_files'];
const PATH_SETTINGS = ['temp_directory', 'secret_directory'];

function spellings(name: string): string[] {
  return [
    name,
    name.toUpperCase(),
    `"${name}"`,
    `"${name.replace(/_(\w)/g, (_, c: string) => `_${c.toUpperCase()}`)}"`,
    `system.main.${name}`,
    `main.${name}`,
    `${name}()`,
    `system.main.${name}()`,
    `"${name}"()`,
  ];
}

/** Statements that read a relation however it is spelt and wrapped. */
function relationStatements(r: string): string[] {
  return [
    `SELECT * FROM ${r}`,
    `FROM ${r}`,
    `SELECT * FROM (FROM ${r}) t`,
    `WITH x AS (SELECT * FROM ${r}) SELECT * FROM x`,
    `SELECT (SELECT string_agg(CAST(COLUMNS(*) AS VARCHAR), ',') FROM ${r} LIMIT 1)`,
    `SUMMARIZE ${r}`,
    `SELECT 1 UNION ALL SELECT count(*) FROM ${r}`,
  ];
}

function generate(): string[] {
  const out = new Set<string>();
  for (const name of RELATIONS) for (const r of spellings(name)) for (const s of relationStatements(r)) out.add(s);
  for (const setting of PATH_SETTINGS) {
    for (const form of [setting, setting.toUpperCase(), setting.replace('_', ' _').replace(' ', '')]) {
      out.add(`SELECT current_setting('${form}')`);
      out.add(`SELECT current_setting(lower('${form.toUpperCase()}'))`);
      out.add(`SELECT current_setting('${form.slice(0, 4)}' || '${form.slice(4)}')`);
    }
  }
  for (const name of RELATIONS) {
    out.add(`FROM query('FROM ${name}')`);
    out.add(`FROM query('FROM ' || '${name}')`);
    out.add(`FROM query('FROM duck' || 'db_${name.slice(7)}()')`);
    out.add(`FROM query('FROM query(''FROM ${name}'')')`);
    out.add(`FROM query_table('${name}')`);
    out.add(`FROM query_table(['${name}'])`);
    out.add(`FROM query_table(lower('${name.toUpperCase()}'))`);
    out.add(`FROM query_table('${name.slice(0, 6)}' || '${name.slice(6)}')`);
    out.add(`SELECT * FROM json_execute_serialized_sql(json_serialize_sql('SELECT * FROM ${name}'))`);
  }
  // Comments and odd whitespace between the words of a sample.
  const random = rng(20261129);
  const base = [...out];
  for (let i = 0; i < 150; i++) {
    const s = base[Math.floor(random() * base.length)] as string;
    const gap = ['/**/', '\n', '\t', ' /* x */ ', '  '][Math.floor(random() * 5)] as string;
    out.add(s.replace(/ /g, () => (random() < 0.5 ? ` ${gap} ` : ' ')));
  }
  return [...out];
}

const dir = mkdtempSync(join(tmpdir(), 'cotwire-hostpaths-'));
let bare: DuckDBConnection;
let bareInstance: DuckDBInstance;
let server: TestServer;
const clients = new Map<string, pg.Client>();
const bareDb = join(dir, 'bare.duckdb');

beforeAll(async () => {
  bareInstance = await DuckDBInstance.create(bareDb);
  bare = await bareInstance.connect();
  await bare.run('SET GLOBAL enable_external_access = false');
  await bare.run('SET GLOBAL lock_configuration = true');
  const verifier = makeScramVerifier('pw');
  server = await startTestServer({
    users: [
      { name: 'cotwire', password: verifier, role: 'admin', agentId: null, orgId: null },
      { name: 'bi', password: verifier, role: 'reader', agentId: null, orgId: null },
      { name: 'planner', password: verifier, role: 'writer', agentId: null, orgId: null },
    ],
    limits: { ...DEFAULTS.limits, shutdownGraceMs: 1000 },
  });
  clients.set('admin', await server.client({ password: 'pw' }));
  clients.set('reader', await server.client({ user: 'bi', password: 'pw' }));
  clients.set('writer', await server.client({ user: 'planner', password: 'pw' }));
}, 60_000);

afterAll(async () => {
  await server?.[Symbol.asyncDispose]();
  bare?.closeSync();
  bareInstance?.closeSync();
  rmSync(dir, { recursive: true, force: true });
});

/** What the bare engine shows for a statement, as text (its error's text when it fails). */
async function onBare(sql: string): Promise<string> {
  try {
    const r = await bare.runAndReadAll(sql);
    return JSON.stringify(r.getRows(), (_, v: unknown) => (typeof v === 'bigint' ? String(v) : v));
  } catch (err) {
    return `error: ${(err as Error).message}`;
  }
}

describe('host paths', () => {
  it('are refused, or never shown, in every generated spelling that shows them on the bare engine', async () => {
    const statements = generate();
    // The server's database and temp directory are in its own directory; DuckDB's secret directory is under the home's .duckdb.
    const serverPaths = [server.dir, '/.duckdb'];
    let attacks = 0;
    const leaks: string[] = [];
    for (const sql of statements) {
      const shown = await onBare(sql);
      if (!shown.includes(dir) && !shown.includes('/.duckdb')) continue;
      attacks++;
      for (const [role, client] of clients) {
        // The simple protocol, then the extended one (Parse, Bind, Execute).
        for (const [protocol, query] of [
          ['simple', () => client.query(sql)],
          ['extended', () => client.query({ text: sql, values: [] })],
        ] as const) {
          const answer = await query().then(
            (r) => JSON.stringify(r.rows),
            (err: { code?: string; message: string }) => `error ${err.code ?? '?'}: ${err.message}`,
          );
          if (answer.startsWith('error 42501')) continue;
          if (serverPaths.some((p) => answer.includes(p))) leaks.push(`${role} ${protocol}: ${sql} -> ${answer.slice(0, 120)}`);
        }
      }
    }
    // The generator must find real attacks for the test to mean anything.
    expect(attacks).toBeGreaterThan(100);
    expect(leaks).toEqual([]);
  }, 120_000);

  it('refuses query() and query_table() given a parameter, over the extended protocol', async () => {
    const reader = clients.get('reader') as pg.Client;
    for (const sql of ['SELECT * FROM query($1)', 'SELECT * FROM query_table($1)']) {
      const err = await reader.query(sql, ['FROM duckdb_databases']).then(
        () => null,
        (e: { code?: string }) => e.code,
      );
      expect(err, sql).toBe('42501');
    }
    // A constant that reads nothing of the host still runs.
    expect((await reader.query("SELECT * FROM query('SELECT 41 + 1 AS n')")).rows).toEqual([{ n: 42 }]);
    expect((await reader.query("SELECT current_setting('TimeZone') AS tz")).rows[0].tz).toBeTypeOf('string');
    // search_path is a setting clients read (Grafana does), not a place on the host.
    expect((await reader.query("SELECT current_setting('search_path') AS p")).rows[0].p).toBeTypeOf('string');
  });
});
