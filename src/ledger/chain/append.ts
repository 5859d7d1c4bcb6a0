import { randomBytes } from 'node:crypto';
import { PgError } from '../../errors/pg-error.js';
import { SqlState } from '../../errors/sqlstate.js';
import { leafPrefix } from '../log/leaf.js';
import { committedOf, rowHashFor } from './row-hash.js';
import { type EmbeddingSampleRule, selectedForEmbedding } from './embedding-sample.js';
import { HASH_VERSION_V3, type LedgerTable, SALT_COLUMN } from './schema.js';
import { type Precommitted, rowHashV3, rowHashV3Precommitted, SALT_BYTES, SaltKeys } from './commitments.js';

/** Rows for one ledger, as canonical texts of its client columns (table order, server columns left out). */
export interface AppendJob {
  readonly table: LedgerTable;
  readonly rows: ReadonlyArray<ReadonlyArray<string | null>>;
  /**
   * Each row's trace_id, given when the INSERT was answered before the
   * commit (RETURNING inside a transaction block); otherwise the writer
   * draws one.
   */
  readonly traceIds?: readonly string[];
}

/** Where a job's rows landed: their global sequence numbers, first to last. */
export interface AppendResult {
  readonly count: number;
  readonly firstSeq: bigint;
  readonly lastSeq: bigint;
  /** Every column's canonical text of each row, in table order, where the writer hands them back (on PostgreSQL). */
  readonly rows?: ReadonlyArray<ReadonlyArray<string | null>>;
}

/** One caller's jobs, waiting in a writer's queue for the group commit that takes them. */
export interface AppendUnit {
  readonly jobs: readonly AppendJob[];
  /** When it reached the writer (performance.now()). */
  readonly queued: number;
  readonly resolve: (r: AppendResult[]) => void;
  readonly reject: (err: unknown) => void;
}

/**
 * A transaction's place in the global append order, held from the first
 * INSERT that returns chain columns until the transaction ends: its rows are
 * chained at once, so their step_index, prev_hash, current_hash, created_at
 * and ledger_seq are known before COMMIT, and every other append waits, as
 * behind the row lock of a gap-free counter in PostgreSQL. ledger_seq has no
 * gaps, so a later append cannot take a number before the holder's end.
 */
export interface AppendHold {
  /** Chains the jobs after everything the hold already holds; each result carries its rows' texts. */
  add(jobs: readonly AppendJob[]): Promise<AppendResult[]>;
  /** Makes every row the hold chained durable, then lets the other appends go. */
  commit(): Promise<void>;
  /** Forgets the rows (ROLLBACK): the next append takes the same numbers. */
  release(): void;
}

/** A caller waiting in a writer's queue for the append order (hold()). */
export interface HoldRequest {
  readonly signal: AbortSignal;
  readonly grant: (hold: AppendHold) => void;
  readonly reject: (err: unknown) => void;
}

export type QueuedAppend = AppendUnit | HoldRequest;

export function isHoldRequest(q: QueuedAppend): q is HoldRequest {
  return 'grant' in q;
}

/**
 * Queues an append or a hold request: one still queued when `signal` fires
 * leaves the queue, failing with its reason; one already taken goes on.
 */
export function enqueue(queue: QueuedAppend[], entry: QueuedAppend, signal: AbortSignal | undefined): void {
  queue.push(entry);
  if (signal === undefined) return;
  const withdraw = (): void => {
    const at = queue.indexOf(entry);
    if (at < 0) return;
    queue.splice(at, 1);
    entry.reject(signal.reason);
  };
  if (signal.aborted) withdraw();
  else signal.addEventListener('abort', withdraw, { once: true });
}

/** What a writer does for a hold it granted: chain more rows, make them durable, or forget them. */
export interface HeldWork {
  add(jobs: readonly AppendJob[]): Promise<AppendResult[]>;
  /** Makes the rows added durable (nothing to do when none was). */
  commit(): Promise<void>;
  /** Forgets the rows added. */
  release(): Promise<void>;
}

/**
 * Grants `request` a hold over `work`, and resolves once its holder commits
 * or releases it: the writer serves nothing else meanwhile. Adds run one
 * at a time; a hold granted after its caller gave up is released at once.
 */
export async function grantHold(request: HoldRequest, work: HeldWork): Promise<void> {
  let open = true;
  let busy: Promise<unknown> = Promise.resolve();
  let end: () => void = () => undefined;
  const ended = new Promise<void>((resolve) => {
    end = resolve;
  });
  const finish = async (commit: boolean): Promise<void> => {
    open = false;
    try {
      await busy.catch(() => undefined);
      await (commit ? work.commit() : work.release());
    } finally {
      end();
    }
  };
  const notHeld = (): Promise<never> => Promise.reject(new PgError(SqlState.InternalError, 'the append order is no longer held'));
  const release = (): void => {
    if (open) void finish(false).catch(() => undefined);
  };
  request.grant({
    add: (jobs) => {
      if (!open) return notHeld();
      const added = busy.then(() => work.add(jobs));
      busy = added;
      return added;
    },
    commit: () => (open ? finish(true) : notHeld()),
    release,
  });
  if (request.signal.aborted) release();
  await ended;
}

/** The queued entries the next group commit takes: up to `max` units, stopping at a hold request. */
export function nextUnits(queue: QueuedAppend[], max: number): AppendUnit[] {
  const holdAt = queue.findIndex(isHoldRequest);
  return queue.splice(0, holdAt < 0 ? max : Math.min(holdAt, max)) as AppendUnit[];
}

/** What appends to ledgers needs of a writer, on either engine. */
export interface LedgerAppender {
  /** `signal` withdraws the jobs while they wait in the queue (behind a hold); once taken, they are made whatever it says. */
  append(jobs: readonly AppendJob[], signal?: AbortSignal): Promise<AppendResult[]>;
  /**
   * Waits for the append order (behind the appends and holds queued
   * before), then holds it. `signal` withdraws the wait: a hold granted
   * after it fired is released at once.
   */
  hold(signal: AbortSignal): Promise<AppendHold>;
  /** Resolves once the engine shows every append acknowledged so far (or `seq`); null when it already does. */
  visible(seq?: bigint): Promise<void> | null;
  /** Called after each commit with the global log's size. */
  onIntegrated: (size: number) => void;
  /**
   * Refuses (ForeignSessionError) rows that would extend another's session,
   * before they queue: the client is told at its INSERT, and the refusal
   * recorded. Chaining checks again, against the heads it then holds.
   */
  checkOwners(table: LedgerTable, rows: ReadonlyArray<ReadonlyArray<string | null>>, read?: OwnersRead): Promise<void>;
}

/** Whose the given chains of a ledger are, as the caller reads their first steps; a chain without them is absent. */
export type OwnersRead = (keys: readonly string[]) => Promise<ReadonlyMap<string, SessionOwnerId>>;

/** The distinct chain keys of a ledger's client rows. */
export function chainKeysOf(table: LedgerTable, rows: ReadonlyArray<ReadonlyArray<string | null>>): string[] {
  const layout = rowLayout(table);
  if (layout.chainKey < 0) return [];
  const at = layout.client.indexOf(layout.chainKey);
  return [...new Set(rows.map((r) => r[at] ?? ''))];
}

/** The rows' sessions against their owners as `ownerOf` knows them (undefined for a session it does not know). */
export function checkSessionOwners(
  table: LedgerTable,
  rows: ReadonlyArray<ReadonlyArray<string | null>>,
  ownerOf: (key: string) => SessionOwnerId | undefined,
  ownership: SessionOwnership,
): void {
  const layout = rowLayout(table);
  if (layout.chainKey < 0 || (layout.orgId < 0 && layout.agentId < 0)) return;
  // Read where the client's row holds them: a whole row of texts per row would be built again by the chain rule.
  const [key, org, agent] = [layout.chainKey, layout.orgId, layout.agentId].map((at) => (at < 0 ? -1 : layout.client.indexOf(at))) as [number, number, number];
  // A statement may open a session and extend it: its first row's owner holds for the rest.
  const opened = new Map<string, SessionOwnerId>();
  for (const row of rows) {
    const k = row[key] ?? '';
    const mine = { org: org < 0 ? null : (row[org] ?? null), agent: agent < 0 ? null : (row[agent] ?? null) };
    opened.set(k, ownerWith(layout, table, mine, k, ownerOf(k) ?? opened.get(k), ownership));
  }
}

/** Where a ledger's row texts go: computed once per table definition. */
export interface RowLayout {
  readonly names: readonly string[];
  /** The table positions of the client columns, in order. */
  readonly client: readonly number[];
  readonly chainKey: number;
  readonly stepIndex: number;
  readonly prevHash: number;
  readonly currentHash: number;
  readonly createdAt: number;
  readonly ledgerSeq: number;
  /** -1 where the server does not compute it. */
  readonly traceId: number;
  readonly hasEmbedding: number;
  /** -1 in a ledger without step types. */
  readonly stepType: number;
  /** org_id and agent_id, which say whose a session is; -1 where the ledger has none. */
  readonly orgId: number;
  readonly agentId: number;
  /** The salt's column in a v3 ledger; -1 in any other. */
  readonly salt: number;
  /** The table's part of every leaf's data in the global log. */
  readonly leafPrefix: Buffer;
}

const rowLayouts = new WeakMap<LedgerTable, RowLayout>();

export function rowLayout(table: LedgerTable): RowLayout {
  let layout = rowLayouts.get(table);
  if (layout === undefined) {
    const names = table.columns.map((c) => c.name);
    const server = (name: string): number => (table.serverColumns.has(name) ? names.indexOf(name) : -1);
    layout = {
      names,
      client: names.flatMap((n, i) => (table.serverColumns.has(n) ? [] : [i])),
      chainKey: table.chainKey === null ? -1 : names.indexOf(table.chainKey),
      stepIndex: names.indexOf('step_index'),
      prevHash: names.indexOf('prev_hash'),
      currentHash: names.indexOf('current_hash'),
      createdAt: names.indexOf('created_at'),
      ledgerSeq: names.indexOf('ledger_seq'),
      traceId: server('trace_id'),
      hasEmbedding: server('has_embedding'),
      stepType: names.indexOf('step_type'),
      orgId: names.indexOf('org_id'),
      agentId: names.indexOf('agent_id'),
      salt: table.hashVersion === HASH_VERSION_V3 ? names.indexOf(SALT_COLUMN) : -1,
      leafPrefix: leafPrefix(table.schema, table.name),
    };
    rowLayouts.set(table, layout);
  }
  return layout;
}

/** Random bytes drawn in bulk: one call per UUID costs more than the rest of the UUID. */
const RANDOM_POOL = 16 * 1024;
let pool = Buffer.alloc(0);
let poolAt = RANDOM_POOL;

/** `n` random bytes of their own, from the pool. */
function randomFromPool(n: number): Buffer {
  if (poolAt + n > pool.length) {
    pool = randomBytes(RANDOM_POOL);
    poolAt = 0;
  }
  const b = Buffer.from(pool.subarray(poolAt, poolAt + n));
  poolAt += n;
  return b;
}

/** A time-ordered UUID (version 7): 48 bits of milliseconds, then random bits. */
export function uuidv7(ms: number): string {
  const b = randomFromPool(16);
  b.writeUIntBE(ms, 0, 6);
  b[6] = ((b[6] as number) & 0x0f) | 0x70;
  b[8] = ((b[8] as number) & 0x3f) | 0x80;
  const h = b.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

/** A row's texts in table order from its client columns' texts; every server column NULL. */
export function rowTexts(layout: RowLayout, clientRow: ReadonlyArray<string | null>): (string | null)[] {
  const texts: (string | null)[] = new Array<string | null>(layout.names.length).fill(null);
  for (let j = 0; j < layout.client.length; j++) texts[layout.client[j] as number] = clientRow[j] ?? null;
  return texts;
}

/** Who a session belongs to: the org_id and agent_id of its first step. */
export interface SessionOwnerId {
  readonly org: string | null;
  readonly agent: string | null;
}

/** Who may extend a session: any writer of its organisation (`org`), or only its first step's agent (`agent`). */
export type SessionOwnership = 'org' | 'agent';

/** A chain's last step, which the next one links to. */
export interface ChainLink {
  readonly index: number;
  readonly hash: string;
  /** Its first step's organisation and agent; undefined when not known (a chain whose steps retention removed), and the next step's then. */
  readonly owner?: SessionOwnerId | undefined;
}

/** A client row with the server's columns filled in and its hash, in table order, and the chain it extends. */
export interface ChainedRow {
  readonly texts: (string | null)[];
  readonly key: string;
  readonly index: number;
  readonly hash: string;
  /** Who the chain belongs to, this row included. */
  readonly owner: SessionOwnerId;
}

/**
 * An append to a session that belongs to another organisation (or, under
 * `ledger.sessionOwner: agent`, another agent): 42501, and nothing of the
 * statement is written. It does not say whose the session is.
 */
export class ForeignSessionError extends PgError {
  constructor(
    readonly ledger: string,
    readonly session: string,
    readonly by: SessionOwnership,
  ) {
    super(
      SqlState.InsufficientPrivilege,
      by === 'org'
        ? `cannot append to session "${session}" of ledger table "${ledger}": it belongs to another organisation`
        : `cannot append to session "${session}" of ledger table "${ledger}": another agent opened it`,
      {
        hint:
          by === 'org'
            ? "A session belongs to the organisation of its first step: start a new session_id for your organisation's steps."
            : 'With ledger.sessionOwner: agent, only the agent that wrote a session’s first step extends it: start a new session_id.',
      },
    );
  }
}

/** Refuses a row that would extend another's session; answers who the chain belongs to with the row. */
function ownerWith(
  layout: RowLayout,
  table: LedgerTable,
  mine: SessionOwnerId,
  key: string,
  owner: SessionOwnerId | undefined,
  ownership: SessionOwnership,
): SessionOwnerId {
  if (owner === undefined || layout.chainKey < 0) return owner ?? mine;
  if (layout.orgId >= 0 && owner.org !== mine.org) throw new ForeignSessionError(table.name, key, 'org');
  if (ownership === 'agent' && layout.agentId >= 0 && owner.agent !== mine.agent) throw new ForeignSessionError(table.name, key, 'agent');
  return owner;
}

/**
 * The chain rule, the same on both engines: a row's step_index follows its
 * chain's head (0 for a new chain, whose prev_hash is ''), it takes the
 * head's hash as prev_hash, the commit's created_at and ledger_seq, a
 * trace_id (the one the client was answered with, or a new UUIDv7), and
 * has_embedding by the sample rule; current_hash covers all of it. A v3
 * row's salt and commitments may come hashed ahead (`pre`, from
 * commitmentsAhead), as its committed columns are the client's.
 */
export function chainRow(
  table: LedgerTable,
  clientRow: ReadonlyArray<string | null>,
  headOf: (key: string) => ChainLink | undefined,
  seq: bigint,
  micros: bigint,
  traceId: string | undefined,
  sample: EmbeddingSampleRule | null,
  ownership: SessionOwnership = 'org',
  pre: Precommitted | null = null,
): ChainedRow {
  const layout = rowLayout(table);
  const texts = rowTexts(layout, clientRow);
  const key = layout.chainKey < 0 ? '' : (texts[layout.chainKey] ?? '');
  const head = headOf(key);
  const mine = { org: layout.orgId < 0 ? null : (texts[layout.orgId] ?? null), agent: layout.agentId < 0 ? null : (texts[layout.agentId] ?? null) };
  const owner = ownerWith(layout, table, mine, key, head?.owner, ownership);
  const index = head === undefined ? 0 : head.index + 1;
  texts[layout.stepIndex] = String(index);
  texts[layout.prevHash] = head?.hash ?? '';
  texts[layout.createdAt] = String(micros);
  texts[layout.ledgerSeq] = String(seq);
  if (layout.traceId >= 0) texts[layout.traceId] = traceId ?? uuidv7(Number(micros / 1000n));
  if (layout.hasEmbedding >= 0) {
    const id = layout.traceId >= 0 ? texts[layout.traceId] : null;
    const selected = sample !== null && id != null && selectedForEmbedding(sample, layout.stepType < 0 ? null : (texts[layout.stepType] ?? null), id);
    texts[layout.hasEmbedding] = selected ? 'true' : 'false';
  }
  let hash: string | null;
  if (layout.salt >= 0 && pre !== null) {
    texts[layout.salt] = pre.salt.toString('hex');
    hash =
      pre.commitments === null
        ? rowHashV3(table.name, layout.names, texts, committedOf(layout.names), SaltKeys.of(pre.salt, pre.blocks))
        : rowHashV3Precommitted(table.name, layout.names, texts, committedOf(layout.names), pre);
  } else if (layout.salt >= 0) {
    // Hashed from the salt drawn, not from its text read back.
    const salt = randomFromPool(SALT_BYTES);
    texts[layout.salt] = salt.toString('hex');
    hash = rowHashV3(table.name, layout.names, texts, committedOf(layout.names), SaltKeys.of(salt));
  } else hash = rowHashFor(table.hashVersion, table.name, layout.names, texts);
  // A fresh row has every key its salt derives: only a ledger without its salt column gets here.
  if (hash === null) throw new Error(`${table.schema}.${table.name} is chained with ${table.hashVersion} but has no ${SALT_COLUMN} column`);
  texts[layout.currentHash] = hash;
  return { texts, key, index, hash, owner };
}
