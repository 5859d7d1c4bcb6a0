import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PostgresConnection } from '../../src/engines/postgres/adapter/connection.js';
import { scramVerifier } from '../fixtures/conformance.js';
import { usePgServer } from '../fixtures/pg-server.js';

/**
 * PostgreSQL's own walls around each cotwire role, with cotwire's guard
 * bypassed: the tests connect straight to PostgreSQL as the role a client's
 * backend runs as. Each attack is first shown to work for a plain role of a
 * bare database granted what clients were granted before (CREATE in
 * public), then refused by PostgreSQL to every client role, as an error.
 */

const ctx = usePgServer({
  users: [
    { name: 'bi', password: scramVerifier('bi-secret'), role: 'reader' },
    { name: 'agent', password: scramVerifier('agent-secret'), role: 'writer', agentId: 'agent-7', orgId: null },
    { name: 'ops', password: scramVerifier('ops-secret'), role: 'admin' },
  ],
});

const code = (p: Promise<unknown>): Promise<string> =>
  p.then(
    () => 'succeeded',
    (e: unknown) => (e instanceof pg.DatabaseError ? (e.code ?? 'no code') : `not a server error: ${String(e)}`),
  );

let admin: PostgresConnection;
const direct = new Map<string, pg.Client>();

beforeAll(async () => {
  admin = await ctx.engine.admin();
  for (const [role, url] of [
    ['reader', ctx.engine.readerUrl],
    ['writer', ctx.engine.writerUrl],
    ['admin', ctx.engine.adminUrl],
  ] as const) {
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    // A reader's transactions are read-only by its role's setting; lifted here, to show its privileges alone are a wall.
    if (role === 'reader') await c.query('SET default_transaction_read_only = off');
    direct.set(role, c);
  }
});
afterAll(async () => {
  for (const c of direct.values()) await c.end().catch(() => undefined);
});

/** A sha256 that answers a hash of the attacker's choosing, planted where the README's recipe looks first. */
const PLANT = "CREATE FUNCTION public.sha256(bytea) RETURNS bytea LANGUAGE sql AS $$ SELECT '\\x00'::bytea $$";
const RECIPE = "SET search_path = public, pg_catalog; SELECT encode(sha256('hello'::bytea), 'hex') AS h";

describe("PostgreSQL's walls around the clients' roles", () => {
  it('a role that may create in public plants a sha256 that a verification with public first then uses, on a bare database', async () => {
    await admin.run('CREATE DATABASE bare_walls');
    await admin.run("CREATE ROLE plain_walls LOGIN PASSWORD 'plain'");
    const bareUrl = ctx.engine.url.replace(/\/postgres$/, '/bare_walls');
    const owner = new pg.Client({ connectionString: bareUrl });
    await owner.connect();
    await owner.query('GRANT CREATE ON SCHEMA public TO plain_walls');
    await owner.end();
    const plain = new pg.Client({ connectionString: bareUrl.replace('//postgres@', '//plain_walls:plain@') });
    await plain.connect();
    try {
      await plain.query(PLANT);
      const victim = new pg.Client({ connectionString: bareUrl });
      await victim.connect();
      const [, planted] = (await victim.query(RECIPE)) as unknown as [unknown, pg.QueryResult];
      await victim.end();
      expect(planted.rows).toEqual([{ h: '00' }]);
    } finally {
      await plain.end();
    }
  });

  it('no client role can create anything in public, where the ledgers and the verification functions are', async () => {
    for (const [role, c] of direct) {
      for (const sql of [
        PLANT,
        'CREATE TABLE public.notes (id int)',
        'CREATE VIEW public.v AS SELECT 1 AS one',
        'CREATE OPERATOR public.||| (LEFTARG = bytea, RIGHTARG = bytea, FUNCTION = pg_catalog.byteacat)',
        'CREATE TYPE public.t AS (a int)',
        'CREATE SEQUENCE public.s',
      ]) {
        expect(await code(c.query(sql)), `${role}: ${sql}`).toBe('42501');
      }
    }
    const [[planted]] = (await admin.query(
      "SELECT count(*)::int FROM pg_catalog.pg_proc WHERE proname = 'sha256' AND pronamespace = 'public'::regnamespace",
    )) as [[number]];
    expect(planted).toBe(0);
    const victim = await ctx.engine.admin();
    await victim.run('SET search_path = public, pg_catalog');
    expect(await victim.query("SELECT encode(sha256('hello'::bytea), 'hex')")).toEqual([['2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824']]);
  });

  it("readers and writers create nothing at all; an admin's tables go to workspace, and readers read them", async () => {
    for (const role of ['reader', 'writer'] as const) {
      const c = direct.get(role) as pg.Client;
      for (const sql of ['CREATE TABLE workspace.mine (id int)', 'CREATE TABLE mine (id int)', 'CREATE TEMP TABLE scratch (id int)', 'CREATE SCHEMA mine']) {
        expect(await code(c.query(sql)), `${role}: ${sql}`).toBe('42501');
      }
    }
    const a = direct.get('admin') as pg.Client;
    await a.query('CREATE TABLE made_by_admin (id int)');
    await a.query('INSERT INTO made_by_admin VALUES (1)');
    await a.query('CREATE SEQUENCE admin_seq');
    await a.query('CREATE TEMP TABLE admin_scratch (id int)');
    expect((await a.query("SELECT schemaname FROM pg_catalog.pg_tables WHERE tablename = 'made_by_admin'")).rows).toEqual([{ schemaname: 'workspace' }]);
    const reader = direct.get('reader') as pg.Client;
    expect((await reader.query('SELECT id FROM made_by_admin')).rows).toEqual([{ id: 1 }]);
    // A reader's side effects, refused by PostgreSQL: a sequence it may not advance, a table it may not write.
    expect(await code(reader.query("SELECT nextval('workspace.admin_seq')"))).toBe('42501');
    expect(await code(reader.query('INSERT INTO made_by_admin VALUES (2)'))).toBe('42501');
    expect(await code(reader.query("INSERT INTO _cot_steps (session_id, step_type, content) VALUES ('s', 'Action', 'forged')"))).toBe('42501');
    expect(
      await code((direct.get('writer') as pg.Client).query("INSERT INTO _cot_steps (session_id, step_type, content) VALUES ('s', 'Action', 'forged')")),
    ).toBe('42501');
  });

  it("a reader's side effects through cotwire come back as errors, never as a success", async () => {
    const bi = await ctx.server.client({ user: 'bi', password: 'bi-secret' });
    for (const sql of ["SELECT nextval('workspace.admin_seq')", "SELECT lo_from_bytea(0, 'x')", PLANT, 'CREATE TEMP TABLE scratch (id int)']) {
      const got = await code(bi.query(sql));
      expect(['42501', '25006', '42883'], `${sql}: ${got}`).toContain(got);
    }
    const [[sequence]] = (await admin.query('SELECT last_value::int FROM workspace.admin_seq')) as [[number]];
    expect(sequence).toBe(1);
  });

  it('cot_agent_id() answers what the server gave the backend, which the client cannot set, and RESET ALL keeps', async () => {
    const bi = await ctx.server.client({ user: 'agent', password: 'agent-secret' });
    const agent = async (): Promise<unknown> => (await bi.query('SELECT cot_agent_id() AS a')).rows[0].a;
    expect(await agent()).toBe('agent-7');
    for (const sql of [
      "SET cotwire.agent_id = 'someone'",
      "SET SESSION cotwire.agent_id TO 'someone'",
      'RESET cotwire.agent_id',
      "SELECT set_config('cotwire.agent_id', 'someone', false)",
      "SELECT pg_catalog.set_config('COTWIRE.AGENT_ID'::text, 'someone', true)",
    ]) {
      expect(await code(bi.query(sql)), sql).toBe('42501');
    }
    await bi.query('RESET ALL');
    await bi.query('DISCARD ALL');
    expect(await agent()).toBe('agent-7');
  });

  it('row-level security keeps a backend started for an organisation to its rows, with cotwire bypassed, through a view too', async () => {
    const ops = await ctx.server.client({ user: 'ops', password: 'ops-secret' });
    await ops.query(
      "INSERT INTO _cot_steps (org_id, session_id, step_type, content) VALUES ('a', 'rls-a', 'Observation', 'mine'), ('b', 'rls-b', 'Observation', 'theirs')",
    );
    await direct.get('admin')?.query('CREATE VIEW workspace.rls_every_step AS SELECT org_id, content FROM public._cot_steps');
    const orgs = async (c: pg.Client, sql: string): Promise<string[]> => (await c.query(sql)).rows.map((r) => String(r.org_id)).sort();
    // A backend without an organisation (an admin's, a reader's without org_id, the server's) reads every row.
    const whole = direct.get('reader') as pg.Client;
    expect(await orgs(whole, "SELECT org_id FROM public._cot_steps WHERE session_id LIKE 'rls-%'")).toEqual(['a', 'b']);
    // A backend started for organisation "a", as cotwire starts a scoped user's, with the server's own filter out of the way.
    const scoped = new pg.Client({ connectionString: ctx.engine.readerUrl, options: '-c cotwire.org_id=a' });
    await scoped.connect();
    try {
      expect(await orgs(scoped, "SELECT org_id FROM public._cot_steps WHERE session_id LIKE 'rls-%'")).toEqual(['a']);
      expect(await orgs(scoped, "SELECT org_id FROM workspace.rls_every_step WHERE content IN ('mine', 'theirs')")).toEqual(['a']);
      expect(await orgs(scoped, "SELECT org_id FROM cot_replay('rls-b')")).toEqual([]);
      // RESET ALL returns to what the backend started with.
      await scoped.query('RESET ALL');
      expect(await orgs(scoped, "SELECT org_id FROM public._cot_steps WHERE session_id LIKE 'rls-%'")).toEqual(['a']);
    } finally {
      await scoped.end();
    }
  });
});
