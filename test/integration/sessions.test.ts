import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeScramVerifier } from '../../src/session/scram.js';
import { sqlstate } from '../fixtures/errors.js';
import { onPostgres, startTestServer, type TestServer } from '../fixtures/server.js';

/**
 * PostgreSQL's functions that reach a session from SQL: statement_timestamp(),
 * set_config() inside a larger query, pg_cancel_backend() and
 * pg_terminate_backend() with PostgreSQL's permissions; and CREATE EXTENSION,
 * timestamps in parameters, and pgAdmin's dashboard.
 */
const verifier = makeScramVerifier('pw');
const users = [
  { name: 'boss', password: verifier, role: 'admin', agentId: null, orgId: null },
  { name: 'bot', password: verifier, role: 'writer', agentId: null, orgId: null },
  { name: 'other', password: verifier, role: 'writer', agentId: null, orgId: null },
  { name: 'bi', password: verifier, role: 'reader', agentId: null, orgId: null },
];

let server: TestServer;
const as = (user: string): Promise<pg.Client> => server.client({ user, password: 'pw' });

beforeAll(async () => {
  server = await startTestServer({ users });
});
afterAll(async () => {
  await server?.[Symbol.asyncDispose]();
});

/** A statement that runs until it is cancelled. */
const LONG = 'SELECT count(*) FROM range(100000000000) t(x) WHERE x % 7 = 3';

/** Runs `signal` from `by` until `running` settles (the first may come before the statement starts); what each answered. */
async function signalUntilSettled(running: Promise<unknown>, signal: () => Promise<unknown>): Promise<unknown[]> {
  let settled = false;
  void running.finally(() => {
    settled = true;
  });
  const answers: unknown[] = [];
  for (let i = 0; i < 200 && !settled; i++) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    if (!settled) answers.push(await signal());
  }
  return answers;
}

/** A NoticeResponse as node-postgres gives it. */
type Notice = { readonly severity?: string; readonly code?: string; readonly message?: string };

const pidOf = async (c: pg.Client): Promise<number> => (await c.query('SELECT pg_backend_pid() AS p')).rows[0].p as number;

describe.skipIf(onPostgres)('sessions reached from SQL', () => {
  it("gives pg_backend_pid the session's process ID, as BackendKeyData does", async () => {
    const a = await as('bot');
    const pid = await pidOf(a);
    expect(pid).toBe((a as unknown as { processID: number }).processID);
  });

  it('answers statement_timestamp() with the start of the statement: within a transaction, after now()', async () => {
    const a = await as('bot');
    const first = (await a.query('SELECT statement_timestamp() = now() AS same, pg_typeof(statement_timestamp())::text AS t')).rows[0];
    expect(first).toEqual({ same: true, t: 'timestamp with time zone' });
    await a.query('BEGIN');
    const start = (await a.query('SELECT now() AS n, statement_timestamp() AS s')).rows[0] as { n: Date; s: Date };
    await new Promise((resolve) => setTimeout(resolve, 50));
    const later = (await a.query('SELECT now() AS n, statement_timestamp() AS s')).rows[0] as { n: Date; s: Date };
    await a.query('COMMIT');
    expect(later.n).toEqual(start.n);
    expect(start.s.getTime()).toBeGreaterThanOrEqual(start.n.getTime());
    expect(later.s.getTime()).toBeGreaterThanOrEqual(start.s.getTime() + 40);
  });

  it("cancels another session's statement, as an admin or as the same user; the victim's session goes on", async () => {
    const admin = await as('boss');
    for (const by of [admin, await as('bot')]) {
      const victim = await as('bot');
      const pid = await pidOf(victim);
      const running = victim.query(LONG).then(
        () => 'finished',
        (e: pg.DatabaseError) => e.code,
      );
      const answers = await signalUntilSettled(running, async () => (await by.query('SELECT pg_cancel_backend($1) AS c', [pid])).rows[0].c);
      expect(await running).toBe('57014');
      expect(answers).not.toHaveLength(0);
      expect(answers.every((a) => a === true)).toBe(true);
      expect((await victim.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
    }
  });

  it("refuses to signal another user's session, and a superuser's, with PostgreSQL's 42501", async () => {
    const bot = await as('bot');
    const other = await as('other');
    const boss = await as('boss');
    const refusal = (p: Promise<unknown>): Promise<unknown> =>
      p.then(
        () => null,
        (e: pg.DatabaseError) => [e.code, e.message],
      );
    expect(await refusal(bot.query('SELECT pg_cancel_backend($1)', [await pidOf(other)]))).toEqual([
      '42501',
      'must be a member of the role whose query is being canceled or member of pg_signal_backend',
    ]);
    expect(await refusal(bot.query('SELECT pg_terminate_backend($1)', [await pidOf(boss)]))).toEqual([
      '42501',
      'must be a superuser to terminate superuser process',
    ]);
    // Nothing happened to them.
    expect((await other.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
    expect((await boss.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
  });

  it('answers false with a WARNING (01000) for a process ID that is no backend', async () => {
    const a = await as('bi');
    const notices: Notice[] = [];
    a.on('notice', (n) => notices.push(n));
    expect((await a.query('SELECT pg_cancel_backend(987654) AS c, pg_terminate_backend(NULL) AS t')).rows).toEqual([{ c: false, t: null }]);
    expect(notices.map((n) => [n.severity, n.code, n.message])).toEqual([['WARNING', '01000', 'PID 987654 is not a PostgreSQL backend process']]);
  });

  it('terminates another session: its statement ends and its connection closes with 57P01', async () => {
    const admin = await as('boss');
    const victim = await as('bot');
    const errors: string[] = [];
    victim.on('error', (e: Error & { code?: string }) => errors.push(e.code ?? e.message));
    const ended = new Promise<void>((resolve) => victim.on('end', () => resolve()));
    const pid = await pidOf(victim);
    const running = victim.query(LONG).then(
      () => 'finished',
      (e: pg.DatabaseError) => e.code,
    );
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect((await admin.query('SELECT pg_terminate_backend($1) AS t', [pid])).rows).toEqual([{ t: true }]);
    expect(await running).toBe('57P01');
    await ended;
    expect(await sqlstate(admin.query('SELECT 1'))).toBe('succeeded');
  });

  it('lists every session in pg_stat_activity, what it does shown to a superuser and to its own user', async () => {
    const victim = await as('other');
    const pid = await pidOf(victim);
    await victim.query("SET application_name = 'victim'");
    await victim.query('SELECT 42');
    const bot = await as('bot');
    const seen = async (by: pg.Client): Promise<unknown> =>
      (await by.query("SELECT pid, usename::text AS u, state, query FROM pg_stat_activity WHERE application_name = 'victim'")).rows;
    expect(await seen(await as('boss'))).toEqual([{ pid, u: 'other', state: 'idle', query: 'SELECT 42' }]);
    expect(await seen(bot)).toEqual([{ pid, u: 'other', state: null, query: '<insufficient privilege>' }]);
    const own = await bot.query('SELECT state, query FROM pg_stat_activity WHERE pid = pg_backend_pid()');
    expect(own.rows).toEqual([{ state: 'active', query: 'SELECT state, query FROM pg_stat_activity WHERE pid = pg_backend_pid()' }]);
    // The usual way to end a client's sessions.
    victim.on('error', () => undefined);
    const ended = new Promise<void>((resolve) => victim.on('end', () => resolve()));
    const admin = await as('boss');
    const r = await admin.query("SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity WHERE application_name = 'victim'");
    expect(r.rows).toEqual([{ n: 1 }]);
    await ended;
  });

  it('terminates a session idle between statements', async () => {
    const admin = await as('boss');
    const victim = await as('other');
    victim.on('error', () => undefined);
    const ended = new Promise<void>((resolve) => victim.on('end', () => resolve()));
    const pid = await pidOf(victim);
    expect((await admin.query('SELECT pg_terminate_backend($1) AS t', [pid])).rows).toEqual([{ t: true }]);
    await ended;
    // Gone: signalling it again is a WARNING and false.
    expect((await admin.query('SELECT pg_cancel_backend($1) AS c', [pid])).rows).toEqual([{ c: false }]);
  });
});

describe.skipIf(onPostgres)('set_config inside a larger query', () => {
  it('changes the setting at any position among several columns, with or without FROM', async () => {
    const a = await as('bot');
    const r = await a.query("SELECT 1 AS a, set_config('application_name', 'dash', false) AS b, set_config('statement_timeout', '90000', false) AS c, 2 AS d");
    expect(r.rows).toEqual([{ a: 1, b: 'dash', c: '90s', d: 2 }]);
    expect((await a.query('SHOW application_name')).rows).toEqual([{ application_name: 'dash' }]);
    expect((await a.query('SHOW statement_timeout')).rows).toEqual([{ statement_timeout: '90s' }]);
    const each = await a.query("SELECT x, set_config('myapp.last', x, false) AS v FROM (VALUES ('p'), ('q')) t(x) ORDER BY x");
    expect(each.rows).toEqual([
      { x: 'p', v: 'p' },
      { x: 'q', v: 'q' },
    ]);
    expect((await a.query('SHOW myapp.last')).rows).toEqual([{ 'myapp.last': 'q' }]);
  });

  it('gives the engine a search_path set so', async () => {
    const admin = await as('boss');
    await admin.query('CREATE SCHEMA side');
    await admin.query("CREATE TABLE side.where_am_i (v text); INSERT INTO side.where_am_i VALUES ('side')");
    const r = await admin.query("SELECT set_config('search_path', 'side, public', false) AS x, 2 AS y");
    expect(r.rows).toEqual([{ x: 'side, public', y: 2 }]);
    expect((await admin.query('SELECT v FROM where_am_i')).rows).toEqual([{ v: 'side' }]);
    const back = await admin.query("SELECT set_config('search_path', current_setting('search_path'), false) AS x, 2 AS y");
    expect(back.rows).toEqual([{ x: 'side, public', y: 2 }]);
  });

  it('keeps a local setting to the transaction, and refuses with the SQLSTATE a SET would get', async () => {
    const a = await as('bot');
    await a.query('BEGIN');
    expect((await a.query("SELECT set_config('lock_timeout', '2s', true) AS v, 1 AS one")).rows).toEqual([{ v: '2s', one: 1 }]);
    expect((await a.query('SHOW lock_timeout')).rows).toEqual([{ lock_timeout: '2s' }]);
    await a.query('COMMIT');
    expect((await a.query('SHOW lock_timeout')).rows).toEqual([{ lock_timeout: '0' }]);
    expect(await sqlstate(a.query("SELECT set_config('no_such_setting', 'x', false), 1"))).toBe('42704');
    expect(await sqlstate(a.query("SELECT set_config('max_connections', '5', false), 1"))).toBe('55P02');
    expect(await sqlstate(a.query("SELECT set_config(NULL, 'x', false), 1"))).toBe('22023');
    expect(await sqlstate(a.query("SELECT set_config('DateStyle', 'German', false), 1"))).toBe('22023');
  });
});

describe.skipIf(onPostgres)('extensions', () => {
  it('creates the extensions whose functions cotwire has, lists them in pg_extension, and drops them', async () => {
    const admin = await as('boss');
    const notices: Notice[] = [];
    admin.on('notice', (n) => notices.push(n));
    await admin.query('CREATE EXTENSION IF NOT EXISTS "uuid-ossp"');
    await admin.query('CREATE EXTENSION IF NOT EXISTS "uuid-ossp"');
    expect(notices.map((n) => [n.code, n.message])).toEqual([['42710', 'extension "uuid-ossp" already exists, skipping']]);
    expect(await sqlstate(admin.query('CREATE EXTENSION "uuid-ossp"'))).toBe('42710');
    await admin.query('BEGIN');
    await admin.query('CREATE EXTENSION pgcrypto');
    await admin.query('ROLLBACK');
    await admin.query('CREATE EXTENSION pgcrypto WITH SCHEMA public');
    const listed = await admin.query('SELECT extname::text AS name, extversion, extnamespace::int AS ns FROM pg_extension ORDER BY 1');
    expect(listed.rows).toEqual([
      { name: 'pgcrypto', extversion: '1.3', ns: 2200 },
      { name: 'uuid-ossp', extversion: '1.1', ns: 2200 },
    ]);
    expect((await admin.query("SELECT installed_version FROM pg_available_extensions WHERE name = 'pgcrypto'")).rows).toEqual([{ installed_version: '1.3' }]);
    await admin.query('DROP EXTENSION pgcrypto');
    expect(await sqlstate(admin.query('DROP EXTENSION pgcrypto'))).toBe('42704');
    await admin.query('DROP EXTENSION IF EXISTS pgcrypto');
    expect((await admin.query('SELECT extname::text AS name FROM pg_extension')).rows).toEqual([{ name: 'uuid-ossp' }]);
  });

  it('refuses an extension it has not the functions of, as PostgreSQL refuses one not installed (0A000), and readers', async () => {
    const admin = await as('boss');
    const err = (await admin.query('CREATE EXTENSION IF NOT EXISTS pg_trgm').catch((e: unknown) => e)) as pg.DatabaseError;
    expect([err.code, err.message]).toEqual(['0A000', 'extension "pg_trgm" is not available']);
    expect(await sqlstate((await as('bi')).query('CREATE EXTENSION IF NOT EXISTS "uuid-ossp"'))).toBe('42501');
  });

  it("serves uuid-ossp's functions, uuid_generate_v4() as a column's default too (TypeORM's uuid columns)", async () => {
    const admin = await as('boss');
    await admin.query('CREATE TABLE tokens (id uuid DEFAULT uuid_generate_v4() PRIMARY KEY, name text)');
    await admin.query("INSERT INTO tokens (name) VALUES ('a'), ('b')");
    const r = await admin.query('SELECT count(DISTINCT id)::int AS n FROM tokens');
    expect(r.rows).toEqual([{ n: 2 }]);
    const v = await admin.query(
      "SELECT uuid_generate_v1()::text AS v1, uuid_generate_v4()::text AS v4, uuid_generate_v5(uuid_ns_dns(), 'www.example.com')::text AS v5, uuid_generate_v3(uuid_ns_dns(), 'www.example.com')::text AS v3",
    );
    const row = v.rows[0] as Record<string, string>;
    expect(row.v1).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-1[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(row.v4).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    // RFC 4122's examples.
    expect(row.v5).toBe('2ed6657d-e927-568b-95e1-2665a8aea6a2');
    expect(row.v3).toBe('5df41881-3aed-3515-88a7-2f4a814cf09e');
  });
});

describe.skipIf(onPostgres)('timestamps in parameters, and pgAdmin', () => {
  it('reads a timestamptz parameter written with a spaced offset, and a Date as node-postgres sends it', async () => {
    const a = await as('boss');
    await a.query('CREATE TABLE stamps (ts timestamptz)');
    await a.query('INSERT INTO stamps VALUES ($1::timestamptz)', ['2024-07-01 00:00:00.000 +00:00']);
    await a.query('INSERT INTO stamps VALUES ($1)', [new Date('2024-07-02T00:00:00Z')]);
    const r = await a.query("SELECT to_char(ts, 'YYYY-MM-DD HH24:MI') AS t FROM stamps ORDER BY ts");
    expect(r.rows).toEqual([{ t: '2024-07-01 00:00' }, { t: '2024-07-02 00:00' }]);
    const p = await a.query('SELECT $1::timestamptz AS t', ['2024-07-01 02:00:00.000 +02:00']);
    expect((p.rows[0].t as Date).toISOString()).toBe('2024-07-01T00:00:00.000Z');
  });

  it("answers pgAdmin's dashboard (sums of pg_stat_database's counters, numeric as in PostgreSQL)", async () => {
    const a = await as('boss');
    const dashboard = `/*pga4dash*/
      SELECT 'session_stats' AS chart_name, row_to_json(t)::jsonb AS chart_data
      FROM (SELECT
         (SELECT count(*) FROM pg_stat_activity) AS "Total",
         (SELECT count(*) FROM pg_stat_activity WHERE state = 'active')  AS "Active",
         (SELECT count(*) FROM pg_stat_activity WHERE state = 'idle')  AS "Idle"
      ) t
      UNION ALL
      SELECT 'tps_stats' AS chart_name, row_to_json(t)::jsonb AS chart_data
      FROM (SELECT
         (SELECT sum(xact_commit) + sum(xact_rollback) FROM pg_stat_database) AS "Transactions",
         (SELECT sum(xact_commit) FROM pg_stat_database) AS "Commits",
         (SELECT sum(xact_rollback) FROM pg_stat_database) AS "Rollbacks"
      ) t
      UNION ALL
      SELECT 'ti_stats' AS chart_name, row_to_json(t)::jsonb AS chart_data
      FROM (SELECT
         (SELECT sum(tup_inserted) FROM pg_stat_database) AS "Inserts",
         (SELECT sum(tup_updated) FROM pg_stat_database) AS "Updates",
         (SELECT sum(tup_deleted) FROM pg_stat_database) AS "Deletes"
      ) t
      UNION ALL
      SELECT 'to_stats' AS chart_name, row_to_json(t)::jsonb AS chart_data
      FROM (SELECT
         (SELECT sum(tup_fetched) FROM pg_stat_database) AS "Fetched",
         (SELECT sum(tup_returned) FROM pg_stat_database) AS "Returned"
      ) t
      UNION ALL
      SELECT 'bio_stats' AS chart_name, row_to_json(t)::jsonb AS chart_data
      FROM (SELECT
         (SELECT sum(blks_read) FROM pg_stat_database) AS "Reads",
         (SELECT sum(blks_hit) FROM pg_stat_database) AS "Hits"
      ) t`;
    const r = await a.query(dashboard);
    expect(r.rows.map((row: { chart_name: string }) => row.chart_name)).toEqual(['session_stats', 'tps_stats', 'ti_stats', 'to_stats', 'bio_stats']);
    expect(r.rows[2].chart_data).toEqual({ Inserts: 0, Updates: 0, Deletes: 0 });
    const sums = await a.query('SELECT sum(tup_inserted) AS i, sum(xact_commit) AS c, sum(blks_read) AS r, sum(tup_fetched) AS f FROM pg_stat_database');
    expect(sums.fields.map((f) => f.dataTypeID)).toEqual([1700, 1700, 1700, 1700]);
  });
});
