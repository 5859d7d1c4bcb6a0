import { quoteIdent, STEPS_TABLE, type LedgerTable } from './schema.js';

/** The verdict of chain verification as SQL both engines run, so that both give a broken chain the same verdict. */

/**
 * After `rows` (each row's position in its chain, the hash it should link
 * to, its recomputed hash): how each row breaks, if it does. Plain SQL, the
 * same on DuckDB and PostgreSQL, so both engines give a
 * broken chain the same verdict.
 */
export const BREAK_CTES = `-- Where in its chain the hash a row links to stands, to tell a reordered row (it links to a row that
-- comes later) from an inserted one (it links to nothing in the chain). Only a row that does not link
-- to its predecessor needs to know, so an intact chain costs no join.
suspects AS (
  SELECT r.chain_key, r.position, min(t.position) AS linked_position
  FROM rows r JOIN rows t ON t.chain_key = r.chain_key AND t.current_hash = r.prev_hash
  WHERE r.prev_hash <> r.expected_prev AND r.prev_hash <> ''
  GROUP BY r.chain_key, r.position
),
checked AS (
  SELECT r.*, s.linked_position, CASE
    WHEN r.repeated_index THEN 'inserted'
    WHEN r.step_index > r.position THEN 'deleted'
    WHEN r.step_index < r.position THEN 'inserted'
    WHEN r.recomputed <> r.current_hash AND r.prev_hash <> r.expected_prev AND s.linked_position > r.position THEN 'reordered'
    WHEN r.recomputed <> r.current_hash THEN 'edited'
    WHEN r.prev_hash <> r.expected_prev AND s.linked_position IS NOT NULL THEN 'reordered'
    WHEN r.prev_hash <> r.expected_prev THEN 'inserted'
  END AS break_kind
  FROM rows r LEFT JOIN suspects s ON s.chain_key = r.chain_key AND s.position = r.position
)`;

/** The chain key as SQL over the ledger's rows: its session_id column, or one chain for the whole table. */
export function chainKeySql(table: LedgerTable): string {
  return table.chainKey === null ? `''` : quoteIdent(table.chainKey);
}

/** The per-ledger macro name: cot_verify for _cot_steps, cot_verify_tool_calls for _cot_tool_calls. */
export function verifyMacroName(table: Pick<LedgerTable, 'schema' | 'name'>): string {
  if (table.name === STEPS_TABLE && table.schema === 'main') return 'cot_verify';
  return `cot_verify_${table.name
    .replace(/^_cot_?/i, '')
    .toLowerCase()
    .replace(/[^a-z0-9_]/g, '_')}`;
}
