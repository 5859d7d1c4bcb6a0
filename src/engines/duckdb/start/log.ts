import { existsSync } from 'node:fs';
import type { Config } from '../../../config/schema.js';
import type { Engine } from '../../../engine/port.js';
import type { LedgerCatalog } from '../../../ledger/chain/catalog.js';
import { MerkleLog } from '../../../ledger/log/merkle-log.js';
import type { Logger } from '../../../log/logger.js';
import type { Observer } from '../../../observe/observer.js';
import type { DisposeStack } from '../../../server/dispose-stack.js';
import { StartupError } from '../../../server/startup.js';
import { proofFunctions } from '../dialect/proof-sql.js';
import { encodeRanges } from '../../../ledger/erasure/retention-sql.js';
import { Journal } from '../ledger/journal.js';
import { Quarantine } from '../ledger/quarantine.js';
import { ChainHeadRecord, type HeadRecordDamage } from '../ledger/head-record.js';
import type { CutChain } from '../../../ledger/chain/cut.js';
import { LedgerWriter } from '../ledger/writer.js';
import { nodeFilePath, openNodeFile } from '../log/node-file.js';

/** The ledgers' writer with its journal, and the global log it extends. */
export interface Log {
  readonly merkle: MerkleLog;
  readonly writer: LedgerWriter;
}

/**
 * The global log's node file and the writer, which
 * replays its journal into the database and resumes the log from the rows;
 * the proof functions read the log. At the stop the writer drains before
 * the node file is synced and closed.
 */
export async function openLog(
  config: Config,
  log: Logger,
  engine: Engine,
  ledgers: LedgerCatalog,
  observer: Observer,
  stack: DisposeStack,
  /** `refuse`: a loss no record accounts for stops the start (the server); `report`: the caller deals with it (maintenance). */
  onLoss: 'refuse' | 'report' = 'refuse',
): Promise<Log> {
  const path = config.database.path;
  const nodeFileFound = path === ':memory:' || existsSync(nodeFilePath(path));
  let merkle: MerkleLog;
  try {
    merkle =
      path === ':memory:'
        ? MerkleLog.inMemory()
        : openNodeFile(nodeFilePath(path), false, (movedTo, detail) =>
            log.warn({ nodeFile: nodeFilePath(path), movedTo }, `${detail}; the damaged file was moved to ${movedTo}, and the log is rebuilt from the rows`),
          );
  } catch (err) {
    throw new StartupError((err as Error).message);
  }
  stack.defer(() => {
    merkle.sync();
    merkle.close();
  });
  const heads =
    path === ':memory:'
      ? { record: ChainHeadRecord.none(), found: true }
      : openHeadRecord(ChainHeadRecord.pathFor(path), (detail, movedTo) =>
          log.warn(
            { headRecord: ChainHeadRecord.pathFor(path), movedTo },
            `${detail}${movedTo === null ? '' : `; it was moved to ${movedTo}`}: appends onto chains cut while the server was stopped are refused only from the heads recorded from now on`,
          ),
        );
  let writer: LedgerWriter;
  try {
    writer = await LedgerWriter.open(engine, ledgers, {
      journalPath: path === ':memory:' ? null : Journal.pathFor(path),
      observer,
      onApplyError: (err) => log.error({ err }, 'applying journaled ledger rows to the database failed; retrying'),
      log: merkle,
      embeddingSample: { rate: config.ledger.embeddingSampleRate, alwaysTypes: new Set(config.ledger.embeddingAlwaysTypes) },
      sessionOwner: config.ledger.sessionOwner,
      onJournalDamage: (tail, journal, missing) => {
        if (tail.kind === 'unrecognized' && missing === 0) {
          log.info({ journal, offset: tail.offset }, `the ledger journal ends at offset ${tail.offset}: ${tail.detail}`);
          return;
        }
        const what =
          tail.kind === 'torn'
            ? `ends with a record cut short (${tail.detail}), as a crash in the middle of a write leaves it`
            : `holds damaged bytes where a record should be (${tail.detail}): the file was changed after it was written`;
        log.warn(
          { journal, offset: tail.offset, kind: tail.kind, missing },
          `the ledger journal ${journal} ${what}. Every whole record was applied${missing > 0 ? `; ${missing} acknowledged appends it held are in neither the journal nor the database` : ''}`,
        );
      },
      headRecord: heads.record,
      onChainsCut: (cuts) =>
        log.error(
          {
            headRecord: ChainHeadRecord.pathFor(path),
            chains: cuts.slice(0, 20).map((c) => ({ ledger: c.ledger, key: c.key, recorded: c.recorded.index, present: c.present?.index ?? null })),
          },
          `${cuts.length} chains of ${cuts[0]?.ledger} end before the heads the server made durable (${cutList(cuts)}): their last steps are gone from the database (removed behind the server, or lost with its journal), and appends to them are refused. Put back the database file the server last wrote, or stop the server and run \`cotwire accept-loss --db ${path} --reason "..."\``,
        ),
      quarantine: Quarantine.at(path === ':memory:' ? null : Quarantine.pathFor(path)),
      onQuarantine: (names, rows, reason, quarantine) =>
        log.error(
          { ledgers: names, rows, quarantine },
          `${rows} acknowledged rows of ${names.join(', ')} cannot be applied: ${reason}. They are kept in ${String(quarantine)}; the audit reports them missing until the ledger is repaired`,
        ),
    });
  } catch (err) {
    throw new StartupError(`cannot open the ledger journal: ${(err as Error).message}`);
  }
  stack.defer(() => writer.close());
  if (!heads.found && merkle.size > 0) {
    log.warn(
      { headRecord: ChainHeadRecord.pathFor(path) },
      `there is no record of the chains' heads (${ChainHeadRecord.pathFor(path)}): it is new with this version, or was deleted. Appends onto chains cut while the server was stopped are refused only from the heads recorded from now on`,
    );
  }
  if (!nodeFileFound && merkle.size > 0) {
    log.warn(
      { nodeFile: nodeFilePath(path), leaves: merkle.size },
      `the global log's node file ${nodeFilePath(path)} was missing: the tree was rebuilt from the ledgers' rows (${merkle.size} leaves)`,
    );
  }
  if (writer.logRebuiltFrom !== null) {
    log.warn(
      { nodeFile: nodeFilePath(path), kept: writer.logRebuiltFrom },
      `the global log's node file ${nodeFilePath(path)} did not hold past leaf ${writer.logRebuiltFrom} (it is not the rows' own, nor a signed checkpoint's): the tree was rebuilt from the rows from there`,
    );
  }
  if (onLoss === 'refuse' && writer.unrecordedLoss.ranges.length > 0) {
    writer.keepJournal();
    throw new StartupError(lossRefusal(path, writer.unrecordedLoss));
  }
  writer.onLogError = (err) => log.error({ err }, "writing the global log's node file failed; its leaves are kept in memory and written with the next commit");
  if (writer.logFrozen !== null) {
    log.error(
      { leaves: merkle.size },
      `the global log stops at ${merkle.size} leaves and no checkpoint will be signed: ${writer.logFrozen}; the ledgers were altered outside the server. Run \`cotwire verify --db ${path} --checkpoint <saved checkpoints> --key <verifier key>\` to find what changed`,
    );
  }
  for (const f of proofFunctions(merkle)) await engine.registerFunction(f);
  return { merkle, writer };
}

/** Why a start stops at acknowledged appends that are gone, and what to run. */
export function lossRefusal(path: string, loss: LedgerWriter['unrecordedLoss']): string {
  const count = loss.ranges.reduce((n, [a, b]) => n + b - a + 1, 0);
  const journal = Journal.pathFor(path);
  const state =
    loss.journal === 'missing'
      ? `the ledger journal ${journal} is missing`
      : loss.journal === 'damaged'
        ? `the ledger journal ${journal} is damaged where they were`
        : `the ledger journal ${journal} does not hold them`;
  return (
    `${count} acknowledged appends (ledger_seq ${encodeRanges(loss.ranges)}) are gone: ` +
    `${state}, the database does not hold them, and the global log (${nodeFilePath(path)}, or a signed checkpoint) says they were made. ` +
    'If the journal or the database was moved, or restored from an older copy, put the right files back and start again. ' +
    `To accept the loss and go on, run \`cotwire accept-loss --db ${path} --reason "..."\` with the server stopped: it records the loss in the log, signed and chained, and every later audit and verification shows it as a gap. ` +
    `(To start a new database instead, move ${nodeFilePath(path)}, ${journal} and ${path}.key away with the old file.)`
  );
}

/** The first few cut chains, for a log line. */
function cutList(cuts: readonly CutChain[]): string {
  const shown = cuts
    .slice(0, 5)
    .map((c) => `${c.key === '' ? '(whole table)' : `"${c.key}"`} at step_index ${c.present?.index ?? 'none'} of ${c.recorded.index}`);
  return cuts.length > shown.length ? `${shown.join(', ')}, and ${cuts.length - shown.length} more` : shown.join(', ');
}

function openHeadRecord(path: string, onDamage: HeadRecordDamage): { record: ChainHeadRecord; found: boolean } {
  try {
    return ChainHeadRecord.open(path, onDamage);
  } catch (err) {
    throw new StartupError(`cannot open the record of the chains' heads ${path}: ${(err as Error).message}`);
  }
}
