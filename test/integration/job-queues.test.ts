import { describe, expect, it } from 'vitest';
import { useTestServer } from '../fixtures/server.js';

/**
 * Job queues (pg-boss, graphile-worker) claim rows with FOR UPDATE SKIP
 * LOCKED. cotwire takes no row locks: a claim without SKIP LOCKED is kept by
 * DuckDB's write conflicts (the second claimant fails with 40001), and SKIP
 * LOCKED, in any statement, is refused with 0A000: two workers never get the
 * same row.
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
  ])('refuses SKIP LOCKED with 0A000, never a syntax error: %s', async (sql) => {
    await expect(ctx.client.query(sql)).rejects.toMatchObject({ code: '0A000', hint: expect.stringContaining('SKIP LOCKED') });
  });
});
