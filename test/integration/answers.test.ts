import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import { useTestServer } from '../fixtures/server.js';

/**
 * Answers that must be PostgreSQL's, or a clear error: never a different
 * result without one.
 */
const ctx = useTestServer();

describe('LIKE takes a backslash as its escape character, as in PostgreSQL', () => {
  it.each([
    ["SELECT 'a_b' LIKE 'a\\_b' AS r", true],
    ["SELECT 'axb' LIKE 'a\\_b' AS r", false],
    ["SELECT '50%' LIKE '50\\%' AS r", true],
    ["SELECT '500' LIKE '50\\%' AS r", false],
    ["SELECT '500' NOT LIKE '50\\%' AS r", true],
    ["SELECT 'A_B' ILIKE 'a\\_b' AS r", true],
    ["SELECT 'a\\b' LIKE 'a\\\\b' AS r", true],
    // An explicit ESCAPE is the client's.
    ["SELECT 'a_b' LIKE 'a#_b' ESCAPE '#' AS r", true],
  ])('%s', async (sql, expected) => {
    expect((await ctx.client.query(sql)).rows).toEqual([{ r: expected }]);
  });

  it('applies to a parameter pattern', async () => {
    const { rows } = await ctx.client.query('SELECT $1::text LIKE $2 AS hit, $3::text LIKE $2 AS miss', ['50%', '50\\%', '500']);
    expect(rows).toEqual([{ hit: true, miss: false }]);
  });

  it('refuses a pattern that ends with the escape character, as PostgreSQL does', async () => {
    await expect(ctx.client.query("SELECT 'a' LIKE 'a\\' AS r")).rejects.toThrow(/escape/i);
  });
});

describe('set-returning functions in the select list return rows', () => {
  it('expands generate_series into one row per value, named as PostgreSQL names it', async () => {
    const r = await ctx.client.query('SELECT generate_series(1, 3)');
    expect(r.fields.map((f) => f.name)).toEqual(['generate_series']);
    expect(r.rows.map((row: { generate_series: unknown }) => Number(row.generate_series))).toEqual([1, 2, 3]);
    expect((await ctx.client.query('SELECT generate_series(1, 3)::int AS n')).rows).toEqual([{ n: 1 }, { n: 2 }, { n: 3 }]);
  });

  it('zips several, padding the shorter with NULLs (PostgreSQL 10 and later)', async () => {
    const { rows } = await ctx.client.query('SELECT generate_series(1, 2)::int AS a, generate_series(1, 3)::int AS b');
    expect(rows).toEqual([
      { a: 1, b: 1 },
      { a: 2, b: 2 },
      { a: null, b: 3 },
    ]);
  });

  it('expands per row of the FROM clause', async () => {
    const { rows } = await ctx.client.query('SELECT x, generate_series(1, x)::int AS n FROM (VALUES (1), (2)) t(x) ORDER BY x, n');
    expect(rows).toEqual([
      { x: 1, n: 1 },
      { x: 2, n: 1 },
      { x: 2, n: 2 },
    ]);
  });
});

describe('numeric without a precision keeps every digit, as in PostgreSQL', () => {
  it('of a double, the 15 significant digits PostgreSQL keeps, not its binary noise', async () => {
    // DuckDB alone: 123456789.123456784, its double's binary value.
    const r = await ctx.client.query(
      'SELECT (123456789.123456789::float8)::numeric AS d, (0.1::float4)::numeric AS r, round(percentile_cont(0.5) WITHIN GROUP (ORDER BY x)::numeric, 2) AS p FROM (VALUES (1.005::float8), (2.0)) v(x)',
    );
    expect(r.rows).toEqual([{ d: '123456789.123457', r: '0.1', p: '1.50' }]);
  });

  it('in casts, table columns and aggregates over them', async () => {
    const c = ctx.client;
    // DuckDB alone: DECIMAL(18,3), so 1.235 and 133.873.
    const cast = await c.query("SELECT '1.23456'::numeric AS a, CAST('2.5' AS decimal) AS b, 1::numeric AS c, '0.1'::numeric * '3'::numeric AS d");
    expect(cast.rows).toEqual([{ a: '1.23456', b: '2.5', c: '1', d: '0.3' }]);
    expect(cast.fields.map((f) => [f.dataTypeID, f.dataTypeModifier])).toEqual([
      [1700, -1],
      [1700, -1],
      [1700, -1],
      [1700, -1],
    ]);
    await c.query('CREATE TABLE answers_numeric (exact numeric(10,2), free numeric, list numeric[])');
    await c.query("INSERT INTO answers_numeric VALUES (100.50, 1.23456, '{1.5,2}'), (167.245, 0.000000001, NULL)");
    const rows = await c.query('SELECT exact, free, list FROM answers_numeric ORDER BY exact');
    expect(rows.rows).toEqual([
      { exact: '100.50', free: '1.23456', list: [1.5, 2] },
      { exact: '167.25', free: '0.000000001', list: null },
    ]);
    const avg = await c.query('SELECT round(avg(exact)::numeric, 4) AS r, sum(free) AS s FROM answers_numeric');
    expect(avg.rows).toEqual([{ r: '133.8750', s: '1.234560001' }]);
    const described = await c.query(
      "SELECT attname, format_type(atttypid, atttypmod) AS t FROM pg_attribute WHERE attrelid = 'answers_numeric'::regclass AND attnum > 0 ORDER BY attnum",
    );
    expect(described.rows).toEqual([
      { attname: 'exact', t: 'numeric(10,2)' },
      { attname: 'free', t: 'numeric' },
      { attname: 'list', t: 'numeric[]' },
    ]);
    const info = await c.query(
      "SELECT column_name, numeric_precision, numeric_scale FROM information_schema.columns WHERE table_name = 'answers_numeric' AND column_name <> 'list' ORDER BY ordinal_position",
    );
    expect(info.rows).toEqual([
      { column_name: 'exact', numeric_precision: 10, numeric_scale: 2 },
      { column_name: 'free', numeric_precision: null, numeric_scale: null },
    ]);
  });

  it('refuses a literal with a digit past the ninth decimal bound for such a column (22003), where DuckDB alone rounds it', async () => {
    const c = ctx.client;
    await c.query('CREATE TABLE answers_fine (id int, free numeric, exact numeric(12,2))');
    for (const sql of [
      'INSERT INTO answers_fine VALUES (1, 0.1234567890123456789, 1)',
      'INSERT INTO answers_fine (free, id) VALUES (-1.5e-10, 2)',
      'INSERT INTO answers_fine (id, free) VALUES (3, 1), (4, 0.00000000001)',
    ]) {
      await expect(c.query(sql), sql).rejects.toMatchObject({ code: '22003', message: expect.stringContaining('9 after the point') });
    }
    await c.query('INSERT INTO answers_fine VALUES (5, 0.000000001, 1.239), (6, 0.1234567890000, 2)');
    await expect(c.query('UPDATE answers_fine SET free = 1e-12 WHERE id = 5')).rejects.toMatchObject({ code: '22003' });
    // A numeric(p,s) column rounds to its scale, as in PostgreSQL.
    expect((await c.query('SELECT id, free, exact FROM answers_fine ORDER BY id')).rows).toEqual([
      { id: 5, free: '0.000000001', exact: '1.24' },
      { id: 6, free: '0.123456789', exact: '2.00' },
    ]);
  });
});

describe("result columns are named by PostgreSQL's rules", () => {
  it('for casts to arrays and the SQL-syntax functions', async () => {
    const r = await ctx.client.query(
      "SELECT $1::text[], extract(year FROM DATE '2024-05-06'), substring('abc' FROM 1 FOR 1), trim(' a '), position('b' IN 'abc')",
      [['x']],
    );
    expect(r.fields.map((f) => f.name)).toEqual(['text', 'extract', 'substring', 'btrim', 'position']);
  });
});

describe('DDL of ordinary tables as ORMs write it', () => {
  it('makes serial and identity columns a sequence and a default, as PostgreSQL does, dropped with the table', async () => {
    const c = ctx.client;
    await c.query('CREATE TABLE ddl_serial (id serial PRIMARY KEY, name varchar(255) NOT NULL, meta jsonb, created timestamp(3) with time zone DEFAULT now())');
    await c.query('CREATE TABLE ddl_identity (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, v text)');
    await c.query('CREATE TABLE ddl_start (id integer GENERATED BY DEFAULT AS IDENTITY (START WITH 10 INCREMENT BY 5), v text)');
    // IF NOT EXISTS on an existing table creates nothing, its sequence included.
    await c.query('CREATE TABLE IF NOT EXISTS ddl_start (id serial, v text)');
    const a = await c.query("INSERT INTO ddl_serial (name) VALUES ('a'), ('b') RETURNING id");
    expect(a.rows).toEqual([{ id: 1 }, { id: 2 }]);
    // varchar(255) holds 255 characters and refuses more, as in PostgreSQL; the check that does it is not a listed constraint.
    await c.query('INSERT INTO ddl_serial (name) VALUES ($1)', ['é'.repeat(255)]);
    await expect(c.query('INSERT INTO ddl_serial (name) VALUES ($1)', ['x'.repeat(256)])).rejects.toMatchObject({
      code: '22001',
      message: 'value too long for type character varying(255)',
    });
    await expect(c.query("UPDATE ddl_serial SET name = repeat('y', 300) WHERE id = 1")).rejects.toMatchObject({ code: '22001' });
    expect((await c.query("SELECT count(*)::int AS n FROM pg_constraint WHERE conrelid = 'ddl_serial'::regclass AND contype = 'c'")).rows).toEqual([{ n: 0 }]);
    expect((await c.query("INSERT INTO ddl_identity (v) VALUES ('x') RETURNING id")).rows).toEqual([{ id: '1' }]);
    // GENERATED ALWAYS: a value of the client's is refused, as in PostgreSQL, unless it says OVERRIDING SYSTEM VALUE.
    await expect(c.query("INSERT INTO ddl_identity (id, v) VALUES (7, 'y')")).rejects.toMatchObject({ code: '428C9' });
    await expect(c.query("INSERT INTO ddl_identity VALUES (7, 'y')")).rejects.toMatchObject({ code: '428C9' });
    await expect(c.query('UPDATE ddl_identity SET id = 7')).rejects.toMatchObject({ code: '428C9', message: 'column "id" can only be updated to DEFAULT' });
    expect((await c.query("INSERT INTO ddl_identity VALUES (DEFAULT, 'z') RETURNING id")).rows).toEqual([{ id: '2' }]);
    expect((await c.query("INSERT INTO ddl_identity (id, v) OVERRIDING SYSTEM VALUE VALUES (9, 'w') RETURNING id")).rows).toEqual([{ id: '9' }]);
    expect((await c.query("INSERT INTO ddl_start (v) VALUES ('x'), ('y') RETURNING id")).rows).toEqual([{ id: 10 }, { id: 15 }]);
    const described = await c.query(
      "SELECT pg_get_serial_sequence('ddl_serial', 'id') AS seq, (SELECT column_default FROM information_schema.columns WHERE table_name = 'ddl_serial' AND column_name = 'id') AS def",
    );
    expect(described.rows).toEqual([{ seq: 'public.ddl_serial_id_seq', def: "nextval('ddl_serial_id_seq'::regclass)" }]);
    // Dropped and created again (a migration rolled back and run again): numbering starts over.
    await c.query('DROP TABLE ddl_serial');
    expect((await c.query("SELECT count(*)::int AS n FROM pg_sequences WHERE sequencename = 'ddl_serial_id_seq'")).rows).toEqual([{ n: 0 }]);
    await c.query('CREATE TABLE ddl_serial (id serial PRIMARY KEY, name text)');
    expect((await c.query("INSERT INTO ddl_serial (name) VALUES ('c') RETURNING id")).rows).toEqual([{ id: 1 }]);
  });

  it('leaves no sequence behind when the CREATE TABLE fails', async () => {
    const c = ctx.client;
    await c.query('CREATE TABLE ddl_taken (x int)');
    const err = await c.query('CREATE TABLE ddl_taken (id serial)').catch((e: { code?: string }) => e);
    expect(err).toMatchObject({ code: '42P07' });
    expect((await c.query("SELECT count(*)::int AS n FROM pg_sequences WHERE sequencename = 'ddl_taken_id_seq'")).rows).toEqual([{ n: 0 }]);
  });

  it('takes foreign keys, unique constraints and indexes as ORMs write them', async () => {
    const c = ctx.client;
    await c.query('CREATE TABLE ddl_parent (id serial PRIMARY KEY, email text)');
    // Sequelize's defaults: the actions are carried out.
    await c.query(
      'CREATE TABLE ddl_child (id serial PRIMARY KEY, parent_id integer NOT NULL REFERENCES ddl_parent (id) ON DELETE CASCADE ON UPDATE CASCADE, note text)',
    );
    await c.query('CREATE INDEX ddl_child_parent ON ddl_child USING btree (parent_id)');
    // Knex's .unique(): a unique index enforces it.
    await c.query('ALTER TABLE ddl_parent ADD CONSTRAINT ddl_parent_email_unique UNIQUE (email)');
    await c.query("INSERT INTO ddl_parent (email) VALUES ('a@x.io'), ('b@x.io')");
    await expect(c.query("INSERT INTO ddl_parent (email) VALUES ('a@x.io')")).rejects.toMatchObject({ code: '23505' });
    await c.query('INSERT INTO ddl_child (parent_id) VALUES (1)');
    const gone = (await c.query("INSERT INTO ddl_parent (email) VALUES ('gone@x.io') RETURNING id")).rows[0].id as number;
    await c.query('INSERT INTO ddl_child (parent_id) VALUES ($1)', [gone]);
    expect((await c.query('DELETE FROM ddl_parent WHERE id = $1', [gone])).rowCount).toBe(1);
    expect((await c.query('SELECT parent_id FROM ddl_child ORDER BY id')).rows).toEqual([{ parent_id: 1 }]);
    // A foreign key added to an existing table (Knex, TypeORM, Drizzle, pg_dump): its rows are checked.
    await c.query('CREATE TABLE ddl_late (id serial PRIMARY KEY, parent_id integer)');
    await c.query('CREATE INDEX ddl_late_parent ON ddl_late (parent_id)');
    await c.query('INSERT INTO ddl_late (parent_id) VALUES (1), (2), (NULL)');
    const added = await c.query(
      'ALTER TABLE ONLY ddl_late ADD CONSTRAINT ddl_late_parent_fk FOREIGN KEY (parent_id) REFERENCES ddl_parent (id) ON DELETE SET NULL',
    );
    expect(added.command).toBe('ALTER');
    expect((await c.query('SELECT id, parent_id FROM ddl_late ORDER BY id')).rows).toEqual([
      { id: 1, parent_id: 1 },
      { id: 2, parent_id: 2 },
      { id: 3, parent_id: null },
    ]);
    await expect(c.query('INSERT INTO ddl_late (parent_id) VALUES (99)')).rejects.toMatchObject({ code: '23503' });
    expect((await c.query('INSERT INTO ddl_late (parent_id) VALUES (2) RETURNING id')).rows).toEqual([{ id: 5 }]);
    const shape = await c.query(
      "SELECT (SELECT count(*)::int FROM pg_indexes WHERE tablename = 'ddl_late') AS indexes, (SELECT count(*)::int FROM pg_constraint WHERE conrelid = 'ddl_late'::regclass AND contype = 'f') AS keys",
    );
    expect(shape.rows).toEqual([{ indexes: 2, keys: 1 }]);
    // Rows that break the key: nothing changes.
    await c.query('CREATE TABLE ddl_bad (parent_id integer)');
    await c.query('INSERT INTO ddl_bad VALUES (1), (42)');
    await expect(c.query('ALTER TABLE ddl_bad ADD FOREIGN KEY (parent_id) REFERENCES ddl_parent (id)')).rejects.toMatchObject({ code: '23503' });
    expect((await c.query('SELECT count(*)::int AS n FROM ddl_bad')).rows).toEqual([{ n: 2 }]);
    // A key references a unique key.
    await expect(c.query('ALTER TABLE ddl_parent ADD FOREIGN KEY (id) REFERENCES ddl_bad (parent_id)')).rejects.toMatchObject({ code: '42830' });
    expect((await c.query("COMMENT ON TABLE ddl_late IS 'late'")).command).toBe('COMMENT');
  });

  it('drops the foreign keys of a schema it drops, and refuses while another schema references it', async () => {
    const c = ctx.client;
    await c.query('CREATE SCHEMA fk_sch');
    await c.query('CREATE TABLE fk_sch.parent (id int PRIMARY KEY)');
    await c.query('CREATE TABLE fk_sch_child (id int, pid int REFERENCES fk_sch.parent)');
    await expect(c.query('DROP SCHEMA fk_sch')).rejects.toMatchObject({ code: '2BP01' });
    await c.query('DROP SCHEMA fk_sch CASCADE');
    // A table of the same name made again is not bound by the dropped key.
    await c.query('CREATE SCHEMA fk_sch');
    await c.query('CREATE TABLE fk_sch.parent (id int PRIMARY KEY)');
    expect((await c.query('INSERT INTO fk_sch_child VALUES (1, 42)')).rowCount).toBe(1);
    expect((await c.query("SELECT count(*)::int AS n FROM pg_constraint WHERE conrelid = 'fk_sch_child'::regclass AND contype = 'f'")).rows).toEqual([
      { n: 0 },
    ]);
  });

  it('adds a CHECK to an existing table, checking its rows, under the name it was given', async () => {
    const c = ctx.client;
    await c.query('CREATE TABLE ddl_checked (id int PRIMARY KEY, total numeric(10,2), qty int)');
    await c.query('CREATE INDEX ddl_checked_qty ON ddl_checked (qty)');
    await c.query('INSERT INTO ddl_checked VALUES (1, 5, 1), (2, -1, 2)');
    // A row already there breaks it: refused, and nothing changes.
    await expect(c.query('ALTER TABLE ddl_checked ADD CONSTRAINT positive_total CHECK (total > 0)')).rejects.toMatchObject({ code: '23514' });
    expect((await c.query('SELECT count(*)::int AS n FROM ddl_checked')).rows).toEqual([{ n: 2 }]);
    await c.query('DELETE FROM ddl_checked WHERE id = 2');
    expect((await c.query('ALTER TABLE ddl_checked ADD CONSTRAINT positive_total CHECK (total > 0)')).command).toBe('ALTER');
    await c.query('ALTER TABLE ONLY ddl_checked ADD CHECK (qty < 100) NOT VALID');
    await expect(c.query('INSERT INTO ddl_checked VALUES (3, -5, 1)')).rejects.toMatchObject({ code: '23514' });
    await expect(c.query('INSERT INTO ddl_checked VALUES (4, 5, 100)')).rejects.toMatchObject({ code: '23514' });
    expect((await c.query('INSERT INTO ddl_checked VALUES (5, 7, 3) RETURNING id')).rows).toEqual([{ id: 5 }]);
    const named = await c.query("SELECT conname, contype FROM pg_constraint WHERE conrelid = 'ddl_checked'::regclass ORDER BY conname");
    expect(named.rows).toEqual([
      { conname: 'ddl_checked_pkey', contype: 'p' },
      { conname: 'ddl_checked_qty_check', contype: 'c' },
      { conname: 'positive_total', contype: 'c' },
    ]);
    expect((await c.query("SELECT count(*)::int AS n FROM pg_indexes WHERE tablename = 'ddl_checked'")).rows).toEqual([{ n: 2 }]);
  });

  it('drops several tables in one DROP, and a table named in public, all or none, never a ledger', async () => {
    const c = ctx.client;
    const tables = async (): Promise<string[]> =>
      (await c.query("SELECT relname FROM pg_class WHERE relname LIKE 'ddl_drop%' AND relkind = 'r' ORDER BY 1")).rows.map(
        (r: { relname: string }) => r.relname,
      );
    await c.query('CREATE TABLE ddl_drop_a (id serial PRIMARY KEY)');
    await c.query('CREATE TABLE ddl_drop_b (x int)');
    await c.query('CREATE TABLE ddl_drop_c (x int)');
    // A name that does not exist fails the whole DROP, as in PostgreSQL: nothing is dropped.
    await expect(c.query('DROP TABLE ddl_drop_a, ddl_drop_nope')).rejects.toMatchObject({ code: '42P01' });
    // A ledger among them is refused, and the others stay.
    await expect(c.query('DROP TABLE ddl_drop_b, _cot_steps')).rejects.toMatchObject({ code: '42501' });
    expect(await tables()).toEqual(['ddl_drop_a', 'ddl_drop_b', 'ddl_drop_c']);
    expect((await c.query('DROP TABLE IF EXISTS ddl_drop_a, ddl_drop_nope, public.ddl_drop_b')).command).toBe('DROP');
    expect((await c.query('DROP TABLE public.ddl_drop_c')).command).toBe('DROP');
    expect(await tables()).toEqual([]);
    // The serial column's sequence went with its table: the table can be created again.
    await c.query('CREATE TABLE ddl_drop_a (id serial PRIMARY KEY)');
    await c.query('DROP TABLE ddl_drop_a');
  });

  it('drops, renames and retypes an indexed column, in a transaction block as migrations run them', async () => {
    const c = ctx.client;
    await c.query('CREATE TABLE ddl_cols (id int PRIMARY KEY, a int, b text, "Odd" int)');
    await c.query('CREATE INDEX ddl_cols_a ON ddl_cols (a)');
    await c.query('CREATE INDEX ddl_cols_ab ON ddl_cols (a, b)');
    await c.query('CREATE INDEX ddl_cols_odd ON ddl_cols ("Odd")');
    await c.query("COMMENT ON COLUMN ddl_cols.a IS 'the a'");
    await c.query("INSERT INTO ddl_cols VALUES (1, 2, 'x', 3)");
    await c.query('BEGIN');
    await c.query('ALTER TABLE ddl_cols DROP COLUMN b');
    await c.query('ALTER TABLE ddl_cols RENAME COLUMN a TO c');
    await c.query('ALTER TABLE ddl_cols ALTER COLUMN c TYPE bigint');
    await c.query('COMMIT');
    await c.query('ALTER TABLE ddl_cols RENAME COLUMN "Odd" TO even');
    // The index on the dropped column went with it, as in PostgreSQL; the others follow their column.
    const indexes = await c.query("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'ddl_cols' ORDER BY 1");
    expect(indexes.rows).toEqual([
      { indexname: 'ddl_cols_a', indexdef: 'CREATE INDEX ddl_cols_a ON public.ddl_cols USING btree (c)' },
      { indexname: 'ddl_cols_odd', indexdef: 'CREATE INDEX ddl_cols_odd ON public.ddl_cols USING btree (even)' },
      { indexname: 'ddl_cols_pkey', indexdef: 'CREATE UNIQUE INDEX ddl_cols_pkey ON public.ddl_cols USING btree (id)' },
    ]);
    expect((await c.query('SELECT * FROM ddl_cols')).rows).toEqual([{ id: 1, c: '2', even: 3 }]);
    expect((await c.query("SELECT col_description('ddl_cols'::regclass, 2) AS d")).rows).toEqual([{ d: 'the a' }]);
    await expect(c.query('ALTER TABLE ddl_cols DROP COLUMN nope')).rejects.toMatchObject({ code: '42703' });
  });

  it('refuses a foreign key added to a ledger, which would rebuild it', async () => {
    const c = ctx.client;
    await c.query("INSERT INTO _cot_steps (session_id, step_type, content) VALUES ('fk', 'Observation', 'kept')");
    await c.query('CREATE TABLE ddl_sessions (id text PRIMARY KEY)');
    for (const target of ['_cot_steps', 'ONLY _cot_steps', 'public._cot_steps', 'cotwire.public._cot_steps', '"_cot_steps"']) {
      await expect(c.query(`ALTER TABLE ${target} ADD CONSTRAINT s_fk FOREIGN KEY (session_id) REFERENCES ddl_sessions (id)`)).rejects.toMatchObject({
        code: '42501',
      });
    }
    // The other statements cotwire carries out itself, on a ledger: each is refused, and nothing changes.
    for (const sql of [
      'ALTER TABLE _cot_steps DROP COLUMN content',
      'ALTER TABLE _cot_steps RENAME COLUMN content TO c2',
      'ALTER TABLE _cot_steps ALTER COLUMN content TYPE VARCHAR',
      'ALTER TABLE _cot_steps ADD CONSTRAINT u UNIQUE (content)',
    ]) {
      await expect(c.query(sql), sql).rejects.toMatchObject({ code: '42501' });
    }
    expect((await c.query("SELECT content FROM _cot_steps WHERE session_id = 'fk'")).rows).toEqual([{ content: 'kept' }]);
  });

  it('refuses a serial column in a ledger, where the writer numbers the rows', async () => {
    const err = await ctx.client.query('CREATE TABLE _cot_ddl (id serial, note text)').catch((e: { code?: string }) => e);
    expect(err).toMatchObject({ code: '0A000' });
  });
});

describe('jsonb operators and functions', () => {
  it('answers as PostgreSQL does', async () => {
    const c = ctx.client;
    await c.query('CREATE TABLE json_docs (id int, meta jsonb)');
    await c.query('INSERT INTO json_docs VALUES (1, $1), (2, $2)', ['{"x":1,"tags":["a","b"]}', '{"x":2,"n":null}']);
    const r = await c.query(
      `SELECT meta @> '{"x":1}' AS c, meta ? 'tags' AS h, meta #>> '{tags,0}' AS t0, meta->'tags'->>1 AS t1,
         meta ?| array['zz','x'] AS anyk, meta ?& array['zz','x'] AS allk, '{"x":1}'::jsonb <@ meta AS cb, meta #> '{tags}' AS tg
       FROM json_docs ORDER BY id`,
    );
    expect(r.rows).toEqual([
      { c: true, h: true, t0: 'a', t1: 'b', anyk: true, allk: false, cb: true, tg: ['a', 'b'] },
      { c: false, h: false, t0: null, t1: null, anyk: true, allk: false, cb: false, tg: null },
    ]);
    const each = await c.query('SELECT key, value FROM json_docs, jsonb_each_text(meta) WHERE id = 2 ORDER BY key');
    expect(each.rows).toEqual([
      { key: 'n', value: null },
      { key: 'x', value: '2' },
    ]);
    const agg = await c.query('SELECT jsonb_agg(id ORDER BY id DESC) AS a, (SELECT json_agg(id) FROM json_docs WHERE false) AS none FROM json_docs');
    expect(agg.rows).toEqual([{ a: [2, 1], none: null }]);
  });

  it('prints a double, a real and a numeric beside text in || as a cast to text does', async () => {
    const c = ctx.client;
    await c.query('CREATE TABLE concat_numbers (f float8, r real, n numeric, t text[])');
    await c.query("INSERT INTO concat_numbers VALUES (2.0, 0.5, 1.5, '{a}'), ('NaN', 3, 0.000000001, NULL), (35000000000, 4, 10, NULL)");
    const r = await c.query("SELECT 'v=' || f || ',' || r || ',' || n AS s, f || '' AS f, 'x' || max(r) OVER () AS w FROM concat_numbers ORDER BY r");
    expect(r.rows).toEqual([
      { s: 'v=2,0.5,1.5', f: '2', w: 'x4' },
      { s: 'v=NaN,3,0.000000001', f: 'NaN', w: 'x4' },
      { s: 'v=35000000000,4,10', f: '35000000000', w: 'x4' },
    ]);
    // Arrays keep DuckDB's || (rewrite/arrays.ts): the rule is for text.
    expect((await c.query('SELECT t || t AS tt FROM concat_numbers WHERE t IS NOT NULL')).rows).toEqual([{ tt: ['a', 'a'] }]);
  });

  it('reads a jsonb column as jsonb keeps it: numbers as written, keys in order, jsonb s spacing', async () => {
    const c = ctx.client;
    await c.query('CREATE TABLE json_kept (id int, j jsonb)');
    await c.query('INSERT INTO json_kept VALUES (1, $1), (2, $2)', ['{"n":1.10,"b":[1,2,{"c":"x"}],"a":1}', '[1,2.50,"x",null]']);
    // Without || in the statement too: -> and ->> on the column keep 1.10, and a cast to text is jsonb's text.
    const r = await c.query(`SELECT j -> 'n' AS n, j ->> 'b' AS b, j -> 1 AS e, j::text AS t, CAST(j -> 'b' AS varchar) AS bt FROM json_kept ORDER BY id`, []);
    expect(r.rows).toEqual([
      { n: 1.1, b: '[1, 2, {"c": "x"}]', e: null, t: '{"a": 1, "b": [1, 2, {"c": "x"}], "n": 1.10}', bt: '[1, 2, {"c": "x"}]' },
      { n: null, b: null, e: 2.5, t: '[1, 2.50, "x", null]', bt: null },
    ]);
    const raw = await c.query({
      text: "SELECT j -> 'n' AS n, j -> 1 AS e FROM json_kept ORDER BY id",
      rowMode: 'array',
      types: { getTypeParser: () => (v: string) => v },
    });
    expect(raw.rows).toEqual([
      ['1.10', null],
      [null, '2.50'],
    ]);
  });
});

describe('LOCK TABLE', () => {
  it('takes the read modes in a transaction block (pg_dump), and refuses what it cannot honour', async () => {
    const c = await ctx.server.client();
    await c.query('CREATE TABLE lock_me (x int)');
    await expect(c.query('LOCK TABLE lock_me IN ACCESS SHARE MODE')).rejects.toMatchObject({ code: '25P01' });
    await c.query('BEGIN');
    expect((await c.query('LOCK TABLE public.lock_me IN ACCESS SHARE MODE')).command).toBe('LOCK');
    expect((await c.query('LOCK lock_me, lock_me IN ROW SHARE MODE NOWAIT')).command).toBe('LOCK');
    await expect(c.query('LOCK TABLE lock_me')).rejects.toMatchObject({ code: '0A000', message: 'LOCK TABLE IN ACCESS EXCLUSIVE MODE is not supported' });
    await c.query('ROLLBACK');
    await c.query('BEGIN');
    await expect(c.query('LOCK TABLE no_such_table IN ACCESS SHARE MODE')).rejects.toMatchObject({ code: '42P01' });
    await c.query('ROLLBACK');
  });

  it('finds a table made or dropped since the last LOCK on another connection, and this connection’s temporary table', async () => {
    const a = await ctx.server.client();
    const b = await ctx.server.client();
    await a.query('CREATE TABLE lock_early (x int)');
    await b.query('BEGIN');
    await b.query('LOCK TABLE lock_early IN ACCESS SHARE MODE');
    await b.query('COMMIT');
    await a.query('CREATE TABLE lock_late (x int)');
    await a.query('DROP TABLE lock_early');
    await b.query('BEGIN');
    expect((await b.query('LOCK TABLE lock_late IN ACCESS SHARE MODE')).command).toBe('LOCK');
    await expect(b.query('LOCK TABLE lock_early IN ACCESS SHARE MODE')).rejects.toMatchObject({ code: '42P01' });
    await b.query('ROLLBACK');
    await b.query('CREATE TEMP TABLE lock_mine (x int)');
    await b.query('BEGIN');
    expect((await b.query('LOCK TABLE lock_mine IN ACCESS SHARE MODE')).command).toBe('LOCK');
    await b.query('COMMIT');
  });
});

describe('row locking clauses', () => {
  it('takes FOR UPDATE, FOR SHARE and SKIP LOCKED', async () => {
    const c = ctx.client;
    await c.query('CREATE TABLE lock_rows (id int PRIMARY KEY, n int)');
    await c.query('INSERT INTO lock_rows VALUES (1, 10), (2, 20)');
    await c.query('BEGIN');
    expect((await c.query('SELECT n FROM lock_rows WHERE id = 1 FOR UPDATE')).rows).toEqual([{ n: 10 }]);
    expect((await c.query('SELECT r.n FROM lock_rows r WHERE id = 2 FOR NO KEY UPDATE OF r NOWAIT')).rows).toEqual([{ n: 20 }]);
    expect((await c.query('SELECT count(*)::int AS k FROM lock_rows FOR SHARE')).rows).toEqual([{ k: 2 }]);
    await c.query('UPDATE lock_rows SET n = n + 1 WHERE id = 1');
    await c.query('COMMIT');
    expect((await c.query('SELECT id FROM lock_rows ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED')).rows).toEqual([{ id: 1 }]);
    // A column that happens to be called skip is not a locking clause.
    expect((await c.query('SELECT 1 AS skip')).rows).toEqual([{ skip: 1 }]);
  });

  it('reports a unique violation with the detail ORMs parse', async () => {
    const c = ctx.client;
    await c.query('CREATE TABLE uniq_rows (email text UNIQUE)');
    await c.query("INSERT INTO uniq_rows VALUES ('a@x.io')");
    const err = await c.query("INSERT INTO uniq_rows VALUES ('a@x.io')").catch((e: { code?: string; detail?: string; message?: string }) => e);
    expect(err).toMatchObject({ code: '23505', message: 'duplicate key value violates unique constraint', detail: 'Key (email)=(a@x.io) already exists.' });
  });
});

describe('to_char', () => {
  // Each answer is PostgreSQL 15's for the same call.
  it.each([
    ["to_char(timestamp '2024-05-06 07:08:09.123', 'YYYY-MM-DD HH24:MI:SS')", '2024-05-06 07:08:09'],
    ["to_char(date '2024-05-06', 'Mon DD, YYYY')", 'May 06, 2024'],
    ["to_char(timestamp '2024-05-06 17:08:09', 'FMMonth FMDD HH12:MI AM')", 'May 6 05:08 PM'],
    ["to_char(timestamp '2024-05-06 17:08:09', 'Day')", 'Monday   '],
    ["to_char(timestamp '2024-11-06', 'YYYY-\"Q\"Q')", '2024-Q4'],
    ["to_char(1234.5, '9999.99')", ' 1234.50'],
    ["to_char(1234.5, 'FM9999.99')", '1234.5'],
    ["to_char(5, '0000')", ' 0005'],
    ["to_char(1234567.891, '9,999,999.99')", ' 1,234,567.89'],
    ["to_char(-5.5, '999.9')", '  -5.5'],
    ["to_char(0.5, '9.99')", '  .50'],
    ["to_char(12345, '999')", ' ###'],
    ["to_char(2.675::numeric, 'FM0.00')", '2.68'],
    ["to_char(5, 'FM999.99')", '5.'],
  ])('%s', async (call, expected) => {
    expect((await ctx.client.query(`SELECT ${call} AS v`)).rows).toEqual([{ v: expected }]);
  });

  it('leaves a pattern it does not translate to fail, never to answer differently', async () => {
    await expect(ctx.client.query("SELECT to_char(now(), 'IYYY-IW')")).rejects.toMatchObject({ code: '42883' });
  });
});

describe('catalog queries of reflection tools', () => {
  it('reads columns qualified by schema and relation (SQLAlchemy), EXISTS (SELECT FROM ...) and regtype[] literals (drizzle-kit)', async () => {
    const c = ctx.client;
    const q = await c.query("SELECT pg_catalog.pg_class.relname FROM pg_catalog.pg_class WHERE pg_catalog.pg_class.relname = '_cot_steps'");
    expect(q.rows).toEqual([{ relname: '_cot_steps' }]);
    const e = await c.query("SELECT EXISTS (SELECT FROM pg_catalog.pg_class c WHERE c.relname = '_cot_steps') AS e");
    expect(e.rows).toEqual([{ e: true }]);
    const r = await c.query("SELECT typname FROM pg_type WHERE oid = ANY('{int,int8,text}'::regtype[]) ORDER BY 1");
    expect(r.rows.map((x: { typname: string }) => x.typname)).toEqual(['int4', 'int8', 'text']);
  });

  it('refuses pg_notify with 0A000 and a hint, as LISTEN and NOTIFY', async () => {
    await expect(ctx.client.query("SELECT pg_notify('jobs', 'x')")).rejects.toMatchObject({ code: '0A000' });
  });
});

describe('a parameter the engine cannot type', () => {
  it('is typed from its context where PostgreSQL would type it, and is 42P18 with a hint where nothing types it', async () => {
    const c = ctx.client;
    await c.query('CREATE TABLE answers_orders (id INT, customer VARCHAR, amount DECIMAL(10,2))');
    await c.query("INSERT INTO answers_orders VALUES (2, 'x', 10.5)");
    // amount + $1: PostgreSQL gives the parameter amount's type (numeric); DuckDB alone finds two candidates.
    const { rows, fields } = await c.query('SELECT id, customer, amount + $1 AS x FROM answers_orders WHERE id = 2', [1]);
    expect(fields.map((f) => f.name)).toEqual(['id', 'customer', 'x']);
    // 10.50 + 1 at amount's scale, as PostgreSQL prints it.
    expect(rows).toEqual([{ id: 2, customer: 'x', x: '11.50' }]);
    // $1 + $2: nothing says what either is (PostgreSQL: "operator is not unique").
    const err = await c.query('SELECT $1 + $2 AS x', [1, 2]).then(
      () => null,
      (e: { code?: string; message?: string; hint?: string }) => e,
    );
    expect(err).toMatchObject({ code: '42P18', message: 'could not determine data type of parameter $1', hint: expect.stringContaining('$1::numeric') });
  });
});

describe('commands cotwire cannot serve', () => {
  it.each(['LISTEN jobs', 'UNLISTEN *', "NOTIFY jobs, 'x'"])('%s is 0A000 with a hint, not a syntax error', async (sql) => {
    const err = await ctx.client.query(sql).then(
      () => null,
      (e: { code?: string; message?: string; hint?: string }) => e,
    );
    expect(err).toMatchObject({ code: '0A000', message: `${sql.split(' ')[0]} is not supported`, hint: expect.stringContaining('asynchronous notifications') });
  });
});

describe('ledger inserts as ORMs send them', () => {
  it('takes DEFAULT or NULL in a server column as "the server computes it"', async () => {
    const c = ctx.client;
    const r = await c.query(
      "INSERT INTO _cot_steps (trace_id, session_id, step_type, content, step_index, current_hash) VALUES (DEFAULT, 'orm', 'Reasoning', 'first', DEFAULT, NULL) RETURNING trace_id, step_index",
    );
    expect(r.rows).toEqual([{ trace_id: expect.stringMatching(/^[0-9a-f-]{36}$/), step_index: 0 }]);
    // With parameters, as drivers bind an entity's unset fields.
    await c.query('INSERT INTO _cot_steps (trace_id, session_id, step_type, content, ledger_seq) VALUES ($1, $2, $3, $4, $5)', [
      null,
      'orm',
      'Decision',
      'second',
      null,
    ]);
    expect((await c.query("SELECT step_index, content FROM _cot_steps WHERE session_id = 'orm' ORDER BY step_index")).rows).toEqual([
      { step_index: 0, content: 'first' },
      { step_index: 1, content: 'second' },
    ]);
    expect((await c.query("SELECT valid FROM cot_verify('orm')")).rows).toEqual([{ valid: true }]);
  });

  it('returns trace_id and the given columns inside a transaction block, as ORMs ask, and the chain columns as COMMIT stores them', async () => {
    const c = await ctx.server.client();
    await c.query('BEGIN');
    const r = await c.query(
      "INSERT INTO _cot_steps (trace_id, session_id, step_type, content, confidence) VALUES (DEFAULT, 'tx-orm', 'Decision', 'in a block', 0.25) RETURNING trace_id, session_id, content, confidence",
    );
    expect(r.rows).toEqual([{ trace_id: expect.stringMatching(/^[0-9a-f]{8}-[0-9a-f]{4}-7/), session_id: 'tx-orm', content: 'in a block', confidence: 0.25 }]);
    await c.query('COMMIT');
    // The trace_id returned is the one the writer chained.
    expect((await c.query("SELECT trace_id, step_index FROM _cot_steps WHERE session_id = 'tx-orm'")).rows).toEqual([
      { trace_id: r.rows[0].trace_id, step_index: 0 },
    ]);
    expect((await c.query("SELECT valid FROM cot_verify('tx-orm')")).rows).toEqual([{ valid: true }]);
    // The chain columns too: the block holds the append order, so what RETURNING gives is what COMMIT stores.
    await c.query('BEGIN');
    const chained = await c.query("INSERT INTO _cot_steps (session_id, step_type) VALUES ('tx-orm', 'Action') RETURNING *, length(current_hash) AS h");
    await c.query('COMMIT');
    expect(chained.rows[0]).toMatchObject({ step_index: 1, h: 64 });
    const { h: _h, ...row } = chained.rows[0];
    expect((await c.query("SELECT * FROM _cot_steps WHERE session_id = 'tx-orm' AND step_index = 1")).rows).toEqual([row]);
  });

  it('still refuses a value in a server column, with 428C9 naming it', async () => {
    const err = await ctx.client
      .query('INSERT INTO _cot_steps (session_id, step_type, content, current_hash) VALUES ($1, $2, $3, $4)', ['orm', 'Reasoning', 'forged', 'abc'])
      .then(
        () => null,
        (e: { code?: string; message?: string }) => e,
      );
    expect(err).toMatchObject({ code: '428C9', message: 'cannot insert a non-DEFAULT value into column "current_hash"' });
    expect((await ctx.client.query("SELECT count(*)::INT AS n FROM _cot_steps WHERE content = 'forged'")).rows).toEqual([{ n: 0 }]);
  });
});

describe('names qualified with the database', () => {
  it('reads database.schema.table as the schema in this database', async () => {
    const c = ctx.client;
    await c.query('CREATE TABLE qualified_orders (id INT)');
    await c.query('INSERT INTO cotwire.public.qualified_orders VALUES (7)');
    expect((await c.query('SELECT id FROM cotwire.public.qualified_orders')).rows).toEqual([{ id: 7 }]);
    expect((await c.query('SELECT o.id FROM cotwire.public.qualified_orders AS o')).rows).toEqual([{ id: 7 }]);
    expect((await c.query('SELECT id FROM "cotwire"."public"."qualified_orders"')).rows).toEqual([{ id: 7 }]);
  });

  it('keeps a ledger named through the database protected: the guard reads the name it is rewritten to', async () => {
    const c = ctx.client;
    await c.query("INSERT INTO cotwire.public._cot_steps (session_id, step_type, content) VALUES ('qualified', 'Reasoning', 'kept')");
    for (const sql of [
      'DELETE FROM cotwire.public._cot_steps',
      "UPDATE cotwire.public._cot_steps SET content = 'forged'",
      'TRUNCATE cotwire.public._cot_steps',
      'DROP TABLE cotwire.public._cot_steps',
      'ALTER TABLE cotwire.main._cot_steps ADD COLUMN x INT',
    ]) {
      await expect(c.query(sql), sql).rejects.toMatchObject({ code: '42501' });
    }
    expect((await c.query("SELECT content FROM _cot_steps WHERE session_id = 'qualified'")).rows).toEqual([{ content: 'kept' }]);
    expect((await c.query("SELECT valid FROM cot_verify('qualified')")).rows).toEqual([{ valid: true }]);
  });

  it('leaves another database name to fail as in PostgreSQL', async () => {
    await expect(ctx.client.query('SELECT 1 FROM otherdb.public.qualified_orders')).rejects.toThrow();
  });
});

describe('functions analysts use', () => {
  it('initcap capitalises each word as PostgreSQL does', async () => {
    const { rows } = await ctx.client.query("SELECT initcap('hello wORLD-foo bar_baz 3rd ça va') AS a, initcap(NULL) AS b, initcap('') AS c");
    expect(rows).toEqual([{ a: 'Hello World-Foo Bar_Baz 3rd Ça Va', b: null, c: '' }]);
  });

  it('date_bin bins timestamps from an origin', async () => {
    const { rows } = await ctx.client.query(
      "SELECT date_bin('15 minutes', TIMESTAMP '2024-01-01 10:37:12', TIMESTAMP '2024-01-01 00:00:00')::text AS a, date_bin('1 hour', TIMESTAMP '2024-01-01 10:37:12')::text AS b",
    );
    expect(rows).toEqual([{ a: '2024-01-01 10:30:00', b: '2024-01-01 10:00:00' }]);
  });
});

describe('FETCH in the formats its portal asks for', () => {
  it('sends binary rows when the FETCH is bound for binary results (psycopg 3 server-side cursors with binary=True)', async () => {
    const c = await ctx.server.client();
    await c.query('BEGIN');
    await c.query("DECLARE answers_cur CURSOR FOR SELECT 40 + i AS n, 'row ' || i AS label, i % 2 = 0 AS even FROM range(1, 4) t(i)");
    const r = await c.query({ text: 'FETCH 2 FROM answers_cur', binary: true, queryMode: 'extended' } as pg.QueryConfig);
    expect(r.fields.map((f) => f.format)).toEqual(['binary', 'binary', 'binary']);
    expect(r.rows).toEqual([
      { n: '41', label: 'row 1', even: false },
      { n: '42', label: 'row 2', even: true },
    ]);
    // Text again for the next FETCH, as it asks.
    expect((await c.query('FETCH 1 FROM answers_cur')).rows).toEqual([{ n: '43', label: 'row 3', even: false }]);
    await c.query('COMMIT');
  });
});

describe('what ORMs send when they start', () => {
  it('reads a scalar function in FROM without an alias as a one-row table named after it (TypeORM)', async () => {
    const r = await ctx.client.query('SELECT * FROM current_schema()');
    expect(r.rows).toEqual([{ current_schema: 'public' }]);
    expect((await ctx.client.query('SELECT * FROM current_database()')).rows).toEqual([{ current_database: 'cotwire' }]);
    expect((await ctx.client.query('SELECT s FROM current_schema() AS s')).rows).toEqual([{ s: 'public' }]);
  });

  it("takes SET TIME ZONE INTERVAL '+00:00' HOUR TO MINUTE (Sequelize) as a fixed offset", async () => {
    const c = await ctx.server.client();
    await c.query("SET TIME ZONE INTERVAL '+00:00' HOUR TO MINUTE");
    expect((await c.query('SHOW TIME ZONE')).rows).toEqual([{ TimeZone: 'UTC' }]);
    await c.query("SET TIME ZONE INTERVAL '-08:00' HOUR TO MINUTE");
    expect((await c.query('SHOW TIME ZONE')).rows).toEqual([{ TimeZone: 'Etc/GMT+8' }]);
    // Rendered in the session's zone, as the server sends it.
    const asSent = { getTypeParser: () => (v: string) => v };
    expect((await c.query({ text: "SELECT TIMESTAMPTZ '2024-07-01 12:00:00+00' AS t", types: asSent })).rows).toEqual([{ t: '2024-07-01 04:00:00-08' }]);
    await expect(c.query("SET TIME ZONE INTERVAL '+05:30' HOUR TO MINUTE")).rejects.toMatchObject({ code: '22023' });
  });
});

describe('timestamps as ORMs write them', () => {
  it("reads a timestamptz parameter with a space before its offset, as PostgreSQL does (Sequelize's '2024-07-01 00:00:00.000 +00:00')", async () => {
    const c = ctx.client;
    await c.query('CREATE TABLE answers_events (happened TIMESTAMPTZ)');
    await c.query('INSERT INTO answers_events VALUES ($1), ($2)', ['2024-07-01 00:00:00.000 +00:00', '2024-07-01 02:30:00 +02:30']);
    const { rows } = await c.query({
      text: 'SELECT epoch(happened)::BIGINT AS s FROM answers_events ORDER BY 1',
      types: { getTypeParser: () => (v: string) => v },
    });
    expect(rows).toEqual([{ s: '1719792000' }, { s: '1719792000' }]);
  });
});

describe('set_config', () => {
  it("sets and answers the new value, as pg_dump's first query expects", async () => {
    const c = await ctx.server.client();
    const r = await c.query("SELECT pg_catalog.set_config('search_path', '', false)");
    expect(r.fields.map((f) => f.name)).toEqual(['set_config']);
    expect(r.rows).toEqual([{ set_config: '' }]);
    expect((await c.query('SHOW search_path')).rows).toEqual([{ search_path: '' }]);
    await c.query('BEGIN');
    expect((await c.query("SELECT set_config('application_name', 'dumper', true)")).rows).toEqual([{ set_config: 'dumper' }]);
    await c.query('COMMIT');
    // Local: gone with the transaction.
    expect((await c.query('SHOW application_name')).rows).not.toEqual([{ application_name: 'dumper' }]);
  });

  it('refuses an engine setting as SET does', async () => {
    await expect(ctx.client.query("SELECT set_config('threads', '1', false)")).rejects.toMatchObject({ code: '42501' });
  });
});

describe('clock_timestamp', () => {
  it('reads the wall clock at each call, where now() is the transaction start', async () => {
    const c = await ctx.server.client();
    await c.query('BEGIN');
    const first = (await c.query('SELECT now() AS n, clock_timestamp() AS c')).rows[0] as { n: Date; c: Date };
    await new Promise((r) => setTimeout(r, 30));
    const second = (await c.query('SELECT now() AS n, clock_timestamp() AS c')).rows[0] as { n: Date; c: Date };
    await c.query('COMMIT');
    expect(second.n.getTime()).toBe(first.n.getTime());
    expect(second.c.getTime() - first.c.getTime()).toBeGreaterThanOrEqual(25);
    expect(Math.abs(first.c.getTime() - Date.now())).toBeLessThan(60_000);
    const { fields } = await c.query('SELECT clock_timestamp()');
    expect(fields.map((f) => [f.name, f.dataTypeID])).toEqual([['clock_timestamp', 1184]]);
  });
});

describe('LIMIT $n in a correlated subquery (ORMs’ relation loading)', () => {
  const lateral =
    'SELECT o.id, x.data FROM lim_orders o LEFT JOIN LATERAL (SELECT json_build_array(c.name) AS data FROM (SELECT * FROM lim_customers c WHERE c.id = o.customer LIMIT $1) c) x ON true WHERE o.id >= $2 ORDER BY o.id LIMIT $3';

  it('binds the limit as DuckDB needs it: written in, with the other parameters in their places', async () => {
    const c = ctx.client;
    await c.query('CREATE TABLE lim_customers (id int PRIMARY KEY, name text)');
    await c.query('CREATE TABLE lim_orders (id int PRIMARY KEY, customer int)');
    await c.query("INSERT INTO lim_customers VALUES (1, 'a'), (2, 'b')");
    await c.query('INSERT INTO lim_orders VALUES (1, 1), (2, 2), (3, 1)');
    const r = await c.query({ text: lateral, values: [1, 2, 5] });
    expect(r.rows).toEqual([
      { id: 2, data: ['b'] },
      { id: 3, data: ['a'] },
    ]);
    // Another limit value is another statement; the same one is reused.
    expect((await c.query({ text: lateral, values: [1, 1, 1] })).rows).toEqual([{ id: 1, data: ['a'] }]);
    expect((await c.query({ text: lateral, values: [0, 1, null] })).rows).toEqual([
      { id: 1, data: null },
      { id: 2, data: null },
      { id: 3, data: null },
    ]);
  });

  it('describes the limit parameters as bigint, and refuses a value that is not an integer', async () => {
    const c = ctx.client;
    await expect(c.query({ text: lateral, values: ['x', 1, 1] })).rejects.toMatchObject({ code: '22P02' });
    // A named statement, described before any value is bound (node-postgres prepares it so).
    const r = await c.query({ name: 'lim_named', text: lateral, values: [1, 3, 10] });
    expect(r.rows).toEqual([{ id: 3, data: ['a'] }]);
  });
});

describe('parameters DuckDB loses the types of', () => {
  // SQLAlchemy 2's column reflection (its psycopg dialect binds on the server): with parameters in a
  // correlated subquery of the select list, DuckDB forgets the type of the one cast in the CASE after it.
  const reflection =
    'SELECT pg_catalog.pg_attribute.attname AS name, pg_catalog.format_type(pg_catalog.pg_attribute.atttypid, pg_catalog.pg_attribute.atttypmod) AS format_type, (SELECT pg_catalog.pg_get_expr(pg_catalog.pg_attrdef.adbin, pg_catalog.pg_attrdef.adrelid) AS pg_get_expr_1 \nFROM pg_catalog.pg_attrdef \nWHERE pg_catalog.pg_attrdef.adrelid = pg_catalog.pg_attribute.attrelid AND pg_catalog.pg_attrdef.adnum = pg_catalog.pg_attribute.attnum AND pg_catalog.pg_attribute.atthasdef) AS "default", pg_catalog.pg_attribute.attnotnull AS not_null, pg_catalog.pg_class.relname AS table_name, pg_catalog.pg_description.description AS comment, pg_catalog.pg_attribute.attgenerated AS generated, (SELECT json_build_object($1::VARCHAR, pg_catalog.pg_attribute.attidentity = $2::VARCHAR, $3::VARCHAR, pg_catalog.pg_sequence.seqstart, $4::VARCHAR, pg_catalog.pg_sequence.seqincrement, $5::VARCHAR, pg_catalog.pg_sequence.seqmin, $6::VARCHAR, pg_catalog.pg_sequence.seqmax, $7::VARCHAR, pg_catalog.pg_sequence.seqcache, $8::VARCHAR, pg_catalog.pg_sequence.seqcycle) AS json_build_object_1 \nFROM pg_catalog.pg_sequence \nWHERE pg_catalog.pg_attribute.attidentity != $9::VARCHAR AND pg_catalog.pg_sequence.seqrelid = CAST(CAST(pg_catalog.pg_get_serial_sequence(CAST(CAST(pg_catalog.pg_attribute.attrelid AS REGCLASS) AS TEXT), pg_catalog.pg_attribute.attname) AS REGCLASS) AS OID)) AS identity_options, CASE WHEN (pg_catalog.pg_attribute.attcollation != $10::INTEGER AND (SELECT pg_catalog.pg_type.typcollation \nFROM pg_catalog.pg_type \nWHERE pg_catalog.pg_type.oid = pg_catalog.pg_attribute.atttypid) != pg_catalog.pg_attribute.attcollation) THEN (SELECT pg_catalog.pg_collation.collname \nFROM pg_catalog.pg_collation \nWHERE pg_catalog.pg_collation.oid = pg_catalog.pg_attribute.attcollation) ELSE NULL END AS collation \nFROM pg_catalog.pg_class LEFT OUTER JOIN pg_catalog.pg_attribute ON pg_catalog.pg_class.oid = pg_catalog.pg_attribute.attrelid AND pg_catalog.pg_attribute.attnum > $11::SMALLINT AND NOT pg_catalog.pg_attribute.attisdropped LEFT OUTER JOIN pg_catalog.pg_description ON pg_catalog.pg_description.objoid = pg_catalog.pg_attribute.attrelid AND pg_catalog.pg_description.objsubid = pg_catalog.pg_attribute.attnum JOIN pg_catalog.pg_namespace ON pg_catalog.pg_namespace.oid = pg_catalog.pg_class.relnamespace \nWHERE pg_catalog.pg_class.relkind = ANY (ARRAY[$12::VARCHAR, $13::VARCHAR, $14::VARCHAR, $15::VARCHAR, $16::VARCHAR]) AND pg_catalog.pg_table_is_visible(pg_catalog.pg_class.oid) AND pg_catalog.pg_namespace.nspname != $17::VARCHAR AND pg_catalog.pg_class.relname IN ($18::VARCHAR) ORDER BY pg_catalog.pg_class.relname, pg_catalog.pg_attribute.attnum';

  it('describes the statement from its casts, and binds the values at execution', async () => {
    const c = ctx.client;
    await c.query("CREATE TABLE lost_types (id integer PRIMARY KEY, label varchar(20) DEFAULT 'x')");
    const params = [
      'always',
      'a',
      'start',
      'increment',
      'minvalue',
      'maxvalue',
      'cache',
      'cycle',
      '',
      0,
      0,
      'r',
      'p',
      'f',
      'v',
      'm',
      'pg_catalog',
      'lost_types',
    ];
    const r = await c.query({ text: reflection, values: params });
    expect(r.fields.map((f) => f.name)).toEqual([
      'name',
      'format_type',
      'default',
      'not_null',
      'table_name',
      'comment',
      'generated',
      'identity_options',
      'collation',
    ]);
    expect(r.rows.map((row: { name: string; format_type: string; not_null: boolean }) => [row.name, row.format_type, row.not_null])).toEqual([
      ['id', 'integer', true],
      ['label', 'character varying(20)', false],
    ]);
  });
});

describe('expressions over a NULL constant, doubles cast to numeric and arrays of NULLs answer as PostgreSQL does', () => {
  it('keeps the type of an operator or function whose operand is a NULL constant (DuckDB alone: integer)', async () => {
    const r = await ctx.client.query(
      "SELECT NULL::text || 'x' AS t, NULL::numeric - 1.5 AS n, ceil(NULL::numeric / 2) AS c, (NULL::int4[])[1] + 1 AS i, pg_typeof('x' || NULL::text)::text AS p, '{\"a\": 1}'::jsonb ->> 'k' || 'x' AS j",
    );
    expect(r.rows).toEqual([{ t: null, n: null, c: null, i: null, p: 'text', j: null }]);
    expect(r.fields.map((f) => f.dataTypeID)).toEqual([25, 1700, 1700, 23, 25, 25]);
  });

  it('divides a NULL by zero as NULL, as a strict operator does, and still refuses a number by zero', async () => {
    const r = await ctx.client.query('SELECT x / (y - y) AS q, x % (y - y) AS m FROM (VALUES (NULL::numeric, 2::numeric)) v(x, y)');
    expect(r.rows).toEqual([{ q: null, m: null }]);
    await expect(ctx.client.query('SELECT x / (y - y) FROM (VALUES (1::numeric, 2::numeric)) v(x, y)')).rejects.toMatchObject({ code: '22012' });
  });

  it('casts a double to numeric with its 15 significant digits past the ninth decimal, and refuses what does not fit', async () => {
    // The cast to DECIMAL(38,9) alone: 1.224744871 and -0.00002025.
    const r = await ctx.client.query(
      'SELECT sqrt(1.5::float8)::numeric AS s, CAST(-2.5::float8 / 123456.789 AS numeric) AS q, (avg(x))::numeric AS a FROM (VALUES (1::float8), (2), (2)) v(x)',
    );
    expect(r.rows).toEqual([{ s: '1.22474487139159', q: '-0.000020250000184275', a: '1.66666666666667' }]);
    for (const sql of ['SELECT (1.234567890123e-9::float8)::numeric', 'SELECT (3.5e18::float8)::numeric']) {
      await expect(ctx.client.query(sql), sql).rejects.toMatchObject({ code: '22003' });
    }
  });

  it('joins an array of NULLs as an empty string and prints booleans as t and f in array_to_string', async () => {
    const r = await ctx.client.query(
      "SELECT array_to_string('{NULL}'::text[], ',') AS e, array_to_string(ARRAY[true, NULL, false], ',') AS b, array_to_string(NULL::text[], ',') AS n",
    );
    expect(r.rows).toEqual([{ e: '', b: 't,f', n: null }]);
  });

  it('reads a jsonb scalar through NULLIF and CASE as jsonb (-> 0 of a scalar is the scalar)', async () => {
    const r = await ctx.client.query("SELECT NULLIF('3.10'::jsonb, '\"x\"'::jsonb) -> 0 AS n, CASE WHEN true THEN '[7]'::jsonb END -> 0 AS c");
    expect(r.rows).toEqual([{ n: 3.1, c: 7 }]);
  });
});

describe('JSON builders keep every digit and write json as PostgreSQL does', () => {
  it('keeps the digits and trailing zeros of numbers in jsonb values and numerics (DuckDB alone reads them as doubles)', async () => {
    const r = await ctx.client.query({
      text: `SELECT jsonb_build_object('k', '{"a": 123456789.123456789, "b": 2.50}'::jsonb, 'n', 1.50, 'big', 12345678901234567890::numeric) AS o,
                    jsonb_build_array('3.10'::jsonb, 7::float8, 'NaN'::float8, '2024-01-01 10:00'::timestamp) AS a,
                    to_jsonb(2.50) AS s`,
      types: { getTypeParser: () => (v: string) => v },
    });
    expect(r.rows).toEqual([
      {
        o: '{"k": {"a": 123456789.123456789, "b": 2.50}, "n": 1.50, "big": 12345678901234567890}',
        a: '[3.10, 7, "NaN", "2024-01-01T10:00:00"]',
        s: '2.50',
      },
    ]);
  });

  it('writes json (not jsonb) with its own spacing, and aggregates over rows in order, DISTINCT sorted', async () => {
    const r = await ctx.client.query({
      text: `SELECT json_build_object('a', 1.50, 'b', '{"x": 2.50}'::json) AS o, json_agg(x ORDER BY x DESC) AS a, json_object_agg('k' || i, x ORDER BY i) AS m,
                    jsonb_agg(DISTINCT i) AS d, jsonb_agg(x) FILTER (WHERE false) AS none
               FROM (VALUES (1, 1.25), (2, 2.50), (3, NULL), (2, 2.50)) v(i, x)`,
      types: { getTypeParser: () => (v: string) => v },
    });
    expect(r.rows).toEqual([
      {
        o: '{"a" : 1.50, "b" : {"x": 2.50}}',
        a: '[null, 2.50, 2.50, 1.25]',
        m: '{ "k1" : 1.25, "k2" : 2.50, "k2" : 2.50, "k3" : null }',
        d: '[1, 2, 3]',
        none: null,
      },
    ]);
  });

  it('refuses a NULL key as PostgreSQL does', async () => {
    await expect(ctx.client.query('SELECT jsonb_build_object(NULL::text, 1)')).rejects.toMatchObject({
      message: expect.stringContaining('key must not be null'),
    });
    await expect(ctx.client.query('SELECT jsonb_object_agg(k, 1) FROM (VALUES (NULL::text)) v(k)')).rejects.toMatchObject({
      message: expect.stringContaining('field name must not be null'),
    });
  });
});

describe('operators and functions found answering otherwise by the generated comparison', () => {
  it('rounds a narrow numeric left of its point (DuckDB alone: 0 for round(-7.125, -1))', async () => {
    const r = await ctx.client.query(
      "SELECT round('-7.125'::numeric, -1) AS a, round(-5.0, -1) AS b, round(55, -1) AS c, round(1234.5::numeric(10,1), -2) AS d",
    );
    expect(r.rows).toEqual([{ a: '-10', b: '-10', c: '60', d: '1200' }]);
  });

  it('compares array columns as PostgreSQL does, where a NULL element is contained in nothing, and jsonb columns as jsonb', async () => {
    const c = ctx.client;
    await c.query('CREATE TABLE answers_contain (id int, a int[], j jsonb)');
    await c.query(`INSERT INTO answers_contain VALUES (1, '{7,NULL}', '{"a": [1, 2]}'), (2, '{1,2}', '[1]')`);
    const r = await c.query('SELECT id, a @> a AS self, a <@ a AS within, j @> j AS j_self FROM answers_contain ORDER BY id');
    expect(r.rows).toEqual([
      { id: 1, self: false, within: false, j_self: true },
      { id: 2, self: true, within: true, j_self: true },
    ]);
    // An element of an integer array column averages as a numeric (DuckDB alone: a double).
    expect((await c.query('SELECT pg_typeof(avg(a[2]))::text AS t FROM answers_contain')).rows).toEqual([{ t: 'numeric' }]);
  });

  it('takes ceil and floor of a sum of bigints as numeric, every digit kept (DuckDB alone: a double, 2^53 + 1 lost)', async () => {
    const r = await ctx.client.query(
      'SELECT ceil(sum(x)) AS c, floor(sum(x)) AS f, pg_typeof(ceil(sum(x)))::text AS t FROM (VALUES (9007199254740993::int8)) v(x)',
    );
    expect(r.rows).toEqual([{ c: '9007199254740993', f: '9007199254740993', t: 'numeric' }]);
  });

  it('types numbers and integer functions as PostgreSQL does', async () => {
    const r = await ctx.client.query(
      'SELECT pg_typeof(- (1e3))::text AS neg, ((-1e3))::text AS t, pg_typeof(round(2))::text AS r, pg_typeof(floor(2) / 2)::text AS f, pg_typeof(array_position(ARRAY[1, 2], 2))::text AS p',
    );
    expect(r.rows).toEqual([{ neg: 'numeric', t: '-1000', r: 'double precision', f: 'double precision', p: 'integer' }]);
  });
});

describe('a double or a real as text inside a query', () => {
  it('switches to exponent form where PostgreSQL does (DuckDB alone: 1000000000000000 and 1234567)', async () => {
    const r = await ctx.client.query(
      "SELECT 1e15::float8::text AS a, 1234567::real::text AS b, 123456::real::text AS c, (-2.5e15)::float8::text AS d, 'x' || 1234567.5::float8 AS e, concat(1e15::float8) AS f",
    );
    expect(r.rows).toEqual([{ a: '1e+15', b: '1.234567e+06', c: '123456', d: '-2.5e+15', e: 'x1234567.5', f: '1e+15' }]);
  });
});
