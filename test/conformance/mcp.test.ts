import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { countOf, mcpAs, until, useConformanceServer, user } from '../fixtures/conformance.js';

/**
 * `cotwire mcp`, the reasoning-trace tools for agents, as an agent's host
 * runs it: the built CLI over stdio, driven by the MCP SDK's client, a
 * Postgres client of the server under test. Each answer is held against
 * what SQL says of the same steps.
 */
const s = useConformanceServer({
  users: [user('planner', 'writer', { agentId: 'planner-agent', orgId: 'acme' }), user('bot', 'writer'), user('boss', 'admin')],
});

let agent: Awaited<ReturnType<typeof mcpAs>>;
const traces: Record<string, string> = {};

/** Rows as the tools give them: JSON, with bigint columns as numbers (node-postgres reads them as strings). */
async function sqlRows(text: string, values: unknown[] = []): Promise<Record<string, unknown>[]> {
  const result = await (await s.as('boss')).query(text, values);
  const bigints = new Set(result.fields.filter((f) => f.dataTypeID === 20).map((f) => f.name));
  return JSON.parse(JSON.stringify(result.rows, (k, v: unknown) => (bigints.has(k) && typeof v === 'string' ? Number(v) : v))) as Record<string, unknown>[];
}

async function ok(tool: string, args: Record<string, unknown>): Promise<Record<string, unknown>> {
  const r = await agent.call(tool, args);
  if (r.isError) throw new Error(`${tool} failed: ${r.text}`);
  return r.data;
}

beforeAll(async () => {
  // The session the reading tools are held to is written over SQL, so that they are tested even where logging through MCP is not available.
  const planner: pg.Client = await s.as('planner');
  const step = async (name: string, type: string, content: string, parent?: string): Promise<void> => {
    const r = await planner.query("INSERT INTO _cot_steps (session_id, step_type, content, parent_trace_id) VALUES ('triage', $1, $2, $3) RETURNING trace_id", [
      type,
      content,
      parent === undefined ? null : traces[parent],
    ]);
    traces[name] = r.rows[0].trace_id as string;
  };
  await step('observe', 'Observation', 'The build is red on main.');
  await step('hypo-a', 'Hypothesis', 'A flaky test.', 'observe');
  await step('hypo-b', 'Hypothesis', 'A dependency bump.', 'observe');
  await step('tool', 'ToolCall', 'git log -1 package.json', 'hypo-b');
  await step('decide', 'Decision', 'Pin the dependency.', 'tool');
  await step('answer', 'FinalAnswer', 'Pinned; the build is green.');
  agent = await mcpAs(s.server.port, 'planner');
});

afterAll(async () => {
  await agent?.client.close();
});

describe('the tools', () => {
  it('are listed with JSON-schema inputs, and log_reasoning_step takes no agent_id', async () => {
    const { tools } = await agent.client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(
      [
        'get_session_history',
        'get_trace',
        'log_reasoning_step',
        'query',
        'reasoning_trail',
        'replay_decision',
        'search_reasoning',
        'thought_tree',
        'verify_chain',
      ].sort(),
    );
    const log = tools.find((t) => t.name === 'log_reasoning_step');
    expect(log?.inputSchema.required).toEqual(['session_id', 'step_type', 'content']);
    expect(Object.keys(log?.inputSchema.properties ?? {})).not.toContain('agent_id');
  });

  it('replay_decision gives the session’s agent, its verified chain and the steps cot_replay gives', async () => {
    const r = await ok('replay_decision', { session_id: 'triage' });
    expect(r).toMatchObject({ session_id: 'triage', agent_id: 'planner-agent', step_count: 6, chain_valid: true, first_broken_step: null });
    expect(r['steps']).toEqual(await sqlRows("SELECT * FROM cot_replay('triage')"));
    expect((await ok('replay_decision', { session_id: 'triage', verify_chain: false }))['chain_valid']).toBeNull();
  });

  it('get_trace and verify_chain answer as cot_trace and cot_verify', async () => {
    expect(await ok('get_trace', { trace_id: traces['decide'] })).toEqual((await sqlRows('SELECT * FROM cot_trace($1)', [traces['decide']]))[0]);
    expect(await ok('verify_chain', { session_id: 'triage' })).toEqual({ session_id: 'triage', valid: true, step_count: 6, first_break: null });
  });

  it('reasoning_trail walks parent links from the root down to the step', async () => {
    const r = await ok('reasoning_trail', { trace_id: traces['decide'] });
    expect(r).toMatchObject({ depth: 4, complete: true, missing_parent: null });
    expect((r['trail'] as Array<Record<string, unknown>>).map((x) => x['trace_id'])).toEqual([
      traces['observe'],
      traces['hypo-b'],
      traces['tool'],
      traces['decide'],
    ]);
    expect(await ok('reasoning_trail', { trace_id: traces['answer'] })).toMatchObject({ depth: 1, complete: true });
  });

  it('thought_tree nests steps by parent_trace_id, with unlinked steps as roots in step order', async () => {
    interface Node {
      step_type: string;
      children: Node[];
    }
    const r = await ok('thought_tree', { session_id: 'triage' });
    const shape = (n: Node): unknown => ({ [n.step_type]: n.children.map(shape) });
    expect(r['step_count']).toBe(6);
    expect((r['roots'] as Node[]).map(shape)).toEqual([
      { Observation: [{ Hypothesis: [] }, { Hypothesis: [{ ToolCall: [{ Decision: [] }] }] }] },
      { FinalAnswer: [] },
    ]);
  });

  it('query runs one read-only statement and returns its rows, capped at max_rows', async () => {
    const r = await ok('query', { sql: "SELECT step_type, count(*)::integer AS n FROM _cot_steps WHERE session_id = 'triage' GROUP BY 1 ORDER BY 1" });
    expect(r['columns']).toEqual(['step_type', 'n']);
    expect(r['rows']).toEqual([
      ['Decision', 1],
      ['FinalAnswer', 1],
      ['Hypothesis', 2],
      ['Observation', 1],
      ['ToolCall', 1],
    ]);
    const capped = await ok('query', { sql: 'SELECT * FROM generate_series(1, 50)', max_rows: 5 });
    expect(capped).toMatchObject({ truncated: true });
    expect(capped['rows'] as unknown[]).toHaveLength(5);
  });

  it('answer a session or a step that does not exist with P0002', async () => {
    expect(await agent.call('replay_decision', { session_id: 'no-such-session' })).toMatchObject({
      isError: true,
      text: expect.stringMatching(/^ERROR P0002: session "no-such-session" has no steps/),
    });
    expect(await agent.call('get_trace', { trace_id: '01890000-0000-7000-8000-000000000000' })).toMatchObject({
      isError: true,
      text: expect.stringMatching(/^ERROR P0002: /),
    });
  });
});

describe('logging through MCP', () => {
  it('log_reasoning_step appends as the caller’s identity and returns the chained row, as SQL reads it', async () => {
    const r = await ok('log_reasoning_step', { session_id: 'logged', step_type: 'Observation', content: 'via MCP', confidence: 0.5, metadata: { k: 1 } });
    const [row] = await sqlRows('SELECT trace_id, step_index, current_hash, ledger_seq, agent_id FROM _cot_steps WHERE trace_id = $1', [r['trace_id']]);
    expect(r).toEqual(row);
    expect(row).toMatchObject({ step_index: 0, agent_id: 'planner-agent' });
    expect(await sqlRows("SELECT org_id, metadata FROM _cot_steps WHERE session_id = 'logged'")).toEqual([{ org_id: 'acme', metadata: { k: 1 } }]);
  });

  it('never lets a caller choose agent_id: an argument is ignored, and a user without an identity logs as its name', async () => {
    const r = await ok('log_reasoning_step', { session_id: 'forge', step_type: 'Action', content: 'as someone else?', agent_id: 'root-agent' });
    expect(r['agent_id']).toBe('planner-agent');
    const bot = await mcpAs(s.server.port, 'bot');
    try {
      const b = await bot.call('log_reasoning_step', { session_id: 'bot-1', step_type: 'Observation', content: 'hello', agent_id: 'planner-agent' });
      expect(b.data['agent_id']).toBe('bot');
    } finally {
      await bot.client.close();
    }
  });

  it('get_session_history lists the caller’s sessions, most recent first, as cot_sessions does', async () => {
    const r = await ok('get_session_history', { limit: 10 });
    expect(r['agent_id']).toBe('planner-agent');
    const expected = await sqlRows(
      "SELECT session_id, step_count, first_step_at, last_step_at, chain_valid FROM cot_sessions('planner-agent') ORDER BY last_step_at DESC",
    );
    expect(r['sessions']).toEqual(expected);
  });

  it('rejects bad input before sending anything, and writes nothing', async () => {
    const bad = async (args: Record<string, unknown>): Promise<string> => {
      const r = await agent.call('log_reasoning_step', { session_id: 'bad', step_type: 'Observation', content: 'x', ...args });
      expect(r.isError).toBe(true);
      return r.text;
    };
    expect(await bad({ step_type: 'Musing' })).toMatch(/step_type must be one of Observation, Hypothesis, .*FinalAnswer/);
    expect(await bad({ confidence: 1.5 })).toMatch(/confidence must be between 0 and 1/);
    expect(await bad({ parent_trace_id: 'not-a-uuid' })).toMatch(/trace_id must be a UUID/);
    expect(await bad({ session_id: '' })).toMatch(/session_id must not be empty/);
    expect(await countOf(await s.as('boss'), "SELECT count(*) FROM _cot_steps WHERE session_id = 'bad'")).toBe(0);
  });
});

describe('what the query tool refuses', () => {
  it('a change to a ledger, with the guard’s 42501, and a second statement, with 42601', async () => {
    expect((await agent.call('query', { sql: "UPDATE _cot_steps SET content = 'x'" })).text).toMatch(/^ERROR 42501: cannot UPDATE ledger table "_cot_steps"/);
    const multi = await agent.call('query', { sql: "SELECT 1; INSERT INTO _cot_steps (session_id, step_type) VALUES ('x', 'Action')" });
    expect(multi.isError).toBe(true);
    expect(multi.text).toMatch(/^ERROR 42601:/);
    expect(await countOf(await s.as('boss'), "SELECT count(*) FROM _cot_steps WHERE session_id = 'x'")).toBe(0);
  });

  it('an append, with 25006: its statements run read-only, whatever the user’s role', async () => {
    const r = await agent.call('query', { sql: "INSERT INTO _cot_steps (session_id, step_type, content) VALUES ('triage', 'Decision', 'forged')" });
    expect(r.isError).toBe(true);
    expect(r.text).toMatch(/^ERROR 25006: cannot execute INSERT in a read-only transaction/);
    expect(await countOf(await s.as('boss'), "SELECT count(*) FROM _cot_steps WHERE session_id = 'triage'")).toBe(6);
  });
});

describe('search_reasoning', () => {
  it('ranks steps by similarity with the filters of cot_search()', async () => {
    // Decisions and final answers are always embedded, in the background.
    const boss = await s.as('boss');
    await until(
      'the session’s decision and final answer to be embedded',
      async () => (await countOf(boss, "SELECT count(*) FROM _cot_embeddings e JOIN _cot_steps t USING (trace_id) WHERE t.session_id = 'triage'")) >= 2,
    );
    const r = await ok('search_reasoning', { query: 'pin the dependency', k: 3 });
    const steps = r['steps'] as Array<Record<string, unknown>>;
    expect(steps[0]).toMatchObject({ trace_id: traces['decide'], step_type: 'Decision' });
    expect(steps.map((x) => x['trace_id'])).toEqual((await sqlRows("SELECT trace_id FROM cot_search('pin the dependency', 3)")).map((x) => x['trace_id']));
    const finals = await ok('search_reasoning', { query: 'pin the dependency', step_types: ['FinalAnswer'], session_id: 'triage' });
    expect((finals['steps'] as Array<Record<string, unknown>>).map((x) => x['trace_id'])).toEqual([traces['answer']]);
  });
});
