import { STEPS_TABLE, STEP_TYPES } from '../../../ledger/chain/schema.js';
import { stepTypeColumn } from '../../../ledger/sql-functions.js';

/**
 * Reasoning analytics as table macros over `_cot_steps`: the questions that
 * dashboards and agents ask of traces, answered the same way from every
 * client. They are plain aggregations (no window over the whole ledger), so
 * a panel over millions of steps costs one scan. docs/analytics.md documents
 * every column.
 */

const FROM = `main.${STEPS_TABLE}`;

const typeCounts = STEP_TYPES.map((t) => `count(*) FILTER (WHERE step_type = '${t}')::BIGINT AS ${stepTypeColumn(t)}`).join(',\n      ');

/** The first Decision at or after the first Observation, from the session's ordered Decision indexes. */
const SESSION_SUMMARY = `
    WITH per_session AS (
      SELECT session_id,
        arg_min(agent_id, step_index) AS agent_id,
        arg_min(org_id, step_index) AS org_id,
        mode(model) AS model,
        count(*)::BIGINT AS step_count,
        min(created_at) AS first_step_at,
        max(created_at) AS last_step_at,
        sum(duration_ms)::BIGINT AS duration_ms,
        sum(token_count)::BIGINT AS token_total,
        ${typeCounts},
        avg(confidence) AS mean_confidence,
        count(*) FILTER (WHERE step_type = 'FinalAnswer') > 0 AS reached_final_answer,
        arg_max(confidence, step_index) FILTER (WHERE step_type = 'FinalAnswer') AS final_confidence,
        count(*) FILTER (WHERE step_type = 'Error') > 0 AS has_error,
        count(*) FILTER (WHERE step_type = 'Correction') > 0 AS has_correction,
        min(step_index) FILTER (WHERE step_type = 'Observation') AS first_observation_index,
        list(step_index ORDER BY step_index) FILTER (WHERE step_type = 'Decision') AS decisions
      FROM ${FROM}
      GROUP BY session_id
    )
    SELECT * EXCLUDE (decisions),
      list_filter(decisions, i -> i >= first_observation_index)[1] AS first_decision_index,
      list_filter(decisions, i -> i >= first_observation_index)[1] - first_observation_index AS steps_to_decision
    FROM per_session`;

/** Per group (agent or model) over the steps created in [since, until); NULL bounds are open. */
function statsSql(group: 'agent_id' | 'model', since: string, until: string): string {
  return `
    SELECT ${group},
      count(DISTINCT session_id)::BIGINT AS sessions,
      count(*)::BIGINT AS steps,
      avg(duration_ms) AS mean_duration_ms,
      quantile_cont(duration_ms, 0.95) AS p95_duration_ms,
      sum(token_count)::BIGINT AS tokens,
      avg(CASE WHEN step_type = 'Error' THEN 1.0 ELSE 0.0 END) AS error_rate,
      avg(CASE WHEN step_type = 'Correction' THEN 1.0 ELSE 0.0 END) AS correction_rate,
      count(DISTINCT session_id) FILTER (WHERE step_type = 'Error')::BIGINT AS sessions_with_error,
      avg(confidence) FILTER (WHERE step_type = 'FinalAnswer') AS mean_final_confidence,
      min(created_at) AS first_step_at,
      max(created_at) AS last_step_at
    FROM ${FROM}
    WHERE (${since} IS NULL OR created_at >= CAST(${since} AS TIMESTAMPTZ))
      AND (${until} IS NULL OR created_at < CAST(${until} AS TIMESTAMPTZ))
    GROUP BY ${group}
    ORDER BY ${group} NULLS LAST`;
}

export const ANALYTICS_MACROS: readonly string[] = [
  `CREATE OR REPLACE TEMP MACRO cot_session_summary() AS TABLE ${SESSION_SUMMARY}`,
  `CREATE OR REPLACE TEMP MACRO cot_convergence() AS TABLE
    SELECT session_id, agent_id, model, first_observation_index, first_decision_index, steps_to_decision, reached_final_answer
    FROM cot_session_summary()`,
  `CREATE OR REPLACE TEMP MACRO cot_agent_stats(since := NULL, until := NULL) AS TABLE ${statsSql('agent_id', 'since', 'until')}`,
  `CREATE OR REPLACE TEMP MACRO cot_model_stats(since := NULL, until := NULL) AS TABLE ${statsSql('model', 'since', 'until')}`,
];
