import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import { startServer, type RunningServer } from '../../src/engines/duckdb/start.js';
import { createLogger } from '../../src/log/logger.js';
import { countLogged, logLines } from '../fixtures/log-lines.js';
import { until } from '../fixtures/poll.js';

/**
 * The writer acknowledges an append once its journal holds it, and the
 * applier hands the rows to DuckDB in groups (engines/duckdb/ledger/applier.ts).
 * A statement that may read a ledger waits until DuckDB holds every
 * acknowledged row, which costs an engine commit while rows are pending; a
 * SELECT in autocommit that reads no ledger row (handler/plan.ts,
 * waitsForAppends) answers the same either way, and does not wait.
 */

const root = mkdtempSync(join(tmpdir(), 'cotwire-appends-wait-'));
const lines: string[] = [];
let running: RunningServer;
let c: pg.Client;

beforeAll(async () => {
  const config = loadConfig({ argv: { port: '0', 'http-port': '0', db: join(root, 'ledger.duckdb'), 'log-level': 'debug' }, env: {} });
  running = await startServer(config, createLogger('debug', false, logLines(lines)));
  c = new pg.Client({ host: '127.0.0.1', port: running.address.port, user: 'cotwire', database: 'cotwire' });
  await c.connect();
});

afterAll(async () => {
  await c.end();
  await running.close();
  rmSync(root, { recursive: true, force: true });
});

const REFRESHED = 'catalog snapshot refreshed';
const pending = (): boolean => Number(running.writer.durableSeq) > running.writer.appliedSeq;

/**
 * Appends a step, then runs `sql`: whether rows were waiting for DuckDB
 * before it and after it, and its rows. Repeated, since the applier's own
 * gathering may hand the step over before the statement starts.
 */
async function afterAppends(sql: string, values: unknown[]): Promise<Array<{ before: boolean; after: boolean; rows: unknown[] }>> {
  const seen: Array<{ before: boolean; after: boolean; rows: unknown[] }> = [];
  for (let i = 0; i < 20; i++) {
    await c.query("INSERT INTO _cot_steps (session_id, step_type, content) VALUES ('waits', 'Observation', $1)", [`step ${i}`]);
    const before = pending();
    const rows = (await c.query(sql, values)).rows;
    seen.push({ before, after: pending(), rows });
  }
  return seen;
}

describe('a statement and the appends acknowledged before it', () => {
  it('answers a SELECT of no table or of a plain table without handing the pending appends to DuckDB, and makes a read of the ledger wait for them', async () => {
    const refreshes = countLogged(lines, REFRESHED);
    await c.query('CREATE TABLE orders (id integer PRIMARY KEY, note text)');
    await c.query("INSERT INTO orders VALUES (1, 'first')");
    await until('the catalog snapshot of the new schema', () => countLogged(lines, REFRESHED) > refreshes);

    for (const [sql, values, expected] of [
      ['SELECT $1::varchar AS v', ['x'], [{ v: 'x' }]],
      ['SELECT note FROM orders WHERE id = $1', [1], [{ note: 'first' }]],
    ] as const) {
      const seen = await afterAppends(sql, [...values]);
      for (const s of seen) expect(s.rows).toEqual(expected);
      // Had it waited, no row would still be pending after it.
      expect(seen.filter((s) => s.before && s.after).length, sql).toBeGreaterThan(0);
    }

    const counted = await afterAppends("SELECT count(*)::int AS n FROM _cot_steps WHERE session_id = 'waits'", []);
    expect(counted.filter((s) => s.before).length).toBeGreaterThan(0);
    counted.forEach((s, i) => {
      expect(s.after).toBe(false);
      expect(s.rows).toEqual([{ n: 41 + i }]);
    });
  });

  it('makes a SELECT of a view wait, and a plain table that became a view', async () => {
    const refreshes = countLogged(lines, REFRESHED);
    await c.query("CREATE VIEW waits_view AS SELECT count(*)::int AS n FROM _cot_steps WHERE session_id = 'waits'");
    await c.query('DROP TABLE orders');
    await c.query("CREATE VIEW orders AS SELECT count(*)::int AS n FROM _cot_steps WHERE session_id = 'waits'");
    await until('the catalog snapshot of the new schema', () => countLogged(lines, REFRESHED) > refreshes);
    for (const sql of ['SELECT n FROM waits_view', 'SELECT n FROM orders']) {
      const held = Number((await c.query("SELECT count(*) AS n FROM _cot_steps WHERE session_id = 'waits'")).rows[0].n);
      const seen = await afterAppends(sql, []);
      seen.forEach((s, i) => {
        expect(s.after, sql).toBe(false);
        expect(s.rows).toEqual([{ n: held + i + 1 }]);
      });
    }
  });
});
