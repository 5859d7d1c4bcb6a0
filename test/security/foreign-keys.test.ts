import { DuckDBInstance } from '@duckdb/node-api';
import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import { FOREIGN_KEYS_SETUP } from '../../src/engines/duckdb/catalog/foreign-keys.js';
import { useTestServer } from '../fixtures/server.js';

/**
 * cotwire keeps foreign keys in a table of the database (the schema
 * _cot_catalog), which it reads to decide what a delete does. A client
 * that could write it would turn a key that refuses into one that
 * cascades, and delete rows it was never allowed to, or drop a key and
 * leave orphans. Each attack works on a bare DuckDB holding the same
 * table; cotwire refuses it, and the key still holds.
 */
const ATTACKS: ReadonlyArray<readonly [string, readonly string[]]> = [
  ['deleting the record of a key', ['DELETE FROM _cot_catalog.foreign_keys']],
  ['turning a refusing key into a cascading one', ["UPDATE _cot_catalog.foreign_keys SET on_delete = 'c'"]],
  ['dropping the schema', ['DROP SCHEMA _cot_catalog CASCADE']],
  ['quoting the name', ['DELETE FROM "_COT_CATALOG"."foreign_keys"']],
  ['reaching the table through the search path', ["SET search_path = '_cot_catalog'", 'DELETE FROM foreign_keys']],
];

const RECORD = "INSERT INTO _cot_catalog.foreign_keys VALUES ('main', 'sec_child', 'sec_child_pid_fkey', 1, ['pid'], 'main', 'sec_parent', ['id'], 'a', 'a')";

const ctx = useTestServer();

describe('the record of foreign keys', () => {
  it.each(ATTACKS)('bare DuckDB lets a client change it by %s', async (_, statements) => {
    const bare = await DuckDBInstance.create(':memory:');
    const conn = await bare.connect();
    try {
      for (const s of FOREIGN_KEYS_SETUP) await conn.run(s);
      await conn.run(RECORD);
      const before = (await conn.runAndReadAll('SELECT on_delete FROM _cot_catalog.foreign_keys')).getRows();
      for (const s of statements) await conn.run(s);
      await conn.run("SET search_path = 'main'");
      const after = await conn
        .runAndReadAll('SELECT on_delete FROM _cot_catalog.foreign_keys')
        .then((r) => r.getRows())
        .catch(() => 'gone');
      expect(after).not.toEqual(before);
    } finally {
      conn.closeSync();
      bare.closeSync();
    }
  });

  it.each(ATTACKS)('cotwire refuses %s, and the key still refuses an orphan and a delete', async (name, statements) => {
    const c: pg.Client = ctx.client;
    const suffix = name.replaceAll(/\W+/g, '_');
    await c.query(`CREATE TABLE sec_parent_${suffix} (id int PRIMARY KEY)`);
    await c.query(`CREATE TABLE sec_child_${suffix} (id int, pid int REFERENCES sec_parent_${suffix})`);
    await c.query(`INSERT INTO sec_parent_${suffix} VALUES (1)`);
    await c.query(`INSERT INTO sec_child_${suffix} VALUES (1, 1)`);
    for (const s of statements) {
      const err = (await c.query(s).catch((e: unknown) => e)) as pg.DatabaseError | pg.QueryResult;
      // SET search_path is taken, as PostgreSQL takes it; the schema is never searched.
      if (s.startsWith('SET')) continue;
      expect((err as pg.DatabaseError).code).toMatch(/^(42501|42P01)$/);
    }
    await c.query('RESET search_path');
    expect((await c.query(`INSERT INTO sec_child_${suffix} VALUES (2, 9)`).catch((e: pg.DatabaseError) => e)) as pg.DatabaseError).toMatchObject({
      code: '23503',
    });
    expect((await c.query(`DELETE FROM sec_parent_${suffix}`).catch((e: pg.DatabaseError) => e)) as pg.DatabaseError).toMatchObject({ code: '23503' });
    expect((await c.query(`SELECT count(*)::int AS n FROM sec_child_${suffix}`)).rows).toEqual([{ n: 1 }]);
  });
});
