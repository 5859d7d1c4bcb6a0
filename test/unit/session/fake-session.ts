import { serialize } from 'pg-protocol';
import type { BackendMessage, DatabaseError, DataRowMessage, ReadyForQueryMessage } from 'pg-protocol/dist/messages.js';
import { Parser } from 'pg-protocol/dist/parser.js';
import { PgError } from '../../../src/errors/pg-error.js';
import { SqlState } from '../../../src/errors/sqlstate.js';
import type { TransactionStatus } from '../../../src/protocol/codes.js';
import { Framer } from '../../../src/protocol/framer.js';
import type { FieldDescription } from '../../../src/protocol/messages.js';
import { AuthPolicy } from '../../../src/session/auth.js';
import type {
  ConnectionHandler,
  ExecuteOutcome,
  HandlerFactory,
  Portal,
  PreparedStatement,
  ResultSink,
  SessionInfo,
  StatementSource,
} from '../../../src/session/handler-port.js';
import { Session, type SessionLog, type SessionOptions, type Transport } from '../../../src/session/session.js';

/**
 * A Transport with no socket behind it: what the session writes is decoded by
 * pg-protocol's Parser (node-postgres's own decoder, independent of our
 * encoder), and tests wait on the decoded messages instead of sleeping.
 */
export class FakeTransport implements Transport {
  readonly startTls = null;
  readonly received: BackendMessage[] = [];
  ended = false;
  private cursor = 0;
  private readonly parser = new Parser();
  private waiters: Array<() => void> = [];

  constructor(
    readonly remoteAddress = '127.0.0.1',
    readonly tls = false,
  ) {}

  write(data: Buffer): boolean {
    this.parser.parse(data, (msg) => this.received.push(msg));
    this.wake();
    return true;
  }

  drain(): Promise<void> {
    return Promise.resolve();
  }

  pauseInput(): void {}

  resumeInput(): void {}

  end(): void {
    this.ended = true;
    this.wake();
  }

  /**
   * Resolves with every message not yet taken, up to and including the next
   * one named `name`; rejects if the session ends the connection first, so a
   * missing message fails the test instead of hanging it.
   */
  async until(name: BackendMessage['name']): Promise<BackendMessage[]> {
    for (;;) {
      const i = this.received.findIndex((m, k) => k >= this.cursor && m.name === name);
      if (i >= 0) {
        const out = this.received.slice(this.cursor, i + 1);
        this.cursor = i + 1;
        return out;
      }
      if (this.ended) {
        throw new Error(`connection ended before ${name}; got ${names(this.received.slice(this.cursor)).join(', ')}`);
      }
      await new Promise<void>((resolve) => this.waiters.push(resolve));
    }
  }

  /** Messages received and not yet taken by until(). */
  pending(): BackendMessage[] {
    return this.received.slice(this.cursor);
  }

  private wake(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
  }
}

export function names(messages: readonly BackendMessage[]): string[] {
  return messages.map((m) => m.name);
}

export function errorsOf(messages: readonly BackendMessage[]): DatabaseError[] {
  return messages.filter((m): m is DatabaseError => m.name === 'error');
}

export function rowsOf(messages: readonly BackendMessage[]): unknown[][] {
  return messages.filter((m): m is DataRowMessage => m.name === 'dataRow').map((m) => m.fields);
}

export function statusOf(messages: readonly BackendMessage[]): string {
  const last = messages.at(-1);
  if (last?.name !== 'readyForQuery') throw new Error(`expected to end with readyForQuery; got ${names(messages).join(', ')}`);
  return (last as ReadyForQueryMessage).status;
}

/** What a statement does, keyed by its SQL text; unscripted statements succeed with no rows. */
export interface Script {
  /** Result columns; absent means NoData. */
  readonly columns?: readonly string[];
  readonly rows?: readonly (readonly string[])[];
  readonly tag?: string;
  /** The call that throws `error`. */
  readonly failIn?: 'prepare' | 'bind' | 'execute';
  readonly error?: unknown;
  /** The transaction status once it has executed. */
  readonly status?: TransactionStatus;
}

export interface FakeStatement extends PreparedStatement {
  readonly id: string;
  readonly sql: string;
}

export interface FakePortal extends Portal {
  readonly id: string;
  readonly statement: FakeStatement;
  readonly params: readonly (Buffer | null)[];
  readonly paramFormats: readonly number[];
  /** Rows already sent, for Execute with a row limit. */
  sent: number;
}

const TEXT_OID = 25;

function textFields(columns: readonly string[] | undefined): FieldDescription[] | null {
  if (columns === undefined) return null;
  return columns.map((name) => ({ name, tableOid: 0, columnAttr: 0, typeOid: TEXT_OID, typeSize: -1, typeModifier: -1, format: 0 }));
}

/**
 * A ConnectionHandler that records every call and plays scripted results. It
 * keeps just enough transaction state (BEGIN, COMMIT, ROLLBACK, failure) to
 * show that the session reports the handler's status, not its own guess.
 */
export class FakeHandler implements ConnectionHandler {
  readonly reportedParameters: ReadonlyArray<readonly [string, string]> = [
    ['server_version', '16.0'],
    ['client_encoding', 'UTF8'],
  ];
  readonly calls: string[] = [];
  readonly scripts = new Map<string, Script>([
    ['BEGIN', { tag: 'BEGIN', status: 'T' }],
    ['COMMIT', { tag: 'COMMIT', status: 'I' }],
    ['ROLLBACK', { tag: 'ROLLBACK', status: 'I' }],
  ]);
  status: TransactionStatus = 'I';
  /** Thrown by sync() when set, once. */
  syncError: unknown = null;
  closed = false;
  /** Every portal bound, in order (simple queries bind one per statement too). */
  readonly portals: FakePortal[] = [];
  private nextStatement = 1;
  private nextPortal = 1;

  script(sql: string, script: Script): this {
    this.scripts.set(sql, script);
    return this;
  }

  private scriptOf(sql: string): Script {
    return this.scripts.get(sql) ?? {};
  }

  transactionStatus(): TransactionStatus {
    return this.status;
  }

  idleInTransactionTimeoutMs(): number {
    return 0;
  }

  splitQuery(sql: string): readonly StatementSource[] {
    const out: StatementSource[] = [];
    let offset = 0;
    for (const part of sql.split(';')) {
      if (part.trim() !== '') out.push({ text: part.trim(), offset: offset + part.indexOf(part.trim()) });
      offset += part.length + 1;
    }
    return out;
  }

  async beginQueryString(statements: readonly StatementSource[]): Promise<void> {
    this.calls.push(`beginQueryString:${statements.length}`);
  }

  async endQueryString(succeeded: boolean): Promise<void> {
    this.calls.push(`endQueryString:${succeeded}`);
  }

  async prepare(source: string | StatementSource, paramTypes: readonly number[]): Promise<PreparedStatement> {
    const sql = typeof source === 'string' ? source : source.text;
    const id = `s${this.nextStatement++}`;
    this.calls.push(`prepare:${id}:${sql}`);
    const script = this.scriptOf(sql);
    if (script.failIn === 'prepare') throw script.error;
    // As PostgreSQL does, the statement takes as many parameters as its highest $n, typed text unless Parse said otherwise.
    const highest = Math.max(0, ...[...sql.matchAll(/\$(\d+)/g)].map((m) => Number(m[1])));
    const types = Array.from({ length: Math.max(highest, paramTypes.length) }, (_, i) => paramTypes[i] || TEXT_OID);
    const statement: FakeStatement = { id, sql, paramTypes: types, fields: textFields(script.columns) };
    return statement;
  }

  async bind(statement: PreparedStatement, params: readonly (Buffer | null)[], paramFormats: readonly number[]): Promise<Portal> {
    const s = statement as FakeStatement;
    const id = `p${this.nextPortal++}`;
    this.calls.push(`bind:${id}:${s.id}`);
    const script = this.scriptOf(s.sql);
    if (script.failIn === 'bind') throw script.error;
    const portal: FakePortal = { id, statement: s, params, paramFormats, fields: s.fields, sent: 0 };
    this.portals.push(portal);
    return portal;
  }

  async execute(portal: Portal, maxRows: number, sink: ResultSink): Promise<ExecuteOutcome> {
    const p = portal as FakePortal;
    this.calls.push(`execute:${p.id}:${maxRows}`);
    const script = this.scriptOf(p.statement.sql);
    if (this.status === 'E' && script.status !== 'I') {
      throw new PgError(SqlState.InFailedSqlTransaction, 'current transaction is aborted, commands ignored until end of transaction block');
    }
    if (script.failIn === 'execute') throw script.error;
    // A statement with parameters and no scripted rows answers with its parameters, so a test can tell portals apart.
    const rows = script.rows ?? (p.params.length > 0 ? [p.params.map((b) => b?.toString('utf8') ?? '')] : []);
    const end = maxRows > 0 ? Math.min(rows.length, p.sent + maxRows) : rows.length;
    const count = end - p.sent;
    for (; p.sent < end; p.sent++) sink.row(rows[p.sent] as readonly string[]);
    if (p.sent < rows.length) return { done: false };
    if (script.status !== undefined) this.status = script.status;
    return { done: true, tag: script.tag ?? `SELECT ${count}` };
  }

  closePortal(portal: Portal): void {
    this.calls.push(`closePortal:${(portal as FakePortal).id}`);
  }

  closeStatement(statement: PreparedStatement): void {
    this.calls.push(`closeStatement:${(statement as FakeStatement).id}`);
  }

  cursorPortal(): Portal | null {
    return null;
  }

  async sync(): Promise<void> {
    this.calls.push('sync');
    const err = this.syncError;
    this.syncError = null;
    if (err !== null) throw err;
  }

  failTransaction(): void {
    this.calls.push('failTransaction');
    if (this.status === 'T') this.status = 'E';
  }

  takeParameterChanges(): ReadonlyArray<readonly [string, string]> {
    return [];
  }

  cancel(): void {
    this.calls.push('cancel');
  }

  async close(): Promise<void> {
    this.closed = true;
  }

  /** The id of the portal bound last. */
  lastPortalId(): string {
    const last = this.portals.at(-1);
    if (last === undefined) throw new Error('no portal was bound');
    return last.id;
  }

  /** The recorded calls of one kind, e.g. `of('execute')`. */
  of(kind: string): string[] {
    return this.calls.filter((c) => c.startsWith(`${kind}:`) || c === kind);
  }
}

const quietLog: SessionLog = {
  info: () => undefined,
  warn: () => undefined,
  error: () => undefined,
  debug: () => undefined,
  child: () => quietLog,
};

export interface Harness {
  readonly session: Session;
  readonly transport: FakeTransport;
  readonly handler: FakeHandler;
  /** What the handler factory was asked to open. */
  readonly opened: SessionInfo[];
  /** Frames the bytes with the server's own Framer, as server/ does, and hands them to the session. */
  send(...messages: Buffer[]): void;
  onCloseCalls(): number;
}

export interface HarnessOptions {
  readonly transport?: FakeTransport;
  readonly auth?: AuthPolicy;
  readonly options?: Partial<SessionOptions>;
}

export const PROCESS_ID = 4242;
export const SECRET_KEY = 271828;

/** A session on a fake transport, before any byte has been sent. */
export function harness(opts: HarnessOptions = {}): Harness {
  const transport = opts.transport ?? new FakeTransport();
  const handler = new FakeHandler();
  const opened: SessionInfo[] = [];
  const handlers: HandlerFactory = {
    open: async (info) => {
      opened.push(info);
      return handler;
    },
  };
  let closes = 0;
  const session = new Session(transport, {
    processId: PROCESS_ID,
    secretKey: SECRET_KEY,
    auth: opts.auth ?? new AuthPolicy([], 'trust'),
    handlers,
    log: quietLog,
    onCancelRequest: () => undefined,
    admit: () => null,
    authenticated: () => undefined,
    onClose: () => {
      closes++;
    },
    slowStatementMs: 0,
    startupTimeoutMs: 60_000,
    maxPreparedStatements: 100,
    maxPortals: 100,
    ...opts.options,
  });
  const framer = new Framer(1 << 20);
  return {
    session,
    transport,
    handler,
    opened,
    send: (...messages) => {
      for (const frame of framer.push(Buffer.concat(messages))) session.receive(frame);
    },
    onCloseCalls: () => closes,
  };
}

/** A session past trust authentication, its startup messages already taken. */
export async function ready(opts: HarnessOptions = {}): Promise<Harness> {
  const h = harness(opts);
  h.send(serialize.startup({ user: 'alice', database: 'ledger' }));
  await h.transport.until('readyForQuery');
  return h;
}

/** Parse (unnamed), Bind (unnamed), Execute: one statement of an extended-query pipeline. */
export function pbe(sql: string, values: unknown[] = []): Buffer[] {
  return [serialize.parse({ text: sql }), serialize.bind({ values }), serialize.execute({})];
}
