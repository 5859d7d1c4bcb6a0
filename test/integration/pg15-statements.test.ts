import { describe, expect, it } from 'vitest';
import { useTestServer } from '../fixtures/server.js';

/** PostgreSQL 15 statements that DuckDB spells otherwise or lacks, each answered as PostgreSQL answers it. */
const ctx = useTestServer();

describe('INSERT ... ON CONFLICT ON CONSTRAINT name', () => {
  it('resolves a named or default constraint to its columns', async () => {
    const c = ctx.client;
    await c.query('CREATE TABLE occ (id int PRIMARY KEY, email text, n int, CONSTRAINT occ_mail UNIQUE (email))');
    await c.query("INSERT INTO occ VALUES (1, 'a', 1)");
    const up = await c.query("INSERT INTO occ VALUES (2, 'a', 5) ON CONFLICT ON CONSTRAINT occ_mail DO UPDATE SET n = excluded.n RETURNING *");
    expect(up.rows).toEqual([{ id: 1, email: 'a', n: 5 }]);
    const none = await c.query("INSERT INTO occ VALUES (1, 'b', 7) ON CONFLICT ON CONSTRAINT occ_pkey DO NOTHING");
    expect(none.rowCount).toBe(0);
    const param = await c.query('INSERT INTO occ VALUES ($1, $2, $3) ON CONFLICT ON CONSTRAINT occ_pkey DO UPDATE SET n = occ.n + 1 RETURNING n', [1, 'z', 0]);
    expect(param.rows).toEqual([{ n: 6 }]);
  });

  it('refuses an unknown name with 42704, as PostgreSQL does', async () => {
    await expect(ctx.client.query("INSERT INTO occ VALUES (3, 'c', 1) ON CONFLICT ON CONSTRAINT nope DO NOTHING")).rejects.toMatchObject({
      code: '42704',
      message: 'constraint "nope" for table "occ" does not exist',
    });
  });
  it('leaves a ledger table to the guard (42501), as ON CONFLICT (columns) is', async () => {
    const c = ctx.client;
    await c.query('CREATE TABLE _cot_occ (session_id VARCHAR, content VARCHAR)');
    await expect(c.query("INSERT INTO _cot_occ (session_id, content) VALUES ('s', 'a') ON CONFLICT ON CONSTRAINT any_name DO NOTHING")).rejects.toMatchObject({
      code: '42501',
      message: expect.stringContaining('ledger table "_cot_occ"'),
    });
  });
});

describe('PREPARE with argument types', () => {
  it('is still refused by the guard on a ledger table', async () => {
    const c = ctx.client;
    await c.query('CREATE TABLE _cot_prep (session_id VARCHAR, content VARCHAR)');
    await expect(c.query('PREPARE typed_del(text) AS DELETE FROM _cot_prep WHERE session_id = $1')).rejects.toMatchObject({ code: '42501' });
    await expect(c.query('PREPARE typed_upd(text) AS UPDATE _cot_prep SET content = $1')).rejects.toMatchObject({ code: '42501' });
    await expect(c.query({ name: 'typed_ledger', text: 'PREPARE typed_ext(text) AS DELETE FROM _cot_prep WHERE session_id = $1' })).rejects.toMatchObject({
      code: '42501',
    });
  });

  it('types each parameter as declared', async () => {
    const c = ctx.client;
    await c.query('PREPARE typed_p(int, text) AS SELECT $1 + 1 AS a, $2 AS b');
    expect((await c.query("EXECUTE typed_p(1, 'x')")).rows).toEqual([{ a: 2, b: 'x' }]);
    // A string for the int and a number for the text, converted as PostgreSQL converts them.
    expect((await c.query("EXECUTE typed_p('2', 3)")).rows).toEqual([{ a: 3, b: '3' }]);
    await c.query('DEALLOCATE typed_p');
    await c.query("PREPARE typed_q(numeric(10, 2), varchar) AS SELECT $1 AS v, $2 || '!' AS l, $1 * 2 AS d");
    expect((await c.query("EXECUTE typed_q(1.5, 'abc')")).rows).toEqual([{ v: '1.50', l: 'abc!', d: '3.00' }]);
    await c.query('DEALLOCATE typed_q');
  });
});

describe('partial indexes', () => {
  it('creates a non-unique partial index as a full index on the same columns', async () => {
    const c = ctx.client;
    await c.query('CREATE TABLE pidx (id int, x int, y int)');
    await c.query('INSERT INTO pidx VALUES (1, 5, 1), (2, 5, -1)');
    await c.query('CREATE INDEX pidx_x ON pidx (x) WHERE y > 0 AND (x IS NOT NULL)');
    expect((await c.query('SELECT id FROM pidx WHERE x = 5 AND y > 0')).rows).toEqual([{ id: 1 }]);
    expect((await c.query("SELECT indexname FROM pg_indexes WHERE tablename = 'pidx'")).rows).toEqual([{ indexname: 'pidx_x' }]);
  });

  it('keeps a partial UNIQUE index to the rows its predicate holds for', async () => {
    const c = ctx.client;
    await c.query('CREATE UNIQUE INDEX pidx_u ON pidx (x) WHERE y > 0');
    // Rows PostgreSQL accepts (x = 5 twice, one of them outside the predicate) are still accepted.
    await c.query('INSERT INTO pidx VALUES (3, 5, -2)');
    await expect(c.query('INSERT INTO pidx VALUES (4, 5, 7)')).rejects.toMatchObject({ code: '23505', detail: 'Key (x)=(5) already exists.' });
    await expect(c.query('INSERT INTO pidx VALUES (4, 5, 7) ON CONFLICT (x) WHERE y > 0 DO NOTHING')).rejects.toMatchObject({ code: '0A000' });
    await expect(c.query('INSERT INTO pidx VALUES (4, 6, 7) ON CONFLICT (x) DO NOTHING')).rejects.toMatchObject({ code: '42P10' });
    expect((await c.query("SELECT count(*)::int AS n FROM pg_indexes WHERE tablename = 'pidx'")).rows).toEqual([{ n: 2 }]);
  });
});

describe('data-modifying statements in WITH', () => {
  const reset = async (): Promise<void> => {
    const c = ctx.client;
    await c.query('CREATE TABLE IF NOT EXISTS dm_a (id int PRIMARY KEY, x int, note text)');
    await c.query('CREATE TABLE IF NOT EXISTS dm_b (id int PRIMARY KEY, x int, note text)');
    await c.query('DELETE FROM dm_a');
    await c.query('DELETE FROM dm_b');
    await c.query("INSERT INTO dm_a VALUES (1, 1, 'one'), (2, 2, 'two'), (3, 3, NULL)");
  };
  const rows = async (table: string): Promise<unknown[]> => (await ctx.client.query(`SELECT id, x, note FROM ${table} ORDER BY id`)).rows;

  it('moves rows: DELETE ... RETURNING into an INSERT, as PostgreSQL does', async () => {
    await reset();
    const r = await ctx.client.query('WITH moved AS (DELETE FROM dm_a WHERE x > 1 RETURNING *) INSERT INTO dm_b SELECT * FROM moved');
    expect(r.command).toBe('INSERT');
    expect(r.rowCount).toBe(2);
    expect(await rows('dm_a')).toEqual([{ id: 1, x: 1, note: 'one' }]);
    expect(await rows('dm_b')).toEqual([
      { id: 2, x: 2, note: 'two' },
      { id: 3, x: 3, note: null },
    ]);
  });

  it("returns an UPDATE's rows to a SELECT, with column names and other WITH queries", async () => {
    await reset();
    // A table of the WITH query's name is hidden by it, as in PostgreSQL, and left as it was.
    await ctx.client.query('CREATE TEMP TABLE u (z int)');
    const r = await ctx.client.query('WITH u AS (UPDATE dm_a SET x = x * 10 WHERE id <= 2 RETURNING id, x) SELECT * FROM u ORDER BY id');
    expect(r.command).toBe('SELECT');
    expect(r.rows).toEqual([
      { id: 1, x: 10 },
      { id: 2, x: 20 },
    ]);
    const named = await ctx.client.query(
      "WITH k AS (SELECT 3 AS id), i(n, t) AS (INSERT INTO dm_b (id, x, note) VALUES (9, 90, 'nine') RETURNING id, note) SELECT i.n, i.t, k.id FROM i, k",
    );
    expect(named.rows).toEqual([{ n: 9, t: 'nine', id: 3 }]);
    expect((await ctx.client.query('SELECT * FROM u')).rows).toEqual([]);
    await ctx.client.query('DROP TABLE u');
  });

  it('is all or nothing: when the statement fails, the data-modifying one is undone', async () => {
    await reset();
    await ctx.client.query('INSERT INTO dm_b VALUES (2, 0, NULL)');
    await expect(ctx.client.query('WITH moved AS (DELETE FROM dm_a WHERE x > 1 RETURNING *) INSERT INTO dm_b SELECT * FROM moved')).rejects.toMatchObject({
      code: '23505',
    });
    expect((await rows('dm_a')).length).toBe(3);
    await ctx.client.query('BEGIN');
    await ctx.client.query('WITH moved AS (DELETE FROM dm_a WHERE id = 3 RETURNING *) INSERT INTO dm_b SELECT * FROM moved');
    await ctx.client.query('ROLLBACK');
    expect((await rows('dm_a')).length).toBe(3);
  });

  it.each([
    // The statement reads the table the WITH query changes: PostgreSQL's would see it as it was before.
    'WITH d AS (DELETE FROM dm_a WHERE id = 1 RETURNING id) SELECT count(*) FROM dm_a',
    // Parameters, and a USING list, are not taken.
    { text: 'WITH d AS (DELETE FROM dm_a WHERE id = $1 RETURNING id) SELECT * FROM d', values: [1] },
    'WITH d AS (DELETE FROM dm_a USING dm_b WHERE dm_a.id = dm_b.id RETURNING dm_a.id) SELECT * FROM d',
  ])('refuses what it cannot do as PostgreSQL does with 0A000, changing nothing: %s', async (query) => {
    await reset();
    await expect(ctx.client.query(query)).rejects.toMatchObject({ code: '0A000', hint: expect.stringContaining('RETURNING') });
    expect((await rows('dm_a')).length).toBe(3);
  });

  it('on a ledger table are refused by the guard, as before (42501)', async () => {
    const c = ctx.client;
    await c.query('CREATE TABLE _cot_dm (session_id VARCHAR, content VARCHAR)');
    await c.query("INSERT INTO _cot_dm (session_id, content) VALUES ('s', 'kept')");
    for (const sql of [
      'WITH d AS (DELETE FROM _cot_dm RETURNING *) SELECT * FROM d',
      "WITH d AS (UPDATE _cot_dm SET content = 'x' RETURNING *) SELECT * FROM d",
      "WITH d AS (INSERT INTO _cot_dm (session_id, content) VALUES ('s', 'y') RETURNING *) SELECT * FROM d",
    ]) {
      await expect(c.query(sql)).rejects.toMatchObject({ code: '42501', message: expect.stringContaining('ledger table "_cot_dm"') });
      // The extended protocol too: a named statement is parsed, described and executed apart.
      await expect(c.query({ name: 'dm_ledger', text: sql })).rejects.toMatchObject({ code: '42501' });
    }
    expect((await c.query('SELECT content FROM _cot_dm')).rows).toEqual([{ content: 'kept' }]);
  });
});
