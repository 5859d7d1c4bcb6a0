import type { EngineConnection } from '../../../engine/port.js';
import { PgError } from '../../../errors/pg-error.js';
import { SqlState } from '../../../errors/sqlstate.js';
import { appendRows, inTransaction } from '../ledger/applier.js';
import { recordHashVersionSql } from '../../../ledger/chain/hash-version.js';
import type { MerkleLog } from '../../../ledger/log/merkle-log.js';
import type { Hash } from '../../../ledger/log/merkle.js';
import { orderedLeaves, transferRows, type LedgerExport } from '../../../ledger/transfer.js';
import { quoteIdent, type LedgerTable } from '../../../ledger/chain/schema.js';

/**
 * The way back: every ledger of a PostgreSQL engine into a new DuckDB
 * file, as canonical texts (so DuckDB holds the same values and recomputes
 * the same hashes), with the global log's leaves written to the file's node
 * file in ledger_seq order, so the engine's signed checkpoints verify
 * against the file and a server on it goes on from each chain's head.
 */

export interface DuckdbImportReport {
  readonly ledgers: ReadonlyArray<{ readonly name: string; readonly rows: number }>;
  readonly leaves: number;
}

export async function importIntoDuckdb(source: LedgerExport, target: EngineConnection, log: MerkleLog): Promise<DuckdbImportReport> {
  if (log.size !== 0) throw new PgError(SqlState.ObjectNotInPrerequisiteState, 'the node file beside the new database file already holds leaves');
  const [[catalog]] = (await target.query('SELECT current_database()')) as [[string]];
  const leaves = new Map<number, Hash>();
  const report: Array<{ name: string; rows: number }> = [];
  await inTransaction(target, async () => {
    for (const t of source.ledgers) {
      const local: LedgerTable = { ...t, catalog, schema: 'main', relation: `main.${quoteIdent(t.name)}`, journaled: false, redactions: null, retention: null };
      await target.run(
        `CREATE TABLE main.${quoteIdent(t.name)} (${t.columns.map((c) => `${quoteIdent(c.name)} ${c.type}${c.notNull ? ' NOT NULL' : ''}`).join(', ')})`,
      );
      await target.run(recordHashVersionSql(local, t.hashVersion));
      const rows = await transferRows(source, t, leaves, (batch) => appendRows(target, local, batch));
      report.push({ name: t.name, rows });
    }
  });
  const ordered = await orderedLeaves(source, leaves);
  log.append(ordered);
  log.sync();
  return { ledgers: report, leaves: ordered.length };
}
