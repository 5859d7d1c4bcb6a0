import type pg from 'pg';
import { beforeAll, describe, expect, it } from 'vitest';
import { useConformanceServer } from '../fixtures/conformance.js';
import { psql } from '../fixtures/server.js';

/**
 * Reading reasoning back over SQL: cot_replay (a session in order),
 * cot_trace (one step) and cot_sessions (an agent's sessions), each the
 * same rows as the plain SELECT it stands for.
 */
const s = useConformanceServer();

/** Every value as the server sent it, unparsed, so two answers compare byte for byte. */
const raw = { getTypeParser: () => (v: string) => v } as unknown as pg.CustomTypesConfig;

const traces: string[] = [];

beforeAll(async () => {
  const c = await s.as();
  const steps: Array<[string, string, string, string, number | null]> = [
    ['r1', 'planner', 'Observation', 'the build is red', 0.9],
    ['r1', 'planner', 'Hypothesis', 'a flaky test', 0.4],
    ['r2', 'planner', 'Observation', 'another session', null],
    ['r1', 'planner', 'Decision', 'pin the dependency', 0.85],
    ['r3', 'critic', 'Summary', 'someone else’s', null],
  ];
  for (const [session, agent, type, content, confidence] of steps) {
    const r = await c.query(
      'INSERT INTO _cot_steps (session_id, agent_id, step_type, content, confidence, metadata) VALUES ($1, $2, $3, $4, $5, $6) RETURNING trace_id',
      [session, agent, type, content, confidence, JSON.stringify({ k: [1, 2.5], s: 'é' })],
    );
    traces.push(r.rows[0].trace_id as string);
  }
});

describe('cot_replay', () => {
  it('gives a session’s steps in order, every column of _cot_steps, as the plain SELECT does', async () => {
    const c = await s.as();
    const read = async (text: string) => c.query({ text, values: ['r1'], rowMode: 'array', types: raw } as pg.QueryConfig);
    const replay = await read('SELECT * FROM cot_replay($1)');
    const plain = await read('SELECT * FROM _cot_steps WHERE session_id = $1 ORDER BY step_index');
    expect(replay.fields.map((f) => f.name)).toEqual(plain.fields.map((f) => f.name));
    expect(replay.rows).toEqual(plain.rows);
    expect(replay.rows).toHaveLength(3);
    const named = await c.query("SELECT step_index, step_type, content FROM cot_replay('r1')");
    expect(named.rows).toEqual([
      { step_index: 0, step_type: 'Observation', content: 'the build is red' },
      { step_index: 1, step_type: 'Hypothesis', content: 'a flaky test' },
      { step_index: 2, step_type: 'Decision', content: 'pin the dependency' },
    ]);
  });

  it('gives no rows for a session that has none', async () => {
    const c = await s.as();
    expect((await c.query("SELECT * FROM cot_replay('no-such-session')")).rows).toEqual([]);
  });

  it('keeps up with a session as it grows, from any connection', async () => {
    const writer = await s.as();
    const reader = await s.fresh();
    for (let i = 0; i < 12; i++) {
      await writer.query("INSERT INTO _cot_steps (session_id, step_type, content) VALUES ('growing', 'Reasoning', $1)", [`step ${i}`]);
      const replay = (await reader.query("SELECT step_index, content FROM cot_replay('growing')")).rows;
      expect(replay).toHaveLength(i + 1);
      expect(replay.at(-1)).toEqual({ step_index: i, content: `step ${i}` });
      // The session read from the table, as an ORM writes it, keeps up the same way.
      const plain = await reader.query({ text: 'SELECT * FROM _cot_steps WHERE session_id = $1 ORDER BY ledger_seq', values: ['growing'], rowMode: 'array' });
      expect(plain.rows).toHaveLength(i + 1);
      expect(plain.rows.at(-1)?.[plain.fields.findIndex((f) => f.name === 'content')]).toBe(`step ${i}`);
    }
  });

  it('answers inside a transaction block as outside it', async () => {
    const c = await s.fresh();
    const session = { text: 'SELECT * FROM _cot_steps WHERE session_id = $1 ORDER BY step_index', values: ['r1'], rowMode: 'array' as const, types: raw };
    const outside = (await c.query("SELECT trace_id, step_index FROM cot_replay('r1')")).rows;
    const sessionOutside = (await c.query(session)).rows;
    await c.query('BEGIN');
    const inside = (await c.query("SELECT trace_id, step_index FROM cot_replay('r1')")).rows;
    const sessionInside = (await c.query(session)).rows;
    await c.query('COMMIT');
    expect(inside).toEqual(outside);
    expect(sessionOutside).toHaveLength(3);
    expect(sessionInside).toEqual(sessionOutside);
  });
});

describe('COPY of a served read', () => {
  it('copies a session and a step out as text lines, as COPY of the plain SELECT does, whatever the server holds of them', async () => {
    const c = await s.as();
    const id = traces[3] as string;
    // Read first, so that a server answering from what it holds (its session cache, its row store) holds them.
    for (let i = 0; i < 2; i++) {
      await c.query("SELECT * FROM cot_replay('r1')");
      await c.query("SELECT * FROM _cot_steps WHERE session_id = 'r1'");
      await c.query(`SELECT * FROM cot_trace('${id}')`);
    }
    const copy = async (query: string): Promise<string[]> => (await psql(s.server.port, `COPY (${query}) TO STDOUT`)).stdout.trim().split('\n');
    const session = await copy("SELECT * FROM _cot_steps WHERE session_id = 'r1' ORDER BY step_index, ledger_seq + 0");
    expect(session).toHaveLength(3);
    expect(session[2]).toContain('pin the dependency');
    expect(await copy("SELECT * FROM cot_replay('r1')")).toEqual(session);
    expect(await copy("SELECT * FROM _cot_steps WHERE session_id = 'r1' ORDER BY step_index")).toEqual(session);
    expect(await copy(`SELECT * FROM cot_trace('${id}')`)).toEqual([session[2]]);
    expect(await copy(`SELECT * FROM _cot_steps WHERE trace_id = '${id}'`)).toEqual([session[2]]);
  });
});

describe('cot_trace', () => {
  it('gives one step by trace_id, as a literal or a parameter, as the plain SELECT does', async () => {
    const c = await s.as();
    const id = traces[3] as string;
    const q = (text: string, values: unknown[] = []) => c.query({ text, values, rowMode: 'array', types: raw } as pg.QueryConfig);
    const byParam = await q('SELECT * FROM cot_trace($1)', [id]);
    const byLiteral = await q(`SELECT * FROM cot_trace('${id}')`);
    const plain = await q('SELECT * FROM _cot_steps WHERE trace_id = $1', [id]);
    expect(byParam.rows).toHaveLength(1);
    expect(byParam.rows).toEqual(plain.rows);
    expect(byLiteral.rows).toEqual(plain.rows);
    expect((await c.query('SELECT content, step_index FROM cot_trace($1)', [id])).rows).toEqual([{ content: 'pin the dependency', step_index: 2 }]);
  });

  it('gives no rows for a trace_id no step has', async () => {
    const c = await s.as();
    expect((await c.query("SELECT * FROM cot_trace('01890000-0000-7000-8000-000000000000')")).rows).toEqual([]);
  });
});

describe('cot_sessions', () => {
  it('lists an agent’s sessions with their step counts, first and last steps and chain status', async () => {
    const c = await s.as();
    const sessions = (await c.query("SELECT session_id, step_count, chain_valid FROM cot_sessions('planner') ORDER BY session_id")).rows;
    expect(sessions).toEqual([
      { session_id: 'r1', step_count: '3', chain_valid: true },
      { session_id: 'r2', step_count: '1', chain_valid: true },
    ]);
    const times = (await c.query("SELECT first_step_at, last_step_at FROM cot_sessions('planner') WHERE session_id = 'r1'")).rows[0];
    const span = (await c.query("SELECT min(created_at) AS first, max(created_at) AS last FROM _cot_steps WHERE session_id = 'r1'")).rows[0];
    expect(times).toEqual({ first_step_at: span.first, last_step_at: span.last });
    expect(times.first_step_at.getTime()).toBeLessThanOrEqual(times.last_step_at.getTime());
  });

  it('lists nothing for an agent without sessions, and only the named agent’s', async () => {
    const c = await s.as();
    expect((await c.query("SELECT * FROM cot_sessions('nobody')")).rows).toEqual([]);
    expect((await c.query("SELECT session_id FROM cot_sessions('critic')")).rows).toEqual([{ session_id: 'r3' }]);
  });
});
