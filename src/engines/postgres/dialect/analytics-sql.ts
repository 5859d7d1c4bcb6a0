import { stepTypeColumn } from '../../../ledger/sql-functions.js';
import { functionGrantees, type PgRoles } from '../ledger/names.js';
import { STEP_TYPES, type LedgerTable } from '../../../ledger/chain/schema.js';

/**
 * The reasoning analytics of analytics-sql.ts as PostgreSQL functions over
 * `public._cot_steps`, with the same columns in the same order
 * (docs/analytics.md): DuckDB's arg_min and arg_max become ordered array_agg
 * without NULLs, its quantile_cont PostgreSQL's percentile_cont.
 */

const typeCounts = STEP_TYPES.map((t) => `count(*) FILTER (WHERE step_type = '${t}')::bigint AS ${stepTypeColumn(t)}`).join(',\n    ');
const typeCountColumns = STEP_TYPES.map((t) => `${stepTypeColumn(t)} bigint`).join(', ');

function summarySql(steps: string): string {
  return `
  WITH per_session AS (
    SELECT session_id,
      (array_agg(agent_id ORDER BY step_index) FILTER (WHERE agent_id IS NOT NULL))[1] AS agent_id,
      (array_agg(org_id ORDER BY step_index) FILTER (WHERE org_id IS NOT NULL))[1] AS org_id,
      mode() WITHIN GROUP (ORDER BY model) AS model,
      count(*)::bigint AS step_count,
      min(created_at) AS first_step_at,
      max(created_at) AS last_step_at,
      sum(duration_ms)::bigint AS duration_ms,
      sum(token_count)::bigint AS token_total,
      ${typeCounts},
      avg(confidence) AS mean_confidence,
      count(*) FILTER (WHERE step_type = 'FinalAnswer') > 0 AS reached_final_answer,
      (array_agg(confidence ORDER BY step_index DESC) FILTER (WHERE step_type = 'FinalAnswer' AND confidence IS NOT NULL))[1] AS final_confidence,
      count(*) FILTER (WHERE step_type = 'Error') > 0 AS has_error,
      count(*) FILTER (WHERE step_type = 'Correction') > 0 AS has_correction,
      min(step_index) FILTER (WHERE step_type = 'Observation') AS first_observation_index,
      array_agg(step_index ORDER BY step_index) FILTER (WHERE step_type = 'Decision') AS decisions
    FROM ${steps}
    GROUP BY session_id
  )
  SELECT session_id, agent_id, org_id, model, step_count, first_step_at, last_step_at, duration_ms, token_total,
    ${STEP_TYPES.map((t) => stepTypeColumn(t)).join(', ')},
    mean_confidence, reached_final_answer, final_confidence, has_error, has_correction, first_observation_index,
    d.first AS first_decision_index, d.first - first_observation_index AS steps_to_decision
  FROM per_session, LATERAL (SELECT min(i) AS first FROM unnest(decisions) AS i WHERE i >= first_observation_index) AS d`;
}

const SUMMARY_COLUMNS = `session_id text, agent_id text, org_id text, model text, step_count bigint, first_step_at timestamptz, last_step_at timestamptz,
  duration_ms bigint, token_total bigint, ${typeCountColumns}, mean_confidence double precision, reached_final_answer boolean,
  final_confidence double precision, has_error boolean, has_correction boolean, first_observation_index integer, first_decision_index integer,
  steps_to_decision integer`;

function statsSql(steps: string, group: 'agent_id' | 'model'): string {
  return `
  SELECT ${group},
    count(DISTINCT session_id)::bigint, count(*)::bigint, avg(duration_ms)::float8,
    percentile_cont(0.95) WITHIN GROUP (ORDER BY duration_ms), sum(token_count)::bigint,
    avg(CASE WHEN step_type = 'Error' THEN 1.0 ELSE 0.0 END)::float8, avg(CASE WHEN step_type = 'Correction' THEN 1.0 ELSE 0.0 END)::float8,
    count(DISTINCT session_id) FILTER (WHERE step_type = 'Error')::bigint, avg(confidence) FILTER (WHERE step_type = 'FinalAnswer'),
    min(created_at), max(created_at)
  FROM ${steps}
  WHERE ($1 IS NULL OR created_at >= $1) AND ($2 IS NULL OR created_at < $2)
  GROUP BY ${group}
  ORDER BY ${group} NULLS LAST`;
}

const statsColumns = (group: string): string =>
  `${group} text, sessions bigint, steps bigint, mean_duration_ms double precision, p95_duration_ms double precision, tokens bigint,
   error_rate double precision, correction_rate double precision, sessions_with_error bigint, mean_final_confidence double precision,
   first_step_at timestamptz, last_step_at timestamptz`;

/** The statements that (re)create the analytics functions, as the owner, with EXECUTE for the client and writer roles. */
export function pgAnalyticsFunctions(steps: LedgerTable, roles: PgRoles): string[] {
  const from = steps.relation ?? '';
  const grant = (signature: string): string[] => [
    `REVOKE ALL ON FUNCTION ${signature} FROM PUBLIC`,
    `GRANT EXECUTE ON FUNCTION ${signature} TO ${functionGrantees(roles)}`,
  ];
  const fn = (name: string, args: string, columns: string, body: string, signature: string): string[] => [
    `CREATE OR REPLACE FUNCTION public.${name}(${args}) RETURNS TABLE (${columns}) LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $cotwire$${body}$cotwire$`,
    ...grant(signature),
  ];
  return [
    ...fn('cot_session_summary', '', SUMMARY_COLUMNS, summarySql(from), 'public.cot_session_summary()'),
    ...fn(
      'cot_convergence',
      '',
      'session_id text, agent_id text, model text, first_observation_index integer, first_decision_index integer, steps_to_decision integer, reached_final_answer boolean',
      'SELECT session_id, agent_id, model, first_observation_index, first_decision_index, steps_to_decision, reached_final_answer FROM public.cot_session_summary()',
      'public.cot_convergence()',
    ),
    ...fn(
      'cot_agent_stats',
      'since timestamptz DEFAULT NULL, until timestamptz DEFAULT NULL',
      statsColumns('agent_id'),
      statsSql(from, 'agent_id'),
      'public.cot_agent_stats(timestamptz, timestamptz)',
    ),
    ...fn(
      'cot_model_stats',
      'since timestamptz DEFAULT NULL, until timestamptz DEFAULT NULL',
      statsColumns('model'),
      statsSql(from, 'model'),
      'public.cot_model_stats(timestamptz, timestamptz)',
    ),
  ];
}
