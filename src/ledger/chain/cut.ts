import { PgError } from '../../errors/pg-error.js';
import { SqlState } from '../../errors/sqlstate.js';

/** A chain whose rows end before the head the server made durable: its last steps were removed behind it. */
export interface CutChain {
  /** The ledger as `schema.name`. */
  readonly ledger: string;
  readonly key: string;
  /** The head the server made durable; `seq` is its ledger_seq where known (0 otherwise). */
  readonly recorded: { readonly index: number; readonly hash: string; readonly seq: number };
  /** The head the rows hold now; null when the chain has no row left. */
  readonly present: { readonly index: number; readonly hash: string } | null;
}

/**
 * Why an append onto a cut chain is refused: it would link to the last row
 * left and hide the cut behind a chain that verifies. `accept` says how the
 * loss is recorded on this engine.
 */
export function cutChainError(c: CutChain, accept: string): PgError {
  const chain = c.key === '' ? `the chain of ledger "${c.ledger}"` : `chain "${c.key}" of ledger "${c.ledger}"`;
  const [now, gone] =
    c.present === null ? ['holds no row', 'its steps are'] : [`ends at step_index ${c.present.index}`, `the steps after ${c.present.index} are`];
  return new PgError(
    SqlState.DataCorrupted,
    `${chain} ${now}, but the server made step_index ${c.recorded.index} durable: ${gone} gone from the database (removed behind the server, or lost with its journal); appends to it are refused`,
    {
      hint: `Put back what was removed (a backup holds it), or record the loss with ${accept}. SELECT * FROM cot_audit() lists what is missing. Other chains are not affected.`,
    },
  );
}
