import type { EngineConnection } from '../../../engine/port.js';
import type { LedgerCatalog } from '../../../ledger/chain/catalog.js';
import type { MerkleLog } from '../../../ledger/log/merkle-log.js';
import { leafPrefix, rowLeafHash } from '../../../ledger/log/leaf.js';
import { canonicalTextSql, qualifiedName, type LedgerTable } from '../../../ledger/chain/schema.js';
import { CHECKPOINTS_TABLE } from '../../../ledger/log/checkpoint-schema.js';

/** Leaves read from the ledgers per round when the tree catches up. */
const CHUNK = 100_000;

/**
 * Brings the tree up to the ledgers' committed rows after a start: the
 * stored nodes are kept up to the last checkpoint whose root they still
 * reproduce (nodes after it may not have reached the disk), and the leaves
 * after it are recomputed from the rows. If the rows no longer form a
 * gapless sequence (someone altered the file), the log stops at the last
 * leaf it can vouch for and the reason is returned: the server keeps
 * serving, and `cotwire verify` tells what changed.
 */
export async function resumeLog(conn: EngineConnection, catalog: LedgerCatalog, log: MerkleLog, committed: number): Promise<string | null> {
  const ledgers = await catalog.all();
  let trusted = Math.min(log.size, committed);
  const checkpoint = await lastCheckpoint(conn, ledgers);
  if (checkpoint !== null) {
    // A signed root vouches for its leaves even when rows they stand for are gone: they are kept,
    // and the audit reports those rows missing.
    trusted = checkpoint.size <= log.size && log.root(checkpoint.size).toString('base64') === checkpoint.root ? checkpoint.size : 0;
  } else if (trusted > 0) {
    // No checkpoint vouches for the file: its last leaf must at least be the database's.
    const [leaf] = await leavesFrom(conn, ledgers, trusted - 1, trusted);
    if (leaf === undefined || !leaf.equals(log.read(0, trusted - 1))) trusted = 0;
  }
  log.truncate(trusted);
  for (let from = trusted; from < committed; from += CHUNK) {
    try {
      log.append(await leavesFrom(conn, ledgers, from, Math.min(committed, from + CHUNK)));
    } catch (err) {
      if (err instanceof LogGapError) return err.message;
      throw err;
    }
  }
  return null;
}

/**
 * The leaf hashes of ledger_seq (from, to], in order, from every ledger's
 * rows. A missing or repeated ledger_seq means the rows were altered.
 */
export async function leavesFrom(conn: EngineConnection, ledgers: readonly LedgerTable[], from: number, to: number): Promise<Buffer[]> {
  const leaves = new Array<Buffer | undefined>(to - from);
  for (const table of ledgers) {
    const key = leafKeySql(table);
    const rows = (await conn.query(
      `SELECT ledger_seq, ${key}, current_hash FROM ${qualifiedName(table)} WHERE ledger_seq > ${from} AND ledger_seq <= ${to}`,
    )) as Array<[bigint | number, string, string]>;
    const prefix = leafPrefix(table.schema, table.name);
    for (const [seq, chainKey, hash] of rows) {
      const at = Number(seq) - from - 1;
      if (leaves[at] !== undefined) throw new LogGapError(`ledger_seq ${Number(seq)} appears more than once in the ledgers`);
      leaves[at] = rowLeafHash(prefix, chainKey, hash);
    }
  }
  const missing = leaves.findIndex((l) => l === undefined);
  if (missing >= 0) throw new LogGapError(`ledger_seq ${from + missing + 1} is missing from the ledgers`);
  return leaves as Buffer[];
}

/** A row's chain key as its leaf in the global log holds it: the key's canonical text, '' for none. */
export function leafKeySql(table: LedgerTable): string {
  return table.chainKey === null ? `''` : `coalesce(${canonicalTextSql(table.chainKey, columnType(table, table.chainKey))}, '')`;
}

/**
 * A row's leaf hash in the global log, as SQL (lowercase hex): the same
 * bytes as rowLeafHash, hashed by the engine, vectorised, so that holding a
 * million rows against the log does not hash them one by one in JavaScript.
 */
export function leafHashSql(table: LedgerTable): string {
  const fn = (name: string): string => `system.main.${name}`;
  const lp = (v: string): string =>
    `${fn('lpad')}(${fn('to_hex')}(${fn('octet_length')}(${fn('encode')}(${v}))), 16, '0') || ${fn('hex')}(${fn('encode')}(${v}))`;
  const constant = Buffer.concat([Buffer.from([0]), leafPrefix(table.schema, table.name)]).toString('hex');
  return `${fn('sha256')}(${fn('unhex')}('${constant}' || ${lp(leafKeySql(table))} || ${lp(`coalesce(current_hash, '')`)}))`;
}

/** The ledgers' rows no longer form a gapless sequence: they were altered outside the server. */
export class LogGapError extends Error {}

function columnType(table: LedgerTable, name: string): string {
  return table.columns.find((c) => c.name === name)?.type ?? 'VARCHAR';
}

async function lastCheckpoint(conn: EngineConnection, ledgers: readonly LedgerTable[]): Promise<{ size: number; root: string } | null> {
  const table = ledgers.find((t) => t.schema === 'main' && t.name === CHECKPOINTS_TABLE);
  if (table === undefined) return null;
  const rows = (await conn.query(`SELECT tree_size, root_hash FROM ${qualifiedName(table)} ORDER BY ledger_seq DESC LIMIT 1`)) as Array<[bigint, string]>;
  const [row] = rows;
  return row === undefined ? null : { size: Number(row[0]), root: row[1] };
}
