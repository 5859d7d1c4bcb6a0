import type { PgError } from '../errors/pg-error.js';
import type { TransactionStatus } from '../protocol/codes.js';
import type { FrameSink } from '../protocol/frame-sink.js';
import type { DataRowWriter } from '../protocol/encode.js';
import type { FieldDescription } from '../protocol/messages.js';

/** What the session knows about a connection once it is authenticated. */
export interface SessionInfo {
  readonly processId: number;
  readonly user: string;
  readonly database: string;
  /** Every StartupMessage parameter except user and database. */
  readonly startupParameters: ReadonlyMap<string, string>;
  readonly remoteAddress: string;
  readonly tls: boolean;
  /** reader, writer or admin. */
  readonly role: string;
  /** Column values the ledger writer stamps on this user's appends (agent_id, org_id). */
  readonly identity: Readonly<Record<string, string>>;
}

/** Where a statement's output goes; the session turns it into protocol messages. */
export interface ResultSink {
  row(cells: readonly (string | Uint8Array | null)[]): void;
  /** A whole DataRow message, already encoded (a relayed backend's, sent on as it came). */
  rowFrame?(frame: Uint8Array): void;
  /** Rows written cell by cell (the same DataRow messages as row() writes). */
  readonly dataRows?: DataRowWriter;
  notice(notice: PgError): void;
  /**
   * Flushes the output when enough has accumulated, and waits while the
   * socket is congested. Producers call it between batches of rows, which is
   * how a large result respects backpressure.
   */
  flushIfFull(): Promise<void>;
  /** COPY ... TO STDOUT: CopyOutResponse, then copyData per line, then copyDone. */
  copyOutStart(columns: number): void;
  copyData(data: string): void;
  copyDone(): void;
}

/** One statement of a query string, with where it starts (for error positions). */
export interface StatementSource {
  readonly text: string;
  readonly offset: number;
}

/** A parsed statement, as Parse and Describe (statement) see it. */
export interface PreparedStatement {
  readonly paramTypes: readonly number[];
  /** The result columns with text format, or null when it returns no rows (NoData). */
  readonly fields: readonly FieldDescription[] | null;
}

/** A bound statement, ready to execute. */
export interface Portal {
  /** The result columns with the formats that Bind asked for, or null (NoData). */
  readonly fields: readonly FieldDescription[] | null;
}

/** The receiving end of COPY ... FROM STDIN. */
export interface CopyIn {
  /** Number of columns, for CopyInResponse. */
  readonly columns: number;
  write(data: Buffer): Promise<void>;
  /** CopyDone: completes the copy; returns the CommandComplete tag. */
  finish(): Promise<string>;
  /** CopyFail, or an error: nothing of the copy may remain. */
  abort(): Promise<void>;
}

/** Not relayed, or relayed with the statement's error (already excluded from what went to the client). */
export type RelayedWhole = { readonly relayed: false } | { readonly relayed: true; readonly error: PgError | null };

export type ExecuteOutcome =
  /** Finished; `tag` is the CommandComplete tag, or null for an empty query. */
  | {
      readonly done: true;
      readonly tag: string | null;
      /** DEALLOCATE / DISCARD ALL: the protocol-level prepared statement to forget (null: all of them). */
      readonly deallocate?: { readonly name: string | null };
    }
  /** maxRows reached; Execute may be called again. */
  | { readonly done: false }
  /** COPY FROM STDIN: the session switches to copy-in mode and feeds the data here. */
  | { readonly done: 'copy-in'; readonly copy: CopyIn };

/**
 * The application side of one connection: the session does the protocol
 * bookkeeping and calls these "do" operations (pgwire's on_/do_ split).
 * Every method may throw a PgError; anything else becomes XX000.
 */
/** Already received after a Bind: an Execute of its portal for all its rows, and whether a Sync (or a simple query's end) comes next. */
export interface BindAhead {
  readonly sync: boolean;
}

export interface ConnectionHandler {
  /** ParameterStatus values sent at startup, after authentication. */
  readonly reportedParameters: ReadonlyArray<readonly [string, string]>;
  transactionStatus(): TransactionStatus;
  /** The session's idle_in_transaction_session_timeout, in milliseconds (0 = none). */
  idleInTransactionTimeoutMs(): number;
  /** Splits a simple-query string into statements; an empty array is an empty query. */
  splitQuery(sql: string): readonly StatementSource[];
  /**
   * Runs before the statements of one simple-query string and after them
   * (with whether all succeeded): a string of several statements runs in one
   * implicit transaction, as in PostgreSQL.
   */
  beginQueryString(statements: readonly StatementSource[]): Promise<void>;
  endQueryString(succeeded: boolean): Promise<void>;
  /**
   * A string comes from Parse and may be empty; a StatementSource comes from
   * splitQuery. `named`: Parse gave it a name, so it may be bound many times.
   */
  prepare(sql: string | StatementSource, paramTypes: readonly number[], named?: boolean): Promise<PreparedStatement>;
  /**
   * `ahead` is what the client has already sent after this Bind, when the
   * session knows it: a handler that relays to another server may send it
   * on with the Bind, one round trip instead of three.
   */
  bind(
    statement: PreparedStatement,
    params: readonly (Buffer | null)[],
    paramFormats: readonly number[],
    resultFormats: readonly number[],
    ahead?: BindAhead,
  ): Promise<Portal>;
  execute(portal: Portal, maxRows: number, sink: ResultSink): Promise<ExecuteOutcome>;
  /**
   * A Bind whose Execute of all rows (after a Describe of its portal, when
   * `describe`) and a Sync the client sent with it, or a simple query of one
   * statement: an engine that is itself a PostgreSQL may pass the exchange on
   * whole and its answer back as PostgreSQL sent it, to `out`, up to and
   * without ReadyForQuery. Not relayed: nothing was done, and the session
   * takes the messages one by one.
   */
  relayBound?(
    statement: PreparedStatement,
    params: readonly (Buffer | null)[],
    paramFormats: readonly number[],
    resultFormats: readonly number[],
    describe: boolean,
    out: FrameSink,
  ): Promise<RelayedWhole>;
  relayQuery?(statement: StatementSource, out: FrameSink): Promise<RelayedWhole>;
  /**
   * The same for an unnamed statement's Parse followed by such an exchange:
   * parsed, bound and run in one round trip. `statement` is the unnamed
   * statement the Parse made (null if it failed), for the client's later use.
   */
  relayParse?(
    sql: string,
    paramTypes: readonly number[],
    bind: { readonly params: readonly (Buffer | null)[]; readonly paramFormats: readonly number[]; readonly resultFormats: readonly number[] },
    describe: boolean,
    out: FrameSink,
  ): Promise<RelayedWhole & { readonly statement?: PreparedStatement | null }>;
  closePortal(portal: Portal): void;
  closeStatement(statement: PreparedStatement): void;
  /** A cursor opened with DECLARE, which the protocol can Describe as a portal of the same name (psycopg 3 does). */
  cursorPortal(name: string): Portal | null;
  /**
   * Sync: the end of an extended-query exchange, before ReadyForQuery (an
   * engine that is itself a PostgreSQL ends its implicit transaction here).
   * An error it throws is reported before ReadyForQuery.
   */
  sync?(): Promise<void>;
  /** An error outside execute (for example in Bind) still fails an open transaction block. */
  failTransaction(): void;
  /** ParameterStatus changes since the last call, reported before ReadyForQuery. */
  takeParameterChanges(): ReadonlyArray<readonly [string, string]>;
  /** CancelRequest: interrupt the running statement, if any. */
  cancel(): void;
  close(): Promise<void>;
}

export interface HandlerFactory {
  open(info: SessionInfo): Promise<ConnectionHandler>;
}
