import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { Config } from '../../../config/schema.js';
import type { LedgerCatalog } from '../../../ledger/chain/catalog.js';
import { CHECKPOINTS_TABLE } from '../../../ledger/log/checkpoint-schema.js';
import { CheckpointIssuer, issuerSchedule } from '../../../ledger/log/checkpoints.js';
import { sinkFor } from '../../../ledger/log/checkpoint-sinks.js';
import { keyBreak, keyBreakMessage, keyIdText, noteSigners } from '../../../ledger/log/key-continuity.js';
import { generateKey, parseSigner, type NoteSigner } from '../../../ledger/log/note.js';
import { readKeyFile } from '../../../ledger/log/signing-key.js';
import type { Logger } from '../../../log/logger.js';
import type { DisposeStack } from '../../../server/dispose-stack.js';
import { StartupError } from '../../../server/startup.js';
import { isConnectionLoss, PostgresConnection } from '../adapter/connection.js';
import type { EngineHealth } from '../adapter/health.js';
import { releaseLease, sharedSignerKey, takeLease } from '../ledger/install.js';
import { PG_SCHEMA } from '../ledger/names.js';
import type { PgLedgerWriter } from '../ledger/writer.js';

/**
 * Checkpoints shared by every instance on the engine: a lease in
 * cotwire.signer decides the one that signs, with the key they share, past
 * the last checkpoint any of them issued. At the stop this instance signs
 * its last checkpoint if it leads, then gives the lease up.
 */
export async function openCheckpoints(
  config: Config,
  log: Logger,
  admin: PostgresConnection,
  serverUrl: string,
  ledgers: LedgerCatalog,
  writer: PgLedgerWriter,
  stack: DisposeStack,
  health: EngineHealth,
): Promise<{ readonly checkpoints: CheckpointIssuer; readonly instance: string }> {
  const lastNote = async (conn: PostgresConnection): Promise<string | null> =>
    ((await conn.query(`SELECT checkpoint FROM public.${CHECKPOINTS_TABLE} ORDER BY ledger_seq DESC LIMIT 1`)) as Array<[string]>)[0]?.[0] ?? null;
  const last = await lastNote(admin);
  const rotate = `\`cotwire keygen --rotate --url <engine url> --out <new key file> --old-key <the old key file>\` (or, when the old key is lost, \`--reason "..."\` instead of --old-key), then start every instance with checkpoint.keyFile set to the new file`;
  let signer: NoteSigner;
  let source: string;
  if (config.checkpoint.keyFile !== null) {
    try {
      signer = readKeyFile(config.checkpoint.keyFile);
    } catch (err) {
      throw new StartupError((err as Error).message);
    }
    source = `checkpoint.keyFile (${config.checkpoint.keyFile})`;
  } else {
    const shared = await sharedSignerKey(admin, last === null ? () => generateKey(`cotwire.local/${config.database.name}`).signerKey : null);
    if (shared === null) {
      const signedBy = noteSigners(last as string)[0] ?? { name: '(unsigned)', keyHash: 0 };
      throw new StartupError(
        `the checkpoint signing key the instances share (${PG_SCHEMA}.secrets) is missing, and the log's last checkpoint was signed by the key ${keyIdText(signedBy)}: a server never signs on with a new key in silence. Restore the row from a backup, or rotate to a new key explicitly, which records the rotation in the log: ${rotate}`,
      );
    }
    signer = parseSigner(shared);
    source = `the key the instances share (${PG_SCHEMA}.secrets)`;
  }
  const signedBy = keyBreak(last, signer);
  if (signedBy !== null) throw new StartupError(keyBreakMessage(signedBy, signer, source, rotate));
  /** Another instance's rotation (or a key replaced behind the server) stops this one signing, said once. */
  let keyRefused = false;
  const leaseConn = stack.use(await PostgresConnection.open(serverUrl, 'cotwire signer', { health, answerTimeoutMs: config.engine.answerTimeoutMs }), (c) =>
    c.close(),
  );
  const instance = `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
  const leaseMs = 2 * config.checkpoint.intervalSeconds * 1000 + 5000;
  const schedule = issuerSchedule(config.checkpoint, log);
  const checkpointTable = (await ledgers.all()).find((t) => t.name === CHECKPOINTS_TABLE) ?? null;
  const checkpoints = new CheckpointIssuer(
    writer,
    {
      size: async () => Number(((await leaseConn.query(`SELECT size FROM ${PG_SCHEMA}.log_head`)) as [[bigint]])[0][0]),
      root: async (n) => Buffer.from(((await leaseConn.query('SELECT public.cot_log_root($1)', [String(n)])) as [[string]])[0][0], 'base64'),
      // A commit in PostgreSQL is durable: its nodes with it.
      sync: () => undefined,
    },
    checkpointTable,
    signer,
    config.checkpoint.sinks.map((t) => sinkFor(t)),
    {
      ...schedule,
      // An engine that is down is reported once, where it is found down (EngineHealth), not at every interval.
      onIssueError: (err) => {
        if (!isConnectionLoss(err)) schedule.onIssueError(err);
      },
      lead: async () => {
        if (!(await takeLease(leaseConn, 'signer', instance, leaseMs))) return null;
        const [last] = (await leaseConn.query(
          `SELECT tree_size, ledger_seq, checkpoint FROM public.${CHECKPOINTS_TABLE} ORDER BY ledger_seq DESC LIMIT 1`,
        )) as Array<[bigint, bigint, string]>;
        const other = keyBreak(last?.[2] ?? null, signer);
        if (other !== null) {
          if (!keyRefused)
            log.error(
              { signedBy: keyIdText(other) },
              `${keyBreakMessage(other, signer, source, rotate)}; this instance signs no checkpoint until it is restarted with that key`,
            );
          keyRefused = true;
          await releaseLease(leaseConn, 'signer', instance);
          return null;
        }
        return last === undefined ? { size: 0, record: 0 } : { size: Number(last[0]), record: Number(last[1]) };
      },
    },
    null,
  );
  stack.defer(async (graceMs) => {
    await checkpoints.close(graceMs);
    await releaseLease(leaseConn, 'signer', instance).catch(() => undefined);
  });
  return { checkpoints, instance };
}
