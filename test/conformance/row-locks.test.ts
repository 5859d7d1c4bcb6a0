import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import { useConformanceServer } from '../fixtures/conformance.js';

/**
 * FOR UPDATE SKIP LOCKED as job queues use it (pg-boss, graphile-worker,
 * Oban-style claims): each worker's claim skips the rows another open
 * transaction locked, so no job goes to two workers, and the locks end with
 * the transaction (or the statement, outside one).
 */
const s = useConformanceServer();

const ids = async (c: pg.Client, sql: string): Promise<number[]> => (await c.query(sql)).rows.map((r) => Number(r.id));

async function queue(c: pg.Client, name: string, jobs: number): Promise<void> {
  await c.query(`CREATE TABLE ${name} (id int PRIMARY KEY, state text NOT NULL DEFAULT 'created', priority int NOT NULL)`);
  await c.query(`INSERT INTO ${name} (id, priority) SELECT g, g % 3 FROM generate_series(1, ${jobs}) AS g`);
}

describe('FOR UPDATE SKIP LOCKED', () => {
  it('gives each open transaction rows no other one holds, in the query s order, until it ends', async () => {
    const [a, b, c] = [await s.fresh(), await s.fresh(), await s.fresh()];
    await queue(a, 'rl_jobs', 9);
    const claim = "SELECT id FROM rl_jobs WHERE state = 'created' ORDER BY priority DESC, id LIMIT 3 FOR UPDATE SKIP LOCKED";
    await a.query('BEGIN');
    await b.query('BEGIN');
    try {
      expect(await ids(a, claim)).toEqual([2, 5, 8]);
      expect(await ids(b, claim)).toEqual([1, 4, 7]);
      // A transaction's own locks do not hide its rows from it.
      expect(await ids(a, claim)).toEqual([2, 5, 8]);
      // Outside a block the locks end with the statement: the same rows again.
      expect(await ids(c, claim)).toEqual([3, 6, 9]);
      expect(await ids(c, claim)).toEqual([3, 6, 9]);
      // FOR SHARE SKIP LOCKED skips rows held FOR UPDATE as well.
      expect(await ids(c, "SELECT id FROM rl_jobs WHERE state = 'created' ORDER BY id FOR SHARE SKIP LOCKED")).toEqual([3, 6, 9]);
      await a.query('COMMIT');
      expect(await ids(c, claim)).toEqual([2, 5, 8]);
    } finally {
      await a.query('ROLLBACK');
      await b.query('ROLLBACK');
    }
    expect(await ids(c, claim)).toEqual([2, 5, 8]);
  });

  it('keeps claims made by UPDATE ... FROM a WITH query, and by UPDATE ... WHERE id IN (subquery), apart', async () => {
    const [a, b] = [await s.fresh(), await s.fresh()];
    await queue(a, 'rl_boss', 6);
    // pg-boss's fetch.
    const boss = (n: number): string =>
      `WITH next AS (SELECT id FROM rl_boss WHERE state = 'created' ORDER BY priority, id LIMIT ${n} FOR UPDATE SKIP LOCKED)
       UPDATE rl_boss j SET state = 'active' FROM next WHERE j.id = next.id RETURNING j.id`;
    // graphile-worker's and many hand-written queues' claim.
    const claim = (n: number): string =>
      `UPDATE rl_boss SET state = 'active' WHERE id IN (SELECT id FROM rl_boss WHERE state = 'created' ORDER BY priority, id LIMIT ${n} FOR UPDATE SKIP LOCKED) RETURNING id`;
    await a.query('BEGIN');
    await b.query('BEGIN');
    let first: number[];
    let second: number[];
    try {
      first = (await ids(a, boss(2))).sort();
      // b's snapshot still shows a's rows as created; they are skipped as locked.
      second = (await ids(b, claim(2))).sort();
      await a.query('COMMIT');
      await b.query('COMMIT');
    } finally {
      await a.query('ROLLBACK');
      await b.query('ROLLBACK');
    }
    expect(first).toEqual([3, 6]);
    expect(second).toEqual([1, 4]);
    expect((await a.query("SELECT id FROM rl_boss WHERE state = 'active' ORDER BY id")).rows.map((r) => r.id)).toEqual([1, 3, 4, 6]);
  });
});
