import { describe, expect, it } from 'vitest';
import { sqlstate, useConformanceServer } from '../fixtures/conformance.js';

/**
 * Partial unique indexes, on both engines: a key is unique among the rows
 * the predicate holds for, in one statement and between transactions, and
 * the catalog shows the index as PostgreSQL does.
 */
const s = useConformanceServer();

describe('a partial unique index', () => {
  it('refuses a duplicate among the rows its predicate holds for, and only there', async () => {
    const c = await s.as();
    await c.query('CREATE TABLE pu_users (id serial PRIMARY KEY, email text, org int, deleted_at timestamptz)');
    await c.query('CREATE UNIQUE INDEX pu_users_live ON pu_users (email) WHERE deleted_at IS NULL');
    await c.query('CREATE UNIQUE INDEX pu_users_org ON pu_users USING btree (org, email) WHERE (deleted_at IS NULL AND org > 0)');
    await c.query("INSERT INTO pu_users (email, org) VALUES ('a@x.io', 1), ('b@x.io', 1)");
    const dup = await c.query("INSERT INTO pu_users (email, org) VALUES ('a@x.io', 2)").catch((e: { code?: string; detail?: string }) => e);
    expect(dup).toMatchObject({ code: '23505', detail: 'Key (email)=(a@x.io) already exists.' });
    await c.query("UPDATE pu_users SET deleted_at = now() WHERE email = 'a@x.io'");
    await c.query("INSERT INTO pu_users (email, org) VALUES ('a@x.io', 2)");
    expect(await sqlstate(c.query("UPDATE pu_users SET deleted_at = NULL WHERE email = 'a@x.io'"))).toBe('23505');
    expect((await c.query("SELECT count(*)::int AS n FROM pu_users WHERE email = 'a@x.io'")).rows).toEqual([{ n: 2 }]);
    // Each engine's tables are in their schema (the PostgreSQL engine's users have their own): it is left out.
    const indexes = await c.query(
      "SELECT indexname, replace(indexdef, ' ON ' || schemaname || '.', ' ON ') AS indexdef FROM pg_indexes WHERE tablename = 'pu_users' AND indexname <> 'pu_users_pkey' ORDER BY 1",
    );
    expect(indexes.rows).toEqual([
      { indexname: 'pu_users_live', indexdef: 'CREATE UNIQUE INDEX pu_users_live ON pu_users USING btree (email) WHERE (deleted_at IS NULL)' },
      {
        indexname: 'pu_users_org',
        indexdef: 'CREATE UNIQUE INDEX pu_users_org ON pu_users USING btree (org, email) WHERE ((deleted_at IS NULL) AND (org > 0))',
      },
    ]);
    const pretty = await c.query("SELECT regexp_replace(pg_get_indexdef('pu_users_org'::regclass, 0, true), ' ON \\w+\\.', ' ON ') AS def");
    expect(pretty.rows).toEqual([{ def: 'CREATE UNIQUE INDEX pu_users_org ON pu_users USING btree (org, email) WHERE deleted_at IS NULL AND org > 0' }]);
  });

  it('lets one of two transactions that add the same key commit', async () => {
    const a = await s.fresh();
    const b = await s.fresh();
    await a.query('CREATE TABLE pu_jobs (id int PRIMARY KEY, k text, done boolean)');
    await a.query('CREATE UNIQUE INDEX pu_jobs_open ON pu_jobs (k) WHERE NOT done');
    await a.query('BEGIN');
    await b.query('BEGIN');
    await a.query("INSERT INTO pu_jobs VALUES (1, 'x', false)");
    // PostgreSQL makes the second wait for the first and then refuses it; DuckDB refuses it at its COMMIT.
    const second = sqlstate(b.query("INSERT INTO pu_jobs VALUES (2, 'x', false)").then(() => b.query('COMMIT')));
    await a.query('COMMIT');
    expect(await second).toMatch(/^(23505|40001)$/);
    await b.query('ROLLBACK').catch(() => undefined);
    expect((await a.query('SELECT id FROM pu_jobs')).rows).toEqual([{ id: 1 }]);
    await a.end();
    await b.end();
  });
});
