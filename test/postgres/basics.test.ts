import { serialize } from 'pg-protocol';
import postgres from 'postgres';
import { describe, expect, it } from 'vitest';
import { bindFormats, dataRowCells, errorFields, WireClient } from '../fixtures/wire.js';
import { usePgServer } from '../fixtures/pg-server.js';

const ctx = usePgServer();

describe('cotwire on a PostgreSQL engine', () => {
  it('answers queries with PostgreSQL itself', async () => {
    const r = await ctx.client.query("SELECT 1 AS one, 'x'::text AS t, now() IS NOT NULL AS ok, current_user AS who");
    expect(r.rows).toEqual([{ one: 1, t: 'x', ok: true, who: 'cotwire_admin' }]);
    const v = await ctx.client.query('SELECT version()');
    expect(v.rows[0].version).toMatch(/^PostgreSQL/);
  });

  it('appends steps through the writer and returns what it chained', async () => {
    const r = await ctx.client.query(
      "INSERT INTO _cot_steps (session_id, step_type, content, confidence) VALUES ($1, 'Observation', 'hello', 0.5), ($1, 'Decision', 'go', 1) RETURNING step_index, prev_hash, current_hash, session_id, confidence",
      ['s1'],
    );
    expect(r.rowCount).toBe(2);
    expect(r.rows.map((x) => x.step_index)).toEqual([0, 1]);
    expect(r.rows[1].prev_hash).toBe(r.rows[0].current_hash);
    const read = await ctx.client.query("SELECT step_index, content FROM _cot_steps WHERE session_id = 's1' ORDER BY step_index");
    expect(read.rows).toEqual([
      { step_index: 0, content: 'hello' },
      { step_index: 1, content: 'go' },
    ]);
  });

  it('counts a large SELECT whole in its command tag, though it came in batches', async () => {
    const r = await ctx.client.query('SELECT g FROM generate_series(1, 5432) g');
    expect(r.rowCount).toBe(5432);
    expect(r.rows.at(-1)).toEqual({ g: 5432 });
  });

  it("places PostgreSQL's error positions in the client's whole string", async () => {
    // A statement after another, and one alone after blank lines (its answer is PostgreSQL's, passed on whole).
    for (const sql of ['SELECT 1;\n  SELECT * FROM nope', '\n\n   SELECT * FROM nope']) {
      await expect(ctx.client.query(sql), sql).rejects.toMatchObject({ code: '42P01', position: String(sql.indexOf('nope') + 1) });
    }
  });

  it('refuses changes to a ledger, and PostgreSQL refuses them too', async () => {
    await expect(ctx.client.query("DELETE FROM _cot_steps WHERE session_id = 's1'")).rejects.toMatchObject({ code: '42501' });
    await expect(ctx.client.query("UPDATE _cot_steps SET content = 'x'")).rejects.toMatchObject({ code: '42501' });
    await expect(ctx.client.query("DO $$ BEGIN EXECUTE 'DELETE FROM _c' || 'ot_steps'; END $$")).rejects.toMatchObject({ code: '42501' });
    const n = await ctx.client.query('SELECT count(*)::int AS n FROM _cot_steps');
    expect(n.rows[0].n).toBe(2);
  });

  it('holds appends of a transaction block until COMMIT, and drops them at ROLLBACK', async () => {
    await ctx.client.query('BEGIN');
    await ctx.client.query("INSERT INTO _cot_steps (session_id, step_type, content) VALUES ('s2', 'Observation', 'a')");
    await ctx.client.query('ROLLBACK');
    expect((await ctx.client.query("SELECT count(*)::int AS n FROM _cot_steps WHERE session_id = 's2'")).rows[0].n).toBe(0);
    await ctx.client.query('BEGIN');
    await ctx.client.query("INSERT INTO _cot_steps (session_id, step_type, content) VALUES ('s2', 'Observation', 'b')");
    await ctx.client.query('COMMIT');
    expect((await ctx.client.query("SELECT content FROM _cot_steps WHERE session_id = 's2'")).rows).toEqual([{ content: 'b' }]);
  });

  it('creates a ledger with its chain columns', async () => {
    await ctx.client.query('CREATE TABLE _cot_tool_calls (session_id text NOT NULL, tool text, ok boolean)');
    await ctx.client.query("INSERT INTO _cot_tool_calls (session_id, tool, ok) VALUES ('t', 'search', true), ('t', 'fetch', false)");
    const r = await ctx.client.query('SELECT tool, ok, step_index FROM _cot_tool_calls ORDER BY step_index');
    expect(r.rows).toEqual([
      { tool: 'search', ok: true, step_index: 0 },
      { tool: 'fetch', ok: false, step_index: 1 },
    ]);
    await expect(ctx.client.query('DROP TABLE _cot_tool_calls')).rejects.toMatchObject({ code: '42501' });
  });
});

describe('verification in PostgreSQL', () => {
  it('cot_verify, cot_verify_all, cot_replay, cot_trace and cot_sessions answer over SQL', async () => {
    const c = ctx.client;
    await c.query(
      "INSERT INTO _cot_steps (session_id, agent_id, step_type, content, confidence, metadata) VALUES ('v1', 'agent-a', 'Observation', 'x', 0.25, '{\"k\": [1, 2]}'), ('v1', 'agent-a', 'FinalAnswer', 'done', 1e-7, NULL)",
    );
    const v = await c.query("SELECT * FROM cot_verify('v1')");
    expect(v.rows).toEqual([
      { chain_key: 'v1', valid: true, step_count: '2', first_broken_index: null, break_kind: null, expected_hash: null, actual_hash: null },
    ]);
    const all = await c.query('SELECT chain_key, valid FROM cot_verify_all() ORDER BY chain_key');
    expect(all.rows.every((r) => r.valid === true)).toBe(true);
    expect(all.rows.map((r) => r.chain_key)).toContain('v1');
    const replay = await c.query("SELECT step_index, content FROM cot_replay('v1')");
    expect(replay.rows).toEqual([
      { step_index: 0, content: 'x' },
      { step_index: 1, content: 'done' },
    ]);
    const id = (await c.query("SELECT trace_id FROM _cot_steps WHERE session_id = 'v1' AND step_index = 1")).rows[0].trace_id as string;
    expect((await c.query('SELECT content FROM cot_trace($1)', [id])).rows).toEqual([{ content: 'done' }]);
    const sessions = await c.query("SELECT session_id, step_count, chain_valid FROM cot_sessions('agent-a')");
    expect(sessions.rows).toEqual([{ session_id: 'v1', step_count: '2', chain_valid: true }]);
  });

  it('answers the analytics functions as on DuckDB', async () => {
    const c = ctx.client;
    await c.query(
      `INSERT INTO _cot_steps (session_id, agent_id, model, step_type, confidence, duration_ms, token_count) VALUES
       ('an1', 'planner', 'm1', 'Observation', 0.2, 10, 5), ('an1', 'planner', 'm1', 'Reasoning', 0.4, 20, 5),
       ('an1', 'planner', 'm1', 'Decision', 0.6, 30, 5), ('an1', 'planner', 'm1', 'FinalAnswer', 0.9, 40, 5)`,
    );
    const summary = await c.query(
      "SELECT agent_id, model, step_count, duration_ms, token_total, observation_steps, decision_steps, final_answer_steps, reached_final_answer, final_confidence, first_observation_index, first_decision_index, steps_to_decision FROM cot_session_summary() WHERE session_id = 'an1'",
    );
    expect(summary.rows).toEqual([
      {
        agent_id: 'planner',
        model: 'm1',
        step_count: '4',
        duration_ms: '100',
        token_total: '20',
        observation_steps: '1',
        decision_steps: '1',
        final_answer_steps: '1',
        reached_final_answer: true,
        final_confidence: 0.9,
        first_observation_index: 0,
        first_decision_index: 2,
        steps_to_decision: 2,
      },
    ]);
    expect((await c.query("SELECT steps_to_decision FROM cot_convergence() WHERE session_id = 'an1'")).rows).toEqual([{ steps_to_decision: 2 }]);
    const agents = await c.query("SELECT sessions, steps, mean_duration_ms, p95_duration_ms, tokens FROM cot_agent_stats() WHERE agent_id = 'planner'");
    expect(agents.rows).toEqual([{ sessions: '1', steps: '4', mean_duration_ms: 25, p95_duration_ms: 38.5, tokens: '20' }]);
    expect((await c.query("SELECT steps FROM cot_model_stats(since := now() - interval '1 day') WHERE model = 'm1'")).rows).toEqual([{ steps: '4' }]);
  });

  it("writes hashes the README's Python recomputes", async () => {
    const admin = await ctx.engine.admin();
    await ctx.client.query(
      "INSERT INTO _cot_steps (session_id, step_type, content, confidence, metadata) VALUES ('py', 'Observation', 'é\n\"q\"', 1e-23, '{\"k\": 1}')",
    );
    const columns = (await admin.query(
      "SELECT attname, format_type(atttypid, NULL) FROM pg_attribute WHERE attrelid = 'public._cot_steps'::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
    )) as Array<[string, string]>;
    const { duckdbTypeOf } = await import('../../src/engines/postgres/ledger/catalog.js');
    const { canonicalPgTextSql } = await import('../../src/engines/postgres/dialect/verify-sql.js');
    const [row] = (await admin.query(
      `SELECT ${columns.map(([n, t]) => canonicalPgTextSql(n, duckdbTypeOf(t))).join(', ')} FROM public._cot_steps s WHERE session_id = 'py'`,
    )) as Array<Array<string | null>>;
    const program = [
      'import hashlib, struct, json, sys',
      'def lp(x):',
      '    if x is None: return b"\\xff" * 8',
      '    b = x.encode("utf-8"); return struct.pack(">Q", len(b)) + b',
      // cotwire/v3, the README's recipe: committed values under keys from the row's salt, the rest as text.
      'PLAIN = {"step_index", "prev_hash", "created_at", "ledger_seq", "session_id", "trace_id", "has_embedding"}',
      'cols, vals = json.load(sys.stdin)',
      'salt = bytes.fromhex(vals[cols.index("row_salt")])',
      'pre, m = lp("cotwire/v3") + lp("_cot_steps"), 0',
      'for c, v in zip(cols, vals):',
      '    if c in ("current_hash", "row_salt"): continue',
      '    if c in PLAIN: pre += lp(c) + lp(v); continue',
      '    key = hashlib.sha256(lp("cotwire/v3 keys") + salt + struct.pack(">I", m // 2)).digest()[16 * (m % 2):16 * (m % 2) + 16]',
      '    pre += lp(c) + hashlib.sha256(key + lp(v)).digest(); m += 1',
      'print(hashlib.sha256(pre).hexdigest())',
    ].join('\n');
    const { execFileSync } = await import('node:child_process');
    const out = execFileSync('python3', ['-c', program], { input: JSON.stringify([columns.map(([n]) => n), row]), encoding: 'utf8' }).trim();
    expect(out).toBe(row?.[columns.findIndex(([n]) => n === 'current_hash')]);
  });

  it('finds a row edited behind the server', async () => {
    const admin = await ctx.engine.admin();
    await ctx.client.query(
      "INSERT INTO _cot_steps (session_id, step_type, content) VALUES ('e1', 'Observation', 'a'), ('e1', 'Observation', 'b'), ('e1', 'Observation', 'c')",
    );
    // Someone with the database's superuser disables the wall and edits a row.
    await admin.run('ALTER TABLE public._cot_steps DISABLE TRIGGER cotwire_append_only');
    await admin.run("UPDATE public._cot_steps SET content = 'B' WHERE session_id = 'e1' AND step_index = 1");
    await admin.run('ALTER TABLE public._cot_steps ENABLE TRIGGER cotwire_append_only');
    const v = await ctx.client.query("SELECT valid, first_broken_index, break_kind FROM cot_verify('e1')");
    expect(v.rows).toEqual([{ valid: false, first_broken_index: 1, break_kind: 'edited' }]);
  });

  it('verifies a ledger a client created, with its own function', async () => {
    await ctx.client.query('CREATE TABLE _cot_notes (session_id text NOT NULL, note text, n integer, at timestamptz, flag boolean, amount double precision)');
    await ctx.client.query("INSERT INTO _cot_notes VALUES ('n', 'é\\n', 3, '2024-01-02 03:04:05.123456+02', false, 1e20), ('n', NULL, NULL, NULL, NULL, -0.0)");
    const v = await ctx.client.query("SELECT valid, step_count FROM cot_verify_notes('n')");
    expect(v.rows).toEqual([{ valid: true, step_count: '2' }]);
  });
});

describe('the wire on a PostgreSQL engine', () => {
  it('sends binary results as PostgreSQL itself sends them, byte for byte', async () => {
    const sql =
      "SELECT 1::int2, 2::int4, 3::int8, 1.5::float4, -2.25::float8, 12.3400::numeric, true, 'x é'::text, '\\x00ff'::bytea, '2024-02-29'::date, '2024-02-29 13:14:15.123456+00'::timestamptz, '2024-02-29 13:14:15'::timestamp, '13:14:15.5'::time, '1 year 2 mons -3 days 04:05:06.7'::interval, '0190a4b2-0000-7000-8000-000000000001'::uuid, '{\"a\": 1}'::jsonb, '{\"a\": 1}'::json, 'infinity'::timestamptz, " +
      // Arrays of those types: empty, with NULLs, nested, quoted elements, bounds other than 1.
      "ARRAY[1, 2, NULL]::int4[], '{{1,2},{3,4}}'::int8[], '{}'::int4[], '[0:1]={5,6}'::int2[], " +
      "ARRAY['a', 'b c', '\"q\"', 'back\\slash', NULL, 'NULL', '', '{x}', 'é']::text[], ARRAY[true, false]::bool[], " +
      "ARRAY[1.5, 'NaN', '-Infinity']::float8[], ARRAY[0.001, 12345.6789, -1]::numeric[], ARRAY['0190a4b2-0000-7000-8000-000000000001']::uuid[], " +
      "ARRAY['2024-02-29 13:14:15.5+00', 'infinity']::timestamptz[], ARRAY['2024-02-29']::date[], ARRAY['\\x00ff'::bytea, NULL], " +
      "ARRAY['{\"k\": [1, 2]}']::jsonb[], ARRAY['1 day 02:00:00']::interval[], ARRAY['x']::varchar[]";
    const columns = 33;
    // All in binary, and mixed with a text column first: PostgreSQL's own bytes, as sent, either way.
    const rowOf = async (port: number, user: string, formats: readonly number[]): Promise<(Buffer | null)[]> => {
      const w = await WireClient.startup(port, { user, database: 'postgres' });
      w.write(serialize.parse({ text: sql }));
      w.write(bindFormats(formats));
      w.write(serialize.execute({}));
      w.write(serialize.sync());
      const got = await w.until('Z');
      w.end();
      const data = got.find((m) => m.type === 'D');
      if (data === undefined) throw new Error(`no row: ${JSON.stringify(got.map((m) => [m.type, m.body.toString()]))}`);
      return dataRowCells(data.body);
    };
    for (const formats of [[1], [0, ...new Array<number>(columns - 1).fill(1)]]) {
      const direct = await rowOf(ctx.engine.pg.port, 'postgres', formats);
      const through = await rowOf(ctx.server.port, 'cotwire', formats);
      expect(direct).toHaveLength(columns);
      expect(through.map((b) => b?.toString('hex'))).toEqual(direct.map((b) => b?.toString('hex')));
    }
  });

  it("keeps a client's named statement parsed in its backend, plan and all, as PostgreSQL keeps the client's own, until it is closed", async () => {
    const text = 'SELECT $1::int * 2 AS twice';
    const w = await WireClient.startup(ctx.server.port);
    const cells = (got: readonly { type: string; body: Buffer }[]) =>
      got.filter((m) => m.type === 'D').map((m) => dataRowCells(m.body).map((b) => b?.toString()));
    const held = async () => {
      w.write(serialize.query(`SELECT count(*), coalesce(sum(generic_plans + custom_plans), 0) FROM pg_prepared_statements WHERE statement = '${text}'`));
      return cells(await w.until('Z'))[0];
    };
    const binds = [1, 2, 3].flatMap((v) => [serialize.bind({ statement: 'k', values: [String(v)] }), serialize.execute({})]);
    w.write(Buffer.concat([serialize.parse({ name: 'k', text, types: [] }), ...binds, serialize.sync()]));
    expect(cells(await w.until('Z'))).toEqual([['2'], ['4'], ['6']]);
    // Parsed once, planned for each of the three binds.
    expect(await held()).toEqual(['1', '3']);
    w.write(Buffer.concat([serialize.close({ type: 'S', name: 'k' }), serialize.sync()]));
    await w.until('Z');
    expect(await held()).toEqual(['0', '0']);
    w.end();
  });

  it("refuses PREPARE and DECLARE under the names of cotwire's own statements and portals in the backend", async () => {
    for (const sql of ['PREPARE cotwire_s1 AS SELECT 1', 'DECLARE cotwire_7 CURSOR FOR SELECT 1']) {
      await expect(ctx.client.query(sql), sql).rejects.toMatchObject({ code: '42501', message: expect.stringContaining('"cotwire_') });
    }
    // Any other name is the client's.
    await ctx.client.query('PREPARE cotwirex AS SELECT 1');
    await ctx.client.query('DEALLOCATE cotwirex');
  });

  it('answers a named statement whose table changed shape as PostgreSQL does', async () => {
    const outcome = async (port: number, user: string, table: string): Promise<string[]> => {
      const w = await WireClient.startup(port, { user, database: 'postgres' });
      w.write(serialize.query(`CREATE TABLE ${table} (a int); INSERT INTO ${table} VALUES (1)`));
      await w.until('Z');
      const run = async () => {
        w.write(Buffer.concat([serialize.bind({ statement: 'shape', values: [] }), serialize.execute({}), serialize.sync()]));
        return (await w.until('Z'))
          .filter((m) => m.type === 'D' || m.type === 'E')
          .map((m) => (m.type === 'E' ? `E ${errorFields(m.body).C}` : `D ${m.body.toString('hex')}`));
      };
      w.write(Buffer.concat([serialize.parse({ name: 'shape', text: `SELECT * FROM ${table}`, types: [] }), serialize.sync()]));
      await w.until('Z');
      const before = await run();
      w.write(serialize.query(`ALTER TABLE ${table} ADD COLUMN b int`));
      await w.until('Z');
      const after = await run();
      w.end();
      return [...before, ...after];
    };
    const direct = await outcome(ctx.engine.pg.port, 'postgres', 'shape_direct');
    // 0A000, "cached plan must not change result type": the plan PostgreSQL kept for the statement no longer fits.
    expect(direct).toEqual([expect.stringMatching(/^D /), 'E 0A000']);
    expect(await outcome(ctx.server.port, 'cotwire', 'shape_relayed')).toEqual(direct);
  });

  it('COPY FROM STDIN into a ledger chains the rows; a failed string drops its appends', async () => {
    const c = ctx.client;
    const sql = postgres({ host: '127.0.0.1', port: ctx.server.port, user: 'cotwire', database: 'cotwire', max: 1 });
    const writable = await sql`COPY _cot_steps (session_id, step_type, content) FROM STDIN WITH (FORMAT csv)`.writable();
    await new Promise<void>((resolve, reject) => {
      writable.on('error', reject);
      writable.end('c1,Observation,"a, quoted"\nc1,Decision,plain\n', () => resolve());
    });
    await new Promise((r) => setTimeout(r, 100));
    await sql.end();
    expect((await c.query("SELECT step_index, content FROM _cot_steps WHERE session_id = 'c1' ORDER BY step_index")).rows).toEqual([
      { step_index: 0, content: 'a, quoted' },
      { step_index: 1, content: 'plain' },
    ]);
    expect((await c.query("SELECT valid FROM cot_verify('c1')")).rows).toEqual([{ valid: true }]);
    await expect(c.query("INSERT INTO _cot_steps (session_id, step_type) VALUES ('c2', 'Observation'); SELECT * FROM nope")).rejects.toMatchObject({
      code: '42P01',
    });
    expect((await c.query("SELECT count(*)::int AS n FROM _cot_steps WHERE session_id = 'c2'")).rows).toEqual([{ n: 0 }]);
  });
});
