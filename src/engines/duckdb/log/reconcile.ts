import { accountedSeqs } from '../../../ledger/log/log-events.js';
import type { EngineConnection } from '../../../engine/port.js';
import { leafHashSql, leafKeySql } from './log-resume.js';
import type { MerkleLog } from '../../../ledger/log/merkle-log.js';
import { leafPrefix, rowLeafHash } from '../../../ledger/log/leaf.js';
import { qualifiedName, type LedgerTable } from '../../../ledger/chain/schema.js';

export type { AuditFinding, FindingKind } from '../../../ledger/log/audit-finding.js';
import { missingRunFinding, type AuditFinding } from '../../../ledger/log/audit-finding.js';

/** A chain's newest row, as the writer or the last audit saw it: how a cut tail is recognised. */
export interface KnownHead {
  readonly table: LedgerTable;
  readonly key: string;
  readonly hash: string;
}

export interface ReconcileBounds {
  /** The engine held every row up to this ledger_seq before the audit's snapshot was taken. */
  readonly applied: number;
  /**
   * Once the commit in flight (if any) has settled: the last ledger_seq the
   * writer acknowledged (a row beyond it is not the writer's), and the log's
   * size (rows between the two are acknowledged but not in the log yet).
   */
  integrated(): Promise<{ readonly acknowledged: number; readonly logged: number }>;
  /** Chain heads known from before, to name the chain of a missing row. */
  readonly heads: Iterable<KnownHead>;
  /** Called after each round of leaves that took `busyMs`: the background audit pauses there. */
  readonly pause?: (busyMs: number) => Promise<void>;
}

export interface Reconciliation {
  readonly findings: AuditFinding[];
  /** Rows read. */
  readonly rows: number;
  /** Leaves checked. */
  readonly leaves: number;
  /** Leaves whose rows retention removed, each accounted for by a record. */
  readonly retained: number;
  /** Each chain's newest row that matched the log: the next audit's known heads. */
  readonly heads: KnownHead[];
}

/** Leaves compared per round (a row group's worth): a round's leaf hashes are held in memory, then the event loop breathes. */
const CHUNK = 122_880;

interface SeenRow {
  readonly table: LedgerTable;
  readonly key: string;
  readonly hash: string;
}

/**
 * Holds the ledgers' rows against the global log, inside the caller's
 * snapshot (one read-only transaction on `conn`): every leaf up to the
 * applied sequence must have exactly one row whose leaf hash is the same,
 * and every other row must be a leaf the writer integrated since.
 */
export async function reconcile(conn: EngineConnection, ledgers: readonly LedgerTable[], log: MerkleLog, bounds: ReconcileBounds): Promise<Reconciliation> {
  const leafOf = leafHasher();
  const upTo = Math.min(log.size, bounds.applied);
  const found = new Findings();
  /** Missing leaves by their hash, to name their chain afterwards. */
  const missing = new Map<string, number>();
  /** Rows whose leaf is not the log's, by table: their chain key is read afterwards. */
  const suspects = new Map<LedgerTable, Array<{ seq: number; leaf: string; kind: 'altered' | 'unlogged' }>>();
  const suspect = (table: LedgerTable, seq: number, leaf: string, kind: 'altered' | 'unlogged'): void => {
    let list = suspects.get(table);
    if (list === undefined) {
      list = [];
      suspects.set(table, list);
    }
    list.push({ seq, leaf, kind });
  };
  const retained = await accountedSeqs(conn, ledgers);
  let retainedOut = 0;
  let rows = 0;
  for (let from = 0; from < upTo; from += CHUNK) {
    const started = performance.now();
    const to = Math.min(upTo, from + CHUNK);
    const slots = new Array<Array<{ table: LedgerTable; leaf: string }> | undefined>(to - from);
    for (const table of ledgers) {
      const got = (await conn.query(
        `SELECT ledger_seq, ${leafHashSql(table)} FROM ${qualifiedName(table)} WHERE ledger_seq > ${from} AND ledger_seq <= ${to}`,
      )) as Array<[bigint | number, string]>;
      rows += got.length;
      for (const [seq, leaf] of got) {
        const at = Number(seq) - from - 1;
        const slot = slots[at];
        if (slot === undefined) slots[at] = [{ table, leaf }];
        else slot.push({ table, leaf });
      }
    }
    const leaves = log.leafRange(from, to);
    for (let i = 0; i < slots.length; i++) {
      const seq = from + i + 1;
      const expected = (leaves[i] as Buffer).toString('hex');
      const candidates = slots[i];
      if (candidates === undefined) {
        // Removed by retention, and accounted for by a record in the log: not a deletion.
        if (retained.has(seq)) retainedOut++;
        else missing.set(expected, seq);
        continue;
      }
      if (candidates.length === 1 && candidates[0]?.leaf === expected) continue;
      // With a repeated ledger_seq, the row that matches the log is the writer's; the others are not.
      const match = candidates.findIndex((r) => r.leaf === expected);
      candidates.forEach((r, n) => {
        if (n !== match) suspect(r.table, seq, r.leaf, match >= 0 || n > 0 ? 'unlogged' : 'altered');
      });
    }
    await (bounds.pause ?? breathe)(performance.now() - started);
  }
  // Rows beyond what the engine held when the snapshot opened: appends since, or rows the writer never wrote.
  const beyond: Array<{ table: LedgerTable; seq: number | null; leaf: string }> = [];
  for (const table of ledgers) {
    const got = (await conn.query(
      `SELECT ledger_seq, ${leafHashSql(table)} FROM ${qualifiedName(table)} WHERE ledger_seq IS NULL OR ledger_seq <= 0 OR ledger_seq > ${upTo}`,
    )) as Array<[bigint | number | null, string]>;
    rows += got.length;
    for (const [seq, leaf] of got) beyond.push({ table, seq: seq === null ? null : Number(seq), leaf });
  }
  if (beyond.length > 0) {
    const settled = await bounds.integrated();
    const logged = Math.min(settled.logged, log.size);
    const seen = new Set<number>();
    for (const r of beyond.sort((a, b) => (a.seq ?? 0) - (b.seq ?? 0))) {
      if (r.seq === null || r.seq <= 0 || r.seq > Math.max(settled.acknowledged, logged) || seen.has(r.seq)) {
        if (r.seq === null) found.add('unlogged', r.table, await keyOfNull(conn, r.table), null);
        else suspect(r.table, r.seq, r.leaf, 'unlogged');
        continue;
      }
      seen.add(r.seq);
      // Acknowledged, and its leaf waits for the node file: the next audit holds it against the log.
      if (r.seq > logged) continue;
      if (r.leaf !== log.read(0, r.seq - 1).toString('hex')) suspect(r.table, r.seq, r.leaf, 'altered');
    }
  }
  // Only the rows found wrong are read again, for the chain they are in.
  for (const [table, list] of suspects) {
    for (let i = 0; i < list.length; i += 10_000) {
      const part = list.slice(i, i + 10_000);
      const keys = (await conn.query(
        `SELECT ledger_seq, ${leafKeySql(table)}, ${leafHashSql(table)} FROM ${qualifiedName(table)} WHERE ledger_seq IN (${part.map((p) => p.seq).join(', ')})`,
      )) as Array<[bigint | number, string, string]>;
      const keyOf = new Map(keys.map(([seq, key, leaf]) => [`${Number(seq)}\u0000${leaf}`, key]));
      for (const p of part) found.add(p.kind, table, keyOf.get(`${p.seq}\u0000${p.leaf}`) ?? '', p.seq);
    }
  }
  const heads = await chainHeads(conn, ledgers, upTo);
  if (missing.size > 0) {
    const owners = await ownersOfMissing(conn, ledgers, missing, bounds.heads, leafOf);
    for (const [seq, owner] of [...missing.values()].sort((a, b) => a - b).map((s) => [s, owners.get(s)] as const)) {
      if (owner === undefined) found.addUnattributed(seq);
      else found.add('missing', owner.table, owner.key, seq);
    }
  }
  return { findings: found.list(), rows, leaves: upTo, heads, retained: retainedOut };
}

/** Each chain's newest row up to `upTo`: the next audit recognises a tail cut since by it. */
async function chainHeads(conn: EngineConnection, ledgers: readonly LedgerTable[], upTo: number): Promise<KnownHead[]> {
  const heads: KnownHead[] = [];
  for (const table of ledgers) {
    const got = (await conn.query(
      `SELECT ${leafKeySql(table)} AS k, arg_max(current_hash, ledger_seq) FROM ${qualifiedName(table)} WHERE ledger_seq > 0 AND ledger_seq <= ${upTo} GROUP BY k`,
    )) as Array<[string, string | null]>;
    for (const [key, hash] of got) if (hash !== null) heads.push({ table, key, hash });
  }
  return heads;
}

/** The chain key of a row without a ledger_seq (the first such row's, enough to name it). */
async function keyOfNull(conn: EngineConnection, table: LedgerTable): Promise<string> {
  const [row] = (await conn.query(`SELECT ${leafKeySql(table)} FROM ${qualifiedName(table)} WHERE ledger_seq IS NULL LIMIT 1`)) as Array<[string]>;
  return row?.[0] ?? '';
}

/**
 * Names the chain of missing leaves where something left tells: the row
 * after a deleted one still links to its hash (prev_hash), and a cut tail
 * was a chain's head the last time it was seen.
 */
async function ownersOfMissing(
  conn: EngineConnection,
  ledgers: readonly LedgerTable[],
  missing: ReadonlyMap<string, number>,
  knownHeads: Iterable<KnownHead>,
  leafOf: (r: SeenRow) => Buffer,
): Promise<Map<number, { table: LedgerTable; key: string }>> {
  const owners = new Map<number, { table: LedgerTable; key: string }>();
  const claim = (table: LedgerTable, key: string, hash: string): void => {
    const seq = missing.get(leafOf({ table, key, hash }).toString('hex'));
    if (seq !== undefined) owners.set(seq, { table, key });
  };
  const names = new Set(ledgers.map(qualifiedName));
  for (const h of knownHeads) if (names.has(qualifiedName(h.table))) claim(h.table, h.key, h.hash);
  for (const table of ledgers) {
    const name = qualifiedName(table);
    const dangling = (await conn.query(
      `SELECT ${leafKeySql(table)}, r.prev_hash FROM ${name} r
       WHERE r.prev_hash <> '' AND NOT EXISTS (SELECT 1 FROM ${name} p WHERE p.current_hash = r.prev_hash)`,
    )) as Array<[string, string]>;
    for (const [key, prev] of dangling) claim(table, key, prev);
  }
  return owners;
}

const DETAIL: Record<'missing' | 'altered' | 'unlogged', string> = {
  missing: 'acknowledged rows are gone from the ledger (deleted, or a cut tail)',
  altered: "rows differ from what was acknowledged: their hash is not the global log's (an edit, re-chained or not)",
  unlogged: 'rows the server never wrote: their ledger_seq is not in the global log, repeated, or null',
};

/** Findings gathered row by row, reported one per kind and chain with the ledger_seq range they span. */
class Findings {
  private readonly byChain = new Map<string, { kind: 'missing' | 'altered' | 'unlogged'; table: LedgerTable; key: string; seqs: number[]; nulls: number }>();
  /** Missing rows whose chain nothing tells, as runs of consecutive ledger_seq. */
  private readonly runs: Array<[number, number]> = [];

  add(kind: 'missing' | 'altered' | 'unlogged', table: LedgerTable, key: string, seq: number | null): void {
    const id = `${kind}\u0000${chainId(table, key)}`;
    let entry = this.byChain.get(id);
    if (entry === undefined) {
      entry = { kind, table, key, seqs: [], nulls: 0 };
      this.byChain.set(id, entry);
    }
    if (seq === null) entry.nulls++;
    else entry.seqs.push(seq);
  }

  /** Seqs arrive in increasing order. */
  addUnattributed(seq: number): void {
    const last = this.runs.at(-1);
    if (last !== undefined && last[1] === seq - 1) last[1] = seq;
    else this.runs.push([seq, seq]);
  }

  list(): AuditFinding[] {
    const out: AuditFinding[] = [];
    for (const e of this.byChain.values()) {
      const count = e.seqs.length + e.nulls;
      out.push({
        kind: e.kind,
        ledger: `${e.table.schema}.${e.table.name}`,
        chainKey: e.table.chainKey === null ? null : e.key,
        firstSeq: e.seqs.length === 0 ? null : e.seqs.reduce((a, b) => Math.min(a, b)),
        lastSeq: e.seqs.length === 0 ? null : e.seqs.reduce((a, b) => Math.max(a, b)),
        rows: count,
        detail: `${count} ${DETAIL[e.kind]}`,
      });
    }
    for (const [first, last] of this.runs) {
      out.push(missingRunFinding(first, last, `${last - first + 1} ${DETAIL.missing}; nothing left in the database tells which ledger or chain held them`));
    }
    return out.sort((a, b) => (a.firstSeq ?? 0) - (b.firstSeq ?? 0));
  }
}

/** A row's leaf hash in the global log; each table's constant part is computed once. */
function leafHasher(): (r: SeenRow) => Buffer {
  const prefixes = new WeakMap<LedgerTable, Buffer>();
  return (r) => {
    let prefix = prefixes.get(r.table);
    if (prefix === undefined) {
      prefix = leafPrefix(r.table.schema, r.table.name);
      prefixes.set(r.table, prefix);
    }
    return rowLeafHash(prefix, r.key, r.hash);
  };
}

function chainId(table: LedgerTable, key: string): string {
  return `${qualifiedName(table)}\u0000${key}`;
}

function breathe(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
