import { describe, expect, it } from 'vitest';
import { usePgServer } from '../fixtures/pg-server.js';

const ctx = usePgServer();

describe('cotwire on a PostgreSQL engine', () => {
  it('answers queries with PostgreSQL itself', async () => {
    const r = await ctx.client.query("SELECT 1 AS one, 'x'::text AS t, now() IS NOT NULL AS ok, current_user AS who");
    expect(r.rows).toEqual([{ one: 1, t: 'x', ok: true, who: 'cotwire_client' }]);
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
