import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, bench, describe } from 'vitest';
import { loadConfig } from '../src/config/load.js';
import { createLogger } from '../src/log/logger.js';
import { startServer } from '../src/engines/duckdb/start.js';

/**
 * Ledger throughput against a file-backed database: appends (one row per
 * INSERT with 1 and 16 connections, and 100-row batches) and verification.
 * Each iteration's rows are given in the name; steps/s = hz × rows.
 */
const dir = mkdtempSync(join(tmpdir(), 'cotwire-bench-'));
const config = loadConfig({ argv: { port: '0', db: join(dir, 'bench.duckdb'), 'log-level': 'silent' }, env: {} });
const running = await startServer(config, createLogger('silent', false));
const options = { host: '127.0.0.1', port: running.address.port, user: 'cotwire', database: 'cotwire' };
const clients = await Promise.all(
  Array.from({ length: 16 }, async () => {
    const c = new pg.Client(options);
    await c.connect();
    return c;
  }),
);
const one = clients[0] as pg.Client;
const INSERT = 'INSERT INTO _cot_steps (session_id, agent_id, step_type, content, confidence, metadata) VALUES ($1, $2, $3, $4, $5, $6)';
const content = 'x'.repeat(300);
const row = (session: string): unknown[] => [session, 'bench-agent', 'Reasoning', content, 0.5, '{"k": 1}'];
const batch = `INSERT INTO _cot_steps (session_id, agent_id, step_type, content, confidence, metadata) SELECT 'batch', 'bench-agent', 'Reasoning', '${content}', 0.5, '{"k": 1}' FROM range(100)`;

afterAll(async () => {
  await Promise.all(clients.map((c) => c.end()));
  await running.close();
});

describe('ledger appends', () => {
  bench('single-row INSERT, autocommit, 1 connection (1 row)', async () => {
    await one.query(INSERT, row('single'));
  });
  bench('single-row INSERT, 16 connections on 16 sessions (16 rows)', async () => {
    await Promise.all(clients.map((c, i) => c.query(INSERT, row(`s${i}`))));
  });
  bench('single-row INSERT, 16 connections on one session (16 rows)', async () => {
    await Promise.all(clients.map((c) => c.query(INSERT, row('shared'))));
  });
  bench('100-row INSERT ... SELECT batch (100 rows)', async () => {
    await one.query(batch);
  });
});

describe('verification', () => {
  bench(
    'cot_verify_all() over every step appended above (steps: see SELECT count(*))',
    async () => {
      await one.query('SELECT count(*) FROM cot_verify_all()');
    },
    { iterations: 3, time: 0 },
  );
});
