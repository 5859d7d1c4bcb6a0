import type { SqlConnection } from '../../../engine/port.js';
import { PgError } from '../../../errors/pg-error.js';
import { SqlState } from '../../../errors/sqlstate.js';
import { canonicalTextSql, qualifiedName, type LedgerTable } from '../../../ledger/chain/schema.js';
import type { Hash } from '../../../ledger/log/merkle.js';
import type { LedgerExport } from '../../../ledger/transfer.js';
import type { MerkleLog } from '../../../ledger/log/merkle-log.js';

/**
 * A stopped server's DuckDB file as an export: its rows as DuckDB renders
 * their canonical texts, and, for leaves whose rows retention removed, its
 * node file (null without one). Its log ends at its last row.
 */
export function duckdbExport(conn: SqlConnection, ledgers: readonly LedgerTable[], nodeFile: MerkleLog | null): LedgerExport {
  return {
    ledgers,
    rows: async (t, offset, limit) =>
      (await conn.query(
        `SELECT ${t.columns.map((c) => canonicalTextSql(c.name, c.type)).join(', ')} FROM ${qualifiedName(t)} ORDER BY ledger_seq LIMIT ${limit} OFFSET ${offset}`,
      )) as Array<Array<string | null>>,
    logSize: async () => null,
    leaves: async (indexes) => {
      const found = new Map<number, Hash>();
      for (const i of indexes) {
        const leaf = nodeFile?.leafRange(i, i + 1)[0];
        if (leaf === undefined) {
          throw new PgError(SqlState.DataCorrupted, `ledger_seq ${i + 1} has no row in the file and no leaf in its node file: the file's log has a gap`, {
            hint: 'Run `cotwire verify --db <file> --checkpoint ... --key ...` to see what is missing; the import keeps only a whole log.',
          });
        }
        found.set(i, leaf);
      }
      return found;
    },
  };
}
