import type { SqlConnection } from '../../../engine/port.js';
import { PgError } from '../../../errors/pg-error.js';
import { SqlState } from '../../../errors/sqlstate.js';
import { NO_OBSERVER, type Observer } from '../../../observe/observer.js';
import { loadColumnHasher } from '../../../ledger/chain/canonical.js';
import type { EmbeddingSampleRule } from '../../../ledger/chain/embedding-sample.js';
import { rowLeafHash } from '../../../ledger/log/leaf.js';
import { nodesForAppend } from '../../../ledger/log/merkle.js';
import { positionOf } from '../../../ledger/log/leaf.js';
import { PG_SCHEMA } from './names.js';
import { isConnectionLoss } from '../adapter/connection.js';
import type { EngineHealth } from '../adapter/health.js';
import { qualifiedName, quoteIdent, type LedgerTable } from '../../../ledger/chain/schema.js';
import { cutChainError, type CutChain } from '../../../ledger/chain/cut.js';
import { commitmentsAhead } from '../../../ledger/chain/commitment-pool.js';
import { retainable } from '../../../ledger/erasure/retention-sql.js';
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
  type HoldRequest,
  type LedgerAppender,
  type QueuedAppend,
  checkSessionOwners,
  type SessionOwnerId,
  type SessionOwnership,
} from '../../../ledger/chain/append.js';

/**
 * The ledger writer on a PostgreSQL engine, which several cotwire instances
 * may share. Nothing that orders the ledgers is kept in memory: each group
 * commit is one PostgreSQL transaction that
 *
 * 1. locks the head row of every chain it extends (`cotwire.chain_heads`,
 *    FOR UPDATE, in one order for every instance, so two never deadlock),
 *    and reads where each chain stands;
 * 2. advances `cotwire.log_head` by its row count: the row lock held until
 *    COMMIT is the one serialisation point of the global sequence, so
 *    ledger_seq values are given out without gaps, in commit order, and
 *    the log's frontier read with it is the tree every earlier commit left;
 * 3. inserts the chained rows, the Merkle nodes they complete and the new
 *    heads in one statement, and commits.
 *
 * A commit that fails leaves nothing behind, so an instance that dies at
 * any point costs only its unacknowledged appends; the unique indexes on
 * (chain, step_index) and ledger_seq make a fork or a reused number fail to
 * commit even if this code were wrong.
 */

/** Names the writer's SQL leaves unqualified (unnest) resolve in pg_catalog, never to a client's object. */
export const WRITER_SETUP = ['SET search_path = pg_catalog, pg_temp'] as const;

/** Units taken into one group commit at most. */
const UNITS_PER_COMMIT = 512;
/** Chain heads the tip keeps at most; past this it starts again from the next commits. */
const TIP_CHAINS = 100_000;
/** Retries of a group commit that PostgreSQL aborted to break a deadlock or a serialisation conflict. */
const CONFLICT_RETRIES = 20;

interface Head {
  index: number;
  hash: string;
  /** Whose the chain is (its first step's org_id and agent_id): set from the writer's knowledge before chaining, and by chaining. */
  owner?: SessionOwnerId | undefined;
}

/** The text the writer inserts for each column, cast back to the column's type in PostgreSQL. */
export function fromCanonicalSql(ref: string, type: string): string {
  switch (type) {
    case 'VARCHAR':
      return ref;
    case 'JSON':
      return `${ref}::json`;
    case 'UUID':
      return `${ref}::uuid`;
    case 'SMALLINT':
      return `${ref}::int2`;
    case 'INTEGER':
      return `${ref}::int4`;
    case 'BIGINT':
      return `${ref}::int8`;
    case 'DOUBLE':
      return `${ref}::float8`;
    case 'BOOLEAN':
      return `${ref}::boolean`;
    case 'TIMESTAMP WITH TIME ZONE':
      // Microseconds since the epoch, exactly: whole seconds and the rest, each well inside a double's precision.
      return `(pg_catalog.to_timestamp((${ref}::int8 / 1000000)::float8) + (${ref}::int8 % 1000000) * interval '1 microsecond')`;
    default:
      throw new PgError(SqlState.FeatureNotSupported, `a ledger on PostgreSQL cannot hold a column of type ${type}`);
  }
}

/** Whether PostgreSQL gave up the transaction to let another go on: it is tried again. */
function isConflict(err: unknown): boolean {
  const code = (err as { code?: unknown }).code;
  return code === '40P01' || code === '40001';
}

export interface PgWriterOptions {
  readonly observer?: Observer;
  readonly embeddingSample?: EmbeddingSampleRule;
  /** The engine's reachability: while it is down, appends fail at once instead of queueing. */
  readonly health?: EngineHealth;
  /**
   * A connection of its own on which a commit whose answer was lost is
   * decided, in the background, while the writer goes on (the appends after
   * it fail at once while the engine is down, rather than wait for it);
   * without one, the writer waits for the answer itself.
   */
  readonly checker?: SqlConnection;
  /** Who may extend a session (ledger.sessionOwner); `org` when unset. */
  readonly sessionOwner?: SessionOwnership;
}

export class PgLedgerWriter implements LedgerAppender {
  private readonly queue: QueuedAppend[] = [];
  private running: Promise<void> | null = null;
  private lastMicros = 0n;
  private closed = false;
  private readonly observer: Observer;
  private readonly embeddingSample: EmbeddingSampleRule | null;
  private readonly health: EngineHealth | null;
  private readonly checker: SqlConnection | null;
  /** Commits being decided in the background (checker). */
  private readonly doubts = new Set<Promise<void>>();
  /** Units put back after an in-doubt commit turned out not made: they are not put back twice. */
  private readonly retried = new WeakSet<AppendUnit>();
  /** Called after each commit with the log's size after it. */
  onIntegrated: (size: number) => void = () => undefined;
  /** The log's size after this instance's last commit (other instances' commits may follow it). */
  size = 0;
  /** Where this instance's last commit left the log and the chains it extended; null when unknown. */
  private tip: { readonly size: number; readonly frontier: Map<number, Buffer>; readonly heads: Map<string, Map<string, Head>> } | null = null;
  /** Chains known to have a head row: rows of chain_heads are never removed, so this stays true. */
  private readonly knownHeads = new Set<string>();
  /** Whose each chain is, by ledger and key: a chain's first step is never changed, so this stays true. */
  private readonly owners = new Map<string, SessionOwnerId>();
  private readonly sessionOwner: SessionOwnership;

  private constructor(
    private readonly conn: SqlConnection,
    options: PgWriterOptions,
  ) {
    this.observer = options.observer ?? NO_OBSERVER;
    this.embeddingSample = options.embeddingSample ?? null;
    this.health = options.health ?? null;
    this.checker = options.checker ?? null;
    this.sessionOwner = options.sessionOwner ?? 'org';
  }

  /**
   * `conn` is a connection as the writer role, used by nothing else, opened
   * with WRITER_SETUP so that a backend it connects again has it too.
   */
  static async open(conn: SqlConnection, options: PgWriterOptions = {}): Promise<PgLedgerWriter> {
    await loadColumnHasher();
    for (const sql of WRITER_SETUP) await conn.run(sql);
    const writer = new PgLedgerWriter(conn, options);
    const [[size]] = (await conn.query(`SELECT size FROM ${PG_SCHEMA}.log_head`)) as [[bigint]];
    writer.size = Number(size);
    return writer;
  }

  /** Rows PostgreSQL holds are visible once acknowledged: a commit is both. */
  visible(_seq?: bigint): null {
    return null;
  }

  append(jobs: readonly AppendJob[], signal?: AbortSignal): Promise<AppendResult[]> {
    if (this.closed) return Promise.reject(new PgError(SqlState.AdminShutdown, 'the server is shutting down; the append was not made'));
    const health = this.health;
    if (health !== null && !health.reachable)
      return Promise.reject(new PgError(SqlState.ConnectionFailure, `the PostgreSQL engine is unreachable; the append was not made (${health.why})`));
    if (jobs.every((j) => j.rows.length === 0)) return Promise.resolve(jobs.map(() => ({ count: 0, firstSeq: 0n, lastSeq: 0n })));
    return new Promise((resolve, reject) => {
      const unit: AppendUnit = { jobs, queued: performance.now(), resolve, reject };
      enqueue(this.queue, unit, signal);
      this.drain();
    });
  }

  hold(signal: AbortSignal): Promise<AppendHold> {
    if (this.closed) return Promise.reject(new PgError(SqlState.AdminShutdown, 'the server is shutting down; the append was not made'));
    return new Promise((grant, reject) => {
      const request: HoldRequest = { signal, grant, reject };
      enqueue(this.queue, request, signal);
      this.drain();
    });
  }

  /**
   * Grants the append order to one transaction: a transaction of the
   * writer's connection that holds the log_head row lock (so every
   * instance's appends wait, as for any commit) and each chain's head row
   * as the holder reaches it, until the holder commits or releases it.
   */
  private async serveHold(request: HoldRequest): Promise<void> {
    if (request.signal.aborted) return;
    const conn = this.conn;
    let held: HeldRows;
    try {
      await conn.run('BEGIN');
      const [[size]] = (await conn.query(`SELECT size FROM ${PG_SCHEMA}.log_head FOR UPDATE`)) as [[bigint]];
      const nodes = new Map<number, Buffer>();
      for (const [position, hash] of (await conn.query(FRONTIER_SQL, ['0'])) as Array<[bigint, Buffer]>) nodes.set(Number(position), hash);
      held = { heads: new Map(), nodes, before: Number(size), size: Number(size), rowsByLedger: new Map(), newNodes: [], last: null };
    } catch (err) {
      await conn.run('ROLLBACK').catch(() => undefined);
      request.reject(this.notMade(err));
      return;
    }
    const queued = performance.now();
    try {
      await grantHold(request, {
        add: (jobs) => this.addHeld(held, jobs),
        commit: () => (held.last !== null ? this.commitHeld(held, queued) : conn.run('ROLLBACK')),
        release: () => conn.run('ROLLBACK'),
      });
    } finally {
      this.tip = null;
    }
  }

  /** Chains a held transaction's jobs after its rows so far, locking the head rows of the chains it reaches first. */
  private async addHeld(held: HeldRows, jobs: readonly AppendJob[]): Promise<AppendResult[]> {
    const unit: AppendUnit = { jobs, queued: 0, resolve: () => undefined, reject: () => undefined };
    const { chains } = chainsOf([unit]);
    const ledgers: string[] = [];
    const keys: string[] = [];
    for (const [ledger, { table, keys: all }] of chains) {
      const fresh = [...all].filter((k) => held.heads.get(ledger)?.has(k) !== true);
      if (fresh.length === 0) continue;
      await this.ensureHeads(ledger, table, fresh);
      const [cut] = await cutChains(this.conn, table, fresh);
      if (cut !== undefined) throw cutChainError(cut, '`cotwire accept-loss --url <engine URL> --reason "..."`');
      for (const k of fresh) {
        ledgers.push(ledger);
        keys.push(k);
      }
    }
    if (keys.length > 0) {
      const rows = (await this.conn.query(
        `SELECT h.ledger, h.chain_key, h.step_index, h.current_hash FROM ${PG_SCHEMA}.chain_heads h
         JOIN unnest($1::text[], $2::text[]) AS c(ledger, chain_key) ON c.ledger = h.ledger AND c.chain_key = h.chain_key
         ORDER BY h.ledger, h.chain_key FOR UPDATE OF h`,
        [pgArray(ledgers), pgArray(keys)],
      )) as Array<[string, string, number, string]>;
      for (const [ledger, key, index, hash] of rows) {
        let m = held.heads.get(ledger);
        if (m === undefined) {
          m = new Map();
          held.heads.set(ledger, m);
        }
        m.set(key, { index: Number(index), hash });
      }
    }
    await this.loadOwners(this.conn, chains, held.heads);
    const chained = this.chainRows([unit], { heads: held.heads, before: held.size, nodes: held.nodes });
    for (const [ledger, { table, rows }] of chained.rowsByLedger) {
      const into = held.rowsByLedger.get(ledger);
      if (into === undefined) held.rowsByLedger.set(ledger, { table, rows });
      else for (const row of rows) into.rows.push(row);
    }
    for (const n of chained.newNodes) held.newNodes.push(n);
    held.size = chained.size;
    held.last = chained.last;
    return chained.results[0] as AppendResult[];
  }

  /** The held transaction's rows, nodes and heads, the log's new size, and COMMIT. */
  private async commitHeld(held: HeldRows, queued: number): Promise<void> {
    const total = held.size - held.before;
    const { sql, params } = writeStatement(held.rowsByLedger, held.newNodes, held.heads);
    const [sized, written, committed] = await Promise.allSettled(
      this.corked(() => [
        this.conn.query(`UPDATE ${PG_SCHEMA}.log_head SET size = size + $1::int8`, [String(total)]),
        this.conn.query(sql, params),
        this.conn.run('COMMIT'),
      ]),
    );
    const failure = [sized, written, committed].find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failure !== undefined) {
      const lost = [sized, written, committed].find((r): r is PromiseRejectedResult => r.status === 'rejected' && isConnectionLoss(r.reason));
      if (lost === undefined || !(await this.landed(this.conn, held.last as LastRow, lost.reason))) {
        await this.conn.run('ROLLBACK').catch(() => undefined);
        throw lost === undefined ? failure.reason : this.notMade(lost.reason);
      }
    }
    for (const [ledger, m] of held.heads) for (const key of m.keys()) this.knownHeads.add(`${ledger}\u0000${key}`);
    this.ownersOf(held.heads);
    this.size = held.size;
    this.observer.appendsCommitted(1, total, (performance.now() - queued) / 1000);
    this.onIntegrated(held.size);
  }

  async close(): Promise<void> {
    this.closed = true;
    // A run that ends with units left starts another (drain): each is waited for.
    while (this.running !== null) await this.running;
    await Promise.all(this.doubts);
  }

  /**
   * Runs the queue unless it runs already. A unit queued after run() saw the
   * queue empty, but before it ended, is taken when it ends: otherwise it
   * would wait for the next append, which its own client may be waiting for.
   */
  private drain(): void {
    this.running ??= this.run().finally(() => {
      this.running = null;
      if (this.queue.length > 0) this.drain();
    });
  }

  private async run(): Promise<void> {
    while (this.queue.length > 0) {
      const first = this.queue[0] as QueuedAppend;
      if (isHoldRequest(first)) {
        this.queue.shift();
        await this.serveHold(first);
        continue;
      }
      const units = nextUnits(this.queue, UNITS_PER_COMMIT);
      try {
        const results = await this.commitRetrying(units);
        units.forEach((u, i) => {
          u.resolve(results[i] as AppendResult[]);
        });
      } catch (err) {
        if (err instanceof InDoubt) {
          this.settleLater(err, units);
          continue;
        }
        // The engine is gone, or the outcome unknown: alone, each unit would meet the same.
        if (isConnectionLoss(err)) {
          for (const unit of units) unit.reject(err);
          continue;
        }
        // One unit's failure (a NOT NULL column, a bad value) must not fail the others: each alone.
        for (const unit of units) {
          try {
            const [result] = await this.commitRetrying([unit]);
            unit.resolve(result as AppendResult[]);
          } catch (err) {
            if (err instanceof InDoubt) this.settleLater(err, [unit]);
            else unit.reject(err);
          }
        }
      }
    }
  }

  private async commitRetrying(units: readonly AppendUnit[]): Promise<AppendResult[][]> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.commit(units);
      } catch (err) {
        // A commit certainly not made because its backend went (08006) is tried once more, on a new one:
        // a terminated backend then costs no append, and an engine that is down fails the retry at once.
        const again = isConflict(err) ? attempt < CONFLICT_RETRIES : (err as { code?: string }).code === SqlState.ConnectionFailure && attempt === 0;
        if (!again) throw err;
      }
    }
  }

  private async commit(units: readonly AppendUnit[]): Promise<AppendResult[][]> {
    const { chains, total } = chainsOf(units);
    try {
      await this.loadOwners(this.conn, chains);
    } catch (err) {
      throw this.notMade(err);
    }
    const fromTip = this.fromTip(chains, total);
    if (fromTip !== null) {
      const done = await this.commitFromTip(units, total, fromTip);
      if (done !== null) return done;
    }
    try {
      // A chain's head row exists before any transaction locks it; a new one starts where its ledger's rows end
      // (rows moved in from another engine have no head row yet).
      for (const [ledger, { table, keys }] of chains) {
        const missing = [...keys].filter((k) => !this.knownHeads.has(`${ledger}\u0000${k}`));
        if (missing.length === 0) continue;
        await this.ensureHeads(ledger, table, missing);
        // Asked again at each append onto a cut chain (it never becomes known), so that a recorded loss lifts the refusal.
        const [cut] = await cutChains(this.conn, table, missing);
        if (cut !== undefined) throw cutChainError(cut, '`cotwire accept-loss --url <engine URL> --reason "..."`');
      }
    } catch (err) {
      throw this.notMade(err);
    }
    const reserved = await this.lockAndReserve(chains, total);
    let chained: ChainedRows;
    try {
      // Chains another instance opened since loadOwners: their first steps are committed, as their head rows are locked.
      await this.loadOwners(this.conn, chains, reserved.heads);
      chained = this.chainRows(units, reserved);
    } catch (err) {
      await this.conn.run('ROLLBACK').catch(() => undefined);
      throw err;
    }
    const { results, rowsByLedger, newNodes, size, last } = chained;
    const { sql, params } = writeStatement(rowsByLedger, newNodes, reserved.heads);
    // The second round trip: the rows, the nodes and the heads, and COMMIT (which PostgreSQL turns into
    // ROLLBACK if the statement failed).
    const [written, committed] = await Promise.allSettled(this.corked(() => [this.conn.query(sql, params), this.conn.run('COMMIT')]));
    const failure = [written, committed].find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failure !== undefined) {
      const lost = [written, committed].find((r): r is PromiseRejectedResult => r.status === 'rejected' && isConnectionLoss(r.reason));
      // COMMIT was sent and its answer lost: the rows may be in PostgreSQL or not. The log says which.
      if (lost !== undefined && this.checker !== null) throw this.inDoubt(last, lost.reason, results, units, total);
      if (lost === undefined || !(await this.landed(this.conn, last, lost.reason))) {
        await this.conn.run('ROLLBACK').catch(() => undefined);
        throw lost === undefined ? failure.reason : this.notMade(lost.reason);
      }
    }
    return this.committed(units, total, reserved, size, results);
  }

  /** After a commit: the chains known to have heads, and this instance's tip, from which the next commit may start. */
  private committed(units: readonly AppendUnit[], total: number, reserved: Reserved, size: number, results: AppendResult[][]): AppendResult[][] {
    for (const [ledger, m] of reserved.heads) for (const key of m.keys()) this.knownHeads.add(`${ledger}\u0000${key}`);
    this.ownersOf(reserved.heads);
    this.remember(reserved, size);
    this.size = size;
    this.observer.appendsCommitted(units.length, total, (performance.now() - (units[0]?.queued ?? performance.now())) / 1000);
    this.onIntegrated(size);
    return results;
  }

  /**
   * The last commit's outcome, kept for the next: the log's size and its
   * frontier (the complete subtrees a new leaf may join), and each chain's
   * head as written. Another instance's commit since makes it stale, which
   * the next commit finds out (commitFromTip).
   */
  private remember(reserved: Reserved, size: number): void {
    const frontier = new Map<number, Buffer>();
    for (let level = 0; 2 ** level <= size; level++) {
      if (Math.floor(size / 2 ** level) % 2 === 1) {
        const position = positionOf(level, Math.floor(size / 2 ** level) - 1);
        const hash = reserved.nodes.get(position);
        if (hash === undefined) {
          this.tip = null;
          return;
        }
        frontier.set(position, hash);
      }
    }
    const heads = this.tip?.size === reserved.before ? this.tip.heads : new Map<string, Map<string, Head>>();
    let count = 0;
    for (const m of heads.values()) count += m.size;
    if (count > TIP_CHAINS) heads.clear();
    for (const [ledger, m] of reserved.heads) {
      let kept = heads.get(ledger);
      if (kept === undefined) {
        kept = new Map();
        heads.set(ledger, kept);
      }
      for (const [key, head] of m) kept.set(key, { index: head.index, hash: head.hash, owner: head.owner });
    }
    this.tip = { size, frontier, heads };
  }

  /** Where a commit would start from this instance's tip: null when the tip does not know every chain it extends. */
  private fromTip(chains: Chains, total: number): (Reserved & { readonly old: Reserved['heads'] }) | null {
    const tip = this.tip;
    if (tip === null || total === 0) return null;
    const heads = new Map<string, Map<string, Head>>();
    const old = new Map<string, Map<string, Head>>();
    for (const [ledger, { keys }] of chains) {
      const known = tip.heads.get(ledger);
      const m = new Map<string, Head>();
      const o = new Map<string, Head>();
      for (const key of keys) {
        const head = known?.get(key);
        if (head === undefined) return null;
        m.set(key, { ...head });
        o.set(key, { ...head });
      }
      heads.set(ledger, m);
      old.set(ledger, o);
    }
    return { heads, old, before: tip.size, nodes: new Map(tip.frontier) };
  }

  /**
   * One round trip instead of two, when the tip is current (one instance, or
   * none other committed since): one statement, its own transaction, with
   * the rows chained from the tip and the log's size and each chain's head
   * checked and advanced in it. If another instance moved either, the
   * statement fails, nothing is made, and the commit is made again the
   * locking way (answers null).
   */
  private async commitFromTip(
    units: readonly AppendUnit[],
    total: number,
    start: Reserved & { readonly old: Reserved['heads'] },
  ): Promise<AppendResult[][] | null> {
    let chained: ChainedRows;
    try {
      chained = this.chainRows(units, start);
    } catch {
      this.tip = null;
      return null;
    }
    const { results, rowsByLedger, newNodes, size, last } = chained;
    const { sql, params } = writeStatement(rowsByLedger, newNodes, start.heads, { before: start.before, total, old: start.old });
    // One statement is its own transaction, committed at its Sync: no BEGIN and COMMIT to send and run.
    try {
      await this.conn.query(sql, params);
    } catch (err) {
      this.tip = null;
      if (!isConnectionLoss(err)) return null; // Another instance moved the log or a head since the tip: nothing was made.
      if (this.checker !== null) throw this.inDoubt(last, err, results, units, total);
      if (await this.landed(this.conn, last, err)) return this.committed(units, total, start, size, results);
      throw this.notMade(err);
    }
    return this.committed(units, total, start, size, results);
  }

  /** A commit whose answer was lost, to be decided on the checker while the writer goes on. */
  private inDoubt(last: LastRow, cause: unknown, results: AppendResult[][], units: readonly AppendUnit[], total: number): InDoubt {
    this.knownHeads.clear();
    this.tip = null;
    return new InDoubt(last, cause, results, units.length, total);
  }

  /** Decides an in-doubt commit in the background: its units are acknowledged if it landed, failed (08006) if not. */
  private settleLater(doubt: InDoubt, units: readonly AppendUnit[]): void {
    const settled = this.landed(this.checker as SqlConnection, doubt.last, doubt.reason).then(
      (landed) => {
        if (landed) {
          this.observer.appendsCommitted(doubt.units, doubt.total, (performance.now() - (units[0]?.queued ?? performance.now())) / 1000);
          units.forEach((u, i) => {
            u.resolve(doubt.results[i] as AppendResult[]);
          });
        } else {
          // Certainly not made: tried once more, as a commit that failed before its COMMIT is (commitRetrying).
          const err = this.notMade(doubt.reason);
          const again = units.filter((u) => !this.retried.has(u) && !this.closed);
          for (const u of units) if (!again.includes(u)) u.reject(err);
          for (const u of again) this.retried.add(u);
          if (again.length > 0) {
            this.queue.unshift(...again);
            this.drain();
          }
        }
      },
      (err: unknown) => {
        for (const u of units) u.reject(err);
      },
    );
    this.doubts.add(settled);
    void settled.finally(() => this.doubts.delete(settled));
  }

  /**
   * A failure before COMMIT was sent: nothing was made. One that lost the
   * backend also forgets which chains have head rows, as a failover to a
   * replica that had not received the last commits may have lost some.
   */
  private notMade(err: unknown): unknown {
    if (!isConnectionLoss(err)) return err;
    this.knownHeads.clear();
    this.tip = null;
    const why = err instanceof Error ? err.message : String(err);
    return new PgError(SqlState.ConnectionFailure, `the connection to the PostgreSQL engine was lost; the append was not made (${why})`);
  }

  /**
   * Whether a commit whose answer was lost is in PostgreSQL: its last row's
   * ledger_seq holds the row with its hash exactly when the commit landed,
   * as a commit is whole or nothing and ledger_seq is never given twice.
   * Asked again, with backoff, until the engine answers; if the server
   * stops first the outcome is reported unknown (08007), never guessed.
   */
  private async landed(conn: SqlConnection, last: LastRow, cause: unknown): Promise<boolean> {
    this.knownHeads.clear();
    this.tip = null;
    let waitMs = 100;
    for (;;) {
      await conn.run('ROLLBACK').catch(() => undefined);
      try {
        const rows = (await conn.query(`SELECT current_hash FROM ${qualifiedName(last.table)} WHERE ledger_seq = $1::int8`, [String(last.seq)])) as Array<
          [string]
        >;
        return rows[0]?.[0] === last.hash;
      } catch (err) {
        if (!isConnectionLoss(err)) throw err;
      }
      if (this.closed)
        throw new PgError(
          SqlState.TransactionResolutionUnknown,
          `the connection to the PostgreSQL engine was lost during COMMIT and the server stopped before it could learn whether the append was made (${(cause as Error).message})`,
        );
      await new Promise((resolve) => setTimeout(resolve, waitMs));
      waitMs = Math.min(waitMs * 2, 2000);
    }
  }

  /**
   * The first round trip: BEGIN, the chains' head rows locked in one order, ledger_seq reserved under the
   * log_head row lock (the global sequence's one serialisation point, held until COMMIT), and the log's
   * frontier, read by a statement of its own whose snapshot follows the lock and so sees every commit before.
   */
  private async lockAndReserve(chains: Chains, total: number): Promise<Reserved> {
    const ledgersOfChains: string[] = [];
    const keysOfChains: string[] = [];
    for (const [ledger, { keys }] of chains) {
      for (const k of keys) {
        ledgersOfChains.push(ledger);
        keysOfChains.push(k);
      }
    }
    const sent = this.corked(
      () =>
        [
          this.conn.run('BEGIN'),
          this.conn.query(
            `SELECT h.ledger, h.chain_key, h.step_index, h.current_hash FROM ${PG_SCHEMA}.chain_heads h
         JOIN unnest($1::text[], $2::text[]) AS c(ledger, chain_key) ON c.ledger = h.ledger AND c.chain_key = h.chain_key
         ORDER BY h.ledger, h.chain_key FOR UPDATE OF h`,
            [pgArray(ledgersOfChains), pgArray(keysOfChains)],
          ),
          this.conn.query(`UPDATE ${PG_SCHEMA}.log_head SET size = size + $1::int8 RETURNING size`, [String(total)]),
          this.conn.query(FRONTIER_SQL, [String(total)]),
        ] as const,
    );
    const settled = await Promise.allSettled(sent);
    const failed = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected' && (r.reason as { code?: string }).code !== '25P02');
    if (failed !== undefined || settled.some((r) => r.status === 'rejected')) {
      await this.conn.run('ROLLBACK').catch(() => undefined);
      throw this.notMade(failed?.reason ?? (settled.find((r) => r.status === 'rejected') as PromiseRejectedResult).reason);
    }
    try {
      const headRows = (settled[1] as PromiseFulfilledResult<unknown[][]>).value as Array<[string, string, number, string]>;
      const heads = new Map<string, Map<string, Head>>();
      for (const [ledger, key, index, hash] of headRows) {
        let m = heads.get(ledger);
        if (m === undefined) {
          m = new Map();
          heads.set(ledger, m);
        }
        m.set(key, { index: Number(index), hash });
      }
      const [[reservedTo]] = (settled[2] as PromiseFulfilledResult<unknown[][]>).value as [[bigint]];
      const after = Number(reservedTo);
      const nodes = new Map<number, Buffer>();
      for (const [position, hash] of (settled[3] as PromiseFulfilledResult<unknown[][]>).value as Array<[bigint, Buffer]>) nodes.set(Number(position), hash);
      return { heads, before: after - total, nodes };
    } catch (err) {
      await this.conn.run('ROLLBACK').catch(() => undefined);
      throw err;
    }
  }

  /** Each row's chain columns and hash, from its chain's head, and the log's nodes its leaf completes. */
  private chainRows(units: readonly AppendUnit[], { heads, before, nodes }: Reserved): ChainedRows {
    let seq = BigInt(before);
    let size = before;
    const newNodes: Array<{ position: number; hash: Buffer }> = [];
    const read = (level: number, index: number): Buffer => {
      const h = nodes.get(positionOf(level, index));
      if (h === undefined)
        throw new PgError(SqlState.DataCorrupted, `the global log lacks its node (${level}, ${index}): cotwire.log_nodes was changed behind the server`);
      return h;
    };
    const rowsByLedger = new Map<string, { table: LedgerTable; rows: (string | null)[][] }>();
    const results: AppendResult[][] = [];
    let last: LastRow | null = null;
    for (const unit of units) {
      const unitResults: AppendResult[] = [];
      for (const job of unit.jobs) {
        const ledger = ledgerKey(job.table);
        const layout = rowLayout(job.table);
        const chainHeads = heads.get(ledger);
        let out = rowsByLedger.get(ledger);
        if (out === undefined) {
          out = { table: job.table, rows: [] };
          rowsByLedger.set(ledger, out);
        }
        const first = seq + 1n;
        const jobRows: (string | null)[][] = [];
        const ahead = commitmentsAhead(job.table, job.rows);
        job.rows.forEach((clientRow, i) => {
          seq += 1n;
          const { texts, key, index, hash, owner } = chainRow(
            job.table,
            clientRow,
            (k) => {
              const head = chainHeads?.get(k);
              if (head === undefined) throw new PgError(SqlState.InternalError, `chain ${JSON.stringify(k)} of ${ledger} has no head row`);
              // A chain with steps whose owner is not known had its first steps removed (retention).
              return head.index < 0 ? undefined : { ...head, owner: head.owner ?? this.owners.get(`${ledger}\u0000${k}`) };
            },
            seq,
            this.nextMicros(),
            job.traceIds?.[i],
            this.embeddingSample,
            this.sessionOwner,
            ahead?.row(i) ?? null,
          );
          const head = chainHeads?.get(key) as Head;
          head.index = index;
          head.hash = hash;
          head.owner = owner;
          last = { table: job.table, seq, hash };
          out.rows.push(texts);
          jobRows.push(texts);
          for (const n of nodesForAppend(size, rowLeafHash(layout.leafPrefix, key, hash), read)) {
            const position = positionOf(n.level, n.index);
            nodes.set(position, n.hash);
            newNodes.push({ position, hash: n.hash });
          }
          size++;
        });
        unitResults.push({ count: job.rows.length, firstSeq: first, lastSeq: seq, rows: jobRows });
      }
      results.push(unitResults);
    }
    if (last === null) throw new PgError(SqlState.InternalError, 'a group commit with no rows');
    return { results, rowsByLedger, newNodes, size, last };
  }

  async checkOwners(table: LedgerTable, rows: ReadonlyArray<ReadonlyArray<string | null>>): Promise<void> {
    const ledger = ledgerKey(table);
    const { chains } = chainsOf([{ jobs: [{ table, rows }], queued: 0, resolve: () => undefined, reject: () => undefined }]);
    await this.loadOwners(this.checker ?? this.conn, chains);
    checkSessionOwners(table, rows, (key) => this.owners.get(`${ledger}\u0000${key}`), this.sessionOwner);
  }

  /**
   * Reads whose the chains are that the writer does not know yet: the
   * org_id and agent_id of their first steps. With `heads` (locked), only
   * chains whose heads say they have steps.
   */
  private async loadOwners(conn: SqlConnection, chains: Chains, heads?: ReadonlyMap<string, ReadonlyMap<string, Head>>): Promise<void> {
    for (const [ledger, { table, keys }] of chains) {
      const layout = rowLayout(table);
      if (table.chainKey === null || (layout.orgId < 0 && layout.agentId < 0)) continue;
      const unknown = [...keys].filter(
        (k) => !this.owners.has(`${ledger}\u0000${k}`) && (heads === undefined || (heads.get(ledger)?.get(k)?.index ?? -1) >= 0),
      );
      if (unknown.length === 0) continue;
      const column = (c: string, at: number): string => (at < 0 ? 'NULL' : `r.${quoteIdent(c)}::text`);
      const rows = (await conn.query(
        `SELECT r.${quoteIdent(table.chainKey)}::text, ${column('org_id', layout.orgId)}, ${column('agent_id', layout.agentId)}
         FROM ${qualifiedName(table)} r WHERE r.${quoteIdent(table.chainKey)} = ANY($1::text[]) AND r.step_index = 0`,
        [pgArray(unknown)],
      )) as Array<[string, string | null, string | null]>;
      for (const [key, org, agent] of rows) this.owners.set(`${ledger}\u0000${key}`, { org, agent });
    }
    if (heads === undefined) return;
    for (const [ledger, m] of heads) for (const [key, head] of m) head.owner ??= this.owners.get(`${ledger}\u0000${key}`);
  }

  /** The owners chaining gave the chains of a commit that was made. */
  private ownersOf(heads: ReadonlyMap<string, ReadonlyMap<string, Head>>): void {
    for (const [ledger, m] of heads) for (const [key, head] of m) if (head.owner !== undefined) this.owners.set(`${ledger}\u0000${key}`, head.owner);
  }

  /** Inserts the missing head rows in key order: two instances adding the same new chains then wait for each other, never in a cycle. */
  private async ensureHeads(ledger: string, table: LedgerTable, keys: readonly string[]): Promise<void> {
    const where = table.chainKey === null ? 'true' : `r.${quoteIdent(table.chainKey)} = k.k`;
    await this.conn.query(
      `INSERT INTO ${PG_SCHEMA}.chain_heads (ledger, chain_key, step_index, current_hash)
       SELECT $1, k.k, coalesce(last.step_index, -1), coalesce(last.current_hash, '')
       FROM unnest($2::text[]) AS k(k)
       LEFT JOIN LATERAL (SELECT r.step_index, r.current_hash FROM ${qualifiedName(table)} r WHERE ${where} ORDER BY r.step_index DESC LIMIT 1) last ON true
       ORDER BY k.k
       ON CONFLICT DO NOTHING`,
      [ledger, pgArray(keys)],
    );
  }

  /** Statements sent together leave together, where the connection can cork its socket. */
  private corked<T>(calls: () => T): T {
    const conn = this.conn as SqlConnection & { corked?: <U>(c: () => U) => U };
    return conn.corked === undefined ? calls() : conn.corked(calls);
  }

  /** Microseconds since the epoch, strictly increasing within this instance. */
  private nextMicros(): bigint {
    const now = BigInt(Date.now()) * 1000n;
    this.lastMicros = now > this.lastMicros ? now : this.lastMicros + 1n;
    return this.lastMicros;
  }
}

/** A ledger as chain_heads names it: the schema and name its records use (main.<name>). */
function ledgerKey(table: Pick<LedgerTable, 'schema' | 'name'>): string {
  return `${table.schema}.${table.name}`;
}

/** A PostgreSQL array literal of texts (NULL for null), passed as one text parameter. */
export function pgArray(values: ReadonlyArray<string | null>): string {
  let out = '{';
  for (let i = 0; i < values.length; i++) {
    const v = values[i] as string | null;
    if (i > 0) out += ',';
    // Most values hold neither quote nor backslash: one scan for them, and no copies when they hold none.
    out += v === null ? 'NULL' : NEEDS_ESCAPE.test(v) ? `"${v.replaceAll('\\', '\\\\').replaceAll('"', '\\"')}"` : `"${v}"`;
  }
  return `${out}}`;
}
const NEEDS_ESCAPE = /["\\]/;

type Chains = Map<string, { table: LedgerTable; keys: Set<string> }>;

/** The log's frontier (the complete subtrees a new leaf may join) at its size less $1. */
const FRONTIER_SQL = `SELECT position, hash FROM ${PG_SCHEMA}.log_nodes WHERE position = ANY (ARRAY(
  SELECT 2 * m - bit_count(m::bit(64)) + l
  FROM (SELECT size - $1::int8 AS s FROM ${PG_SCHEMA}.log_head) AS x, generate_series(0, 62) AS l, LATERAL (SELECT ((x.s >> l) << l) - 1 AS m) AS y
  WHERE (x.s >> l) & 1 = 1))`;

/** A held transaction's rows so far (serveHold): heads and nodes as its rows left them, and where the log stands. */
interface HeldRows {
  readonly heads: Map<string, Map<string, Head>>;
  readonly nodes: Map<number, Buffer>;
  readonly before: number;
  size: number;
  readonly rowsByLedger: ChainedRows['rowsByLedger'];
  readonly newNodes: Array<{ position: number; hash: Buffer }>;
  last: LastRow | null;
}

/** What the first round trip locked and reserved: the chains' heads, the ledger_seq before this commit's, the log's frontier. */
interface Reserved {
  readonly heads: Map<string, Map<string, Head>>;
  readonly before: number;
  readonly nodes: Map<number, Buffer>;
}

interface ChainedRows {
  readonly results: AppendResult[][];
  readonly rowsByLedger: Map<string, { table: LedgerTable; rows: (string | null)[][] }>;
  readonly newNodes: Array<{ position: number; hash: Buffer }>;
  /** The log's size after this commit. */
  readonly size: number;
  readonly last: LastRow;
}

/** A commit whose COMMIT was sent and whose answer was lost. */
class InDoubt extends Error {
  constructor(
    readonly last: LastRow,
    readonly reason: unknown,
    readonly results: AppendResult[][],
    readonly units: number,
    readonly total: number,
  ) {
    super('the outcome of a commit is not known yet');
  }
}

/** A commit's last row: where it would be found, and its hash, if the commit landed. */
interface LastRow {
  readonly table: LedgerTable;
  readonly seq: bigint;
  readonly hash: string;
}

/** Every chain a commit extends, by ledger, and how many rows it appends. */
function chainsOf(units: readonly AppendUnit[]): { chains: Chains; total: number } {
  const chains = new Map<string, { table: LedgerTable; keys: Set<string> }>();
  let total = 0;
  for (const u of units) {
    for (const job of u.jobs) {
      const layout = rowLayout(job.table);
      const ledger = ledgerKey(job.table);
      let entry = chains.get(ledger);
      if (entry === undefined) {
        entry = { table: job.table, keys: new Set() };
        chains.set(ledger, entry);
      }
      for (const row of job.rows) {
        const at = layout.client.indexOf(layout.chainKey);
        entry.keys.add(layout.chainKey < 0 ? '' : (row[at] ?? ''));
      }
      total += job.rows.length;
    }
  }
  return { chains, total };
}

/** A ledger's INSERT of its rows from one text array per column, numbered from `$first`, made once per ledger and number. */
const insertTexts = new WeakMap<LedgerTable, Map<number, string>>();

function insertText(table: LedgerTable, first: number): string {
  let byFirst = insertTexts.get(table);
  if (byFirst === undefined) {
    byFirst = new Map();
    insertTexts.set(table, byFirst);
  }
  let text = byFirst.get(first);
  if (text === undefined) {
    const cols = table.columns.map((_, i) => `c${i}`);
    text = `INSERT INTO ${qualifiedName(table)} (${table.columns.map((c) => quoteIdent(c.name)).join(', ')})
       SELECT ${table.columns.map((c, i) => fromCanonicalSql(`u.${cols[i]}`, c.type)).join(', ')}
       FROM unnest(${cols.map((_, i) => `$${first + i}::text[]`).join(', ')}) AS u(${cols.join(', ')})`;
    byFirst.set(first, text);
  }
  return text;
}

/**
 * The chains' new heads (ledger, key, index, hash); with `old`, only those
 * still at the index and hash given, each counted by RETURNING. One chain
 * (every commit of a lone writer) is updated by its key: a join with unnest
 * costs PostgreSQL about 0.1 ms more a commit, its generic plan a hash over a
 * scan of chain_heads, which grows with the sessions.
 */
function headsUpdate(
  param: (v: string) => string,
  hl: readonly string[],
  hk: readonly string[],
  hi: readonly string[],
  hh: readonly string[],
  old: { readonly oi: readonly string[]; readonly oh: readonly string[] } | null,
): string {
  if (hl.length === 1) {
    const set = `UPDATE ${PG_SCHEMA}.chain_heads SET step_index = ${param(hi[0] as string)}::int4, current_hash = ${param(hh[0] as string)}
       WHERE ledger = ${param(hl[0] as string)} AND chain_key = ${param(hk[0] as string)}`;
    return old === null ? set : `${set} AND step_index = ${param(old.oi[0] as string)}::int4 AND current_hash = ${param(old.oh[0] as string)} RETURNING 1`;
  }
  const arrays = `${param(pgArray(hl))}::text[], ${param(pgArray(hk))}::text[], ${param(pgArray(hi))}::int4[], ${param(pgArray(hh))}::text[]`;
  const set = `UPDATE ${PG_SCHEMA}.chain_heads AS t SET step_index = x.i, current_hash = x.h`;
  return old === null
    ? `${set}
       FROM unnest(${arrays}) AS x(l, k, i, h)
       WHERE t.ledger = x.l AND t.chain_key = x.k`
    : `${set}
       FROM unnest(${arrays}, ${param(pgArray(old.oi))}::int4[], ${param(pgArray(old.oh))}::text[]) AS x(l, k, i, h, oi, oh)
       WHERE t.ledger = x.l AND t.chain_key = x.k AND t.step_index = x.oi AND t.current_hash = x.oh RETURNING 1`;
}

/** The second round trip's statement: the rows of every ledger, the log's new nodes and the chains' new heads, in one. */
function writeStatement(
  rowsByLedger: ChainedRows['rowsByLedger'],
  newNodes: ChainedRows['newNodes'],
  heads: Reserved['heads'],
  /** From the tip: the log's size and the chains' heads it started from, checked as they are advanced. */
  guard: { readonly before: number; readonly total: number; readonly old: Reserved['heads'] } | null = null,
): { sql: string; params: string[] } {
  const params: string[] = [];
  const param = (v: string): string => {
    params.push(v);
    return `$${params.length}`;
  };
  const ctes: string[] = [];
  for (const { table, rows } of rowsByLedger.values()) {
    ctes.push(insertText(table, params.length + 1));
    for (let i = 0; i < table.columns.length; i++) params.push(pgArray(rows.map((r) => r[i] ?? null)));
  }
  ctes.push(
    `INSERT INTO ${PG_SCHEMA}.log_nodes (position, hash)
     SELECT p, pg_catalog.decode(h, 'hex') FROM unnest(${param(pgArray(newNodes.map((n) => String(n.position))))}::int8[], ${param(pgArray(newNodes.map((n) => n.hash.toString('hex'))))}::text[]) AS x(p, h)`,
  );
  const hl: string[] = [];
  const hk: string[] = [];
  const hi: string[] = [];
  const hh: string[] = [];
  for (const [ledger, m] of heads) {
    for (const [key, head] of m) {
      hl.push(ledger);
      hk.push(key);
      hi.push(String(head.index));
      hh.push(head.hash);
    }
  }
  if (guard === null) {
    ctes.push(headsUpdate(param, hl, hk, hi, hh, null));
    return { sql: `WITH ${ctes.map((c, i) => `w${i} AS (${c})`).join(', ')} SELECT 1`, params };
  }
  const oi: string[] = [];
  const oh: string[] = [];
  for (const [ledger, m] of heads) {
    for (const key of m.keys()) {
      const o = guard.old.get(ledger)?.get(key);
      oi.push(String(o?.index ?? -2));
      oh.push(o?.hash ?? '');
    }
  }
  // Each head and the log's size advance only from what the tip says they are; the final division fails the whole
  // statement (and so the transaction) when one did not, and nothing of it is kept.
  const named = ctes.map((c, i) => `w${i} AS (${c})`);
  named.push(
    `heads AS (${headsUpdate(param, hl, hk, hi, hh, { oi, oh })})`,
    `advanced AS (UPDATE ${PG_SCHEMA}.log_head SET size = size + ${param(String(guard.total))}::int8 WHERE size = ${param(String(guard.before))}::int8 RETURNING 1)`,
  );
  return {
    sql: `WITH ${named.join(', ')} SELECT 1 / (CASE WHEN (SELECT count(*) FROM heads) = ${param(String(hl.length))}::int8 AND (SELECT count(*) FROM advanced) = 1 THEN 1 ELSE 0 END)`,
    params,
  };
}

/**
 * The chains of `table` (those of `keys`, or all) whose head row in
 * chain_heads is not the last row the ledger holds, or accounts for through
 * retention: their last steps were removed behind the server. Read in one
 * snapshot, in which another instance's append shows its head and its row
 * together or neither.
 */
export async function cutChains(conn: SqlConnection, table: LedgerTable, keys: readonly string[] | null): Promise<CutChain[]> {
  const ledger = ledgerKey(table);
  const match = table.chainKey === null ? 'true' : `r.${quoteIdent(table.chainKey)} = h.chain_key`;
  const retained =
    table.retention !== null && retainable(table)
      ? `AND NOT EXISTS (SELECT 1 FROM ${table.retention} x WHERE x.ledger = h.ledger AND x.chain_key = h.chain_key AND x.last_step_index >= h.step_index)`
      : '';
  const rows = (await conn.query(
    `SELECT h.chain_key, h.step_index, h.current_hash, last.step_index, last.current_hash
     FROM ${PG_SCHEMA}.chain_heads h
     LEFT JOIN LATERAL (SELECT r.step_index, r.current_hash FROM ${qualifiedName(table)} r WHERE ${match} ORDER BY r.step_index DESC LIMIT 1) last ON true
     WHERE h.ledger = $1 AND ($2::text[] IS NULL OR h.chain_key = ANY ($2::text[])) AND h.step_index >= 0
       AND (last.step_index IS NULL OR last.step_index < h.step_index OR (last.step_index = h.step_index AND last.current_hash <> h.current_hash))
       ${retained}
     ORDER BY h.chain_key`,
    [ledger, keys === null ? null : pgArray(keys)],
  )) as Array<[string, number | string, string, number | string | null, string | null]>;
  return rows.map(([key, index, hash, presentIndex, presentHash]) => ({
    ledger,
    key,
    recorded: { index: Number(index), hash, seq: 0 },
    present: presentIndex === null ? null : { index: Number(presentIndex), hash: presentHash ?? '' },
  }));
}
