import type { Config } from '../../../config/schema.js';
import type { Engine, EngineConnection } from '../../../engine/port.js';
import type { LedgerCatalog } from '../../../ledger/chain/catalog.js';
import type { LedgerTable } from '../../../ledger/chain/schema.js';
import type { NoteSigner } from '../../../ledger/log/note.js';
import { CheckpointIssuer, issuerSchedule } from '../../../ledger/log/checkpoints.js';
import { sinkFor } from '../../../ledger/log/checkpoint-sinks.js';
import { CHECKPOINTS_TABLE } from '../../../ledger/log/checkpoint-schema.js';
import type { Logger } from '../../../log/logger.js';
import type { Observer } from '../../../observe/observer.js';
import type { DisposeStack } from '../../../server/dispose-stack.js';
import { auditFunctions } from '../dialect/audit-sql.js';
import { LedgerAuditor } from '../log/auditor.js';
import type { Log } from './log.js';
import { loadSigner } from './signer.js';

/**
 * The audit, on a connection of its own beside the writer's and the
 * clients', holding the rows against the log; cot_audit() reads its latest
 * report. It starts once the server listens (`startAudit`).
 */
export async function openAudit(
  engine: Engine,
  ledgers: LedgerCatalog,
  { merkle, writer }: Log,
  observer: Observer,
  log: Logger,
  stack: DisposeStack,
): Promise<LedgerAuditor> {
  const auditConn = stack.use(await engine.connect(), (c) => c.close());
  const auditor = new LedgerAuditor(
    auditConn,
    ledgers,
    {
      log: merkle,
      appliedSeq: () => writer.appliedSeq,
      integratedSeq: () => writer.settledSeq(),
      knownHeads: () => writer.knownHeads(),
      logStopped: () => writer.logFrozen,
      fingerprints: {
        track: () => writer.trackFingerprints(),
        between: (from, to) => writer.fingerprintsBetween(from, to),
        forget: (seq) => writer.forgetFingerprints(seq),
      },
    },
    observer,
    (f) =>
      log.error(
        { kind: f.kind, ledger: f.ledger, chain: f.chainKey, firstSeq: f.firstSeq, lastSeq: f.lastSeq, rows: f.rows },
        `ledger audit: ${f.kind}${f.ledger === null ? '' : ` in ${f.ledger}`}${f.chainKey === null ? '' : ` chain ${JSON.stringify(f.chainKey)}`}${f.firstSeq === null ? '' : ` ledger_seq ${f.firstSeq}..${String(f.lastSeq)}`}: ${f.detail}`,
      ),
    (err) => log.error({ err }, 'ledger audit failed'),
    (changed) => log.warn({ ledgers: changed }, `${changed.join(', ')} changed without the writer (the watch saw it); a full audit runs now`),
  );
  for (const f of auditFunctions(() => auditor.latest)) await engine.registerFunction(f);
  return auditor;
}

/** Starts the audit's rounds and its watch; they stop first at the unwind. */
export function startAudit(auditor: LedgerAuditor, config: Config, stack: DisposeStack): void {
  auditor.start(config.ledger.verifyIntervalSeconds * 1000, config.ledger.watchIntervalSeconds * 1000);
  stack.defer(() => auditor.stop());
}

/** The checkpoint ledger and its last record (null when there is none), as the issuer goes on from it. */
export interface LastCheckpoint {
  readonly table: LedgerTable | null;
  readonly last: { readonly size: number; readonly record: number; readonly note: string } | null;
}

export async function lastCheckpoint(internal: EngineConnection, ledgers: LedgerCatalog): Promise<LastCheckpoint> {
  const table = await ledgers.find(['main', CHECKPOINTS_TABLE]).catch(() => null);
  const [row] =
    table === null
      ? []
      : ((await internal.query(`SELECT tree_size, ledger_seq, checkpoint FROM main.${CHECKPOINTS_TABLE} ORDER BY ledger_seq DESC LIMIT 1`)) as Array<
          [bigint, bigint, string]
        >);
  return { table, last: row === undefined ? null : { size: Number(row[0]), record: Number(row[1]), note: row[2] } };
}

/** An issuer over the node file, signing with `signer` from where `from` left off. */
export function checkpointIssuer(config: Config, log: Logger, { merkle, writer }: Log, signer: NoteSigner, from: LastCheckpoint): CheckpointIssuer {
  return new CheckpointIssuer(
    writer,
    { size: () => merkle.size, root: (n) => merkle.root(n), sync: () => merkle.sync() },
    from.table,
    signer,
    config.checkpoint.sinks.map((t) => sinkFor(t)),
    issuerSchedule(config.checkpoint, log),
    from.last,
  );
}

/**
 * The checkpoint issuer, which signs the log's root and appends each
 * checkpoint through the writer, from where the last one left off. At the
 * stop it signs the last one before the writer drains.
 */
export async function openCheckpoints(
  config: Config,
  log: Logger,
  internal: EngineConnection,
  ledgers: LedgerCatalog,
  ledgerLog: Log,
  stack: DisposeStack,
): Promise<CheckpointIssuer> {
  // After the writer replayed its journal: the last checkpoint may have been acknowledged just before a crash.
  const from = await lastCheckpoint(internal, ledgers);
  const checkpoints = checkpointIssuer(config, log, ledgerLog, loadSigner(config, log, from.last?.note ?? null), from);
  stack.defer((graceMs) => checkpoints.close(graceMs));
  return checkpoints;
}
