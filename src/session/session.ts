import { PgError, protocolViolation } from '../errors/pg-error.js';
import { SqlState } from '../errors/sqlstate.js';
import { decodeFrontendMessage, decodeStartupPacket } from '../protocol/decode.js';
import {
  BackendWriter,
  BIND_COMPLETE,
  CLOSE_COMPLETE,
  COPY_DONE,
  EMPTY_QUERY_RESPONSE,
  NO_DATA,
  PARSE_COMPLETE,
  PORTAL_SUSPENDED,
} from '../protocol/encode.js';
import { STARTUP_FRAME, type Frame } from '../protocol/framer.js';
import type { FrameSink } from '../protocol/frame-sink.js';
import type { Bind, Close, Describe, Execute, FrontendMessage, Parse, StartupMessage } from '../protocol/messages.js';
import { MessageReader } from '../protocol/reader.js';
import { type AuthMethod, type AuthPolicy, passwordFailed } from './auth.js';
import { FrontendCode } from '../protocol/codes.js';
import type {
  ConnectionHandler,
  CopyIn,
  ExecuteOutcome,
  StatementSource,
  HandlerFactory,
  Portal,
  PreparedStatement,
  ResultSink,
  SessionInfo,
} from './handler-port.js';
import { checkPassword, ScramError, ScramExchange } from './scram.js';

/** The socket side, injected by server/ so the session never touches node:net or node:tls. */
export interface Transport {
  readonly remoteAddress: string;
  readonly tls: boolean;
  /**
   * The user an in-process connection was opened for, once the HTTP listener authenticated its request: that user
   * connects without a password, and no other name does. Unset for a socket.
   */
  readonly authenticatedUser?: string;
  /** Returns false when the socket is congested; then wait for drain(). */
  write(data: Buffer): boolean;
  /** Several buffers in order, in one system call where the socket allows. */
  writev?(chunks: readonly Buffer[]): boolean;
  drain(): Promise<void>;
  /** Upgrades to TLS after 'S' was sent; null when no TLS is configured. */
  readonly startTls: (() => Promise<void>) | null;
  pauseInput(): void;
  resumeInput(): void;
  /** Flushes what was written and closes. */
  end(): void;
}

/** The logger subset the session uses (pino's shape). */
export interface SessionLog {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
  debug(obj: object, msg?: string): void;
  child(bindings: object): SessionLog;
}

export interface SessionOptions {
  readonly processId: number;
  readonly secretKey: number;
  readonly auth: AuthPolicy;
  readonly handlers: HandlerFactory;
  readonly log: SessionLog;
  /** Called with the key of a CancelRequest that arrived on this connection. */
  readonly onCancelRequest: (processId: number, secretKey: number) => void;
  /** Called once the session is closed, whatever the reason. */
  readonly onClose: () => void;
  /**
   * Asked when the StartupMessage arrives and again once the client is authenticated, before it takes a slot: an
   * error (53300) refuses it. The SSLRequest before it is answered first, so that libpq shows the refusal itself.
   */
  readonly admit: () => PgError | null;
  /** The client is authenticated: from here on it holds one of the server's connection slots. */
  readonly authenticated: () => void;
  /** Statements that run longer get a warn line (0 = never). */
  readonly slowStatementMs: number;
  /** From the connection to ReadyForQuery, in milliseconds: a client that stalls in startup or authentication does not keep its slot. */
  readonly startupTimeoutMs: number;
  /** Named prepared statements one connection may hold. */
  readonly maxPreparedStatements: number;
  /** Named portals one connection may hold. */
  readonly maxPortals: number;
}

type Phase =
  | { readonly name: 'startup' }
  | { readonly name: 'password'; readonly user: string; readonly startup: StartupMessage }
  | { readonly name: 'sasl-initial'; readonly user: string; readonly startup: StartupMessage }
  | {
      readonly name: 'sasl-final';
      readonly user: string;
      readonly startup: StartupMessage;
      readonly exchange: ScramExchange;
      readonly exists: boolean;
    }
  | { readonly name: 'ready' }
  | { readonly name: 'closed' };

/** Output is written to the socket whenever this much has accumulated inside one response. */
const FLUSH_THRESHOLD = 64 * 1024;
/** Input frames queued beyond this pause the socket, so a pipelining client cannot grow memory without bound. */
const INPUT_HIGH_WATER = 256;

interface StatementEntry {
  readonly statement: PreparedStatement;
  readonly sql: string;
}

/**
 * The per-connection protocol state machine: startup, authentication, simple
 * and extended query, error recovery up to Sync, and ReadyForQuery with the
 * transaction status. What a statement means is the handler's business.
 */
export class Session {
  private phase: Phase = { name: 'startup' };
  private readonly out = new BackendWriter();
  private readonly queue: Frame[] = [];
  private running = false;
  private inputPaused = false;
  private ignoreTillSync = false;
  private handler: ConnectionHandler | null = null;
  private readonly statements = new Map<string, StatementEntry>();
  private readonly portals = new Map<string, Portal>();
  /** Portals without rows that ran to completion: PostgreSQL refuses to run one again (55000), where running it would repeat it. */
  private readonly finishedPortals = new WeakSet<Portal>();
  private startupTimer: NodeJS.Timeout | null = null;
  /** idle_in_transaction_session_timeout, armed at ReadyForQuery inside a transaction. */
  private idleTimer: NodeJS.Timeout | null = null;
  /** The SQL behind each portal, for the slow-statement log. */
  private readonly portalSql = new Map<string, string>();
  private readonly sink: ResultSink;
  /** An exchange's answer as the engine sent it (handler.relayBound, relayQuery). */
  private readonly frames: FrameSink;
  /**
   * What goes out before `out`'s content, in order: the engine's own
   * messages, not copied (a result of 50 rows is 34 KB), and what `out` held
   * before them.
   */
  private readonly passed: Buffer[] = [];
  private passedBytes = 0;
  private log: SessionLog;
  private draining = false;
  private closedResolve: (() => void) | null = null;
  readonly closed: Promise<void>;
  /** The rest of a simple-query string, while a COPY in it receives data. */
  private query: { readonly statements: readonly StatementSource[]; next: number } | null = null;
  /** COPY FROM STDIN in progress; `simple` when it came from a simple query. */
  private copy: { readonly target: CopyIn; readonly simple: boolean } | null = null;

  constructor(
    private readonly transport: Transport,
    private readonly opts: SessionOptions,
  ) {
    this.log = opts.log;
    this.closed = new Promise((resolve) => {
      this.closedResolve = resolve;
    });
    this.startupTimer = setTimeout(() => this.startupTimedOut(), opts.startupTimeoutMs);
    this.startupTimer.unref();
    this.sink = {
      row: (cells) => {
        this.out.dataRow(cells);
      },
      rowFrame: (frame) => {
        this.out.frame(frame);
      },
      dataRows: this.out,
      notice: (notice) => {
        this.out.noticeResponse(notice);
      },
      flushIfFull: async () => {
        if (this.out.length >= FLUSH_THRESHOLD && !this.flush()) await this.transport.drain();
      },
      copyOutStart: (columns) => {
        this.out.copyOutResponse(0, new Array<number>(columns).fill(0));
      },
      copyData: (data) => {
        this.out.copyData(data);
      },
      copyDone: () => {
        this.out.frame(COPY_DONE);
      },
    };
    this.frames = {
      frame: (bytes) => {
        if (this.out.length > 0) this.passed.push(this.out.take());
        this.passed.push(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
        this.passedBytes += bytes.byteLength;
      },
      flushIfFull: () => this.passedBytes + this.out.length < FLUSH_THRESHOLD || this.flush(),
      flush: () => this.flush(),
      drained: () => this.transport.drain(),
    };
  }

  get isClosed(): boolean {
    return this.phase.name === 'closed';
  }

  /** Hands a frame from the framer to the session; frames are processed strictly in order. */
  receive(frame: Frame): void {
    if (this.phase.name === 'closed') return;
    this.stopIdleTimer();
    this.queue.push(frame);
    if (!this.inputPaused && this.queue.length >= INPUT_HIGH_WATER) {
      this.inputPaused = true;
      this.transport.pauseInput();
    }
    if (!this.running) {
      // After the rest of the chunk is framed: a Bind then sees the Execute and Sync that came with it (bindAhead).
      this.running = true;
      queueMicrotask(() => void this.run());
    }
  }

  /** A framing error or a broken socket: report if possible, then close. */
  fail(err: PgError): void {
    if (this.phase.name === 'closed') return;
    this.out.errorResponse(err);
    this.close();
  }

  /** The peer went away. */
  disconnected(): void {
    this.close();
  }

  /**
   * Closes a connection still in startup or authentication without a word, as PostgreSQL does with a client that
   * never finishes its startup packet: the server needs its place for a client that makes progress.
   */
  evict(): void {
    if (this.phase.name === 'ready' || this.phase.name === 'closed') return;
    this.close();
  }

  /** CancelRequest from another connection with this session's key. */
  cancel(): void {
    // The handler stops whatever engine call runs (preparing included); with none, it does nothing, as in PostgreSQL.
    this.handler?.cancel();
  }

  /**
   * pg_terminate_backend: its statement, if any, is cancelled and the connection closed with 57P01, as
   * PostgreSQL's backend ends on SIGTERM.
   */
  terminate(): void {
    if (this.phase.name !== 'ready') return;
    this.handler?.cancel();
    this.terminateForShutdown();
  }

  /**
   * Graceful shutdown: an idle session is closed at once with 57P01; a busy one
   * after its current statement, or when `deadline` passes (its statement is then cancelled).
   */
  async shutdown(graceMs: number): Promise<void> {
    this.draining = true;
    if (!this.running) {
      this.terminateForShutdown();
    } else {
      const timer = setTimeout(() => {
        this.handler?.cancel();
        this.terminateForShutdown();
      }, graceMs);
      await this.closed;
      clearTimeout(timer);
    }
    await this.closed;
  }

  /**
   * PostgreSQL's authentication_timeout: a client still in startup or
   * authentication when it passes is disconnected (one that never finished
   * its startup packet silently, as PostgreSQL does).
   */
  private startupTimedOut(): void {
    this.startupTimer = null;
    if (this.phase.name === 'ready' || this.phase.name === 'closed') return;
    this.log.info({ phase: this.phase.name, ms: this.opts.startupTimeoutMs }, 'connection closed: startup or authentication timed out');
    if (this.phase.name === 'startup') this.close();
    else this.fail(new PgError(SqlState.QueryCanceled, 'canceling authentication due to timeout', {}, 'FATAL'));
  }

  private stopIdleTimer(): void {
    if (this.idleTimer !== null) clearTimeout(this.idleTimer);
    this.idleTimer = null;
  }

  private terminateForShutdown(): void {
    this.fail(new PgError(SqlState.AdminShutdown, 'terminating connection due to administrator command', {}, 'FATAL'));
  }

  private async run(): Promise<void> {
    this.running = true;
    try {
      while (this.queue.length > 0 && this.phase.name !== 'closed') {
        const frame = this.queue.shift() as Frame;
        if (this.inputPaused && this.queue.length < INPUT_HIGH_WATER / 4) {
          this.inputPaused = false;
          this.transport.resumeInput();
        }
        try {
          await this.dispatch(frame);
        } catch (err) {
          this.report(err, true);
        }
      }
    } finally {
      this.running = false;
    }
    if (this.draining && this.phase.name !== 'closed') this.terminateForShutdown();
  }

  private async dispatch(frame: Frame): Promise<void> {
    if (frame.code === STARTUP_FRAME) {
      if (this.phase.name !== 'startup') throw protocolViolation('unexpected startup packet');
      await this.onStartupPacket(frame.body);
      return;
    }
    const msg = decodeFrontendMessage(frame.code, frame.body);
    switch (this.phase.name) {
      case 'password':
      case 'sasl-initial':
      case 'sasl-final':
        if (msg.kind !== 'PasswordData') {
          throw protocolViolation(`expected a password response, got ${msg.kind}`);
        }
        await this.onPasswordData(msg.data);
        return;
      case 'ready':
        await this.onMessage(msg);
        return;
      default:
        throw protocolViolation(`unexpected ${msg.kind} message`);
    }
  }

  // ---- startup and authentication -------------------------------------------------------------

  private async onStartupPacket(body: Buffer): Promise<void> {
    const packet = decodeStartupPacket(body);
    switch (packet.kind) {
      case 'SSLRequest':
        if (this.transport.startTls !== null && !this.transport.tls) {
          // Anything queued behind the SSLRequest was sent in plaintext before
          // the handshake and must not be trusted (CVE-2021-23214).
          if (this.queue.length > 0) throw protocolViolation('received unencrypted data after SSL request');
          this.transport.write(Buffer.from('S'));
          await this.transport.startTls();
        } else {
          this.transport.write(Buffer.from('N'));
        }
        return;
      case 'GSSENCRequest':
        this.transport.write(Buffer.from('N'));
        return;
      case 'CancelRequest':
        this.opts.onCancelRequest(packet.processId, packet.secretKey);
        this.close();
        return;
      case 'StartupMessage':
        await this.onStartupMessage(packet);
        return;
    }
  }

  private async onStartupMessage(startup: StartupMessage): Promise<void> {
    // PostgreSQL refuses before asking for a password: a client that cannot get a slot is not kept waiting.
    const refused = this.opts.admit();
    if (refused !== null) throw refused;
    const user = startup.parameters.get('user');
    if (user === undefined || user === '') {
      throw new PgError(SqlState.InvalidAuthorizationSpecification, 'no PostgreSQL user name specified in startup packet', {}, 'FATAL');
    }
    if (startup.parameters.has('replication') && startup.parameters.get('replication') !== 'false') {
      throw new PgError(SqlState.FeatureNotSupported, 'replication connections are not supported', {}, 'FATAL');
    }
    this.log = this.opts.log.child({ user, application_name: startup.parameters.get('application_name') });
    const method: AuthMethod | PgError = this.inProcessMethod(user) ?? this.opts.auth.methodFor(this.transport.remoteAddress, this.transport.tls);
    if (method instanceof PgError) throw method;
    switch (method) {
      case 'trust':
        await this.completeStartup(user, startup);
        return;
      case 'password':
        this.phase = { name: 'password', user, startup };
        this.out.authenticationCleartextPassword();
        this.flush();
        return;
      case 'scram-sha-256':
        this.phase = { name: 'sasl-initial', user, startup };
        this.out.authenticationSASL(['SCRAM-SHA-256']);
        this.flush();
        return;
    }
  }

  /** An in-process connection's user was authenticated by whoever opened it: that name is trusted, any other refused. */
  private inProcessMethod(user: string): AuthMethod | PgError | null {
    const opened = this.transport.authenticatedUser;
    if (opened === undefined) return null;
    if (user === opened) return 'trust';
    return new PgError(SqlState.InvalidAuthorizationSpecification, `this connection was opened for user "${opened}", not "${user}"`, {}, 'FATAL');
  }

  private async onPasswordData(data: Buffer): Promise<void> {
    const phase = this.phase;
    if (phase.name === 'password') {
      const password = new MessageReader(data).cstring();
      const { verifier, exists } = this.opts.auth.verifierFor(phase.user);
      if (!(checkPassword(verifier, password) && exists)) throw passwordFailed(phase.user);
      await this.completeStartup(phase.user, phase.startup);
      return;
    }
    try {
      if (phase.name === 'sasl-initial') {
        const r = new MessageReader(data);
        const mechanism = r.cstring();
        if (mechanism !== 'SCRAM-SHA-256') {
          throw protocolViolation(`client selected an invalid SASL authentication mechanism "${mechanism}"`);
        }
        const len = r.int32();
        const clientFirst = r.bytes(Math.max(0, len)).toString('utf8');
        const { verifier, exists } = this.opts.auth.verifierFor(phase.user);
        const exchange = new ScramExchange(verifier);
        this.out.authenticationSASLContinue(exchange.serverFirst(clientFirst));
        this.flush();
        this.phase = { name: 'sasl-final', user: phase.user, startup: phase.startup, exchange, exists };
        return;
      }
      if (phase.name === 'sasl-final') {
        const serverFinal = phase.exchange.serverFinal(data.toString('utf8'));
        if (serverFinal === null || !phase.exists) throw passwordFailed(phase.user);
        this.out.authenticationSASLFinal(serverFinal);
        await this.completeStartup(phase.user, phase.startup);
      }
    } catch (err) {
      if (err instanceof ScramError) throw protocolViolation(err.message);
      throw err;
    }
  }

  private async completeStartup(user: string, startup: StartupMessage): Promise<void> {
    // Checked and taken in one turn of the event loop: two clients that authenticate together cannot both take the last slot.
    const refused = this.opts.admit();
    if (refused !== null) throw refused;
    this.opts.authenticated();
    this.out.authenticationOk();
    const params = new Map(startup.parameters);
    params.delete('user');
    const database = params.get('database') || user;
    params.delete('database');
    const info: SessionInfo = {
      processId: this.opts.processId,
      user,
      database,
      startupParameters: params,
      remoteAddress: this.transport.remoteAddress,
      tls: this.transport.tls,
      ...this.opts.auth.grantsOf(user),
    };
    this.handler = await this.opts.handlers.open(info);
    if (this.phase.name === 'closed') {
      await this.handler.close();
      return;
    }
    for (const [name, value] of this.handler.reportedParameters) this.out.parameterStatus(name, value);
    this.out.backendKeyData(this.opts.processId, this.opts.secretKey);
    this.phase = { name: 'ready' };
    this.log.info({ database, tls: this.transport.tls }, 'connection authorized');
    this.readyForQuery();
  }

  // ---- queries --------------------------------------------------------------------------------

  private async onMessage(msg: FrontendMessage): Promise<void> {
    if (msg.kind === 'Terminate') {
      this.close();
      return;
    }
    if (this.copy !== null) {
      await this.onCopyMessage(msg);
      return;
    }
    if (msg.kind === 'Sync') {
      this.ignoreTillSync = false;
      if (this.handler?.sync !== undefined) {
        try {
          await this.handler.sync();
        } catch (err) {
          if (err instanceof PgError && err.isFatal) throw err;
          this.report(err, false);
        }
      }
      this.readyForQuery();
      return;
    }
    // "When an error is detected while processing any extended-query message, the backend
    // issues ErrorResponse, then reads and discards messages until a Sync is reached."
    if (this.ignoreTillSync) return;
    try {
      switch (msg.kind) {
        case 'Query':
          await this.onQuery(msg.sql);
          return;
        case 'Parse':
          await this.onParse(msg);
          return;
        case 'Bind':
          await this.onBind(msg);
          return;
        case 'Describe':
          this.onDescribe(msg);
          return;
        case 'Execute':
          await this.onExecute(msg);
          return;
        case 'Close':
          this.onClose(msg);
          return;
        case 'Flush':
          this.flush();
          return;
        case 'CopyData':
        case 'CopyDone':
        case 'CopyFail':
          // Outside COPY these are ignored, as the protocol specifies.
          return;
        case 'FunctionCall':
          throw new PgError(SqlState.FeatureNotSupported, 'the function call protocol message is not supported');
        case 'PasswordData':
          throw protocolViolation('unexpected password message');
      }
    } catch (err) {
      if (err instanceof PgError && err.isFatal) throw err;
      this.report(err, false);
      this.handler?.failTransaction();
      this.ignoreTillSync = true;
      // PostgreSQL sends an error at once (elog.c flushes it): a client that sent Flush, not
      // Sync, is waiting for it, and the Flush that follows is among the messages discarded.
      this.flush();
    }
  }

  private async onQuery(sql: string): Promise<void> {
    const handler = this.requireHandler();
    let statements: readonly StatementSource[];
    try {
      statements = handler.splitQuery(sql);
      if (statements.length === 0) {
        this.out.frame(EMPTY_QUERY_RESPONSE);
        this.readyForQuery();
        return;
      }
      await handler.beginQueryString(statements);
    } catch (err) {
      if (err instanceof PgError && err.isFatal) throw err;
      this.report(err, false);
      handler.failTransaction();
      this.readyForQuery();
      return;
    }
    const only = statements.length === 1 ? statements[0] : undefined;
    if (only !== undefined && handler.relayQuery !== undefined) {
      const started = performance.now();
      const whole = await handler.relayQuery(only, this.frames);
      if (whole.relayed) {
        this.logIfSlow(started, sql);
        if (whole.error !== null) {
          if (whole.error.isFatal) throw whole.error;
          this.report(whole.error, false);
        }
        await this.endQuery(whole.error === null);
        return;
      }
    }
    this.query = { statements, next: 0 };
    await this.continueQuery();
  }

  /**
   * Runs the remaining statements of a simple-query string. A COPY FROM
   * STDIN among them suspends the string until its data is in.
   */
  private async continueQuery(): Promise<void> {
    const handler = this.requireHandler();
    const query = this.query as NonNullable<Session['query']>;
    let succeeded = false;
    try {
      while (query.next < query.statements.length) {
        const source = query.statements[query.next++] as StatementSource;
        const prepared = await handler.prepare(source, []);
        // A simple query's statement is executed whole, and the last one ends the exchange.
        const portal = await handler.bind(prepared, [], [], [], { sync: query.next === query.statements.length });
        if (portal.fields !== null) this.out.rowDescription(portal.fields);
        const outcome = await this.executeTracked(handler, portal, 0, source.text);
        handler.closePortal(portal);
        handler.closeStatement(prepared);
        if (outcome.done === 'copy-in') {
          this.startCopy(outcome.copy, true);
          return;
        }
        if (outcome.done) this.completed(outcome);
      }
      succeeded = true;
    } catch (err) {
      if (err instanceof PgError && err.isFatal) throw err;
      this.report(err, false);
      handler.failTransaction();
    }
    await this.endQuery(succeeded);
  }

  private async endQuery(succeeded: boolean): Promise<void> {
    const handler = this.requireHandler();
    this.query = null;
    try {
      await handler.endQueryString(succeeded);
    } catch (err) {
      this.report(err, false);
    }
    this.readyForQuery();
  }

  private startCopy(target: CopyIn, simple: boolean): void {
    this.copy = { target, simple };
    this.out.copyInResponse(0, new Array<number>(target.columns).fill(0));
    this.flush();
  }

  /** Copy-in mode: CopyData feeds the target; CopyDone completes it; CopyFail or an error abandons it. */
  private async onCopyMessage(msg: FrontendMessage): Promise<void> {
    const copy = this.copy as NonNullable<Session['copy']>;
    try {
      switch (msg.kind) {
        case 'CopyData':
          await copy.target.write(msg.data);
          return;
        case 'CopyDone': {
          const tag = await copy.target.finish();
          this.copy = null;
          this.out.commandComplete(tag);
          if (copy.simple) await this.continueQuery();
          return;
        }
        case 'CopyFail':
          throw new PgError(SqlState.QueryCanceled, `COPY from stdin failed: ${msg.message}`);
        case 'Flush':
        case 'Sync':
          // Ignored during copy-in, as the protocol specifies.
          return;
        default:
          throw new PgError(SqlState.ProtocolViolation, `unexpected message type ${msg.kind} during COPY from stdin`);
      }
    } catch (err) {
      this.copy = null;
      await copy.target.abort().catch(() => undefined);
      if (err instanceof PgError && err.isFatal) throw err;
      this.report(err, false);
      this.handler?.failTransaction();
      if (copy.simple) await this.endQuery(false);
      else {
        this.ignoreTillSync = true;
        this.flush();
      }
    }
  }

  private async onParse(msg: Parse): Promise<void> {
    const handler = this.requireHandler();
    if (msg.name !== '' && this.statements.has(msg.name)) {
      throw new PgError(SqlState.DuplicatePreparedStatement, `prepared statement "${msg.name}" already exists`);
    }
    if (msg.name !== '' && this.statements.size - (this.statements.has('') ? 1 : 0) >= this.opts.maxPreparedStatements) {
      throw new PgError(SqlState.ConfigurationLimitExceeded, `too many prepared statements: this connection holds ${this.opts.maxPreparedStatements}`, {
        hint: 'Close prepared statements the application no longer uses (Close, or DEALLOCATE), or raise limits.maxPreparedStatements.',
      });
    }
    if (msg.name === '' && handler.relayParse !== undefined && (await this.relayParse(handler, msg))) return;
    const statement = await handler.prepare(msg.sql, msg.parameterTypes, msg.name !== '');
    const old = this.statements.get(msg.name);
    if (old !== undefined) handler.closeStatement(old.statement);
    this.statements.set(msg.name, { statement, sql: msg.sql });
    this.out.frame(PARSE_COMPLETE);
  }

  private async onBind(msg: Bind): Promise<void> {
    const handler = this.requireHandler();
    const entry = this.statements.get(msg.statement);
    if (entry === undefined) {
      throw new PgError(SqlState.InvalidSqlStatementName, `prepared statement "${msg.statement}" does not exist`);
    }
    if (msg.portal !== '' && this.portals.has(msg.portal)) {
      throw new PgError(SqlState.DuplicateCursor, `portal "${msg.portal}" already exists`);
    }
    if (msg.portal !== '' && this.portals.size - (this.portals.has('') ? 1 : 0) >= this.opts.maxPortals) {
      throw new PgError(SqlState.ConfigurationLimitExceeded, `too many portals: this connection holds ${this.opts.maxPortals}`, {
        hint: 'Close portals the application no longer uses, or raise limits.maxPortals.',
      });
    }
    const { paramTypes } = entry.statement;
    if (msg.parameters.length !== paramTypes.length) {
      throw new PgError(
        SqlState.ProtocolViolation,
        `bind message supplies ${msg.parameters.length} parameters, but prepared statement "${msg.statement}" requires ${paramTypes.length}`,
      );
    }
    checkFormats(msg.parameterFormats, msg.parameters.length, 'parameter');
    const ahead = this.lookAhead(msg.portal);
    if (ahead?.sync === true && handler.relayBound !== undefined) {
      const started = performance.now();
      const { parameters, parameterFormats, resultFormats } = msg;
      const whole = await handler.relayBound(entry.statement, parameters, parameterFormats, resultFormats, ahead.describe, this.frames);
      if (whole.relayed) {
        // Its Describe and Execute were answered with it; its Sync ends the exchange as any does.
        this.queue.splice(0, ahead.messages);
        this.logIfSlow(started, entry.sql);
        if (whole.error !== null) throw whole.error;
        return;
      }
    }
    const old = this.portals.get(msg.portal);
    if (old !== undefined) {
      this.portals.delete(msg.portal);
      handler.closePortal(old);
    }
    const portal = await handler.bind(
      entry.statement,
      msg.parameters,
      msg.parameterFormats,
      msg.resultFormats,
      ahead === undefined ? undefined : { sync: ahead.sync },
    );
    this.portals.set(msg.portal, portal);
    this.portalSql.set(msg.portal, entry.sql);
    this.out.frame(BIND_COMPLETE);
  }

  /**
   * An unnamed statement's Parse with the Bind of it, its Execute and a Sync
   * right behind (what drivers send for a query with parameters): the
   * handler may take them whole, one round trip. Answers whether it did;
   * the Bind, Describe and Execute are then answered, and the Sync is left.
   */
  private async relayParse(handler: ConnectionHandler, msg: Parse): Promise<boolean> {
    const frame = this.queue[0];
    if (frame?.code !== FrontendCode.Bind || handler.relayParse === undefined) return false;
    let bind: FrontendMessage;
    try {
      bind = decodeFrontendMessage(frame.code, frame.body);
    } catch {
      return false;
    }
    if (bind.kind !== 'Bind' || bind.statement !== '') return false;
    const ahead = this.lookAhead(bind.portal, 1);
    if (ahead?.sync !== true) return false;
    try {
      checkFormats(bind.parameterFormats, bind.parameters.length, 'parameter');
    } catch {
      // The Bind's own error, after the Parse's ParseComplete: the messages are taken one by one.
      return false;
    }
    const started = performance.now();
    const { parameters: params, parameterFormats: paramFormats, resultFormats } = bind;
    const whole = await handler.relayParse(msg.sql, msg.parameterTypes, { params, paramFormats, resultFormats }, ahead.describe, this.frames);
    if (!whole.relayed) return false;
    this.queue.splice(0, 1 + ahead.messages);
    // PostgreSQL's Parse replaced the unnamed statement, or dropped it if it failed.
    const old = this.statements.get('');
    if (old !== undefined) handler.closeStatement(old.statement);
    this.statements.delete('');
    if (whole.statement != null) this.statements.set('', { statement: whole.statement, sql: msg.sql });
    this.logIfSlow(started, msg.sql);
    if (whole.error !== null) throw whole.error;
    return true;
  }

  /**
   * What the client already sent after a Bind of `portal` (drivers send
   * Bind, Describe, Execute and Sync together): an Execute of it for all its
   * rows, after a Describe of it or not, and whether a Sync comes right
   * after; `messages` counts the Describe and the Execute.
   */
  private lookAhead(portal: string, from = 0): { readonly describe: boolean; readonly sync: boolean; readonly messages: number } | undefined {
    let i = from;
    let msg = this.queuedMessage(i);
    const describe = msg?.kind === 'Describe' && msg.target === 'P' && msg.name === portal;
    if (describe) msg = this.queuedMessage(++i);
    if (msg?.kind !== 'Execute' || msg.portal !== portal || msg.maxRows !== 0) return undefined;
    return { describe, sync: this.queue[i + 1]?.code === FrontendCode.Sync, messages: i + 1 - from };
  }

  /** A queued Describe or Execute, decoded; null for anything else, which lookahead never needs to read. */
  private queuedMessage(i: number): FrontendMessage | null {
    const frame = this.queue[i];
    if (frame?.code !== FrontendCode.Describe && frame?.code !== FrontendCode.Execute) return null;
    try {
      return decodeFrontendMessage(frame.code, frame.body);
    } catch {
      // A malformed message is reported when its turn comes.
      return null;
    }
  }

  private onDescribe(msg: Describe): void {
    if (msg.target === 'S') {
      const entry = this.statements.get(msg.name);
      if (entry === undefined) {
        throw new PgError(SqlState.InvalidSqlStatementName, `prepared statement "${msg.name}" does not exist`);
      }
      this.out.parameterDescription(entry.statement.paramTypes);
      this.describeFields(entry.statement.fields);
    } else {
      const portal = this.portals.get(msg.name) ?? this.requireHandler().cursorPortal(msg.name);
      if (portal === null || portal === undefined) throw new PgError(SqlState.InvalidCursorName, `portal "${msg.name}" does not exist`);
      this.describeFields(portal.fields);
    }
  }

  private describeFields(fields: PreparedStatement['fields']): void {
    if (fields === null) this.out.frame(NO_DATA);
    else this.out.rowDescription(fields);
  }

  private async onExecute(msg: Execute): Promise<void> {
    const handler = this.requireHandler();
    const portal = this.portals.get(msg.portal);
    if (portal === undefined) throw new PgError(SqlState.InvalidCursorName, `portal "${msg.portal}" does not exist`);
    if (this.finishedPortals.has(portal)) throw new PgError(SqlState.ObjectNotInPrerequisiteState, `portal "${msg.portal}" cannot be run`);
    const outcome = await this.executeTracked(handler, portal, msg.maxRows, this.portalSql.get(msg.portal) ?? '');
    if (outcome.done !== false && portal.fields === null) this.finishedPortals.add(portal);
    if (outcome.done === 'copy-in') this.startCopy(outcome.copy, false);
    else if (outcome.done) this.completed(outcome);
    else this.out.frame(PORTAL_SUSPENDED);
  }

  private async executeTracked(handler: ConnectionHandler, portal: Portal, maxRows: number, sql: string) {
    const started = performance.now();
    try {
      return await handler.execute(portal, maxRows, this.sink);
    } finally {
      this.logIfSlow(started, sql);
    }
  }

  private logIfSlow(started: number, sql: string): void {
    const ms = performance.now() - started;
    if (this.opts.slowStatementMs > 0 && ms >= this.opts.slowStatementMs) {
      this.log.warn({ durationMs: Math.round(ms), statement: sql.slice(0, 500) }, 'slow statement');
    }
  }

  /** CommandComplete, after forgetting the prepared statements a DEALLOCATE or DISCARD ALL removed. */
  private completed(outcome: Extract<ExecuteOutcome, { done: true }>): void {
    if (outcome.deallocate !== undefined) {
      const handler = this.requireHandler();
      const { name } = outcome.deallocate;
      for (const [key, entry] of [...this.statements]) {
        if (key === '' || (name !== null && key !== name)) continue;
        this.statements.delete(key);
        handler.closeStatement(entry.statement);
      }
    }
    this.complete(outcome.tag);
  }

  private complete(tag: string | null): void {
    if (tag === null) this.out.frame(EMPTY_QUERY_RESPONSE);
    else this.out.commandComplete(tag);
  }

  private onClose(msg: Close): void {
    const handler = this.requireHandler();
    if (msg.target === 'S') {
      const entry = this.statements.get(msg.name);
      if (entry !== undefined) {
        this.statements.delete(msg.name);
        handler.closeStatement(entry.statement);
      }
    } else {
      const portal = this.portals.get(msg.name);
      if (portal !== undefined) {
        this.portals.delete(msg.name);
        this.portalSql.delete(msg.name);
        handler.closePortal(portal);
      }
    }
    this.out.frame(CLOSE_COMPLETE);
  }

  private readyForQuery(): void {
    const handler = this.requireHandler();
    for (const [name, value] of handler.takeParameterChanges()) this.out.parameterStatus(name, value);
    const status = handler.transactionStatus();
    // Portals live only as long as their transaction.
    if (status === 'I' && this.portals.size > 0) {
      for (const portal of this.portals.values()) handler.closePortal(portal);
      this.portals.clear();
      this.portalSql.clear();
    }
    this.out.readyForQuery(status);
    this.flush();
    const idleMs = status === 'I' ? 0 : handler.idleInTransactionTimeoutMs();
    if (idleMs > 0 && this.queue.length === 0) {
      this.idleTimer = setTimeout(() => {
        this.idleTimer = null;
        this.log.info({ ms: idleMs }, 'connection closed: idle in transaction');
        this.fail(new PgError(SqlState.IdleInTransactionSessionTimeout, 'terminating connection due to idle-in-transaction timeout', {}, 'FATAL'));
      }, idleMs);
      this.idleTimer.unref();
    }
  }

  // ---- plumbing -------------------------------------------------------------------------------

  private requireHandler(): ConnectionHandler {
    if (this.handler === null) throw protocolViolation('not ready for queries');
    return this.handler;
  }

  /** Sends an error; internal errors are logged and replaced by a generic XX000. */
  private report(err: unknown, fatalByDefault: boolean): void {
    let pgErr: PgError;
    if (err instanceof PgError) {
      pgErr = err;
      if (err.isFatal) this.log.info({ code: err.code, msg: err.message }, 'connection closed with a fatal error');
      else this.log.warn({ code: err.code, err: err.message, ...err.logContext }, 'statement failed');
    } else {
      this.log.error({ err }, 'internal error');
      pgErr = new PgError(SqlState.InternalError, 'internal error', {}, fatalByDefault ? 'FATAL' : 'ERROR');
    }
    if (this.phase.name === 'closed') return;
    this.out.errorResponse(pgErr);
    if (pgErr.isFatal || this.phase.name !== 'ready') this.close();
  }

  /** Writes what has accumulated; false when the socket asks us to wait. */
  private flush(): boolean {
    if (this.passed.length > 0) {
      const chunks = this.passed.splice(0);
      this.passedBytes = 0;
      if (this.out.length > 0) chunks.push(this.out.take());
      if (this.transport.writev !== undefined) return this.transport.writev(chunks);
      let ok = true;
      for (const chunk of chunks) ok = this.transport.write(chunk);
      return ok;
    }
    if (this.out.length === 0) return true;
    return this.transport.write(this.out.take());
  }

  private close(): void {
    if (this.phase.name === 'closed') return;
    this.stopIdleTimer();
    if (this.startupTimer !== null) clearTimeout(this.startupTimer);
    this.startupTimer = null;
    this.flush();
    this.phase = { name: 'closed' };
    this.queue.length = 0;
    this.transport.end();
    const handler = this.handler;
    this.handler = null;
    const finish = (): void => {
      this.opts.onClose();
      this.closedResolve?.();
    };
    if (handler === null) {
      finish();
    } else {
      handler.close().then(finish, (err: unknown) => {
        this.log.error({ err }, 'closing the connection handler failed');
        finish();
      });
    }
  }
}

function checkFormats(formats: readonly number[], count: number, what: string): void {
  if (formats.length > 1 && formats.length !== count) {
    throw new PgError(SqlState.ProtocolViolation, `bind message has ${formats.length} ${what} formats but ${count} ${what}s`);
  }
  for (const f of formats) {
    if (f !== 0 && f !== 1) throw new PgError(SqlState.ProtocolViolation, `unsupported format code: ${f}`);
  }
}
