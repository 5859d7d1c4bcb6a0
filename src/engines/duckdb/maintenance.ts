import type { Config } from '../../config/schema.js';
import type { IssuedCheckpoint } from '../../ledger/log/checkpoints.js';
import { encodeRanges } from '../../ledger/erasure/retention-sql.js';
import { LOG_EVENTS_TABLE, logEventRow, logEventText, type LogEvent } from '../../ledger/log/log-events.js';
import { operatorName, recordRotation, type RotationRequest } from '../../ledger/log/key-rotation.js';
import { signNote } from '../../ledger/log/note.js';
import type { Logger } from '../../log/logger.js';
import { NO_OBSERVER } from '../../observe/observer.js';
import { startParts } from '../../server/dispose-stack.js';
import { checkpointIssuer, lastCheckpoint } from './start/audit.js';
import { openLog } from './start/log.js';
import { loadSigner } from './start/signer.js';
import { openStore } from './start/store.js';

/**
 * Rotates the checkpoint key of a stopped server's DuckDB file: opens the
 * file and its log as the server does (the journal replayed), records the
 * rotation in the log, and signs a checkpoint with the new key, delivered to
 * the configured sinks. The server then starts with the new key only.
 */
export async function rotateDuckdbKey(
  config: Config,
  log: Logger,
  request: RotationRequest,
): Promise<{ event: LogEvent; checkpoint: IssuedCheckpoint | null }> {
  const { value, stack } = await startParts(async (stack) => {
    const { engine, internal, ledgers } = await openStore(config, log, stack, () => true);
    // A loss not yet recorded does not stop a rotation: the key that records it may be the new one.
    const { merkle, writer } = await openLog(config, log, engine, ledgers, NO_OBSERVER, stack, 'report');
    const from = await lastCheckpoint(internal, ledgers);
    const events = await ledgers.find(['main', LOG_EVENTS_TABLE]).catch(() => null);
    const event = await recordRotation(writer, events, from.last?.note ?? null, merkle.size, request);
    const issuer = checkpointIssuer(config, log, { merkle, writer }, request.newSigner, from);
    const checkpoint = await issuer.issue();
    await issuer.close(config.limits.shutdownGraceMs);
    return { event, checkpoint };
  });
  await stack.unwind(config.limits.shutdownGraceMs);
  return value;
}

export class NoLossError extends Error {}

/**
 * Records the loss of acknowledged appends that stops a server's start
 * (`cotwire accept-loss`): one "appends lost" event in the log, with the
 * ledger_seq ranges, the operator and the reason, signed by the checkpoint
 * key, then a checkpoint over it. The lost leaves stay in the log; the
 * server starts again and shows the gap at every audit.
 */
export async function acceptDuckdbLoss(config: Config, log: Logger, reason: string): Promise<{ event: LogEvent; checkpoint: IssuedCheckpoint | null }> {
  const { value, stack } = await startParts(async (stack) => {
    const { engine, internal, ledgers } = await openStore(config, log, stack, () => true);
    const { merkle, writer } = await openLog(config, log, engine, ledgers, NO_OBSERVER, stack, 'report');
    const loss = writer.unrecordedLoss;
    if (loss.ranges.length === 0)
      throw new NoLossError(`${config.database.path} has no loss to accept: every acknowledged append is in the database, or already recorded`);
    const from = await lastCheckpoint(internal, ledgers);
    // The key that signs the log signs the record; a lost key is rotated first (keygen --rotate).
    const signer = loadSigner(config, log, from.last?.note ?? null);
    const events = await ledgers.find(['main', LOG_EVENTS_TABLE]).catch(() => null);
    if (events === null) throw new NoLossError(`the ledger ${LOG_EVENTS_TABLE} is missing or damaged: the loss cannot be recorded`);
    const event: LogEvent = {
      kind: 'appends lost',
      treeSize: merkle.size,
      seqs: encodeRanges(loss.ranges),
      oldKey: '',
      newKey: '',
      operator: operatorName(),
      reason,
    };
    const recordedAt = new Date().toISOString();
    const note = signNote(logEventText(signer.name, event, recordedAt), signer);
    await writer.append([{ table: events, rows: [logEventRow(event, recordedAt, note)] }]);
    const issuer = checkpointIssuer(config, log, { merkle, writer }, signer, from);
    const checkpoint = await issuer.issue();
    await issuer.close(config.limits.shutdownGraceMs);
    return { event, checkpoint };
  });
  await stack.unwind(config.limits.shutdownGraceMs);
  return value;
}
