import type { LedgerAppender } from '../chain/append.js';
import type { CutChain } from '../chain/cut.js';
import type { LedgerTable } from '../chain/schema.js';
import { encodeRanges } from '../erasure/retention-sql.js';
import { operatorName } from './key-rotation.js';
import { LOG_EVENTS_TABLE, logEventRow, logEventText, type LogEvent } from './log-events.js';
import { signNote, type NoteSigner } from './note.js';

/** `cotwire accept-loss` found nothing to record, or nowhere to record it. */
export class NoLossError extends Error {}

/**
 * Appends one "appends lost" event to the log: the ledger_seq ranges no row
 * holds, the chains cut behind the server, the operator and the reason,
 * signed by the key that signs the log's checkpoints. The caller then signs
 * a checkpoint over it.
 */
export async function recordLoss(
  writer: LedgerAppender,
  events: LedgerTable | null,
  signer: NoteSigner,
  treeSize: number,
  lost: { readonly ranges: ReadonlyArray<readonly [number, number]>; readonly cuts: readonly CutChain[] },
  reason: string,
): Promise<LogEvent> {
  if (events === null) throw new NoLossError(`the ledger ${LOG_EVENTS_TABLE} is missing or damaged: the loss cannot be recorded`);
  const event: LogEvent = {
    kind: 'appends lost',
    treeSize,
    seqs: encodeRanges(lost.ranges),
    oldKey: '',
    newKey: '',
    operator: operatorName(),
    reason: lost.cuts.length === 0 ? reason : `${reason} (chains cut: ${lost.cuts.map(cutText).join('; ')})`,
  };
  const recordedAt = new Date().toISOString();
  const note = signNote(logEventText(signer.name, event, recordedAt), signer);
  await writer.append([{ table: events, rows: [logEventRow(event, recordedAt, note)] }]);
  return event;
}

function cutText(c: CutChain): string {
  return `${c.ledger} ${c.key === '' ? '(whole table)' : JSON.stringify(c.key)} ends at step_index ${c.present?.index ?? 'none'}, recorded ${c.recorded.index}`;
}
