import type { EngineConnection } from '../../../engine/port.js';
import type { LedgerCatalog } from '../../../ledger/chain/catalog.js';
import { qualifiedName, type LedgerTable } from '../../../ledger/chain/schema.js';
import { verifySql } from './verify-sql.js';
import { chainKeySql } from '../../../ledger/chain/verdict-sql.js';
import { verdictOf, type ChainVerdict, type ChainVerifier } from '../../../ledger/chain/verdict.js';

/**
 * Every chain of every ledger of a DuckDB file, by the README's specification
 * in DuckDB's SQL (verify-sql.ts), with `pacing` in slices of whole chains.
 */
export function chainVerifier(conn: EngineConnection, catalog: Pick<LedgerCatalog, 'all'>, pacing?: Pacing): ChainVerifier {
  return { verify: (chainKey) => verifyLedgers(conn, catalog, chainKey, pacing) };
}

async function verifyLedgers(conn: EngineConnection, catalog: Pick<LedgerCatalog, 'all'>, chainKey: string | null, pacing?: Pacing): Promise<ChainVerdict[]> {
  const verdicts: ChainVerdict[] = [];
  for (const table of await catalog.all()) {
    if (pacing === undefined || chainKey !== null || table.chainKey === null) {
      // Not push(...): a ledger of more than about 120,000 chains would overflow the call's arguments.
      for (const v of await verifyTable(conn, table, chainKey === null ? null : `${chainKeySql(table)} = $1`, chainKey)) verdicts.push(v);
      continue;
    }
    // The background audit verifies a large ledger in slices of whole chains, and pauses between them.
    const [[count]] = (await conn.query(`SELECT count(*) FROM ${qualifiedName(table)}`)) as [[bigint | number]];
    const slices = Math.max(1, Math.ceil(Number(count) / pacing.rowsPerSlice));
    const part: ChainVerdict[] = [];
    for (let s = 0; s < slices; s++) {
      const started = performance.now();
      const where = slices === 1 ? null : `system.main.hash(${chainKeySql(table)}) % ${slices} = ${s}`;
      for (const v of await verifyTable(conn, table, where, null)) part.push(v);
      await pacing.pause(performance.now() - started);
    }
    for (const v of part.sort((a, b) => (a.chainKey < b.chainKey ? -1 : a.chainKey > b.chainKey ? 1 : 0))) verdicts.push(v);
  }
  return verdicts;
}

/** How the background audit spreads its work: slices of about this many rows, and a pause after each. */
export interface Pacing {
  readonly rowsPerSlice: number;
  /** Called after a slice that took `busyMs`. */
  pause(busyMs: number): Promise<void>;
}

async function verifyTable(conn: EngineConnection, table: LedgerTable, where: string | null, chainKey: string | null): Promise<ChainVerdict[]> {
  const rows = await conn.query(verifySql(table, where, chainKey === null ? null : '$1'), chainKey === null ? [] : [chainKey]);
  return rows.map((r) => verdictOf(table, r));
}
