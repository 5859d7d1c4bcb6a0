import type { EngineConnection, SqlConnection } from '../engine/port.js';
import { pgVerifySql } from './pg-verify-sql.js';
import type { LedgerCatalog } from './catalog.js';
import { qualifiedName, type LedgerTable } from './schema.js';
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
/** Every chain of every ledger of a PostgreSQL engine, by the README's specification in PostgreSQL's SQL (pg-verify-sql.ts). */
export async function verifyPgLedgers(conn: SqlConnection, catalog: LedgerCatalog, chainKey: string | null): Promise<ChainVerdict[]> {
  const verdicts: ChainVerdict[] = [];
  for (const table of await catalog.all()) {
    if (chainKey !== null && table.chainKey === null) continue;
    const rows = await conn.query(pgVerifySql(table, chainKey !== null), chainKey === null ? [] : [chainKey]);
    for (const r of rows) verdicts.push(verdictOf(table, r));
  }
  return verdicts;
}

export async function verifyLedgers(conn: EngineConnection, catalog: LedgerCatalog, chainKey: string | null, pacing?: Pacing): Promise<ChainVerdict[]> {
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

function verdictOf(table: LedgerTable, r: unknown[]): ChainVerdict {
  return {
    table: `${table.schema}.${table.name}`,
    chainKey: String(r[0] ?? ''),
    valid: r[1] === true,
    stepCount: Number(r[2]),
    firstBrokenIndex: r[3] === null ? null : Number(r[3]),
    breakKind: (r[4] as string | null) ?? null,
    expectedHash: (r[5] as string | null) ?? null,
    actualHash: (r[6] as string | null) ?? null,
  };
}
