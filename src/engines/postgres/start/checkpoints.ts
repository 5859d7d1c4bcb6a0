import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { Config } from '../../../config/schema.js';
import type { LedgerCatalog } from '../../../ledger/chain/catalog.js';
import { CHECKPOINTS_TABLE } from '../../../ledger/log/checkpoint-schema.js';
import { CheckpointIssuer, issuerSchedule } from '../../../ledger/log/checkpoints.js';
import { sinkFor } from '../../../ledger/log/checkpoint-sinks.js';
import { generateKey, parseSigner } from '../../../ledger/log/note.js';
import { readKeyFile } from '../../../ledger/log/signing-key.js';
import type { Logger } from '../../../log/logger.js';
import type { DisposeStack } from '../../../server/dispose-stack.js';
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
  const signer =
    config.checkpoint.keyFile !== null
      ? readKeyFile(config.checkpoint.keyFile)
      : parseSigner(await sharedSignerKey(admin, () => generateKey(`cotwire.local/${config.database.name}`).signerKey));
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
        const [last] = (await leaseConn.query(`SELECT tree_size, ledger_seq FROM public.${CHECKPOINTS_TABLE} ORDER BY ledger_seq DESC LIMIT 1`)) as Array<
          [bigint, bigint]
        >;
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
