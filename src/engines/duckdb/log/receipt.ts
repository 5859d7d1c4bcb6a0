import type { EngineConnection } from '../../../engine/port.js';
import { RECEIPT_FORMAT } from '../../../ledger/receipt-shape.js';
import { rowHashFor } from '../../../ledger/chain/row-hash.js';
import { CHECKPOINTS_TABLE } from '../../../ledger/log/checkpoint-schema.js';
import { leavesFrom } from './log-resume.js';
import { markerOf } from '../../../ledger/erasure/redactions.js';
import { verifyInclusion } from '../../../ledger/log/merkle.js';
import { MerkleLog } from '../../../ledger/log/merkle-log.js';
import { leafPrefix, rowLeafHash } from '../../../ledger/log/leaf.js';
import { openNote, parseCheckpoint, type NoteVerifier } from '../../../ledger/log/note.js';
import {
  canonicalTextSql,
  HASH_VERSION,
  HASH_VERSION_V2,
  HASH_VERSION_V3,
  qualifiedName,
  STEPS_TABLE,
  type HashVersion,
  type LedgerTable,
} from '../../../ledger/chain/schema.js';

export { RECEIPT_FORMAT };

/**
 * A self-contained proof that one step is in the log a signed checkpoint
 * describes (docs/transparency-log.md, "Receipts"): the row's canonical texts, its leaf
 * index, the inclusion proof and the signed checkpoint.
 */
export interface Receipt {
  readonly format: typeof RECEIPT_FORMAT;
  readonly schema: string;
  readonly table: string;
  readonly chain_key_column: string | null;
  /** The ledger's hash specification; receipts without it are cotwire/v1. */
  readonly hash_version?: HashVersion;
  /** cotwire/v2: the digest, SHA-256(lp(text)) in hex, recorded for each redacted column; its value is the marker. */
  readonly redacted?: Readonly<Record<string, string>>;
  readonly columns: ReadonlyArray<readonly [string, string | null]>;
  readonly leaf_index: number;
  readonly tree_size: number;
  readonly inclusion_proof: readonly string[];
  readonly checkpoint: string;
}

export class ReceiptError extends Error {}

/** The receipt of the step with this trace_id, against the latest checkpoint that covers it. */
export async function buildReceipt(conn: EngineConnection, ledgers: readonly LedgerTable[], traceId: string, nodeFile: MerkleLog | null): Promise<Receipt> {
  const steps = ledgers.find((t) => t.isSteps);
  if (steps === undefined) throw new ReceiptError(`the database has no ${STEPS_TABLE} ledger`);
  if (!/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(traceId)) throw new ReceiptError(`"${traceId}" is not a trace_id (a UUID)`);
  const texts = steps.columns.map((c) => canonicalTextSql(c.name, c.type)).join(', ');
  const [row] = (await conn.query(`SELECT ${texts} FROM ${qualifiedName(steps)} WHERE trace_id = CAST($1 AS UUID)`, [traceId])) as Array<Array<string | null>>;
  if (row === undefined) throw new ReceiptError(`no step has trace_id ${traceId}`);
  const columns = steps.columns.map((c, i) => [c.name, row[i] ?? null] as const);
  const seq = Number(columns.find(([n]) => n === 'ledger_seq')?.[1]);
  const redacted: Record<string, string> = {};
  if (steps.redactions !== null) {
    const records = (await conn.query(
      `SELECT column_name, min(value_digest) FROM ${steps.redactions} WHERE ledger = $1 AND target_seq = CAST($2 AS BIGINT) GROUP BY column_name`,
      [`${steps.schema}.${steps.name}`, String(seq)],
    )) as Array<[string, string]>;
    for (const [column, digest] of records) {
      const c = steps.columns.find((x) => x.name === column);
      // Only a column that holds its marker is stood for by the digest, as in verification.
      if (c !== undefined && row[steps.columns.indexOf(c)] === (markerOf(c)?.text ?? null)) redacted[column] = digest;
    }
  }
  const [cp] = (await conn.query(
    `SELECT tree_size, root_hash, checkpoint FROM main.${CHECKPOINTS_TABLE} WHERE tree_size >= $1 ORDER BY ledger_seq DESC LIMIT 1`,
    [String(seq)],
  )) as Array<[bigint, string, string]>;
  if (cp === undefined)
    throw new ReceiptError(`the step at ledger_seq ${seq} is not covered by a checkpoint yet; the server signs one within checkpoint.intervalSeconds`);
  const size = Number(cp[0]);
  const tree = await treeFor(conn, ledgers, size, Buffer.from(cp[1], 'base64'), nodeFile);
  return {
    format: RECEIPT_FORMAT,
    schema: steps.schema,
    table: steps.name,
    chain_key_column: steps.chainKey,
    hash_version: steps.hashVersion,
    ...(Object.keys(redacted).length === 0 ? {} : { redacted }),
    columns,
    leaf_index: seq - 1,
    tree_size: size,
    inclusion_proof: tree.inclusion(seq - 1, size).map((h) => h.toString('base64')),
    checkpoint: cp[2],
  };
}

/** The node file when the checkpoint's root vouches for it; otherwise the tree rebuilt from the rows. */
async function treeFor(conn: EngineConnection, ledgers: readonly LedgerTable[], size: number, root: Buffer, nodeFile: MerkleLog | null): Promise<MerkleLog> {
  if (nodeFile !== null && nodeFile.size >= size && nodeFile.root(size).equals(root)) return nodeFile;
  const tree = MerkleLog.inMemory();
  for (let from = 0; from < size; from += 100_000) tree.append(await leavesFrom(conn, ledgers, from, Math.min(size, from + 100_000)));
  if (!tree.root(size).equals(root)) throw new ReceiptError(`the database does not reproduce the checkpoint of ${size} leaves; run \`cotwire verify\``);
  return tree;
}

/** Checks a receipt with no database: the row's hash, its leaf, the inclusion proof and the checkpoint's signature. */
export function checkReceipt(value: unknown, verifier: NoteVerifier): { origin: string; leafIndex: number; treeSize: number } {
  const r = value as Partial<Receipt>;
  if (r === null || typeof r !== 'object' || r.format !== RECEIPT_FORMAT) throw new ReceiptError(`not a ${RECEIPT_FORMAT} receipt`);
  const { schema, table, columns, checkpoint, inclusion_proof: proof } = r;
  if (typeof schema !== 'string' || typeof table !== 'string' || !Array.isArray(columns) || typeof checkpoint !== 'string' || !Array.isArray(proof)) {
    throw new ReceiptError('the receipt lacks schema, table, columns, inclusion_proof or checkpoint');
  }
  const names = columns.map(([n]) => n);
  const texts = columns.map(([, v]) => v);
  const value_ = (name: string): string | null => texts[names.indexOf(name)] ?? null;
  const recorded = value_('current_hash');
  const version = r.hash_version ?? HASH_VERSION;
  if (version !== HASH_VERSION && version !== HASH_VERSION_V2 && version !== HASH_VERSION_V3)
    throw new ReceiptError(`hash_version ${JSON.stringify(version)} is not one this verifier knows`);
  const redacted = r.redacted ?? {};
  if (typeof redacted !== 'object' || redacted === null || (version === HASH_VERSION && Object.keys(redacted).length > 0)) {
    throw new ReceiptError('redacted is not an object of column digests, or the row is cotwire/v1');
  }
  const digests = names.map((n) => {
    const d = (redacted as Record<string, unknown>)[n];
    if (d === undefined) return null;
    if (typeof d !== 'string' || !/^[0-9a-f]{64}$/.test(d)) throw new ReceiptError(`redacted column ${JSON.stringify(n)} has no 64-hex-digit digest`);
    return Buffer.from(d, 'hex');
  });
  const computed = rowHashFor(version, table, names, texts, digests);
  if (computed === null || computed !== recorded) {
    throw new ReceiptError(
      `the row's hash is ${computed ?? 'not computable (a committed column has no key)'}, the receipt says ${String(recorded)}: the row was altered`,
    );
  }
  const index = Number(value_('ledger_seq')) - 1;
  if (index !== r.leaf_index) throw new ReceiptError(`leaf_index ${String(r.leaf_index)} is not ledger_seq - 1 (${index})`);
  let opened: string;
  try {
    opened = openNote(checkpoint, [verifier]).text;
  } catch (err) {
    throw new ReceiptError(`the checkpoint is not signed by ${verifier.name}: ${(err as Error).message}`);
  }
  const cp = parseCheckpoint(opened);
  if (cp.origin !== verifier.name) throw new ReceiptError(`the checkpoint's origin "${cp.origin}" is not the key's name "${verifier.name}"`);
  if (cp.size !== r.tree_size) throw new ReceiptError(`tree_size ${String(r.tree_size)} is not the checkpoint's ${cp.size}`);
  const key = r.chain_key_column === null || r.chain_key_column === undefined ? '' : (value_(r.chain_key_column) ?? '');
  const leaf = rowLeafHash(leafPrefix(schema, table), key, recorded);
  if (
    !(index >= 0 && index < cp.size) ||
    !verifyInclusion(
      index,
      cp.size,
      leaf,
      proof.map((p) => Buffer.from(String(p), 'base64')),
      cp.root,
    )
  ) {
    throw new ReceiptError(`the inclusion proof does not lead from leaf ${index} to the checkpoint's root`);
  }
  return { origin: cp.origin, leafIndex: index, treeSize: cp.size };
}
