import { describe, expect, it } from 'vitest';
import { useTestServer } from '../fixtures/server.js';

/**
 * Job queues (pg-boss, graphile-worker) claim rows with FOR UPDATE SKIP
 * LOCKED. cotwire locks the rows such a query returns, for its transaction,
 * and leaves out those another holds; a claim without SKIP LOCKED is kept by
 * DuckDB's write conflicts (the second claimant fails with 40001): two
 * workers never get the same row.
 */
const ctx = useTestServer();

const CLAIM_ONE = "UPDATE job SET state = 'active' WHERE id IN (SELECT id FROM job WHERE state = 'created' ORDER BY id LIMIT 1 FOR UPDATE) RETURNING id";
const CLAIM_CTE =
  "WITH next AS (SELECT id FROM job WHERE state = 'created' ORDER BY id LIMIT 10 FOR NO KEY UPDATE) UPDATE job SET state = 'active' FROM next WHERE job.id = next.id RETURNING job.id";

describe('claiming jobs with a row-locking subquery', () => {
  it('never hands the same row to two concurrent sessions', async () => {
    await ctx.client.query('CREATE TABLE job (id int PRIMARY KEY, state text)');
    await ctx.client.query("INSERT INTO job SELECT i, 'created' FROM range(1, 4) t(i)");
    const a = await ctx.server.client();
    const b = await ctx.server.client();
    await a.query('BEGIN');
    await b.query('BEGIN');
    // Both see job 1 as created; the first claim wins, the second fails (PostgreSQL would make it wait).
    expect((await a.query(CLAIM_ONE)).rows).toEqual([{ id: 1 }]);
    await expect(b.query(CLAIM_ONE)).rejects.toMatchObject({ code: '40001' });
    await b.query('ROLLBACK');
    await a.query('COMMIT');
    // The next claim, in a CTE, takes the rest, once.
    await b.query('BEGIN');
    expect((await b.query(CLAIM_CTE)).rows.map((r: { id: number }) => r.id).sort()).toEqual([2, 3]);
    await b.query('COMMIT');
    expect((await a.query(CLAIM_CTE)).rows).toEqual([]);
  });

  it.each([
    "UPDATE job SET state = 'active' WHERE id IN (SELECT id FROM job WHERE state = 'created' ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING *",
    "WITH next AS (SELECT id FROM job WHERE state = 'created' LIMIT 10 FOR UPDATE SKIP LOCKED) UPDATE job SET state = 'active' FROM next WHERE job.id = next.id RETURNING job.*",
    'DELETE FROM job WHERE id = (SELECT id FROM job ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED)',
    'SELECT id FROM job ORDER BY id LIMIT 1 FOR SHARE SKIP LOCKED',
    'SELECT * FROM job j WHERE j.id > 0 FOR NO KEY UPDATE OF j SKIP LOCKED',
  ])('runs SKIP LOCKED over one table: %s', async (sql) => {
    await expect(ctx.client.query(sql)).resolves.toMatchObject({ command: expect.any(String) });
  });

  it('refuses SKIP LOCKED over a join with 0A000 and a hint, never a syntax error', async () => {
    await ctx.client.query('CREATE TABLE job_owner (job_id int, owner text)');
    const sql = 'SELECT j.id FROM job j JOIN job_owner o ON o.job_id = j.id FOR UPDATE OF j SKIP LOCKED';
    await expect(ctx.client.query(sql)).rejects.toMatchObject({ code: '0A000', hint: expect.stringContaining('SKIP LOCKED') });
  });

  it('lets concurrent workers claim every job exactly once', async () => {
    await ctx.client.query('CREATE TABLE job_many (id int PRIMARY KEY, state text, worker int)');
    await ctx.client.query("INSERT INTO job_many SELECT i, 'created', NULL FROM range(1, 201) t(i)");
    const claim = (w: number): string =>
      `WITH next AS (SELECT id FROM job_many WHERE state = 'created' ORDER BY id LIMIT 7 FOR UPDATE SKIP LOCKED)
       UPDATE job_many SET state = 'active', worker = ${w} FROM next WHERE job_many.id = next.id RETURNING job_many.id`;
    const worker = async (w: number): Promise<number[]> => {
      const c = await ctx.server.client();
      const mine: number[] = [];
      for (;;) {
        // A claim whose snapshot began before another's commit, and reached a row after its lock went, conflicts: it retries.
        const r = await c.query(claim(w)).catch((e: { code?: string }) => {
          if (e.code === '40001') return { rows: null };
          throw e;
        });
        if (r.rows === null) continue;
        if (r.rows.length === 0) return mine;
        mine.push(...r.rows.map((x: { id: number }) => x.id));
      }
    };
    const claimed = await Promise.all([1, 2, 3, 4].map(worker));
    const all = claimed.flat().sort((x, y) => x - y);
    expect(all).toEqual(Array.from({ length: 200 }, (_, i) => i + 1));
    const stored = await ctx.client.query('SELECT worker, count(*)::int AS n FROM job_many GROUP BY worker ORDER BY worker');
    const byWorker = Object.fromEntries(claimed.flatMap((c, i) => (c.length === 0 ? [] : [[i + 1, c.length]])));
    expect(Object.fromEntries(stored.rows.map((r) => [r.worker, r.n]))).toEqual(byWorker);
  });
});
