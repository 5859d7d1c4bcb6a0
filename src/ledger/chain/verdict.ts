import type { LedgerTable } from './schema.js';

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
 * Verification of every chain of every ledger (or of one chain key), by the
 * README's specification in the engine's own SQL, the same SQL clients call,
 * so that the command line, the audit and SQL always agree. Each engine
 * implements it in its dialect; both give a broken chain the same verdict.
 */
export interface ChainVerifier {
  verify(chainKey: string | null): Promise<ChainVerdict[]>;
}

/** A verification query's row (chain_key, valid, step_count, first_broken_index, break_kind, expected_hash, actual_hash) as a verdict. */
export function verdictOf(table: LedgerTable, r: unknown[]): ChainVerdict {
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
