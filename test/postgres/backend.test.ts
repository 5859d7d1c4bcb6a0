import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PgBackend } from '../../src/engines/postgres/adapter/backend.js';
import type { PostgresConnection } from '../../src/engines/postgres/adapter/connection.js';
import { usePgEngine } from '../fixtures/pg-engine.js';
import { until } from '../fixtures/poll.js';

/**
 * A client's own backend (adapter/backend.ts) when PostgreSQL ends it: every
 * call made on it afterwards fails, however soon after the backend's FATAL
 * it is made. The server's ROLLBACK after a failed append is such a call,
 * and a CI run once saw it wait forever when PostgreSQL stopped -m fast.
 */

const ctx = usePgEngine();
let admin: PostgresConnection;

beforeAll(async () => {
  admin = await ctx.engine.admin();
});
afterAll(() => {
  admin?.close();
});

const activeIn = async (applicationName: string): Promise<number> => {
  const [[n]] = (await admin.query(
    "SELECT count(*)::int FROM pg_catalog.pg_stat_activity WHERE application_name = $1 AND state = 'active' AND query LIKE '%pg_sleep%'",
    [applicationName],
  )) as [[number]];
  return n;
};

describe("a client's backend that PostgreSQL terminates", () => {
  it('fails the call made on it as its FATAL arrives, before the connection is heard closing, instead of waiting for an answer', async () => {
    const name = 'backend-terminated';
    const backend = await PgBackend.open(ctx.engine.url, name);
    try {
      await backend.openPortal('p', 'SELECT pg_catalog.pg_sleep(60)', [], [], []);
      const running = backend.fetch('p', 0, () => undefined);
      // The next call is made in the rejection's own turn: the socket's end is read after it, never before.
      const next = running.then(
        () => 'the sleep was answered',
        () =>
          backend
            .fetch('p', 0, () => undefined)
            .then(
              () => 'answered',
              (err: { code?: string }) => err.code,
            ),
      );
      await until('the sleep running', async () => (await activeIn(name)) === 1, 20_000);
      const [[terminated]] = (await admin.query(
        'SELECT count(pg_catalog.pg_terminate_backend(pid))::int FROM pg_catalog.pg_stat_activity WHERE application_name = $1',
        [name],
      )) as [[number]];
      expect(terminated).toBe(1);
      await expect(running).rejects.toMatchObject({ code: '57P01' });
      expect(await next).toMatch(/^(57P01|08006)$/);
      // And so does every call after it, with the session's end.
      await expect(backend.sync()).rejects.toMatchObject({ code: expect.stringMatching(/^(57P01|08006)$/) });
      await expect(backend.describe('SELECT 1', [])).rejects.toMatchObject({ code: expect.stringMatching(/^(57P01|08006)$/) });
    } finally {
      await backend.close();
    }
  });
});
