import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import type { Config } from '../../src/config/schema.js';
import { createLogger } from '../../src/log/logger.js';
import { startServer, type RunningServer } from '../../src/engines/duckdb/start.js';
import { makeScramVerifier } from '../../src/session/scram.js';

/**
 * The MCP server as an agent's host runs it: `cotwire mcp --url ...` as a
 * child process, driven over stdio by the MCP SDK's own client, against a
 * real cotwire on port 0.
 */

const CLI = join(import.meta.dirname, '../../dist/cli.js');
const verifier = makeScramVerifier('pw');
const USERS = [
  { name: 'planner', password: verifier, role: 'writer', agentId: 'planner-agent', orgId: 'acme' },
  { name: 'bot', password: verifier, role: 'writer', agentId: null, orgId: null },
  { name: 'boss', password: verifier, role: 'admin', agentId: null, orgId: null },
];
const MAX_CONTENT = 2000;

const dir = mkdtempSync(join(tmpdir(), 'cotwire-mcp-'));
const db = join(dir, 'mcp.duckdb');
let server: RunningServer | null = null;
let sql: pg.Client;
let agent: Client;
const opened: Client[] = [];

async function start(port = 0): Promise<RunningServer> {
  const base = loadConfig({ argv: { port: String(port), 'http-port': '0', db, 'log-level': 'silent' }, env: {} });
  const config = { ...base, users: USERS, ledger: { ...base.ledger, maxContentBytes: MAX_CONTENT } } as Config;
  return startServer(config, createLogger('silent', false));
}

async function mcpClient(user: string, port: number): Promise<Client> {
  const client = new Client({ name: 'cotwire-test', version: '1.0.0' });
  await client.connect(
    new StdioClientTransport({
      command: process.execPath,
      args: [CLI, 'mcp', '--url', `postgres://${user}:pw@127.0.0.1:${port}/cotwire`],
      stderr: 'pipe',
    }),
  );
  opened.push(client);
  return client;
}

interface ToolResult {
  readonly isError: boolean;
  readonly text: string;
  readonly data: Record<string, unknown>;
}

async function call(client: Client, name: string, args: Record<string, unknown>): Promise<ToolResult> {
  const r = (await client.callTool({ name, arguments: args })) as {
    isError?: boolean;
    content: Array<{ type: string; text: string }>;
    structuredContent?: Record<string, unknown>;
  };
  return { isError: r.isError === true, text: r.content.map((c) => c.text).join('\n'), data: r.structuredContent ?? {} };
}

async function ok(client: Client, name: string, args: Record<string, unknown>): Promise<Record<string, unknown>> {
  const r = await call(client, name, args);
  if (r.isError) throw new Error(`${name} failed: ${r.text}`);
  return r.data;
}

/** What SQL says about the same steps, as JSON, for comparison with the tools' answers. */
/** Rows as the MCP tools give them: JSON, with bigint columns as numbers (node-postgres reads them as strings). */
async function sqlRows(text: string, values: unknown[] = []): Promise<Record<string, unknown>[]> {
  const result = await sql.query(text, values);
  const bigints = new Set(result.fields.filter((f) => f.dataTypeID === 20).map((f) => f.name));
  const rows = result.rows as Record<string, unknown>[];
  return JSON.parse(JSON.stringify(rows, (k, v: unknown) => (bigints.has(k) && typeof v === 'string' ? Number(v) : v))) as Record<string, unknown>[];
}

beforeAll(async () => {
  server = await start();
  sql = new pg.Client({ host: '127.0.0.1', port: server.address.port, user: 'boss', password: 'pw', database: 'cotwire' });
  // The server is stopped under it in the last tests.
  sql.on('error', () => undefined);
  await sql.connect();
  agent = await mcpClient('planner', server.address.port);
});

afterAll(async () => {
  for (const c of opened) await c.close().catch(() => undefined);
  await sql.end().catch(() => undefined);
  await server?.close();
  rmSync(dir, { recursive: true, force: true });
});

const traces: Record<string, string> = {};

describe('cotwire mcp: the tools, checked against SQL', () => {
  it('lists every tool with a JSON-schema input', async () => {
    const { tools } = await agent.listTools();
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

  it('log_reasoning_step appends through the writer and returns the chained row', async () => {
    const steps: Array<[string, Record<string, unknown>]> = [
      ['observe', { step_type: 'Observation', content: 'The build is red on main.', confidence: 0.9, model: 'm-1', token_count: 12, duration_ms: 40 }],
      ['hypo-a', { step_type: 'Hypothesis', content: 'A flaky test.', confidence: 0.4, model: 'm-1', parent: 'observe' }],
      ['hypo-b', { step_type: 'Hypothesis', content: 'A dependency bump.', confidence: 0.7, model: 'm-1', parent: 'observe' }],
      ['tool', { step_type: 'ToolCall', content: 'git log -1 package.json', input_data: { cmd: ['git', 'log', '-1'] }, parent: 'hypo-b' }],
      ['decide', { step_type: 'Decision', content: 'Pin the dependency.', confidence: 0.85, metadata: { ticket: 42 }, parent: 'tool' }],
      ['answer', { step_type: 'FinalAnswer', content: 'Pinned; the build is green.', confidence: 0.95, output_data: { ok: true } }],
    ];
    for (const [name, { parent, ...args }] of steps) {
      const r = await ok(agent, 'log_reasoning_step', {
        session_id: 'triage-1',
        ...args,
        ...(parent === undefined ? {} : { parent_trace_id: traces[parent as string] }),
      });
      traces[name] = r['trace_id'] as string;
      const [row] = await sqlRows('SELECT trace_id, step_index, current_hash, ledger_seq, agent_id FROM _cot_steps WHERE trace_id = $1', [r['trace_id']]);
      expect(r).toEqual(row);
    }
    const rows = await sqlRows(
      "SELECT step_index, step_type, agent_id, org_id, input_data, metadata, parent_trace_id FROM _cot_steps WHERE session_id = 'triage-1' ORDER BY step_index",
    );
    expect(rows.map((r) => r['step_index'])).toEqual([0, 1, 2, 3, 4, 5]);
    expect(new Set(rows.map((r) => r['agent_id']))).toEqual(new Set(['planner-agent']));
    expect(new Set(rows.map((r) => r['org_id']))).toEqual(new Set(['acme']));
    expect(rows[3]?.['input_data']).toEqual({ cmd: ['git', 'log', '-1'] });
    expect(rows[4]?.['metadata']).toEqual({ ticket: 42 });
    expect(rows[4]?.['parent_trace_id']).toBe(traces['tool']);
  });

  it('replay_decision returns the ordered steps, the agent and a verified chain', async () => {
    const r = await ok(agent, 'replay_decision', { session_id: 'triage-1' });
    expect(r).toMatchObject({ session_id: 'triage-1', agent_id: 'planner-agent', step_count: 6, chain_valid: true, first_broken_step: null });
    expect(r['steps']).toEqual(await sqlRows("SELECT * FROM cot_replay('triage-1')"));
    expect((await ok(agent, 'replay_decision', { session_id: 'triage-1', verify_chain: false }))['chain_valid']).toBeNull();
  });

  it('get_session_history lists the agent’s sessions as SQL does', async () => {
    await ok(agent, 'log_reasoning_step', { session_id: 'triage-2', step_type: 'Observation', content: 'Second.' });
    const r = await ok(agent, 'get_session_history', { limit: 10 });
    expect(r['agent_id']).toBe('planner-agent');
    const expected = await sqlRows(
      "SELECT session_id, step_count, first_step_at, last_step_at, chain_valid FROM cot_sessions('planner-agent') ORDER BY last_step_at DESC",
    );
    // Counts are JSON numbers, where node-postgres reads bigint as a string.
    expect(r['sessions']).toEqual(expected);
    expect((r['sessions'] as Array<Record<string, unknown>>).every((s) => typeof s['step_count'] === 'number')).toBe(true);
    expect(expected.map((s) => s['session_id'])).toEqual(['triage-2', 'triage-1']);
    expect(((await ok(agent, 'get_session_history', { agent_id: 'planner-agent', limit: 1 }))['sessions'] as unknown[]).length).toBe(1);
    expect((await ok(agent, 'get_session_history', { agent_id: 'nobody' }))['sessions']).toEqual([]);
  });

  it('get_trace and verify_chain answer as cot_trace and cot_verify', async () => {
    expect(await ok(agent, 'get_trace', { trace_id: traces['decide'] })).toEqual((await sqlRows('SELECT * FROM cot_trace($1)', [traces['decide']]))[0]);
    expect(await ok(agent, 'verify_chain', { session_id: 'triage-1' })).toEqual({ session_id: 'triage-1', valid: true, step_count: 6, first_break: null });
  });

  it('reasoning_trail walks parent links from the root down to the step', async () => {
    const r = await ok(agent, 'reasoning_trail', { trace_id: traces['decide'] });
    expect(r).toMatchObject({ depth: 4, complete: true, missing_parent: null });
    expect((r['trail'] as Array<Record<string, unknown>>).map((s) => s['trace_id'])).toEqual([
      traces['observe'],
      traces['hypo-b'],
      traces['tool'],
      traces['decide'],
    ]);
    const root = await ok(agent, 'reasoning_trail', { trace_id: traces['answer'] });
    expect(root).toMatchObject({ depth: 1, complete: true });
  });

  it('thought_tree nests steps by parent_trace_id and keeps unlinked steps as roots in step order', async () => {
    interface Node {
      trace_id: string;
      step_type: string;
      children: Node[];
    }
    const r = await ok(agent, 'thought_tree', { session_id: 'triage-1' });
    const shape = (n: Node): unknown => ({ [n.step_type]: n.children.map(shape) });
    expect(r['step_count']).toBe(6);
    expect((r['roots'] as Node[]).map(shape)).toEqual([
      { Observation: [{ Hypothesis: [] }, { Hypothesis: [{ ToolCall: [{ Decision: [] }] }] }] },
      { FinalAnswer: [] },
    ]);
  });

  it('query runs read-only SQL and returns rows', async () => {
    const r = await ok(agent, 'query', { sql: "SELECT step_type, count(*)::INTEGER AS n FROM _cot_steps WHERE session_id = 'triage-1' GROUP BY 1 ORDER BY 1" });
    expect(r['columns']).toEqual(['step_type', 'n']);
    expect(r['rows']).toEqual([
      ['Decision', 1],
      ['FinalAnswer', 1],
      ['Hypothesis', 2],
      ['Observation', 1],
      ['ToolCall', 1],
    ]);
    const capped = await ok(agent, 'query', { sql: 'SELECT * FROM range(50)', max_rows: 5 });
    expect(capped).toMatchObject({ truncated: true });
    expect((capped['rows'] as unknown[]).length).toBe(5);
  });
});

describe('cotwire mcp: what it refuses', () => {
  it('query cannot write, not even to the ledger, and the refusal carries the SQLSTATE', async () => {
    const before = await sqlRows('SELECT count(*)::INTEGER AS n FROM _cot_steps');
    const attempts = [
      "INSERT INTO _cot_steps (session_id, step_type, content) VALUES ('triage-1', 'Decision', 'forged')",
      "INSERT INTO _cot_steps (session_id, agent_id, step_type, content) VALUES ('x', 'someone-else', 'Decision', 'forged')",
    ];
    for (const attempt of attempts) {
      const r = await call(agent, 'query', { sql: attempt });
      expect(r.isError, attempt).toBe(true);
      expect(r.text).toMatch(/^ERROR 25006: cannot execute .* in a read-only transaction/);
      expect((r.data['error'] as Record<string, string>)['sqlstate']).toBe('25006');
    }
    // The guard's and the role's refusals still come first where they apply.
    expect((await call(agent, 'query', { sql: "UPDATE _cot_steps SET content = 'x'" })).text).toMatch(/^ERROR 42501: cannot UPDATE ledger table "_cot_steps"/);
    expect((await call(agent, 'query', { sql: 'CREATE TABLE scratch (x INTEGER)' })).text).toMatch(/^ERROR 42501: permission denied: role "writer"/);
    // One statement per call: a second one cannot ride along, and a SET cannot carry over to the next call.
    const multi = await call(agent, 'query', { sql: "SELECT 1; INSERT INTO _cot_steps (session_id, step_type) VALUES ('x', 'Action')" });
    expect(multi.isError).toBe(true);
    expect(multi.text).toMatch(/^ERROR 42601:/);
    await call(agent, 'query', { sql: 'SET transaction_read_only = off' });
    await call(agent, 'query', { sql: 'SET default_transaction_read_only = off' });
    expect((await call(agent, 'query', { sql: "INSERT INTO _cot_steps (session_id, step_type) VALUES ('x', 'Action')" })).text).toMatch(/^ERROR 25006:/);
    // COPY would stream CopyData that the cursor cannot take: refused up front, and the server stays up.
    expect((await call(agent, 'query', { sql: '/* export */ COPY _cot_steps TO STDOUT' })).text).toMatch(/^ERROR 0A000: the query tool does not run COPY/);
    expect(await sqlRows('SELECT count(*)::INTEGER AS n FROM _cot_steps')).toEqual(before);
  });

  it('search_reasoning ranks steps by similarity, with the filters of cot_search()', async () => {
    // The steps logged above are embedded in the background; the Decision and the FinalAnswer always.
    // Waited for, not assumed: on a busy machine the background embedder may take a while.
    // Both by name: a sampled step of another type may be embedded before either.
    for (let waited = Date.now(); ; ) {
      const [n] = await sqlRows('SELECT count(*)::int AS n FROM _cot_embeddings WHERE trace_id IN ($1, $2)', [traces['decide'], traces['answer']]);
      if ((n?.['n'] as number) === 2) break;
      if (Date.now() - waited > 60_000) throw new Error('the decision and the final answer were not embedded within a minute');
      await new Promise((r) => setTimeout(r, 50));
    }
    const r = await ok(agent, 'search_reasoning', { query: 'pin the dependency', k: 3 });
    const steps = r['steps'] as Array<Record<string, unknown>>;
    expect(steps[0]).toMatchObject({ trace_id: traces['decide'], step_type: 'Decision', content: 'Pin the dependency.' });
    expect(steps.map((s) => s['trace_id'])).toEqual((await sqlRows("SELECT trace_id FROM cot_search('pin the dependency', 3)")).map((s) => s['trace_id']));
    const finals = await ok(agent, 'search_reasoning', { query: 'pin the dependency', step_types: ['FinalAnswer'], session_id: 'triage-1' });
    expect((finals['steps'] as Array<Record<string, unknown>>).map((s) => s['trace_id'])).toEqual([traces['answer']]);
    const none = await ok(agent, 'search_reasoning', { query: 'pin the dependency', agent_id: 'nobody' });
    expect(none).toMatchObject({ count: 0, steps: [] });
    const later = await ok(agent, 'search_reasoning', { query: 'pin the dependency', since: '2999-01-01T00:00:00Z' });
    expect(later['count']).toBe(0);
    const near = (await ok(agent, 'search_reasoning', { query: 'pin the dependency version', k: 1 }))['steps'] as Array<Record<string, unknown>>;
    const sim = Number(near[0]?.['similarity']);
    expect(near[0]?.['trace_id']).toBe(traces['decide']);
    expect(sim).toBeGreaterThan(0.3);
    expect(sim).toBeLessThan(0.99);
    expect((await ok(agent, 'search_reasoning', { query: 'pin the dependency version', min_similarity: sim + 0.001 }))['count']).toBe(0);
    expect((await ok(agent, 'search_reasoning', { query: 'pin the dependency version', min_similarity: sim - 0.001 }))['count']).toBeGreaterThanOrEqual(1);
    const bad = await call(agent, 'search_reasoning', { query: 'x', step_types: ['Decisoin'] });
    expect(bad.isError).toBe(true);
  });

  it('keeps a SET run through query away from the connections that log steps', async () => {
    for (let i = 0; i < 3; i++) await ok(agent, 'query', { sql: 'SET default_transaction_read_only = on' });
    const r = await ok(agent, 'log_reasoning_step', { session_id: 'after-set', step_type: 'Observation', content: 'still appending' });
    expect(r['step_index']).toBe(0);
  });

  it('never lets a caller choose agent_id', async () => {
    const r = await ok(agent, 'log_reasoning_step', { session_id: 'forge', step_type: 'Action', content: 'as someone else?', agent_id: 'root-agent' });
    expect(r['agent_id']).toBe('planner-agent');
    expect(await sqlRows("SELECT agent_id FROM _cot_steps WHERE session_id = 'forge'")).toEqual([{ agent_id: 'planner-agent' }]);
    // A user without a configured identity logs as its own user name.
    const bot = await mcpClient('bot', (server as RunningServer).address.port);
    const b = await ok(bot, 'log_reasoning_step', { session_id: 'bot-1', step_type: 'Observation', content: 'hello', agent_id: 'planner-agent' });
    expect(b['agent_id']).toBe('bot');
  });

  it('rejects bad input before sending it, and reports what cotwire refuses', async () => {
    const bad = async (args: Record<string, unknown>): Promise<string> => {
      const r = await call(agent, 'log_reasoning_step', { session_id: 'bad', step_type: 'Observation', content: 'x', ...args });
      expect(r.isError).toBe(true);
      return r.text;
    };
    expect(await bad({ step_type: 'Musing' })).toMatch(/step_type must be one of Observation, Hypothesis, .*FinalAnswer/);
    expect(await bad({ confidence: 1.5 })).toMatch(/confidence must be between 0 and 1/);
    expect(await bad({ parent_trace_id: 'not-a-uuid' })).toMatch(/trace_id must be a UUID/);
    expect(await bad({ session_id: '' })).toMatch(/session_id must not be empty/);
    expect(await bad({ content: 'x'.repeat(MAX_CONTENT + 1) })).toBe(
      `ERROR 22001: value too long for column "content": ${MAX_CONTENT + 1} bytes, the limit is ${MAX_CONTENT}\nHINT: The limit is ledger.maxContentBytes in the configuration.`,
    );
    expect(await sqlRows("SELECT count(*)::INTEGER AS n FROM _cot_steps WHERE session_id = 'bad'")).toEqual([{ n: 0 }]);
    const missing = await call(agent, 'replay_decision', { session_id: 'no-such-session' });
    expect(missing).toMatchObject({ isError: true, text: expect.stringMatching(/^ERROR P0002: session "no-such-session" has no steps/) });
  });
});

describe('cotwire mcp: tampering and a lost server', () => {
  it('replay_decision reports a chain broken by an offline edit of the database file', async () => {
    await server?.close();
    server = null;
    const instance = await DuckDBInstance.create(db);
    const conn = await instance.connect();
    await conn.run("UPDATE _cot_steps SET content = 'The build was always green.' WHERE session_id = 'triage-1' AND step_index = 2");
    conn.closeSync();
    instance.closeSync();
    server = await start();
    const auditor = await mcpClient('planner', server.address.port);
    const r = await ok(auditor, 'replay_decision', { session_id: 'triage-1' });
    expect(r).toMatchObject({ chain_valid: false, step_count: 6, first_broken_step: { step_index: 2, kind: 'edited' } });
    expect(await ok(auditor, 'verify_chain', { session_id: 'triage-1' })).toMatchObject({ valid: false, first_break: { step_index: 2, kind: 'edited' } });
    expect((await ok(auditor, 'verify_chain', { session_id: 'triage-2' }))['valid']).toBe(true);
  });

  it('answers a lost connection with a tool error and recovers when cotwire is back', async () => {
    const live = server as RunningServer;
    const port = live.address.port;
    const client = await mcpClient('planner', port);
    await ok(client, 'verify_chain', { session_id: 'triage-2' });
    await sql.end().catch(() => undefined);
    await live.close();
    server = null;
    const r = await call(client, 'verify_chain', { session_id: 'triage-2' });
    expect(r.isError).toBe(true);
    expect(r.text).toMatch(/^ERROR 0800[16]: (could not connect to|the connection to) cotwire at 127\.0\.0\.1:\d+/);
    // The MCP server is still up and serving, and reconnects once cotwire is back on its port.
    expect((await client.listTools()).tools.length).toBe(9);
    server = await start(port);
    expect(await ok(client, 'verify_chain', { session_id: 'triage-2' })).toMatchObject({ valid: true, step_count: 1 });
  });
});
