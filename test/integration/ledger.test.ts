import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import postgres from 'postgres';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { EngineConnection } from '../../src/engine/port.js';
import { sqlstate } from '../fixtures/errors.js';
import { startTestServer, type TestServer } from '../fixtures/server.js';
import { checkChains, recomputeSql, versionSql, type Column } from '../fixtures/independent-verifier.js';
import { samplePoint } from '../../src/ledger/chain/embedding-sample.js';

const run = promisify(execFile);
let server: TestServer;
let client: pg.Client;
let internal: EngineConnection;

beforeAll(async () => {
  server = await startTestServer();
  client = await server.client();
  internal = await server.duckdb.engine.connect();
});
afterAll(async () => {
  internal.close();
  await server[Symbol.asyncDispose]();
});

async function columns(table: string): Promise<Column[]> {
  const rows = await internal.query(`SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = '${table}' ORDER BY column_index`);
  return rows.map((r) => ({ name: String(r[0]), type: String(r[1]) }));
}

/** Verifies a ledger with the independent verifier (the README's spec only). */
async function independentlyVerified(table: string, chainKey: string | null): Promise<{ chains: number; steps: number; problems: string[] }> {
  const [[version]] = (await internal.query(versionSql(table))) as [['cotwire/v1' | 'cotwire/v2' | 'cotwire/v3']];
  return checkChains(await internal.query(recomputeSql(table, await columns(table), chainKey, version)));
}

/** The tables an EXPLAIN ANALYZE box diagram scans sequentially: the name in the box of each "Type: Sequential Scan". */
function sequentiallyScanned(plan: string): string[] {
  const lines = plan.split('\n');
  const tables: string[] = [];
  lines.forEach((line, i) => {
    const at = line.indexOf('Sequential Scan');
    if (at < 0) return;
    const from = line.lastIndexOf('│', at);
    const to = line.indexOf('│', at);
    for (let j = i - 1; j > 0; j--) {
      if ((lines[j] ?? '').slice(from, to).includes('Table:')) {
        tables.push((lines[j + 1] ?? '').slice(from + 1, to).trim());
        return;
      }
    }
  });
  return tables;
}

const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('appending reasoning steps', () => {
  it('computes trace_id, step_index, the chain and ledger_seq, and returns them', async () => {
    const r1 = await client.query(
      "INSERT INTO _cot_steps (session_id, agent_id, step_type, content, confidence, metadata) VALUES ('a1', 'agent-1', 'Observation', 'the sky is blue', 0.9, '{\"k\": 1}') RETURNING trace_id, step_index, prev_hash, current_hash, ledger_seq, has_embedding",
    );
    expect(r1.command).toBe('INSERT');
    expect(r1.rowCount).toBe(1);
    const first = r1.rows[0];
    expect(first.trace_id).toMatch(UUID_V7);
    expect(first.step_index).toBe(0);
    expect(first.prev_hash).toBe('');
    expect(first.current_hash).toMatch(/^[0-9a-f]{64}$/);
    // An Observation is embedded only when its sample point falls under the default rate (ledger/chain/embedding-sample.ts).
    expect(first.has_embedding).toBe(samplePoint(first.trace_id) < 0.1);
    const r2 = await client.query(
      "INSERT INTO _cot_steps (session_id, step_type, content) VALUES ('a1', 'Reasoning', 'so it is day'), ('a1', 'Decision', 'go out') RETURNING step_index, prev_hash, current_hash, ledger_seq",
    );
    expect(r2.rows.map((r) => r.step_index)).toEqual([1, 2]);
    expect(r2.rows[0].prev_hash).toBe(first.current_hash);
    expect(r2.rows[1].prev_hash).toBe(r2.rows[0].current_hash);
    expect(Number(r2.rows[1].ledger_seq)).toBe(Number(r2.rows[0].ledger_seq) + 1);
    expect(Number(r2.rows[0].ledger_seq)).toBeGreaterThan(Number(first.ledger_seq));
  });

  it('takes parameters in the extended protocol, column lists and DEFAULT', async () => {
    const r = await client.query(
      'INSERT INTO _cot_steps (session_id, step_type, content, confidence, duration_ms, token_count, model, input_data) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING step_index, confidence, duration_ms, input_data',
      ['p1', 'ToolCall', 'search', 0.25, 1500, 42, 'gpt', JSON.stringify({ q: 'x' })],
    );
    expect(r.rows[0]).toEqual({ step_index: 0, confidence: 0.25, duration_ms: '1500', input_data: { q: 'x' } });
    const d = await client.query("INSERT INTO _cot_steps (session_id, step_type, content) VALUES ('p1', 'ToolResult', DEFAULT) RETURNING step_index, content");
    expect(d.rows[0]).toEqual({ step_index: 1, content: null });
  });

  it('stores the same values whether the server or the engine converts them', async () => {
    // Parameters and plain literals are converted by the server (canonical-values.ts); the
    // same texts behind a cast go through DuckDB. Both must store, hash and verify alike.
    await client.query('CREATE TABLE _cot_kinds (session_id VARCHAR, i INTEGER, b BIGINT, d DOUBLE, u UUID, f BOOLEAN, j JSON, t VARCHAR)');
    const values = [
      ['007', '-9223372036854775808', '1e16', 'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11', 'T', ' {"a": [1, 2.50]} ', "it's"],
      ['-0', '+42', '0.1', '019a0b4c-1d2e-7f00-8a1b-2c3d4e5f6a7b', 'false', '"x"', 'héllo\nwörld'],
      ['2147483647', '0', '-2.5e-7', '00000000-0000-0000-0000-000000000000', 'f', 'null', ''],
    ];
    for (const [k, row] of values.entries()) {
      await client.query('INSERT INTO _cot_kinds (session_id, i, b, d, u, f, j, t) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)', [`direct-${k}`, ...row]);
      await client.query(
        'INSERT INTO _cot_kinds (session_id, i, b, d, u, f, j, t) VALUES ($1, $2::text, $3::text, $4::text, $5::text, $6::text, $7::text, $8::text)',
        [`engine-${k}`, ...row],
      );
    }
    await client.query(
      "INSERT INTO _cot_kinds (session_id, i, d, f, t) VALUES ('direct-literals', -5, 1.50, TRUE, 'o''k'), ('direct-literals', 1e2, .5, NULL, NULL)",
    );
    await client.query(
      "INSERT INTO _cot_kinds (session_id, i, d, f, t) VALUES ('engine-literals', -5::int, 1.50::double, TRUE::boolean, 'o''k'::text), ('engine-literals', (1e2)::int, (.5)::double, NULL::boolean, NULL::text)",
    );
    const read = async (prefix: string): Promise<unknown[]> =>
      (
        await client.query({
          text: `SELECT i, b, d, u, f, j, t, step_index FROM _cot_kinds WHERE session_id LIKE '${prefix}-%' ORDER BY session_id, step_index`,
          rowMode: 'array',
        })
      ).rows;
    expect(await read('direct')).toEqual(await read('engine'));
    expect((await read('direct')).length).toBe(5);
    const verified = await independentlyVerified('_cot_kinds', 'session_id');
    expect(verified.problems).toEqual([]);
    expect(verified.steps).toBe(10);
    // A value the server cannot convert still gets PostgreSQL's error from the engine.
    expect(await sqlstate(client.query('INSERT INTO _cot_kinds (session_id, i) VALUES ($1, $2)', ['bad', '1.5x']))).toBe('22P02');
  });

  it('returns RETURNING rows from a ledger with a key, which commits to DuckDB directly', async () => {
    await client.query('CREATE TABLE _cot_keyed (id INTEGER PRIMARY KEY, session_id VARCHAR, note VARCHAR)');
    // Before the fix the applier never learned of a direct commit, and RETURNING waited forever.
    const r = await client.query("INSERT INTO _cot_keyed VALUES (1, 'k', 'first'), (2, 'k', 'second') RETURNING id, step_index");
    expect(r.rows).toEqual([
      { id: 1, step_index: 0 },
      { id: 2, step_index: 1 },
    ]);
    const again = await client.query("INSERT INTO _cot_keyed VALUES (3, 'k', 'third') RETURNING step_index");
    expect(again.rows).toEqual([{ step_index: 2 }]);
  });

  it('appends with INSERT ... SELECT, including from another ledger', async () => {
    const r = await client.query(
      "INSERT INTO _cot_steps (session_id, step_type, content) SELECT 'copy', step_type, content FROM _cot_steps WHERE session_id = 'a1' ORDER BY step_index",
    );
    expect(r.rowCount).toBe(3);
    const rows = (await client.query("SELECT step_index, content FROM _cot_steps WHERE session_id = 'copy' ORDER BY step_index")).rows;
    expect(rows).toEqual([
      { step_index: 0, content: 'the sky is blue' },
      { step_index: 1, content: 'so it is day' },
      { step_index: 2, content: 'go out' },
    ]);
  });

  it('appends through postgres.js and psql', async () => {
    const sql = postgres({ host: '127.0.0.1', port: server.port, user: 'cotwire', database: 'cotwire', onnotice: () => undefined });
    try {
      const rows = await sql`INSERT INTO _cot_steps (session_id, step_type, content) VALUES (${'pj'}, ${'Summary'}, ${'via postgres.js'}) RETURNING step_index`;
      expect(rows[0]?.step_index).toBe(0);
    } finally {
      await sql.end();
    }
    const { stdout } = await run('psql', [
      '-X',
      '-h',
      '127.0.0.1',
      '-p',
      String(server.port),
      '-U',
      'cotwire',
      'cotwire',
      '-c',
      "INSERT INTO _cot_steps (session_id, step_type) VALUES ('pj', 'FinalAnswer')",
    ]);
    expect(stdout.trim()).toBe('INSERT 0 1');
    const chain = (await client.query("SELECT step_index FROM _cot_steps WHERE session_id = 'pj' ORDER BY 1")).rows.map((r) => r.step_index);
    expect(chain).toEqual([0, 1]);
  });

  it.each([
    ["INSERT INTO _cot_steps (session_id, step_type) VALUES ('v', 'Musing')", '23514'],
    ["INSERT INTO _cot_steps (session_id, step_type, confidence) VALUES ('v', 'Action', 1.01)", '23514'],
    ["INSERT INTO _cot_steps (session_id, step_type, confidence) VALUES ('v', 'Action', -0.1)", '23514'],
    ["INSERT INTO _cot_steps (session_id, step_type, metadata) VALUES ('v', 'Action', '{not json')", '22P02'],
    ["INSERT INTO _cot_steps (session_id, step_type) VALUES ('', 'Action')", '23514'],
    ["INSERT INTO _cot_steps (session_id, step_type) VALUES (NULL, 'Action')", '23502'],
    ["INSERT INTO _cot_steps (session_id, step_type, parent_trace_id) VALUES ('v', 'Action', '01890000-0000-7000-8000-000000000000')", '23503'],
    ["INSERT INTO _cot_steps (session_id, step_type, step_index) VALUES ('v', 'Action', 7)", '428C9'],
    ["INSERT INTO _cot_steps (session_id, step_type, current_hash) VALUES ('v', 'Action', 'x')", '428C9'],
    ["INSERT INTO _cot_steps (session_id, step_type, trace_id) VALUES ('v', 'Action', gen_random_uuid())", '428C9'],
    ["INSERT INTO _cot_steps (session_id, step_type, nope) VALUES ('v', 'Action', 1)", '42703'],
    ["INSERT INTO _cot_steps (session_id, step_type) VALUES ('v', 'Action', 'extra')", '42601'],
  ])('refuses %s with %s and writes nothing', async (statement, code) => {
    expect(await sqlstate(client.query(statement))).toBe(code);
    expect((await client.query("SELECT count(*)::INTEGER AS n FROM _cot_steps WHERE session_id = 'v'")).rows[0].n).toBe(0);
  });

  it('does not let an unbalanced source reshape the query cotwire builds around it', async () => {
    const sql = "INSERT INTO _cot_steps (session_id, step_type) VALUES ('inj', 'Action')) UNION ALL (SELECT 'inj', 'Action'";
    expect(await sqlstate(client.query(sql))).toBe('42601');
    expect((await client.query("SELECT count(*)::INTEGER AS n FROM _cot_steps WHERE session_id = 'inj'")).rows[0].n).toBe(0);
  });

  it('points an error in the rows to insert at the client’s text, in both protocols', async () => {
    const sql = "INSERT INTO _cot_steps (session_id, step_type, content) SELECT 'pos', 'Action', nope";
    for (const query of [sql, { text: sql, values: [] }]) {
      const err = (await client.query(query as string).catch((e: unknown) => e)) as pg.DatabaseError;
      expect(err.code).toBe('42703');
      expect(Number(err.position)).toBe(sql.indexOf('nope') + 1);
    }
  });

  it('appends INSERT ... BY NAME, DuckDB’s, matching the source’s column names', async () => {
    const r = await client.query("INSERT INTO _cot_steps BY NAME SELECT 'Decision' AS step_type, 'by-name' AS SESSION_ID, 'chosen' AS content");
    expect(r.command).toBe('INSERT');
    expect(r.rowCount).toBe(1);
    expect((await client.query("SELECT step_type, content, step_index FROM _cot_steps WHERE session_id = 'by-name'")).rows).toEqual([
      { step_type: 'Decision', content: 'chosen', step_index: 0 },
    ]);
    expect((await client.query("SELECT valid FROM cot_verify('by-name')")).rows).toEqual([{ valid: true }]);
    expect(await sqlstate(client.query("INSERT INTO _cot_steps BY NAME SELECT 'by-name' AS session_id, 'Action' AS step_type, 'f0rged' AS current_hash"))).toBe(
      '428C9',
    );
    expect(await sqlstate(client.query("INSERT INTO _cot_steps BY NAME SELECT 'by-name' AS session_id, 'Action' AS kind"))).toBe('42703');
    expect(await sqlstate(client.query("INSERT INTO _cot_steps BY NAME VALUES ('by-name', 'Action')"))).toBe('42601');
    expect(await sqlstate(client.query("INSERT INTO _cot_steps (session_id, step_type) BY NAME SELECT 'by-name' AS session_id, 'Action' AS step_type"))).toBe(
      '42601',
    );
    expect((await client.query("SELECT count(*)::INTEGER AS n FROM _cot_steps WHERE session_id = 'by-name'")).rows).toEqual([{ n: 1 }]);
  });

  it('lists the twelve step types when one is wrong', async () => {
    const err = (await client.query("INSERT INTO _cot_steps (session_id, step_type) VALUES ('v', 'Musing')").catch((e: unknown) => e)) as pg.DatabaseError;
    expect(err.message).toContain(
      'Observation, Hypothesis, ToolCall, ToolResult, Reasoning, Decision, Action, Error, Correction, Summary, PlanStep, FinalAnswer',
    );
  });

  it('limits content to ledger.maxContentBytes', async () => {
    const big = 'x'.repeat(65537);
    expect(await sqlstate(client.query('INSERT INTO _cot_steps (session_id, step_type, content) VALUES ($1, $2, $3)', ['v', 'Action', big]))).toBe('22001');
    const ok = await client.query('INSERT INTO _cot_steps (session_id, step_type, content) VALUES ($1, $2, $3)', ['big', 'Action', 'x'.repeat(65536)]);
    expect(ok.rowCount).toBe(1);
  });

  it('accepts a parent_trace_id that names an existing step', async () => {
    const parent = (await client.query("SELECT trace_id FROM _cot_steps WHERE session_id = 'a1' AND step_index = 0")).rows[0].trace_id as string;
    const r = await client.query(
      "INSERT INTO _cot_steps (session_id, step_type, parent_trace_id) VALUES ('tree', 'Hypothesis', $1) RETURNING parent_trace_id",
      [parent],
    );
    expect(r.rows[0].parent_trace_id).toBe(parent);
  });
});

describe('any _cot table is a ledger', () => {
  it('adds the chain columns, chains by session_id, and verifies', async () => {
    await client.query('CREATE TABLE _cot_tool_calls (session_id VARCHAR, tool VARCHAR, args JSON)');
    const cols = (await columns('_cot_tool_calls')).map((c) => c.name);
    expect(cols).toEqual(['session_id', 'tool', 'args', 'step_index', 'prev_hash', 'current_hash', 'created_at', 'ledger_seq', 'row_salt']);
    await client.query("INSERT INTO _cot_tool_calls VALUES ('t1', 'search', '{\"q\": 1}'), ('t2', 'fetch', NULL), ('t1', 'read', '[]')");
    const rows = (await client.query('SELECT session_id, step_index FROM _cot_tool_calls ORDER BY ledger_seq')).rows;
    expect(rows).toEqual([
      { session_id: 't1', step_index: 0 },
      { session_id: 't2', step_index: 0 },
      { session_id: 't1', step_index: 1 },
    ]);
    expect((await independentlyVerified('_cot_tool_calls', 'session_id')).problems).toEqual([]);
    const c2 = await server.client();
    expect((await c2.query("SELECT valid, step_count FROM cot_verify_tool_calls('t1')")).rows).toEqual([{ valid: true, step_count: '2' }]);
  });

  it('appends large units through the appender, all or nothing, and the chain carries on', async () => {
    await client.query('CREATE TABLE _cot_metrics (session_id VARCHAR, value DOUBLE CHECK (value >= 0), seen TIMESTAMPTZ, tags VARCHAR[])');
    // 200 rows in one statement: one group commit, past the writer's appender threshold.
    await client.query(
      "INSERT INTO _cot_metrics (session_id, value, seen, tags) SELECT 'm' || (i % 3), i / 2.0, TIMESTAMPTZ '2026-01-01 00:00:00+00' + INTERVAL (i) SECOND, ['a', 'b'] FROM range(200) t(i)",
    );
    // One bad row among 60: nothing of the unit is written, and the chain heads do not move.
    const err = (await client
      .query("INSERT INTO _cot_metrics (session_id, value) SELECT 'm0', CASE WHEN i = 30 THEN -1 ELSE i END FROM range(60) t(i)")
      .catch((e: unknown) => e)) as { code?: string };
    expect(err.code).toBe('23514');
    await client.query("INSERT INTO _cot_metrics (session_id, value) VALUES ('m0', 1)");
    const counts = (await client.query('SELECT session_id, count(*)::int AS n, max(step_index) AS last FROM _cot_metrics GROUP BY 1 ORDER BY 1')).rows;
    expect(counts).toEqual([
      { session_id: 'm0', n: 68, last: 67 },
      { session_id: 'm1', n: 67, last: 66 },
      { session_id: 'm2', n: 66, last: 65 },
    ]);
    expect((await independentlyVerified('_cot_metrics', 'session_id')).problems).toEqual([]);
    expect((await client.query('SELECT bool_and(valid) AS ok, sum(step_count)::int AS n FROM cot_verify_metrics_all()')).rows).toEqual([{ ok: true, n: 201 }]);
    expect((await client.query("SELECT value, tags FROM _cot_metrics WHERE session_id = 'm1' AND step_index = 0")).rows).toEqual([
      { value: 0.5, tags: ['a', 'b'] },
    ]);
  });

  it('makes a table without session_id one chain', async () => {
    await client.query('CREATE TABLE _cot_decisions (what VARCHAR)');
    await client.query("INSERT INTO _cot_decisions VALUES ('a'), ('b')");
    await client.query("INSERT INTO _cot_decisions VALUES ('c')");
    expect((await client.query('SELECT step_index FROM _cot_decisions ORDER BY 1')).rows.map((r) => r.step_index)).toEqual([0, 1, 2]);
    expect((await independentlyVerified('_cot_decisions', null)).problems).toEqual([]);
  });

  it('checks NOT NULL before acknowledging from the journal, and fails only the unit that breaks it', async () => {
    await client.query('CREATE TABLE _cot_notes (session_id VARCHAR, note VARCHAR NOT NULL)');
    const others = await Promise.all(Array.from({ length: 3 }, () => server.client()));
    const outcomes = await Promise.all(
      [client, ...others].map((c, i) => sqlstate(c.query('INSERT INTO _cot_notes (session_id, note) VALUES ($1, $2)', ['n', i === 2 ? null : `note ${i}`]))),
    );
    await Promise.all(others.map((c) => c.end()));
    expect(outcomes).toEqual(['succeeded', 'succeeded', '23502', 'succeeded']);
    expect((await client.query('SELECT step_index FROM _cot_notes ORDER BY 1')).rows.map((r) => r.step_index)).toEqual([0, 1, 2]);
    expect((await independentlyVerified('_cot_notes', 'session_id')).problems).toEqual([]);
  });

  it('refuses a CREATE that declares a chain column itself', async () => {
    expect(await sqlstate(client.query('CREATE TABLE _cot_bad (x INTEGER, step_index INTEGER)'))).toBe('42701');
    expect((await internal.query("SELECT count(*) FROM duckdb_tables() WHERE table_name = '_cot_bad'"))[0]?.[0]).toBe(0n);
  });
});

describe('transactions', () => {
  it('makes appends visible at COMMIT and leaves no trace after ROLLBACK', async () => {
    const a = await server.client();
    await a.query('BEGIN');
    await a.query("INSERT INTO _cot_steps (session_id, step_type) VALUES ('tx', 'Action')");
    await a.query('ROLLBACK');
    expect((await client.query("SELECT count(*)::INTEGER AS n FROM _cot_steps WHERE session_id = 'tx'")).rows[0].n).toBe(0);
    await a.query('BEGIN');
    const ins = await a.query("INSERT INTO _cot_steps (session_id, step_type) VALUES ('tx', 'Action'), ('tx', 'Summary')");
    expect(ins.rowCount).toBe(2);
    expect((await client.query("SELECT count(*)::INTEGER AS n FROM _cot_steps WHERE session_id = 'tx'")).rows[0].n).toBe(0);
    await a.query('COMMIT');
    expect((await client.query("SELECT step_index FROM _cot_steps WHERE session_id = 'tx' ORDER BY 1")).rows.map((r) => r.step_index)).toEqual([0, 1]);
  });

  it('gives two transactions appending to one session distinct, linked indices in commit order', async () => {
    const a = await server.client();
    const b = await server.client();
    await a.query('BEGIN');
    await b.query('BEGIN');
    await a.query("INSERT INTO _cot_steps (session_id, step_type, content) VALUES ('race', 'Action', 'a')");
    await b.query("INSERT INTO _cot_steps (session_id, step_type, content) VALUES ('race', 'Action', 'b')");
    await b.query('COMMIT');
    await a.query('COMMIT');
    const rows = (await client.query("SELECT step_index, content FROM _cot_steps WHERE session_id = 'race' ORDER BY 1")).rows;
    expect(rows).toEqual([
      { step_index: 0, content: 'b' },
      { step_index: 1, content: 'a' },
    ]);
    expect((await client.query("SELECT valid FROM cot_verify('race')")).rows).toEqual([{ valid: true }]);
  });
});

describe('concurrency', () => {
  it('keeps chains linear and complete with 50 connections appending at once', async () => {
    const pool = new pg.Pool({ ...server.connectionOptions(), max: 50 });
    try {
      const perClient = 10;
      await Promise.all(
        Array.from({ length: 50 }, async (_, c) => {
          for (let i = 0; i < perClient; i++) {
            await pool.query('INSERT INTO _cot_steps (session_id, step_type, content) VALUES ($1, $2, $3)', ['shared', 'Action', `c${c}-${i}`]);
            await pool.query('INSERT INTO _cot_steps (session_id, step_type, content) VALUES ($1, $2, $3)', [`own-${c}`, 'Action', `${i}`]);
          }
        }),
      );
      const shared = (await client.query("SELECT step_index FROM _cot_steps WHERE session_id = 'shared' ORDER BY step_index")).rows.map((r) => r.step_index);
      expect(shared).toEqual(Array.from({ length: 500 }, (_, i) => i));
      const own = await client.query(
        "SELECT session_id, count(*)::INTEGER AS n, max(step_index) AS top FROM _cot_steps WHERE session_id LIKE 'own-%' GROUP BY 1",
      );
      expect(own.rows).toHaveLength(50);
      for (const r of own.rows) expect(r).toMatchObject({ n: 10, top: 9 });
      const verdicts = (await client.query('SELECT chain_key, valid FROM cot_verify_all() WHERE NOT valid')).rows;
      expect(verdicts).toEqual([]);
      const independent = await independentlyVerified('_cot_steps', 'session_id');
      expect(independent.problems).toEqual([]);
      expect(independent.steps).toBeGreaterThanOrEqual(1000);
    } finally {
      await pool.end();
    }
  });

  it('keeps ledger_seq unique and gap-free across all ledgers', async () => {
    // Read on the engine directly: every acknowledged row must have reached it (the refusals' events too).
    await server.running.securityLog.flushed();
    const seqs = await internal.query(
      'SELECT ledger_seq FROM _cot_steps UNION ALL SELECT ledger_seq FROM _cot_tool_calls UNION ALL SELECT ledger_seq FROM _cot_decisions UNION ALL SELECT ledger_seq FROM _cot_metrics UNION ALL SELECT ledger_seq FROM _cot_security_events UNION ALL SELECT ledger_seq FROM _cot_kinds UNION ALL SELECT ledger_seq FROM _cot_notes UNION ALL SELECT ledger_seq FROM _cot_keyed UNION ALL SELECT ledger_seq FROM _cot_checkpoints UNION ALL SELECT ledger_seq FROM _cot_redactions UNION ALL SELECT ledger_seq FROM _cot_retention ORDER BY 1',
    );
    const values = seqs.map((r) => Number(r[0]));
    expect(values).toEqual(Array.from({ length: values.length }, (_, i) => i + 1));
  });
});

describe('reading', () => {
  it('replays a session, fetches a step, lists sessions, all over SQL', async () => {
    const replay = (await client.query("SELECT step_index, step_type FROM cot_replay('a1')")).rows;
    expect(replay).toEqual([
      { step_index: 0, step_type: 'Observation' },
      { step_index: 1, step_type: 'Reasoning' },
      { step_index: 2, step_type: 'Decision' },
    ]);
    const traceId = (await client.query("SELECT trace_id FROM _cot_steps WHERE session_id = 'a1' AND step_index = 1")).rows[0].trace_id as string;
    expect((await client.query('SELECT content FROM cot_trace($1)', [traceId])).rows).toEqual([{ content: 'so it is day' }]);
    const sessions = (await client.query("SELECT session_id, step_count, chain_valid FROM cot_sessions('agent-1')")).rows;
    expect(sessions).toEqual([{ session_id: 'a1', step_count: '1', chain_valid: true }]);
  });

  it('reads one session or one step through an index, with a literal or a parameter', async () => {
    const traceId = (
      await client.query(
        "INSERT INTO _cot_steps (session_id, agent_id, step_type, content) VALUES ('ix1', 'agent-ix', 'Observation', 'indexed') RETURNING trace_id",
      )
    ).rows[0].trace_id as string;
    const plan = async (sql: string, params: unknown[]): Promise<string> =>
      (await client.query(`EXPLAIN ANALYZE ${sql}`, params)).rows.map((r: Record<string, unknown>) => Object.values(r).join('\n')).join('\n');
    for (const [sql, params] of [
      ["SELECT * FROM cot_replay('ix1')", []],
      ['SELECT * FROM cot_replay($1)', ['ix1']],
      ['SELECT * FROM cot_verify($1)', ['ix1']],
      ['SELECT * FROM cot_trace($1)', [traceId]],
      ['SELECT * FROM _cot_steps WHERE trace_id = $1', [traceId]],
    ] as const) {
      const text = await plan(sql, [...params]);
      expect(text, sql).toContain('Index Scan');
      // A verification also reads the chain's redaction records, a small table of its own.
      expect(sequentiallyScanned(text), sql).not.toContain('test.main._cot_steps');
    }
    // The reading of the diagram itself finds a scan of the ledger where there is one.
    expect(sequentiallyScanned(await plan("SELECT * FROM _cot_steps WHERE content = 'indexed'", []))).toContain('test.main._cot_steps');
  });
});

describe('ledgers created inside transactions', () => {
  it('become ledgers for every connection at COMMIT, and vanish at ROLLBACK', async () => {
    const a = await server.client();
    await a.query('BEGIN');
    await a.query('CREATE TABLE _cot_in_tx (session_id VARCHAR, what VARCHAR)');
    await a.query('COMMIT');
    const b = await server.client();
    await b.query("INSERT INTO _cot_in_tx VALUES ('k', 'x')");
    expect((await b.query('SELECT step_index, length(current_hash)::INTEGER AS n FROM _cot_in_tx')).rows).toEqual([{ step_index: 0, n: 64 }]);
    await a.query('BEGIN');
    await a.query('CREATE TABLE _cot_gone (what VARCHAR)');
    await a.query('ROLLBACK');
    expect(await sqlstate(b.query("INSERT INTO _cot_gone VALUES ('x')"))).toBe('42P01');
    await a.query('CREATE TABLE _cot_multi (what VARCHAR); SELECT 1');
    await b.query("INSERT INTO _cot_multi VALUES ('y')");
    expect((await b.query('SELECT step_index FROM _cot_multi')).rows).toEqual([{ step_index: 0 }]);
  });
});
