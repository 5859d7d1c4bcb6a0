import { DuckDBInstance } from '@duckdb/node-api';
import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import { engineSetup } from '../../src/engines/duckdb/catalog/compat.js';
import { registerCatalogFunctions } from '../../src/engines/duckdb/adapter/engine.js';
import { useTestServer } from '../fixtures/server.js';

/**
 * The PostgreSQL catalog's views live in one in-memory database that every
 * connection shares. A client that could change them would lie to every
 * other client (a pg_roles that hides a user, a pg_class that hides a
 * ledger). The attack works on a bare DuckDB holding the same catalog;
 * cotwire refuses any statement that names the catalog's database.
 */
/** [what, the attack, what another connection then sees, and what it sees after] */
const ATTACKS: Array<[string, string, string, unknown[][]]> = [
  [
    'replacing a catalog view for everyone',
    "CREATE OR REPLACE VIEW cotwire_pg.pg.pg_roles AS SELECT 'intruder' AS rolname",
    'SELECT rolname FROM cotwire_pg.pg.pg_roles',
    [['intruder']],
  ],
  [
    'dropping a catalog view',
    'DROP VIEW cotwire_pg.pg.pg_am',
    "SELECT count(*) FROM duckdb_views() WHERE database_name = 'cotwire_pg' AND schema_name = 'pg' AND view_name = 'pg_am'",
    [[0n]],
  ],
  [
    'replacing a catalog function',
    "CREATE OR REPLACE MACRO cotwire_pg.pg.pg_table_is_visible(rel_oid) AS 'replaced'",
    'SELECT cotwire_pg.pg.pg_table_is_visible(1)',
    [['replaced']],
  ],
];

const ctx = useTestServer();

describe('the shared PostgreSQL catalog', () => {
  it.each(ATTACKS)('bare DuckDB with the catalog allows %s, and another connection sees it', async (_, sql, observe, after) => {
    const bare = await DuckDBInstance.create(':memory:');
    const setup = await bare.connect();
    const other = await bare.connect();
    try {
      // As the engine does before its set-up.
      registerCatalogFunctions(setup);
      for (const s of engineSetup()) await setup.run(s);
      await other.run("CREATE TEMP MACRO current_user() AS 'bob'");
      await other.run("CREATE TEMP MACRO cot_role() AS 'reader'");
      await other.run('CREATE TEMP MACRO cot_org_id() AS CAST(NULL AS VARCHAR)');
      expect((await other.runAndReadAll(observe)).getRows()).not.toEqual(after);
      await setup.run(sql);
      expect((await other.runAndReadAll(observe)).getRows()).toEqual(after);
    } finally {
      setup.closeSync();
      other.closeSync();
      bare.closeSync();
    }
  });

  it.each(ATTACKS)('cotwire refuses %s with 42501', async (_, sql) => {
    const err = (await ctx.client.query(sql).catch((e: unknown) => e)) as pg.DatabaseError;
    expect(err.code).toBe('42501');
    expect(err.message).toContain('reserved');
  });

  it('refuses the name quoted, in any case, and in reads too', async () => {
    for (const sql of ['SELECT * FROM "COTWIRE_PG".pg.pg_class', 'SELECT cotwire_pg.pg.format_type(23, -1)']) {
      const err = (await ctx.client.query(sql).catch((e: unknown) => e)) as pg.DatabaseError;
      expect(err.code).toBe('42501');
    }
  });

  it('still answers the catalog under its PostgreSQL names, for everyone, unchanged', async () => {
    const roles = await ctx.client.query('SELECT rolname FROM pg_catalog.pg_roles');
    expect(roles.rows).toEqual([{ rolname: 'cotwire' }]);
    const tables = await ctx.client.query("SELECT tablename FROM pg_tables WHERE tablename = '_cot_steps'");
    expect(tables.rows).toEqual([{ tablename: '_cot_steps' }]);
  });
});
