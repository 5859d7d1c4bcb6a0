import type { LedgerTable } from './chain/schema.js';

/**
 * cotwire's SQL functions as one engine spells them. DuckDB defines them as
 * macros on each client connection; PostgreSQL as functions in the
 * database, once, with their grants. The same names answer with the same
 * columns on both, and verification gives the same verdicts (the verdict's
 * SQL, `chain/verdict-sql.ts`, is shared). Each wing has one.
 */
export interface SqlDialect {
  /** cot_verify(chain) and cot_verify_all() of `_cot_steps`, cot_verify_<name>(chain) and _all() of any other ledger. */
  verifyFunctions(table: LedgerTable): string[];
  /** The steps ledger's readers and analytics: cot_replay, cot_trace, cot_sessions, cot_session_summary, cot_convergence, cot_agent_stats, cot_model_stats. */
  stepsFunctions(steps: LedgerTable): string[];
  /** The global log's: cot_checkpoint, cot_prove, cot_consistency, over the proof functions. */
  proofFunctions(): string[];
  /** The steps' receipts against the latest checkpoint: cot_receipts(session), cot_receipt(trace_id); after proofFunctions. */
  receiptFunctions(steps: LedgerTable): string[];
  /** cot_search and cot_similar over vectors of `dimensions`; absent where the engine has no search yet. */
  searchFunctions?(dimensions: number): string[];
}

/** Every function of one ledger: its verification, and the steps ledger's readers and analytics. */
export function ledgerFunctions(dialect: SqlDialect, table: LedgerTable): string[] {
  return [...dialect.verifyFunctions(table), ...(table.isSteps ? dialect.stepsFunctions(table) : [])];
}
