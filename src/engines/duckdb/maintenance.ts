import type { Config } from '../../config/schema.js';
import type { IssuedCheckpoint } from '../../ledger/log/checkpoints.js';
import { seqRuns, seqsIn } from '../../ledger/erasure/retention-sql.js';
import type { EngineConnection } from '../../engine/port.js';
import type { LedgerTable } from '../../ledger/chain/schema.js';
import { accountedSeqs } from '../../ledger/log/log-events.js';
import type { CutChain } from '../../ledger/chain/cut.js';
import { absentSeqs } from './log/log-resume.js';
import { LOG_EVENTS_TABLE, type LogEvent } from '../../ledger/log/log-events.js';
import { NoLossError, recordLoss } from '../../ledger/log/loss.js';
import { recordRotation, type RotationRequest } from '../../ledger/log/key-rotation.js';
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

/**
 * Records the loss of acknowledged appends that stops a server's start
 * (`cotwire accept-loss`): one "appends lost" event in the log, with the
 * ledger_seq ranges, the operator and the reason, signed by the checkpoint
 * key, then a checkpoint over it. The lost leaves stay in the log; the
 * server starts again and shows the gap at every audit.
 */
export async function acceptDuckdbLoss(
  config: Config,
  log: Logger,
  reason: string,
): Promise<{ event: LogEvent; checkpoint: IssuedCheckpoint | null; cuts: readonly CutChain[] }> {
  const { value, stack } = await startParts(async (stack) => {
    const { engine, internal, ledgers } = await openStore(config, log, stack, () => true);
    const { merkle, writer } = await openLog(config, log, engine, ledgers, NO_OBSERVER, stack, 'report');
    const cuts = await writer.cutChains();
    const ranges = await lostRanges(internal, await ledgers.all(), writer.unrecordedLoss.ranges, cuts);
    if (ranges.length === 0 && cuts.length === 0)
      throw new NoLossError(`${config.database.path} has no loss to accept: every acknowledged append is in the database, or already recorded`);
    const from = await lastCheckpoint(internal, ledgers);
    // The key that signs the log signs the record; a lost key is rotated first (keygen --rotate).
    const signer = loadSigner(config, log, from.last?.note ?? null);
    const events = await ledgers.find(['main', LOG_EVENTS_TABLE]).catch(() => null);
    const event = await recordLoss(writer, events, signer, merkle.size, { ranges, cuts }, reason);
    writer.acceptCuts(cuts);
    const issuer = checkpointIssuer(config, log, { merkle, writer }, signer, from);
    const checkpoint = await issuer.issue();
    await issuer.close(config.limits.shutdownGraceMs);
    return { event, checkpoint, cuts };
  });
  await stack.unwind(config.limits.shutdownGraceMs);
  return value;
}

/**
 * The ledger_seq to record as lost: those the start found gone, and, for
 * chains cut while the server was stopped, every ledger_seq up to their
 * recorded heads that no ledger holds and no record accounts for.
 */
async function lostRanges(
  conn: EngineConnection,
  all: readonly LedgerTable[],
  gone: ReadonlyArray<readonly [number, number]>,
  cuts: readonly CutChain[],
): Promise<Array<[number, number]>> {
  const upTo = cuts.reduce((m, c) => Math.max(m, c.recorded.seq), 0);
  const absent = upTo === 0 ? [] : await absentSeqs(conn, all, 0, upTo + 1);
  return seqRuns(
    [...new Set([...seqsIn(gone), ...absent])].sort((a, b) => a - b),
    await accountedSeqs(conn, all),
  );
}
