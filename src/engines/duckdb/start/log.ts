import type { Config } from '../../../config/schema.js';
import type { Engine } from '../../../engine/port.js';
import type { LedgerCatalog } from '../../../ledger/chain/catalog.js';
import { MerkleLog } from '../../../ledger/log/merkle-log.js';
import type { NoteSigner } from '../../../ledger/log/note.js';
import type { Logger } from '../../../log/logger.js';
import type { Observer } from '../../../observe/observer.js';
import type { DisposeStack } from '../../../server/dispose-stack.js';
import { StartupError } from '../../../server/startup.js';
import { proofFunctions } from '../dialect/proof-sql.js';
import { Journal } from '../ledger/journal.js';
import { Quarantine } from '../ledger/quarantine.js';
import { LedgerWriter } from '../ledger/writer.js';
import { nodeFilePath, openNodeFile } from '../log/node-file.js';
import { loadSigner } from './signer.js';

/** The ledgers' writer with its journal, and the global log it extends. */
export interface Log {
  readonly signer: NoteSigner;
  readonly merkle: MerkleLog;
  readonly writer: LedgerWriter;
}

/**
 * The checkpoint key, the global log's node file and the writer, which
 * replays its journal into the database and resumes the log from the rows;
 * the proof functions read the log. At the stop the writer drains before
 * the node file is synced and closed.
 */
export async function openLog(config: Config, log: Logger, engine: Engine, ledgers: LedgerCatalog, observer: Observer, stack: DisposeStack): Promise<Log> {
  const path = config.database.path;
  let signer: NoteSigner;
  let merkle: MerkleLog;
  try {
    signer = loadSigner(config, log);
    merkle = path === ':memory:' ? MerkleLog.inMemory() : openNodeFile(nodeFilePath(path));
  } catch (err) {
    throw new StartupError((err as Error).message);
  }
  stack.defer(() => {
    merkle.sync();
    merkle.close();
  });
  let writer: LedgerWriter;
  try {
    writer = await LedgerWriter.open(engine, ledgers, {
      journalPath: path === ':memory:' ? null : Journal.pathFor(path),
      observer,
      onApplyError: (err) => log.error({ err }, 'applying journaled ledger rows to the database failed; retrying'),
      log: merkle,
      embeddingSample: { rate: config.ledger.embeddingSampleRate, alwaysTypes: new Set(config.ledger.embeddingAlwaysTypes) },
      onJournalDamage: (tail, journal, missing) => {
        if (tail.lost !== null && missing > 0) {
          log.error(
            { journal, offset: tail.offset, afterSeq: String(tail.lost.afterSeq), beforeSeq: String(tail.lost.beforeSeq), missing },
            `the ledger journal ${journal} is damaged: ${tail.detail}. ${missing} acknowledged appends between ledger_seq ${tail.lost.afterSeq} and ${tail.lost.beforeSeq} are in neither the journal nor the database; everything else it holds was applied. The audit reports them missing; keep the journal file for investigation and compare with the checkpoints (cotwire verify --checkpoint)`,
          );
        } else if (tail.kind === 'unrecognized') {
          log.info({ journal, offset: tail.offset }, `the ledger journal ends at offset ${tail.offset}: ${tail.detail}`);
        } else {
          log.warn(
            { journal, offset: tail.offset, kind: tail.kind },
            `the ledger journal ${journal} ends with a damaged record: ${tail.detail}. Every whole record before it was applied. A record torn by a crash was never acknowledged; if the machine did not crash while writing, compare with the checkpoints (cotwire verify --checkpoint)`,
          );
        }
      },
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
  writer.onLogError = (err) => log.error({ err }, "writing the global log's node file failed; its leaves are kept in memory and written with the next commit");
  if (writer.logFrozen !== null) {
    log.error(
      { leaves: merkle.size },
      `the global log stops at ${merkle.size} leaves and no checkpoint will be signed: ${writer.logFrozen}; the ledgers were altered outside the server. Run \`cotwire verify --db ${path} --checkpoint <saved checkpoints> --key <verifier key>\` to find what changed`,
    );
  }
  for (const f of proofFunctions(merkle)) await engine.registerFunction(f);
  return { signer, merkle, writer };
}
