import { describe, expect, it } from 'vitest';
import type pg from 'pg';
import { sqlstate } from '../fixtures/errors.js';
import { useTestServer } from '../fixtures/server.js';

const ctx = useTestServer();

describe('simple query', () => {
  it('creates, inserts and selects with Postgres command tags', async () => {
    const created = await ctx.client.query('CREATE TABLE items (id INTEGER PRIMARY KEY, name VARCHAR, price DOUBLE)');
    expect(created.command).toBe('CREATE');
    const inserted = await ctx.client.query("INSERT INTO items VALUES (1, 'a', 1.5), (2, 'b', 2.5), (3, 'c', NULL)");
    expect(inserted.command).toBe('INSERT');
    expect(inserted.rowCount).toBe(3);
    const selected = await ctx.client.query('SELECT id, name, price FROM items ORDER BY id');
    expect(selected.command).toBe('SELECT');
    expect(selected.rowCount).toBe(3);
    expect(selected.rows).toEqual([
      { id: 1, name: 'a', price: 1.5 },
      { id: 2, name: 'b', price: 2.5 },
      { id: 3, name: 'c', price: null },
    ]);
    const updated = await ctx.client.query("UPDATE items SET name = 'z' WHERE id > 1");
    expect(updated.command).toBe('UPDATE');
    expect(updated.rowCount).toBe(2);
    const deleted = await ctx.client.query('DELETE FROM items WHERE id = 3');
    expect(deleted.command).toBe('DELETE');
    expect(deleted.rowCount).toBe(1);
  });

  it('runs several statements in one string and returns each result', async () => {
    const results = (await ctx.client.query('SELECT 1 AS a; SELECT 2 AS b, 3 AS c')) as unknown as pg.QueryResult[];
    expect(results).toHaveLength(2);
    expect(results[0]?.rows).toEqual([{ a: 1 }]);
    expect(results[1]?.rows).toEqual([{ b: 2, c: 3 }]);
  });

  it('stops a multi-statement string at the first error and rolls the string back', async () => {
    await ctx.client.query('CREATE TABLE multi (x INTEGER)');
    expect(await sqlstate(ctx.client.query('INSERT INTO multi VALUES (1); SELECT * FROM missing_table; INSERT INTO multi VALUES (2)'))).toBe('42P01');
    const { rows } = await ctx.client.query('SELECT count(*)::INTEGER AS n FROM multi');
    expect(rows[0].n).toBe(0);
  });

  it('answers an empty query and a comment-only query with EmptyQueryResponse', async () => {
    const empty = await ctx.client.query('');
    expect(empty.rows).toEqual([]);
    const comment = await ctx.client.query('-- ping');
    expect(comment.command).toBeNull();
  });

  it('maps DuckDB errors to SQLSTATEs with a position', async () => {
    const err = (await ctx.client.query('SELECT * FROM nope').catch((e: unknown) => e)) as pg.DatabaseError;
    expect(err.code).toBe('42P01');
    expect(err.position).toBe('15');
    expect(await sqlstate(ctx.client.query('SELECT nocolumn FROM items'))).toBe('42703');
    expect(await sqlstate(ctx.client.query('SELEC 1'))).toBe('42601');
    expect(await sqlstate(ctx.client.query("SELECT 'abc'::INTEGER"))).toBe('22P02');
    expect(await sqlstate(ctx.client.query('INSERT INTO items VALUES (1, NULL, NULL)'))).toBe('23505');
    await ctx.client.query('CREATE TABLE nn (x INTEGER NOT NULL)');
    expect(await sqlstate(ctx.client.query('INSERT INTO nn VALUES (NULL)'))).toBe('23502');
    expect(await sqlstate(ctx.client.query('SELECT (2::BIGINT ^ 62)::BIGINT * 4'))).toBe('22003');
  });

  it('reports the position of an error in a later statement of the string', async () => {
    const err = (await ctx.client.query('SELECT 1; SELECT * FROM nope').catch((e: unknown) => e)) as pg.DatabaseError;
    expect(err.position).toBe('25');
  });

  it('returns a Postgres-style version() naming cotwire and DuckDB', async () => {
    const { rows } = await ctx.client.query('SELECT version() AS v');
    expect(rows[0].v).toMatch(/^PostgreSQL 15\.0 \(cotwire [\d.]+, DuckDB v[\d.]+\)/);
  });

  it('names computed columns as Postgres does', async () => {
    const r = await ctx.client.query(
      "SELECT count(*), sum(id), 1, 't'::boolean, id::INTEGER, CASE WHEN id > 1 THEN 1 END, id + 1, version(), name AS label FROM items GROUP BY id, name",
    );
    expect(r.fields.map((f) => f.name)).toEqual(['count', 'sum', '?column?', 'bool', 'id', 'case', '?column?', 'version', 'label']);
    const v = await ctx.client.query('VALUES (1, 2)');
    expect(v.fields.map((f) => f.name)).toEqual(['column1', 'column2']);
    const duck = await ctx.client.query('SELECT count(*) AS n FROM items');
    expect(duck.rows[0].n).toBeDefined();
  });

  it('answers current_user and current_database for the session', async () => {
    const c = await ctx.server.client({ user: 'agent_7' });
    const { rows } = await c.query('SELECT current_user AS u, session_user AS s, current_database() AS d');
    expect(rows).toEqual([{ u: 'agent_7', s: 'agent_7', d: 'cotwire' }]);
  });

  it('runs DuckDB analytic SQL', async () => {
    const { rows } = await ctx.client.query('SELECT g % 3 AS k, count(*)::INTEGER AS n, sum(g)::BIGINT AS s FROM range(1000) t(g) GROUP BY ALL ORDER BY k');
    expect(rows).toEqual([
      { k: '0', n: 334, s: '166833' },
      { k: '1', n: 333, s: '166167' },
      { k: '2', n: 333, s: '166500' },
    ]);
  });

  it('runs PIVOT with its values listed, and says how when they are not', async () => {
    await ctx.client.query(
      "CREATE TABLE sales (region VARCHAR, quarter VARCHAR, amount INTEGER); INSERT INTO sales VALUES ('eu', 'q1', 5), ('eu', 'q2', 7), ('us', 'q1', 3)",
    );
    const { rows } = await ctx.client.query("PIVOT sales ON quarter IN ('q1', 'q2') USING sum(amount)::INTEGER GROUP BY region ORDER BY region");
    expect(rows).toEqual([
      { region: 'eu', q1: 5, q2: 7 },
      { region: 'us', q1: 3, q2: null },
    ]);
    const err = (await ctx.client.query('PIVOT sales ON quarter USING sum(amount)').catch((e: unknown) => e)) as pg.DatabaseError;
    expect(err.code).toBe('0A000');
    expect(err.message).toBe('PIVOT without an IN list is not supported');
    expect(err.hint).toMatch(/ON col IN \('a', 'b'\)/);
  });
});

describe('command tags', () => {
  it('sends exactly the tags Postgres sends', async () => {
    const c = await ctx.server.client();
    const tag = async (sql: string): Promise<string> => {
      const r = (await c.query(sql)) as pg.QueryResult & { command: string; rowCount: number | null };
      return r.rowCount === null ? r.command : `${r.command} ${r.rowCount}`;
    };
    expect(await tag('CREATE TABLE tags (a INTEGER, b VARCHAR)')).toBe('CREATE');
    expect(await tag("INSERT INTO tags VALUES (1, 'x'), (2, 'y')")).toBe('INSERT 2');
    expect(await tag("INSERT INTO tags VALUES (3, 'z') RETURNING a")).toBe('INSERT 1');
    expect(await tag('CREATE TABLE tags2 AS SELECT * FROM tags')).toBe('SELECT 3');
    expect(await tag('CREATE VIEW tags_v AS SELECT a FROM tags')).toBe('CREATE');
    expect(await tag('CREATE INDEX tags_a ON tags (a)')).toBe('CREATE');
    expect(await tag('ALTER TABLE tags2 ADD COLUMN c INTEGER')).toBe('ALTER');
    expect(await tag('DROP VIEW tags_v')).toBe('DROP');
    expect(await tag('DROP TABLE tags2')).toBe('DROP');
    expect(await tag('SET application_name = x')).toBe('SET');
    expect(await tag('RESET application_name')).toBe('RESET');
    expect(await tag('SHOW ALL')).toBe('SHOW');
    expect(await tag('DISCARD ALL')).toBe('DISCARD');
  });

  it('sends the full tag text on the wire', async () => {
    const { WireClient } = await import('../fixtures/wire.js');
    const { serialize } = await import('pg-protocol');
    const w = await WireClient.startup(ctx.server.port);
    const tags = async (sql: string): Promise<string[]> => {
      w.write(serialize.query(sql));
      const msgs = await w.until('Z');
      return msgs.filter((m) => m.type === 'C').map((m) => m.body.toString('utf8', 0, m.body.length - 1));
    };
    expect(await tags('CREATE TABLE wt (a INTEGER); CREATE VIEW wv AS SELECT 1; DROP VIEW wv; DROP TABLE wt')).toEqual([
      'CREATE TABLE',
      'CREATE VIEW',
      'DROP VIEW',
      'DROP TABLE',
    ]);
    expect(await tags('BEGIN; SELECT 1; COMMIT')).toEqual(['BEGIN', 'SELECT 1', 'COMMIT']);
    expect(await tags("CREATE SCHEMA ws; CREATE MACRO twice(x) AS x * 2; SET TimeZone = 'UTC'")).toEqual(['CREATE SCHEMA', 'CREATE FUNCTION', 'SET']);
    expect(await tags('CREATE TABLE wt2 (a INTEGER); INSERT INTO wt2 VALUES (1); UPDATE wt2 SET a = 2; DELETE FROM wt2')).toEqual([
      'CREATE TABLE',
      'INSERT 0 1',
      'UPDATE 1',
      'DELETE 1',
    ]);
    w.end();
  });
});

describe('transactions', () => {
  it('tracks BEGIN/COMMIT/ROLLBACK and the failed state like Postgres', async () => {
    const c = await ctx.server.client();
    await c.query('CREATE TABLE tx (x INTEGER)');
    expect((await c.query('BEGIN')).command).toBe('BEGIN');
    await c.query('INSERT INTO tx VALUES (1)');
    expect(await sqlstate(c.query('SELECT * FROM nope'))).toBe('42P01');
    expect(await sqlstate(c.query('SELECT 1'))).toBe('25P02');
    expect((await c.query('COMMIT')).command).toBe('ROLLBACK');
    expect((await c.query('SELECT count(*)::INTEGER AS n FROM tx')).rows[0].n).toBe(0);
    await c.query('START TRANSACTION');
    await c.query('INSERT INTO tx VALUES (2)');
    expect((await c.query('END')).command).toBe('COMMIT');
    expect((await c.query('SELECT count(*)::INTEGER AS n FROM tx')).rows[0].n).toBe(1);
  });

  it('answers ROLLBACK outside a transaction with a warning, not an error', async () => {
    const c = await ctx.server.client();
    const notices: string[] = [];
    c.on('notice', (n) => notices.push(`${n.severity} ${n.code} ${n.message}`));
    const r = await c.query('ROLLBACK');
    expect(r.command).toBe('ROLLBACK');
    await c.query('SELECT 1');
    expect(notices).toEqual(['WARNING 25P01 there is no transaction in progress']);
  });

  it('emulates savepoints when nothing was written before them', async () => {
    const c = await ctx.server.client();
    await c.query('CREATE TABLE sp (x INTEGER)');
    await c.query('BEGIN');
    await c.query('SAVEPOINT probe');
    await c.query('INSERT INTO sp VALUES (1)');
    await c.query('ROLLBACK TO SAVEPOINT probe');
    await c.query('RELEASE SAVEPOINT probe');
    await c.query('INSERT INTO sp VALUES (2)');
    await c.query('COMMIT');
    expect((await c.query('SELECT x FROM sp')).rows).toEqual([{ x: 2 }]);
  });

  it('recovers from an error with ROLLBACK TO when nothing was written since the savepoint', async () => {
    const c = await ctx.server.client();
    await c.query('CREATE TABLE sp2 (x INTEGER)');
    await c.query('BEGIN');
    await c.query('INSERT INTO sp2 VALUES (1)');
    await c.query('SAVEPOINT a');
    expect(await sqlstate(c.query('SELECT * FROM nope'))).toBe('42P01');
    await c.query('ROLLBACK TO a');
    await c.query('COMMIT');
    expect((await c.query('SELECT x FROM sp2')).rows).toEqual([{ x: 1 }]);
  });

  it('refuses a ROLLBACK TO it cannot honour exactly', async () => {
    const c = await ctx.server.client();
    await c.query('CREATE TABLE sp3 (x INTEGER)');
    await c.query('BEGIN');
    await c.query('INSERT INTO sp3 VALUES (1)');
    await c.query('SAVEPOINT a');
    await c.query('INSERT INTO sp3 VALUES (2)');
    expect(await sqlstate(c.query('ROLLBACK TO a'))).toBe('0A000');
    expect(await sqlstate(c.query('SELECT 1'))).toBe('25P02');
    await c.query('ROLLBACK');
    expect((await c.query('SELECT count(*)::INTEGER AS n FROM sp3')).rows[0].n).toBe(0);
  });
});

describe('session settings', () => {
  it('keeps Postgres settings per connection and answers SHOW', async () => {
    const a = await ctx.server.client();
    const b = await ctx.server.client();
    await a.query("SET application_name = 'alpha'");
    await a.query('SET extra_float_digits = 3');
    await a.query("SET statement_timeout = '5s'");
    expect((await a.query('SHOW application_name')).rows).toEqual([{ application_name: 'alpha' }]);
    expect((await a.query('SHOW statement_timeout')).rows).toEqual([{ statement_timeout: '5s' }]);
    expect((await b.query('SHOW application_name')).rows).toEqual([{ application_name: '' }]);
    expect((await a.query('SHOW TRANSACTION ISOLATION LEVEL')).rows).toHaveLength(1);
    expect((await a.query('SHOW server_version')).rows).toEqual([{ server_version: '15.0' }]);
    expect(await sqlstate(a.query('SET no_such_setting = 1'))).toBe('42704');
    expect(await sqlstate(a.query("SET DateStyle = 'German'"))).toBe('22023');
  });

  it('renders timestamptz in the session TimeZone and reports the change', async () => {
    const c = await ctx.server.client();
    await c.query("SET TimeZone = 'America/New_York'");
    const { rows } = await c.query("SELECT (TIMESTAMPTZ '2024-01-15 12:00:00+00')::VARCHAR AS duck, TIMESTAMPTZ '2024-01-15 12:00:00+00' AS ts");
    expect((rows[0].ts as Date).toISOString()).toBe('2024-01-15T12:00:00.000Z');
    const raw = await c.query({
      text: "SELECT TIMESTAMPTZ '2024-07-15 12:00:00+00' AS ts",
      rowMode: 'array',
      types: { getTypeParser: () => (v: string) => v } as never,
    });
    expect(raw.rows[0]).toEqual(['2024-07-15 08:00:00-04']);
  });

  it('maps search_path onto DuckDB schemas', async () => {
    const c = await ctx.server.client();
    await c.query('CREATE SCHEMA analytics');
    await c.query('CREATE TABLE analytics.events (x INTEGER)');
    await c.query('INSERT INTO analytics.events VALUES (7)');
    await c.query('SET search_path TO analytics, public');
    expect((await c.query('SELECT x FROM events')).rows).toEqual([{ x: 7 }]);
    expect((await c.query('SHOW search_path')).rows).toEqual([{ search_path: 'analytics, public' }]);
  });

  it("reads a dotted search_path entry as one schema's name, and never moves the connection to DuckDB's system catalog", async () => {
    const c = await ctx.server.client();
    await c.query('CREATE TABLE sp_home (x INTEGER)');
    // PostgreSQL reads 'system.main' as a schema of that name; DuckDB took it as its catalog system, and even
    // RESET and public then resolved in system.main: the connection lost its tables and its ledgers.
    await c.query("SET search_path = 'system.main'");
    await c.query('RESET search_path');
    expect((await c.query('SELECT count(*)::int AS n FROM sp_home')).rows).toEqual([{ n: 0 }]);
    expect((await c.query('SELECT count(*)::int AS n FROM _cot_steps')).rows).toEqual([{ n: expect.any(Number) }]);
    await c.query('CREATE SCHEMA "dotted.name"');
    await c.query('CREATE TABLE "dotted.name".inside (y INTEGER)');
    await c.query('SET search_path = "dotted.name", public');
    expect((await c.query('SELECT count(*)::int AS n FROM inside')).rows).toEqual([{ n: 0 }]);
    expect((await c.query('SELECT count(*)::int AS n FROM sp_home')).rows).toEqual([{ n: 0 }]);
  });

  it('applies settings from the startup packet and its options', async () => {
    const c = await ctx.server.client({ options: '-c statement_timeout=7s --search_path=analytics', application_name: 'startup-app' } as never);
    expect((await c.query('SHOW statement_timeout')).rows).toEqual([{ statement_timeout: '7s' }]);
    expect((await c.query('SHOW application_name')).rows).toEqual([{ application_name: 'startup-app' }]);
    expect((await c.query('SELECT x FROM events')).rows).toEqual([{ x: 7 }]);
  });
});
