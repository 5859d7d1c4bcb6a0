import type pg from 'pg';
import { beforeAll, describe, expect, it } from 'vitest';
import { useTestServer } from '../fixtures/server.js';

/** The PostgreSQL catalog and the PostgreSQL semantics that clients' catalog queries rely on. */
const ctx = useTestServer();
let client: pg.Client;

beforeAll(async () => {
  client = ctx.client;
  await client.query(`CREATE TABLE kinds (
    b BOOLEAN, i2 SMALLINT, i4 INTEGER NOT NULL, i8 BIGINT, f4 REAL, f8 DOUBLE, n DECIMAL(12,3), t VARCHAR DEFAULT 'x',
    bl BLOB, d DATE, tm TIME, ts TIMESTAMP, tz TIMESTAMPTZ, iv INTERVAL, u UUID, j JSON, ai INTEGER[], av VARCHAR[], st STRUCT(a INTEGER))`);
});

describe('pg_catalog', () => {
  it('reports the same type OIDs in RowDescription, pg_attribute and pg_type', async () => {
    const result = await client.query('SELECT * FROM kinds');
    const attrs = await client.query(
      "SELECT attname, atttypid, format_type(atttypid, atttypmod) AS type FROM pg_attribute WHERE attrelid = 'kinds'::regclass AND attnum > 0 ORDER BY attnum",
    );
    expect(attrs.rows.map((r: { attname: string }) => r.attname)).toEqual(result.fields.map((f) => f.name));
    expect(attrs.rows.map((r: { atttypid: string }) => Number(r.atttypid))).toEqual(result.fields.map((f) => f.dataTypeID));
    const types = await client.query('SELECT oid, typname, typelem FROM pg_type');
    const byOid = new Map(types.rows.map((r: { oid: number; typname: string; typelem: number }) => [r.oid, r]));
    for (const f of result.fields) expect(byOid.has(f.dataTypeID), `type ${f.dataTypeID} of ${f.name}`).toBe(true);
    // Arrays have their _name entries, whose typelem is the element type.
    expect(byOid.get(1007)).toMatchObject({ typname: '_int4', typelem: 23 });
    expect(attrs.rows.find((r: { attname: string }) => r.attname === 'n')).toMatchObject({ type: 'numeric(12,3)' });
    expect(attrs.rows.find((r: { attname: string }) => r.attname === 'tz')).toMatchObject({ type: 'timestamp with time zone' });
  });

  it("presents DuckDB's main schema as public, in the catalog and in qualified names", async () => {
    expect((await client.query('SELECT current_schema(), current_schema')).rows[0]).toEqual({ current_schema: 'public' });
    const ns = await client.query("SELECT nspname FROM pg_namespace WHERE nspname !~ '^pg_' ORDER BY 1");
    expect(ns.rows.map((r: { nspname: string }) => r.nspname)).toEqual(['information_schema', 'public']);
    await client.query("INSERT INTO public.kinds (i4, t) VALUES (1, 'public')");
    expect((await client.query('SELECT t FROM public.kinds')).rows).toEqual([{ t: 'public' }]);
    const cols = await client.query(
      "SELECT column_name, data_type, is_nullable FROM information_schema.columns WHERE table_schema = 'public' AND table_name = '_cot_steps' AND column_name IN ('trace_id', 'confidence', 'created_at') ORDER BY ordinal_position",
    );
    expect(cols.rows).toEqual([
      { column_name: 'trace_id', data_type: 'uuid', is_nullable: 'NO' },
      { column_name: 'confidence', data_type: 'double precision', is_nullable: 'YES' },
      { column_name: 'created_at', data_type: 'timestamp with time zone', is_nullable: 'NO' },
    ]);
  });

  it('shows a connection its own temporary tables, in pg_temp, and no one else', async () => {
    const other = await ctx.server.client();
    await client.query('CREATE TEMP TABLE scratch (x INTEGER)');
    const mine = await client.query("SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relname = 'scratch'");
    expect(mine.rows).toEqual([{ nspname: 'pg_temp_3' }]);
    expect((await other.query("SELECT count(*)::int AS n FROM pg_class WHERE relname = 'scratch'")).rows).toEqual([{ n: 0 }]);
  });

  it('has the catalogs cotwire has no use for, empty, so that joins bind', async () => {
    for (const name of ['pg_inherits', 'pg_trigger', 'pg_policy', 'pg_publication', 'pg_extension', 'pg_range', 'pg_rewrite', 'pg_foreign_table']) {
      expect((await client.query(`SELECT count(*)::int AS n FROM pg_catalog.${name}`)).rows, name).toEqual([{ n: 0 }]);
    }
  });

  it('answers reg* casts in both directions', async () => {
    const oid = (await client.query("SELECT oid FROM pg_class WHERE relname = 'kinds'")).rows[0].oid as string;
    // A reg* value shows as the object's name, as in PostgreSQL; compared or cast to oid, it is the OID.
    expect((await client.query("SELECT 'kinds'::regclass AS a, 'public.kinds'::pg_catalog.regclass AS b")).rows[0]).toEqual({ a: 'kinds', b: 'kinds' });
    expect(
      (await client.query("SELECT 'kinds'::regclass::oid AS a, oid = 'public.kinds'::regclass AS b FROM pg_class WHERE relname = 'kinds'")).rows[0],
    ).toEqual({
      a: Number(oid),
      b: true,
    });
    expect((await client.query(`SELECT ${oid}::regclass::text AS name, 23::regtype::text AS type`)).rows[0]).toEqual({ name: 'kinds', type: 'integer' });
    // The only table comments are the hash versions of the server's own ledgers.
    expect(
      (await client.query("SELECT DISTINCT description FROM pg_description WHERE classoid = 'pg_catalog.pg_class'::regclass AND objsubid = 0")).rows,
    ).toEqual([{ description: 'cotwire/v3' }]);
  });

  it('looks relations up by name in lookups nested in lookups, per row, as SQLAlchemy reads identity columns', async () => {
    await client.query('CREATE TABLE cat_parent (id integer PRIMARY KEY, code text UNIQUE)');
    await client.query('CREATE TABLE cat_child (id serial PRIMARY KEY, pid integer REFERENCES cat_parent (id), c integer CHECK (c > 0))');
    await client.query('CREATE TEMP TABLE cat_temp (a integer)');
    const { rows } = await client.query(`SELECT a.attname, pg_get_serial_sequence(CAST(CAST(a.attrelid AS regclass) AS text), a.attname)::regclass::oid AS seq
      FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid WHERE c.relname = 'cat_child' AND a.attnum > 0 ORDER BY a.attnum`);
    const seq = (await client.query("SELECT oid FROM pg_class WHERE relname = 'cat_child_id_seq' AND relkind = 'S'")).rows[0].oid;
    expect(rows).toEqual([
      { attname: 'id', seq },
      { attname: 'pid', seq: null },
      { attname: 'c', seq: null },
    ]);
    // Indexes behind keys, temporary tables, qualified and quoted names.
    const names =
      await client.query(`SELECT 'cat_parent_pkey'::regclass::oid = (SELECT indexrelid FROM pg_index WHERE indrelid = 'cat_parent'::regclass AND indisprimary) AS pkey,
      'pg_temp_3.cat_temp'::regclass::oid = (SELECT oid FROM pg_class WHERE relname = 'cat_temp') AS temp,
      '"cat_child"'::regclass::oid = 'public.cat_child'::regclass::oid AS quoted, 'cat_parent_code_key'::regclass::text AS unique_key`);
    expect(names.rows[0]).toEqual({ pkey: true, temp: true, quoted: true, unique_key: 'cat_parent_code_key' });
    // What pg_class and pg_constraint join rather than look up per row.
    const fk = await client.query(`SELECT k.conname, k.confrelid = 'cat_parent'::regclass::oid AS confrelid, k.confkey,
        k.conindid = (SELECT indexrelid FROM pg_index WHERE indrelid = 'cat_parent'::regclass AND indisprimary) AS conindid
      FROM pg_constraint k WHERE k.conrelid = 'cat_child'::regclass AND k.contype = 'f'`);
    expect(fk.rows).toEqual([{ conname: 'cat_child_pid_fkey', confrelid: true, confkey: [1], conindid: true }]);
    const rels = await client.query(
      "SELECT relname, relhastriggers, relchecks FROM pg_class WHERE relname IN ('cat_parent', 'cat_child', 'cat_temp', 'kinds') ORDER BY relname",
    );
    expect(rels.rows).toEqual([
      { relname: 'cat_child', relhastriggers: true, relchecks: 1 },
      { relname: 'cat_parent', relhastriggers: true, relchecks: 0 },
      { relname: 'cat_temp', relhastriggers: false, relchecks: 0 },
      { relname: 'kinds', relhastriggers: false, relchecks: 0 },
    ]);
  });

  it('reads the connection’s own settings through current_setting() and pg_settings', async () => {
    await client.query("SET application_name = 'catalog-test'");
    expect((await client.query("SELECT current_setting('application_name') AS v")).rows).toEqual([{ v: 'catalog-test' }]);
    expect((await client.query("SELECT setting FROM pg_settings WHERE name = 'application_name'")).rows).toEqual([{ setting: 'catalog-test' }]);
    expect((await client.query("SELECT pg_catalog.current_setting('server_version_num') AS v")).rows).toEqual([{ v: '150000' }]);
  });

  it('gives each constraint an OID of its own that other tables do not move', async () => {
    const c = ctx.client;
    // DuckDB numbers constraints across all tables: 500 NOT NULL columns put the next table's past 500, where
    // a foreign key's number lay (two constraints of one OID, and pg_dump's scalar subqueries failed).
    const wide = Array.from({ length: 500 }, (_, i) => `c${i} int NOT NULL`).join(', ');
    await c.query(`CREATE TABLE oid_wide (${wide})`);
    await c.query('CREATE TABLE oid_parent (id int PRIMARY KEY)');
    await c.query('CREATE TABLE oid_child (id int PRIMARY KEY, code text UNIQUE, parent_id int REFERENCES oid_parent (id))');
    const oids = async (): Promise<Record<string, string>> =>
      Object.fromEntries(
        (await c.query("SELECT conname, oid::text AS oid FROM pg_constraint WHERE conname LIKE 'oid\\_%' ORDER BY conname")).rows.map(
          (r: { conname: string; oid: string }) => [r.conname, r.oid],
        ),
      );
    const before = await oids();
    expect(Object.keys(before)).toEqual(['oid_child_code_key', 'oid_child_parent_id_fkey', 'oid_child_pkey', 'oid_parent_pkey']);
    expect(new Set(Object.values(before)).size).toBe(4);
    const defs = await c.query("SELECT conname, pg_get_constraintdef(oid) AS def FROM pg_constraint WHERE conname LIKE 'oid\\_child%' ORDER BY conname");
    expect(defs.rows.map((r: { def: string }) => r.def)).toEqual(['UNIQUE (code)', 'FOREIGN KEY (parent_id) REFERENCES oid_parent(id)', 'PRIMARY KEY (id)']);
    // A table listed before them, made later, leaves their OIDs as they were.
    await c.query('CREATE TABLE oid_aa (id int PRIMARY KEY, x int NOT NULL)');
    const after = await oids();
    expect(Object.fromEntries(Object.entries(after).filter(([k]) => k !== 'oid_aa_pkey'))).toEqual(before);
    await c.query('DROP TABLE oid_child, oid_parent, oid_wide, oid_aa');
  });

  it('answers version() with and without pg_catalog.', async () => {
    const r = await client.query('SELECT version() AS a, pg_catalog.version() AS b');
    expect(r.rows[0].a).toMatch(/^PostgreSQL 15\.0 \(cotwire /);
    expect(r.rows[0].b).toBe(r.rows[0].a);
  });
});

describe('PostgreSQL semantics where DuckDB differs', () => {
  it('~ matches anywhere in the string, as in PostgreSQL, with literals, parameters and OPERATOR()', async () => {
    const r = await client.query(
      "SELECT 'abc' ~ 'b' AS a, 'abc' !~ 'b' AS b, 'ABC' ~* 'b' AS c, 'abc' !~* 'B' AS d, 'abc' ~ $1 AS e, 'abc' OPERATOR(pg_catalog.~) '^a' AS f, 'abc' ~ 'c$' AS g, 'abc' ~ '^b' AS h",
      ['bc'],
    );
    expect(r.rows[0]).toEqual({ a: true, b: false, c: true, d: false, e: true, f: true, g: true, h: false });
    expect((await client.query("SELECT 'a\nb' ~ 'b' AS x")).rows).toEqual([{ x: true }]);
  });

  it('divides integers with truncation and raises division_by_zero (22012) as PostgreSQL does', async () => {
    const r = await client.query({ text: 'SELECT 5/2, -7/2, 7 % 3, 5.0/2, (4 + 4)/2*3, 10/2::int', rowMode: 'array' });
    // 5.0/2 is numeric, as in PostgreSQL (DuckDB alone divides decimals in double precision).
    expect(r.rows).toEqual([[2, -3, 1, '2.5', 12, 5]]);
    expect(r.fields.map((f) => f.dataTypeID)).toEqual([23, 23, 23, 1700, 23, 23]);
    for (const sql of ['SELECT 1/0', 'SELECT 1.5/0', 'SELECT 5 % 0', 'SELECT x/y FROM (VALUES (4, 2), (1, 0)) t(x, y)']) {
      const err = (await client.query(sql).catch((e: unknown) => e)) as { code?: string };
      expect(err.code, sql).toBe('22012');
    }
  });

  it('reports error positions in the statement the client sent, not in the rewritten one', async () => {
    for (const sql of ['SELECT x / 2 FROM nope', 'SELECT relname FROM pg_catalog.pg_class WHERE nope = 1', "SELECT 'a' ~ 'b', nope"]) {
      const err = (await client.query(sql).catch((e: unknown) => e)) as { position?: string };
      expect(Number(err.position), sql).toBe(sql.indexOf('nope') + 1);
    }
  });

  it('sorts NULLs first in descending order and last in ascending order', async () => {
    const desc = await client.query({ text: 'SELECT x FROM (VALUES (1), (NULL), (2)) t(x) ORDER BY x DESC', rowMode: 'array' });
    expect(desc.rows).toEqual([[null], [2], [1]]);
    const asc = await client.query({ text: 'SELECT x FROM (VALUES (1), (NULL), (2)) t(x) ORDER BY x', rowMode: 'array' });
    expect(asc.rows).toEqual([[1], [2], [null]]);
  });

  it('parses COLLATE pg_catalog.default and casts to pg_catalog types', async () => {
    const r = await client.query("SELECT 'x' COLLATE pg_catalog.default AS a, '7'::pg_catalog.int4 AS b, 'n'::pg_catalog.name AS c");
    expect(r.rows[0]).toEqual({ a: 'x', b: 7, c: 'n' });
  });
});
