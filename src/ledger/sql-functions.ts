/**
 * The names of cotwire's own SQL functions, the same on both engines: the guard reserves them, so
 * that no client can shadow one with a function of its own.
 */

export const ANALYTICS_FUNCTIONS = ['cot_session_summary', 'cot_convergence', 'cot_agent_stats', 'cot_model_stats'];

/** observation_steps, tool_call_steps, final_answer_steps, plan_steps ... */
export const stepTypeColumn = (type: string): string =>
  `${type
    .replace(/Step$/, '')
    .replace(/([a-z])([A-Z])/g, '$1_$2')
    .toLowerCase()}_steps`;
export const AUDIT_SQL_FUNCTIONS = ['cot_audit', 'cot_audit_report'];

/** The names clients may not give their own macros. */
export const PROOF_SQL_FUNCTIONS = [
  'cot_log_root',
  'cot_inclusion_proof',
  'cot_consistency_proof',
  'cot_checkpoint',
  'cot_prove',
  'cot_consistency',
  'cot_receipts',
  'cot_receipt',
];

/** The SQL functions of semantic search, reserved from clients. */
export const SEARCH_SQL_FUNCTIONS = ['cot_search', 'cot_similar', 'cot_query_vector'];
