import { existsSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { EngineConnection } from '../engine/port.js';
import { verifyLog, type CheckpointSource, type LogReport } from '../ledger/log/log-verify.js';
import type { MerkleLog } from '../ledger/log/merkle-log.js';
import { parseVerifier, type NoteVerifier } from '../ledger/log/note.js';
import { buildReceipt, checkReceipt, ReceiptError } from '../engines/duckdb/log/receipt.js';
import { writeKeyFile } from '../ledger/log/signing-key.js';
import { withDatabase } from './database.js';
import { UsageError } from './usage.js';
import { openNodeFile, nodeFilePath } from '../engines/duckdb/log/node-file.js';
import { duckdbLedgers } from '../engines/duckdb/ledger/catalog-source.js';

type Out = (s: string) => void;

/** `cotwire keygen`: a new signing key file; prints the verifier key to publish. */
export function keygenCommand(opts: { name: string; out: string }, out: Out): number {
  if (existsSync(opts.out)) throw new UsageError(`${opts.out} already exists; choose another file (a key is never overwritten)`);
  let verifier: string;
  try {
    verifier = writeKeyFile(opts.out, opts.name);
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  out(`${verifier}\n`);
  return 0;
}

/**
 * `cotwire keygen --rotate`: a new key file, the rotation recorded in the
 * stopped server's log (signed by the old key, or a "key lost" event with
 * the reason), and a checkpoint signed by the new key.
 */
export async function rotateKeyCommand(
  opts: { name?: string; out: string; db?: string; url?: string; config?: string; oldKey?: string; reason: string },
  out: Out,
): Promise<number> {
  const [{ loadConfig }, { createLogger }, { readKeyFile }, { generateKey, parseSigner, verifierKeyOf }, { RotationError }] = await Promise.all([
    import('../config/load.js'),
    import('../log/logger.js'),
    import('../ledger/log/signing-key.js'),
    import('../ledger/log/note.js'),
    import('../ledger/log/key-rotation.js'),
  ]);
  const config = loadConfig({
    argv: {
      ...(opts.config === undefined ? {} : { config: opts.config }),
      ...(opts.db === undefined ? {} : { db: opts.db }),
      ...(opts.url === undefined ? {} : { 'engine-url': opts.url }),
    },
    env: process.env,
  });
  const onPostgres = config.engine.kind === 'postgres';
  if (!onPostgres && config.database.path === ':memory:')
    throw new UsageError('keygen --rotate needs --db (a DuckDB file) or --url (a PostgreSQL engine): the log it records in');
  if (existsSync(opts.out)) throw new UsageError(`${opts.out} already exists; choose another file (a key is never overwritten)`);
  let oldSigner: ReturnType<typeof readKeyFile> | null = null;
  if (opts.oldKey !== undefined) {
    try {
      oldSigner = readKeyFile(opts.oldKey);
    } catch (err) {
      throw new UsageError((err as Error).message);
    }
  }
  const name = opts.name ?? oldSigner?.name ?? `cotwire.local/${config.database.name}`;
  let signerKey: string;
  try {
    signerKey = generateKey(name).signerKey;
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  const newSigner = parseSigner(signerKey);
  try {
    // Written first, never over a file: a rotation recorded for a key that was then not saved would be the loss it prevents.
    writeFileSync(opts.out, `${signerKey}\n`, { mode: 0o600, flag: 'wx' });
    const logger = createLogger('warn', false, process.stderr);
    const request = { oldSigner, newSigner, reason: opts.reason };
    const { event, checkpoint } = onPostgres
      ? await (await import('../engines/postgres/maintenance.js')).rotatePostgresKey(config, logger, { ...request, newSignerKey: signerKey })
      : await (await import('../engines/duckdb/maintenance.js')).rotateDuckdbKey(config, logger, request);
    out(`${verifierKeyOf(newSigner)}\n`);
    process.stderr.write(
      `recorded "${event.kind}" in the log at tree size ${event.treeSize}${checkpoint === null ? '' : `, and signed a checkpoint of ${checkpoint.size} leaves with the new key`}. ` +
        `${event.kind === 'key lost' ? 'No verifier follows a lost key by itself: publish the new verifier key above, and verify with both keys (--key old --key new). ' : 'Verifiers that hold the old key follow the rotation. '}` +
        (onPostgres && config.checkpoint.keyFile === null
          ? `The instances' shared key in the engine is the new one; restart every instance.\n`
          : `Start the server with checkpoint.keyFile set to ${opts.out}.\n`),
    );
    return 0;
  } catch (err) {
    rmSync(opts.out, { force: true });
    if (err instanceof RotationError) throw new UsageError(err.message);
    throw err;
  }
}

/** `cotwire accept-loss`: the loss a start refused on, recorded in the log. */
export async function acceptLossCommand(opts: { db?: string; url?: string; config?: string; reason: string }, out: Out): Promise<number> {
  const [{ loadConfig }, { createLogger }, { NoLossError }, { StartupError }] = await Promise.all([
    import('../config/load.js'),
    import('../log/logger.js'),
    import('../ledger/log/loss.js'),
    import('../server/startup.js'),
  ]);
  const config = loadConfig({
    argv: {
      ...(opts.config === undefined ? {} : { config: opts.config }),
      ...(opts.db === undefined ? {} : { db: opts.db }),
      ...(opts.url === undefined ? {} : { 'engine-url': opts.url }),
    },
    env: process.env,
  });
  const onPostgres = config.engine.kind === 'postgres';
  if (!onPostgres && config.database.path === ':memory:')
    throw new UsageError('accept-loss needs --db (the DuckDB file whose start names the loss) or --url (a PostgreSQL engine)');
  if (opts.reason.trim() === '') throw new UsageError('--reason must say why the appends are lost: it is the record');
  try {
    const logger = createLogger('warn', false, process.stderr);
    const { event, checkpoint, cuts } = onPostgres
      ? await (await import('../engines/postgres/maintenance.js')).acceptPostgresLoss(config, logger, opts.reason)
      : await (await import('../engines/duckdb/maintenance.js')).acceptDuckdbLoss(config, logger, opts.reason);
    const what = [event.seqs === '' ? [] : [`ledger_seq ${event.seqs}`], cuts.length === 0 ? [] : [`the cut ends of ${cuts.length} chains`]]
      .flat()
      .join(' and ');
    out(
      `recorded the loss of ${what} in the log at tree size ${event.treeSize}${checkpoint === null ? '' : `, and signed a checkpoint of ${checkpoint.size} leaves`}; the server starts again, and every audit shows the gap\n`,
    );
    return 0;
  } catch (err) {
    if (err instanceof NoLossError || err instanceof StartupError) throw new UsageError(err.message);
    throw err;
  }
}

/** A verifier key given as text, or as the file that holds it. */
export function readVerifier(value: string): NoteVerifier {
  const text = /^[^\s+]+\+[0-9a-f]{8}\+[A-Za-z0-9+/=]+$/.test(value.trim()) ? value : readText(value, 'verifier key');
  try {
    return parseVerifier(text.trim());
  } catch (err) {
    throw new UsageError(`not a verifier key (as printed by \`cotwire keygen\`): ${(err as Error).message}`);
  }
}

function readText(path: string, what: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    throw new UsageError(`cannot read the ${what} ${path}: ${(err as Error).message}`);
  }
}

/** Checkpoint files, and every file in checkpoint directories (as a directory sink writes them). */
export function readCheckpoints(paths: readonly string[]): CheckpointSource[] {
  const sources: CheckpointSource[] = [];
  for (const path of paths) {
    if (existsSync(path) && statSync(path).isDirectory()) {
      for (const f of readdirSync(path)
        .filter((n) => n.endsWith('.checkpoint'))
        .sort()) {
        sources.push({ source: join(path, f), text: readText(join(path, f), 'checkpoint') });
      }
    } else {
      sources.push({ source: path, text: readText(path, 'checkpoint') });
    }
  }
  return sources;
}

/** The node file beside a database, opened read-only, when there is one. */
function nodeFileOf(db: string): MerkleLog | null {
  const path = nodeFilePath(db);
  if (!existsSync(path)) return null;
  try {
    return openNodeFile(path, true);
  } catch {
    // Unreadable or not ours: verification goes on without it.
    return null;
  }
}

/** The log part of `cotwire verify`. */
export async function verifyLogOffline(conn: EngineConnection, db: string, checkpoints: readonly string[], keys: readonly string[]): Promise<LogReport> {
  const verifiers = keys.map(readVerifier);
  const sources = readCheckpoints(checkpoints);
  const nodeFile = nodeFileOf(db);
  try {
    // Every table with the chain columns is part of the log, whatever the server's prefixes were.
    return await verifyLog(conn, await duckdbLedgers(conn, () => true).all(), sources, verifiers, nodeFile);
  } finally {
    nodeFile?.close();
  }
}

export function printLogReport(report: LogReport, out: Out): void {
  for (const e of report.keyEvents) out(`KEY ${e.kind}: ${e.message}\n`);
  for (const l of report.losses) {
    out(`GAP ledger_seq ${l.seqs}: ${l.rows} acknowledged appends were lost, recorded at ${l.recordedAt} by ${l.operator}: ${l.reason}\n`);
  }
  for (const b of report.breaks) out(`BROKEN log: ${b.kind}: ${b.message}\n`);
  out(
    `log: ${report.leaves} leaves, ${report.checkpoints} signed checkpoints, ${report.matched} reproduced by the database, ${report.breaks.length} breaks${report.retained > 0 ? `; ${report.retained} leaves without rows, each accounted for (_cot_retention, or a recorded loss in _cot_log_events)` : ''}\n`,
  );
}

/** `cotwire prove`: the receipt of one step, to check later with no database. */
export async function proveCommand(opts: { db: string; trace: string; out?: string }, out: Out): Promise<number> {
  return withDatabase(opts.db, false, async (conn) => {
    const nodeFile = nodeFileOf(opts.db);
    try {
      const receipt = await buildReceipt(conn, await duckdbLedgers(conn, () => true).all(), opts.trace, nodeFile);
      const text = `${JSON.stringify(receipt, null, 2)}\n`;
      if (opts.out === undefined) out(text);
      else {
        writeFileSync(opts.out, text);
        out(`wrote the receipt of leaf ${receipt.leaf_index} (tree of ${receipt.tree_size}) to ${opts.out}\n`);
      }
      return 0;
    } catch (err) {
      if (err instanceof ReceiptError) throw new UsageError(err.message);
      throw err;
    } finally {
      nodeFile?.close();
    }
  });
}

/** `cotwire check-receipt`: exit 0 when the receipt verifies, 1 when it does not. */
export function checkReceiptCommand(opts: { receipt: string; key: string }, out: Out): number {
  const verifier = readVerifier(opts.key);
  let parsed: unknown;
  try {
    parsed = JSON.parse(readText(opts.receipt, 'receipt'));
  } catch (err) {
    if (err instanceof UsageError) throw err;
    throw new UsageError(`${opts.receipt} is not JSON: ${(err as Error).message}`);
  }
  try {
    const ok = checkReceipt(parsed, verifier);
    out(`OK: leaf ${ok.leafIndex} is in the tree of ${ok.treeSize} leaves signed by ${ok.origin}\n`);
    return 0;
  } catch (err) {
    out(`FAILED: ${(err as Error).message}\n`);
    return 1;
  }
}
