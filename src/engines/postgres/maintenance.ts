import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { redactUrl } from '../../config/load.js';
import type { Config } from '../../config/schema.js';
import { ProtectedNames } from '../../guard/names.js';
import { LedgerCatalog } from '../../ledger/chain/catalog.js';
import { CHECKPOINTS_TABLE } from '../../ledger/log/checkpoint-schema.js';
import { CheckpointIssuer, issuerSchedule, type IssuedCheckpoint } from '../../ledger/log/checkpoints.js';
import { sinkFor } from '../../ledger/log/checkpoint-sinks.js';
import { keyBreak } from '../../ledger/log/key-continuity.js';
import { recordRotation, RotationError, type RotationRequest } from '../../ledger/log/key-rotation.js';
import { LOG_EVENTS_TABLE, type LogEvent } from '../../ledger/log/log-events.js';
import { parseSigner } from '../../ledger/log/note.js';
import type { Logger } from '../../log/logger.js';
import { startParts } from '../../server/dispose-stack.js';
import { StartupError } from '../../server/startup.js';
import { PostgresConnection, urlAs } from './adapter/connection.js';
import { readPostgresTables } from './ledger/catalog.js';
import { installPostgres, releaseLease, rolePasswords, sharedSignerKey, takeLease } from './ledger/install.js';
import { PG_SCHEMA, pgRoles } from './ledger/names.js';
import { PgLedgerWriter } from './ledger/writer.js';

/**
 * Rotates the checkpoint key of a PostgreSQL engine: takes the signer lease
 * (no instance signs meanwhile), records the rotation in the log, signs a
 * checkpoint with the new key and, where the instances share the key kept in
 * the engine, puts the new one there. The old key is the one given, or the
 * shared one when it signed the last checkpoint. An instance still running
 * with the old key signs nothing more until it is restarted.
 */
export async function rotatePostgresKey(
  config: Config,
  log: Logger,
  request: RotationRequest & { readonly newSignerKey: string },
): Promise<{ event: LogEvent; checkpoint: IssuedCheckpoint | null }> {
  const url = config.engine.url as string;
  const prefix = config.engine.rolePrefix;
  const { value, stack } = await startParts(async (stack) => {
    let admin: PostgresConnection;
    try {
      admin = stack.use(await PostgresConnection.open(url, 'cotwire keygen'), (c) => c.close());
    } catch (err) {
      throw new StartupError(`cannot connect to the PostgreSQL engine at ${redactUrl(url)}: ${(err as Error).message}`);
    }
    const names = new ProtectedNames(config.guard.protectedPrefixes);
    await installPostgres(admin, prefix, (n) => names.isProtected(n));
    const passwords = await rolePasswords(admin, prefix);
    const serverUrl = urlAs(url, pgRoles(prefix).server, passwords.server);
    const ledgers = new LedgerCatalog(admin, (n) => names.isProtected(n), null, readPostgresTables(prefix));
    const writer = stack.use(await PgLedgerWriter.open(stack.use(await PostgresConnection.open(serverUrl, 'cotwire keygen writer'), (c) => c.close())), (w) =>
      w.close(),
    );
    const leaseConn = stack.use(await PostgresConnection.open(serverUrl, 'cotwire keygen signer'), (c) => c.close());
    const holder = `keygen:${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
    if (!(await takeLease(leaseConn, 'signer', holder, 10 * 60_000))) {
      throw new RotationError('an instance holds the signer lease: stop every cotwire instance on this engine first');
    }
    stack.defer(() => releaseLease(leaseConn, 'signer', holder).catch(() => undefined));
    const [last] = (await leaseConn.query(
      `SELECT tree_size, ledger_seq, checkpoint FROM public.${CHECKPOINTS_TABLE} ORDER BY ledger_seq DESC LIMIT 1`,
    )) as Array<[bigint, bigint, string]>;
    const note = last?.[2] ?? null;
    const shared = config.checkpoint.keyFile === null ? await sharedSignerKey(admin, null) : null;
    // The key the instances share is at hand: when it signed the last checkpoint, it signs the rotation.
    const sharedSigner = shared === null ? null : parseSigner(shared);
    const oldSigner = request.oldSigner ?? (sharedSigner !== null && keyBreak(note, sharedSigner) === null && note !== null ? sharedSigner : null);
    const [[size]] = (await leaseConn.query(`SELECT size FROM ${PG_SCHEMA}.log_head`)) as [[bigint]];
    const events = (await ledgers.all()).find((t) => t.name === LOG_EVENTS_TABLE) ?? null;
    const event = await recordRotation(writer, events, note, Number(size), { ...request, oldSigner });
    const issuer = new CheckpointIssuer(
      writer,
      {
        size: async () => Number(((await leaseConn.query(`SELECT size FROM ${PG_SCHEMA}.log_head`)) as [[bigint]])[0][0]),
        root: async (n) => Buffer.from(((await leaseConn.query('SELECT public.cot_log_root($1)', [String(n)])) as [[string]])[0][0], 'base64'),
        sync: () => undefined,
      },
      (await ledgers.all()).find((t) => t.name === CHECKPOINTS_TABLE) ?? null,
      request.newSigner,
      config.checkpoint.sinks.map((t) => sinkFor(t)),
      issuerSchedule(config.checkpoint, log),
      last === undefined ? null : { size: Number(last[0]), record: Number(last[1]) },
    );
    const checkpoint = await issuer.issue();
    await issuer.close(config.limits.shutdownGraceMs);
    if (config.checkpoint.keyFile === null) {
      await admin.query(
        `INSERT INTO ${PG_SCHEMA}.secrets (name, value) VALUES ('checkpoint_key', $1) ON CONFLICT (name) DO UPDATE SET value = excluded.value`,
        [request.newSignerKey],
      );
    }
    return { event, checkpoint };
  });
  await stack.unwind(config.limits.shutdownGraceMs);
  return value;
}
