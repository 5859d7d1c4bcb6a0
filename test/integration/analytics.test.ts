import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type pg from 'pg';
import { STEP_TYPES } from '../../src/ledger/chain/schema.js';
import { sqlstate } from '../fixtures/errors.js';
import { startTestServer, type TestServer } from '../fixtures/server.js';

/**
 * The analytics macros against a small ledger whose every figure is worked
 * out by hand below (and, for the per-group statistics, recomputed in
 * JavaScript from the rows themselves).
 */

let server: TestServer;
let c: pg.Client;

// session, agent, model, step_type, confidence, duration_ms, token_count
type Row = [string, string, string | null, string, number | null, number | null, number | null];
const ROWS: Row[] = [
  ['s1', 'planner', 'm-large', 'PlanStep', 0.5, 100, 10],
  ['s1', 'planner', 'm-large', 'Observation', 0.6, 200, 20],
  ['s1', 'planner', 'm-large', 'Reasoning', 0.7, 300, 30],
  ['s1', 'planner', 'm-small', 'Decision', 0.8, 400, 40],
  ['s1', 'planner', 'm-large', 'FinalAnswer', 0.9, 500, 50],
  ['s2', 'planner', 'm-small', 'Decision', 0.2, 10, 5],
  ['s2', 'planner', 'm-small', 'Observation', 0.3, 20, 5],
  ['s2', 'planner', 'm-small', 'Error', null, 30, null],
  ['s2', 'planner', 'm-small', 'Correction', 0.4, 40, 5],
  ['s2', 'planner', 'm-small', 'Decision', 0.5, 50, 5],
  ['s3', 'critic', null, 'Observation', null, null, null],
  ['s3', 'critic', null, 'Error', null, 1000, 100],
];

beforeAll(async () => {
  server = await startTestServer();
  c = await server.client();
  for (const [session, agent, model, type, confidence, duration, tokens] of ROWS) {
    await c.query('INSERT INTO _cot_steps (session_id, agent_id, model, step_type, confidence, duration_ms, token_count) VALUES ($1, $2, $3, $4, $5, $6, $7)', [
      session,
      agent,
      model,
      type,
      confidence,
      duration,
      tokens,
    ]);
  }
});
afterAll(async () => {
  await server[Symbol.asyncDispose]();
});

const num = (v: unknown): number | null => (v === null ? null : Number(v));

describe('cot_session_summary()', () => {
  it('summarises each session: counts, totals, the type mix, confidence, outcome and convergence', async () => {
    const { rows } = await c.query('SELECT * FROM cot_session_summary() ORDER BY session_id');
    expect(rows.map((r) => r.session_id)).toEqual(['s1', 's2', 's3']);
    const [s1, s2, s3] = rows as Array<Record<string, unknown>>;
    expect({
      agent: s1?.['agent_id'],
      model: s1?.['model'],
      steps: num(s1?.['step_count']),
      duration: num(s1?.['duration_ms']),
      tokens: num(s1?.['token_total']),
      final: s1?.['reached_final_answer'],
      finalConfidence: s1?.['final_confidence'],
      error: s1?.['has_error'],
      correction: s1?.['has_correction'],
      convergence: [s1?.['first_observation_index'], s1?.['first_decision_index'], s1?.['steps_to_decision']],
    }).toEqual({
      agent: 'planner',
      model: 'm-large',
      steps: 5,
      duration: 1500,
      tokens: 150,
      final: true,
      finalConfidence: 0.9,
      error: false,
      correction: false,
      convergence: [1, 3, 2],
    });
    expect(s1?.['mean_confidence']).toBeCloseTo(0.7, 10);
    expect([s1?.['plan_steps'], s1?.['observation_steps'], s1?.['reasoning_steps'], s1?.['decision_steps'], s1?.['final_answer_steps']].map(num)).toEqual([
      1, 1, 1, 1, 1,
    ]);
    // The Decision before the first Observation does not count: convergence is measured from the Observation.
    expect([s2?.['first_observation_index'], s2?.['first_decision_index'], s2?.['steps_to_decision']]).toEqual([1, 4, 3]);
    expect([s2?.['has_error'], s2?.['has_correction'], s2?.['reached_final_answer'], s2?.['final_confidence']]).toEqual([true, true, false, null]);
    expect(num(s2?.['decision_steps'])).toBe(2);
    // No Decision at all: no convergence figure.
    expect([s3?.['model'], s3?.['first_decision_index'], s3?.['steps_to_decision'], s3?.['mean_confidence']]).toEqual([null, null, null, null]);
    // Every step type has its column.
    const typeColumns = Object.keys(s1 ?? {}).filter((k) => k.endsWith('_steps'));
    expect(typeColumns).toEqual([
      'observation_steps',
      'hypothesis_steps',
      'tool_call_steps',
      'tool_result_steps',
      'reasoning_steps',
      'decision_steps',
      'action_steps',
      'error_steps',
      'correction_steps',
      'summary_steps',
      'plan_steps',
      'final_answer_steps',
    ]);
    expect(typeColumns.length).toBe(STEP_TYPES.length);
  });

  it('cot_convergence() lists the same figures per session', async () => {
    const { rows } = await c.query('SELECT session_id, steps_to_decision FROM cot_convergence() ORDER BY session_id');
    expect(rows).toEqual([
      { session_id: 's1', steps_to_decision: 2 },
      { session_id: 's2', steps_to_decision: 3 },
      { session_id: 's3', steps_to_decision: null },
    ]);
  });
});

describe('cot_agent_stats() and cot_model_stats()', () => {
  /** The same figures computed here from the rows, for one group. */
  function expected(rows: Row[]): Record<string, number | null> {
    const durations = rows
      .map((r) => r[5])
      .filter((d): d is number => d !== null)
      .sort((a, b) => a - b);
    // quantile_cont: linear interpolation between the closest ranks.
    const at = 0.95 * (durations.length - 1);
    const lo = durations[Math.floor(at)] ?? null;
    const hi = durations[Math.ceil(at)] ?? null;
    const finals = rows.filter((r) => r[3] === 'FinalAnswer' && r[4] !== null).map((r) => r[4] as number);
    return {
      sessions: new Set(rows.map((r) => r[0])).size,
      steps: rows.length,
      mean_duration_ms: durations.length === 0 ? null : durations.reduce((a, b) => a + b, 0) / durations.length,
      p95_duration_ms: lo === null || hi === null ? null : lo + (hi - lo) * (at - Math.floor(at)),
      tokens: rows.reduce((a, r) => a + (r[6] ?? 0), 0),
      error_rate: rows.filter((r) => r[3] === 'Error').length / rows.length,
      correction_rate: rows.filter((r) => r[3] === 'Correction').length / rows.length,
      sessions_with_error: new Set(rows.filter((r) => r[3] === 'Error').map((r) => r[0])).size,
      mean_final_confidence: finals.length === 0 ? null : finals.reduce((a, b) => a + b, 0) / finals.length,
    };
  }

  function figures(r: Record<string, unknown>): Record<string, number | null> {
    const out: Record<string, number | null> = {};
    for (const k of [
      'sessions',
      'steps',
      'mean_duration_ms',
      'p95_duration_ms',
      'tokens',
      'error_rate',
      'correction_rate',
      'sessions_with_error',
      'mean_final_confidence',
    ]) {
      const v = num(r[k]);
      out[k] = v === null ? null : Math.round(v * 1e9) / 1e9;
    }
    return out;
  }

  const rounded = (o: Record<string, number | null>): Record<string, number | null> =>
    Object.fromEntries(Object.entries(o).map(([k, v]) => [k, v === null ? null : Math.round(v * 1e9) / 1e9]));

  it('computes per agent what the rows say', async () => {
    const { rows } = await c.query('SELECT * FROM cot_agent_stats()');
    expect(rows.map((r) => r.agent_id)).toEqual(['critic', 'planner']);
    for (const r of rows) expect(figures(r), r.agent_id).toEqual(rounded(expected(ROWS.filter((x) => x[1] === r.agent_id))));
  });

  it('computes per model what the rows say, with steps without a model last', async () => {
    const { rows } = await c.query('SELECT * FROM cot_model_stats()');
    expect(rows.map((r) => r.model)).toEqual(['m-large', 'm-small', null]);
    for (const r of rows) expect(figures(r), String(r.model)).toEqual(rounded(expected(ROWS.filter((x) => x[2] === r.model))));
  });

  it('takes a time window [since, until), as Grafana passes $__timeFrom() and $__timeTo()', async () => {
    const all = await c.query("SELECT steps FROM cot_agent_stats('2000-01-01T00:00:00Z', '2100-01-01T00:00:00Z') WHERE agent_id = 'planner'");
    expect(num(all.rows[0]?.steps)).toBe(10);
    expect((await c.query("SELECT * FROM cot_agent_stats('2100-01-01T00:00:00Z', '2200-01-01T00:00:00Z')")).rows).toEqual([]);
    const { rows } = await c.query('SELECT created_at FROM _cot_steps ORDER BY ledger_seq');
    const sixth = (rows[5] as { created_at: Date }).created_at;
    const since = await c.query('SELECT sum(steps)::INTEGER AS n FROM cot_agent_stats($1::timestamptz)', [sixth]);
    expect(since.rows).toEqual([{ n: ROWS.length - 5 }]);
    const until = await c.query('SELECT sum(steps)::INTEGER AS n FROM cot_agent_stats(NULL, $1::timestamptz)', [sixth]);
    expect(until.rows).toEqual([{ n: 5 }]);
  });

  it('answers the Grafana panel queries of docs/analytics.md', async () => {
    // $__timeGroupAlias(created_at, '1h') and $__timeFilter(created_at), as Grafana's PostgreSQL data source expands them.
    const panel = await c.query(
      `SELECT floor(extract(epoch from created_at)/3600)*3600 AS "time", step_type AS metric, count(*) AS value
       FROM _cot_steps WHERE created_at BETWEEN '2000-01-01T00:00:00Z' AND '2100-01-01T00:00:00Z'
       GROUP BY 1, 2 ORDER BY 1, 2`,
    );
    expect(panel.rows.reduce((a, r: { value: string }) => a + Number(r.value), 0)).toBe(ROWS.length);
    const summary = await c.query(
      "SELECT agent_id, count(*) AS sessions, avg(steps_to_decision) AS mean_steps_to_decision FROM cot_session_summary() WHERE last_step_at BETWEEN '2000-01-01T00:00:00Z' AND '2100-01-01T00:00:00Z' GROUP BY agent_id ORDER BY agent_id",
    );
    expect(summary.rows.map((r) => [r.agent_id, num(r.sessions), num(r.mean_steps_to_decision)])).toEqual([
      ['critic', 1, null],
      ['planner', 2, 2.5],
    ]);
  });

  it('cannot be replaced by a client', async () => {
    expect(await sqlstate(c.query('CREATE MACRO cot_agent_stats() AS TABLE SELECT 1'))).toBe('42501');
  });
});
