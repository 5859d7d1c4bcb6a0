import type { PgError } from '../errors/pg-error.js';
import type { FrameSink } from '../protocol/frame-sink.js';
import type { DataRowWriter } from '../protocol/encode.js';
import type { ParsedStatement } from '../sql/parsed.js';

/**
 * What the rest of cotwire sees of the database engine. The DuckDB wing's adapter is the
 * only code that imports @duckdb/node-api, the PostgreSQL wing's the only code
 * that talks to a PostgreSQL engine (docs/scaling.md).
 */

/** A result column as PostgreSQL describes it. */
export interface ColumnInfo {
  readonly name: string;
  readonly typeOid: number;
  readonly typeSize: number;
  readonly typeModifier: number;
}

/** The statement kinds DuckDB's parser reports (StatementType), by name. */
export type StatementKind =
  | 'SELECT'
  | 'INSERT'
  | 'UPDATE'
  | 'DELETE'
  | 'MERGE_INTO'
  | 'EXPLAIN'
  | 'PREPARE'
  | 'EXECUTE'
  | 'CREATE'
  | 'CREATE_FUNC'
  | 'ALTER'
  | 'DROP'
  | 'TRANSACTION'
  | 'COPY'
  | 'COPY_DATABASE'
  | 'ANALYZE'
  | 'VARIABLE_SET'
  | 'SET'
  | 'EXPORT'
  | 'PRAGMA'
  | 'VACUUM'
  | 'CALL'
  | 'LOAD'
  | 'RELATION'
  | 'EXTENSION'
  | 'LOGICAL_PLAN'
  | 'ATTACH'
  | 'DETACH'
  | 'MULTI'
  | 'UPDATE_EXTENSIONS'
  | 'INVALID';

/** A parameter value as it arrived in Bind. */
export interface WireParam {
  readonly value: Buffer | null;
  /** 0 text, 1 binary. */
  readonly format: number;
  /** The PostgreSQL type the value is in. */
  readonly typeOid: number;
}

/** Session settings that change how values are rendered. */
export interface RenderSettings {
  /** IANA zone for timestamptz output. */
  readonly timeZone: string;
}

export interface RowSink {
  row(cells: readonly (string | Uint8Array | null)[]): void;
  /**
   * A row already encoded as a DataRow message in text format (a cached
   * row), sent as it is. A sink that rewrites cells leaves it out, and is
   * given the cells instead.
   */
  rowFrame?(frame: Uint8Array): void;
  /**
   * Where a producer may write rows cell by cell instead of calling row(),
   * in the formats it was asked for. A sink that rewrites cells leaves it out.
   */
  readonly dataRows?: DataRowWriter;
  /** Called between batches; resolves when the consumer can take more. */
  flushIfFull(): Promise<void>;
}

export interface EngineStatement {
  readonly kind: StatementKind;
  /** PostgreSQL OIDs of the parameters; 0 where the engine could not infer a type. */
  readonly paramTypes: readonly number[];
  /** Result columns, or null when the statement returns only a row count. */
  readonly columns: readonly ColumnInfo[] | null;
  bind(params: readonly WireParam[]): void;
  /** Starts execution; rows are pulled from the cursor. */
  /**
   * Runs it. `materialize` reads the whole result in one call to the engine
   * (for results known to be small, such as the rows of a client's VALUES);
   * otherwise rows stream chunk by chunk.
   */
  execute(options?: { readonly materialize?: boolean }): Promise<EngineCursor>;
  /**
   * The text-format cells this statement's result would hold for rows given
   * as a ledger's canonical texts in result-column order (CAST(value AS
   * VARCHAR), timestamptz as epoch microseconds), rendered as fetch()
   * renders the stored values; null when a column's type cannot be rebuilt
   * from its text. Serves the writer's rows without reading them back.
   */
  renderCanonical?(rows: ReadonlyArray<ReadonlyArray<string | null>>, settings: RenderSettings): Array<Array<string | null>> | null;
  /**
   * The statement itself waits, where it reads the engine, until the engine
   * holds every acknowledged ledger append; the handler otherwise waits
   * before every read (engines/duckdb/handler/context.ts, appendsVisible).
   */
  readonly waitsForAppends?: boolean;
  close(): void;
}

export interface EngineCursor {
  /** Rows affected, for statements that report a count. */
  readonly rowsChanged: number;
  /** Whether the statement produced a result set (SELECT, RETURNING, SHOW ...). */
  readonly returnsRows: boolean;
  /**
   * Renders up to `maxRows` rows (0 = all) into `sink` in the given formats,
   * respecting the sink's backpressure. Returns how many were sent and whether the result is exhausted.
   */
  fetch(maxRows: number, formats: readonly (0 | 1)[], sink: RowSink, settings: RenderSettings): Promise<{ readonly rows: number; readonly done: boolean }>;
  close(): void;
}

/** Where append() writes. */
export interface AppendTarget {
  readonly catalog: string;
  readonly schema: string;
  readonly name: string;
}

/** How append() reads one column's value. */
export interface AppendColumn {
  readonly epochMicros: boolean;
  /** The column is FLOAT[floats], and its values are Float32Arrays of that length. */
  readonly floats?: number;
}

/** One value for append(): text, a vector for a `floats` column, or null. */
export type AppendValue = string | Float32Array | null;

/** A connection the server runs its own SQL on, in the engine's dialect. */
export interface SqlConnection {
  /** Runs a statement text with no parameters and discards its result. */
  run(sql: string): Promise<void>;
  /** Runs a server-internal query with text parameters and returns its rows as plain values. */
  query(sql: string, params?: readonly (string | null)[]): Promise<unknown[][]>;
  close(): void;
}

export interface EngineConnection extends SqlConnection {
  /**
   * Prepares exactly one statement; several in one string are an error.
   * `declaredTypes` are the PostgreSQL OIDs a client gave in Parse (0 = infer).
   * `parsed`, the caller's parsed form of `sql`, spares the engine a parse of its own.
   */
  prepare(sql: string, declaredTypes: readonly number[], parsed?: ParsedStatement): Promise<EngineStatement>;
  /**
   * Appends rows to a table in bulk, inside the connection's current
   * transaction. Each value is the text of the column's value (cast to the
   * column's type as CAST(text AS type) would), or null; a column marked
   * `epochMicros` takes microseconds since the epoch instead, and one
   * marked `floats` a Float32Array.
   */
  append(table: AppendTarget, columns: readonly AppendColumn[], rows: ReadonlyArray<ReadonlyArray<AppendValue>>): Promise<void>;
  interrupt(): void;
}

/**
 * A scalar SQL function computed in the server (the Merkle proofs): it runs
 * synchronously on the event loop, so it must be quick. It answers null for
 * arguments it cannot serve, and for a null argument.
 */
export interface EngineFunction {
  readonly name: string;
  readonly parameters: readonly ('BIGINT' | 'VARCHAR')[];
  /** Its answer may change between calls with the same arguments (the engine must not fold it into a plan). */
  readonly volatile?: boolean;
  call(args: ReadonlyArray<bigint | string>): string | null;
}

export interface Engine {
  /** For version(): the engine's own version string. */
  readonly version: string;
  connect(): Promise<EngineConnection>;
  /** Makes a function callable from every connection, as system.main.<name>. */
  registerFunction(fn: EngineFunction): Promise<void>;
  /** The engine's built-in function names, lower case (no client object may take one). */
  builtinFunctionNames(): Promise<ReadonlySet<string>>;
  /** The engine's own setting names, lower case. */
  settingNames(): Promise<ReadonlySet<string>>;
  checkpoint(): Promise<void>;
  close(): Promise<void>;
}

// ---- A PostgreSQL engine: client statements relayed to a backend of their own (the PostgreSQL wing) ----

export interface BackendField {
  readonly name: string;
  readonly tableID: number;
  readonly columnID: number;
  readonly dataTypeID: number;
  readonly dataTypeSize: number;
  readonly dataTypeModifier: number;
}

export type BackendStatus = 'I' | 'T' | 'E';

export type FetchOutcome =
  | { readonly kind: 'suspended' }
  | { readonly kind: 'complete'; readonly tag: string }
  | { readonly kind: 'empty' }
  | { readonly kind: 'copy-in'; readonly columns: number }
  | { readonly kind: 'copy-out'; readonly columns: number };

/** A value for Bind: text, binary (a Buffer), or NULL. */
export type BindValue = string | Buffer | null;

export interface PortalOptions {
  readonly executeAll?: { readonly sync: boolean };
  readonly takesFrames?: boolean;
  /** What describe answered for this statement: bound without parsing it again, while the backend holds it. */
  readonly statement?: string;
}

/** An exchange a relayed backend answers whole (`RelayBackend.relayWhole`). */
export type WholeExchange =
  | {
      readonly kind: 'bound';
      /** What describe answered for the statement. */
      readonly statement: string;
      readonly params: readonly (Uint8Array | null)[];
      readonly paramFormats: readonly number[];
      readonly resultFormats: readonly number[];
      /** The client described the portal. */
      readonly describe: boolean;
    }
  | {
      /** The unnamed statement parsed (and described, for the client's later use of it) in the same write. */
      readonly kind: 'parsed';
      readonly sql: string;
      readonly types: readonly number[];
      readonly params: readonly (Uint8Array | null)[];
      readonly paramFormats: readonly number[];
      readonly resultFormats: readonly number[];
      readonly describe: boolean;
    }
  | { readonly kind: 'query'; readonly sql: string };

/**
 * Not relayed (nothing was sent), or relayed with the statement's error, if
 * any; for a Parse that PostgreSQL took, what describe would have answered.
 */
export type WholeOutcome =
  | { readonly relayed: false }
  | {
      readonly relayed: true;
      readonly error: PgError | null;
      readonly described?: { readonly paramTypes: number[]; readonly fields: BackendField[] | null; readonly statement: string };
    };

/**
 * One client connection's backend on a PostgreSQL engine: the extended
 * protocol as the client speaks it, with the backend's Sync at the
 * client's. Results come as text.
 */
export interface RelayBackend {
  readonly status: BackendStatus;
  readonly inExchange: boolean;
  readonly failed: boolean;
  /** The backend's connection is gone: whatever the session does next ends it. */
  readonly broken: Error | null;
  onNotice: (notice: PgError) => void;
  takeParameterChanges(): Array<[string, string]>;
  reportedSettings(): Array<[string, string]>;
  /**
   * Parse and Describe statement. `statement` is the parse, for openPortal:
   * with `keep` it stays until closeStatement (a client's named statement),
   * else until the next statement parsed without a name.
   */
  describe(
    sql: string,
    types: readonly number[],
    keep?: boolean,
  ): Promise<{ readonly paramTypes: number[]; readonly fields: BackendField[] | null; readonly statement: string }>;
  closeStatement(statement: string): void;
  /**
   * Parse (unless `statement` holds it), Bind (results in `resultFormats`,
   * one per column or one for all) and Describe portal. With `executeAll`,
   * the portal's Execute goes too (and Sync), its rows held for fetch. With
   * `takesFrames`, the caller's fetches take rows as the backend sent them
   * (onFrame), in the formats asked for; otherwise rows are parsed, and
   * only text may be asked for.
   */
  openPortal(
    portal: string,
    sql: string,
    types: readonly number[],
    values: readonly BindValue[],
    resultFormats: readonly number[],
    options?: PortalOptions,
  ): Promise<BackendField[] | null>;
  /** Rows go to `onRow`, or to `onFrame` as the DataRow messages the backend sent, when they need no conversion. */
  fetch(
    portal: string,
    rows: number,
    onRow: (cells: ReadonlyArray<string | Uint8Array | null>) => void,
    onFrame?: (frame: Uint8Array) => void,
  ): Promise<FetchOutcome>;
  /** A statement of the server's own, run whole in one round trip; its rows in text. Answers the tag. */
  run(
    portal: string,
    sql: string,
    types: readonly number[],
    values: readonly BindValue[],
    onRow: (cells: ReadonlyArray<string | null>) => void,
  ): Promise<string>;
  copyOut(onData: (data: Buffer) => void): Promise<string>;
  copyInData(data: Buffer): Promise<void>;
  copyInDone(): Promise<string>;
  copyInFail(message: string): Promise<void>;
  closePortal(portal: string): Promise<void>;
  /**
   * Outside any exchange and transaction: sends a Bind (of a statement
   * describe holds), its Describe and Execute and a Sync, or a simple query,
   * and passes PostgreSQL's answer to `out` as it comes, up to and without
   * its ReadyForQuery. Declines, having sent nothing, when it cannot.
   */
  relayWhole(exchange: WholeExchange, out: FrameSink): Promise<WholeOutcome>;
  sync(): Promise<BackendStatus>;
  cancel(): void;
  close(): Promise<void>;
}
