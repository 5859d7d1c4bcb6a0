import { existsSync } from 'node:fs';
import type { Engine, EngineConnection, EngineStatement } from '../../../engine/port.js';
import {
  chainRow,
  enqueue,
  grantHold,
  isHoldRequest,
  nextUnits,
  rowLayout,
  type AppendHold,
  type AppendJob,
  type AppendResult,
  type AppendUnit,
  chainKeysOf,
  checkSessionOwners,
  type HoldRequest,
  type OwnersRead,
  type LedgerAppender,
  type QueuedAppend,
  type SessionOwnerId,
  type SessionOwnership,
} from '../../../ledger/chain/append.js';
import { loadColumnHasher } from '../../../ledger/chain/canonical.js';
import { decodeSeqs, retainable, seqRuns, seqsIn } from '../../../ledger/erasure/retention-sql.js';
import { accountedSeqs, recordedLosses } from '../../../ledger/log/log-events.js';
import type { LedgerCatalog } from '../../../ledger/chain/catalog.js';
import { qualifiedName, quoteIdent, type LedgerTable } from '../../../ledger/chain/schema.js';
import { NO_OBSERVER, type Observer } from '../../../observe/observer.js';
import { PgError } from '../../../errors/pg-error.js';
import { SqlState } from '../../../errors/sqlstate.js';
import { appendRows, inTransaction, LedgerApplier, type TableRows } from './applier.js';
import { Journal, type JournalRecord, type JournalTail } from './journal.js';
import type { MerkleLog } from '../../../ledger/log/merkle-log.js';
import { rowLeafHash } from '../../../ledger/log/leaf.js';
import { absentSeqs, resumeLog } from '../log/log-resume.js';
import { damagedLedgerError, type LedgerDamage } from '../../../ledger/chain/catalog.js';
import { Quarantine } from './quarantine.js';
import { unchainableColumn } from './column-types.js';
import { ChainHeadRecord, cutChains } from './head-record.js';
import { cutChainError, type CutChain } from '../../../ledger/chain/cut.js';
import { addFingerprints, fingerprintOf, NO_ROWS, type Fingerprint } from './fingerprint.js';
import type { EmbeddingSampleRule } from '../../../ledger/chain/embedding-sample.js';
import { commitmentsAhead } from '../../../ledger/chain/commitment-pool.js';
import type { Precommitted } from '../../../ledger/chain/commitments.js';

interface Head {
  readonly index: number;
  readonly hash: string;
  /** The head row's ledger_seq. */
  readonly seq: number;
  /** Whose the chain is (its first step's org_id and agent_id); undefined when its first steps are gone. */
  readonly owner?: SessionOwnerId | undefined;
}

/** Rows chained for one durable write: heads they advance (not yet the truth), rows by table, leaves, the last ledger_seq. */
interface Batch {
  readonly pending: Map<string, Map<string, Head>>;
  readonly byTable: Map<string, { table: LedgerTable; rows: (string | null)[][] }>;
  readonly leaves: Buffer[];
  seq: bigint;
}

/** Rows per INSERT statement: enough to amortise the statement, few enough for its parameters. */
const ROWS_PER_STATEMENT = 100;
/** From this many rows in one group commit, the writer appends through the engine's appender. */
const APPENDER_MIN_ROWS = 32;
/** Units taken into one group commit at most. */
const UNITS_PER_COMMIT = 512;
/** Larger group commits go to the engine directly: one record of the journal must stay a modest buffer. */
const JOURNAL_MAX_ROWS = 10_000;
/** Commits whose fingerprints are kept for the audit's watch at most. */
const MAX_FINGERPRINTS = 1_000_000;
/** Journaled rows DuckDB may lag behind by before appends wait for it. */
const MAX_BACKLOG = 100_000;

const UNCHAINABLE = new WeakMap<Pick<LedgerTable, 'name' | 'columns'>, PgError | null>();

/**
 * A ledger created before such columns were refused (ledger-create.ts): an
 * append to it is refused before it is journaled, since the applier could
 * never store it and every later statement would wait behind it.
 */
export function unchainable(table: Pick<LedgerTable, 'name' | 'columns'>): PgError | null {
  let known = UNCHAINABLE.get(table);
  if (known === undefined) {
    const bad = unchainableColumn(table.columns);
    known =
      bad === null
        ? null
        : new PgError(SqlState.FeatureNotSupported, `ledger "${table.name}" cannot take appends: its column "${bad.name}" is of type ${bad.type}`, {
            detail: bad.detail,
          });
    UNCHAINABLE.set(table, known);
  }
  return known;
}

export interface WriterOptions {
  /** The append journal's file; null keeps no journal (an in-memory database). */
  readonly journalPath: string | null;
  readonly observer?: Observer;
  /** Applying journaled rows to the engine failed; it is retried. */
  readonly onApplyError?: (err: unknown) => void;
  /** The global log's tree: brought up to the committed rows at open, then extended by every commit. */
  readonly log?: MerkleLog;
  /** Where journaled rows go whose ledger was dropped or reshaped behind the server; none in memory. */
  readonly quarantine?: Quarantine;
  /**
   * The journal did not end cleanly (engines/duckdb/ledger/journal.ts): what was read is
   * applied; `missing` counts the acknowledged ledger_seq in the damaged
   * stretch that the database does not hold either.
   */
  readonly onJournalDamage?: (tail: JournalTail, path: string, missing: number) => void;
  /** Every chain's head as last made durable, kept beside the database; none in memory. */
  readonly headRecord?: ChainHeadRecord;
  /** A ledger's chains end before their recorded heads (rows removed while the server was stopped): appends to them are refused. */
  readonly onChainsCut?: (cuts: readonly CutChain[]) => void;
  /** Rows were set aside in the quarantine (their ledger is damaged). */
  readonly onQuarantine?: (ledgers: readonly string[], rows: number, reason: string, path: string | null) => void;
  /** Which steps of `_cot_steps` get `has_embedding` (embedding-sample.ts); none without a rule. */
  readonly embeddingSample?: EmbeddingSampleRule;
  /** Who may extend a session (ledger.sessionOwner): its organisation's writers, or its first agent only; `org` when unset. */
  readonly sessionOwner?: SessionOwnership;
}

/**
 * The only code that writes ledger rows. It serialises every chain: units of
 * appends (one client statement, or one client transaction's appends) queue
 * here, and the units that arrive together are made durable together (group
 * commit). Each unit's chain values (step_index, prev_hash, current_hash,
 * created_at, ledger_seq, and trace_id for _cot_steps) are computed here, in
 * queue order, from chain heads kept in memory; a caller is answered only
 * once its rows are durable.
 *
 * Durable means one of two things. Rows of a journaled ledger (schema.ts)
 * are written to the append journal with one synchronous write, and reach
 * DuckDB shortly after through the applier; readers wait for them
 * (`visible`). Rows of other ledgers, and very large units, are committed
 * to DuckDB directly, after every journaled row before them, so DuckDB
 * always holds a prefix of the sequence.
 */
export class LedgerWriter implements LedgerAppender {
  private readonly queue: QueuedAppend[] = [];
  private running = false;
  private readonly heads = new Map<string, Map<string, Head>>();
  /** The table each entry of `heads` belongs to. */
  private readonly headTables = new Map<string, LedgerTable>();
  /** Chains whose rows end before their recorded heads, by qualified ledger name and key: their appends are refused. */
  private readonly cut = new Map<string, Map<string, CutChain>>();
  /** Ledgers found damaged while their rows were applied: their appends are refused. */
  private readonly damaged = new Map<string, LedgerDamage>();
  /** The group commit in flight, if any. */
  private committing: Promise<unknown> | null = null;
  /** Callers of scrubJournal() waiting for the journal to be zeroed. */
  private readonly scrubWaiters: Array<{ resolve: () => void; reject: (err: unknown) => void }> = [];
  private seq = 0n;
  private lastMicros = 0n;
  private closed = false;
  private idle: Promise<void> = Promise.resolve();
  /** Prepared INSERTs by text: preparing costs more than running a small one. */
  private readonly inserts = new Map<string, EngineStatement>();
  private markIdle: () => void = () => undefined;
  private applier: LedgerApplier | null = null;
  /** Why the global log stopped growing (the ledgers were altered outside the server), or null. */
  logFrozen: string | null = null;
  private journalKept = false;
  /** Where the stored nodes stopped holding and the tree was rebuilt from the rows, or null. */
  logRebuiltFrom: number | null = null;
  /**
   * Acknowledged appends that neither the database nor the journal holds, while the log (or the journal's
   * own damage) says they were made, and that no record accounts for yet; and what became of the journal.
   */
  unrecordedLoss: { readonly ranges: ReadonlyArray<readonly [number, number]>; readonly journal: 'none' | 'missing' | 'damaged' | 'present' } = {
    ranges: [],
    journal: 'none',
  };
  /** The ledger_seq ranges recorded lost (`cotwire accept-loss`, which runs with the server stopped): fixed while it runs. */
  lostRanges: ReadonlyArray<readonly [number, number]> = [];
  /** Called after each commit with the log's new size. */
  onIntegrated: (size: number) => void = () => undefined;
  /** Writing the log's node file failed; its leaves are kept and written with the next commit. */
  onLogError: (err: unknown) => void = () => undefined;
  /**
   * Called with each group commit's rows (every column's text, in table
   * order) once they are durable and acknowledged, before any reader can
   * see them in the engine: the session cache learns which of its sessions
   * grew.
   */
  onDurable: (tables: readonly TableRows[]) => void = () => undefined;
  /** Leaves of durable commits that the node file could not take yet. */
  private unintegrated: Buffer[] = [];
  /**
   * Each durable commit's fingerprint per ledger (engines/duckdb/ledger/fingerprint.ts),
   * kept while the audit's watch asks for them and until it folds them into
   * its baseline; null when nobody asks, or after too many went unclaimed.
   */
  private commitFingerprints: Array<{ readonly lastSeq: bigint; readonly byTable: ReadonlyMap<string, Fingerprint> }> | null = null;
  /** Commits up to this ledger_seq may be missing from `commitFingerprints`. */
  private fingerprintsLostAt = 0n;

  private constructor(
    private readonly conn: EngineConnection,
    private readonly catalog: LedgerCatalog,
    private readonly observer: Observer,
    private readonly journal: Journal | null,
    readonly log: MerkleLog | null,
    private readonly embeddingSample: EmbeddingSampleRule | null,
    private readonly headRecord: ChainHeadRecord,
    private readonly onChainsCut: (cuts: readonly CutChain[]) => void,
    private readonly sessionOwner: SessionOwnership,
  ) {}

  /** Opens the writer; rows the journal holds and DuckDB does not (after a crash) are applied first. */
  static async open(engine: Engine, catalog: LedgerCatalog, options: WriterOptions): Promise<LedgerWriter> {
    await loadColumnHasher();
    const conn = await engine.connect();
    const applyConn = await engine.connect();
    let journal: Journal | null = null;
    try {
      const quarantine = options.quarantine ?? Quarantine.at(null);
      const onQuarantine = options.onQuarantine ?? (() => undefined);
      let damaged: Array<[number, number]> = [];
      let journalFound = false;
      if (options.journalPath !== null) {
        journalFound = existsSync(options.journalPath);
        const opened = Journal.open(options.journalPath);
        journal = opened.journal;
        await replayRecords(conn, catalog, opened.records, options.journalPath, quarantine, onQuarantine);
        if (opened.tail.kind !== 'clean') {
          const lost = opened.tail.lost;
          damaged = lost === null ? [] : seqRuns(await absentSeqs(conn, await catalog.all(), Number(lost.afterSeq), Number(lost.beforeSeq)));
          options.onJournalDamage?.(
            opened.tail,
            options.journalPath,
            damaged.reduce((n, [a, b]) => n + b - a + 1, 0),
          );
        }
      }
      const writer = new LedgerWriter(
        conn,
        catalog,
        options.observer ?? NO_OBSERVER,
        journal,
        options.log ?? null,
        options.embeddingSample ?? null,
        options.headRecord ?? ChainHeadRecord.none(),
        options.onChainsCut ?? (() => undefined),
        options.sessionOwner ?? 'org',
      );
      await writer.loadSequence();
      const committed = Number(writer.seq);
      if (writer.log !== null) {
        const resumed = await resumeLog(conn, catalog, writer.log, committed);
        writer.logFrozen = resumed.frozen;
        writer.logRebuiltFrom = resumed.rebuiltFrom;
        // Leaves beyond the rows are acknowledged appends the database lost: the next append comes after
        // them, so that the log keeps them, once the loss is recorded.
        if (BigInt(writer.log.size) > writer.seq) writer.seq = BigInt(writer.log.size);
      }
      const accounted = await accountedSeqs(conn, await catalog.all());
      writer.lostRanges = (await recordedLosses(conn, await catalog.all())).flatMap((l) => decodeSeqs(l.seqs));
      const tail: Array<[number, number]> = writer.log !== null && writer.log.size > committed ? [[committed + 1, writer.log.size]] : [];
      writer.unrecordedLoss = {
        ranges: seqRuns(seqsIn([...damaged, ...tail]), accounted),
        journal: options.journalPath === null ? 'none' : !journalFound ? 'missing' : damaged.length > 0 ? 'damaged' : 'present',
      };
      writer.applier = new LedgerApplier(applyConn, writer.seq, options.onApplyError ?? (() => undefined), {
        quarantine,
        triage: (_err, tables) => writer.triage(tables),
        onSetAside: (parts, reason) =>
          onQuarantine(
            [...new Set(parts.map((p) => `${p.table.schema}.${p.table.name}`))],
            parts.reduce((n, p) => n + p.rows.length, 0),
            reason,
            quarantine.path,
          ),
      });
      return writer;
    } catch (err) {
      journal?.close(false);
      applyConn.close();
      conn.close();
      throw err;
    }
  }

  /**
   * Null when DuckDB holds every row acknowledged so far (or up to `seq`);
   * otherwise a promise that settles when it does. A read waits on it so
   * that it sees every append that was acknowledged before it started.
   */
  visible(seq?: bigint): Promise<void> | null {
    return this.applier?.visible(seq) ?? null;
  }

  /**
   * Asks the catalog afresh whether any of `tables` was dropped or reshaped
   * behind the server (after applying their rows failed): those fail closed
   * from now on.
   */
  async triage(tables: readonly LedgerTable[]): Promise<{ names: ReadonlySet<string>; reason: string } | null> {
    this.catalog.invalidate();
    const damage = await this.catalog.damaged();
    const names = new Set<string>();
    const reasons: string[] = [];
    for (const t of tables) {
      const d = damage.find((x) => x.schema === t.schema && x.name === t.name);
      if (d === undefined || names.has(qualifiedName(t))) continue;
      names.add(qualifiedName(t));
      reasons.push(`ledger "${d.schema}.${d.name}" ${d.reason}`);
      this.damaged.set(qualifiedName(t), d);
      this.forget(t);
    }
    return names.size === 0 ? null : { names, reason: reasons.join('; ') };
  }

  /** The last ledger_seq made durable (acknowledged, or about to be). */
  get durableSeq(): bigint {
    return this.seq;
  }

  /** The ledger_seq up to which the engine holds every acknowledged row. */
  get appliedSeq(): number {
    return Number(this.applier?.appliedSeq ?? this.seq);
  }

  /** Once the commit in flight (if any) has settled: the last ledger_seq acknowledged, and the log's size. */
  async settledSeq(): Promise<{ readonly acknowledged: number; readonly logged: number }> {
    await this.committing?.catch(() => undefined);
    return { acknowledged: Number(this.seq), logged: this.log?.size ?? Number(this.seq) };
  }

  /** Starts keeping each commit's fingerprints, for the audit's watch. */
  trackFingerprints(): void {
    this.commitFingerprints ??= [];
  }

  /**
   * The fingerprints of the commits with their last ledger_seq in (from, to],
   * by qualified ledger name; null when they were not all kept.
   */
  fingerprintsBetween(from: number, to: number): Map<string, Fingerprint> | null {
    if (this.commitFingerprints === null || BigInt(from) < this.fingerprintsLostAt) return null;
    const out = new Map<string, Fingerprint>();
    for (const c of this.commitFingerprints) {
      if (c.lastSeq <= BigInt(from) || c.lastSeq > BigInt(to)) continue;
      for (const [name, f] of c.byTable) out.set(name, addFingerprints(out.get(name) ?? NO_ROWS, f));
    }
    return out;
  }

  /** Forgets the fingerprints of commits up to `seq`: the audit's baseline holds them. */
  forgetFingerprints(seq: number): void {
    if (this.commitFingerprints === null) return;
    this.commitFingerprints = this.commitFingerprints.filter((c) => c.lastSeq > BigInt(seq));
  }

  async checkOwners(table: LedgerTable, rows: ReadonlyArray<ReadonlyArray<string | null>>, read?: OwnersRead): Promise<void> {
    const heads = this.heads.get(qualifiedName(table));
    if (heads !== undefined) {
      checkSessionOwners(table, rows, (key) => heads.get(key)?.owner, this.sessionOwner);
      return;
    }
    // Heads not read yet are read in the append order, when a commit needs them (read beside a commit, they would
    // miss its rows): until then the caller's own reading of the sessions' first steps answers.
    if (read === undefined) return;
    const owners = await read(chainKeysOf(table, rows));
    checkSessionOwners(table, rows, (key) => owners.get(key), this.sessionOwner);
  }

  /** Every chain head the writer holds in memory (the ledgers appended to since the start). */
  *knownHeads(): Iterable<{ readonly table: LedgerTable; readonly key: string; readonly hash: string }> {
    for (const [name, heads] of this.heads) {
      const table = this.headTables.get(name);
      if (table === undefined) continue;
      for (const [key, head] of heads) yield { table, key, hash: head.hash };
    }
  }

  /** Appends the jobs atomically: all their rows commit together, or none does. */
  /**
   * How many rows a chain holds, counting every acknowledged append; null
   * when the writer has not read the ledger's chain heads, which means that
   * nothing was appended to it since the server started.
   */
  chainLength(table: Pick<LedgerTable, 'catalog' | 'schema' | 'name'>, key: string): number | null {
    const heads = this.heads.get(qualifiedName(table));
    if (heads === undefined) return null;
    const head = heads.get(key);
    return head === undefined ? 0 : head.index + 1;
  }

  append(jobs: readonly AppendJob[], signal?: AbortSignal): Promise<AppendResult[]> {
    if (this.closed) return Promise.reject(new Error('the ledger writer is closed'));
    for (const job of jobs) {
      const refusal = unchainable(job.table);
      if (refusal !== null && job.rows.length > 0) return Promise.reject(refusal);
    }
    if (jobs.every((j) => j.rows.length === 0)) return Promise.resolve(jobs.map(() => ({ count: 0, firstSeq: 0n, lastSeq: -1n })));
    return new Promise((resolve, reject) => {
      const unit: AppendUnit = { jobs, resolve, reject, queued: performance.now() };
      enqueue(this.queue, unit, signal);
      if (!this.running) void this.run();
    });
  }

  hold(signal: AbortSignal): Promise<AppendHold> {
    if (this.closed) return Promise.reject(new Error('the ledger writer is closed'));
    return new Promise((grant, reject) => {
      const request: HoldRequest = { signal, grant, reject };
      enqueue(this.queue, request, signal);
      if (!this.running) void this.run();
    });
  }

  /**
   * Grants the append order to one transaction and waits until it commits
   * or releases it: nothing else is chained meanwhile, so its rows keep the
   * numbers they were given.
   */
  private async serveHold(request: HoldRequest): Promise<void> {
    if (request.signal.aborted) return;
    const batch = this.newBatch();
    const queued = performance.now();
    await grantHold(request, {
      add: (jobs) => this.chainJobs(batch, jobs, true),
      commit: async () => {
        if (batch.seq > this.seq) await this.tracked(this.persist(batch, 1, queued));
      },
      release: async () => undefined,
    });
  }

  /**
   * Zeroes the append journal once DuckDB holds every row it recorded, so
   * that a value redacted or retained out in the engine has no copy left in
   * it. Appends go on: a group commit that finds a request zeroes the file
   * before it writes its own record.
   */
  scrubJournal(): Promise<void> {
    if (this.journal === null) return Promise.resolve();
    const done = new Promise<void>((resolve, reject) => this.scrubWaiters.push({ resolve, reject }));
    if (!this.running) void this.scrubWhenIdle();
    return done;
  }

  private async scrubWhenIdle(): Promise<void> {
    try {
      await this.applier?.drain();
    } catch (err) {
      for (const w of this.scrubWaiters.splice(0)) w.reject(err);
      return;
    }
    // A group commit that started meanwhile scrubs before its record, or its run's end calls here again.
    if (!this.running) this.scrubNow();
  }

  /** Only when no group commit is between writing its record and DuckDB taking it. */
  private scrubNow(): void {
    const waiters = this.scrubWaiters.splice(0);
    if (waiters.length === 0) return;
    try {
      this.journal?.scrub();
      for (const w of waiters) w.resolve();
    } catch (err) {
      for (const w of waiters) w.reject(err);
    }
  }

  /**
   * The journal stays at close, even when the database took all of it: a start refused over a loss keeps its
   * evidence (a damaged record, the file's absence) for the next start, and for whoever investigates.
   */
  keepJournal(): void {
    this.journalKept = true;
  }

  /** Waits for queued units, then closes the writer's connection. */
  async close(): Promise<void> {
    this.closed = true;
    await this.idle;
    let applied = true;
    try {
      await this.applier?.drain();
    } catch {
      // The journal keeps what DuckDB did not take; the next start applies it.
      applied = false;
    }
    this.applier?.close();
    this.headRecord.close();
    this.journal?.close(applied && !this.journalKept);
    // A journal DuckDB took whole is deleted, which erases it as well as zeroing.
    for (const w of this.scrubWaiters.splice(0)) applied ? w.resolve() : w.reject(new Error('the ledger writer closed with rows DuckDB does not hold'));
    for (const s of this.inserts.values()) s.close();
    this.conn.close();
  }

  /** A new ledger table starts empty; forget what was cached about a table that was (re)created. */
  forget(table: Pick<LedgerTable, 'catalog' | 'schema' | 'name'>): void {
    this.heads.delete(qualifiedName(table));
    this.headTables.delete(qualifiedName(table));
    this.cut.delete(qualifiedName(table));
  }

  /** A ledger created anew (after one of its name was dropped behind the server): the heads recorded for the old one go. */
  created(table: Pick<LedgerTable, 'catalog' | 'schema' | 'name'>): void {
    this.forget(table);
    this.headRecord.dropLedger(recordName(table));
  }

  private async loadSequence(): Promise<void> {
    let max = 0n;
    for (const t of await this.catalog.all()) {
      const [[v]] = (await this.conn.query(`SELECT max(ledger_seq) FROM ${qualifiedName(t)}`)) as [[bigint | null]];
      if (v !== null && BigInt(v) > max) max = BigInt(v);
    }
    this.seq = max;
  }

  private async run(): Promise<void> {
    this.running = true;
    this.idle = new Promise((resolve) => {
      this.markIdle = resolve;
    });
    try {
      while (this.queue.length > 0) {
        const first = this.queue[0] as QueuedAppend;
        if (isHoldRequest(first)) {
          this.queue.shift();
          await this.serveHold(first);
          continue;
        }
        const units = nextUnits(this.queue, UNITS_PER_COMMIT);
        try {
          const results = await this.tracked(this.commit(units));
          units.forEach((u, i) => {
            u.resolve(results[i] as AppendResult[]);
          });
        } catch {
          // One unit's failure must not fail the others: retry each alone.
          for (const unit of units) {
            try {
              const [result] = await this.tracked(this.commit([unit]));
              unit.resolve(result as AppendResult[]);
            } catch (err) {
              unit.reject(err);
            }
          }
        }
      }
    } finally {
      this.committing = null;
      this.running = false;
      this.markIdle();
      if (this.scrubWaiters.length > 0) void this.scrubWhenIdle();
    }
  }

  /**
   * Adds a durable commit's leaves to the global log. The node file is
   * derived data: when it cannot be written (a full disk), the leaves wait
   * in memory and go with the next commit, and the rows stay acknowledged.
   */
  private integrate(leaves: readonly Buffer[]): void {
    const log = this.log as MerkleLog;
    // A loop, not push(...): one INSERT ... SELECT may chain more rows than a call takes arguments.
    for (const leaf of leaves) this.unintegrated.push(leaf);
    try {
      log.append(this.unintegrated);
    } catch (err) {
      this.onLogError(err);
      return;
    }
    this.unintegrated = [];
    this.onIntegrated(log.size);
  }

  private tracked<T>(commit: Promise<T>): Promise<T> {
    this.committing = commit;
    return commit;
  }

  /** One durable write for all the units; chain heads advance only once it is durable. */
  private async commit(units: readonly AppendUnit[]): Promise<AppendResult[][]> {
    this.checkDiskSpace();
    const batch = this.newBatch();
    const results: AppendResult[][] = [];
    // The chained texts go back with each result (a reference, no copy): RETURNING answers from them.
    for (const unit of units) results.push(await this.chainJobs(batch, unit.jobs, true));
    await this.persist(batch, units.length, units[0]?.queued ?? performance.now());
    return results;
  }

  private checkDiskSpace(): void {
    const full = (this.applier as LedgerApplier).diskFull;
    if (full !== null) {
      // Journaled rows wait for space; more would only lengthen the wait. Nothing of this unit is written.
      throw new PgError(SqlState.DiskFull, `could not append: ${full.message.replace(/^[A-Za-z ]+ Error: (Failed to commit: )?/, '')}`, {
        hint: 'Free space on the disk that holds the database; appends resume by themselves once the server can write again.',
      });
    }
  }

  private newBatch(): Batch {
    return { pending: new Map(), byTable: new Map(), leaves: [], seq: this.seq };
  }

  /** Chains the jobs' rows after what the batch holds; `withRows` hands their texts back. */
  private async chainJobs(batch: Batch, jobs: readonly AppendJob[], withRows: boolean): Promise<AppendResult[]> {
    const results: AppendResult[] = [];
    for (const job of jobs) {
      const name = qualifiedName(job.table);
      const damage = this.damaged.get(name);
      if (damage !== undefined) throw damagedLedgerError(damage);
      const heads = await this.headsOf(job.table);
      // Read once per job: the chains of this ledger whose appends are refused.
      const cut = this.cut.get(name);
      let tentative = batch.pending.get(name);
      if (tentative === undefined) {
        tentative = new Map();
        batch.pending.set(name, tentative);
      }
      let entry = batch.byTable.get(name);
      if (entry === undefined) {
        entry = { table: job.table, rows: [] };
        batch.byTable.set(name, entry);
      }
      const first = batch.seq + 1n;
      const rows: (string | null)[][] = [];
      const ahead = commitmentsAhead(job.table, job.rows);
      job.rows.forEach((clientRow, i) => {
        batch.seq += 1n;
        rows.push(this.chainedRow(job.table, clientRow, heads, tentative, cut, batch.seq, batch.leaves, job.traceIds?.[i], ahead?.row(i) ?? null));
      });
      for (const row of rows) entry.rows.push(row);
      results.push({ count: job.rows.length, firstSeq: first, lastSeq: batch.seq, ...(withRows ? { rows } : {}) });
    }
    return results;
  }

  /** Makes the batch durable: journaled, or committed to DuckDB; then its heads, sequence and leaves are the truth. */
  private async persist(batch: Batch, units: number, queued: number): Promise<void> {
    this.checkDiskSpace();
    const applier = this.applier as LedgerApplier;
    const tables = [...batch.byTable.values()];
    const seq = batch.seq;
    const journaled = this.journal !== null && tables.every((t) => t.table.journaled) && tables.reduce((n, t) => n + t.rows.length, 0) <= JOURNAL_MAX_ROWS;
    // A direct commit comes after every journaled row; the journal waits when DuckDB lags too far.
    if (!journaled || applier.backlog > MAX_BACKLOG) await applier.drain();
    if (journaled) {
      for (const t of tables) checkNotNull(t.table, t.rows);
      if (this.scrubWaiters.length > 0) {
        await applier.drain();
        this.scrubNow();
      } else if (applier.backlog === 0) this.journal?.reuseIfLarge();
      await (this.journal as Journal).append(journalRecord(this.seq + 1n, seq, tables));
    } else {
      await this.write(tables);
    }
    // Durable: the tentative heads are now the truth.
    for (const [name, tentative] of batch.pending) {
      const heads = this.heads.get(name);
      const table = this.headTables.get(name);
      if (heads === undefined || table === undefined) continue;
      for (const [key, head] of tentative) {
        heads.set(key, head);
        this.headRecord.note(recordName(table), key, head);
      }
    }
    this.seq = seq;
    this.onDurable(tables);
    if (this.commitFingerprints !== null) {
      if (this.commitFingerprints.length >= MAX_FINGERPRINTS) {
        // Nobody folded them for too long: the watch waits for the next full audit's baseline.
        this.commitFingerprints = [];
        this.fingerprintsLostAt = seq;
      }
      this.commitFingerprints.push({ lastSeq: seq, byTable: new Map(tables.map((t) => [qualifiedName(t.table), fingerprintOf(t.table, t.rows)])) });
    }
    if (journaled) applier.enqueue(tables, seq);
    else applier.committedDirectly(seq);
    if (this.log !== null && this.logFrozen === null) this.integrate(batch.leaves);
    const rows = tables.reduce((n, t) => n + t.rows.length, 0);
    this.observer.appendsCommitted(units, rows, (performance.now() - queued) / 1000);
  }

  /** Writes the chained rows atomically, by the cheapest path for their number. */
  private async write(byTable: ReadonlyArray<{ table: LedgerTable; rows: (string | null)[][] }>): Promise<void> {
    const total = byTable.reduce((n, t) => n + t.rows.length, 0);
    if (total >= APPENDER_MIN_ROWS) {
      // Large units go through the engine's appender, inside one transaction: at these sizes it is
      // an order of magnitude faster than multi-row INSERTs (docs/benchmarks.md).
      await inTransaction(this.conn, async () => {
        for (const { table, rows } of byTable) await appendRows(this.conn, table, rows);
      });
      return;
    }
    const statements: Array<{ sql: string; values: (string | null)[] }> = [];
    for (const { table, rows } of byTable) {
      for (let i = 0; i < rows.length; i += ROWS_PER_STATEMENT) {
        const chunk = rows.slice(i, i + ROWS_PER_STATEMENT);
        statements.push({ sql: insertSql(table, chunk.length), values: chunk.flat() });
      }
    }
    const [only] = statements;
    if (statements.length === 1 && only !== undefined) {
      // One statement is atomic on its own: its autocommit saves the two statements of an
      // explicit transaction, which cost more than the insert itself (docs/benchmarks.md).
      await this.insert(only.sql, only.values);
      return;
    }
    await inTransaction(this.conn, async () => {
      for (const { sql, values } of statements) await this.insert(sql, values);
    });
  }

  private async insert(sql: string, values: readonly (string | null)[]): Promise<void> {
    let statement = this.inserts.get(sql);
    if (statement === undefined) {
      if (this.inserts.size >= 64) {
        for (const s of this.inserts.values()) s.close();
        this.inserts.clear();
      }
      statement = await this.conn.prepare(sql, []);
      this.inserts.set(sql, statement);
    }
    statement.bind(values.map((v) => ({ value: v === null ? null : Buffer.from(v, 'utf8'), format: 0, typeOid: 25 })));
    const cursor = await statement.execute();
    cursor.close();
  }

  /** Completes one row with its chain values and hash; returns the texts of every column in table order. */
  private chainedRow(
    table: LedgerTable,
    clientRow: ReadonlyArray<string | null>,
    heads: Map<string, Head>,
    tentative: Map<string, Head>,
    cut: ReadonlyMap<string, CutChain> | undefined,
    seq: bigint,
    leaves: Buffer[],
    traceId: string | undefined,
    pre: Precommitted | null,
  ): (string | null)[] {
    const layout = rowLayout(table);
    const row = chainRow(
      table,
      clientRow,
      (key) => tentative.get(key) ?? heads.get(key),
      seq,
      this.nextMicros(),
      traceId,
      this.embeddingSample,
      this.sessionOwner,
      pre,
    );
    const cutHere = cut?.get(row.key);
    if (cutHere !== undefined) throw cutChainError(cutHere, '`cotwire accept-loss --db <file> --reason "..."` with the server stopped');
    tentative.set(row.key, { index: row.index, hash: row.hash, seq: Number(seq), owner: row.owner });
    if (this.log !== null && this.logFrozen === null) leaves.push(rowLeafHash(layout.leafPrefix, row.key, row.hash));
    return row.texts;
  }

  /** Microseconds since the epoch, strictly increasing, so created_at orders appends. */
  private nextMicros(): bigint {
    const now = BigInt(Date.now()) * 1000n;
    this.lastMicros = now > this.lastMicros ? now : this.lastMicros + 1n;
    return this.lastMicros;
  }

  private async headsOf(table: LedgerTable): Promise<Map<string, Head>> {
    const name = qualifiedName(table);
    let heads = this.heads.get(name);
    if (heads !== undefined) return heads;
    // The heads are read from DuckDB: it must hold every row.
    await this.applier?.drain();
    heads = new Map();
    const key = table.chainKey === null ? `''` : quoteIdent(table.chainKey);
    // Whose each chain is: the org_id and agent_id of its first step (first() keeps a NULL, as arg_min would not).
    const has = (c: string): boolean => table.columns.some((col) => col.name === c);
    const firstOf = (c: string): string => (has(c) ? `first(${c} ORDER BY step_index)` : 'NULL');
    const rows = (await this.conn.query(
      `SELECT ${key}, max(step_index), arg_max(current_hash, step_index), arg_max(ledger_seq, step_index), min(step_index), ${firstOf('org_id')}, ${firstOf('agent_id')}
       FROM ${name} GROUP BY ALL`,
    )) as Array<[string, number, string, bigint, number, string | null, string | null]>;
    for (const [k, index, hash, seq, firstIndex, org, agent] of rows) {
      // An empty table still yields one row of NULLs for the whole-table chain. A chain whose first steps
      // retention removed is owned by whoever extends it next.
      if (index !== null) heads.set(k ?? '', { index: Number(index), hash, seq: Number(seq), owner: Number(firstIndex) === 0 ? { org, agent } : undefined });
    }
    // A chain whose steps retention removed goes on from the last of them.
    if (table.retention !== null && retainable(table)) {
      const retained = (await this.conn.query(
        `SELECT chain_key, max(last_step_index), arg_max(final_hash, last_step_index) FROM ${table.retention} WHERE ledger = $1 GROUP BY ALL`,
        [`${table.schema}.${table.name}`],
      )) as Array<[string, number, string]>;
      for (const [k, index, hash] of retained) {
        if ((heads.get(k)?.index ?? -1) < Number(index)) heads.set(k, { index: Number(index), hash, seq: 0 });
      }
    }
    const cuts = cutChains(recordName(table), this.headRecord.expected(recordName(table)), heads);
    if (cuts.length > 0) {
      this.cut.set(name, new Map(cuts.map((c) => [c.key, c])));
      this.onChainsCut(cuts);
    } else {
      this.cut.delete(name);
    }
    this.heads.set(name, heads);
    this.headTables.set(name, table);
    return heads;
  }

  /**
   * Every chain, of every ledger, whose rows end before its recorded head
   * (reading each ledger's heads the first time).
   */
  async cutChains(): Promise<CutChain[]> {
    for (const t of await this.catalog.all()) await this.headsOf(t);
    return [...this.cut.values()].flatMap((m) => [...m.values()]);
  }

  /**
   * Appends to these chains go on from the rows they hold: their loss is
   * recorded (`cotwire accept-loss`).
   */
  acceptCuts(cuts: readonly CutChain[]): void {
    for (const c of cuts) {
      for (const [name, m] of this.cut) {
        const table = this.headTables.get(name);
        if (table === undefined || recordName(table) !== c.ledger || !m.delete(c.key)) continue;
        const head = this.heads.get(name)?.get(c.key);
        this.headRecord.note(c.ledger, c.key, head ?? { index: -1, hash: '', seq: 0 });
      }
    }
    this.headRecord.flush();
  }
}

/** How the head record names a ledger: without the catalog, which is the database file's name. */
function recordName(table: Pick<LedgerTable, 'schema' | 'name'>): string {
  return `${table.schema}.${table.name}`;
}

function journalRecord(firstSeq: bigint, lastSeq: bigint, tables: readonly TableRows[]): JournalRecord {
  return { firstSeq, lastSeq, tables: tables.map(({ table, rows }) => ({ schema: table.schema, name: table.name, rows })) };
}

/** The engine checks NOT NULL on a direct commit; a journaled row is checked before it is acknowledged. */
function checkNotNull(table: LedgerTable, rows: ReadonlyArray<ReadonlyArray<string | null>>): void {
  table.columns.forEach((c, i) => {
    if (!c.notNull) return;
    if (rows.some((r) => r[i] === null)) {
      throw new PgError(SqlState.NotNullViolation, `null value in column "${c.name}" of relation "${table.name}" violates not-null constraint`, {
        table: table.name,
        column: c.name,
      });
    }
  });
}

/**
 * After a crash: the journal's rows that DuckDB does not hold (each ledger
 * holds a prefix of its journaled rows, as the applier commits in sequence
 * order) are appended, all in one transaction.
 */
export async function replayRecords(
  conn: EngineConnection,
  catalog: LedgerCatalog,
  records: readonly JournalRecord[],
  path: string,
  quarantine: Quarantine = Quarantine.at(null),
  onQuarantine: NonNullable<WriterOptions['onQuarantine']> = () => undefined,
): Promise<number> {
  if (records.length === 0) return 0;
  const ledgers = (await catalog.all()).filter((t) => t.journaled);
  const missing = new Map<string, { table: LedgerTable; after: bigint; rows: Array<ReadonlyArray<string | null>> }>();
  const homeless = new Map<string, { schema: string; name: string; rows: Array<ReadonlyArray<string | null>> }>();
  for (const record of records) {
    for (const part of record.tables) {
      const key = `${part.schema}\u0000${part.name}`;
      let entry = missing.get(key);
      if (entry === undefined) {
        const table = ledgers.find((t) => t.schema === part.schema && t.name === part.name);
        if (table === undefined) {
          // Its ledger is gone or reshaped: the rows cannot be applied, and must not be lost.
          const kept = homeless.get(key) ?? { schema: part.schema, name: part.name, rows: [] };
          for (const row of part.rows) kept.rows.push(row);
          homeless.set(key, kept);
          continue;
        }
        const [[max]] = (await conn.query(`SELECT coalesce(max(ledger_seq), 0) FROM ${qualifiedName(table)}`)) as [[bigint | number]];
        entry = { table, after: BigInt(max), rows: [] };
        missing.set(key, entry);
      }
      const at = entry.table.columns.findIndex((c) => c.name === 'ledger_seq');
      for (const row of part.rows) if (BigInt(row[at] ?? 0) > entry.after) entry.rows.push(row);
    }
  }
  if (homeless.size > 0) {
    const reason = `the journal ${path} holds acknowledged rows of ledgers that are not in this database as they were recorded (dropped or reshaped behind the server, or the database file was replaced)`;
    quarantine.keep([...homeless.values()], reason);
    onQuarantine(
      [...homeless.values()].map((h) => `${h.schema}.${h.name}`),
      [...homeless.values()].reduce((n, h) => n + h.rows.length, 0),
      reason,
      quarantine.path,
    );
  }
  const parts = [...missing.values()].filter((m) => m.rows.length > 0);
  await inTransaction(conn, async () => {
    for (const { table, rows } of parts) await appendRows(conn, table, rows);
  });
  return parts.reduce((n, p) => n + p.rows.length, 0);
}

const insertCache = new Map<string, string>();

/** INSERT of `n` rows given as text parameters, each cast back to its column's type. */
function insertSql(table: LedgerTable, n: number): string {
  const cacheKey = `${qualifiedName(table)}\u0000${n}`;
  const hit = insertCache.get(cacheKey);
  if (hit !== undefined) return hit;
  const cols = table.columns;
  let p = 0;
  const tuple = (): string =>
    `(${cols
      .map((c) => {
        p++;
        return c.type.toUpperCase() === 'TIMESTAMP WITH TIME ZONE'
          ? `CAST(system.main.make_timestamp(CAST($${p} AS BIGINT)) AS TIMESTAMPTZ)`
          : `CAST($${p} AS ${c.type})`;
      })
      .join(', ')})`;
  const tuples = Array.from({ length: n }, tuple).join(', ');
  const sql = `INSERT INTO ${qualifiedName(table)} (${cols.map((c) => quoteIdent(c.name)).join(', ')}) VALUES ${tuples}`;
  if (insertCache.size > 1000) insertCache.clear();
  insertCache.set(cacheKey, sql);
  return sql;
}
