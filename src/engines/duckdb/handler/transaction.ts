import type { EngineConnection } from '../../../engine/port.js';
import { PgError } from '../../../errors/pg-error.js';
import { SqlState } from '../../../errors/sqlstate.js';
import type { TransactionStatus } from '../../../protocol/codes.js';
import type { ResultSink } from '../../../session/handler-port.js';
import type { LedgerWriter } from '../ledger/writer.js';
import type { AppendHold, AppendJob, AppendResult } from '../../../ledger/chain/append.js';
import type { SessionSettings } from './settings.js';

interface Savepoint {
  readonly name: string;
  /** The transaction's write count when the savepoint was set. */
  readonly writes: number;
}

function warning(code: string, message: string): PgError {
  return new PgError(code, message, {}, 'WARNING');
}

/** What follows the transactions' course (the catalog's snapshot reads, engines/duckdb/handler/catalog-mode.ts). */
export interface TransactionObserver {
  transactionBegan(): void;
  transactionEnded(): void;
}

/**
 * One connection's transaction, as PostgreSQL keeps it: the status the
 * protocol reports (including the failed state, which DuckDB lacks), the
 * access mode, savepoints, and the ledger appends that wait for COMMIT.
 * It is the only part of the handler that begins and ends the engine's
 * transactions.
 */
export class TransactionState {
  private state: TransactionStatus = 'I';
  /** A multi-statement query string runs as one transaction unless it controls transactions itself. */
  private implicit = false;
  /** The explicit block's access mode (BEGIN READ ONLY, SET TRANSACTION ...). */
  private blockReadOnly = false;
  /** Whether the block has run a query yet: only then may it not turn read-write. */
  private blockQueried = false;
  private savepoints: Savepoint[] = [];
  /** Statements that may have written since the transaction began: savepoints are emulated from it. */
  private writes = 0;
  /** Ledger appends of the open transaction: they reach the writer at COMMIT, as one unit. */
  private pendingAppends: AppendJob[] = [];
  /** The append order, held since an INSERT returned chain columns (AppendHold); its rows are chained already. */
  private appendHold: AppendHold | null = null;
  /** Ledgers created in the open transaction (lower-case names): the catalog changes for others when it ends. */
  private readonly createdLedgers = new Set<string>();
  /** The portal whose autocommit statement runs in a read-only engine transaction of its own. */
  private statementOwner: object | null = null;
  /** The end of such a transaction whose portal closed, which the next engine work waits for. */
  private statementEnding: Promise<void> = Promise.resolve();
  /** Units of work (atomically) running: only the outermost opens and ends the engine transaction. */
  private atomicDepth = 0;
  private began = 0n;

  constructor(
    private readonly engine: EngineConnection,
    private readonly writer: LedgerWriter,
    private readonly settings: SessionSettings,
    /** A reader's every transaction is read-only in DuckDB. */
    private readonly readerRole: boolean,
    /** Runs when a transaction ends, either way: cursors close, and a ledger created in it appears or disappears. */
    private readonly ended: (catalogChanged: boolean) => void,
    /** Told when a transaction block or a multi-statement string's transaction begins, and when any transaction ends. */
    private readonly observer: TransactionObserver = { transactionBegan: () => undefined, transactionEnded: () => undefined },
  ) {}

  get status(): TransactionStatus {
    return this.state;
  }

  /** No transaction is open: each statement is its own. */
  get autocommit(): boolean {
    return this.state === 'I' && !this.implicit;
  }

  /** An explicit block (BEGIN ... COMMIT) is open. */
  get inBlock(): boolean {
    return this.state !== 'I' && !this.implicit;
  }

  /** Whether the current transaction refuses writes (PostgreSQL's transaction_read_only). */
  readOnly(): boolean {
    if (this.inBlock) return this.blockReadOnly;
    return this.settings.get('default_transaction_read_only') === 'on';
  }

  checkNotFailed(): void {
    if (this.state === 'E') {
      throw new PgError(SqlState.InFailedSqlTransaction, 'current transaction is aborted, commands ignored until end of transaction block');
    }
  }

  fail(): void {
    if (this.state === 'T') this.state = 'E';
  }

  /** A statement other than a session command runs: a block cannot turn read-write after it. */
  queried(): void {
    if (this.state === 'T' && !this.implicit) this.blockQueried = true;
  }

  /** A ledger was created in the open transaction. */
  ledgerCreated(name: string): void {
    this.createdLedgers.add(name.toLowerCase());
  }

  /** Whether the open transaction created a ledger of this name (the writer sees it only after COMMIT). */
  createdHere(name: string): boolean {
    return this.createdLedgers.has(name.toLowerCase());
  }

  /** A statement that may write runs. */
  wrote(): void {
    this.writes++;
  }

  /**
   * Sends a ledger append to the writer now (autocommit: the client is
   * answered after the commit), or queues it for COMMIT.
   */
  async append(job: AppendJob, signal?: AbortSignal): Promise<void> {
    if (this.autocommit) await this.writer.append([job], signal);
    else if (this.appendHold !== null) await this.appendHold.add([job]);
    else this.pendingAppends.push(job);
  }

  /**
   * Chains a ledger append of the open block now, holding the append order
   * until the block ends (the first time, behind the appends queued
   * before): its chain columns can then be returned before COMMIT.
   */
  async appendChained(job: AppendJob, signal: AbortSignal): Promise<AppendResult> {
    if (this.appendHold === null) {
      this.appendHold = await this.writer.hold(signal);
      const earlier = this.pendingAppends;
      this.pendingAppends = [];
      if (earlier.length > 0) await this.appendHold.add(earlier);
    }
    const [result] = await this.appendHold.add([job]);
    return result as AppendResult;
  }

  /**
   * An autocommit statement of a reader, or of a session whose transactions
   * default to read-only, runs in a read-only DuckDB transaction of its own,
   * so that a write DuckDB finds in it (a sequence's nextval in a SELECT) is
   * refused, as in a read-only block. It ends when its portal completes
   * (endStatement) or closes (statementClosed), and before anything else
   * opens a transaction.
   */
  async beginStatement(owner: object): Promise<void> {
    await this.endOpenStatement(owner);
    if (!this.autocommit || this.statementOwner === owner) return;
    if (!this.readerRole && !this.readOnly()) return;
    await this.engine.run('BEGIN TRANSACTION READ ONLY');
    this.statementOwner = owner;
  }

  async endStatement(owner: object, ok: boolean): Promise<void> {
    if (this.statementOwner !== owner) return;
    this.statementOwner = null;
    await this.engine.run(ok ? 'COMMIT' : 'ROLLBACK');
  }

  /** The portal closed before it completed (a suspended portal at Sync): its read-only transaction ends too. */
  statementClosed(owner: object): void {
    if (this.statementOwner !== owner) return;
    this.statementEnding = this.endStatement(owner, true).catch(() => undefined);
  }

  /** Ends a statement's read-only transaction other than `keep`'s, so that other work starts its own. */
  private async endOpenStatement(keep: object | null = null): Promise<void> {
    await this.statementEnding;
    const owner = this.statementOwner;
    if (owner !== null && owner !== keep) await this.endStatement(owner, true);
  }

  /**
   * Runs work that must commit or fail as a unit (a CREATE TABLE and its
   * chain columns, the INSERTs of a COPY): in its own engine transaction
   * when none is open, in the open one otherwise.
   */
  async atomically<T>(work: () => Promise<T>): Promise<T> {
    const own = this.autocommit && this.atomicDepth === 0;
    if (own) {
      await this.endOpenStatement();
      // Taken before BEGIN: the snapshot is no older than this.
      this.began = process.hrtime.bigint();
      await this.engine.run('BEGIN TRANSACTION');
    }
    this.atomicDepth++;
    try {
      const result = await work();
      if (own) await this.engine.run('COMMIT');
      return result;
    } catch (err) {
      if (own) await this.engine.run('ROLLBACK').catch(() => undefined);
      throw err;
    } finally {
      this.atomicDepth--;
    }
  }

  /**
   * When the open engine transaction began (process.hrtime), which its
   * snapshot is no older than; null outside one, where the next statement's
   * snapshot is taken when it runs.
   */
  snapshotBegan(): bigint | null {
    return this.autocommit && this.atomicDepth === 0 ? null : this.began;
  }

  /** The rest of a multi-statement string runs in one transaction, whose snapshot the caller made current. */
  async beginImplicit(): Promise<void> {
    await this.endOpenStatement();
    this.observer.transactionBegan();
    this.began = process.hrtime.bigint();
    await this.engine.run(this.engineBegin(this.readOnly()));
    this.implicit = true;
  }

  get implicitOpen(): boolean {
    return this.implicit;
  }

  async endImplicit(succeeded: boolean): Promise<void> {
    if (!this.implicit) return;
    if (succeeded) await this.flushAppends();
    await this.end(succeeded ? 'COMMIT' : 'ROLLBACK');
  }

  async begin(readOnly: boolean | null, sink: ResultSink): Promise<void> {
    if (!this.autocommit) {
      sink.notice(warning(SqlState.ActiveSqlTransaction, 'there is already a transaction in progress'));
      return;
    }
    await this.endOpenStatement();
    this.blockReadOnly = readOnly ?? this.settings.get('default_transaction_read_only') === 'on';
    this.blockQueried = false;
    this.observer.transactionBegan();
    this.began = process.hrtime.bigint();
    await this.engine.run(this.engineBegin(this.blockReadOnly));
    this.state = 'T';
    this.writes = 0;
    this.savepoints = [];
  }

  /** COMMIT; the tag says what happened: a failed block rolls back. */
  async commit(sink: ResultSink): Promise<'COMMIT' | 'ROLLBACK'> {
    if (this.state === 'I') {
      sink.notice(warning(SqlState.NoActiveSqlTransaction, 'there is no transaction in progress'));
      return 'COMMIT';
    }
    if (this.state === 'E') {
      await this.end('ROLLBACK');
      return 'ROLLBACK';
    }
    await this.flushAppends();
    await this.end('COMMIT');
    return 'COMMIT';
  }

  async rollback(sink: ResultSink): Promise<void> {
    if (this.state === 'I') {
      sink.notice(warning(SqlState.NoActiveSqlTransaction, 'there is no transaction in progress'));
      return;
    }
    await this.end('ROLLBACK');
  }

  savepoint(name: string): void {
    this.requireBlock('SAVEPOINT');
    this.savepoints.push({ name, writes: this.writes });
  }

  release(name: string): void {
    this.requireBlock('RELEASE SAVEPOINT');
    this.savepoints.length = this.findSavepoint(name);
  }

  /**
   * DuckDB has no savepoints. ROLLBACK TO is emulated where that is exact:
   * when nothing was written since the savepoint (only the failed state is
   * cleared), or when nothing was written before it (the engine transaction
   * restarts). Anything else would silently keep or lose writes, so it is
   * refused.
   */
  async rollbackTo(name: string): Promise<void> {
    this.requireBlock('ROLLBACK TO SAVEPOINT');
    const at = this.findSavepoint(name);
    const savepoint = this.savepoints[at] as Savepoint;
    if (this.writes === savepoint.writes && (await this.engineTransactionUsable())) {
      this.savepoints.length = at + 1;
      this.state = 'T';
      return;
    }
    if (savepoint.writes === 0) {
      this.dropAppends();
      await this.engine.run('ROLLBACK');
      await this.engine.run(this.engineBegin(this.blockReadOnly));
      this.writes = 0;
      this.savepoints.length = at + 1;
      this.state = 'T';
      return;
    }
    this.state = 'E';
    throw new PgError(SqlState.FeatureNotSupported, `cannot roll back to savepoint "${name}": statements that may have written ran both before and after it`, {
      hint: 'cotwire emulates savepoints only when one side of them is free of writes. Roll back the whole transaction.',
    });
  }

  /** SET TRANSACTION READ ONLY | READ WRITE: only inside a block, and read-write only before its first query. */
  async setReadOnly(readOnly: boolean, sink: ResultSink): Promise<void> {
    if (!this.inBlock) {
      sink.notice(warning(SqlState.NoActiveSqlTransaction, 'SET TRANSACTION can only be used in transaction blocks'));
      return;
    }
    this.checkNotFailed();
    if (!readOnly && this.blockReadOnly && this.blockQueried) {
      throw new PgError(SqlState.ActiveSqlTransaction, 'transaction read-write mode must be set before any query');
    }
    if (readOnly !== this.blockReadOnly && !this.blockQueried && this.writes === 0) {
      // Nothing ran in the block yet: its engine transaction starts again in the new mode.
      this.dropAppends();
      await this.engine.run('ROLLBACK');
      await this.engine.run(this.engineBegin(readOnly));
    }
    this.blockReadOnly = readOnly;
  }

  /**
   * A read-only transaction is one in DuckDB too, and so is every
   * transaction of a reader: DuckDB then refuses any write to the database
   * itself (a sequence's nextval included), whatever a statement looks like.
   */
  private engineBegin(readOnly: boolean): string {
    return readOnly || this.readerRole ? 'BEGIN TRANSACTION READ ONLY' : 'BEGIN TRANSACTION';
  }

  /**
   * Sends the transaction's ledger appends to the writer, as one unit. If
   * that fails, the whole transaction is rolled back and ends: nothing of it
   * commits.
   */
  private async flushAppends(): Promise<void> {
    const jobs = this.pendingAppends;
    const hold = this.appendHold;
    this.pendingAppends = [];
    this.appendHold = null;
    if (jobs.length === 0 && hold === null) return;
    try {
      if (hold !== null) await hold.commit();
      else await this.writer.append(jobs);
    } catch (err) {
      // Everything else the transaction did ends with it: SET LOCAL, cursors, savepoints.
      await this.end('ROLLBACK').catch(() => undefined);
      throw err;
    }
  }

  /** Work that follows the transaction's commit (declared.ts: what the DDL declared); dropped on rollback. */
  private afterCommit: Array<() => Promise<void>> = [];

  /** Runs `work` once the current transaction commits: now, for a statement outside a block. */
  async onCommit(work: () => Promise<void>): Promise<void> {
    // The statement has committed either way: what follows it cannot turn it into an error.
    if (this.autocommit && !this.implicit) await work().catch(() => undefined);
    else this.afterCommit.push(work);
  }

  /** The session ends: its open block's appends go with its engine connection, and so does a held append order. */
  close(): void {
    this.dropAppends();
    this.engine.close();
  }

  /** The block's appends go (ROLLBACK): a held append order is let go, and its numbers are given again. */
  private dropAppends(): void {
    this.pendingAppends = [];
    this.appendHold?.release();
    this.appendHold = null;
  }

  private async end(how: 'COMMIT' | 'ROLLBACK'): Promise<void> {
    const after = this.afterCommit;
    this.afterCommit = [];
    this.dropAppends();
    this.state = 'I';
    this.implicit = false;
    this.savepoints = [];
    this.writes = 0;
    this.settings.endTransaction();
    try {
      await this.engine.run(how);
    } finally {
      this.transactionEnded();
    }
    if (how === 'COMMIT') for (const work of after) await work().catch(() => undefined);
  }

  private transactionEnded(): void {
    this.observer.transactionEnded();
    const changed = this.createdLedgers.size > 0;
    this.createdLedgers.clear();
    this.ended(changed);
  }

  private requireBlock(what: string): void {
    if (this.state === 'I') throw new PgError(SqlState.NoActiveSqlTransaction, `${what} can only be used in transaction blocks`);
  }

  private findSavepoint(name: string): number {
    for (let i = this.savepoints.length - 1; i >= 0; i--) {
      if ((this.savepoints[i] as Savepoint).name === name) return i;
    }
    throw new PgError(SqlState.InvalidSavepointSpecification, `savepoint "${name}" does not exist`);
  }

  private async engineTransactionUsable(): Promise<boolean> {
    try {
      await this.engine.run('SELECT 1');
      return true;
    } catch {
      return false;
    }
  }
}
