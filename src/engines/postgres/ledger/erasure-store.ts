import type { SqlConnection } from '../../../engine/port.js';
import { qualifiedName, quoteIdent, type LedgerTable } from '../../../ledger/chain/schema.js';
import type { ErasureStore } from '../../../ledger/erasure/store.js';
import { canonicalPgTextSql } from '../dialect/verify-sql.js';
import type { PgRoles } from './names.js';
import { VECTORS } from '../search/search-sql.js';

/**
 * Erasure on a PostgreSQL engine. The ledgers' append-only trigger lets
 * their owner role alone UPDATE and DELETE (install.ts), and no client may
 * take that role: the server does, for the length of one transaction, on a
 * connection as the engine URL's role (a member of the owner). Then it
 * VACUUMs what it changed, so that the erased values leave the table's
 * pages and its TOAST (docs/erasure.md says what a backup, the WAL and a
 * replica keep).
 */
export function postgresErasureStore(conn: SqlConnection, roles: PgRoles): ErasureStore {
  const owner = quoteIdent(roles.owner);
  const relation = qualifiedName;
  return {
    conn,
    textSql: canonicalPgTextSql,
    relation,
    sessionsSql(table: LedgerTable): string {
      const key = `CAST(${quoteIdent(table.chainKey as string)} AS VARCHAR)`;
      return `SELECT ${key} AS k, count(*), min(step_index), max(step_index), min(ledger_seq), max(ledger_seq),
              (EXTRACT(EPOCH FROM max(created_at)) * 1000000)::int8,
              (pg_catalog.array_agg(current_hash ORDER BY step_index DESC))[1], pg_catalog.string_agg(ledger_seq::text, ',' ORDER BY ledger_seq)
       FROM ${relation(table)} GROUP BY k HAVING max(created_at) < $1::timestamptz ORDER BY min(ledger_seq)`;
    },
    vectors: () => Promise.resolve(VECTORS),
    async change(tables, statements): Promise<void> {
      await conn.run('BEGIN');
      try {
        await conn.run(`SET LOCAL ROLE ${owner}`);
        for (const s of statements) await conn.query(s.sql, s.params ?? []);
        await conn.run('COMMIT');
      } catch (err) {
        await conn.run('ROLLBACK').catch(() => undefined);
        throw err;
      }
      // VACUUM takes no transaction block, and wants the table's owner.
      await conn.run(`SET ROLE ${owner}`);
      try {
        for (const t of tables) await conn.run(`VACUUM ${relation(t)}`);
      } finally {
        await conn.run('RESET ROLE').catch(() => undefined);
      }
    },
  };
}
