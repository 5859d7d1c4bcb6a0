import { rowHashFor } from './row-hash.js';
import { digestColumn, markerOf, redactableColumns, redactedDigestsSql, withRedactedDigests } from '../erasure/redactions.js';
import { canonicalTextSql, qualifiedName, type LedgerColumn, type LedgerTable } from './schema.js';
import { chainKeySql } from './verdict-sql.js';

/**
 * One chain verified in the server's process: the stored rows are read from
 * the engine as their canonical texts (the same casts as the SQL
 * verification), and the hashes are recomputed with the writer's own
 * pre-image code. It answers exactly what verifySql answers for one chain,
 * for a fraction of the cost: the SQL form builds forty length-prefixed
 * fields per row and plans a large query on every call.
 */

/** `gap`: steps a recorded loss accounts for (`cotwire accept-loss`) are missing; the chain still verifies. */
export type BreakKind = 'edited' | 'inserted' | 'deleted' | 'reordered' | 'gap';

/** The ledger_seq ranges recorded lost, [first, last], from the log's events (ledger/log/log-events.ts). */
export type LostRanges = ReadonlyArray<readonly [number, number]>;

export interface ChainBreak {
  /** The step_index of the first broken row, or its position when rows before it are missing. */
  readonly firstBrokenIndex: number | null;
  readonly kind: BreakKind;
  readonly expectedHash: string | null;
  readonly actualHash: string | null;
}

export interface ChainCheck {
  readonly stepCount: number;
  /** Null when every row links and hashes as written; a `gap` only when nothing else breaks. */
  readonly firstBreak: ChainBreak | null;
}

/** What the check needs of one stored row. */
export interface StoredLink {
  readonly stepIndex: number | null;
  readonly ledgerSeq: bigint | null;
  readonly prevHash: string | null;
  readonly currentHash: string | null;
  /** The hash recomputed from the row's stored columns; null where it cannot be (a v3 row without a key for a committed column). */
  readonly recomputed: string | null;
}

/**
 * The SQL that reads one chain's rows as canonical texts, in table order,
 * then the recorded digest of each redactable column (null where it is not
 * redacted); $1 is the chain key.
 */
export function chainRowsSql(table: LedgerTable): string {
  const columns = table.columns.map((c) => canonicalTextSql(c.name, c.type));
  const digests = redactedDigestsSql(table) === null ? [] : redactableColumns(table).map((c) => digestColumn(c.name));
  return `SELECT ${[...columns, ...digests].join(', ')} FROM ${withRedactedDigests(table, qualifiedName(table), '$1')} WHERE ${chainKeySql(table)} = $1`;
}

/**
 * The rows chainRowsSql read, as links: each row's hash recomputed from its
 * texts. `redactable` names the columns whose digests follow the texts, in
 * order (an engine's own SQL may read them otherwise than chainRowsSql).
 */
export function storedLinks(
  table: LedgerTable,
  rows: ReadonlyArray<ReadonlyArray<unknown>>,
  redactable: readonly LedgerColumn[] = redactedDigestsSql(table) === null ? [] : redactableColumns(table),
): StoredLink[] {
  const names = table.columns.map((c) => c.name);
  const positions = redactable.map((c) => ({ at: names.indexOf(c.name), marker: markerOf(c)?.text ?? null }));
  const at = (name: string): number => names.indexOf(name);
  const [stepIndex, ledgerSeq, prevHash, currentHash] = [at('step_index'), at('ledger_seq'), at('prev_hash'), at('current_hash')];
  return rows.map((row) => {
    const all = row.map((v) => (v === null || v === undefined ? null : String(v)));
    const texts = all.slice(0, names.length);
    // A redacted column that holds its marker is stood for by its recorded digest.
    const digests: Array<Buffer | null> = [];
    positions.forEach((p, i) => {
      const digest = all[names.length + i] ?? null;
      if (digest !== null && /^[0-9a-f]{64}$/.test(digest) && texts[p.at] === p.marker) digests[p.at] = Buffer.from(digest, 'hex');
    });
    const step = texts[stepIndex] ?? null;
    const seq = texts[ledgerSeq] ?? null;
    return {
      stepIndex: step === null ? null : Number(step),
      ledgerSeq: seq === null ? null : BigInt(seq),
      prevHash: texts[prevHash] ?? null,
      currentHash: texts[currentHash] ?? null,
      recomputed: rowHashFor(table.hashVersion, table.name, names, texts, digests),
    };
  });
}

/** SQL's ORDER BY step_index, ledger_seq with NULLs last. */
function compareLinks(a: StoredLink, b: StoredLink): number {
  const order = <T extends number | bigint>(x: T | null, y: T | null): number => (x === y ? 0 : x === null ? 1 : y === null ? -1 : x < y ? -1 : 1);
  return order(a.stepIndex, b.stepIndex) || order(a.ledgerSeq, b.ledgerSeq);
}

/**
 * The verdict of verifySql for one chain: rows ordered by step_index, each
 * must sit at its own position, link to the row before it and hash to what
 * it holds. A row that does not link says how: it links to a later row of
 * the chain (reordered) or to none (inserted).
 */
/** Where a chain starts: at step 0, or after the steps retention removed from its start, linked to the last of them. */
export interface ChainStart {
  readonly index: number;
  readonly hash: string;
}

export const CHAIN_START: ChainStart = { index: 0, hash: '' };

export function checkChain(links: readonly StoredLink[], start: ChainStart = CHAIN_START, lost: LostRanges = []): ChainCheck {
  const rows = [...links].sort(compareLinks);
  const position = new Map<string, number>();
  rows.forEach((r, i) => {
    if (r.currentHash !== null && !position.has(r.currentHash)) position.set(r.currentHash, i);
  });
  // Steps a recorded loss accounts for: the rows after them stand that much further on, and link to a row that is gone.
  let shift = 0;
  let gap: ChainBreak | null = null;
  for (let i = 0; i < rows.length; i++) {
    const r = rows[i] as StoredLink;
    const before = rows[i - 1];
    const missing = lostSteps(r, before, i + start.index + shift, lost);
    shift += missing;
    const expectedPrev = missing > 0 ? r.prevHash : i === 0 ? start.hash : (before?.currentHash ?? null);
    const kind = breakOf(r, i + start.index + shift, expectedPrev, before, rows[i + 1], position, start.index + shift);
    if (kind === null) {
      if (missing > 0 && gap === null) gap = { firstBrokenIndex: (r.stepIndex as number) - missing, kind: 'gap', expectedHash: null, actualHash: r.prevHash };
      continue;
    }
    return {
      stepCount: rows.length,
      firstBreak: {
        firstBrokenIndex: kind === 'deleted' ? i + start.index : r.stepIndex,
        kind,
        expectedHash: kind === 'edited' ? r.recomputed : expectedPrev,
        actualHash: kind === 'edited' ? r.currentHash : r.prevHash,
      },
    };
  }
  return { stepCount: rows.length, firstBreak: gap };
}

/**
 * How many steps are missing right before `r` that a recorded loss accounts
 * for: all of them, when the ledger_seq between its predecessor's and its
 * own that no row holds are at least that many recorded lost; else none.
 */
function lostSteps(r: StoredLink, before: StoredLink | undefined, expected: number, lost: LostRanges): number {
  if (lost.length === 0 || r.stepIndex === null || r.ledgerSeq === null) return 0;
  const jump = r.stepIndex - (before === undefined ? expected : (before.stepIndex ?? expected - 1) + 1);
  if (jump <= 0) return 0;
  const from = Number(before?.ledgerSeq ?? 0n) + 1;
  const to = Number(r.ledgerSeq) - 1;
  let accounted = 0;
  for (const [first, last] of lost) accounted += Math.max(0, Math.min(last, to) - Math.max(first, from) + 1);
  return accounted >= jump ? jump : 0;
}

function breakOf(
  r: StoredLink,
  i: number,
  expectedPrev: string | null,
  before: StoredLink | undefined,
  after: StoredLink | undefined,
  position: ReadonlyMap<string, number>,
  offset: number,
): BreakKind | null {
  const repeated = r.stepIndex !== null && (before?.stepIndex === r.stepIndex || after?.stepIndex === r.stepIndex);
  if (repeated) return 'inserted';
  if (r.stepIndex !== null && r.stepIndex > i) return 'deleted';
  if (r.stepIndex !== null && r.stepIndex < i) return 'inserted';
  const unlinked = r.prevHash !== expectedPrev;
  // Only a row that does not link needs to know where the row it links to stands.
  const at = unlinked && r.prevHash !== '' && r.prevHash !== null ? position.get(r.prevHash) : undefined;
  const linked = at === undefined ? undefined : at + offset;
  const edited = r.recomputed !== r.currentHash;
  if (edited && unlinked && linked !== undefined && linked > i) return 'reordered';
  if (edited) return 'edited';
  if (unlinked && linked !== undefined) return 'reordered';
  if (unlinked) return 'inserted';
  return null;
}

/** The one row a chain's verification answers, by column. */
export interface ChainVerdict {
  readonly chain_key: string;
  readonly valid: boolean;
  readonly step_count: bigint;
  readonly first_broken_index: number | null;
  readonly break_kind: string | null;
  readonly expected_hash: string | null;
  readonly actual_hash: string | null;
}

/**
 * What verifySql answers for one chain from its check; `finding` is a break
 * the audit found against the global log, which fails the chain too. Null
 * for a chain that never was: no steps and no finding, no row.
 */
export function chainVerdict(key: string, check: ChainCheck, finding: string | null = null): ChainVerdict | null {
  if (check.stepCount === 0 && finding === null) return null;
  const b = check.firstBreak;
  return {
    chain_key: key,
    valid: (b === null || b.kind === 'gap') && finding === null,
    step_count: BigInt(check.stepCount),
    first_broken_index: b?.firstBrokenIndex ?? null,
    break_kind: b === null || b.kind === 'gap' ? (finding ?? b?.kind ?? null) : b.kind,
    expected_hash: b?.expectedHash ?? null,
    actual_hash: b?.actualHash ?? null,
  };
}
