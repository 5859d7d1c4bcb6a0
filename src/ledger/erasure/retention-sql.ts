import type { SqlConnection } from '../../engine/port.js';
import { CHAIN_COLUMNS, quoteIdent, quoteLiteral, type LedgerTable } from '../chain/schema.js';

/**
 * Retention by whole sessions: before the server removes a session's steps,
 * it appends one record per session to a chained, server-only ledger. The
 * record accounts for every removed ledger_seq, so the audit and the offline
 * check tell its gaps in the global log from deletions, and it holds the
 * chain's head (the last removed step's index and hash), so that a chain
 * the agent carries on later links to it and verifies from there.
 */

export const RETENTION_TABLE = '_cot_retention';

/** One chain's records are read with its verification, and by the writer for its head. */
export const RETENTION_INDEX_DDL = `CREATE INDEX IF NOT EXISTS ${'_cot_retention'}_chain ON main._cot_retention (chain_key)`;

export const RETENTION_DDL = `CREATE TABLE IF NOT EXISTS main.${RETENTION_TABLE} (
  retention_id UUID NOT NULL,
  ledger VARCHAR NOT NULL,
  chain_key VARCHAR NOT NULL,
  step_count BIGINT NOT NULL,
  first_step_index INTEGER NOT NULL,
  last_step_index INTEGER NOT NULL,
  first_seq BIGINT NOT NULL,
  last_seq BIGINT NOT NULL,
  seqs VARCHAR NOT NULL,
  last_step_at TIMESTAMP WITH TIME ZONE NOT NULL,
  final_hash VARCHAR NOT NULL,
  reason VARCHAR NOT NULL,
  retained_by VARCHAR NOT NULL,
  ${CHAIN_COLUMNS.map((c) => `${c.name} ${c.type} NOT NULL`).join(',\n  ')}
)`;

/** The ledgers retention never removes from: the records that account for the others' history. */
const KEPT = new Set(['_cot_retention', '_cot_redactions', '_cot_checkpoints', '_cot_security_events', '_cot_log_events']);

/** Whether retention applies to a ledger: chained by session, and not one of the server's own records. */
export function retainable(table: LedgerTable): boolean {
  return table.chainKey !== null && !KEPT.has(table.name);
}

/** Ledger_seq values as ranges, `1..3,5,9..12`: the record's account of which leaves it removed. */
export function encodeSeqs(seqs: readonly bigint[]): string {
  const sorted = [...seqs].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  const parts: string[] = [];
  for (let i = 0; i < sorted.length; ) {
    let j = i;
    while (j + 1 < sorted.length && sorted[j + 1] === (sorted[j] as bigint) + 1n) j++;
    parts.push(i === j ? String(sorted[i]) : `${String(sorted[i])}..${String(sorted[j])}`);
    i = j + 1;
  }
  return parts.join(',');
}

/** Ascending ledger_seq values as [first, last] runs, leaving out those `except` holds. */
export function seqRuns(ascending: Iterable<number>, except?: { has(seq: number): boolean }): Array<[number, number]> {
  const out: Array<[number, number]> = [];
  for (const seq of ascending) {
    if (except?.has(seq) === true) continue;
    const last = out[out.length - 1];
    if (last !== undefined && last[1] === seq - 1) last[1] = seq;
    else out.push([seq, seq]);
  }
  return out;
}

/** Every ledger_seq of sorted, disjoint [first, last] ranges, in order. */
export function* seqsIn(ranges: ReadonlyArray<readonly [number, number]>): Generator<number> {
  for (const [first, last] of ranges) for (let seq = first; seq <= last; seq++) yield seq;
}

/** Sorted, disjoint [first, last] ranges in encodeSeqs's text. */
export function encodeRanges(ranges: ReadonlyArray<readonly [number, number]>): string {
  return ranges.map(([a, b]) => (a === b ? String(a) : `${a}..${b}`)).join(',');
}

/** The ranges encodeSeqs wrote, as [first, last] pairs; malformed text yields none of its parts. */
export function decodeSeqs(text: string): Array<readonly [number, number]> {
  const out: Array<readonly [number, number]> = [];
  for (const part of text.split(',')) {
    const m = /^(\d+)(?:\.\.(\d+))?$/.exec(part);
    if (m === null) continue;
    const first = Number(m[1]);
    const last = m[2] === undefined ? first : Number(m[2]);
    if (last >= first) out.push([first, last]);
  }
  return out;
}

/** Sorted, merged ranges of ledger_seq removed by retention, for a membership test. */
export class RetainedSeqs {
  private readonly starts: number[] = [];
  private readonly ends: number[] = [];

  constructor(ranges: Iterable<readonly [number, number]>) {
    const sorted = [...ranges].sort((a, b) => a[0] - b[0]);
    for (const [first, last] of sorted) {
      const at = this.ends.length - 1;
      if (at >= 0 && first <= (this.ends[at] as number) + 1) this.ends[at] = Math.max(this.ends[at] as number, last);
      else {
        this.starts.push(first);
        this.ends.push(last);
      }
    }
  }

  get size(): number {
    return this.starts.reduce((n, s, i) => n + (this.ends[i] as number) - s + 1, 0);
  }

  ranges(): Array<readonly [number, number]> {
    return this.starts.map((s, i) => [s, this.ends[i] as number] as const);
  }

  has(seq: number): boolean {
    let lo = 0;
    let hi = this.starts.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if ((this.starts[mid] as number) > seq) hi = mid - 1;
      else if ((this.ends[mid] as number) < seq) lo = mid + 1;
      else return true;
    }
    return false;
  }
}

/** SQL reading every retention record's seqs text, or null where the database keeps none. */
export function retainedSeqsSql(retention: string | null): string | null {
  return retention === null ? null : `SELECT seqs FROM ${retention}`;
}

/** The join key and columns of a chain's retained prefix, for the verification SQL. */
const KEY = quoteIdent('cot_retained_key');
export const RETAINED_STEPS = quoteIdent('cot_retained_steps');
export const RETAINED_HASH = quoteIdent('cot_retained_hash');

/**
 * `FROM ledger` with each chain's retained prefix joined on: how many steps
 * were removed from its start, and the hash the first remaining row links
 * to. Unchanged where the ledger cannot have retention records.
 */
export function withRetainedPrefix(table: LedgerTable, from: string, keySql: string, chain: string | null = null): string {
  if (table.retention === null || !retainable(table))
    return `${from} CROSS JOIN (SELECT CAST(NULL AS BIGINT) AS ${RETAINED_STEPS}, CAST(NULL AS VARCHAR) AS ${RETAINED_HASH})`;
  // One chain's records are found through the index on chain_key.
  const one = chain === null ? '' : ` AND chain_key = CAST(${chain} AS VARCHAR)`;
  const prefix = `(SELECT chain_key AS ${KEY}, system.main.max(last_step_index) + 1 AS ${RETAINED_STEPS}, system.main.arg_max(final_hash, last_step_index) AS ${RETAINED_HASH}
    FROM ${table.retention} WHERE ledger = ${quoteLiteral(`${table.schema}.${table.name}`)}${one} GROUP BY chain_key)`;
  return `${from} LEFT JOIN ${prefix} ON ${KEY} = CAST(${keySql} AS VARCHAR)`;
}

/** Each chain's retained prefix: $1 is the chain key; no row when none was removed. */
export function retainedPrefixSql(table: LedgerTable): string | null {
  if (table.retention === null || !retainable(table)) return null;
  return `SELECT max(last_step_index) + 1, arg_max(final_hash, last_step_index) FROM ${table.retention}
    WHERE ledger = ${quoteLiteral(`${table.schema}.${table.name}`)} AND chain_key = $1 HAVING count(*) > 0`;
}

/** The ledger_seq values retention records account for (every ledger shares the one record ledger). */
export async function retainedSeqs(conn: SqlConnection, ledgers: readonly LedgerTable[]): Promise<RetainedSeqs> {
  const sql = retainedSeqsSql(ledgers.find((t) => t.retention !== null)?.retention ?? null);
  if (sql === null) return new RetainedSeqs([]);
  const rows = (await conn.query(sql)) as Array<[string]>;
  return new RetainedSeqs(rows.flatMap(([seqs]) => decodeSeqs(seqs)));
}
