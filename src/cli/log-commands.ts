import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
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
export async function verifyLogOffline(conn: EngineConnection, db: string, checkpoints: readonly string[], key: string): Promise<LogReport> {
  const verifier = readVerifier(key);
  const sources = readCheckpoints(checkpoints);
  const nodeFile = nodeFileOf(db);
  try {
    // Every table with the chain columns is part of the log, whatever the server's prefixes were.
    return await verifyLog(conn, await duckdbLedgers(conn, () => true).all(), sources, verifier, nodeFile);
  } finally {
    nodeFile?.close();
  }
}

export function printLogReport(report: LogReport, out: Out): void {
  for (const b of report.breaks) out(`BROKEN log: ${b.kind}: ${b.message}\n`);
  out(
    `log: ${report.leaves} leaves, ${report.checkpoints} signed checkpoints, ${report.matched} reproduced by the database, ${report.breaks.length} breaks${report.retained > 0 ? `; ${report.retained} leaves retained out (each accounted for in _cot_retention)` : ''}\n`,
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
