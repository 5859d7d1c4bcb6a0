import type { BackendField, BindValue, RelayBackend, WholeOutcome } from '../../../engine/port.js';
import { PgError } from '../../../errors/pg-error.js';
import { SqlState } from '../../../errors/sqlstate.js';
import type { LedgerCatalog } from '../../../ledger/chain/catalog.js';
import { rowLayout, rowTexts, uuidv7, type AppendHold, type AppendJob, type AppendResult, type LedgerAppender } from '../../../ledger/chain/append.js';
import { isConnectionLoss } from '../adapter/connection.js';
import { erasureFields, erasureParamTypes, runErasure, type ErasureService } from '../../../engine/erasure-call.js';
import type { TransactionStatus } from '../../../protocol/codes.js';
import type { FieldDescription } from '../../../protocol/messages.js';
import type { FrameSink } from '../../../protocol/frame-sink.js';
import type {
  BindAhead,
  ConnectionHandler,
  CopyIn,
  ExecuteOutcome,
  Portal,
  PreparedStatement,
  RelayedWhole,
  ResultSink,
  StatementSource,
} from '../../../session/handler-port.js';
import type { PgStatement, ProxyAccess } from './access.js';
import { runVerify, servedVerify, verifyCallOf, type ServedVerify } from './chain-verify.js';
import {
  checkParents,
  checkOwners,
  checkRows,
  copyPlan,
  copyRows,
  directRows,
  evaluateRows,
  ledgerNamed,
  planAppend,
  sendReturning,
  type LedgerAppendPlan,
} from './appends.js';
import { returnsAnyOf } from '../../../sql/insert.js';
import { callsIn, type FunctionCall } from '../../../sql/pg-tree.js';

/**
 * A client connection on a PostgreSQL engine: every statement is planned by
 * the guard (PostgreSQL's grammar), then relayed to the client's own backend
 * as the client sent it, or, for an append to a ledger, evaluated and handed
 * to the writer. The backend keeps PostgreSQL's semantics: transactions,
 * savepoints, SET, cursors, catalogs, types and error codes are its own.
 * What cotwire adds is the order of appends: inside a transaction block they
 * wait for COMMIT (and go with ROLLBACK, or ROLLBACK TO a savepoint before
 * them), and COMMIT commits the client's transaction only once the writer
 * has made them durable.
 */

export interface ProxyServices {
  readonly ledgers: LedgerCatalog;
  readonly writer: LedgerAppender;
  readonly maxContentBytes: number;
  readonly maxAppendBytes: number;
  /** A server-side read (parents of steps), outside the client's transaction. */
  readonly query: (sql: string, params: string[]) => Promise<unknown[][]>;
  /** CREATE TABLE of a ledger (its parse tree), carried out by the server as the ledgers' owner. */
  readonly ledgerDdl: {
    create(create: Record<string, unknown>): Promise<void>;
    /** The ledger's name, once its definition is checked; throws as CREATE TABLE would. */
    check(create: Record<string, unknown>): Promise<{ readonly name: string; readonly exists: boolean }>;
  };
  readonly idleInTransactionTimeoutMs: number;
  /** cot_redact() and cot_retain(), carried out by the server on an admin's behalf. */
  readonly erasure: ErasureService;
  /** The vectors of cot_search()'s texts, made before the statement runs (PostgreSQL cannot call the embedder). */
  readonly search: { prepare(texts: readonly string[]): Promise<void> };
}

const NOT_RELAYED: RelayedWhole = { relayed: false };

/** Ledger INSERT texts whose plans a connection keeps. */
const PLAN_CACHE_SIZE = 256;

/** Rows fetched from the backend between two waits for the client's socket. */
const BATCH_ROWS = 1000;

class ProxyStatement implements PreparedStatement {
  constructor(
    readonly statement: PgStatement | null,
    readonly paramTypes: readonly number[],
    readonly fields: readonly FieldDescription[] | null,
    /** The parameter types the client gave (0 where it left PostgreSQL to infer). */
    readonly clientTypes: readonly number[],
    /** The backend's parse of it, bound without parsing again (see RelayBackend.describe). */
    readonly parsed: string | null = null,
  ) {}
}

class ProxyPortal implements Portal {
  done = false;
  constructor(
    readonly statement: ProxyStatement,
    readonly name: string,
    readonly fields: readonly FieldDescription[] | null,
    readonly values: readonly BindValue[],
    readonly resultFormats: readonly number[],
    readonly append: LedgerAppendPlan | null,
    /** A chain's verification the server answers (chain-verify.ts). */
    readonly verify: ServedVerify | null = null,
  ) {}
}

export class ProxyConnection implements ConnectionHandler {
  readonly reportedParameters: ReadonlyArray<readonly [string, string]>;
  private portals = 0;
  /** A transaction block is open (BEGIN seen, COMMIT or ROLLBACK not yet). */
  private inBlock = false;
  /** Statements relayed to the backend since the last Sync, besides the evaluation of appends. */
  private relayedInExchange = 0;
  /**
   * The session's transactions may be read-only: a reader's, one started
   * read-only, or one that set anything of it since (sticky). Its appends'
   * rows are then evaluated by the backend, which refuses them (25006).
   */
  private mayBeReadOnly: boolean;
  /** The block failed: COMMIT will roll it back. */
  private blockFailed = false;
  /** Appends of the open block, in order, and where each savepoint began. */
  private pending: AppendJob[] = [];
  /**
   * The append order, held since an INSERT of the block returned chain
   * columns: the block's appends are chained as they come, the number of
   * jobs the hold took and their results kept for COMMIT's report.
   */
  private held: { readonly hold: AppendHold; readonly results: AppendResult[] } | null = null;
  /** Fired by CancelRequest while the session's appends wait in the writer's queue (behind another block's hold). */
  private holdWait: AbortController | null = null;
  private savepoints: Array<{ readonly name: string; readonly at: number; readonly ledgers: number }> = [];
  /** Ledgers this block created, made at its COMMIT. */
  private pendingLedgers: Array<{ readonly name: string; readonly create: Record<string, unknown> }> = [];
  /** What PostgreSQL described of each ledger INSERT, and each one's plan, by text: kept, as a ledger's shape never changes. */
  private readonly appendsDescribed = new Map<string, { readonly paramTypes: number[]; readonly fields: BackendField[] | null }>();
  private readonly appendPlans = new Map<string, LedgerAppendPlan>();
  /** The backend's parse of each ledger's chain read (chain-verify.ts), by its text. */
  private readonly verifyReads = new Map<string, string>();
  /** A statement of the exchange failed: its appends go with it. */
  private exchangeFailed = false;
  /** cotwire itself refused a statement of the open block, which the backend never saw fail. */
  private refusedInBlock = false;
  /** Backend portals to close before the next statement is bound. */
  private toClose: string[] = [];

  constructor(
    private readonly backend: RelayBackend,
    private readonly access: ProxyAccess,
    private readonly services: ProxyServices,
  ) {
    this.reportedParameters = backend.reportedSettings().filter(([k]) => k !== 'session_authorization' && k !== 'is_superuser');
    this.mayBeReadOnly = access.startsReadOnly;
  }

  transactionStatus(): TransactionStatus {
    return this.backend.status;
  }

  idleInTransactionTimeoutMs(): number {
    return this.services.idleInTransactionTimeoutMs;
  }

  /** Every statement of a string is admitted before any runs: one refused refuses the string. */
  splitQuery(sql: string): readonly StatementSource[] {
    const statements = this.access.split(sql);
    for (const s of statements) this.access.admit(s);
    return statements;
  }

  async beginQueryString(): Promise<void> {
    // A string refused before it began (its statements are admitted whole) ended no exchange: if it was refused
    // inside a block, the block fails now, before anything of this string runs.
    this.exchangeFailed = false;
    if (this.refusedInBlock && this.inBlock && !this.backend.failed) {
      await this.failBackend();
      this.blockFailed = (await this.backend.sync()) === 'E';
    }
    this.refusedInBlock = false;
  }

  async endQueryString(): Promise<void> {
    await this.sync();
  }

  /**
   * The end of an exchange. Appends made outside a transaction block wait
   * for it, as the statements around them do in PostgreSQL's implicit
   * transaction: they reach the writer before the backend commits, and
   * vanish with a failed exchange. If the writer fails, the backend's
   * implicit transaction is rolled back with them.
   */
  async sync(): Promise<void> {
    let failure: unknown = null;
    let appended: AppendResult[] | null = null;
    const relayed = this.relayedInExchange;
    this.relayedInExchange = 0;
    if (!this.inBlock && this.pending.length > 0) {
      const jobs = this.pending;
      this.pending = [];
      if (!this.backend.failed && !this.exchangeFailed) {
        try {
          appended = await this.cancellable((signal) => this.services.writer.append(jobs, signal));
        } catch (err) {
          failure = err;
          await this.rollbackBackend();
        }
      }
    }
    // PostgreSQL fails a block at its first error: one cotwire refused must fail the backend's block too, so that
    // what follows gets PostgreSQL's own 25P02 and COMMIT rolls the block back, appends and all.
    if (this.refusedInBlock && this.inBlock && !this.backend.failed) await this.failBackend();
    this.refusedInBlock = false;
    this.exchangeFailed = false;
    let status: TransactionStatus;
    try {
      status = await this.backend.sync();
    } catch (err) {
      if (appended === null || !isConnectionLoss(err)) throw err;
      // The appends are durable and the backend went before the exchange ended. An exchange of appends alone is
      // done (its backend only evaluated their rows); the next statement meets the lost backend. Anything else it
      // ran may not have committed.
      if (relayed > 0) throw committedAppendsOnly(appended, err);
      this.endBlock();
      return;
    }
    this.inBlock = status !== 'I';
    this.blockFailed = status === 'E';
    if (!this.inBlock) this.endBlock();
    if (failure !== null) throw failure;
  }

  /** A statement that fails in the backend's open exchange; its error is cotwire's to swallow, the client has its own. */
  private async failBackend(): Promise<void> {
    const name = `cotwire_${++this.portals}`;
    try {
      // PostgreSQL folds 1 / 0 as it plans, at Bind: the exchange fails there, and nothing after it is answered before Sync.
      await this.backend.openPortal(name, 'SELECT 1 / 0', [], [], []);
      await this.backend.fetch(name, 0, () => undefined);
    } catch {
      // The failure is the point.
    }
  }

  /** ROLLBACK in the backend's current transaction, implicit or not: nothing of it commits. */
  private async rollbackBackend(): Promise<void> {
    const name = `cotwire_${++this.portals}`;
    await this.backend.openPortal(name, 'ROLLBACK', [], [], []).catch(() => undefined);
    await this.backend.fetch(name, 0, () => undefined).catch(() => undefined);
  }

  async prepare(sql: string | StatementSource, paramTypes: readonly number[], named = false): Promise<PreparedStatement> {
    let statement: PgStatement;
    if (typeof sql === 'string') {
      const all = this.access.split(sql);
      if (all.length === 0) return new ProxyStatement(null, paramTypes, null, paramTypes);
      if (all.length > 1) throw new PgError(SqlState.SyntaxError, 'cannot insert multiple commands into a prepared statement');
      statement = all[0] as PgStatement;
    } else {
      statement = sql as PgStatement;
    }
    if (typeof sql === 'string') this.access.admit(statement);
    if (typeof sql !== 'string') {
      // A simple query's statement is described when it is bound, in one exchange with its execution.
      return new ProxyStatement(statement, paramTypes, null, paramTypes);
    }
    // PostgreSQL checks the statement (names, types, an INSERT's columns) as it would run it. An append's
    // answer is kept: a ledger's columns never change, and drivers send the same INSERT as a new statement.
    this.refuseAppendToPendingLedger(statement);
    if (statement.plan.kind === 'erasure') {
      const { call } = statement.plan;
      return new ProxyStatement(statement, erasureParamTypes(call, paramTypes), erasureFields(call), paramTypes);
    }
    if (statement.plan.kind === 'append') {
      const described = await this.describeAppend(statement.text, paramTypes);
      return new ProxyStatement(statement, described.paramTypes, described.fields?.map((f) => field(f, 0)) ?? null, paramTypes);
    }
    // A named statement is bound again and again: PostgreSQL keeps its parse (and its plan) as it would for the client.
    const described = await this.backend.describe(statement.text, paramTypes, named);
    return new ProxyStatement(statement, described.paramTypes, described.fields?.map((f) => field(f, 0)) ?? null, paramTypes, described.statement);
  }

  /** What PostgreSQL says of a ledger INSERT as the client's own statement: kept by text, as a ledger's columns never change. */
  private async describeAppend(
    text: string,
    paramTypes: readonly number[],
  ): Promise<{ readonly paramTypes: number[]; readonly fields: BackendField[] | null }> {
    const key = `${paramTypes.join(',')}\u0000${text}`;
    const cached = this.appendsDescribed.get(key);
    if (cached !== undefined) return cached;
    const described = await this.backend.describe(text, paramTypes);
    if (this.appendsDescribed.size >= PLAN_CACHE_SIZE) this.appendsDescribed.clear();
    this.appendsDescribed.set(key, described);
    return described;
  }

  async bind(
    prepared: PreparedStatement,
    params: readonly (Buffer | null)[],
    paramFormats: readonly number[],
    resultFormats: readonly number[],
    ahead?: BindAhead,
  ): Promise<Portal> {
    const statement = prepared as ProxyStatement;
    try {
      return await this.bindStatement(statement, params, paramFormats, resultFormats, ahead);
    } catch (err) {
      throw inString(err, statement.statement);
    }
  }

  private async bindStatement(
    statement: ProxyStatement,
    params: readonly (Buffer | null)[],
    paramFormats: readonly number[],
    resultFormats: readonly number[],
    ahead: BindAhead | undefined,
  ): Promise<Portal> {
    const values = params.map((p, i): BindValue => {
      if (p === null) return null;
      const format = paramFormats.length === 1 ? paramFormats[0] : (paramFormats[i] ?? 0);
      return format === 1 ? p : p.toString('utf8');
    });
    const name = `cotwire_${++this.portals}`;
    if (this.backend.inExchange) for (const closed of this.toClose.splice(0)) await this.backend.closePortal(closed);
    else this.toClose = [];
    const s = statement.statement;
    if (s === null) return new ProxyPortal(statement, name, null, values, resultFormats, null);
    const formatOf = (i: number): 0 | 1 => ((resultFormats.length === 1 ? resultFormats[0] : (resultFormats[i] ?? 0)) === 1 ? 1 : 0);
    switch (s.plan.kind) {
      case 'append': {
        this.refuseAppendToPendingLedger(s);
        let plan = this.appendPlans.get(s.text);
        if (plan === undefined) {
          plan = await planAppend(this.services.ledgers, s.plan.ledger, s.text, s.plan.insert);
          if (this.appendPlans.size >= PLAN_CACHE_SIZE) this.appendPlans.clear();
          this.appendPlans.set(s.text, plan);
        }
        // A simple query's INSERT is described here, in its exchange: PostgreSQL checks its columns and the count of
        // its values as it describes it, which the evaluation of its rows alone does not.
        const described = await this.describeAppend(s.text, statement.clientTypes);
        const fields = statement.fields ?? (plan.pieces.returning === null ? null : (described.fields?.map((f) => field(f, 0)) ?? null));
        return new ProxyPortal(statement, name, fields?.map((f, i) => ({ ...f, format: formatOf(i) })) ?? null, values, resultFormats, plan);
      }
      case 'create-ledger':
      case 'copy-ledger':
        return new ProxyPortal(statement, name, null, values, resultFormats, null);
      case 'erasure':
        return new ProxyPortal(
          statement,
          name,
          erasureFields(s.plan.call).map((f, i) => ({ ...f, format: formatOf(i) })),
          values,
          resultFormats,
          null,
        );
      default: {
        const read = verifyCallOf(s.text);
        if (read !== null) {
          // PostgreSQL says what the call resolves to (a simple query's statement is described here): the server answers
          // only cot_verify's own result.
          const described = statement.fields ?? (await this.backend.describe(s.text, statement.clientTypes)).fields?.map((f) => field(f, 0)) ?? null;
          const served = await servedVerify(read, described, this.services.ledgers, values, statement.paramTypes);
          if (served !== null) {
            const fields = (described ?? []).map((f, i) => ({ ...f, format: formatOf(i) }));
            return new ProxyPortal(statement, name, fields, values, resultFormats, null, served);
          }
        }
        const texts = searchTexts(s.tree, values);
        if (texts.length > 0) await this.services.search.prepare(texts);
        const fields = await this.backend.openPortal(name, s.text, statement.clientTypes, values, resultFormats, {
          executeAll: this.executeAhead(s, ahead),
          // relay() hands the session's sink DataRows as they came.
          takesFrames: true,
          ...(statement.parsed === null ? {} : { statement: statement.parsed }),
        });
        return new ProxyPortal(statement, name, fields?.map((f, i) => field(f, formatOf(i))) ?? null, values, resultFormats, null);
      }
    }
  }

  /**
   * Whether a relayed statement's Execute (and the exchange's Sync) may go
   * to the backend with its Bind, as the client sent them: for statements
   * that run to their end at once (never a COPY, which would take the Sync
   * for its data), and with a Sync only when nothing of cotwire's own must
   * reach the backend before it (appends to make, a refusal to fail the
   * block with, a reader's read-only default to restore).
   */
  private executeAhead(s: PgStatement, ahead: BindAhead | undefined): { readonly sync: boolean } | undefined {
    if (ahead === undefined || !RUN_WHOLE.has(Object.keys(s.tree)[0] ?? '')) return undefined;
    return { sync: ahead.sync && this.pending.length === 0 && !this.refusedInBlock && !this.exchangeFailed };
  }

  async relayBound(
    prepared: PreparedStatement,
    params: readonly (Buffer | null)[],
    paramFormats: readonly number[],
    resultFormats: readonly number[],
    describe: boolean,
    out: FrameSink,
  ): Promise<RelayedWhole> {
    const { statement: s, parsed } = prepared as ProxyStatement;
    if (s === null || parsed === null || !this.answeredWhole(s)) return NOT_RELAYED;
    return located(await this.backend.relayWhole({ kind: 'bound', statement: parsed, params, paramFormats, resultFormats, describe }, out), s);
  }

  async relayQuery(source: StatementSource, out: FrameSink): Promise<RelayedWhole> {
    const s = source as PgStatement;
    if (!this.answeredWhole(s)) return NOT_RELAYED;
    return located(await this.backend.relayWhole({ kind: 'query', sql: s.text }, out), s);
  }

  async relayParse(
    sql: string,
    paramTypes: readonly number[],
    bind: { readonly params: readonly (Buffer | null)[]; readonly paramFormats: readonly number[]; readonly resultFormats: readonly number[] },
    describe: boolean,
    out: FrameSink,
  ): Promise<RelayedWhole & { readonly statement?: PreparedStatement | null }> {
    const all = this.access.split(sql);
    const s = all[0];
    if (all.length !== 1 || s === undefined || !this.answeredWhole(s)) return NOT_RELAYED;
    this.access.admit(s);
    const whole = located(await this.backend.relayWhole({ kind: 'parsed', sql: s.text, types: paramTypes, ...bind, describe }, out), s);
    if (!whole.relayed) return NOT_RELAYED;
    const d = whole.described;
    return {
      relayed: true,
      error: whole.error,
      statement: d === undefined ? null : new ProxyStatement(s, d.paramTypes, d.fields?.map((f) => field(f, 0)) ?? null, paramTypes, d.statement),
    };
  }

  /**
   * Whether PostgreSQL's answer to a statement is the client's as it is,
   * with nothing of cotwire's before, among or after it: a statement relayed
   * as it came that runs to its end at once, outside a transaction block,
   * with no appends waiting and no refusal to fail a block with; that does
   * not change whether the session is read-only (set_config) and searches
   * nothing (cot_search's vectors are made before it runs). The backend
   * declines too unless it is idle.
   */
  private answeredWhole(s: PgStatement): boolean {
    if (s.plan.kind !== 'engine' || !RUN_WHOLE.has(Object.keys(s.tree)[0] ?? '')) return false;
    if (this.inBlock || this.pending.length > 0 || this.refusedInBlock || this.exchangeFailed) return false;
    return !touchesReadOnly(s) && !callsOf(s.tree).some((c) => c.name.toLowerCase() === 'cot_search') && verifyCallOf(s.text) === null;
  }

  async execute(p: Portal, maxRows: number, sink: ResultSink): Promise<ExecuteOutcome> {
    try {
      return await this.executePortal(p as ProxyPortal, maxRows, sink);
    } catch (err) {
      throw inString(err, (p as ProxyPortal).statement.statement);
    }
  }

  private async executePortal(portal: ProxyPortal, maxRows: number, sink: ResultSink): Promise<ExecuteOutcome> {
    const s = portal.statement.statement;
    if (s === null) return { done: true, tag: null };
    this.backend.onNotice = (n) => sink.notice(n);
    switch (s.plan.kind) {
      case 'append':
        return this.executeAppend(portal, s, sink);
      case 'create-ledger':
        return this.createLedger(s);
      case 'copy-ledger':
        return { done: 'copy-in', copy: await this.copyIntoLedger(s) };
      case 'transaction':
        return this.executeTransaction(portal, s.plan.op, s.plan.savepoint, maxRows, sink);
      case 'erasure': {
        // Text parameters arrive as strings; what is still bytes was sent in binary.
        const params = { values: portal.values, formats: [1], types: portal.statement.paramTypes };
        const who = { user: this.access.user, role: this.access.role, inBlock: this.inBlock };
        return { done: true, tag: await runErasure(s.plan.call, params, who, this.access, this.services.erasure, s.text, sink) };
      }
      default: {
        this.relayedInExchange++;
        if (portal.verify !== null) {
          portal.done = true;
          return { done: true, tag: await runVerify(this.backend, this.verifyReads, portal.verify, portal.resultFormats, sink) };
        }
        if (touchesReadOnly(s)) this.mayBeReadOnly = true;
        const outcome = await this.relay(portal, maxRows, sink);
        if (this.access.readOnly && resetsSettings(s)) {
          // RESET ALL and DISCARD ALL restored the defaults, a reader's read-only one among them.
          await this.backend.run('cotwire_read_only', "SELECT pg_catalog.set_config('default_transaction_read_only', 'on', false)", [], [], () => undefined);
        }
        return outcome;
      }
    }
  }

  /**
   * Closes the backend's portal with the next message the client sends that
   * reaches the backend: the session closes a simple query's portal as soon
   * as its COPY starts, when the backend reads nothing but copy data.
   */
  closePortal(p: Portal): void {
    const portal = p as ProxyPortal;
    // The server's own portals (appends, verifications) were never opened in the backend.
    if (portal.append === null && portal.verify === null) this.toClose.push(portal.name);
  }

  closeStatement(p: PreparedStatement): void {
    const { parsed } = p as ProxyStatement;
    if (parsed !== null) this.backend.closeStatement(parsed);
  }

  cursorPortal(): Portal | null {
    return null;
  }

  failTransaction(): void {
    this.exchangeFailed = true;
    if (this.inBlock) {
      this.blockFailed = true;
      this.refusedInBlock = true;
    }
  }

  takeParameterChanges(): ReadonlyArray<readonly [string, string]> {
    return this.backend.takeParameterChanges();
  }

  cancel(): void {
    this.holdWait?.abort(new PgError(SqlState.QueryCanceled, 'canceling statement due to user request'));
    this.backend.cancel();
  }

  async close(): Promise<void> {
    this.endBlock();
    await this.backend.close();
  }

  /** Rows from the backend to the client, a batch at a time, waiting for the client's socket between batches. */
  private async relay(portal: ProxyPortal, maxRows: number, sink: ResultSink): Promise<ExecuteOutcome> {
    const asSent = sink.rowFrame?.bind(sink);
    let left = maxRows;
    let sent = 0;
    for (;;) {
      const want = maxRows > 0 ? Math.min(left, BATCH_ROWS) : BATCH_ROWS;
      let got = 0;
      const outcome = await this.backend.fetch(
        portal.name,
        want,
        (cells) => {
          got++;
          sink.row(cells);
        },
        asSent === undefined
          ? undefined
          : (frame) => {
              got++;
              asSent(frame);
            },
      );
      sent += got;
      switch (outcome.kind) {
        case 'suspended':
          left -= got;
          if (maxRows > 0 && left <= 0) return { done: false };
          await sink.flushIfFull();
          continue;
        case 'complete':
          portal.done = true;
          // PostgreSQL counts a SELECT's rows per Execute; the client's one Execute was several here.
          return { done: true, tag: outcome.tag.startsWith('SELECT ') ? `SELECT ${sent}` : outcome.tag };
        case 'empty':
          return { done: true, tag: null };
        case 'copy-out': {
          sink.copyOutStart(outcome.columns);
          const tag = await this.backend.copyOut((data) => sink.copyData(data.toString('utf8')));
          sink.copyDone();
          return { done: true, tag };
        }
        case 'copy-in':
          return { done: 'copy-in', copy: this.copyIn(outcome.columns) };
      }
    }
  }

  private copyIn(columns: number): CopyIn {
    const backend = this.backend;
    return {
      columns,
      write: (data) => backend.copyInData(data),
      finish: () => backend.copyInDone(),
      abort: () => backend.copyInFail('COPY from stdin failed'),
    };
  }

  private async executeAppend(portal: ProxyPortal, s: PgStatement, sink: ResultSink): Promise<ExecuteOutcome> {
    const plan = portal.append as LedgerAppendPlan;
    portal.done = true;
    // Rows of plain values are converted here, with no round trip, when nothing the backend holds could refuse them:
    // outside a block, first in its exchange, in a session that never touched its read-only default, whose backend
    // is there (a session whose backend went ends at its next statement, as with PostgreSQL).
    const direct =
      this.inBlock || this.backend.inExchange || this.mayBeReadOnly || this.backend.broken !== null
        ? null
        : directRows(plan, portal.values, portal.statement.clientTypes, this.services.maxAppendBytes);
    const evaluated = direct ?? (await evaluateRows(this.backend, plan, portal.statement.paramTypes, portal.values, this.services.maxAppendBytes));
    const job = checkRows(this.access, plan, evaluated, s.text, this.services.maxContentBytes);
    await checkOwners(this.access, this.services.writer, plan.table, job.rows, s.text);
    await checkParents(plan, job.rows, this.services.query);
    const tag = `INSERT 0 ${job.rows.length}`;
    if (plan.pieces.returning === null) {
      // Outside a block it waits for the end of the exchange, inside one for COMMIT (sync, executeTransaction).
      await this.queueAppend(job);
      return { done: true, tag };
    }
    if (this.inBlock) {
      // What is known at INSERT is returned at once (ORMs ask for the key of what they add), as on DuckDB; the
      // chain columns need the rows chained now, which holds the append order until the block ends.
      const table = plan.table;
      if (returnsAnyOf(plan.pieces.returning, new Set([...table.serverColumns].filter((c) => c !== 'trace_id'))) !== null) {
        const [result] = await this.appendHeld(job);
        await sendReturning(this.backend, plan, result?.rows ?? [], portal.resultFormats, sink);
        return { done: true, tag };
      }
      const traceIds = table.serverColumns.has('trace_id') ? job.rows.map(() => uuidv7(Date.now())) : undefined;
      await this.queueAppend(traceIds === undefined ? job : { ...job, traceIds });
      const layout = rowLayout(table);
      const known = job.rows.map((clientRow, r) => {
        const texts = rowTexts(layout, clientRow);
        if (traceIds !== undefined && layout.traceId >= 0) texts[layout.traceId] = traceIds[r] ?? null;
        return texts;
      });
      await sendReturning(this.backend, plan, known, portal.resultFormats, sink);
      return { done: true, tag };
    }
    // RETURNING needs the chained rows now: the appends waiting before it go first, in order, with it.
    const jobs = [...this.pending, job];
    this.pending = [];
    const results = await this.cancellable((signal) => this.services.writer.append(jobs, signal));
    const result = results[results.length - 1];
    if (result?.rows !== undefined) await sendReturning(this.backend, plan, result.rows, portal.resultFormats, sink);
    return { done: true, tag };
  }

  /** A wait in the writer's queue that CancelRequest withdraws. */
  private async cancellable<T>(wait: (signal: AbortSignal) => Promise<T>): Promise<T> {
    const controller = new AbortController();
    this.holdWait = controller;
    try {
      return await wait(controller.signal);
    } finally {
      if (this.holdWait === controller) this.holdWait = null;
    }
  }

  /** An append waits for the exchange's end or the block's COMMIT; in a block that holds the append order, it is chained now. */
  private async queueAppend(job: AppendJob): Promise<void> {
    if (this.held === null) this.pending.push(job);
    else await this.appendHeld(job);
  }

  /** Chains the job now, in the block's hold of the append order (taken the first time, behind the appends queued before). */
  private async appendHeld(job: AppendJob): Promise<AppendResult[]> {
    if (this.held === null) {
      const wait = new AbortController();
      // The wait is cotwire's, not the backend's: it keeps the session's lock_timeout and statement_timeout itself.
      const timers: NodeJS.Timeout[] = [];
      await this.backend.run(
        'cotwire_timeouts',
        "SELECT (extract(epoch FROM pg_catalog.current_setting('lock_timeout')::interval) * 1000)::int8, (extract(epoch FROM pg_catalog.current_setting('statement_timeout')::interval) * 1000)::int8",
        [],
        [],
        ([lockMs, statementMs]) => {
          const after = (ms: string | null | undefined, err: PgError): void => {
            if (Number(ms) > 0) timers.push(setTimeout(() => wait.abort(err), Number(ms)));
          };
          after(lockMs, new PgError(SqlState.LockNotAvailable, 'canceling statement due to lock timeout'));
          after(statementMs, new PgError(SqlState.QueryCanceled, 'canceling statement due to statement timeout'));
        },
      );
      let hold: AppendHold;
      try {
        hold = await this.cancellable((signal) => {
          signal.addEventListener('abort', () => wait.abort(signal.reason), { once: true });
          return this.services.writer.hold(wait.signal);
        });
      } finally {
        for (const t of timers) clearTimeout(t);
      }
      this.held = { hold, results: [] };
      const earlier = this.pending;
      this.pending = [];
      if (earlier.length > 0) this.held.results.push(...(await hold.add(earlier)));
    }
    const results = await this.held.hold.add([job]);
    this.held.results.push(...results);
    return results;
  }

  /** COPY ... FROM STDIN into a ledger: the data is read whole, then its rows go the way of an INSERT's. */
  private async copyIntoLedger(s: PgStatement): Promise<CopyIn> {
    if (s.plan.kind !== 'copy-ledger') throw new PgError(SqlState.InternalError, 'not a ledger COPY');
    const copy = s.plan.copy;
    const table = await ledgerNamed(this.services.ledgers, s.plan.ledger);
    const columns = (copy.attlist as Array<{ String: { sval: string } }> | undefined)?.map((c) => c.String.sval) ?? null;
    const plan = copyPlan(table, columns);
    const chunks: Buffer[] = [];
    let bytes = 0;
    return {
      columns: plan.pieces.columns?.length ?? 0,
      write: async (data) => {
        bytes += data.length;
        if (bytes > this.services.maxAppendBytes) {
          throw new PgError(
            SqlState.OutOfMemory,
            `the rows of this COPY need more than ${this.services.maxAppendBytes} bytes of server memory (limits.maxAppendBytes)`,
          );
        }
        chunks.push(data);
      },
      finish: async () => {
        const values = copyRows(Buffer.concat(chunks).toString('utf8'), copy, plan.pieces.columns?.length ?? 0);
        const evaluated = await evaluateRows(
          this.backend,
          plan,
          values.map(() => 0),
          values,
          this.services.maxAppendBytes,
        );
        const job = checkRows(this.access, plan, evaluated, s.text, this.services.maxContentBytes);
        await checkOwners(this.access, this.services.writer, plan.table, job.rows, s.text);
        await checkParents(plan, job.rows, this.services.query);
        await this.queueAppend(job);
        return `COPY ${job.rows.length}`;
      },
      abort: async () => {
        chunks.length = 0;
      },
    };
  }

  /**
   * CREATE TABLE of a ledger: outside a block the server creates it at once.
   * Inside one it is checked now and created at COMMIT, before the block's
   * appends and its own COMMIT; ROLLBACK (or one to an earlier savepoint)
   * drops it. Until then it cannot take appends (55000), as on DuckDB.
   */
  private async createLedger(s: PgStatement): Promise<ExecuteOutcome> {
    if (s.plan.kind !== 'create-ledger') throw new PgError(SqlState.InternalError, 'not a ledger');
    if (this.inBlock) {
      if (this.blockFailed)
        throw new PgError(SqlState.InFailedSqlTransaction, 'current transaction is aborted, commands ignored until end of transaction block');
      const { name, exists } = await this.services.ledgerDdl.check(s.plan.create);
      if (this.pendingLedgers.some((p) => p.name === name)) throw new PgError(SqlState.DuplicateTable, `relation "${name}" already exists`);
      if (!exists) this.pendingLedgers.push({ name, create: s.plan.create });
      return { done: true, tag: 'CREATE TABLE' };
    }
    await this.services.ledgerDdl.create(s.plan.create);
    return { done: true, tag: 'CREATE TABLE' };
  }

  /** An append to a ledger this block created: it is not there until COMMIT. */
  private refuseAppendToPendingLedger(s: PgStatement): void {
    if (s.plan.kind !== 'append' || this.pendingLedgers.length === 0) return;
    const name = (s.plan.ledger.at(-1) ?? '').toLowerCase();
    if (this.pendingLedgers.some((p) => p.name.toLowerCase() === name)) {
      throw new PgError(
        SqlState.ObjectNotInPrerequisiteState,
        `cannot append to ledger "${name}": it was created in this transaction block, and is made at COMMIT`,
        {
          hint: 'COMMIT first, then append.',
        },
      );
    }
  }

  private async executeTransaction(portal: ProxyPortal, op: string, savepoint: string | null, maxRows: number, sink: ResultSink): Promise<ExecuteOutcome> {
    let appended: AppendResult[] | null = null;
    if ((op === 'commit' || op === 'prepare') && this.inBlock && !this.blockFailed) {
      const ledgers = this.pendingLedgers;
      const jobs = this.pending;
      const held = this.held;
      this.pendingLedgers = [];
      this.pending = [];
      this.held = null;
      try {
        // The block's ledgers first, then its appends: nothing of the transaction may commit without them.
        for (const l of ledgers) await this.services.ledgerDdl.create(l.create);
        if (held !== null) {
          await held.hold.commit();
          appended = held.results;
        } else if (jobs.length > 0) appended = await this.services.writer.append(jobs);
      } catch (err) {
        await this.backend.closePortal(portal.name);
        await this.backend.openPortal(`${portal.name}_rollback`, 'ROLLBACK', [], [], []);
        await this.backend.fetch(`${portal.name}_rollback`, 0, () => undefined);
        this.endBlock();
        throw err;
      }
    }
    if (op === 'rollback_to') {
      try {
        this.rollbackHeld(savepoint);
      } catch (err) {
        await this.backend.closePortal(portal.name);
        throw err;
      }
    }
    let outcome: ExecuteOutcome;
    try {
      outcome = await this.relay(portal, maxRows, sink);
    } catch (err) {
      // The appends are durable and the backend went before its COMMIT answered: neither done nor undone, as a whole.
      if (appended !== null && isConnectionLoss(err)) throw committedAppendsOnly(appended, err);
      throw err;
    }
    switch (op) {
      case 'begin':
        this.inBlock = true;
        this.blockFailed = false;
        break;
      case 'commit':
      case 'rollback':
      case 'prepare':
        this.endBlock();
        break;
      case 'savepoint':
        if (savepoint !== null) this.savepoints.push({ name: savepoint, at: this.appendsInBlock(), ledgers: this.pendingLedgers.length });
        break;
      case 'release': {
        const i = this.savepoints.findLastIndex((p) => p.name === savepoint);
        if (i >= 0) this.savepoints.length = i;
        break;
      }
      case 'rollback_to': {
        const i = this.savepoints.findLastIndex((p) => p.name === savepoint);
        if (i >= 0) {
          this.pending.length = Math.max(0, (this.savepoints[i] as { at: number }).at - (this.held?.results.length ?? 0));
          this.pendingLedgers.length = (this.savepoints[i] as { ledgers: number }).ledgers;
          this.savepoints.length = i + 1;
        }
        this.blockFailed = false;
        break;
      }
    }
    return outcome;
  }

  /** The block's appends so far: those chained in its hold of the append order, then those waiting for COMMIT. */
  private appendsInBlock(): number {
    return (this.held?.results.length ?? 0) + this.pending.length;
  }

  /**
   * ROLLBACK TO a savepoint before rows chained in the block's hold: all of
   * them go with the hold when none was chained before the savepoint;
   * otherwise the kept rows' numbers would change after they were returned,
   * so it is refused (before the backend rolls back).
   */
  private rollbackHeld(savepoint: string | null): void {
    const i = this.savepoints.findLastIndex((p) => p.name === savepoint);
    const held = this.held;
    if (i < 0 || held === null) return;
    const at = (this.savepoints[i] as { at: number }).at;
    if (at >= held.results.length) return;
    if (at === 0) {
      held.hold.release();
      this.held = null;
      return;
    }
    throw new PgError(
      SqlState.FeatureNotSupported,
      `cannot roll back to savepoint "${savepoint}": ledger rows chained since it were returned with their chain columns`,
      {
        hint: 'Rows an INSERT returned step_index, current_hash or ledger_seq for keep their place until the transaction ends. Roll back the whole transaction.',
      },
    );
  }

  private endBlock(): void {
    this.inBlock = false;
    this.blockFailed = false;
    this.held?.hold.release();
    this.held = null;
    this.pending = [];
    this.pendingLedgers = [];
    this.savepoints = [];
  }
}

/**
 * A block whose appends the writer committed and whose backend went before
 * its own COMMIT answered: the client learns exactly that (08007), since
 * the appends stay and whatever else the block did may not have.
 */
function committedAppendsOnly(appended: readonly AppendResult[], err: unknown): PgError {
  const rows = appended.reduce((n, r) => n + r.count, 0);
  const seqs = appended.filter((r) => r.count > 0).map((r) => (r.firstSeq === r.lastSeq ? `${r.firstSeq}` : `${r.firstSeq}..${r.lastSeq}`));
  return new PgError(
    SqlState.TransactionResolutionUnknown,
    `the connection to the PostgreSQL engine broke at COMMIT: the block's ${rows} ledger appends were committed (ledger_seq ${seqs.join(', ')}), and whether the rest of it was is unknown`,
    { detail: (err as Error).message },
    'FATAL',
  );
}

/**
 * The texts a statement searches for with cot_search(): each call's query,
 * a constant or a parameter (through casts, by position or named `query`).
 * A query computed in the statement has no vector, and cot_search() says so.
 */
function searchTexts(tree: Record<string, unknown>, values: readonly BindValue[]): string[] {
  const calls = callsOf(tree).filter((c) => c.name.toLowerCase() === 'cot_search');
  if (calls.length === 0) return [];
  const out: string[] = [];
  for (const call of calls) {
    const named = call.args.find((a) => (a as { NamedArgExpr?: { name?: string } }).NamedArgExpr?.name === 'query');
    let arg: unknown = named === undefined ? call.args[0] : (named as { NamedArgExpr: { arg: unknown } }).NamedArgExpr.arg;
    while ((arg as { TypeCast?: { arg: unknown } } | undefined)?.TypeCast !== undefined) arg = (arg as { TypeCast: { arg: unknown } }).TypeCast.arg;
    const constant = (arg as { A_Const?: { sval?: { sval?: string } } } | undefined)?.A_Const?.sval;
    const param = (arg as { ParamRef?: { number?: number } } | undefined)?.ParamRef?.number;
    if (constant !== undefined) out.push(constant.sval ?? '');
    else if (param !== undefined) {
      const v = values[param - 1];
      if (typeof v === 'string') out.push(v);
      else if (v instanceof Uint8Array) out.push(Buffer.from(v).toString('utf8'));
    }
  }
  return out;
}

/** Statements whose Execute runs them to the end with no more from the client: their Execute may go ahead. */
const RUN_WHOLE = new Set(['SelectStmt', 'InsertStmt', 'UpdateStmt', 'DeleteStmt', 'MergeStmt', 'VariableShowStmt', 'ExplainStmt']);

/** A statement that may change whether the session's transactions are read-only: a SET of it, or any set_config(). */
function touchesReadOnly(s: PgStatement): boolean {
  const set = (s.tree as { VariableSetStmt?: { name?: string } }).VariableSetStmt;
  if (set !== undefined && /read_only|characteristics|^transaction$|^role$|session_authorization/i.test(set.name ?? '')) return true;
  return callsOf(s.tree).some((c) => c.name.toLowerCase() === 'set_config');
}

/**
 * A statement's function calls, found once per parsed statement: the guard
 * keeps a text's statements, so a statement run again is not walked again.
 */
const callsByTree = new WeakMap<object, readonly FunctionCall[]>();
function callsOf(tree: Record<string, unknown>): readonly FunctionCall[] {
  let calls = callsByTree.get(tree);
  if (calls === undefined) {
    calls = callsIn({ stmts: [tree], raw: tree }) ?? [];
    callsByTree.set(tree, calls);
  }
  return calls;
}

/** RESET ALL, or DISCARD ALL: the session's settings go back to their defaults. */
function resetsSettings(s: PgStatement): boolean {
  const set = (s.tree as { VariableSetStmt?: { kind?: string } }).VariableSetStmt;
  const discard = (s.tree as { DiscardStmt?: { target?: string } }).DiscardStmt;
  return set?.kind === 'VAR_RESET_ALL' || discard?.target === 'DISCARD_ALL';
}

/** A relayed exchange's error, placed in the client's string as inString places it. */
function located(whole: WholeOutcome, s: PgStatement): WholeOutcome {
  return whole.relayed && whole.error !== null ? { ...whole, error: inString(whole.error, s) as PgError } : whole;
}

/** PostgreSQL saw one statement of the client's string: its error position counts from the string's start. */
function inString(err: unknown, statement: PgStatement | null): unknown {
  if (!(err instanceof PgError) || err.position === undefined || statement === null || statement.offset === 0) return err;
  const moved = new PgError(
    err.code,
    err.message,
    {
      ...(err.detail === undefined ? {} : { detail: err.detail }),
      ...(err.hint === undefined ? {} : { hint: err.hint }),
      ...(err.schema === undefined ? {} : { schema: err.schema }),
      ...(err.table === undefined ? {} : { table: err.table }),
      ...(err.column === undefined ? {} : { column: err.column }),
      ...(err.constraint === undefined ? {} : { constraint: err.constraint }),
      position: err.position + statement.offset,
    },
    err.severity,
  );
  return moved;
}

function field(
  f: { name: string; tableID: number; columnID: number; dataTypeID: number; dataTypeSize: number; dataTypeModifier: number },
  format: 0 | 1,
): FieldDescription {
  return {
    name: f.name,
    tableOid: f.tableID,
    columnAttr: f.columnID,
    typeOid: f.dataTypeID,
    typeSize: f.dataTypeSize,
    typeModifier: f.dataTypeModifier,
    format,
  };
}
