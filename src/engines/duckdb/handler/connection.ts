import { CATALOG_READERS, connectionSetup } from '../catalog/compat.js';
import { CatalogMode } from './catalog-mode.js';
import { executeErasure } from './erasure.js';
import type { EngineConnection } from '../../../engine/port.js';
import { PgError } from '../../../errors/pg-error.js';
import { SqlState } from '../../../errors/sqlstate.js';
import type { TransactionStatus } from '../../../protocol/codes.js';
import type { ConnectionHandler, ExecuteOutcome, Portal, PreparedStatement, ResultSink, SessionInfo, StatementSource } from '../../../session/handler-port.js';
import { splitStatements, tokenize, type StatementText } from '../../../sql/lexer.js';
import { AccessControl } from './access.js';
import { recognizeCommand } from './commands.js';
import { appendsVisible, type ConnectionServices, type HandlerContext, type StatementHost } from './context.js';
import { copyIn, copyOut } from './copy.js';
import { Cursors } from './cursors.js';
import { EngineCalls } from './engine-calls.js';
import { EngineRun } from './engine-run.js';
import { LedgerAppends } from './ledger-append.js';
import { admit, bindEngine, clientError, ConnectionPortal, PlanCache, planKind, type Statement, waitsForAppends } from './plan.js';
import { Planner } from './planner.js';
import { applySearchPath, runCommand, SessionFunctions } from './session-commands.js';
import { SessionSettings } from './settings.js';
import { TransactionState } from './transaction.js';

const TRANSACTION_COMMANDS = new Set(['begin', 'commit', 'rollback', 'savepoint', 'release', 'rollback-to']);

/**
 * One client connection's "do" side, behind the session's port. A statement
 * goes through the same stages whichever protocol brought it: the planner
 * decides what it is and whether this session may run it (planner.ts, which
 * asks access.ts), the transaction admits it, and its plan's kind picks the
 * module that runs it: the engine (engine-run.ts), the ledger writer (ledger-append.ts),
 * COPY (copy.ts) or the handler itself (session-commands.ts, cursors.ts). The
 * transaction is one object (transaction.ts).
 */
export class ConnectionHandlerImpl implements ConnectionHandler, StatementHost {
  readonly settings = new SessionSettings(new Map());
  private readonly ctx: HandlerContext;
  private readonly tx: TransactionState;
  private readonly run: EngineRun;
  private readonly appends: LedgerAppends;
  private readonly planner: Planner;
  private readonly cursors: Cursors;
  /** What SQL functions reach of the session (backends.ts). */
  private readonly functions: SessionFunctions;
  private readonly plans: PlanCache;

  private constructor(
    engine: EngineConnection,
    readonly info: SessionInfo,
    private readonly services: ConnectionServices,
  ) {
    const access = new AccessControl(services, info, engine, () => this.settings.get('application_name') ?? '');
    const catalog = new CatalogMode(services.catalogSnapshot, () => this.tx, CATALOG_READERS, info.identity['org_id'] !== undefined);
    const ended = (changed: boolean): void => this.transactionEnded(changed);
    this.tx = new TransactionState(engine, services.writer, this.settings, info.role === 'reader', ended, catalog);
    const calls = new EngineCalls(engine, services.engineSlots, () => this.settings.statementTimeoutMs, info.user);
    this.ctx = { engine, info, services, settings: this.settings, access, tx: this.tx, calls, tempFunctions: new Map(), catalog };
    this.run = new EngineRun(this.ctx);
    this.appends = new LedgerAppends(this.ctx);
    this.planner = new Planner(this.ctx, this.appends, this, (name) => this.cursors.fields(name));
    this.cursors = new Cursors(this.ctx, this.planner, this, this.run);
    this.functions = new SessionFunctions(this.ctx);
    this.plans = new PlanCache(this.ctx, (statement) => this.closeStatement(statement));
  }

  static async open(engine: EngineConnection, info: SessionInfo, engineVersion: string, services: ConnectionServices): Promise<ConnectionHandlerImpl> {
    const handler = new ConnectionHandlerImpl(engine, info, services);
    try {
      handler.settings.applyStartup(info.startupParameters);
    } catch (err) {
      engine.close();
      if (err instanceof PgError) throw new PgError(err.code, err.message, { hint: err.hint ?? '' }, 'FATAL');
      throw err;
    }
    if (services.statementTimeoutMs > 0 && !info.startupParameters.has('statement_timeout')) {
      handler.settings.set('statement_timeout', `${services.statementTimeoutMs}ms`);
    }
    if (services.idleInTransactionTimeoutMs > 0 && !info.startupParameters.has('idle_in_transaction_session_timeout')) {
      handler.settings.set('idle_in_transaction_session_timeout', `${services.idleInTransactionTimeoutMs}ms`);
    }
    handler.settings.forceSet('session_authorization', info.user);
    handler.settings.takeChanges();
    const advisory = { id: info.processId, secret: services.advisoryLocks.register(info.processId) };
    const backend = services.backends.register(info.processId, handler.functions.hooks());
    try {
      const session = { ...advisory, backend };
      const { agent_id: agent, org_id: org } = info.identity;
      await engine.run(connectionSetup(engineVersion, info.user, info.database, info.role, agent ?? null, session, org ?? null).join(';\n'));
      if (handler.settings.get('search_path') !== '"$user", public') await applySearchPath(handler.ctx);
    } catch (err) {
      services.backends.end(info.processId);
      throw err;
    }
    return handler;
  }

  get reportedParameters(): ReadonlyArray<readonly [string, string]> {
    return this.settings.reported();
  }

  transactionStatus(): TransactionStatus {
    return this.tx.status;
  }

  idleInTransactionTimeoutMs(): number {
    return this.settings.idleInTransactionTimeoutMs;
  }

  takeParameterChanges(): ReadonlyArray<readonly [string, string]> {
    return this.settings.takeChanges();
  }

  splitQuery(sql: string): readonly StatementSource[] {
    return splitStatements(sql);
  }

  async beginQueryString(statements: readonly StatementSource[]): Promise<void> {
    if (this.tx.status !== 'I' || statements.length < 2) return;
    // PostgreSQL runs a multi-statement string as one transaction unless it controls transactions itself.
    const controls = statements.some((s) => {
      const cmd = recognizeCommand((s as StatementText).tokens ?? tokenize(s.text));
      return cmd !== null && TRANSACTION_COMMANDS.has(cmd.kind);
    });
    if (controls) return;
    // The transaction's snapshot must include every acknowledged append.
    await appendsVisible(this.ctx);
    await this.tx.beginImplicit();
  }

  async endQueryString(succeeded: boolean): Promise<void> {
    await this.tx.endImplicit(succeeded);
  }

  async prepare(source: string | StatementSource, paramTypes: readonly number[], named = false): Promise<PreparedStatement> {
    // A named statement is bound many times already; an unnamed one is planned again for each Parse unless kept.
    const { key, kept } = named ? { key: null, kept: undefined } : this.plans.find(source, paramTypes);
    // As the planner does for any statement it plans: a failed transaction takes no more.
    if (kept !== undefined) this.tx.checkNotFailed();
    const statement = kept ?? (await this.planner.prepare(source, paramTypes));
    if (kept === undefined) this.plans.keep(key, statement);
    this.functions.prepared(statement, typeof source === 'string' ? source : source.text);
    return statement;
  }

  async bind(
    prepared: PreparedStatement,
    params: readonly (Buffer | null)[],
    paramFormats: readonly number[],
    resultFormats: readonly number[],
  ): Promise<Portal> {
    const statement = prepared as Statement;
    const columns = statement.fields?.length ?? 0;
    if (resultFormats.length > 1 && resultFormats.length !== columns) {
      throw new PgError(SqlState.ProtocolViolation, `bind message has ${resultFormats.length} result formats but query has ${columns} columns`);
    }
    const formats: (0 | 1)[] = [];
    for (let i = 0; i < columns; i++) {
      // No formats given: the statement's own (text, or a BINARY cursor's binary for its FETCH).
      const f = resultFormats.length === 0 ? (statement.fields?.[i]?.format ?? 0) : (resultFormats[resultFormats.length === 1 ? 0 : i] as number);
      if (f !== 0 && f !== 1) throw new PgError(SqlState.ProtocolViolation, `unsupported format code: ${f}`);
      formats.push(f);
    }
    const fields = statement.fields?.map((f, i) => ({ ...f, format: formats[i] as 0 | 1 })) ?? null;
    const portal = new ConnectionPortal(statement, fields, params, paramFormats, formats);
    if (statement.plan.kind === 'engine') bindEngine(portal, statement.plan.statement);
    statement.portals++;
    return portal;
  }

  async bindPortal(statement: Statement, resultFormats: readonly number[]): Promise<ConnectionPortal> {
    return (await this.bind(statement, [], [], resultFormats)) as ConnectionPortal;
  }

  async execute(p: Portal, maxRows: number, sink: ResultSink): Promise<ExecuteOutcome> {
    const portal = p as ConnectionPortal;
    const kind = planKind(portal.statement.plan);
    this.functions.started(portal.statement);
    // The statement starts (statement_timestamp()), before any transaction of its own; a resumed portal's has.
    if (portal.cursor === null) this.services.backends.statementStarted(this.ctx.info.processId);
    try {
      // Waits for appends: a ledger INSERT only when it reads (ledger-insert.ts), a cached read only if it goes to the engine (steps-reads.ts).
      const { plan } = portal.statement;
      if (waitsForAppends(plan, this.ctx)) await appendsVisible(this.ctx);
      admit(portal.statement, this.tx);
      // What runs on the engine in autocommit may need a read-only transaction of its own (transaction.ts).
      const engineBound = portal.statement.plan.kind === 'engine' || portal.statement.plan.kind === 'copy-out';
      if (engineBound) await this.tx.beginStatement(portal);
      let outcome: ExecuteOutcome;
      try {
        outcome = await this.dispatch(portal, maxRows, sink);
      } catch (err) {
        if (engineBound) await this.tx.endStatement(portal, false).catch(() => undefined);
        await this.functions.settle().catch(() => undefined);
        throw err;
      }
      if (engineBound && outcome.done === true) await this.tx.endStatement(portal, true);
      if (outcome.done === true) await this.functions.settle().then(() => this.services.observer.statement(kind, true));
      return outcome;
    } catch (err) {
      this.services.observer.statement(kind, false);
      throw err;
    } finally {
      this.functions.ended();
    }
  }

  private async dispatch(portal: ConnectionPortal, maxRows: number, sink: ResultSink): Promise<ExecuteOutcome> {
    const { plan } = portal.statement;
    switch (plan.kind) {
      case 'empty':
        return { done: true, tag: null };
      case 'command': {
        const tag = await runCommand(this.ctx, this.cursors, plan.command, sink, portal.formats);
        const cmd = plan.command;
        if (cmd.kind === 'deallocate') return { done: true, tag, deallocate: { name: cmd.name } };
        if (cmd.kind === 'discard' && cmd.what === 'ALL') return { done: true, tag, deallocate: { name: null } };
        return { done: true, tag };
      }
      case 'engine':
        return this.run.execute(portal, plan, maxRows, sink);
      case 'copy-in':
        this.tx.checkNotFailed();
        return { done: 'copy-in', copy: await copyIn(this.ctx, this.appends, plan.copy) };
      case 'copy-out':
        this.tx.checkNotFailed();
        return { done: true, tag: await copyOut(this, this.run, plan, sink) };
      case 'erasure':
        this.tx.checkNotFailed();
        return executeErasure(this.ctx, portal, plan.call, plan.text, sink);
      case 'ledger-insert':
        this.tx.checkNotFailed();
        try {
          return await this.appends.execute(portal, plan.insert, sink);
        } catch (err) {
          throw clientError(err, plan.offset, plan.clientPosition);
        }
    }
  }

  failTransaction(): void {
    this.tx.fail();
  }

  cursorPortal(name: string): Portal | null {
    return this.cursors.portal(name);
  }

  closePortal(p: Portal): void {
    const portal = p as ConnectionPortal;
    portal.cursor?.close();
    portal.cursor = null;
    this.tx.statementClosed(portal);
    const statement = portal.statement;
    if (statement.boundBy === portal) statement.boundBy = null;
    statement.portals--;
    if (statement.closed && statement.portals === 0) this.destroy(statement);
  }

  closeStatement(p: PreparedStatement): void {
    const statement = p as Statement;
    // A kept plan stays open for the next Parse of its text.
    if (!this.plans.released(statement)) return;
    statement.closed = true;
    if (statement.portals === 0) this.destroy(statement);
  }

  private destroy(statement: Statement): void {
    if (statement.plan.kind === 'engine') statement.plan.statement.close();
    if (statement.plan.kind === 'copy-out') this.closeStatement(statement.plan.query);
  }

  cancel(): void {
    this.run.cancel();
  }

  async close(): Promise<void> {
    this.plans.clear();
    await this.run.stop();
    this.appends.close();
    this.ctx.tx.close();
    this.services.advisoryLocks.endSession(this.ctx.info.processId);
    this.services.foreignKeys.transactionEnded(this.ctx.info.processId);
    this.services.backends.end(this.ctx.info.processId);
  }

  /** Every cursor closes; a ledger created in the block appears (COMMIT) or disappears (ROLLBACK) for other connections. */
  private transactionEnded(catalogChanged: boolean): void {
    this.services.advisoryLocks.releaseTransaction(this.ctx.info.processId);
    this.services.foreignKeys.transactionEnded(this.ctx.info.processId);
    this.cursors.closeAll();
    if (catalogChanged) this.services.ledgers.invalidate();
  }
}
