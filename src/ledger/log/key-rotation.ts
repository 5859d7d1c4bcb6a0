import { userInfo } from 'node:os';
import type { LedgerAppender } from '../chain/append.js';
import type { LedgerTable } from '../chain/schema.js';
import { keyBreak, keyIdText, noteSigners } from './key-continuity.js';
import { LOG_EVENTS_TABLE, logEventRow, logEventText, type LogEvent } from './log-events.js';
import { signNote, verifierKeyOf, type NoteSigner } from './note.js';

/** What `cotwire keygen --rotate` asks for. */
export interface RotationRequest {
  /** The key that signed the last checkpoint, when the operator still has it; null: it is lost. */
  readonly oldSigner: NoteSigner | null;
  readonly newSigner: NoteSigner;
  /** Required when the old key is lost: it is the whole account of why the chain of keys breaks there. */
  readonly reason: string;
}

export class RotationError extends Error {}

/** Who ran the command, for the record: the operating system's user name. */
export function operatorName(): string {
  try {
    return userInfo().username;
  } catch {
    return 'unknown';
  }
}

/**
 * Records a key rotation in the log and returns the event: signed by the old
 * key, which vouches for the new one, or, when the old key is lost, a
 * "key lost" event signed by the new key alone, which no verifier follows
 * without being given the new key. The caller then signs a checkpoint with
 * the new key, so that the log's last checkpoint is the new key's.
 */
export async function recordRotation(
  writer: LedgerAppender,
  events: LedgerTable | null,
  lastCheckpoint: string | null,
  treeSize: number,
  request: RotationRequest,
): Promise<LogEvent> {
  if (events === null) throw new RotationError(`the ledger ${LOG_EVENTS_TABLE} is missing or damaged: a rotation cannot be recorded`);
  const { oldSigner, newSigner } = request;
  const signedBy = lastCheckpoint === null ? null : (noteSigners(lastCheckpoint)[0] ?? null);
  if (oldSigner !== null && keyBreak(lastCheckpoint, oldSigner) !== null) {
    throw new RotationError(
      `--old-key is ${keyIdText(oldSigner)}, but the log's last checkpoint was signed by ${signedBy === null ? 'no key' : keyIdText(signedBy)}: give the key that signed it, or --reason without --old-key when it is lost`,
    );
  }
  if (oldSigner === null && request.reason.trim() === '') {
    throw new RotationError('the old key is not given, so it is recorded as lost: say why with --reason');
  }
  if (signedBy !== null && signedBy.name === newSigner.name && signedBy.keyHash === newSigner.keyHash) {
    throw new RotationError(`the new key ${keyIdText(newSigner)} already signed the last checkpoint: there is nothing to rotate`);
  }
  const event: LogEvent = {
    kind: oldSigner === null ? 'key lost' : 'key rotated',
    treeSize,
    seqs: '',
    oldKey: oldSigner !== null ? verifierKeyOf(oldSigner) : signedBy === null ? '' : keyIdText(signedBy),
    newKey: verifierKeyOf(newSigner),
    operator: operatorName(),
    reason: request.reason,
  };
  const recordedAt = new Date().toISOString();
  const note = signNote(logEventText(newSigner.name, event, recordedAt), oldSigner ?? newSigner);
  await writer.append([{ table: events, rows: [logEventRow(event, recordedAt, note)] }]);
  return event;
}
