import type { EngineConnection } from '../../../engine/port.js';
import { canonicalTextSql, qualifiedName, quoteIdent, type LedgerTable } from '../../../ledger/chain/schema.js';
import type { ErasureStore } from '../../../ledger/erasure/store.js';

/**
 * Erasure on the DuckDB engine: the server is the file's only user, so a
 * transaction of its own changes the rows; the bytes leave the file at its
 * next rewrite (start/file.ts), which the erasure hooks ask for.
 */
export function duckdbErasureStore(conn: EngineConnection): ErasureStore {
  return {
    conn,
    textSql: canonicalTextSql,
    relation: qualifiedName,
    sessionsSql(table: LedgerTable): string {
      const key = `CAST(${quoteIdent(table.chainKey as string)} AS VARCHAR)`;
      return `SELECT ${key} AS k, count(*), min(step_index), max(step_index), min(ledger_seq), max(ledger_seq), epoch_us(max(created_at)),
              arg_max(current_hash, step_index), string_agg(CAST(ledger_seq AS VARCHAR), ',' ORDER BY ledger_seq)
       FROM ${qualifiedName(table)} GROUP BY k HAVING max(created_at) < CAST($1 AS TIMESTAMPTZ) ORDER BY min(ledger_seq)`;
    },
    async vectors(): Promise<string | null> {
      const [[n]] = (await conn.query(
        `SELECT count(*) FROM system.main.duckdb_tables() WHERE database_name = current_database() AND schema_name = 'main' AND table_name = '_cot_embeddings'`,
      )) as [[bigint]];
      return Number(n) > 0 ? 'main._cot_embeddings' : null;
    },
    async change(_tables, statements): Promise<void> {
      await conn.run('BEGIN');
      try {
        for (const s of statements) {
          if (s.params === undefined) await conn.run(s.sql);
          else await conn.query(s.sql, s.params);
        }
        await conn.run('COMMIT');
      } catch (err) {
        await conn.run('ROLLBACK').catch(() => undefined);
        throw err;
      }
    },
  };
}
