import type { LedgerTable } from './chain/schema.js';
import { markerOf, redactableColumns } from './erasure/redactions.js';

/**
 * What both engines' `cot_receipts(session)` and `cot_receipt(trace_id)` put in a receipt (docs/transparency-log.md,
 * "Receipts"): the fields that do not depend on the engine's SQL, and which columns can stand for a redacted value.
 */

export const RECEIPT_FORMAT = 'cotwire-receipt/v1';

/** The columns of the result: the step, and its receipt as JSON text (NULL until a checkpoint covers the step). */
export const RECEIPT_RESULT = ['step_index', 'trace_id', 'receipt'] as const;

/** Each redactable column with the canonical text of its marker: a recorded digest stands for the column only when it holds that. */
export function receiptMarkers(table: LedgerTable): Array<{ readonly column: string; readonly marker: string | null }> {
  return redactableColumns(table).flatMap((c) => {
    const m = markerOf(c);
    return m === null ? [] : [{ column: c.name, marker: m.text }];
  });
}
