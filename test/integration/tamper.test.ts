import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { afterAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { loadConfig } from '../../src/config/load.js';
import { createLogger } from '../../src/log/logger.js';
import { appendUnderLoad, spawnServer } from '../fixtures/server.js';
import { startServer } from '../../src/engines/duckdb/start.js';
import { Journal } from '../../src/engines/duckdb/ledger/journal.js';
import { checkChains, recomputeSql, versionSql } from '../fixtures/independent-verifier.js';
import { crashBeforeApply } from '../fixtures/crash.js';
import { until } from '../fixtures/poll.js';

const CLI = join(import.meta.dirname, '../../dist/cli.js');
const root = mkdtempSync(join(tmpdir(), 'cotwire-tamper-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

async function withServer<T>(db: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const config = loadConfig({ argv: { port: '0', 'http-port': '0', db, 'log-level': 'silent' }, env: {} });
  const running = await startServer(config, createLogger('silent', false));
  const client = new pg.Client({ host: '127.0.0.1', port: running.address.port, user: 'cotwire', database: 'cotwire' });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
    await running.close();
  }
}

/** Edits the database file directly, bypassing cotwire, as someone with access to the file could. */
async function tamper(db: string, sql: string): Promise<void> {
  const instance = await DuckDBInstance.create(db);
  const conn = await instance.connect();
  await conn.run(sql);
  conn.closeSync();
  instance.closeSync();
}

function verifyCli(db: string): { status: number | null; stdout: string } {
  const r = spawnSync(process.execPath, [CLI, 'verify', '--db', db, '--json'], { encoding: 'utf8' });
  return { status: r.status, stdout: r.stdout };
}

async function ledgerWithSteps(name: string): Promise<string> {
  const db = join(root, `${name}.duckdb`);
  await withServer(db, async (c) => {
    for (let i = 0; i < 6; i++) {
      await c.query("INSERT INTO _cot_steps (session_id, step_type, content, confidence, metadata) VALUES ('s', 'Reasoning', $1, 0.5, $2)", [
        `thought ${i}`,
        JSON.stringify({ i }),
      ]);
    }
    await c.query("INSERT INTO _cot_steps (session_id, step_type, content) VALUES ('other', 'Action', 'untouched')");
  });
  return db;
}

const TAMPERS: Array<[string, string, number, string]> = [
  ['an edited content', "UPDATE _cot_steps SET content = 'forged' WHERE session_id = 's' AND step_index = 2", 2, 'edited'],
  ['an edited step_type', "UPDATE _cot_steps SET step_type = 'Decision' WHERE session_id = 's' AND step_index = 1", 1, 'edited'],
  ['an edited confidence', "UPDATE _cot_steps SET confidence = 0.99 WHERE session_id = 's' AND step_index = 3", 3, 'edited'],
  ['edited metadata', "UPDATE _cot_steps SET metadata = '{\"i\": 99}' WHERE session_id = 's' AND step_index = 4", 4, 'edited'],
  ['a deleted middle step', "DELETE FROM _cot_steps WHERE session_id = 's' AND step_index = 2", 2, 'deleted'],
  [
    'two swapped steps',
    "UPDATE _cot_steps SET step_index = CASE step_index WHEN 2 THEN 3 ELSE 2 END WHERE session_id = 's' AND step_index IN (2, 3)",
    2,
    'reordered',
  ],
  [
    'a forged step',
    "INSERT INTO _cot_steps SELECT gen_random_uuid(), org_id, agent_id, session_id, 2, 'Decision', 'forged', NULL, NULL, 1.0, NULL, NULL, NULL, NULL, prev_hash, current_hash, false, created_at, NULL, 999, row_salt FROM _cot_steps WHERE session_id = 's' AND step_index = 2",
    2,
    'inserted',
  ],
];

describe('tamper evidence', () => {
  it.each(TAMPERS)('finds %s, offline and over SQL, at the exact step', async (_, edit, index, kind) => {
    const db = await ledgerWithSteps(kind + index);
    expect(verifyCli(db).status).toBe(0);
    await tamper(db, edit);
    const offline = verifyCli(db);
    expect(offline.status).toBe(1);
    const report = JSON.parse(offline.stdout) as { broken: Array<{ chainKey: string; firstBrokenIndex: number; breakKind: string }> };
    expect(report.broken).toHaveLength(1);
    expect(report.broken[0]).toMatchObject({ chainKey: 's', firstBrokenIndex: index, breakKind: kind });
    await withServer(db, async (c) => {
      const sql = await c.query("SELECT valid, first_broken_index, break_kind FROM cot_verify('s')");
      expect(sql.rows).toEqual([{ valid: false, first_broken_index: index, break_kind: kind }]);
      expect((await c.query("SELECT valid FROM cot_verify('other')")).rows).toEqual([{ valid: true }]);
      // The server answers the plain call itself; the macro (any other shape of the query) must agree, in both formats.
      for (const binary of [false, true]) {
        const served = await c.query({ text: 'SELECT * FROM cot_verify($1)', values: ['s'], binary } as pg.QueryConfig);
        const macro = await c.query({ text: 'SELECT * FROM cot_verify($1) ORDER BY chain_key', values: ['s'], binary } as pg.QueryConfig);
        expect(served.rows).toEqual(macro.rows);
        expect(served.fields.map((f) => [f.name, f.dataTypeID, f.format])).toEqual(macro.fields.map((f) => [f.name, f.dataTypeID, f.format]));
      }
    });
  });

  it('exits 2 on a usage error', () => {
    const r = spawnSync(process.execPath, [CLI, 'verify'], { encoding: 'utf8' });
    expect(r.status).toBe(2);
  });
});

describe('background audit', () => {
  it('finds a broken chain at start-up and counts it in the metrics', async () => {
    const db = await ledgerWithSteps('audited');
    await tamper(db, "UPDATE _cot_steps SET content = 'forged' WHERE session_id = 's' AND step_index = 1");
    const config = loadConfig({ argv: { port: '0', 'http-port': '0', db, 'log-level': 'silent', 'metrics-port': '0' }, env: {} });
    const running = await startServer(config, createLogger('silent', false));
    try {
      const report = await running.auditor.audit();
      // The row's hash is still the logged one: only recomputing the chain shows the edit.
      expect(report.findings.map((f) => [f.kind, f.chainKey, f.detail.startsWith('the chain breaks at step 1 ')])).toEqual([['edited', 's', true]]);
      const metrics = await (await fetch(`http://127.0.0.1:${running.httpAddress?.port ?? 0}/metrics`)).text();
      const failures = Number(/^cotwire_verification_failures_total\{kind="edited"\} (\S+)$/m.exec(metrics)?.[1] ?? 0);
      expect(failures).toBeGreaterThanOrEqual(1);
    } finally {
      await running.close();
    }
  });
});

describe('crash safety', () => {
  it('applies the steps a crash left only in the journal, at the next start and in the CLI', async () => {
    for (const how of ['server', 'cli'] as const) {
      const db = await ledgerWithSteps(`journal-${how}`);
      const lost = await crashBeforeApply(db, 5);
      expect(lost).toEqual(['thought 2', 'thought 3', 'thought 4', 'thought 5', 'untouched']);
      if (how === 'cli') {
        const verified = JSON.parse(verifyCli(db).stdout) as { valid: boolean; chains: number; broken: unknown[] };
        // Two sessions, and the checkpoint ledger's one chain.
        expect(verified).toMatchObject({ valid: true, chains: 3, broken: [] });
      }
      await withServer(db, async (c) => {
        expect((await c.query("SELECT content FROM _cot_steps WHERE session_id = 's' ORDER BY step_index")).rows.map((r) => r.content)).toEqual(
          Array.from({ length: 6 }, (_, i) => `thought ${i}`),
        );
        expect((await c.query('SELECT count(*)::int AS n FROM _cot_steps')).rows[0].n).toBe(7);
        expect((await c.query('SELECT chain_key FROM cot_verify_all() WHERE NOT valid')).rows).toEqual([]);
        // The chain goes on from the replayed head.
        await c.query("INSERT INTO _cot_steps (session_id, step_type) VALUES ('s', 'Summary')");
        expect((await c.query("SELECT step_count::int AS n, valid FROM cot_verify('s')")).rows).toEqual([{ n: 7, valid: true }]);
      });
      // Applied once: a clean stop leaves no journal, and nothing is applied twice.
      expect(existsSync(Journal.pathFor(db))).toBe(false);
      expect(verifyCli(db).status).toBe(0);
    }
  });

  it('keeps every acknowledged append through kill -9, and every chain verifies after restart', async () => {
    const db = join(root, 'crash.duckdb');
    const { child, port } = await spawnServer(['--db', db]);
    const load = appendUnderLoad(port, 8, (w) => `crash-${w % 3}`);
    const { acknowledged } = load;
    // Killed once appends are acknowledged and more are in flight, however slowly a busy machine goes.
    await until('appends are acknowledged', () => acknowledged.length > 60);
    child.kill('SIGKILL');
    await load.stop();
    await new Promise<void>((resolve) => (child.exitCode !== null || child.signalCode !== null ? resolve() : child.once('exit', () => resolve())));
    expect(acknowledged.length).toBeGreaterThan(50);
    await withServer(db, async (c) => {
      const stored = new Set((await c.query("SELECT content FROM _cot_steps WHERE session_id LIKE 'crash-%'")).rows.map((r) => r.content as string));
      expect(acknowledged.filter((a) => !stored.has(a))).toEqual([]);
      expect((await c.query('SELECT chain_key FROM cot_verify_all() WHERE NOT valid')).rows).toEqual([]);
      // After the restart the chains go on from where they were.
      await c.query("INSERT INTO _cot_steps (session_id, step_type) VALUES ('crash-0', 'Summary')");
      expect((await c.query("SELECT valid FROM cot_verify('crash-0')")).rows).toEqual([{ valid: true }]);
    });
    const instance = await DuckDBInstance.create(db);
    const conn = await instance.connect();
    const cols = (
      await conn.runAndReadAll("SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = '_cot_steps' ORDER BY column_index")
    ).getRows();
    const rows = (
      await conn.runAndReadAll(
        recomputeSql(
          '_cot_steps',
          cols.map((r) => ({ name: String(r[0]), type: String(r[1]) })),
          'session_id',
          String((await conn.runAndReadAll(versionSql('_cot_steps'))).getRows()[0]?.[0]) as 'cotwire/v1' | 'cotwire/v2' | 'cotwire/v3',
        ),
      )
    ).getRows();
    conn.closeSync();
    instance.closeSync();
    expect(checkChains(rows).problems).toEqual([]);
  });
});
