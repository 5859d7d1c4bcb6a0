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
  it('can be created and removed by a plain role of a bare PostgreSQL, in a read-only transaction too', async () => {
    const admin = await ctx.engine.admin();
    await admin.run('CREATE DATABASE bare_lo');
    await admin.run("CREATE ROLE plain_lo LOGIN PASSWORD 'plain'");
    const bare = new pg.Client({ connectionString: ctx.engine.url.replace(/\/\/postgres@/, '//plain_lo:plain@').replace(/\/postgres$/, '/bare_lo') });
    await bare.connect();
    try {
      await bare.query('BEGIN READ ONLY');
      const oid = (await bare.query("SELECT lo_from_bytea(0, 'fill the disk') AS oid")).rows[0].oid as number;
      await bare.query('COMMIT');
      expect((await bare.query('SELECT count(*)::int AS n FROM pg_catalog.pg_largeobject_metadata')).rows).toEqual([{ n: 1 }]);
      await bare.query('SELECT lo_unlink($1)', [oid]);
      expect((await bare.query('SELECT count(*)::int AS n FROM pg_catalog.pg_largeobject_metadata')).rows).toEqual([{ n: 0 }]);
    } finally {
      await bare.end();
    }
  });

  it("are refused by PostgreSQL itself to every client role, cotwire's guard bypassed, with 42501 reported as an error", async () => {
    const admin = await ctx.engine.admin();
    const [[kept]] = (await admin.query("SELECT lo_from_bytea(0, 'an admin''s object')")) as [[number]];
    for (const url of [ctx.engine.readerUrl, ctx.engine.writerUrl, ctx.engine.adminUrl]) {
      const direct = new pg.Client({ connectionString: url });
      await direct.connect();
      try {
        for (const sql of [
          "SELECT lo_from_bytea(0, 'x')",
          'SELECT lo_create(0)',
          'SELECT lo_creat(-1)',
          `SELECT lo_unlink(${kept})`,
          `SELECT lo_put(${kept}, 0, 'x')`,
        ]) {
          expect(await code(direct.query(sql)), `${new URL(url).username}: ${sql}`).toBe('42501');
        }
        // Another role's object stays unreadable too: PostgreSQL's own privileges on large objects.
        expect(await code(direct.query(`SELECT lo_get(${kept})`))).toBe('42501');
      } finally {
        await direct.end();
      }
    }
    expect(await largeObjects()).toBe(1);
    await admin.query('SELECT lo_unlink($1)', [String(kept)]);
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
