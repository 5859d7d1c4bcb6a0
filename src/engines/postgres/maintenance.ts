import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { redactUrl } from '../../config/load.js';
import type { Config } from '../../config/schema.js';
import { ProtectedNames } from '../../guard/names.js';
import { LedgerCatalog } from '../../ledger/chain/catalog.js';
import { CHECKPOINTS_TABLE } from '../../ledger/log/checkpoint-schema.js';
import { CheckpointIssuer, issuerSchedule, type IssuedCheckpoint } from '../../ledger/log/checkpoints.js';
import { sinkFor } from '../../ledger/log/checkpoint-sinks.js';
import { keyBreak, keyBreakMessage } from '../../ledger/log/key-continuity.js';
import { recordRotation, RotationError, type RotationRequest } from '../../ledger/log/key-rotation.js';
import { LOG_EVENTS_TABLE, type LogEvent } from '../../ledger/log/log-events.js';
import { parseSigner, type NoteSigner } from '../../ledger/log/note.js';
import { NoLossError, recordLoss } from '../../ledger/log/loss.js';
import type { CutChain } from '../../ledger/chain/cut.js';
import { qualifiedName } from '../../ledger/chain/schema.js';
import { seqRuns } from '../../ledger/erasure/retention-sql.js';
import { accountedSeqs } from '../../ledger/log/log-events.js';
import { readKeyFile } from '../../ledger/log/signing-key.js';
import type { DisposeStack } from '../../server/dispose-stack.js';
import type { Logger } from '../../log/logger.js';
import { startParts } from '../../server/dispose-stack.js';
import { StartupError } from '../../server/startup.js';
import { PostgresConnection, urlAs } from './adapter/connection.js';
import { readPostgresTables } from './ledger/catalog.js';
import { installPostgres, releaseLease, rolePasswords, sharedSignerKey, takeLease } from './ledger/install.js';
import { PG_SCHEMA, pgRoles } from './ledger/names.js';
import { cutChains, PgLedgerWriter } from './ledger/writer.js';

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
  const { value, stack } = await startParts(async (stack) => {
    const { admin, ledgers, writer, note, size, issuerFor } = await maintenanceParts(config, log, stack, 'cotwire keygen', RotationError);
    const shared = config.checkpoint.keyFile === null ? await sharedSignerKey(admin, null) : null;
    // The key the instances share is at hand: when it signed the last checkpoint, it signs the rotation.
    const sharedSigner = shared === null ? null : parseSigner(shared);
    const oldSigner = request.oldSigner ?? (sharedSigner !== null && keyBreak(note, sharedSigner) === null && note !== null ? sharedSigner : null);
    const events = (await ledgers.all()).find((t) => t.name === LOG_EVENTS_TABLE) ?? null;
    const event = await recordRotation(writer, events, note, await size(), { ...request, oldSigner });
    const issuer = await issuerFor(request.newSigner);
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

/**
 * What a maintenance command holds on a PostgreSQL engine: the engine
 * installed, its ledgers, a writer as the server role, and the signer lease,
 * taken so that no instance signs meanwhile (released at the end). `Refusal`
 * is the error a command raises when an instance holds the lease.
 */
async function maintenanceParts(config: Config, log: Logger, stack: DisposeStack, purpose: string, Refusal: new (message: string) => Error) {
  const url = config.engine.url as string;
  const prefix = config.engine.rolePrefix;
  let admin: PostgresConnection;
  try {
    admin = stack.use(await PostgresConnection.open(url, purpose), (c) => c.close());
  } catch (err) {
    throw new StartupError(`cannot connect to the PostgreSQL engine at ${redactUrl(url)}: ${(err as Error).message}`);
  }
  const names = new ProtectedNames(config.guard.protectedPrefixes);
  await installPostgres(admin, prefix, (n) => names.isProtected(n), config.ledger.hashVersion);
  const passwords = await rolePasswords(admin, prefix);
  const serverUrl = urlAs(url, pgRoles(prefix).server, passwords.server);
  const ledgers = new LedgerCatalog(admin, (n) => names.isProtected(n), null, readPostgresTables(prefix));
  const writer = stack.use(await PgLedgerWriter.open(stack.use(await PostgresConnection.open(serverUrl, `${purpose} writer`), (c) => c.close())), (w) =>
    w.close(),
  );
  const leaseConn = stack.use(await PostgresConnection.open(serverUrl, `${purpose} signer`), (c) => c.close());
  const holder = `${purpose.replace(/^cotwire /, '')}:${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
  if (!(await takeLease(leaseConn, 'signer', holder, 10 * 60_000))) {
    throw new Refusal('an instance holds the signer lease: stop every cotwire instance on this engine first');
  }
  stack.defer(() => releaseLease(leaseConn, 'signer', holder).catch(() => undefined));
  const [last] = (await leaseConn.query(`SELECT tree_size, ledger_seq, checkpoint FROM public.${CHECKPOINTS_TABLE} ORDER BY ledger_seq DESC LIMIT 1`)) as Array<
    [bigint, bigint, string]
  >;
  const size = async (): Promise<number> => Number(((await leaseConn.query(`SELECT size FROM ${PG_SCHEMA}.log_head`)) as [[bigint]])[0][0]);
  const issuerFor = async (signer: NoteSigner): Promise<CheckpointIssuer> =>
    new CheckpointIssuer(
      writer,
      {
        size,
        root: async (n) => Buffer.from(((await leaseConn.query('SELECT public.cot_log_root($1)', [String(n)])) as [[string]])[0][0], 'base64'),
        sync: () => undefined,
      },
      (await ledgers.all()).find((t) => t.name === CHECKPOINTS_TABLE) ?? null,
      signer,
      config.checkpoint.sinks.map((t) => sinkFor(t)),
      issuerSchedule(config.checkpoint, log),
      last === undefined ? null : { size: Number(last[0]), record: Number(last[1]) },
    );
  return { admin, ledgers, writer, leaseConn, last, note: last?.[2] ?? null, size, issuerFor };
}

/**
 * Records what was removed from a PostgreSQL engine behind the servers
 * (`cotwire accept-loss --url`): every ledger_seq of the log that no row
 * holds and no record accounts for, and the chains whose last steps are
 * gone, in one "appends lost" event signed by the instances' key, then a
 * checkpoint over it. The cut chains' heads are set back to the rows they
 * hold, so appends onto them go on from there.
 */
export async function acceptPostgresLoss(
  config: Config,
  log: Logger,
  reason: string,
): Promise<{ event: LogEvent; checkpoint: IssuedCheckpoint | null; cuts: readonly CutChain[] }> {
  const { value, stack } = await startParts(async (stack) => {
    const { admin, ledgers, writer, note, size, issuerFor } = await maintenanceParts(config, log, stack, 'cotwire accept-loss', NoLossError);
    const all = await ledgers.all();
    const cuts: CutChain[] = [];
    for (const t of all) cuts.push(...(await cutChains(admin, t, null)));
    const held = all.map((t) => `SELECT ledger_seq FROM ${qualifiedName(t)}`).join(' UNION ALL ');
    const absent = (await admin.query(
      `SELECT g.s FROM generate_series(1::int8, (SELECT size FROM ${PG_SCHEMA}.log_head)) AS g(s) EXCEPT SELECT u.ledger_seq FROM (${held}) AS u ORDER BY 1`,
    )) as Array<[bigint | string]>;
    const ranges = seqRuns(
      absent.map(([s]) => Number(s)),
      await accountedSeqs(admin, all),
    );
    if (ranges.length === 0 && cuts.length === 0)
      throw new NoLossError('the PostgreSQL engine has no loss to accept: every leaf of the log has its row, or is already recorded');
    const signer = await engineSigner(config, admin, note);
    const events = all.find((t) => t.name === LOG_EVENTS_TABLE) ?? null;
    const event = await recordLoss(writer, events, signer, await size(), { ranges, cuts }, reason);
    for (const c of cuts) {
      await admin.query(`UPDATE ${PG_SCHEMA}.chain_heads SET step_index = $3::int8, current_hash = $4 WHERE ledger = $1 AND chain_key = $2`, [
        c.ledger,
        c.key,
        String(c.present?.index ?? -1),
        c.present?.hash ?? '',
      ]);
    }
    const issuer = await issuerFor(signer);
    const checkpoint = await issuer.issue();
    await issuer.close(config.limits.shutdownGraceMs);
    return { event, checkpoint, cuts };
  });
  await stack.unwind(config.limits.shutdownGraceMs);
  return value;
}

/** The key the instances sign with (checkpoint.keyFile, or the one kept in the engine), which must be the one that signed last. */
async function engineSigner(config: Config, admin: PostgresConnection, lastNote: string | null): Promise<NoteSigner> {
  let signer: NoteSigner;
  if (config.checkpoint.keyFile !== null) {
    signer = readKeyFile(config.checkpoint.keyFile);
  } else {
    const shared = await sharedSignerKey(admin, null);
    if (shared === null) throw new NoLossError('the engine keeps no checkpoint key: record a lost key first (cotwire keygen --rotate --url ... --reason ...)');
    signer = parseSigner(shared);
  }
  const signedBy = keyBreak(lastNote, signer);
  const source = config.checkpoint.keyFile === null ? 'the key kept in the engine' : `checkpoint.keyFile (${config.checkpoint.keyFile})`;
  if (signedBy !== null) throw new NoLossError(keyBreakMessage(signedBy, signer, source, '`cotwire keygen --rotate --url <engine URL> --out NEW.key`'));
  return signer;
}
