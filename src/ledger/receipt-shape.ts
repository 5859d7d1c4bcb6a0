import { quoteLiteral, type LedgerTable } from './chain/schema.js';
import { markerOf, redactableColumns } from './erasure/redactions.js';

/**
 * What both engines' `cot_receipts(session)` and `cot_receipt(trace_id)` put in a receipt (docs/transparency-log.md,
 * "Receipts"): the fields that do not depend on the engine's SQL, and which columns can stand for a redacted value.
 */

export const RECEIPT_FORMAT = 'cotwire-receipt/v1';

/** The columns of the result: the step, and its receipt as JSON text (NULL until a checkpoint covers the step). */
export const RECEIPT_RESULT = ['step_index', 'trace_id', 'receipt'] as const;

/**
 * The SQL condition that a redaction record `x` (its `column_name`) stands for its column: a recorded digest
 * stands for a column only while the column holds its marker, as in verification. `textOf` is the engine's
 * expression of a column's canonical text.
 */
export function holdsMarkerSql(table: LedgerTable, textOf: (column: string) => string): string {
  const markers = redactableColumns(table).flatMap((c) => {
    const m = markerOf(c);
    return m === null ? [] : [{ column: c.name, marker: m.text }];
  });
  if (markers.length === 0) return 'false';
  const arms = markers.map(
    (m) => `WHEN ${quoteLiteral(m.column)} THEN ${textOf(m.column)} IS NOT DISTINCT FROM ${m.marker === null ? 'NULL' : quoteLiteral(m.marker)}`,
  );
  return `CASE x.column_name ${arms.join(' ')} ELSE false END`;
}
