import type { EngineConnection, SqlConnection } from '../engine/port.js';
import { PgError } from '../errors/pg-error.js';
import { SqlState } from '../errors/sqlstate.js';
import { appendRows, inTransaction } from './applier.js';
import { recordHashVersionSql } from './hash-version.js';
import { leafPrefix, rowLeafHash, type MerkleLog } from './merkle-log.js';
import type { Hash } from './merkle.js';
import { PG_SCHEMA } from './pg-names.js';
import { canonicalPgTextSql } from './pg-verify-sql.js';
import { quoteIdent, type LedgerTable } from './schema.js';

/**
 * The way back: every ledger of a PostgreSQL engine into a new DuckDB
 * file, as canonical texts (so DuckDB holds the same values and recomputes
 * the same hashes), with the global log's leaves written to the file's node
 * file in ledger_seq order, so the engine's signed checkpoints verify
 * against the file and a server on it goes on from each chain's head.
 */

const ROWS_PER_BATCH = 5000;

export interface DuckdbImportReport {
  readonly ledgers: ReadonlyArray<{ readonly name: string; readonly rows: number }>;
  readonly leaves: number;
}

export async function importIntoDuckdb(
  source: SqlConnection,
  ledgers: readonly LedgerTable[],
  target: EngineConnection,
  log: MerkleLog,
): Promise<DuckdbImportReport> {
  if (log.size !== 0) throw new PgError(SqlState.ObjectNotInPrerequisiteState, 'the node file beside the new database file already holds leaves');
  const [[catalog]] = (await target.query('SELECT current_database()')) as [[string]];
  const leaves = new Map<number, Hash>();
  const report: Array<{ name: string; rows: number }> = [];
  await inTransaction(target, async () => {
    for (const t of ledgers) {
      const local: LedgerTable = { ...t, catalog, schema: 'main', relation: `main.${quoteIdent(t.name)}`, journaled: false, redactions: null, retention: null };
      await target.run(
        `CREATE TABLE main.${quoteIdent(t.name)} (${t.columns.map((c) => `${quoteIdent(c.name)} ${c.type}${c.notNull ? ' NOT NULL' : ''}`).join(', ')})`,
      );
      await target.run(recordHashVersionSql(local, t.hashVersion));
      const names = t.columns.map((c) => c.name);
      const at = (name: string): number => names.indexOf(name);
      const prefix = leafPrefix('main', t.name);
      let rows = 0;
      for (let offset = 0; ; offset += ROWS_PER_BATCH) {
        const batch = (await source.query(
          `SELECT ${t.columns.map((c) => canonicalPgTextSql(c.name, c.type, 'r.')).join(', ')} FROM ${t.relation ?? ''} r ORDER BY r.ledger_seq LIMIT ${ROWS_PER_BATCH} OFFSET ${offset}`,
        )) as Array<Array<string | null>>;
        if (batch.length === 0) break;
        await appendRows(target, local, batch);
        for (const r of batch) {
          const key = t.chainKey === null ? '' : (r[at(t.chainKey)] ?? '');
          leaves.set(Number(r[at('ledger_seq')]) - 1, rowLeafHash(prefix, key, r[at('current_hash')] as string));
        }
        rows += batch.length;
      }
      report.push({ name: t.name, rows });
    }
  });
  const [[size]] = (await source.query(`SELECT size FROM ${PG_SCHEMA}.log_head`)) as [[bigint]];
  const count = Number(size);
  // Leaves whose rows retention removed are the engine's own, from its nodes (leaf i is node 2i - popcount(i)).
  const missing: number[] = [];
  for (let i = 0; i < count; i++) if (!leaves.has(i)) missing.push(i);
  if (missing.length > 0) {
    const rows = (await source.query(
      `SELECT n.position, n.hash FROM ${PG_SCHEMA}.log_nodes n WHERE n.position = ANY (ARRAY(SELECT 2 * i - bit_count(i::bit(64)) FROM unnest($1::int8[]) AS i))`,
      [`{${missing.join(',')}}`],
    )) as Array<[bigint, Buffer]>;
    const byPosition = new Map(rows.map(([p, h]) => [Number(p), h]));
    for (const i of missing) {
      let ones = 0;
      for (let m = i; m > 0; m = Math.floor(m / 2)) ones += m % 2;
      const leaf = byPosition.get(2 * i - ones);
      if (leaf === undefined) throw new PgError(SqlState.DataCorrupted, `ledger_seq ${i + 1} has no row and no leaf in the engine's log: its log has a gap`);
      leaves.set(i, leaf);
    }
  }
  const ordered: Hash[] = [];
  for (let i = 0; i < count; i++) ordered.push(leaves.get(i) as Hash);
  log.append(ordered);
  log.sync();
  return { ledgers: report, leaves: count };
}
