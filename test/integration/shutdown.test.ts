import { DEFAULTS } from '../../src/config/schema.js';
import { describe, expect, it } from 'vitest';
import type pg from 'pg';
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
    await new Promise((r) => setTimeout(r, 50));
    expect(idleErrors).toContain('57P01');
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
});
