import type { SqlConnection } from '../../../engine/port.js';
import type { LedgerCatalog } from '../../../ledger/chain/catalog.js';
import { verdictOf, type ChainVerdict, type ChainVerifier } from '../../../ledger/chain/verdict.js';
import { pgVerifySql } from './verify-sql.js';

/** Every chain of every ledger of a PostgreSQL engine, by the README's specification in PostgreSQL's SQL (verify-sql.ts). */
export function chainVerifier(conn: SqlConnection, catalog: LedgerCatalog): ChainVerifier {
  return {
    async verify(chainKey: string | null): Promise<ChainVerdict[]> {
      const verdicts: ChainVerdict[] = [];
      for (const table of await catalog.all()) {
        if (chainKey !== null && table.chainKey === null) continue;
        const rows = await conn.query(pgVerifySql(table, chainKey !== null), chainKey === null ? [] : [chainKey]);
        for (const r of rows) verdicts.push(verdictOf(table, r));
      }
      return verdicts;
    },
  };
}
