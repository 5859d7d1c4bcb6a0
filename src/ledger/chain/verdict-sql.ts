import { quoteIdent, STEPS_TABLE, type LedgerTable } from './schema.js';

/** The verdict of chain verification as SQL both engines run, so that both give a broken chain the same verdict. */

/**
 * After `rows` (each row's position in its chain, the hash it should link
 * to, its recomputed hash): how each row breaks, if it does. Plain SQL, the
 * same on DuckDB and PostgreSQL, so both engines give a
 * broken chain the same verdict.
 */
/**
 * The ledger_seq ranges recorded lost, as rows (first_seq, last_seq): the
 * `appends lost` events of the log's events ledger (`events`), whose seqs
 * are ranges as `3..4,7`. `fn` names a built-in function as the engine must
 * (DuckDB's verification calls them by their qualified names).
 */
export function lostRangesSql(events: string, fn: (name: string) => string = (n) => n): string {
  const part = (i: number): string => `${fn('split_part')}(r, '..', ${i})`;
  return `SELECT CAST(${part(1)} AS BIGINT) AS first_seq, CAST(coalesce(nullif(${part(2)}, ''), ${part(1)}) AS BIGINT) AS last_seq
    FROM (SELECT unnest(${fn('string_to_array')}(seqs, ',')) AS r FROM ${events} WHERE kind = 'appends lost' AND seqs <> '') AS u`;
}

/**
 * From \`raw\` (each row with its chain_key, step_index, ledger_seq,
 * prev_hash, current_hash, recomputed, repeated_index, position,
 * expected_prev, and its predecessor's step_index and ledger_seq as
 * prev_step and prev_seq) to \`rows\`: where steps are missing before a row
 * and a recorded loss accounts for them (the ledger_seq between its
 * predecessor's and its own hold at least that many recorded lost), the row
 * and those after it stand that much further on, and its link to the row
 * that is gone is not held against it (lost_steps says how many). The same
 * rule as checkChain's.
 */
export function gapCtes(events: string | null, fn: (name: string) => string = (n) => n): string {
  // No loss recorded: no row is after a gap, and nothing more is read.
  if (events === null) return 'rows AS (SELECT raw.*, 0 AS lost_steps FROM raw)';
  return `lost AS (${lostRangesSql(events, fn)}),
explained AS (
  SELECT w.*, CASE WHEN w.jump > 0 AND (
      SELECT coalesce(${fn('sum')}(${fn('greatest')}(0, ${fn('least')}(l.last_seq, w.ledger_seq - 1) - ${fn('greatest')}(l.first_seq, coalesce(w.prev_seq, 0) + 1) + 1)), 0)
      FROM lost l) >= w.jump THEN w.jump ELSE 0 END AS lost_steps
  FROM (SELECT raw.*, raw.step_index - coalesce(raw.prev_step + 1, raw.position) AS jump FROM raw) AS w
),
rows AS (
  SELECT chain_key, step_index, prev_hash, current_hash, recomputed, repeated_index, lost_steps,
    position + ${fn('sum')}(lost_steps) OVER (PARTITION BY chain_key ORDER BY position ROWS UNBOUNDED PRECEDING) AS position,
    CASE WHEN lost_steps > 0 THEN prev_hash ELSE expected_prev END AS expected_prev
  FROM explained
)`;
}

/** The order in which a chain's breaks are told: by position, a recorded gap after every break that fails the chain. */
export const BREAK_ORDER = `position + CASE WHEN break_kind = 'gap' THEN 1099511627776 ELSE 0 END`;

/**
 * What a verification answers per chain from \`checked\`: a recorded gap is
 * said only when nothing else breaks, and does not fail the chain. `first`
 * takes an expression's value at the first break (in BREAK_ORDER).
 */
export function verdictColumns(first: (expr: string) => string, integer: (expr: string) => string): string {
  return `count(*) FILTER (WHERE break_kind IS NOT NULL AND break_kind <> 'gap') = 0 AS valid,
  CAST(count(*) AS BIGINT) AS step_count,
  ${integer(first(`CASE WHEN break_kind = 'deleted' THEN position WHEN break_kind = 'gap' THEN step_index - lost_steps ELSE step_index END`))} AS first_broken_index,
  ${first('break_kind')} AS break_kind,
  ${first(`CASE WHEN break_kind = 'edited' THEN recomputed WHEN break_kind = 'gap' THEN NULL ELSE expected_prev END`)} AS expected_hash,
  ${first(`CASE WHEN break_kind = 'edited' THEN current_hash ELSE prev_hash END`)} AS actual_hash`;
}

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
    WHEN r.recomputed IS DISTINCT FROM r.current_hash AND r.prev_hash <> r.expected_prev AND s.linked_position > r.position THEN 'reordered'
    -- A hash that cannot be recomputed (a v3 value whose key its row no longer holds) is no match either.
    WHEN r.recomputed IS DISTINCT FROM r.current_hash THEN 'edited'
    WHEN r.prev_hash <> r.expected_prev AND s.linked_position IS NOT NULL THEN 'reordered'
    WHEN r.prev_hash <> r.expected_prev THEN 'inserted'
    WHEN r.lost_steps > 0 THEN 'gap'
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
