import { createHash } from 'node:crypto';
import postgres from 'postgres';
import { describe, expect, it } from 'vitest';
import { chainOf, chainProblems, countOf, sqlstate, useConformanceServer } from '../fixtures/conformance.js';
import { psql } from '../fixtures/server.js';

/**
 * Appending reasoning steps: what the server computes, the chain it builds,
 * the rules a step must keep, and `_cot*` tables a client creates.
 */
const s = useConformanceServer();

const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const STEP_TYPES = 'Observation, Hypothesis, ToolCall, ToolResult, Reasoning, Decision, Action, Error, Correction, Summary, PlanStep, FinalAnswer';

describe('appending to _cot_steps', () => {
  it('numbers a session’s steps 0..n-1, links each to the one before, and returns what it computed', async () => {
    const c = await s.as();
    const first = await c.query(
      "INSERT INTO _cot_steps (session_id, agent_id, step_type, content, confidence, metadata) VALUES ('chain', 'agent-1', 'Observation', 'the sky is blue', 0.9, '{\"turn\": 1}') RETURNING trace_id, step_index, prev_hash, current_hash, ledger_seq",
    );
    expect(first.command).toBe('INSERT');
    expect(first.rowCount).toBe(1);
    const head = first.rows[0];
    expect(head.trace_id).toMatch(UUID_V7);
    expect(head).toMatchObject({ step_index: 0, prev_hash: '' });
    expect(head.current_hash).toMatch(/^[0-9a-f]{64}$/);
    // Rows of another session in the same statement take their own chain, and do not disturb this one.
    const more = await c.query(
      "INSERT INTO _cot_steps (session_id, step_type, content) VALUES ('chain', 'Reasoning', 'so it is day'), ('elsewhere', 'Observation', 'x'), ('chain', 'Decision', 'go out') RETURNING session_id, step_index, prev_hash, current_hash, ledger_seq",
    );
    expect(more.rows.map((r) => [r.session_id, r.step_index])).toEqual([
      ['chain', 1],
      ['elsewhere', 0],
      ['chain', 2],
    ]);
    expect(more.rows[0].prev_hash).toBe(head.current_hash);
    expect(more.rows[2].prev_hash).toBe(more.rows[0].current_hash);
    expect(more.rows[1].prev_hash).toBe('');
    const seqs = more.rows.map((r) => BigInt(r.ledger_seq));
    expect(seqs).toEqual([...seqs].sort((a, b) => (a < b ? -1 : 1)));
    expect(seqs[0]).toBeGreaterThan(BigInt(head.ledger_seq));
    // What was returned is what is stored.
    const links = await chainOf(c, 'chain');
    expect(chainProblems(links)).toEqual([]);
    expect(links.map((l) => l.current_hash)).toEqual([head.current_hash, more.rows[0].current_hash, more.rows[2].current_hash]);
  });

  it('appends the same way from the extended protocol, postgres.js and psql, one chain across them', async () => {
    const c = await s.as();
    const r = await c.query(
      'INSERT INTO _cot_steps (session_id, step_type, content, confidence, duration_ms, token_count, model, input_data) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING step_index, confidence, duration_ms, input_data',
      ['clients', 'ToolCall', 'search', 0.25, 1500, 42, 'gpt', JSON.stringify({ q: 'x' })],
    );
    expect(r.rows).toEqual([{ step_index: 0, confidence: 0.25, duration_ms: '1500', input_data: { q: 'x' } }]);
    const sql = postgres({ host: '127.0.0.1', port: s.server.port, user: 'cotwire', database: 'cotwire', max: 1, onnotice: () => undefined });
    try {
      const rows =
        await sql`INSERT INTO _cot_steps (session_id, step_type, content) VALUES (${'clients'}, ${'ToolResult'}, ${'via postgres.js'}) RETURNING step_index`;
      expect(rows[0]?.['step_index']).toBe(1);
    } finally {
      await sql.end();
    }
    const { stdout } = await psql(s.server.port, "INSERT INTO _cot_steps (session_id, step_type) VALUES ('clients', 'FinalAnswer')");
    expect(stdout.trim()).toBe('INSERT 0 1');
    const links = await chainOf(c, 'clients');
    expect(links.map((l) => l.step_index)).toEqual([0, 1, 2]);
    expect(chainProblems(links)).toEqual([]);
  });

  it('takes DEFAULT, or NULL, for a column the server computes as “compute it”', async () => {
    const c = await s.as();
    const columns = ['trace_id', 'step_index', 'prev_hash', 'current_hash', 'created_at', 'ledger_seq', 'has_embedding'];
    for (const column of columns) {
      await c.query(`INSERT INTO _cot_steps (session_id, step_type, ${column}) VALUES ('defaults', 'Action', DEFAULT)`);
      await c.query(`INSERT INTO _cot_steps (session_id, step_type, ${column}) VALUES ('defaults', 'Action', $1)`, [null]);
    }
    const links = await chainOf(c, 'defaults');
    expect(links).toHaveLength(2 * columns.length);
    expect(chainProblems(links)).toEqual([]);
    const filled = await c.query(
      "SELECT count(*) AS n FROM _cot_steps WHERE session_id = 'defaults' AND trace_id IS NOT NULL AND created_at IS NOT NULL AND has_embedding IS NOT NULL",
    );
    expect(Number(filled.rows[0].n)).toBe(2 * columns.length);
  });

  it.each([
    ['trace_id', "'01890000-0000-7000-8000-000000000000'"],
    ['step_index', '7'],
    ['prev_hash', "''"],
    ['current_hash', "'f0rged'"],
    ['created_at', "'2020-01-01T00:00:00Z'"],
    ['ledger_seq', '1'],
    ['has_embedding', 'true'],
  ])('refuses a client value for the server column %s with 428C9, and writes nothing', async (column, value) => {
    const c = await s.as();
    const err = (await c.query(`INSERT INTO _cot_steps (session_id, step_type, ${column}) VALUES ('forged', 'Action', ${value})`).catch((e: unknown) => e)) as {
      code?: string;
      message?: string;
    };
    expect(err.code).toBe('428C9');
    expect(err.message).toContain(column);
    expect(await countOf(c, "SELECT count(*) FROM _cot_steps WHERE session_id = 'forged'")).toBe(0);
  });

  it.each([
    ["INSERT INTO _cot_steps (session_id, step_type) VALUES ('bad', 'Musing')", '23514'],
    ["INSERT INTO _cot_steps (session_id, step_type, confidence) VALUES ('bad', 'Action', 1.01)", '23514'],
    ["INSERT INTO _cot_steps (session_id, step_type, confidence) VALUES ('bad', 'Action', -0.1)", '23514'],
    ["INSERT INTO _cot_steps (session_id, step_type) VALUES ('', 'Action')", '23514'],
    ["INSERT INTO _cot_steps (session_id, step_type) VALUES (NULL, 'Action')", '23502'],
    ["INSERT INTO _cot_steps (session_id, step_type, metadata) VALUES ('bad', 'Action', '{not json')", '22P02'],
    ["INSERT INTO _cot_steps (session_id, step_type, parent_trace_id) VALUES ('bad', 'Action', '01890000-0000-7000-8000-000000000000')", '23503'],
    // One bad row fails its whole statement: the good row before it is not written either.
    ["INSERT INTO _cot_steps (session_id, step_type) VALUES ('bad', 'Action'), ('bad', 'Musing')", '23514'],
  ])('refuses %s with %s, and writes nothing', async (statement, code) => {
    const c = await s.as();
    expect(await sqlstate(c.query(statement))).toBe(code);
    expect(await countOf(c, "SELECT count(*) FROM _cot_steps WHERE session_id IN ('bad', '')")).toBe(0);
  });

  it('names the twelve step types when one is wrong', async () => {
    const c = await s.as();
    const err = (await c.query("INSERT INTO _cot_steps (session_id, step_type) VALUES ('bad', 'Musing')").catch((e: unknown) => e)) as { message: string };
    expect(err.message).toContain(STEP_TYPES);
  });

  it('limits content to ledger.maxContentBytes (65536 bytes by default) with 22001', async () => {
    const c = await s.as();
    const insert = 'INSERT INTO _cot_steps (session_id, step_type, content) VALUES ($1, $2, $3)';
    expect(await sqlstate(c.query(insert, ['big', 'Action', 'x'.repeat(65537)]))).toBe('22001');
    // The limit is in bytes, not characters: 'é' is two.
    expect(await sqlstate(c.query(insert, ['big', 'Action', 'é'.repeat(32769)]))).toBe('22001');
    expect((await c.query(insert, ['big', 'Action', 'x'.repeat(65536)])).rowCount).toBe(1);
    expect(await countOf(c, "SELECT count(*) FROM _cot_steps WHERE session_id = 'big'")).toBe(1);
  });

  it('accepts a parent_trace_id that names an existing step', async () => {
    const c = await s.as();
    const parent = (await c.query("INSERT INTO _cot_steps (session_id, step_type) VALUES ('tree', 'Observation') RETURNING trace_id")).rows[0]
      .trace_id as string;
    const r = await c.query("INSERT INTO _cot_steps (session_id, step_type, parent_trace_id) VALUES ('tree', 'Hypothesis', $1) RETURNING parent_trace_id", [
      parent,
    ]);
    expect(r.rows).toEqual([{ parent_trace_id: parent }]);
  });

  it('decides has_embedding by the documented rule: always for the critical types, else by the sample point of trace_id under 0.1', async () => {
    const c = await s.as();
    const types = ['Observation', 'Reasoning', 'Hypothesis', 'Decision', 'Action', 'Error', 'Correction', 'FinalAnswer'];
    for (let i = 0; i < 40; i++) {
      await c.query("INSERT INTO _cot_steps (session_id, step_type) VALUES ('sampled', $1)", [types[i % types.length]]);
    }
    const rows = (await c.query("SELECT trace_id, step_type, has_embedding FROM _cot_steps WHERE session_id = 'sampled'")).rows as Array<{
      trace_id: string;
      step_type: string;
      has_embedding: boolean;
    }>;
    expect(rows).toHaveLength(40);
    const always = new Set(['Decision', 'Action', 'Error', 'Correction', 'FinalAnswer']);
    for (const r of rows) {
      const point =
        Number.parseInt(createHash('sha256').update(`cotwire/embedding-sample/v1:${r.trace_id.toLowerCase()}`).digest('hex').slice(0, 12), 16) / 2 ** 48;
      expect(r.has_embedding, `${r.step_type} ${r.trace_id}`).toBe(always.has(r.step_type) || point < 0.1);
    }
  });

  it('refuses an unknown column (42703) and a VALUES row wider than its column list (42601), and writes nothing', async () => {
    const c = await s.as();
    expect(await sqlstate(c.query("INSERT INTO _cot_steps (session_id, step_type, nope) VALUES ('loose', 'Action', 1)"))).toBe('42703');
    expect(await sqlstate(c.query("INSERT INTO _cot_steps (session_id, step_type) VALUES ('loose', 'Action', 'extra')"))).toBe('42601');
    expect(await countOf(c, "SELECT count(*) FROM _cot_steps WHERE session_id = 'loose'")).toBe(0);
  });

  it('refuses an unknown column in the rows of an INSERT ... SELECT with 42703, and writes nothing', async () => {
    const c = await s.as();
    expect(await sqlstate(c.query("INSERT INTO _cot_steps (session_id, step_type, content) SELECT 'loose-select', 'Action', nope"))).toBe('42703');
    expect(await countOf(c, "SELECT count(*) FROM _cot_steps WHERE session_id = 'loose-select'")).toBe(0);
  });

  it('appends with INSERT ... SELECT from the ledger itself, continuing the target session’s chain', async () => {
    const c = await s.as();
    const r = await c.query(
      "INSERT INTO _cot_steps (session_id, step_type, content) SELECT 'copied', step_type, content FROM _cot_steps WHERE session_id = 'chain' ORDER BY step_index",
    );
    expect(r.rowCount).toBe(3);
    expect((await c.query("SELECT step_index, content FROM _cot_steps WHERE session_id = 'copied' ORDER BY step_index")).rows).toEqual([
      { step_index: 0, content: 'the sky is blue' },
      { step_index: 1, content: 'so it is day' },
      { step_index: 2, content: 'go out' },
    ]);
    expect(chainProblems(await chainOf(c, 'copied'))).toEqual([]);
  });
});

describe('a _cot table a client creates is a ledger', () => {
  it('gets the chain columns after its own, chains by session_id, and verifies with its own function', async () => {
    const c = await s.as();
    const other = await s.fresh();
    await c.query('CREATE TABLE _cot_tool_calls (session_id VARCHAR, tool VARCHAR, args JSON)');
    const columns = await c.query("SELECT column_name FROM information_schema.columns WHERE table_name = '_cot_tool_calls' ORDER BY ordinal_position");
    expect(columns.rows.map((r) => r.column_name)).toEqual([
      'session_id',
      'tool',
      'args',
      'step_index',
      'prev_hash',
      'current_hash',
      'created_at',
      'ledger_seq',
      // New ledgers are cotwire/v3: each row's salt, from which its columns' commitment keys derive.
      'row_salt',
    ]);
    await c.query("INSERT INTO _cot_tool_calls VALUES ('t1', 'search', '{\"q\": 1}'), ('t2', 'fetch', NULL), ('t1', 'read', '[]')");
    expect((await c.query('SELECT session_id, step_index FROM _cot_tool_calls ORDER BY ledger_seq')).rows).toEqual([
      { session_id: 't1', step_index: 0 },
      { session_id: 't2', step_index: 0 },
      { session_id: 't1', step_index: 1 },
    ]);
    expect(chainProblems(await chainOf(c, 't1', '_cot_tool_calls'))).toEqual([]);
    // A connection opened before the CREATE finds its verification function too.
    expect((await other.query("SELECT valid, step_count FROM cot_verify_tool_calls('t1')")).rows).toEqual([{ valid: true, step_count: '2' }]);
    expect(await sqlstate(c.query("INSERT INTO _cot_tool_calls (session_id, tool, step_index) VALUES ('t1', 'x', 9)"))).toBe('428C9');
  });

  it('makes a table without session_id one chain', async () => {
    const c = await s.as();
    await c.query('CREATE TABLE _cot_decisions (what VARCHAR)');
    await c.query("INSERT INTO _cot_decisions VALUES ('a'), ('b')");
    await c.query("INSERT INTO _cot_decisions VALUES ('c')");
    const rows = (await c.query('SELECT what, step_index, prev_hash, current_hash FROM _cot_decisions ORDER BY step_index')).rows;
    expect(rows.map((r) => [r.what, r.step_index])).toEqual([
      ['a', 0],
      ['b', 1],
      ['c', 2],
    ]);
    expect(rows.map((r) => r.prev_hash)).toEqual(['', rows[0].current_hash, rows[1].current_hash]);
    const verdicts = (await c.query('SELECT valid, step_count FROM cot_verify_decisions_all()')).rows;
    expect(verdicts).toEqual([{ valid: true, step_count: '3' }]);
  });

  it('refuses a CREATE that declares a chain column itself with 42701, and leaves no table', async () => {
    const c = await s.as();
    expect(await sqlstate(c.query('CREATE TABLE _cot_bad (session_id VARCHAR, step_index INTEGER)'))).toBe('42701');
    expect(await sqlstate(c.query('CREATE TABLE _cot_bad (session_id VARCHAR, current_hash VARCHAR)'))).toBe('42701');
    expect(await sqlstate(c.query('SELECT * FROM _cot_bad'))).toBe('42P01');
  });
});
