import { describe, expect, it } from 'vitest';
import { useTestServer } from '../fixtures/server.js';

/** pg_advisory_lock and its kin, across sessions, as Kysely's Migrator and job queues use them. */
const ctx = useTestServer();

const code = (p: Promise<unknown>): Promise<string | undefined> =>
  p.then(
    () => undefined,
    (e: { code?: string }) => e.code,
  );

describe('advisory locks', () => {
  it('keeps a session-level lock from other sessions until it is unlocked, and makes a blocking lock wait for it', async () => {
    const a = await ctx.server.client();
    const b = await ctx.server.client();
    expect((await a.query('SELECT pg_advisory_lock(42)')).rows).toEqual([{ pg_advisory_lock: '' }]);
    expect((await b.query('SELECT pg_try_advisory_lock(42) AS t')).rows).toEqual([{ t: false }]);
    // Taken again by its holder: the holds stack.
    expect((await a.query('SELECT pg_try_advisory_lock(42) AS t')).rows).toEqual([{ t: true }]);
    let acquired = false;
    const waiting = b.query('SELECT pg_advisory_lock(42)').then(() => {
      acquired = true;
    });
    await new Promise((resolve) => setTimeout(resolve, 150));
    expect(acquired).toBe(false);
    expect((await a.query('SELECT pg_advisory_unlock(42) AS u')).rows).toEqual([{ u: true }]);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(acquired).toBe(false);
    expect((await a.query('SELECT pg_advisory_unlock(42) AS u')).rows).toEqual([{ u: true }]);
    await waiting;
    expect(acquired).toBe(true);
    // Not a's any more.
    expect((await a.query('SELECT pg_advisory_unlock(42) AS u')).rows).toEqual([{ u: false }]);
    await a.query("SET lock_timeout = '100ms'");
    expect(await code(a.query('SELECT pg_advisory_lock(42)'))).toBe('55P03');
    // The two-integer keys are another space.
    expect((await a.query('SELECT pg_try_advisory_lock(0, 42) AS t')).rows).toEqual([{ t: true }]);
    // A session that ends lets its locks go.
    await b.end();
    expect((await a.query('SELECT pg_try_advisory_lock(42) AS t')).rows).toEqual([{ t: true }]);
    await a.query('SELECT pg_advisory_unlock_all()');
  });

  it('holds a transaction-level lock until the transaction ends, and shares shared locks', async () => {
    const a = await ctx.server.client();
    const b = await ctx.server.client();
    await a.query('BEGIN');
    await a.query('SELECT pg_advisory_xact_lock(7)');
    expect((await b.query('SELECT pg_try_advisory_xact_lock(7) AS t')).rows).toEqual([{ t: false }]);
    await a.query('COMMIT');
    expect((await b.query('SELECT pg_try_advisory_xact_lock(7) AS t')).rows).toEqual([{ t: true }]);
    // Outside a block the statement is the transaction: the lock is gone after it.
    expect((await a.query('SELECT pg_try_advisory_xact_lock(7) AS t')).rows).toEqual([{ t: true }]);
    await a.query('SELECT pg_advisory_lock_shared(9)');
    expect((await b.query('SELECT pg_try_advisory_lock_shared(9) AS t')).rows).toEqual([{ t: true }]);
    expect((await b.query('SELECT pg_try_advisory_lock(9) AS t')).rows).toEqual([{ t: false }]);
  });

  it("cannot be released or taken for another session by calling the engine function with that session's id", async () => {
    const a = await ctx.server.client();
    const b = await ctx.server.client();
    await a.query('SELECT pg_advisory_lock(77)');
    const pidA = (await a.query('SELECT pg_backend_pid() AS p')).rows[0].p as number;
    const forged = await b.query(`SELECT cot_advisory('unlock', ${pidA}, 'guess', 'b:77') AS r`);
    expect(forged.rows).toEqual([{ r: null }]);
    expect((await b.query('SELECT pg_try_advisory_lock(77) AS t')).rows).toEqual([{ t: false }]);
    expect((await a.query('SELECT pg_advisory_unlock(77) AS u')).rows).toEqual([{ u: true }]);
  });

  it("takes Kysely's Migrator lock statement", async () => {
    const a = await ctx.server.client();
    const r = await a.query(
      'with "set_timeout" as (select set_config(\'lock_timeout\', \'3600000\', true) as x) select pg_advisory_lock(3853314791062309107) from "set_timeout"',
    );
    expect(r.rowCount).toBe(1);
    expect((await a.query('SELECT pg_advisory_unlock(3853314791062309107) AS u')).rows).toEqual([{ u: true }]);
  });
});
