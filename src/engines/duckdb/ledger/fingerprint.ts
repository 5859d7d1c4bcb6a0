import type { EngineConnection } from '../../../engine/port.js';
import { qualifiedName, type LedgerTable } from '../../../ledger/chain/schema.js';

/**
 * A ledger's rows summed up cheaply: how many there are up to a ledger_seq,
 * the sum of their ledger_seq, and the sum of the first 60 bits of their
 * current_hash. The writer keeps the same sums for what it appends, so one
 * aggregate over two columns tells whether anything up to that point was
 * deleted, added or rewritten (a rewrite changes current_hash; making the
 * sums agree again means finding hashes with chosen 60-bit prefixes). It is
 * the audit's tripwire between full audits, not a proof: the full audit
 * holds every row against the global log.
 */
export interface Fingerprint {
  readonly rows: bigint;
  readonly seqSum: bigint;
  readonly hashSum: bigint;
}

export const NO_ROWS: Fingerprint = { rows: 0n, seqSum: 0n, hashSum: 0n };

export function addFingerprints(a: Fingerprint, b: Fingerprint): Fingerprint {
  return { rows: a.rows + b.rows, seqSum: a.seqSum + b.seqSum, hashSum: a.hashSum + b.hashSum };
}

export function sameFingerprint(a: Fingerprint, b: Fingerprint): boolean {
  return a.rows === b.rows && a.seqSum === b.seqSum && a.hashSum === b.hashSum;
}

const HEX60 = /^[0-9a-f]{15}/;

/** The first 60 bits of a hex hash, as the SQL below reads them (0 when it is not hex). */
export function hashPart(hex: string | null): bigint {
  const head = hex === null ? null : HEX60.exec(hex);
  return head === null ? 0n : BigInt(`0x${head[0]}`);
}

/** The fingerprint of chained rows (every column's text, table order), as the writer wrote them. */
export function fingerprintOf(table: LedgerTable, rows: ReadonlyArray<ReadonlyArray<string | null>>): Fingerprint {
  const seqAt = table.columns.findIndex((c) => c.name === 'ledger_seq');
  const hashAt = table.columns.findIndex((c) => c.name === 'current_hash');
  let seqSum = 0n;
  let hashSum = 0n;
  for (const row of rows) {
    seqSum += BigInt(row[seqAt] ?? 0);
    hashSum += hashPart(row[hashAt] ?? null);
  }
  return { rows: BigInt(rows.length), seqSum, hashSum };
}

export interface ObservedFingerprint {
  /** Rows with ledger_seq in 1..upTo. */
  readonly fingerprint: Fingerprint;
  /** Rows with no ledger_seq, or one below 1: never the writer's. */
  readonly unnumbered: number;
  /** The largest ledger_seq in the ledger, or 0. */
  readonly maxSeq: number;
}

/** The same sums over a ledger's rows, by the engine, in one scan of two columns. */
export async function observeFingerprint(conn: EngineConnection, table: LedgerTable, upTo: number): Promise<ObservedFingerprint> {
  const inRange = `ledger_seq > 0 AND ledger_seq <= ${upTo}`;
  const [[rows, seqSum, hashSum, unnumbered, maxSeq]] = (await conn.query(
    `SELECT count(*) FILTER (WHERE ${inRange}),
            coalesce(sum(ledger_seq) FILTER (WHERE ${inRange}), 0)::HUGEINT,
            coalesce(sum(coalesce(TRY_CAST('0x' || left(current_hash, 15) AS BIGINT), 0)) FILTER (WHERE ${inRange}), 0)::HUGEINT,
            count(*) FILTER (WHERE ledger_seq IS NULL OR ledger_seq <= 0),
            coalesce(max(ledger_seq), 0)
     FROM ${qualifiedName(table)}`,
  )) as [[bigint | number, bigint | number, bigint | number, bigint | number, bigint | number]];
  return {
    fingerprint: { rows: BigInt(rows), seqSum: BigInt(seqSum), hashSum: BigInt(hashSum) },
    unnumbered: Number(unnumbered),
    maxSeq: Number(maxSeq),
  };
}
