import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { DuckDBInstance } from '@duckdb/node-api';
import { loadConfig } from '../../src/config/load.js';
import { DEFAULTS } from '../../src/config/schema.js';
import { createLogger } from '../../src/log/logger.js';
import { STEPS_DDL } from '../../src/ledger/chain/schema.js';
import { startServer } from '../../src/engines/duckdb/start.js';
import { describe, expect, it } from 'vitest';
import type pg from 'pg';
import { until } from '../fixtures/poll.js';
import { startTestServer } from '../fixtures/server.js';

describe('graceful shutdown', () => {
  it('lets a running statement finish, then closes the connection with 57P01', async () => {
    const server = await startTestServer({ limits: { ...DEFAULTS.limits, maxMessageSize: 1 << 20, maxConnections: 10, shutdownGraceMs: 60_000 } });
    const busy = await server.client();
    const idle = await server.client();
    const idleErrors: string[] = [];
    idle.on('error', (e: Error & { code?: string }) => idleErrors.push(e.code ?? e.message));
    // A statement that takes a moment but finishes by itself.
    const running = busy.query('SELECT count(*)::BIGINT AS n FROM range(300000000) t(x) WHERE x % 3 = 0');
    await new Promise((r) => setTimeout(r, 100));
    const closing = server.running.close();
    const result = await running;
    expect(result.rows[0].n).toBe('100000000');
    await closing;
    await until('the idle client to be told', () => idleErrors.includes('57P01'), 10_000);
    await server[Symbol.asyncDispose]();
  });

  it('cancels a statement that outlasts the grace period', async () => {
    const server = await startTestServer({ limits: { ...DEFAULTS.limits, maxMessageSize: 1 << 20, maxConnections: 10, shutdownGraceMs: 200 } });
    const busy = await server.client();
    const running = busy.query('SELECT count(*) FROM range(100000000000) t(x) WHERE x % 7 = 3').catch((e: unknown) => e as pg.DatabaseError);
    await new Promise((r) => setTimeout(r, 100));
    await server.running.close();
    const err = await running;
    expect((err as pg.DatabaseError).code).toMatch(/^(57014|57P01)$/);
    await server[Symbol.asyncDispose]();
  });

  it('stops the start-up audit of a large ledger instead of waiting for it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cotwire-shutdown-'));
    try {
      const db = join(dir, 'big.duckdb');
      // 200,000 steps written straight into the file: the audit reads them for many seconds.
      const instance = await DuckDBInstance.create(db);
      const conn = await instance.connect();
      await conn.run(STEPS_DDL);
      await conn.run(
        `INSERT INTO _cot_steps (trace_id, session_id, step_index, step_type, content, prev_hash, current_hash, has_embedding, created_at, ledger_seq)
         SELECT uuid(), 's' || (i % 4000), i // 4000, 'Reasoning', 'step ' || i, repeat('0', 64), sha256(i::VARCHAR), false, now(), i FROM range(200000) t(i)`,
      );
      conn.closeSync();
      instance.closeSync();
      const sink = new PassThrough();
      let text = '';
      sink.on('data', (b: Buffer) => (text += b.toString()));
      const running = await startServer(
        loadConfig({ argv: { port: '0', 'http-port': '0', db, 'log-level': 'error' }, env: {} }),
        createLogger('error', false, sink),
      );
      await new Promise((r) => setTimeout(r, 300));
      await running.close();
      // Closed before the audit could finish, and the cut-short audit is neither a report nor an error.
      expect(running.auditor.latest).toBeNull();
      expect(text).not.toContain('ledger audit failed');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
