import { PgError } from '../errors/pg-error.js';
import { SqlState } from '../errors/sqlstate.js';
import type { LedgerTable } from './chain/schema.js';
import { leafPrefix, rowLeafHash } from './log/leaf.js';
import type { Hash } from './log/merkle.js';

/**
 * One engine's ledgers as the other engine takes them in (`cotwire import`):
 * every row as its canonical texts, so that the target holds the same values
 * and recomputes the same hashes, and the global log's leaves, so that the
 * signed checkpoints still verify. Each wing reads its own store into one
 * (its dialect's export) and fills its store from one (its import).
 */
export interface LedgerExport {
  readonly ledgers: readonly LedgerTable[];
  /** A batch of a ledger's rows, each column's canonical text in table order, by ledger_seq. */
  rows(table: LedgerTable, offset: number, limit: number): Promise<Array<Array<string | null>>>;
  /** The log's size at the source; null where it ends at the last row. */
  logSize(): Promise<number | null>;
  /** The source's own leaves at these indexes, whose rows retention removed; it throws where the source has none (a gap). */
  leaves(indexes: readonly number[]): Promise<Map<number, Hash>>;
}

/** Rows read from the source at a time. */
export const TRANSFER_BATCH = 5000;

/** Reads every row of `table` from the source, a batch at a time, and hands each batch on with the leaf of each row recorded. */
export async function transferRows(
  source: LedgerExport,
  table: LedgerTable,
  leaves: Map<number, Hash>,
  onBatch: (batch: ReadonlyArray<ReadonlyArray<string | null>>) => Promise<void>,
): Promise<number> {
  const names = table.columns.map((c) => c.name);
  const key = table.chainKey === null ? -1 : names.indexOf(table.chainKey);
  const seq = names.indexOf('ledger_seq');
  const hash = names.indexOf('current_hash');
  const prefix = leafPrefix('main', table.name);
  let rows = 0;
  for (let offset = 0; ; offset += TRANSFER_BATCH) {
    const batch = await source.rows(table, offset, TRANSFER_BATCH);
    if (batch.length === 0) break;
    await onBatch(batch);
    for (const r of batch) leaves.set(Number(r[seq]) - 1, rowLeafHash(prefix, key < 0 ? '' : (r[key] ?? ''), r[hash] as string));
    rows += batch.length;
  }
  return rows;
}

/** Every leaf of the log in order: the rows' own, and the source's for rows that are gone. */
export async function orderedLeaves(source: LedgerExport, leaves: ReadonlyMap<number, Hash>): Promise<Hash[]> {
  // A loop, not Math.max(...): a ledger of more than about 120,000 rows would overflow the call's arguments.
  let count = (await source.logSize()) ?? 0;
  for (const i of leaves.keys()) if (i + 1 > count) count = i + 1;
  const missing: number[] = [];
  for (let i = 0; i < count; i++) if (!leaves.has(i)) missing.push(i);
  const found = missing.length === 0 ? new Map<number, Hash>() : await source.leaves(missing);
  const ordered: Hash[] = [];
  for (let i = 0; i < count; i++) {
    const leaf = leaves.get(i) ?? found.get(i);
    if (leaf === undefined) throw new PgError(SqlState.DataCorrupted, `ledger_seq ${i + 1} has no row and no leaf at the source: its log has a gap`);
    ordered.push(leaf);
  }
  return ordered;
}
