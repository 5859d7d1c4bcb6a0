import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { countLogged, logLines } from '../fixtures/log-lines.js';
import { until } from '../fixtures/poll.js';
import { startTestServer, type TestServer } from '../fixtures/server.js';

/**
 * The catalog a connection reads is the catalog as it is: every change to the
 * schema shows at once, in this connection and in others, inside and outside
 * transactions, with temporary objects and with statements prepared before
 * the change. (On DuckDB the costly views are kept as tables between changes;
 * these are the cases where a stale copy would show.)
 */
const lines: string[] = [];
const ctx = {} as { server: TestServer; client: pg.Client };
let other: pg.Client;

const names = async (c: pg.Client, like: string): Promise<string[]> =>
  (await c.query('SELECT relname FROM pg_class WHERE relname LIKE $1 ORDER BY relname', [like])).rows.map((r: { relname: string }) => r.relname);

/** Waits until the snapshot tables were refreshed after `since` refreshes, reading the catalog to prompt it. */
async function refreshedSince(since: number): Promise<void> {
  await until('the catalog snapshot is refreshed', async () => {
    await other.query('SELECT 1 FROM pg_class LIMIT 1');
    return countLogged(lines, 'catalog snapshot refreshed') > since;
  });
}

beforeAll(async () => {
  ctx.server = await startTestServer({}, logLines(lines));
  ctx.client = await ctx.server.client();
  other = await ctx.server.client();
});

afterAll(async () => {
  await ctx.server?.[Symbol.asyncDispose]();
});

describe('catalog reads after changes to the schema', () => {
  it('shows a table created, altered, commented, indexed and dropped, at once, to this connection and to another', async () => {
    const c = ctx.client;
    // Each change is read at once (while the schema changes, reads take the live views), then again once
    // the tables were refreshed (a change that did not mark them stale would show here, or never refresh them).
    const change = async (by: pg.Client, ddl: string, read: () => Promise<unknown>, expected: unknown): Promise<void> => {
      const since = countLogged(lines, 'catalog snapshot refreshed');
      await by.query(ddl);
      expect(await read(), ddl).toEqual(expected);
      await refreshedSince(since);
      expect(await read(), ddl).toEqual(expected);
    };
    expect(await names(c, 'snap_a%')).toEqual([]);
    await change(c, 'CREATE TABLE snap_a (id integer PRIMARY KEY, name text)', () => names(other, 'snap_a%'), ['snap_a', 'snap_a_pkey']);
    expect(await names(c, 'snap_a%')).toEqual(['snap_a', 'snap_a_pkey']);
    const columns = async () =>
      (await c.query("SELECT column_name, data_type FROM information_schema.columns WHERE table_name = 'snap_a' ORDER BY ordinal_position")).rows;
    await change(other, 'ALTER TABLE snap_a ADD COLUMN note varchar(20)', columns, [
      { column_name: 'id', data_type: 'integer' },
      { column_name: 'name', data_type: 'text' },
      { column_name: 'note', data_type: 'character varying' },
    ]);
    const comment = async () => (await other.query("SELECT obj_description('snap_a'::regclass, 'pg_class') AS d")).rows;
    await change(c, "COMMENT ON TABLE snap_a IS 'the first'", comment, [{ d: 'the first' }]);
    const indexes = async () => (await c.query("SELECT indexname FROM pg_indexes WHERE tablename = 'snap_a' ORDER BY 1")).rows;
    await change(other, 'CREATE INDEX snap_a_name ON snap_a (name)', indexes, [{ indexname: 'snap_a_name' }, { indexname: 'snap_a_pkey' }]);
    await change(other, 'DROP INDEX snap_a_name', indexes, [{ indexname: 'snap_a_pkey' }]);
    const keys = async () => (await other.query("SELECT conname, contype FROM pg_constraint WHERE conrelid = 'snap_a_child'::regclass ORDER BY conname")).rows;
    await change(c, 'CREATE TABLE snap_a_child (id integer PRIMARY KEY, a integer REFERENCES snap_a (id))', keys, [
      { conname: 'snap_a_child_a_fkey', contype: 'f' },
      { conname: 'snap_a_child_pkey', contype: 'p' },
    ]);
    await change(c, 'CREATE VIEW snap_a_view AS SELECT id FROM snap_a', () => names(other, 'snap_a%'), [
      'snap_a',
      'snap_a_child',
      'snap_a_child_pkey',
      'snap_a_pkey',
      'snap_a_view',
    ]);
    await change(c, 'DROP VIEW snap_a_view', () => names(other, 'snap_a%'), ['snap_a', 'snap_a_child', 'snap_a_child_pkey', 'snap_a_pkey']);
    await c.query('DROP TABLE snap_a_child');
    await change(c, 'DROP TABLE snap_a', () => names(other, 'snap_a%'), []);
  });

  it('refreshes the tables once the schema settles, before any read asks, so that the first tool to read finds them ready', async () => {
    const since = countLogged(lines, 'catalog snapshot refreshed');
    await ctx.client.query('CREATE TABLE snap_settled (id integer)');
    // Nothing reads the catalog while this waits: the refresh follows the change by itself.
    await until('the catalog snapshot is refreshed after the change', async () => countLogged(lines, 'catalog snapshot refreshed') > since);
    expect(await names(other, 'snap_settled%')).toEqual(['snap_settled']);
    await ctx.client.query('DROP TABLE snap_settled');
  });

  it('shows DDL of the open transaction to it alone, and to others once it commits; nothing once it rolls back', async () => {
    const c = ctx.client;
    await names(other, 'snap_b%');
    await c.query('BEGIN');
    await c.query('CREATE TABLE snap_b (x integer)');
    expect(await names(c, 'snap_b%')).toEqual(['snap_b']);
    expect(await names(other, 'snap_b%')).toEqual([]);
    await c.query('ROLLBACK');
    expect(await names(c, 'snap_b%')).toEqual([]);
    await c.query('BEGIN');
    await c.query('CREATE TABLE snap_b (x integer)');
    await c.query('COMMIT');
    expect(await names(other, 'snap_b%')).toEqual(['snap_b']);
    expect(await names(c, 'snap_b%')).toEqual(['snap_b']);
    // A transaction that begins right after another connection's DDL sees it from its first read.
    await other.query('CREATE TABLE snap_b2 (x integer)');
    await c.query('BEGIN');
    expect(await names(c, 'snap_b%')).toEqual(['snap_b', 'snap_b2']);
    await c.query('COMMIT');
    await c.query('DROP TABLE snap_b');
    await c.query('DROP TABLE snap_b2');
  });

  it("shows a connection's temporary table to it alone, and to a statement it prepared before the table existed", async () => {
    const c = await ctx.server.client();
    const prepared = { name: 'snap_temp_names', text: "SELECT relname, relpersistence FROM pg_class WHERE relname LIKE 'snap_t%' ORDER BY 1" };
    expect((await c.query(prepared)).rows).toEqual([]);
    await c.query('CREATE TEMP TABLE snap_t (x integer)');
    expect((await c.query(prepared)).rows).toEqual([{ relname: 'snap_t', relpersistence: 't' }]);
    expect(await names(other, 'snap_t%')).toEqual([]);
    await c.end();
  });

  it('reads a view over the catalog as the catalog is now', async () => {
    const c = ctx.client;
    await c.query("CREATE VIEW snap_v AS SELECT relname FROM pg_class WHERE relname LIKE 'snap_c%'");
    expect((await other.query('SELECT * FROM snap_v')).rows).toEqual([]);
    await c.query('CREATE TABLE snap_c (x integer)');
    expect((await other.query('SELECT * FROM snap_v')).rows).toEqual([{ relname: 'snap_c' }]);
    await c.query('DROP VIEW snap_v');
    await c.query('DROP TABLE snap_c');
  });

  it('answers whole-schema reads as the live catalog does', async () => {
    await ctx.client.query(`CREATE TABLE snap_d (id serial PRIMARY KEY, code varchar(8) UNIQUE, amount numeric(12,2) DEFAULT 0 CHECK (amount >= 0))`);
    await ctx.client.query('CREATE TABLE snap_e (id integer PRIMARY KEY, d integer REFERENCES snap_d (id))');
    await ctx.client.query("COMMENT ON COLUMN snap_d.code IS 'the code'");
    // A connection that made a temporary object reads the live views from then on.
    const live = await ctx.server.client();
    await live.query('CREATE TEMP TABLE snap_gone (x integer)');
    await live.query('DROP TABLE snap_gone');
    // Right after DDL the others read the live views too; the tables are refreshed once the schema settles.
    const refreshes = countLogged(lines, 'catalog snapshot refreshed');
    await refreshedSince(refreshes);
    const queries = [
      'SELECT c.oid, c.relname, c.relkind, c.relnamespace, c.relchecks, c.relhasindex, c.relhastriggers, c.relpersistence FROM pg_class c ORDER BY c.oid',
      'SELECT attrelid, attname, atttypid, atttypmod, attnum, attnotnull, atthasdef FROM pg_attribute ORDER BY attrelid, attnum',
      'SELECT oid, conname, contype, conrelid, confrelid, conkey, pg_get_constraintdef(oid) AS def FROM pg_constraint ORDER BY oid',
      'SELECT indexrelid, indrelid, indisunique, indisprimary, indkey::text FROM pg_index ORDER BY indexrelid',
      'SELECT adrelid, adnum, pg_get_expr(adbin, adrelid) AS d FROM pg_attrdef ORDER BY adrelid, adnum',
      'SELECT objoid, classoid, objsubid, description FROM pg_description ORDER BY objoid, objsubid',
      // A connection's temporary macros (current_user(), the ledgers' cot_verify ...) have OIDs of its own.
      'SELECT proname, pronamespace, pronargs FROM pg_proc ORDER BY 1, 2, 3',
      'SELECT classid, objid, refobjid, deptype FROM pg_depend ORDER BY objid, refobjid',
      'SELECT oid, nspname FROM pg_namespace ORDER BY oid',
      'SELECT table_name, column_name, data_type, column_default, is_nullable FROM information_schema.columns ORDER BY table_name, ordinal_position',
      'SELECT constraint_name, table_name, constraint_type FROM information_schema.table_constraints ORDER BY 1, 2',
      "SELECT 'snap_d'::regclass::oid AS oid, format_type('snap_d'::regclass::oid, NULL) AS t",
    ];
    for (const sql of queries) {
      const [snapshot, fromLive] = await Promise.all([other.query(sql), live.query(sql)]);
      expect(snapshot.rows.length, sql).toBeGreaterThan(0);
      expect(snapshot.rows, sql).toEqual(fromLive.rows);
    }
    // An error is the client's, at its place in the client's text.
    const sql = 'SELECT relname FROM pg_class WHERE nosuch = 1';
    const err = (await other.query(sql).catch((e: unknown) => e)) as pg.DatabaseError;
    expect(err.code).toBe('42703');
    expect(Number(err.position)).toBe(sql.indexOf('nosuch') + 1);
    await live.end();
    await ctx.client.query('DROP TABLE snap_e');
    await ctx.client.query('DROP TABLE snap_d');
  });
});

describe('catalog answers kept between changes to the schema', () => {
  it('keeps an answer only for the session settings, the generation and the words it was read with', async () => {
    const c = ctx.client;
    await c.query('CREATE SCHEMA kept_s');
    await c.query('CREATE TABLE kept_s.kept_t (x int)');
    const since = countLogged(lines, 'catalog snapshot refreshed');
    await refreshedSince(since);
    // pg_table_is_visible depends on search_path: the same text, read under two settings, answers twice.
    const visible = "SELECT relname FROM pg_class c WHERE relname = 'kept_t' AND pg_table_is_visible(c.oid)";
    for (let i = 0; i < 2; i++) expect((await c.query(visible)).rows).toEqual([]);
    await other.query('SET search_path = kept_s, public');
    for (let i = 0; i < 2; i++) expect((await other.query(visible)).rows).toEqual([{ relname: 'kept_t' }]);
    expect((await c.query(visible)).rows).toEqual([]);
    await other.query('RESET search_path');
    // A backend's own pid, and a user table's rows beside the catalog: never kept, as they change without DDL.
    const pid = 'SELECT pg_backend_pid() AS pid, relname FROM pg_class WHERE relname = $1';
    const [mine, theirs] = [(await c.query(pid, ['kept_t'])).rows[0].pid, (await other.query(pid, ['kept_t'])).rows[0].pid];
    expect(mine).not.toEqual(theirs);
    const counted = "SELECT count(*)::int AS n FROM pg_class c, kept_s.kept_t t WHERE c.relname = 'kept_t'";
    expect((await c.query(counted)).rows).toEqual([{ n: 0 }]);
    await c.query('INSERT INTO kept_s.kept_t VALUES (1), (2)');
    expect((await c.query(counted)).rows).toEqual([{ n: 2 }]);
    // A change on another connection starts a new generation: the kept answer goes.
    const columns = "SELECT attname FROM pg_attribute WHERE attrelid = 'kept_s.kept_t'::regclass AND attnum > 0 ORDER BY attnum";
    for (let i = 0; i < 2; i++) expect((await c.query(columns)).rows).toEqual([{ attname: 'x' }]);
    await other.query('ALTER TABLE kept_s.kept_t ADD COLUMN y text');
    expect((await c.query(columns)).rows).toEqual([{ attname: 'x' }, { attname: 'y' }]);
    await refreshedSince(countLogged(lines, 'catalog snapshot refreshed'));
    for (let i = 0; i < 2; i++) expect((await c.query(columns)).rows).toEqual([{ attname: 'x' }, { attname: 'y' }]);
    await c.query('DROP SCHEMA kept_s CASCADE');
  });
});

describe('catalog answers and the functions clients make', () => {
  it('knows the tables a LOCK TABLE names from the refresh, as they are after each change', async () => {
    const c = ctx.client;
    await c.query('CREATE TABLE snap_locked (id integer)');
    await refreshedSince(countLogged(lines, 'catalog snapshot refreshed'));
    await c.query('BEGIN');
    expect((await c.query('LOCK TABLE snap_locked IN ACCESS SHARE MODE')).command).toBe('LOCK');
    await c.query('COMMIT');
    await c.query('DROP TABLE snap_locked');
    await refreshedSince(countLogged(lines, 'catalog snapshot refreshed'));
    await c.query('BEGIN');
    await expect(c.query('LOCK TABLE snap_locked IN ACCESS SHARE MODE')).rejects.toMatchObject({ code: '42P01' });
    await c.query('ROLLBACK');
  });

  it('never keeps a read that calls a function made by a client, which may read a table', async () => {
    const c = ctx.client;
    await c.query('CREATE TABLE made_rows (x int)');
    await c.query('CREATE FUNCTION made_count() AS (SELECT count(*) FROM made_rows)');
    await refreshedSince(countLogged(lines, 'catalog snapshot refreshed'));
    const sql = "SELECT made_count()::int AS n FROM pg_class WHERE relname = 'made_rows'";
    expect((await c.query(sql)).rows).toEqual([{ n: 0 }]);
    expect((await c.query(sql)).rows).toEqual([{ n: 0 }]);
    await c.query('INSERT INTO made_rows VALUES (1)');
    expect((await c.query(sql)).rows).toEqual([{ n: 1 }]);
    await c.query('DROP FUNCTION made_count');
    await c.query('DROP TABLE made_rows');
  });
});
