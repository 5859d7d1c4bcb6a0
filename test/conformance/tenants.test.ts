import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { countOf, ledgerConfig, mcpAs, PASSWORD, sqlstate, until, useConformanceServer, user } from '../fixtures/conformance.js';

/**
 * Tenants: users with an org_id read and extend only their organisation's
 * rows and sessions, on every read path; admins and users without one see
 * everything. Organisation "a" and "b" each write sessions; every answer a
 * scoped user gets is held to its own organisation.
 */
const s = useConformanceServer({
  users: [
    user('wa', 'writer', { agentId: 'agent-a1', orgId: 'a' }),
    user('wa2', 'writer', { agentId: 'agent-a2', orgId: 'a' }),
    user('wb', 'writer', { agentId: 'agent-b1', orgId: 'b' }),
    user('ra', 'reader', { orgId: 'a' }),
    user('rb', 'reader', { orgId: 'b' }),
    user('everyone', 'reader'),
    user('boss', 'admin'),
  ],
});

const traces: Record<string, string> = {};

async function append(who: string, session: string, type: string, content: string): Promise<string> {
  const c = await s.as(who);
  const r = await c.query('INSERT INTO _cot_steps (session_id, step_type, content) VALUES ($1, $2, $3) RETURNING trace_id', [session, type, content]);
  return r.rows[0].trace_id as string;
}

/** The organisations a query's org_id column holds. */
async function orgsOf(c: pg.Client, sql: string, values: unknown[] = []): Promise<string[]> {
  const rows = (await c.query(sql, values)).rows as Array<{ org_id: string | null }>;
  return [...new Set(rows.map((r) => String(r.org_id)))].sort();
}

beforeAll(async () => {
  traces['a1'] = await append('wa', 'sa-1', 'Observation', 'alpha sees the refund request');
  traces['a2'] = await append('wa', 'sa-1', 'Decision', 'alpha decides to refund the order');
  traces['a3'] = await append('wa', 'sa-2', 'Observation', 'alpha second session');
  traces['b1'] = await append('wb', 'sb-1', 'Observation', 'beta secret about the refund');
  traces['b2'] = await append('wb', 'sb-1', 'Decision', 'beta decides to deny the refund');
});

describe('a reader with an org_id', () => {
  it('reads only its organisation in every form of SELECT', async () => {
    const ra = await s.as('ra');
    for (const sql of [
      'SELECT org_id FROM _cot_steps',
      'SELECT org_id FROM public._cot_steps',
      'SELECT org_id FROM "_cot_steps" AS t WHERE t.session_id LIKE $1',
      'TABLE _cot_steps',
      'SELECT x.org_id FROM _cot_steps x JOIN _cot_steps y ON y.session_id = x.session_id',
      'SELECT org_id FROM (SELECT * FROM _cot_steps) sub',
      'WITH w AS (SELECT * FROM _cot_steps) SELECT org_id FROM w',
      'SELECT org_id FROM _cot_steps UNION ALL SELECT org_id FROM _cot_steps',
      'SELECT (SELECT max(org_id) FROM _cot_steps) AS org_id',
      'SELECT org_id FROM _cot_steps WHERE trace_id IN (SELECT trace_id FROM _cot_steps)',
    ]) {
      const values = sql.includes('$1') ? ['s%'] : [];
      expect(await orgsOf(ra, sql, values), sql).toEqual(['a']);
    }
    expect(await countOf(ra, 'SELECT count(*) FROM _cot_steps WHERE session_id = $1', ['sb-1'])).toBe(0);
    expect(await countOf(ra, "SELECT count(*) FROM _cot_steps WHERE org_id = 'b' OR true")).toBe(3);
    expect(await countOf(ra, 'SELECT count(*) FROM _cot_steps WHERE trace_id = $1', [traces['b1']])).toBe(0);
  });

  it('reads only its organisation through a cursor, a named prepared statement and COPY TO', async () => {
    const ra = await s.fresh('ra');
    try {
      await ra.query('BEGIN');
      await ra.query('DECLARE c CURSOR FOR SELECT org_id FROM _cot_steps');
      expect(await orgsOf(ra, 'FETCH ALL FROM c')).toEqual(['a']);
      await ra.query('COMMIT');
      const prepared = { name: 'p', text: 'SELECT org_id FROM _cot_steps WHERE session_id LIKE $1', values: ['s%'] };
      for (let i = 0; i < 2; i++) expect([...new Set((await ra.query(prepared)).rows.map((r) => r.org_id))]).toEqual(['a']);
    } finally {
      await ra.end();
    }
    const copy = async (command: string): Promise<string> =>
      (
        await promisify(execFile)(
          'psql',
          ['-X', '-v', 'ON_ERROR_STOP=1', '-h', '127.0.0.1', '-p', String(s.server.port), '-U', 'ra', 'cotwire', '-c', command],
          {
            env: { ...process.env, PGPASSWORD: PASSWORD },
          },
        )
      ).stdout;
    const whole = await copy('COPY _cot_steps (session_id, content) TO STDOUT');
    expect(whole).toContain('alpha');
    expect(whole).not.toContain('beta');
    const query = await copy('COPY (SELECT session_id FROM _cot_steps ORDER BY 1) TO STDOUT');
    expect(query.trim().split('\n')).toEqual(['sa-1', 'sa-1', 'sa-2']);
  });

  it('gets only its organisation from the cot_* functions: replay, trace, proofs, sessions, verification, analytics', async () => {
    const ra = await s.as('ra');
    expect(await countOf(ra, "SELECT count(*) FROM cot_replay('sa-1')")).toBe(2);
    expect(await countOf(ra, "SELECT count(*) FROM cot_replay('sb-1')")).toBe(0);
    expect(await countOf(ra, 'SELECT count(*) FROM cot_trace($1)', [traces['b1']])).toBe(0);
    expect(await countOf(ra, 'SELECT count(*) FROM cot_trace($1)', [traces['a1']])).toBe(1);
    expect(await countOf(ra, 'SELECT count(*) FROM cot_prove($1)', [traces['b1']])).toBe(0);
    expect((await ra.query("SELECT chain_key FROM cot_verify_all() WHERE chain_key LIKE 's%' ORDER BY 1")).rows).toEqual([
      { chain_key: 'sa-1' },
      { chain_key: 'sa-2' },
    ]);
    expect((await ra.query("SELECT valid FROM cot_verify('sa-1')")).rows).toEqual([{ valid: true }]);
    expect(await countOf(ra, "SELECT count(*) FROM cot_verify('sb-1')")).toBe(0);
    expect(await orgsOf(ra, 'SELECT org_id FROM cot_session_summary()')).toEqual(['a']);
    expect((await ra.query('SELECT agent_id FROM cot_agent_stats() ORDER BY 1')).rows).toEqual([{ agent_id: 'agent-a1' }]);
    expect(await countOf(ra, "SELECT count(*) FROM cot_sessions('agent-b1')")).toBe(0);
  });

  it('finds only its organisation’s steps in a search', async () => {
    const ra = await s.as('ra');
    // The Decisions are embedded (the always-embedded types): wait until both organisations' are.
    const boss = await s.as('boss');
    await until(
      'the decisions are embedded',
      async () => (await countOf(boss, 'SELECT count(*) FROM _cot_embeddings WHERE trace_id IN ($1, $2)', [traces['a2'], traces['b2']])) === 2,
    );
    const found = (await ra.query("SELECT org_id, content FROM cot_search('decides to refund', 10)")).rows;
    expect(found.length).toBeGreaterThan(0);
    expect(new Set(found.map((r) => r.org_id))).toEqual(new Set(['a']));
    expect(await countOf(ra, 'SELECT count(*) FROM _cot_embeddings WHERE trace_id = $1', [traces['b2']])).toBe(0);
  });

  it('is shown EXPLAIN’s plan without the row estimates, which count every organisation’s rows', async () => {
    const plan = async (who: string, sql: string): Promise<string> =>
      (await (await s.as(who)).query(sql)).rows.map((r) => Object.values(r as Record<string, unknown>).join('\n')).join('\n');
    const estimate = /rows=\d|~[\d,]+ rows?|"(Estimated Cardinality|Plan Rows)":\s*"?\d/;
    expect(await plan('boss', 'EXPLAIN SELECT * FROM _cot_steps')).toMatch(estimate);
    for (const sql of ['EXPLAIN SELECT * FROM _cot_steps', 'EXPLAIN SELECT count(*) FROM _cot_steps s JOIN _cot_steps t USING (session_id)']) {
      const text = await plan('ra', sql);
      expect(text, sql).toMatch(/_cot_steps/);
      expect(text, sql).not.toMatch(estimate);
    }
  });

  it('is not told by the catalog how many rows a ledger holds, which are every organisation’s', async () => {
    const counts = async (who: string): Promise<unknown> =>
      (
        await (
          await s.as(who)
        ).query(
          "SELECT c.reltuples::int AS reltuples, c.relpages::int AS pages, t.n_live_tup::int AS live FROM pg_class c JOIN pg_stat_user_tables t ON t.relid = c.oid WHERE c.relname = '_cot_steps'",
        )
      ).rows[0];
    // The admin is told what the engine counts (PostgreSQL's activity counters arrive when the writer's idle backend reports them, within 10 s).
    await until('the ledger to be counted', async () => ((await counts('boss')) as { live: number }).live > 0, 40_000);
    expect(await counts('ra')).toEqual({ reltuples: -1, pages: 0, live: 0 });
    // The ledger is still listed, with its columns, as psql's \d reads them.
    const listed = await (await s.as('ra')).query(
      "SELECT count(*)::int AS n FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid WHERE c.relname = '_cot_steps' AND a.attname = 'org_id'",
    );
    expect(listed.rows[0]).toEqual({ n: 1 });
    // Written as the client likes: qualified, aliased, in a subquery.
    const ra = await s.as('ra');
    const { rows } = await ra.query(
      "SELECT (SELECT max(x.reltuples) FROM pg_catalog.pg_class AS x WHERE x.relname LIKE '\\_cot%' AND x.relkind = 'r') AS most",
    );
    expect(rows[0]).toEqual({ most: -1 });
    // Sizes on disk grow with every organisation's rows.
    const sizes = await ra.query("SELECT pg_total_relation_size('_cot_steps')::int AS total, pg_relation_size('_cot_steps')::int AS main");
    expect(sizes.rows[0]).toEqual({ total: 0, main: 0 });
  });

  it('cannot reach the rows through a view an admin made over a ledger', async () => {
    const boss = await s.as('boss');
    await boss.query('CREATE VIEW every_step AS SELECT org_id, content FROM _cot_steps');
    const ra = await s.as('ra');
    // Refused where the engine expands the view beyond the server's filter; filtered where the engine's own security reaches.
    const answer = await ra.query('SELECT org_id FROM every_step').then(
      (r) => ({ orgs: [...new Set(r.rows.map((x) => x.org_id))] }),
      (e: { code?: string }) => ({ code: e.code }),
    );
    expect([{ code: '42501' }, { orgs: ['a'] }]).toContainEqual(answer);
  });
});

describe('users who see every organisation', () => {
  it('an admin, and a reader without an org_id, read both organisations', async () => {
    for (const who of ['boss', 'everyone']) {
      const c = await s.as(who);
      expect(await orgsOf(c, "SELECT org_id FROM _cot_steps WHERE session_id IN ('sa-1', 'sb-1')"), who).toEqual(['a', 'b']);
      expect(await countOf(c, "SELECT count(*) FROM cot_replay('sb-1')"), who).toBe(2);
    }
  });

  it('the other organisation’s reader sees its own side only', async () => {
    const rb = await s.as('rb');
    expect(await orgsOf(rb, 'SELECT org_id FROM _cot_steps')).toEqual(['b']);
    expect(await countOf(rb, "SELECT count(*) FROM cot_replay('sa-1')")).toBe(0);
  });
});

describe('sessions', () => {
  it('belong to the organisation of their first step: another organisation’s writer cannot extend one (42501), and nothing is written', async () => {
    const wb = await s.as('wb');
    const err = (await wb.query("INSERT INTO _cot_steps (session_id, step_type, content) VALUES ('sa-1', 'Action', 'planted')").catch((e: unknown) => e)) as {
      code?: string;
      message?: string;
    };
    expect(err.code).toBe('42501');
    expect(err.message).toBe('cannot append to session "sa-1" of ledger table "_cot_steps": it belongs to another organisation');
    // One foreign row among the rows of a statement refuses the statement.
    expect(
      await sqlstate(wb.query("INSERT INTO _cot_steps (session_id, step_type, content) VALUES ('sb-9', 'Action', 'mine'), ('sa-2', 'Action', 'planted')")),
    ).toBe('42501');
    const boss = await s.as('boss');
    expect(await countOf(boss, "SELECT count(*) FROM _cot_steps WHERE content = 'planted' OR session_id = 'sb-9'")).toBe(0);
    expect((await boss.query("SELECT valid, step_count FROM cot_verify('sa-1')")).rows).toEqual([{ valid: true, step_count: '2' }]);
  });

  it('are refused in a transaction block at the INSERT, and the block can go on', async () => {
    const wb = await s.fresh('wb');
    try {
      await wb.query('BEGIN');
      expect(await sqlstate(wb.query("INSERT INTO _cot_steps (session_id, step_type) VALUES ('sa-1', 'Action')"))).toBe('42501');
      await wb.query('ROLLBACK');
    } finally {
      await wb.end();
    }
  });

  it('are extended by any writer of their organisation', async () => {
    await append('wa2', 'sa-2', 'Action', 'alpha second agent acts');
    const boss = await s.as('boss');
    expect((await boss.query("SELECT agent_id FROM _cot_steps WHERE session_id = 'sa-2' ORDER BY step_index")).rows).toEqual([
      { agent_id: 'agent-a1' },
      { agent_id: 'agent-a2' },
    ]);
  });

  it('refused to another organisation are recorded in _cot_security_events with the user, its organisation and the statement’s fingerprint', async () => {
    const boss = await s.as('boss');
    await until(
      'the refusal is recorded',
      async () => (await countOf(boss, "SELECT count(*) FROM _cot_security_events WHERE user_name = 'wb' AND reason = 'tenant'")) > 0,
    );
    const [event] = (
      await boss.query(
        "SELECT org_id, operation, target, sqlstate, statement_fingerprint FROM _cot_security_events WHERE user_name = 'wb' AND reason = 'tenant' ORDER BY ledger_seq LIMIT 1",
      )
    ).rows;
    expect(event).toMatchObject({ org_id: 'b', operation: 'INSERT INTO _cot_steps', target: 'session sa-1', sqlstate: '42501' });
    expect(event.statement_fingerprint).toMatch(/^[0-9a-f]{64}$/);
    // Each organisation's users read their own records.
    expect(await orgsOf(await s.as('ra'), 'SELECT org_id FROM _cot_security_events')).not.toContain('b');
  });
});

describe('the MCP tools of a user with an org_id', () => {
  let agent: Awaited<ReturnType<typeof mcpAs>>;
  beforeAll(async () => {
    agent = await mcpAs(s.server.port, 'wa');
  });
  afterAll(async () => {
    await agent?.client.close();
  });

  it('answer for its organisation only', async () => {
    expect((await agent.call('replay_decision', { session_id: 'sb-1' })).isError).toBe(true);
    const own = await agent.call('replay_decision', { session_id: 'sa-1' });
    expect(own.isError).toBe(false);
    const history = await agent.call('get_session_history', { limit: 50 });
    expect(history.text).toContain('sa-1');
    expect(history.text).not.toContain('sb-1');
    expect((await agent.call('get_trace', { trace_id: traces['b1'] })).isError).toBe(true);
    const query = await agent.call('query', { sql: 'SELECT DISTINCT org_id FROM _cot_steps' });
    expect(query.text).not.toMatch(/\bb\b/);
    expect((await agent.call('log_reasoning_step', { session_id: 'sb-1', step_type: 'Action', content: 'planted over MCP' })).isError).toBe(true);
  });
});

describe('ledger.sessionOwner: agent', () => {
  const one = useConformanceServer({
    users: [user('wa', 'writer', { agentId: 'agent-a1', orgId: 'a' }), user('wa2', 'writer', { agentId: 'agent-a2', orgId: 'a' }), user('boss', 'admin')],
    ledger: ledgerConfig({ sessionOwner: 'agent' }),
  });

  it('lets only the agent that opened a session extend it', async () => {
    await (await one.as('wa')).query("INSERT INTO _cot_steps (session_id, step_type) VALUES ('solo', 'Observation')");
    const err = (await (await one.as('wa2')).query("INSERT INTO _cot_steps (session_id, step_type) VALUES ('solo', 'Action')").catch((e: unknown) => e)) as {
      code?: string;
      message?: string;
    };
    expect(err.code).toBe('42501');
    expect(err.message).toBe('cannot append to session "solo" of ledger table "_cot_steps": another agent opened it');
    await (await one.as('wa')).query("INSERT INTO _cot_steps (session_id, step_type) VALUES ('solo', 'Action')");
    expect(await countOf(await one.as('boss'), "SELECT count(*) FROM _cot_steps WHERE session_id = 'solo'")).toBe(2);
  });
});
