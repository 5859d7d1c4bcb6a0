import { COMPAT_CATALOG, connectionSetup, type TargetColumns } from '../catalog/compat.js';
import type { EngineConnection, EngineStatement } from '../engine/port.js';
import { PgError } from '../errors/pg-error.js';
import { SqlState } from '../errors/sqlstate.js';
import type { TransactionStatus } from '../protocol/codes.js';
import type { FieldDescription } from '../protocol/messages.js';
import { TypeOid } from '../protocol/type-oids.js';
import type {
  ConnectionHandler,
  ExecuteOutcome,
  Portal,
  PreparedStatement,
  ResultSink,
  SessionInfo,
  StatementSource,
} from '../session/handler-port.js';
import { hasComputedNames, postgresColumnNames } from '../sql/column-names.js';
import { lexStatement, splitStatements, tokenize, type StatementText, type Token } from '../sql/lexer.js';
import { quoteIdent } from '../ledger/schema.js';
import { stepsReadMacros, verifyMacros } from '../ledger/verify-sql.js';
import { ANALYTICS_MACROS } from '../ledger/analytics-sql.js';
import { PROOF_MACROS } from '../ledger/proof-sql.js';
import { CHECKPOINTS_TABLE } from '../ledger/checkpoint-schema.js';
import { parseCopyFromStdin, parseCopyToStdout, type CopyToStdout } from '../sql/copy.js';
import { AccessControl } from './access.js';
import { recognizeCommand, type SessionCommand } from './commands.js';
import { appendsVisible, type ConnectionServices, type HandlerContext, type StatementHost } from './context.js';
import { copyIn, copyOut } from './copy.js';
import { EngineRun } from './engine-run.js';
import { LedgerAppends } from './ledger-append.js';
import { ledgerCreated } from './ledger-create.js';
import { bindEngine, clientError, ConnectionPortal, planKind, READ_KINDS, SAME_POSITION, Statement, writeOperation, type EngineText } from './plan.js';
import { isKnownSetting, SessionSettings } from './settings.js';
import { TransactionState } from './transaction.js';

/** Rewritten statements that read the connection's settings through the catalog. */
const READS_SETTINGS = /\.(pg_settings|current_setting)\b/;

const TRANSACTION_COMMANDS = new Set(['begin', 'commit', 'rollback', 'savepoint', 'release', 'rollback-to']);

const textField = (name: string): FieldDescription => ({
  name,
  tableOid: 0,
  columnAttr: 0,
  typeOid: TypeOid.text,
  typeSize: -1,
  typeModifier: -1,
  format: 0,
});

/** PostgreSQL's names for computed columns, when DuckDB's differ. */
function pgNames(sql: string, engineNames: readonly string[]): readonly (string | null)[] | null {
  return hasComputedNames(engineNames) ? postgresColumnNames(sql, engineNames.length) : null;
}


/**
 * One client connection's "do" side: it answers session commands itself,
 * sends everything else to its own engine connection, and keeps PostgreSQL's
 * transaction states (including the failed state, which DuckDB lacks).
 */
export class ConnectionHandlerImpl implements ConnectionHandler, StatementHost {
  private readonly tx: TransactionState;
  private readonly run: EngineRun;
  private readonly appends: LedgerAppends;
  private readonly ctx: HandlerContext;
  readonly settings: SessionSettings;

  /** Every access decision, and the record of every refusal. */
  private readonly access: AccessControl;

  private constructor(
    private readonly engine: EngineConnection,
    readonly info: SessionInfo,
    private readonly services: ConnectionServices,
  ) {
    this.settings = new SessionSettings(new Map());
    this.access = new AccessControl(services, info, engine, () => this.settings.get('application_name') ?? '');
    this.tx = new TransactionState(engine, services.writer, this.settings, info.role === 'reader', (changed) => this.transactionEnded(changed));
    this.ctx = { engine, info, services, settings: this.settings, access: this.access, tx: this.tx };
    this.run = new EngineRun(this.ctx);
    this.appends = new LedgerAppends(this.ctx);
  }

  static async open(
    engine: EngineConnection,
    info: SessionInfo,
    engineVersion: string,
    services: ConnectionServices,
  ): Promise<ConnectionHandlerImpl> {
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
    handler.settings.forceSet('session_authorization', info.user);
    handler.settings.takeChanges();
    await engine.run(connectionSetup(engineVersion, info.user, info.database, info.role, info.identity['agent_id'] ?? null).join(';\n'));
    await handler.defineLedgerMacros();
    if (handler.settings.get('search_path') !== '"$user", public') await handler.applySearchPath();
    return handler;
  }

  get reportedParameters(): ReadonlyArray<readonly [string, string]> {
    return this.settings.reported();
  }

  transactionStatus(): TransactionStatus {
    return this.tx.status;
  }

  takeParameterChanges(): ReadonlyArray<readonly [string, string]> {
    return this.settings.takeChanges();
  }

  splitQuery(sql: string): readonly StatementSource[] {
    return splitStatements(sql);
  }

  async beginQueryString(statements: readonly StatementSource[]): Promise<void> {
    if (this.tx.status !== 'I' || statements.length < 2) return;
    // PostgreSQL runs a multi-statement string as one transaction unless it
    // controls transactions itself.
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

  /** The SQL verification and reading macros, for the ledgers that exist now. */
  async defineLedgerMacros(): Promise<void> {
    this.macrosVersion = this.services.ledgers.version;
    const statements: string[] = [];
    const ledgers = await this.services.ledgers.all();
    for (const t of ledgers) statements.push(...verifyMacros(t));
    const steps = ledgers.find((t) => t.isSteps);
    if (steps !== undefined) statements.push(...stepsReadMacros(steps), ...ANALYTICS_MACROS);
    if (steps !== undefined && ledgers.some((t) => t.schema === 'main' && t.name === CHECKPOINTS_TABLE)) statements.push(...PROOF_MACROS);
    if (statements.length > 0) await this.engine.run(statements.join(';\n'));
  }

  async prepare(source: string | StatementSource, paramTypes: readonly number[]): Promise<PreparedStatement> {
    let statement: EngineText;
    if (typeof source === 'string') {
      const parts = splitStatements(source);
      if (parts.length > 1) {
        throw new PgError(SqlState.SyntaxError, 'cannot insert multiple commands into a prepared statement');
      }
      if (parts.length === 0) return new Statement({ kind: 'empty' }, paramTypes, null);
      statement = parts[0] as StatementText;
    } else {
      statement = source as StatementText;
    }
    const command = recognizeCommand(statement.tokens, statement.text);
    if (command !== null) {
      const fields =
        command.kind === 'show'
          ? command.name === 'all'
            ? ['name', 'setting', 'description'].map(textField)
            : [textField(this.settings.canonicalName(command.name))]
          : command.kind === 'fetch' && !command.move
            ? this.openCursor(command.name).portal.fields
            : null;
      return new Statement({ kind: 'command', command }, [], fields);
    }
    this.tx.checkNotFailed();
    const clientText = statement.text;
    statement = await this.forEngine(statement);
    if (statement.text !== clientText && READS_SETTINGS.test(statement.text)) await this.publishSettings();
    const copy = parseCopyFromStdin(statement.text, statement.tokens);
    if (copy !== null) return new Statement({ kind: 'copy-in', copy, offset: statement.offset }, [], null);
    const copyOut = parseCopyToStdout(statement.text, statement.tokens);
    if (copyOut !== null) return this.prepareCopyOut(statement, copyOut);
    await this.refreshLedgerMacros(statement.tokens);
    const ledgerInsert = await this.appends.prepare(statement, paramTypes);
    if (ledgerInsert !== null) return ledgerInsert;
    let engineStatement: EngineStatement;
    try {
      this.access.beforePrepare(statement.text, statement.tokens);
      engineStatement = await this.engine.prepare(statement.text, paramTypes);
    } catch (err) {
      // A statement that would be refused is refused as such, even when it does not bind either:
      // the client learns the rule, and the attempt is recorded.
      throw this.access.unprepared(err, statement.text, statement.tokens) ?? clientError(err, statement.offset, statement.clientPosition);
    }
    // The statement that the guard classifies is the one that runs: it is
    // already prepared, and only this object is ever executed.
    try {
      await this.access.engineStatement(statement.text, statement.tokens, engineStatement.kind);
    } catch (err) {
      engineStatement.close();
      throw err;
    }
    const columns = engineStatement.columns;
    const names = columns === null ? null : pgNames(clientText, columns.map((c) => c.name));
    const fields =
      columns?.map((c, i) => ({
        name: names?.[i] ?? c.name,
        tableOid: 0,
        columnAttr: 0,
        typeOid: c.typeOid,
        typeSize: c.typeSize,
        typeModifier: c.typeModifier,
        format: 0 as const,
      })) ?? null;
    const types = [...engineStatement.paramTypes];
    for (let i = types.length; i < paramTypes.length; i++) types.push(paramTypes[i] as number);
    return new Statement(
      {
        kind: 'engine',
        statement: engineStatement,
        tokens: statement.tokens,
        offset: statement.offset,
        clientPosition: statement.clientPosition ?? SAME_POSITION,
        createsLedger: engineStatement.kind === 'CREATE' ? ledgerCreated(this.access, statement.tokens) : null,
      },
      types,
      fields,
    );
  }

  /**
   * The statement with PostgreSQL-only syntax rewritten for the engine
   * (catalog/rewrite.ts). Everything after this point, the guard included,
   * sees the rewritten text, so what is checked is what runs.
   */
  private async forEngine(statement: StatementText): Promise<EngineText> {
    this.access.reservedNames(statement.text, statement.tokens);
    const rewriter = this.services.rewriter;
    const target = rewriter.insertTarget(statement.text, statement.tokens);
    const columns = target === null ? null : await this.tableColumns(target.schema, target.table);
    const rewritten = rewriter.rewriteMapped(statement.text, statement.tokens, columns);
    if (rewritten.text === statement.text) return statement;
    const scanned = lexStatement(rewritten.text);
    return { text: scanned.text, tokens: scanned.tokens, offset: statement.offset, clientPosition: (p) => rewritten.clientPosition(p) };
  }

  /** A table's columns in order, and which hold lists; the connection's temporary table first, as name lookup does. */
  private async tableColumns(schema: string | null, table: string): Promise<TargetColumns | null> {
    const rows = await this.engine.query(
      `SELECT database_name, schema_name, column_name, data_type FROM system.main.duckdb_columns()
       WHERE lower(table_name) = lower($1) AND ($2 IS NULL OR lower(schema_name) = lower($2)) AND database_name NOT IN ('system', '${COMPAT_CATALOG}')
       ORDER BY database_name <> 'temp', schema_name <> 'main', database_name, schema_name, column_index`,
      [table, schema],
    );
    const first = rows[0];
    if (first === undefined) return null;
    return rows
      .filter((r) => r[0] === first[0] && r[1] === first[1])
      .map((r) => ({ name: String(r[2]), list: String(r[3]).endsWith(']') }));
  }

  private publishedSettings = '';
  /**
   * The catalog's pg_settings and current_setting() read the connection's
   * PostgreSQL settings, which live here, from an engine variable: it is
   * brought up to date before a statement that reads them is prepared.
   */
  private async publishSettings(): Promise<void> {
    const rows = this.settings.all();
    const key = JSON.stringify(rows);
    if (key === this.publishedSettings) return;
    const q = (s: string): string => `'${s.replaceAll("'", "''")}'`;
    const list = rows.map(([name, setting, description]) => `{'name': ${q(name)}, 'setting': ${q(setting)}, 'description': ${q(description)}}`);
    const values = rows.map(([name, setting]) => `${q(name.toLowerCase())}: ${q(setting)}`);
    await this.engine.run(`SET VARIABLE cot_settings = [${list.join(', ')}]`);
    await this.engine.run(`SET VARIABLE cot_setting_values = MAP {${values.join(', ')}}`);
    this.publishedSettings = key;
  }

  private async prepareCopyOut(statement: StatementText, copy: CopyToStdout): Promise<Statement> {
    if (copy.format === 'binary') {
      throw new PgError(SqlState.FeatureNotSupported, 'COPY TO STDOUT in binary format is not supported', { hint: 'Use FORMAT text or FORMAT csv.' });
    }
    const parts = splitStatements(copy.query);
    const part = parts[0];
    if (part === undefined || parts.length > 1) {
      throw new PgError(SqlState.SyntaxError, 'COPY (query) TO STDOUT takes exactly one query', { position: statement.offset + 1 });
    }
    const query = (await this.prepare({ ...part, offset: statement.offset + copy.queryOffset } as StatementText, [])) as Statement;
    if (query.plan.kind !== 'engine' || query.fields === null || !READ_KINDS.has(query.plan.statement.kind)) {
      this.closeStatement(query);
      throw new PgError(SqlState.FeatureNotSupported, 'COPY (query) TO STDOUT supports only queries that read rows', {
        hint: 'Use SELECT, VALUES, TABLE or WITH ... SELECT inside the parentheses.',
      });
    }
    return new Statement({ kind: 'copy-out', copy, query }, [], null);
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
      throw new PgError(
        SqlState.ProtocolViolation,
        `bind message has ${resultFormats.length} result formats but query has ${columns} columns`,
      );
    }
    const formats: (0 | 1)[] = [];
    for (let i = 0; i < columns; i++) {
      const f = resultFormats.length === 0 ? 0 : (resultFormats[resultFormats.length === 1 ? 0 : i] as number);
      if (f !== 0 && f !== 1) throw new PgError(SqlState.ProtocolViolation, `unsupported format code: ${f}`);
      formats.push(f);
    }
    const fields = statement.fields?.map((f, i) => ({ ...f, format: formats[i] as 0 | 1 })) ?? null;
    const portal = new ConnectionPortal(statement, fields, params, paramFormats, formats);
    if (statement.plan.kind === 'engine') bindEngine(portal, statement.plan.statement);
    statement.portals++;
    return portal;
  }

  /** Macros for ledgers created since this connection defined its own, before a statement that may call them. */
  private macrosVersion = -1;
  private async refreshLedgerMacros(tokens: readonly Token[]): Promise<void> {
    if (this.macrosVersion === this.services.ledgers.version) return;
    if (!tokens.some((t) => t.kind === 'word' && t.text.toLowerCase().startsWith('cot_'))) return;
    await this.defineLedgerMacros();
  }

  async execute(p: Portal, maxRows: number, sink: ResultSink): Promise<ExecuteOutcome> {
    const portal = p as ConnectionPortal;
    const kind = planKind(portal.statement.plan);
    try {
      // A ledger INSERT reads only when it must (ledger-insert.ts); anything else may read a ledger.
      if (portal.statement.plan.kind !== 'ledger-insert') await appendsVisible(this.ctx);
      const outcome = await this.executePlan(portal, maxRows, sink);
      if (outcome.done === true) this.services.observer.statement(kind, true);
      return outcome;
    } catch (err) {
      this.services.observer.statement(kind, false);
      throw err;
    }
  }

  private async executePlan(portal: ConnectionPortal, maxRows: number, sink: ResultSink): Promise<ExecuteOutcome> {
    const { plan } = portal.statement;
    if (plan.kind !== 'command' && plan.kind !== 'empty') {
      const writes = this.tx.readOnly() ? writeOperation(plan) : null;
      if (writes !== null) {
        this.tx.checkNotFailed();
        throw new PgError(SqlState.ReadOnlySqlTransaction, `cannot execute ${writes} in a read-only transaction`);
      }
      this.tx.queried();
    }
    switch (plan.kind) {
      case 'empty':
        return { done: true, tag: null };
      case 'command': {
        const tag = await this.runCommand(plan.command, sink);
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

  async bindPortal(statement: Statement, resultFormats: readonly number[]): Promise<ConnectionPortal> {
    return (await this.bind(statement, [], [], resultFormats)) as ConnectionPortal;
  }

  closePortal(p: Portal): void {
    const portal = p as ConnectionPortal;
    portal.cursor?.close();
    portal.cursor = null;
    const statement = portal.statement;
    if (statement.boundBy === portal) statement.boundBy = null;
    statement.portals--;
    if (statement.closed && statement.portals === 0) this.destroy(statement);
  }

  closeStatement(p: PreparedStatement): void {
    const statement = p as Statement;
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
    await this.run.stop();
    this.appends.close();
    this.engine.close();
  }

  // ---- session commands -----------------------------------------------------------------------

  private async runCommand(cmd: SessionCommand, sink: ResultSink): Promise<string> {
    if (this.tx.status === 'E' && !['commit', 'rollback', 'rollback-to'].includes(cmd.kind)) this.tx.checkNotFailed();
    switch (cmd.kind) {
      case 'begin':
        await this.tx.begin(cmd.readOnly ?? null, sink);
        return 'BEGIN';
      case 'commit':
        return this.tx.commit(sink);
      case 'rollback':
        await this.tx.rollback(sink);
        return 'ROLLBACK';
      case 'savepoint':
        this.tx.savepoint(cmd.name);
        return 'SAVEPOINT';
      case 'release':
        this.tx.release(cmd.name);
        return 'RELEASE';
      case 'rollback-to':
        await this.tx.rollbackTo(cmd.name);
        return 'ROLLBACK';
      case 'set': {
        if (cmd.name.toLowerCase() === 'transaction_read_only') {
          // Outside a block the SET's own one-statement transaction is all it would change.
          const readOnly = this.settings.normalize('transaction_read_only', cmd.value) === 'on';
          if (this.tx.inBlock) await this.tx.setReadOnly(readOnly, sink);
          return 'SET';
        }
        if (!isKnownSetting(cmd.name)) this.access.engineSetting(cmd.name, cmd.value);
        await this.setParameter(cmd.name, cmd.value, cmd.local);
        return 'SET';
      }
      case 'set-transaction':
        if (cmd.readOnly !== null) {
          if (cmd.session) this.settings.set('default_transaction_read_only', cmd.readOnly ? 'on' : 'off');
          else await this.tx.setReadOnly(cmd.readOnly, sink);
        }
        return 'SET';
      case 'reset':
        if (cmd.name === null) {
          this.settings.resetAll();
          await this.applySearchPath();
        } else {
          await this.setParameter(cmd.name, null, false);
        }
        return 'RESET';
      case 'show':
        if (cmd.name === 'all') {
          for (const row of this.settings.all()) sink.row(row);
          return 'SHOW';
        }
        {
          const value = cmd.name.toLowerCase() === 'transaction_read_only' ? (this.tx.readOnly() ? 'on' : 'off') : this.settings.get(cmd.name);
          if (value === undefined) {
            throw new PgError(SqlState.UndefinedObject, `unrecognized configuration parameter "${cmd.name}"`);
          }
          sink.row([value]);
        }
        return 'SHOW';
      case 'discard':
        if (this.tx.status !== 'I') {
          throw new PgError(SqlState.ActiveSqlTransaction, `DISCARD ${cmd.what} cannot run inside a transaction block`);
        }
        if (cmd.what === 'ALL') {
          this.settings.resetAll();
          await this.applySearchPath();
          this.closeCursors(true);
          await this.deallocateEngine(null);
        }
        return `DISCARD ${cmd.what}`;
      case 'deallocate':
        await this.deallocateEngine(cmd.name);
        return cmd.name === null ? 'DEALLOCATE ALL' : 'DEALLOCATE';
      case 'declare':
        return this.declareCursor(cmd);
      case 'fetch':
        return this.fetchCursor(cmd, sink);
      case 'close':
        if (cmd.name === null) this.closeCursors(true);
        else this.closeCursor(this.openCursor(cmd.name), cmd.name);
        return 'CLOSE CURSOR';
    }
  }

  // ---- Cursors (DECLARE / FETCH / MOVE / CLOSE) ----------------------------------------------
  //
  // A cursor is a portal over a prepared query, named in SQL instead of in
  // the protocol: psycopg's named cursors and server-side cursors use them.
  // They scan forward only, and live until the end of their transaction.

  private readonly cursors = new Map<string, { readonly statement: Statement; readonly portal: ConnectionPortal }>();

  cursorPortal(name: string): Portal | null {
    return this.cursors.get(name)?.portal ?? null;
  }

  private openCursor(name: string): { readonly statement: Statement; readonly portal: ConnectionPortal } {
    const cursor = this.cursors.get(name);
    if (cursor === undefined) throw new PgError(SqlState.InvalidCursorName, `cursor "${name}" does not exist`);
    return cursor;
  }

  private async declareCursor(cmd: Extract<SessionCommand, { kind: 'declare' }>): Promise<string> {
    this.tx.checkNotFailed();
    if (cmd.hold) {
      throw new PgError(SqlState.FeatureNotSupported, 'cursors WITH HOLD are not supported', { hint: 'Declare the cursor WITHOUT HOLD, inside a transaction block.' });
    }
    if (cmd.scroll) {
      throw new PgError(SqlState.FeatureNotSupported, 'scrollable cursors are not supported', { hint: 'Declare the cursor NO SCROLL; it can be read forward.' });
    }
    if (this.tx.autocommit) {
      throw new PgError(SqlState.NoActiveSqlTransaction, 'DECLARE CURSOR can only be used in transaction blocks');
    }
    if (this.cursors.has(cmd.name)) throw new PgError(SqlState.DuplicateCursor, `cursor "${cmd.name}" already exists`);
    const statement = (await this.prepare({ ...lexStatement(cmd.query), offset: cmd.queryOffset } as StatementText, [])) as Statement;
    if (statement.plan.kind !== 'engine' || statement.fields === null || !READ_KINDS.has(statement.plan.statement.kind)) {
      this.closeStatement(statement);
      throw new PgError(SqlState.InvalidCursorDefinition, 'DECLARE CURSOR must be a query that returns rows', {
        hint: 'Use SELECT, VALUES, TABLE or WITH ... SELECT after FOR.',
      });
    }
    const portal = (await this.bind(statement, [], [], cmd.binary ? [1] : [])) as ConnectionPortal;
    this.cursors.set(cmd.name, { statement, portal });
    return 'DECLARE CURSOR';
  }

  private async fetchCursor(cmd: Extract<SessionCommand, { kind: 'fetch' }>, sink: ResultSink): Promise<string> {
    this.tx.checkNotFailed();
    const cursor = this.openCursor(cmd.name);
    const verb = cmd.move ? 'MOVE' : 'FETCH';
    if (cmd.backward) {
      throw new PgError(SqlState.ObjectNotInPrerequisiteState, 'cursor can only scan forward', {
        hint: 'cotwire cursors read forward only: FETCH NEXT, FETCH n, FETCH FORWARD n or FETCH ALL.',
      });
    }
    if (cmd.count === 0 || cursor.statement.plan.kind !== 'engine') return `${verb} 0`;
    let rows = 0;
    const counting: ResultSink = {
      row: (cells) => {
        rows++;
        if (!cmd.move) sink.row(cells);
      },
      notice: (n) => sink.notice(n),
      flushIfFull: () => sink.flushIfFull(),
      copyOutStart: (c) => sink.copyOutStart(c),
      copyData: (d) => sink.copyData(d),
      copyDone: () => sink.copyDone(),
    };
    await this.run.execute(cursor.portal, cursor.statement.plan, cmd.count ?? 0, counting);
    return `${verb} ${rows}`;
  }

  private closeCursor(cursor: { readonly statement: Statement; readonly portal: ConnectionPortal }, name: string): void {
    this.cursors.delete(name);
    this.closePortal(cursor.portal);
    this.closeStatement(cursor.statement);
  }

  /** At the end of a transaction every cursor closes (none is WITH HOLD); `all` for CLOSE ALL and DISCARD ALL. */
  private closeCursors(all: boolean): void {
    if (!all && this.cursors.size === 0) return;
    for (const [name, cursor] of [...this.cursors]) this.closeCursor(cursor, name);
  }

  /** SQL-level prepared statements (PREPARE) live in the engine; DEALLOCATE ALL removes every one. */
  private async deallocateEngine(name: string | null): Promise<void> {
    const names = name !== null ? [name] : (await this.engine.query('SELECT name FROM system.main.duckdb_prepared_statements()')).map((r) => String(r[0]));
    for (const n of names) await this.engine.run(`DEALLOCATE ${quoteIdent(n)}`);
  }

  /** Every cursor closes; a ledger created in the block appears (COMMIT) or disappears (ROLLBACK) for other connections. */
  private transactionEnded(catalogChanged: boolean): void {
    this.closeCursors(false);
    if (catalogChanged) this.services.ledgers.invalidate();
  }

  private async setParameter(name: string, value: string | null, local: boolean): Promise<void> {
    if (local && this.tx.status === 'I') {
      // PostgreSQL warns and does nothing outside a transaction block.
      return;
    }
    this.settings.set(name, value, local);
    if (name.toLowerCase() === 'search_path') await this.applySearchPath();
  }

  /**
   * search_path is the one setting the engine needs. PostgreSQL's "public"
   * is DuckDB's "main"; "$user" and pg_catalog have no DuckDB counterpart,
   * and schemas that do not exist are skipped, as PostgreSQL ignores them.
   */
  async applySearchPath(): Promise<void> {
    const value = this.settings.get('search_path') ?? '';
    const schemas = value
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s !== '' && s !== '"$user"' && s !== '$user' && s.toLowerCase() !== 'pg_catalog')
      .map((s) => (s.startsWith('"') ? s.slice(1, -1).replaceAll('""', '"') : s))
      .map((s) => (s === 'public' ? 'main' : s));
    const usable: string[] = [];
    for (const s of schemas) {
      try {
        await this.engine.run(`SET search_path = '${s.replaceAll("'", "''")}'`);
        usable.push(s);
      } catch {
        // not a schema DuckDB knows
      }
    }
    const path = usable.length === 0 ? 'main' : usable.join(',');
    await this.engine.run(`SET search_path = '${path.replaceAll("'", "''")}'`);
  }
}
