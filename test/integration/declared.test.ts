import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { spawnServer } from '../fixtures/server.js';

/**
 * What a client declares that DuckDB does not keep (varchar(n), char(n),
 * jsonb, constraint names) reads back from the catalog as declared, follows
 * the table through ALTER and DROP, is not recorded when the DDL rolls back,
 * and is still there after a restart.
 */
const root = mkdtempSync(join(tmpdir(), 'cotwire-declared-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

async function withServer(db: string, work: (c: pg.Client) => Promise<void>): Promise<void> {
  const { child, port } = await spawnServer(['--db', db]);
  const c = new pg.Client({ host: '127.0.0.1', port, user: 'cotwire', database: 'cotwire' });
  try {
    await c.connect();
    await work(c);
  } finally {
    await c.end().catch(() => undefined);
    child.kill('SIGTERM');
    await new Promise<void>((resolve) => (child.exitCode !== null ? resolve() : child.once('exit', () => resolve())));
  }
}

const columns = (c: pg.Client, table: string) =>
  c
    .query(
      `SELECT column_name AS c, data_type AS t, character_maximum_length AS n, format_type(a.atttypid, a.atttypmod) AS f
       FROM information_schema.columns i JOIN pg_class r ON r.relname = i.table_name JOIN pg_attribute a ON a.attrelid = r.oid AND a.attname = i.column_name
       WHERE table_name = $1 ORDER BY ordinal_position`,
      [table],
    )
    .then((r) => r.rows);

describe('declared types and constraint names', () => {
  it('reads back as declared, follows ALTER, ignores a rolled-back CREATE and survives a restart', async () => {
    const db = join(root, 'declared.duckdb');
    await withServer(db, async (c) => {
      await c.query(
        'CREATE TABLE accounts (id integer CONSTRAINT "PK_accounts" PRIMARY KEY, email varchar(255) NOT NULL, code char(3), prefs jsonb, note text, CONSTRAINT "UQ_email" UNIQUE (email))',
      );
      expect(await columns(c, 'accounts')).toEqual([
        { c: 'id', t: 'integer', n: null, f: 'integer' },
        { c: 'email', t: 'character varying', n: 255, f: 'character varying(255)' },
        { c: 'code', t: 'character', n: 3, f: 'character(3)' },
        { c: 'prefs', t: 'jsonb', n: null, f: 'jsonb' },
        { c: 'note', t: 'text', n: null, f: 'text' },
      ]);
      // ALTER: a renamed column keeps its declaration; a retyped one takes the new; a dropped one loses it.
      await c.query('ALTER TABLE accounts RENAME COLUMN email TO mail');
      await c.query('ALTER TABLE accounts ALTER COLUMN code TYPE varchar(10)');
      await c.query('ALTER TABLE accounts DROP COLUMN prefs');
      await c.query('ALTER TABLE accounts ADD COLUMN prefs text');
      expect((await columns(c, 'accounts')).map((r) => r.f)).toEqual(['integer', 'character varying(255)', 'character varying(10)', 'text', 'text']);
      await c.query('CREATE TABLE payments (id serial PRIMARY KEY, account_id integer)');
      await c.query('ALTER TABLE payments ADD CONSTRAINT "FK_payments_account" FOREIGN KEY (account_id) REFERENCES accounts (id)');
      const names = await c.query("SELECT conname, contype FROM pg_constraint WHERE conrelid IN ('accounts'::regclass, 'payments'::regclass) ORDER BY conname");
      expect(names.rows).toEqual([
        { conname: 'FK_payments_account', contype: 'f' },
        { conname: 'PK_accounts', contype: 'p' },
        { conname: 'UQ_email', contype: 'u' },
        { conname: 'payments_pkey', contype: 'p' },
      ]);
      // The index of a named constraint has its name, as in PostgreSQL.
      expect((await c.query("SELECT indexname FROM pg_indexes WHERE tablename = 'accounts' ORDER BY 1")).rows).toEqual([
        { indexname: 'PK_accounts' },
        { indexname: 'UQ_email' },
      ]);
      // A CREATE that rolls back declares nothing; one dropped and made again declares afresh.
      await c.query('BEGIN');
      await c.query('CREATE TABLE ghost (v varchar(5))');
      await c.query('ROLLBACK');
      await c.query('CREATE TABLE ghost (v text)');
      expect((await columns(c, 'ghost')).map((r) => r.f)).toEqual(['text']);
    });
    await withServer(db, async (c) => {
      expect((await columns(c, 'accounts')).map((r) => r.f)).toEqual(['integer', 'character varying(255)', 'character varying(10)', 'text', 'text']);
      expect((await c.query("SELECT conname FROM pg_constraint WHERE conrelid = 'payments'::regclass AND contype = 'f'")).rows).toEqual([
        { conname: 'FK_payments_account' },
      ]);
      // Dropping a temporary table of the same name leaves the table's declarations alone.
      await c.query('CREATE TEMP TABLE accounts (x int)');
      await c.query('DROP TABLE accounts');
      expect((await columns(c, 'accounts')).map((r) => r.f)).toEqual(['integer', 'character varying(255)', 'character varying(10)', 'text', 'text']);
      await c.query('DROP TABLE payments');
      await c.query('CREATE TABLE payments (id int, account_id integer REFERENCES accounts (id))');
      expect((await c.query("SELECT conname FROM pg_constraint WHERE conrelid = 'payments'::regclass AND contype = 'f'")).rows).toEqual([
        { conname: 'payments_account_id_fkey' },
      ]);
    });
  });

  it('keeps varchar(n) lengths through ALTER TABLE: an added column is checked, a retyped one takes its new length', async () => {
    await withServer(join(root, 'lengths.duckdb'), async (c) => {
      const code = (sql: string): Promise<string | undefined> =>
        c.query(sql).then(
          () => undefined,
          (e: { code?: string }) => e.code,
        );
      await c.query('CREATE TABLE people (id integer PRIMARY KEY, name varchar(5), note text)');
      await c.query('CREATE INDEX people_name ON people (name)');
      await c.query("INSERT INTO people VALUES (1, 'abcde', NULL)");
      // Added by ALTER TABLE (Knex and TypeORM migrations): checked like a column of CREATE TABLE.
      await c.query('ALTER TABLE people ADD COLUMN code varchar(3)');
      expect(await code("INSERT INTO people VALUES (2, 'x', NULL, 'abcd')")).toBe('22001');
      await c.query("INSERT INTO people VALUES (2, 'x', NULL, 'abc')");
      // Widened: DuckDB refuses to retype a column with a CHECK, so the table is rebuilt around it, its index kept.
      await c.query('ALTER TABLE people ALTER COLUMN name TYPE varchar(8)');
      await c.query("INSERT INTO people VALUES (3, 'abcdefgh', NULL, NULL)");
      expect(await code("INSERT INTO people VALUES (4, 'abcdefghi', NULL, NULL)")).toBe('22001');
      // Narrowed below a value the table holds: refused as PostgreSQL refuses it, and nothing changes.
      expect(await code('ALTER TABLE people ALTER COLUMN name TYPE varchar(4)')).toBe('22001');
      // To text: no length any more.
      await c.query('ALTER TABLE people ALTER COLUMN name TYPE text');
      await c.query("INSERT INTO people VALUES (5, 'a name longer than eight', NULL, NULL)");
      expect((await columns(c, 'people')).map((r) => r.f)).toEqual(['integer', 'text', 'text', 'character varying(3)']);
      expect((await c.query("SELECT indexname FROM pg_indexes WHERE tablename = 'people' ORDER BY 1")).rows).toEqual([
        { indexname: 'people_name' },
        { indexname: 'people_pkey' },
      ]);
      // The checks that stand for lengths are the types, not constraints.
      expect((await c.query("SELECT count(*)::int AS n FROM pg_constraint WHERE conrelid = 'people'::regclass AND contype = 'c'")).rows).toEqual([{ n: 0 }]);
      expect((await c.query('SELECT count(*)::int AS n FROM people')).rows).toEqual([{ n: 4 }]);
      // A table other tables reference is rebuilt too (cotwire keeps the key), and the added column is checked.
      await c.query('CREATE TABLE visits (id integer, person integer REFERENCES people (id))');
      await c.query('INSERT INTO visits VALUES (1, 1)');
      await c.query('ALTER TABLE people ADD COLUMN tag varchar(2)');
      await expect(c.query("INSERT INTO people (id, tag) VALUES (6, 'abc')")).rejects.toMatchObject({ code: '22001' });
      await expect(c.query('DELETE FROM people WHERE id = 1')).rejects.toMatchObject({ code: '23503' });
      expect((await columns(c, 'people')).map((r) => r.f)).toEqual(['integer', 'text', 'text', 'character varying(3)', 'character varying(2)']);
    });
  });

  it('checks char(n) as PostgreSQL does: longer is 22001 naming character(n), trailing spaces pass, values are blank-padded', async () => {
    await withServer(join(root, 'chars.duckdb'), async (c) => {
      const error = (sql: string): Promise<{ code?: string; message?: string } | undefined> =>
        c.query(sql).then(
          () => undefined,
          (e: { code?: string; message?: string }) => ({ code: e.code, message: e.message }),
        );
      await c.query('CREATE TABLE codes (id integer, code char(3))');
      expect(await error("INSERT INTO codes VALUES (1, 'abcd')")).toEqual({ code: '22001', message: 'value too long for type character(3)' });
      await c.query("INSERT INTO codes VALUES (2, 'ab'), (3, 'abc  ')");
      expect((await c.query('SELECT id, code FROM codes ORDER BY id')).rows).toEqual([
        { id: 2, code: 'ab ' },
        { id: 3, code: 'abc  ' },
      ]);
      // Added by ALTER TABLE, and retyped.
      await c.query('ALTER TABLE codes ADD COLUMN grade char(1)');
      expect(await error("INSERT INTO codes VALUES (4, 'x', 'AB')")).toMatchObject({ code: '22001' });
      await c.query('ALTER TABLE codes ALTER COLUMN grade TYPE char(2)');
      await c.query("INSERT INTO codes VALUES (5, 'x', 'AB')");
      expect((await columns(c, 'codes')).map((r) => r.f)).toEqual(['integer', 'character(3)', 'character(2)']);
      expect((await c.query("SELECT count(*)::int AS n FROM pg_constraint WHERE conrelid = 'codes'::regclass AND contype = 'c'")).rows).toEqual([{ n: 0 }]);
    });
  });
});
