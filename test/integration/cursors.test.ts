import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import { useTestServer } from '../fixtures/server.js';

/** SQL cursors (psycopg's named and server-side cursors), DEALLOCATE and DISCARD ALL. */
const ctx = useTestServer();

const code = async (p: Promise<unknown>): Promise<string | undefined> => ((await p.catch((e: unknown) => e)) as pg.DatabaseError).code;

describe('DECLARE, FETCH, MOVE and CLOSE', () => {
  it('reads a query in batches, forward, and reports each step in its tag', async () => {
    const c = ctx.client;
    await c.query('BEGIN');
    const declared = await c.query('DECLARE "ss" CURSOR WITHOUT HOLD FOR SELECT x, x * 10 AS y FROM generate_series(1, 7) g(x) ORDER BY x');
    expect(declared.command).toBe('DECLARE');
    const first = await c.query('FETCH FORWARD 3 FROM "ss"');
    expect(first.command).toBe('FETCH');
    expect(first.rowCount).toBe(3);
    expect(first.fields.map((f) => f.name)).toEqual(['x', 'y']);
    // generate_series of integers is integer, as in PostgreSQL.
    expect(first.rows).toEqual([
      { x: 1, y: 10 },
      { x: 2, y: 20 },
      { x: 3, y: 30 },
    ]);
    const moved = await c.query('MOVE 2 IN ss');
    expect([moved.command, moved.rowCount, moved.rows.length]).toEqual(['MOVE', 2, 0]);
    expect((await c.query('FETCH NEXT FROM ss')).rows).toEqual([{ x: 6, y: 60 }]);
    expect((await c.query('FETCH ALL FROM ss')).rows).toEqual([{ x: 7, y: 70 }]);
    const after = await c.query('FETCH 5 FROM ss');
    expect([after.rowCount, after.rows]).toEqual([0, []]);
    expect((await c.query('CLOSE ss')).command).toBe('CLOSE');
    await c.query('COMMIT');
  });

  it('refuses what PostgreSQL refuses, with its SQLSTATEs', async () => {
    const c = ctx.client;
    expect(await code(c.query('DECLARE outside CURSOR FOR SELECT 1'))).toBe('25P01');
    expect(await code(c.query('FETCH 1 FROM nowhere'))).toBe('34000');
    await c.query('BEGIN');
    await c.query('DECLARE c1 CURSOR FOR SELECT 1');
    expect(await code(c.query('DECLARE c1 CURSOR FOR SELECT 2'))).toBe('42P03');
    await c.query('ROLLBACK');
    await c.query('BEGIN');
    await c.query('DECLARE c1 CURSOR FOR SELECT 1');
    expect(await code(c.query('FETCH BACKWARD 1 FROM c1'))).toBe('55000');
    await c.query('ROLLBACK');
    await c.query('BEGIN');
    expect(await code(c.query('DECLARE w CURSOR FOR CREATE TABLE t_from_cursor (x int)'))).toBe('42P11');
    await c.query('ROLLBACK');
  });

  it('closes every cursor at the end of its transaction', async () => {
    const c = ctx.client;
    await c.query('BEGIN');
    await c.query('DECLARE gone CURSOR FOR SELECT 1');
    await c.query('COMMIT');
    expect(await code(c.query('FETCH 1 FROM gone'))).toBe('34000');
  });

  it('runs the cursor query through the guard like any other read', async () => {
    const c = ctx.client;
    await c.query('BEGIN');
    expect(await code(c.query("DECLARE f CURSOR FOR SELECT * FROM read_csv('/etc/passwd')"))).toBe('42501');
    await c.query('ROLLBACK');
  });
});

describe('DEALLOCATE and DISCARD ALL', () => {
  it('forget protocol-level prepared statements, as in PostgreSQL', async () => {
    const c = ctx.client;
    expect((await c.query({ name: 'q1', text: 'SELECT $1::int + 1 AS n', values: [1] })).rows).toEqual([{ n: 2 }]);
    expect((await c.query('DEALLOCATE q1')).command).toBe('DEALLOCATE');
    // node-postgres remembers it prepared q1 and sends only Bind: the server no longer has it.
    expect(await code(c.query({ name: 'q1', text: 'SELECT $1::int + 1 AS n', values: [1] }))).toBe('26000');
    const d = await ctx.server.client();
    await d.query({ name: 'q2', text: 'SELECT 2 AS n' });
    expect((await d.query('DEALLOCATE ALL')).command).toBe('DEALLOCATE');
    expect(await code(d.query({ name: 'q2', text: 'SELECT 2 AS n' }))).toBe('26000');
  });

  it('removes SQL-level prepared statements too', async () => {
    const c = await ctx.server.client();
    await c.query('PREPARE p1 AS SELECT 41 + 1 AS n');
    expect((await c.query('EXECUTE p1')).rows).toEqual([{ n: 42 }]);
    await c.query('DISCARD ALL');
    await expect(c.query('EXECUTE p1')).rejects.toThrow();
  });

  it('names EXECUTE columns as the PREPARE query names them, typed parameters included', async () => {
    const c = await ctx.server.client();
    await c.query('PREPARE typed(int, text) AS SELECT $1 + 1, $2, $1 AS named, upper($2)');
    const r = await c.query("EXECUTE typed(1, 'x')");
    expect(r.fields.map((f) => f.name)).toEqual(['?column?', '?column?', 'named', 'upper']);
    expect(r.rows).toEqual([{ '?column?': 'x', named: 1, upper: 'X' }]);
    await c.end();
  });
});
