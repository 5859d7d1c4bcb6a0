import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { usePgServer } from '../fixtures/pg-server.js';

const ctx = usePgServer();

const code = (p: Promise<unknown>): Promise<string | undefined> =>
  p.then(
    () => undefined,
    (e: { code?: string }) => e.code,
  );

async function largeObjects(): Promise<number> {
  const admin = await ctx.engine.admin();
  const [[n]] = (await admin.query('SELECT count(*) FROM pg_catalog.pg_largeobject_metadata')) as [[bigint]];
  return Number(n);
}

describe('large objects on a PostgreSQL engine', () => {
  it("can be created and removed by the clients' role on the bare engine, in a read-only transaction too", async () => {
    const bare = new pg.Client({ connectionString: ctx.engine.clientUrl });
    await bare.connect();
    try {
      await bare.query('BEGIN READ ONLY');
      const oid = (await bare.query("SELECT lo_from_bytea(0, 'fill the disk') AS oid")).rows[0].oid as number;
      await bare.query('COMMIT');
      expect(await largeObjects()).toBe(1);
      await bare.query('SELECT lo_unlink($1)', [oid]);
      expect(await largeObjects()).toBe(0);
    } finally {
      await bare.end();
    }
  });

  it('are refused to a client through cotwire with 42501, however the call is placed, and none is made or removed', async () => {
    const admin = await ctx.engine.admin();
    const [[kept]] = (await admin.query("SELECT lo_from_bytea(0, 'an admin''s object')")) as [[number]];
    const c = await ctx.server.client();
    for (const sql of [
      "SELECT lo_from_bytea(0, 'x')",
      "SELECT pg_catalog.lo_from_bytea(0, 'x')",
      'SELECT LO_CREATE(0)',
      `SELECT lo_unlink(${kept})`,
      `SELECT lo_put(${kept}, 0, 'x')`,
      "SELECT n FROM (SELECT lo_from_bytea(0, 'x') AS n) AS s",
      'WITH o AS (SELECT lo_creat(-1)) SELECT * FROM o',
      `SELECT lo_truncate(lo_open(${kept}, 131072), 0)`,
    ]) {
      expect(await code(c.query(sql)), sql).toBe('42501');
    }
    expect(await code(c.query('SELECT lo_unlink($1)', [kept]))).toBe('42501');
    expect(await largeObjects()).toBe(1);
    expect(await admin.query(`SELECT convert_from(lo_get(${kept}), 'UTF8')`)).toEqual([["an admin's object"]]);
  });
});
