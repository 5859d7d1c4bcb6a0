import type { EngineConnection } from '../engine/port.js';
import type { LedgerCatalog } from './catalog.js';
import type { LedgerTable } from './schema.js';
import { chainKeySql, verifySql } from './verify-sql.js';

/** The verdict on one chain, as the SQL verification computes it. */
export interface ChainVerdict {
  readonly table: string;
  readonly chainKey: string;
  readonly valid: boolean;
  readonly stepCount: number;
  readonly firstBrokenIndex: number | null;
  readonly breakKind: string | null;
  readonly expectedHash: string | null;
  readonly actualHash: string | null;
}

/**
 * Verifies every chain of every ledger (or one chain key) with the same SQL
 * that clients call, so the command line and SQL always agree.
 */
export async function verifyLedgers(conn: EngineConnection, catalog: LedgerCatalog, chainKey: string | null): Promise<ChainVerdict[]> {
  const verdicts: ChainVerdict[] = [];
  for (const table of await catalog.all()) {
    verdicts.push(...(await verifyTable(conn, table, chainKey)));
  }
  return verdicts;
}

async function verifyTable(conn: EngineConnection, table: LedgerTable, chainKey: string | null): Promise<ChainVerdict[]> {
  const rows = await conn.query(verifySql(table, chainKey === null ? null : `${chainKeySql(table)} = $1`), chainKey === null ? [] : [chainKey]);
  return rows.map((r) => ({
    table: `${table.schema}.${table.name}`,
    chainKey: String(r[0] ?? ''),
    valid: r[1] === true,
    stepCount: Number(r[2]),
    firstBrokenIndex: r[3] === null ? null : Number(r[3]),
    breakKind: (r[4] as string | null) ?? null,
    expectedHash: (r[5] as string | null) ?? null,
    actualHash: (r[6] as string | null) ?? null,
  }));
}
