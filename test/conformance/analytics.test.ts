import { beforeAll, describe, expect, it } from 'vitest';
import { useConformanceServer } from '../fixtures/conformance.js';

/**
 * The reasoning analytics (docs/analytics.md) over a small ledger whose
 * every figure is worked out by hand, or recomputed here from the rows.
 */
const s = useConformanceServer();

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
  const c = await s.as();
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

const num = (v: unknown): number | null => (v === null || v === undefined ? null : Number(v));

describe('cot_session_summary()', () => {
  it('summarises each session: counts, totals, the type mix, confidence, outcome and convergence', async () => {
    const c = await s.as();
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
    expect(num(s1?.['mean_confidence'])).toBeCloseTo(0.7, 10);
    expect([s1?.['plan_steps'], s1?.['observation_steps'], s1?.['reasoning_steps'], s1?.['decision_steps'], s1?.['final_answer_steps']].map(num)).toEqual([
      1, 1, 1, 1, 1,
    ]);
    // The Decision before the first Observation does not count: convergence is measured from the Observation.
    expect([s2?.['first_observation_index'], s2?.['first_decision_index'], s2?.['steps_to_decision']]).toEqual([1, 4, 3]);
    expect([s2?.['has_error'], s2?.['has_correction'], s2?.['reached_final_answer'], s2?.['final_confidence']]).toEqual([true, true, false, null]);
    expect(num(s2?.['decision_steps'])).toBe(2);
    expect([s3?.['model'], s3?.['first_decision_index'], s3?.['steps_to_decision'], s3?.['mean_confidence']]).toEqual([null, null, null, null]);
    expect(
      Object.keys(s1 ?? {})
        .filter((k) => k.endsWith('_steps'))
        .sort(),
    ).toEqual(
      [
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
      ].sort(),
    );
  });

  it('can be filtered and sorted with ordinary SQL', async () => {
    const c = await s.as();
    const r = await c.query("SELECT session_id FROM cot_session_summary() WHERE agent_id = 'planner' ORDER BY step_count DESC, session_id LIMIT 1");
    expect(r.rows).toEqual([{ session_id: 's1' }]);
  });
});

describe('cot_convergence()', () => {
  it('lists the convergence figures of the summary per session', async () => {
    const c = await s.as();
    const { rows } = await c.query(
      'SELECT session_id, first_observation_index, first_decision_index, steps_to_decision, reached_final_answer FROM cot_convergence() ORDER BY session_id',
    );
    expect(rows).toEqual([
      { session_id: 's1', first_observation_index: 1, first_decision_index: 3, steps_to_decision: 2, reached_final_answer: true },
      { session_id: 's2', first_observation_index: 1, first_decision_index: 4, steps_to_decision: 3, reached_final_answer: false },
      { session_id: 's3', first_observation_index: 0, first_decision_index: null, steps_to_decision: null, reached_final_answer: false },
    ]);
  });
});

describe('cot_agent_stats() and cot_model_stats()', () => {
  /** The same figures, computed here from the rows of one group. */
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
    return round({
      sessions: new Set(rows.map((r) => r[0])).size,
      steps: rows.length,
      mean_duration_ms: durations.length === 0 ? null : durations.reduce((a, b) => a + b, 0) / durations.length,
      p95_duration_ms: lo === null || hi === null ? null : lo + (hi - lo) * (at - Math.floor(at)),
      tokens: rows.reduce((a, r) => a + (r[6] ?? 0), 0),
      error_rate: rows.filter((r) => r[3] === 'Error').length / rows.length,
      correction_rate: rows.filter((r) => r[3] === 'Correction').length / rows.length,
      sessions_with_error: new Set(rows.filter((r) => r[3] === 'Error').map((r) => r[0])).size,
      mean_final_confidence: finals.length === 0 ? null : finals.reduce((a, b) => a + b, 0) / finals.length,
    });
  }

  function round(o: Record<string, number | null>): Record<string, number | null> {
    return Object.fromEntries(Object.entries(o).map(([k, v]) => [k, v === null ? null : Math.round(v * 1e9) / 1e9]));
  }

  const figures = (r: Record<string, unknown>): Record<string, number | null> =>
    round(
      Object.fromEntries(
        [
          'sessions',
          'steps',
          'mean_duration_ms',
          'p95_duration_ms',
          'tokens',
          'error_rate',
          'correction_rate',
          'sessions_with_error',
          'mean_final_confidence',
        ].map((k) => [k, num(r[k])]),
      ),
    );

  it('compute per agent what the rows say', async () => {
    const c = await s.as();
    const { rows } = await c.query('SELECT * FROM cot_agent_stats()');
    expect(rows.map((r) => r.agent_id)).toEqual(['critic', 'planner']);
    for (const r of rows) expect(figures(r), r.agent_id).toEqual(expected(ROWS.filter((x) => x[1] === r.agent_id)));
  });

  it('compute per model what the rows say, with the steps without a model last', async () => {
    const c = await s.as();
    const { rows } = await c.query('SELECT * FROM cot_model_stats()');
    expect(rows.map((r) => r.model)).toEqual(['m-large', 'm-small', null]);
    for (const r of rows) expect(figures(r), String(r.model)).toEqual(expected(ROWS.filter((x) => x[2] === r.model)));
  });

  it('take a time window [since, until), either bound open', async () => {
    const c = await s.as();
    const all = await c.query("SELECT steps FROM cot_agent_stats('2000-01-01T00:00:00Z', '2100-01-01T00:00:00Z') WHERE agent_id = 'planner'");
    expect(num(all.rows[0]?.steps)).toBe(10);
    expect((await c.query("SELECT * FROM cot_agent_stats('2100-01-01T00:00:00Z', '2200-01-01T00:00:00Z')")).rows).toEqual([]);
    const { rows } = await c.query('SELECT created_at FROM _cot_steps ORDER BY ledger_seq');
    const sixth = (rows[5] as { created_at: Date }).created_at;
    // A window from a step's own time includes it; one up to it leaves it out.
    expect((await c.query('SELECT sum(steps) AS n FROM cot_agent_stats($1::timestamptz)', [sixth])).rows.map((r) => num(r.n))).toEqual([ROWS.length - 5]);
    expect((await c.query('SELECT sum(steps) AS n FROM cot_agent_stats(NULL, $1::timestamptz)', [sixth])).rows.map((r) => num(r.n))).toEqual([5]);
    expect((await c.query('SELECT sum(steps) AS n FROM cot_model_stats(NULL, $1::timestamptz)', [sixth])).rows.map((r) => num(r.n))).toEqual([5]);
  });
});
