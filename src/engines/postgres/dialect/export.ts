import type { SqlConnection } from '../../../engine/port.js';
import { PgError } from '../../../errors/pg-error.js';
import { SqlState } from '../../../errors/sqlstate.js';
import type { LedgerTable } from '../../../ledger/chain/schema.js';
import type { Hash } from '../../../ledger/log/merkle.js';
import type { LedgerExport } from '../../../ledger/transfer.js';
import { PG_SCHEMA } from '../ledger/names.js';
import { canonicalPgTextSql } from './verify-sql.js';

/**
 * A PostgreSQL engine as an export: its rows as PostgreSQL renders their
 * canonical texts, and its log's size and leaves from the log's own tables.
 */
export function postgresExport(conn: SqlConnection, ledgers: readonly LedgerTable[]): LedgerExport {
  return {
    ledgers,
    rows: async (t, offset, limit) =>
      (await conn.query(
        `SELECT ${t.columns.map((c) => canonicalPgTextSql(c.name, c.type, 'r.')).join(', ')} FROM ${t.relation ?? ''} r ORDER BY r.ledger_seq LIMIT ${limit} OFFSET ${offset}`,
      )) as Array<Array<string | null>>,
    logSize: async () => {
      const [[size]] = (await conn.query(`SELECT size FROM ${PG_SCHEMA}.log_head`)) as [[bigint]];
      return Number(size);
    },
    // Leaf i is node 2i - popcount(i).
    leaves: async (indexes) => {
      const rows = (await conn.query(
        `SELECT n.position, n.hash FROM ${PG_SCHEMA}.log_nodes n WHERE n.position = ANY (ARRAY(SELECT 2 * i - bit_count(i::bit(64)) FROM unnest($1::int8[]) AS i))`,
        [`{${indexes.join(',')}}`],
      )) as Array<[bigint, Buffer]>;
      const byPosition = new Map(rows.map(([p, h]) => [Number(p), h]));
      const found = new Map<number, Hash>();
      for (const i of indexes) {
        let ones = 0;
        for (let m = i; m > 0; m = Math.floor(m / 2)) ones += m % 2;
        const leaf = byPosition.get(2 * i - ones);
        if (leaf === undefined) throw new PgError(SqlState.DataCorrupted, `ledger_seq ${i + 1} has no row and no leaf in the engine's log: its log has a gap`);
        found.set(i, leaf);
      }
      return found;
    },
  };
}
