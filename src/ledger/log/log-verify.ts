import type { RetainedSeqs } from '../erasure/retention-sql.js';
import type { SqlConnection } from '../../engine/port.js';
import { verifyConsistency } from './merkle.js';
import { MerkleLog } from './merkle-log.js';
import { leafPrefix, rowLeafHash } from './leaf.js';
import { accountedSeqs, LOG_EVENTS_TABLE, recordedLosses, type RecordedLoss } from './log-events.js';
import { openNote, parseCheckpoint, parseVerifier, type Checkpoint, type NoteVerifier } from './note.js';
import { canonicalTextSql, qualifiedName, type LedgerTable } from '../chain/schema.js';

/** What broke in the global log, and where. */
export interface LogBreak {
  /**
   * signature: a checkpoint does not verify with the key; missing: ledger_seq values are absent (rows
   * deleted); duplicate: a ledger_seq appears twice (rows added); truncated: a checkpoint covers more
   * leaves than the database holds (rows cut off the end, or an older copy of the database);
   * rewritten: the rows up to a checkpoint do not reproduce its root (edited, reordered, renumbered
   * or re-chained); forked: two checkpoints describe different histories.
   */
  readonly kind: 'signature' | 'missing' | 'duplicate' | 'truncated' | 'rewritten' | 'forked';
  readonly message: string;
  /** The first bad leaf (ledger_seq - 1), when known. */
  readonly leafIndex: number | null;
  readonly table: string | null;
  readonly session: string | null;
  readonly step: number | null;
}

export interface LogReport {
  /** Leaves the database holds: its largest ledger_seq. */
  readonly leaves: number;
  readonly checkpoints: number;
  /** Checkpoints whose root the database reproduces. */
  readonly matched: number;
  readonly breaks: LogBreak[];
  /** Leaves whose rows retention removed, each accounted for by a record; their leaves come from the node file. */
  readonly retained: number;
  /** Key rotations and lost keys the log records, in order, and whether this verification followed each. */
  readonly keyEvents: KeyEventReport[];
  /** Acknowledged appends recorded as lost: known gaps, whose leaves the log keeps and no row fills. */
  readonly losses: RecordedLoss[];
}

export interface KeyEventReport {
  readonly kind: string;
  readonly treeSize: number;
  readonly newKey: string;
  /** The new key is trusted from here: the rotation is signed by a trusted key, or the new key was given. */
  readonly followed: boolean;
  readonly message: string;
}

export interface CheckpointSource {
  readonly source: string;
  readonly text: string;
}

interface Row {
  readonly table: string;
  readonly session: string;
  readonly step: number;
}

const ZERO = Buffer.alloc(32);
/** Gaps and repeats are reported up to this many each; the rest are counted. */
const MAX_REPORTED = 20;

/**
 * Signed notes, one after another as a file sink appends them: a note ends
 * with its signature lines, and the next begins at the first line after
 * them that is not a signature.
 */
export function splitNotes(text: string): string[] {
  const notes: string[] = [];
  let current: string[] = [];
  let inSignatures = false;
  for (const line of text.split('\n')) {
    if (inSignatures && !line.startsWith('\u2014 ')) {
      notes.push(`${current.join('\n')}\n`);
      current = [];
      inSignatures = false;
      if (line === '') continue;
    }
    if (line === '' && current.length > 0 && !inSignatures) {
      inSignatures = true;
      current.push(line);
      continue;
    }
    if (line === '' && current.length === 0) continue;
    current.push(line);
  }
  if (current.length > 0) notes.push(`${current.join('\n')}\n`);
  return notes;
}

/**
 * Checks the ledgers' rows against signed checkpoints, trusting neither the
 * server nor the database: each checkpoint's signature, that the rows form
 * the gapless sequence 1..n, that the tree over their leaves has each
 * checkpoint's root at its size, and that consecutive checkpoints are
 * consistent. A node file (`<db>.merkle`) is used only where a signed root
 * vouches for it, to name the exact first leaf that differs.
 */
export async function verifyLog(
  conn: SqlConnection,
  ledgers: readonly LedgerTable[],
  sources: readonly CheckpointSource[],
  given: readonly NoteVerifier[],
  nodeFile: MerkleLog | null,
): Promise<LogReport> {
  const breaks: LogBreak[] = [];
  const verifiers = [...given];
  const keyEvents = await followRotations(conn, ledgers, verifiers);
  const retained = await accountedSeqs(conn, ledgers);
  const { leaves, rows } = await readLeaves(conn, ledgers, breaks, retained, nodeFile);
  const tree = MerkleLog.inMemory();
  tree.append(leaves.map((l) => l ?? ZERO));
  const at = (i: number): Pick<LogBreak, 'leafIndex' | 'table' | 'session' | 'step'> => {
    const r = rows[i];
    return { leafIndex: i, table: r?.table ?? null, session: r?.session ?? null, step: r?.step ?? null };
  };

  const checkpoints = openCheckpoints(sources, verifiers, breaks);
  let matched = 0;
  let lastGood = 0;
  for (const cp of checkpoints) {
    if (cp.size > leaves.length) {
      breaks.push({
        kind: 'truncated',
        message: `the checkpoint of ${cp.size} leaves (${cp.source}) covers more than the ${leaves.length} the database holds: rows after ledger_seq ${leaves.length} were cut off, or this is an older copy of the database`,
        ...at(leaves.length),
      });
      continue;
    }
    if (tree.root(cp.size).equals(cp.root)) {
      matched++;
      lastGood = Math.max(lastGood, cp.size);
      continue;
    }
    breaks.push(rewritten(cp, lastGood, leaves, nodeFile, at));
  }

  // Consecutive checkpoints: one history, judged by a tree that one of their own signed roots vouches for.
  for (let i = 1; i < checkpoints.length; i++) {
    const older = checkpoints[i - 1] as SignedCheckpoint;
    const newer = checkpoints[i] as SignedCheckpoint;
    if (older.size === newer.size) {
      if (!older.root.equals(newer.root)) breaks.push(forked(older, newer));
      continue;
    }
    const vouched = [tree, nodeFile].find((t) => t !== null && t.size >= newer.size && t.root(newer.size).equals(newer.root));
    if (vouched === undefined || vouched === null) continue;
    if (!verifyConsistency(older.size, newer.size, older.root, newer.root, vouched.consistency(older.size, newer.size))) {
      breaks.push(forked(older, newer));
    }
  }
  const losses = await recordedLosses(conn, ledgers);
  return { leaves: leaves.length, checkpoints: checkpoints.length, matched, breaks, retained: retained.size, keyEvents, losses };
}

/**
 * The log's key events, in order: a rotation signed by a key already
 * trusted makes its new key trusted too (`verifiers` grows); a lost key's
 * event is signed by the new key alone, so its key is trusted only when it
 * was given. Read from the database, which cannot forge a rotation: only the
 * old key can sign one.
 */
async function followRotations(conn: SqlConnection, ledgers: readonly LedgerTable[], verifiers: NoteVerifier[]): Promise<KeyEventReport[]> {
  const table = ledgers.find((t) => t.name === LOG_EVENTS_TABLE);
  if (table === undefined) return [];
  const rows = (await conn.query(
    `SELECT kind, tree_size, new_key, note FROM ${qualifiedName(table)} WHERE kind IN ('key rotated', 'key lost') ORDER BY ledger_seq`,
  )) as Array<[string, bigint | number, string, string]>;
  const out: KeyEventReport[] = [];
  for (const [kind, size, newKey, note] of rows) {
    const treeSize = Number(size);
    let next: NoteVerifier | null = null;
    try {
      next = parseVerifier(newKey);
    } catch {
      // A malformed key is reported below as not followed.
    }
    const known = next !== null && verifiers.some((v) => v.name === next?.name && v.keyHash === next?.keyHash);
    let followed = known;
    let message: string;
    if (next === null) {
      message = `the ${kind} event at tree size ${treeSize} names no valid verifier key`;
    } else if (kind === 'key rotated') {
      try {
        openNote(
          note,
          verifiers.filter((v) => !(v.name === next?.name && v.keyHash === next?.keyHash)),
        );
        followed = true;
        message = `at tree size ${treeSize} the key rotated to ${newKey}, signed by the key before it: followed`;
      } catch (err) {
        message = known
          ? `at tree size ${treeSize} the key rotated to ${newKey}, a key given to this verification`
          : `at tree size ${treeSize} the key rotated to ${newKey}, but the rotation is not signed by a key this verification trusts (${(err as Error).message}): checkpoints signed by the new key do not verify`;
      }
    } else {
      message = known
        ? `at tree size ${treeSize} the old key was recorded lost, and the new key ${newKey} was given to this verification`
        : `at tree size ${treeSize} the old key was recorded lost, and checkpoints are signed by ${newKey} from there, which no earlier key vouches for: give it with --key to trust it`;
    }
    if (followed && next !== null && !known) verifiers.push(next);
    out.push({ kind, treeSize, newKey, followed, message });
  }
  return out;
}

interface SignedCheckpoint extends Checkpoint {
  readonly source: string;
}

function forked(older: SignedCheckpoint, newer: SignedCheckpoint): LogBreak {
  return {
    kind: 'forked',
    message: `the checkpoints of ${older.size} (${older.source}) and ${newer.size} leaves (${newer.source}) are not consistent: they describe different histories`,
    leafIndex: null,
    table: null,
    session: null,
    step: null,
  };
}

/** Where the rows stop reproducing a checkpoint's root: exactly, when the node file's leaves are vouched for by that root. */
function rewritten(
  cp: SignedCheckpoint,
  lastGood: number,
  leaves: ReadonlyArray<Buffer | undefined>,
  nodeFile: MerkleLog | null,
  at: (i: number) => Pick<LogBreak, 'leafIndex' | 'table' | 'session' | 'step'>,
): LogBreak {
  if (nodeFile !== null && nodeFile.size >= cp.size && nodeFile.root(cp.size).equals(cp.root)) {
    for (let i = lastGood; i < cp.size; i++) {
      const signed = nodeFile.read(0, i);
      const found = leaves[i];
      if (found?.equals(signed) === true) continue;
      const where = at(i);
      const what =
        found === undefined
          ? `ledger_seq ${i + 1} is missing`
          : `the row at ledger_seq ${i + 1} (${where.table ?? '?'}, session "${where.session ?? ''}", step ${where.step ?? '?'}) is not the one the checkpoint signed: it was edited and re-chained, reordered or renumbered`;
      return { kind: 'rewritten', message: `the database does not reproduce the checkpoint of ${cp.size} leaves (${cp.source}): ${what}`, ...where };
    }
  }
  return {
    kind: 'rewritten',
    message: `the database does not reproduce the checkpoint of ${cp.size} leaves (${cp.source}): a row with ledger_seq from ${lastGood + 1} to ${cp.size} was edited, re-chained, reordered, removed or added (without the node file, the exact row cannot be named)`,
    leafIndex: lastGood,
    table: null,
    session: null,
    step: null,
  };
}

function openCheckpoints(sources: readonly CheckpointSource[], verifiers: readonly NoteVerifier[], breaks: LogBreak[]): SignedCheckpoint[] {
  const out: SignedCheckpoint[] = [];
  const names = [...new Set(verifiers.map((v) => v.name))].join(' or ');
  for (const { source, text } of sources) {
    for (const note of splitNotes(text)) {
      try {
        const opened = openNote(note, verifiers);
        const cp = parseCheckpoint(opened.text);
        if (!opened.signedBy.includes(cp.origin)) throw new Error(`its origin "${cp.origin}" is not the name of the key that signed it`);
        out.push({ ...cp, source });
      } catch (err) {
        breaks.push({
          kind: 'signature',
          message: `${source}: not a checkpoint signed by ${names}: ${(err as Error).message}`,
          leafIndex: null,
          table: null,
          session: null,
          step: null,
        });
      }
    }
  }
  // The same checkpoint from two sinks counts once.
  const unique = new Map(out.map((c) => [`${c.size}/${c.root.toString('base64')}`, c]));
  return [...unique.values()].sort((a, b) => a.size - b.size);
}

/** Every row's leaf, by ledger_seq - 1; gaps and repeats are recorded as breaks. */
async function readLeaves(
  conn: SqlConnection,
  ledgers: readonly LedgerTable[],
  breaks: LogBreak[],
  retained: RetainedSeqs,
  nodeFile: MerkleLog | null,
): Promise<{ leaves: Array<Buffer | undefined>; rows: Array<Row | undefined> }> {
  const leaves: Array<Buffer | undefined> = [];
  const rows: Array<Row | undefined> = [];
  let repeats = 0;
  for (const table of ledgers) {
    const key =
      table.chainKey === null
        ? `''`
        : `coalesce(${canonicalTextSql(table.chainKey, table.columns.find((c) => c.name === table.chainKey)?.type ?? 'VARCHAR')}, '')`;
    const prefix = leafPrefix(table.schema, table.name);
    const name = `${table.schema}.${table.name}`;
    const result = (await conn.query(`SELECT ledger_seq, ${key}, current_hash, step_index FROM ${qualifiedName(table)}`)) as Array<
      [bigint, string, string, number]
    >;
    for (const [seq, chainKey, hash, step] of result) {
      const i = Number(seq) - 1;
      if (i < 0) continue;
      if (leaves[i] !== undefined) {
        if (repeats++ < MAX_REPORTED) {
          breaks.push({
            kind: 'duplicate',
            message: `ledger_seq ${i + 1} appears more than once: rows were added (${name}, session "${chainKey}", step ${step})`,
            leafIndex: i,
            table: name,
            session: chainKey,
            step: Number(step),
          });
        }
        continue;
      }
      leaves[i] = rowLeafHash(prefix, chainKey, hash);
      rows[i] = { table: name, session: chainKey, step: Number(step) };
    }
  }
  // Rows retention removed: a record accounts for each, and the node file still holds its leaf, which
  // the checkpoints' roots then vouch for. Without the node file they stay unknown, and the roots cannot match.
  for (let i = 0; i < leaves.length; i++) {
    if (leaves[i] === undefined && retained.has(i + 1) && nodeFile !== null && nodeFile.size > i) leaves[i] = nodeFile.read(0, i);
  }
  // Runs of missing ledger_seq: deleted rows.
  let reported = 0;
  for (let i = 0; i < leaves.length; i++) {
    if (leaves[i] !== undefined || retained.has(i + 1)) continue;
    let end = i;
    while (end + 1 < leaves.length && leaves[end + 1] === undefined) end++;
    if (reported++ < MAX_REPORTED) {
      const before = i > 0 ? rows[i - 1] : undefined;
      breaks.push({
        kind: 'missing',
        message: `ledger_seq ${i + 1}${end > i ? `..${end + 1}` : ''} ${end > i ? 'are' : 'is'} missing: rows were deleted${before === undefined ? '' : ` (after ${before.table}, session "${before.session}", step ${before.step})`}`,
        leafIndex: i,
        table: null,
        session: null,
        step: null,
      });
    }
    i = end;
  }
  return { leaves: Array.from({ length: leaves.length }, (_, i) => leaves[i]), rows };
}
