import type { EventEmitter } from 'node:events';
import { connect as netConnect } from 'node:net';
import pg from 'pg';
import { PgError, type Severity } from '../../../errors/pg-error.js';
import { SqlState } from '../../../errors/sqlstate.js';
import type { BackendField, BackendStatus, BindValue, FetchOutcome, PortalOptions, RelayBackend, WholeExchange, WholeOutcome } from '../../../engine/port.js';
import { BackendCode } from '../../../protocol/codes.js';
import type { FrameSink } from '../../../protocol/frame-sink.js';
import { bindMessage, bindOfValues } from './bind-message.js';
import { engineError, KEEPALIVE_DELAY_MS, standbyReached } from './connection.js';
import { RowTap } from './row-tap.js';
import { dataRowCells } from '../../../protocol/encode.js';

/**
 * One client connection's own PostgreSQL backend, as the client role,
 * through node-postgres. The extended protocol is spoken as the client
 * speaks it: each Parse, Bind, Describe and Execute goes to the backend in
 * turn, and the backend's Sync comes with the client's, so a string of
 * statements and an implicit transaction end where PostgreSQL would end
 * them. Between two Syncs the exchange is one node-postgres query object
 * (`SyncGroup`): node-postgres connects, authenticates and parses, and
 * hands every backend message of the group to it.
 *
 * A client's rows are not parsed: the row tap takes each DataRow as
 * PostgreSQL sent it, in the formats the client asked for (node-postgres
 * reads text only). Rows are fetched in batches (Execute with a row limit),
 * each handed on before the next is asked for, so a large result waits for a
 * slow client instead of filling memory. A client's named statement is
 * parsed once, under a name of cotwire's, and bound from then on.
 */

type Message =
  | { kind: 'parseComplete' }
  | { kind: 'bindComplete' }
  | { kind: 'closeComplete' }
  | { kind: 'noData' }
  | { kind: 'parameterDescription'; types: number[] }
  | { kind: 'rowDescription'; fields: BackendField[] }
  | { kind: 'portalSuspended' }
  | { kind: 'commandComplete'; tag: string }
  | { kind: 'emptyQuery' }
  | { kind: 'copyInResponse'; columns: number }
  | { kind: 'copyOutResponse'; columns: number }
  | { kind: 'copyDone' }
  | { kind: 'copyData'; data: Buffer }
  | { kind: 'error'; error: unknown }
  /** Not PostgreSQL's: a fetch of rows already asked for has its batch, and the rest waits. */
  | { kind: 'batchFull' };

/** The node-postgres connection object's calls this module makes. */
interface Wire {
  parse(config: { name?: string; text: string; types?: number[] }): void;
  bind(config: { portal?: string; statement?: string; values?: BindValue[]; binary?: boolean }): void;
  describe(config: { type: 'S' | 'P'; name?: string }): void;
  execute(config: { portal?: string; rows?: number }): void;
  close(config: { type: 'S' | 'P'; name?: string }): void;
  flush(): void;
  sync(): void;
  query(text: string): void;
  sendCopyFromChunk(chunk: Buffer): void;
  endCopyFrom(): void;
  sendFailToCopyFrom(message: string): void;
  on(event: string, listener: (msg: unknown) => void): void;
  removeListener(event: string, listener: (msg: unknown) => void): void;
}

/** The backend messages of one exchange between two Syncs, in order. */
class SyncGroup {
  private wire: Wire | null = null;
  private readonly inbox: Message[] = [];
  private waiter: (() => void) | null = null;
  private readonly submitted: Promise<void>;
  private markSubmitted: () => void = () => undefined;
  private readonly done: Promise<void>;
  private markDone: () => void = () => undefined;
  /** Rows go here while a fetch runs: parsed, or as DataRow frames when the row tap takes them. */
  onRow: ((fields: ReadonlyArray<string | null>) => void) | null = null;
  onFrame: ((frame: Buffer) => void) | null = null;
  /**
   * Rows (parsed, or frames) and notices that came with no fetch to take
   * them (an Execute sent ahead with its Bind), in order; null when nobody
   * will ask for them.
   */
  held: Held[] | null = null;
  /** The group's Sync was sent (with an Execute sent ahead): sync() only waits for its end. */
  synced = false;
  /** The backend failed a statement: it ignores everything until Sync. */
  failed = false;
  /** Something was written in this exchange: the backend may be skipping what follows an error. */
  written = false;
  /** Why the group was never submitted. */
  private failure: unknown = null;
  /** The connection went (abandon). */
  private gone: Error | null = null;
  private readonly listeners: Array<[string, (msg: unknown) => void]> = [
    ['parseComplete', () => this.push({ kind: 'parseComplete' })],
    ['bindComplete', () => this.push({ kind: 'bindComplete' })],
    ['closeComplete', () => this.push({ kind: 'closeComplete' })],
    ['noData', () => this.push({ kind: 'noData' })],
    ['parameterDescription', (m) => this.push({ kind: 'parameterDescription', types: (m as { dataTypeIDs: number[] }).dataTypeIDs })],
    ['copyOutResponse', (m) => this.push({ kind: 'copyOutResponse', columns: (m as { columnTypes: number[] }).columnTypes.length })],
    ['copyDone', () => this.push({ kind: 'copyDone' })],
    // Heard on the connection itself: after an ErrorResponse node-postgres stops passing messages to the query.
    ['readyForQuery', () => this.finish()],
  ];

  constructor() {
    this.submitted = new Promise((resolve) => {
      this.markSubmitted = resolve;
    });
    this.done = new Promise((resolve) => {
      this.markDone = resolve;
    });
  }

  // ---- node-postgres' query interface (Submittable) ----
  submit(connection: unknown): void {
    this.wire = connection as Wire;
    for (const [event, fn] of this.listeners) this.wire.on(event, fn);
    this.markSubmitted();
  }
  handleRowDescription(msg: { fields: BackendField[] }): void {
    this.push({ kind: 'rowDescription', fields: msg.fields });
  }
  handleDataRow(msg: { fields: Array<string | null> }): void {
    if (this.onRow !== null) this.onRow(msg.fields);
    else this.held?.push(msg.fields);
  }
  handlePortalSuspended(): void {
    this.push({ kind: 'portalSuspended' });
  }
  handleCommandComplete(msg: { text: string }): void {
    this.push({ kind: 'commandComplete', tag: msg.text });
  }
  handleEmptyQuery(): void {
    this.push({ kind: 'emptyQuery' });
  }
  handleCopyInResponse(): void {
    this.push({ kind: 'copyInResponse', columns: 0 });
  }
  handleCopyData(msg: { chunk: Buffer }): void {
    // COPY TO STDOUT's data may all arrive before the caller asks for it: it waits in the inbox.
    this.push({ kind: 'copyData', data: msg.chunk });
  }
  handleError(error: unknown): void {
    this.failed = true;
    this.push({ kind: 'error', error });
    // A client that can no longer query fails the group without submitting it: nothing will be sent.
    if (this.wire === null) {
      this.failure = error;
      this.markSubmitted();
      this.markDone();
    }
  }
  handleReadyForQuery(): void {
    this.finish();
  }

  /**
   * The connection went: nothing more will come, not even ReadyForQuery.
   * A call that waits now, or asks later, is failed with the loss, even when
   * the backend's own FATAL already failed the call before it: the call after
   * that one may be waiting for an answer.
   */
  abandon(err: Error): void {
    this.gone ??= err;
    if (!this.failed) this.handleError(err);
    else this.wake();
    this.finish();
  }

  private finish(): void {
    if (this.wire !== null) for (const [event, fn] of this.listeners) this.wire.removeListener(event, fn);
    this.markDone();
  }

  // ---- for the backend ----
  async ready(): Promise<Wire> {
    await this.submitted;
    if (this.wire === null) throw backendError(this.failure);
    return this.wire;
  }

  ended(): Promise<void> {
    return this.done;
  }

  /** The next message, skipping those in `skip`; an ErrorResponse rejects. */
  async next(skip: ReadonlySet<Message['kind']> = NONE): Promise<Message> {
    for (;;) {
      while (this.inbox.length === 0) {
        if (this.gone !== null) throw backendError(this.gone);
        await new Promise<void>((resolve) => {
          this.waiter = resolve;
        });
      }
      const m = this.inbox.shift() as Message;
      if (m.kind === 'error') throw backendError(m.error);
      if (!skip.has(m.kind)) return m;
    }
  }

  /** Marks where a fetch's batch ended: the messages after it are the next fetch's. */
  batchFull(): void {
    this.push({ kind: 'batchFull' });
  }

  private push(m: Message): void {
    this.inbox.push(m);
    this.wake();
  }

  private wake(): void {
    const w = this.waiter;
    this.waiter = null;
    w?.();
  }
}

type Held = ReadonlyArray<string | null> | Buffer | PgError;

const NONE: ReadonlySet<Message['kind']> = new Set();
const ACKS: ReadonlySet<Message['kind']> = new Set(['parseComplete', 'bindComplete', 'closeComplete']);

const TEXT = { getTypeParser: () => (v: string) => v };

const NOT_RELAYED: WholeOutcome = { relayed: false };
/** What a relayed exchange's answer holds for the client: BindComplete, RowDescription, NoData, DataRow, CommandComplete, EmptyQueryResponse, NoticeResponse. */
const ANSWERED: ReadonlySet<number> = new Set([
  BackendCode.BindComplete,
  BackendCode.RowDescription,
  BackendCode.NoData,
  BackendCode.DataRow,
  BackendCode.CommandComplete,
  BackendCode.EmptyQueryResponse,
  BackendCode.NoticeResponse,
]);

export class PgBackend implements RelayBackend {
  private group: SyncGroup | null = null;
  private lastStatus: BackendStatus = 'I';
  private readonly parameterChanges: Array<[string, string]> = [];
  /** The backend's reported settings (DateStyle, IntervalStyle, ...), as ParameterStatus gave them. */
  private readonly settings = new Map<string, string>();
  /** Open portals whose rows are taken as PostgreSQL sent them (in the client's formats), never parsed. */
  private readonly framed = new Set<string>();
  /** Notices the backend sent, for the statement that caused them. */
  onNotice: (notice: PgError) => void = () => undefined;
  /** The connection broke: the client's session cannot go on. */
  broken: Error | null = null;
  /** The portal whose Execute went with its Bind, until its result ends. */
  private ahead: string | null = null;
  /** DataRows as PostgreSQL sent them, for results the client takes in text (null: the stream was not as expected). */
  private tap: RowTap | null = null;
  /** Statements parsed under a name of their own for the client's named statements: bound without a Parse. */
  private readonly kept = new Set<string>();
  /** Kept statements the client closed, closed at the start of the next exchange (no error before them makes the backend skip them). */
  private readonly closing: string[] = [];
  /** Which describe's Parse the unnamed statement holds (null: another Parse, or none known). */
  private unnamedHolds: string | null = null;
  private statements = 0;
  /** An exchange relayWhole answers, until its ReadyForQuery: ends it when the connection goes. */
  private relaying: ((lost: Error) => void) | null = null;
  /** Where the tap's frames go: the fetch that runs, or held for the next. */
  private readonly takeFrame = (frame: Buffer): void => {
    const group = this.group;
    if (group?.onFrame != null) group.onFrame(frame);
    else group?.held?.push(frame);
  };

  private constructor(
    private readonly client: pg.Client,
    private readonly target: { readonly host: string; readonly port: number },
  ) {
    client.on('notice', (n: Notice) => {
      const notice = noticeOf(n);
      const group = this.group;
      // A notice among rows sent ahead goes to the client with them, in order.
      if (group !== null && group.onRow === null && group.onFrame === null && group.held !== null) group.held.push(notice);
      else this.onNotice(notice);
    });
    const lose = (err: Error): void => {
      this.broken ??= err;
      this.group?.abandon(err);
      this.relaying?.(err);
    };
    client.on('error', lose);
    client.on('end', () => lose(new Error('the backend closed the connection')));
    (client as unknown as { connection: Wire }).connection.on('parameterStatus', (m) => {
      const { parameterName, parameterValue } = m as { parameterName: string; parameterValue: string };
      this.parameterChanges.push([parameterName, parameterValue]);
      this.settings.set(parameterName, parameterValue);
    });
  }

  /**
   * `settings` are given in the startup packet, as libpq's PGOPTIONS gives
   * them: they are the session's defaults, which RESET ALL and DISCARD ALL
   * return to.
   */
  static async open(url: string, applicationName: string, settings: Readonly<Record<string, string>> = {}, connectTimeoutMs = 30_000): Promise<PgBackend> {
    const options = Object.entries(settings)
      .map(([k, v]) => `-c ${k}=${v.replaceAll('\\', '\\\\').replaceAll(' ', '\\ ')}`)
      .join(' ');
    const client = new pg.Client({
      connectionString: url,
      types: TEXT,
      application_name: applicationName,
      // A network cut ends an idle backend's session within seconds; a statement in flight is the client's to time out.
      keepAlive: true,
      keepAliveInitialDelayMillis: KEEPALIVE_DELAY_MS,
      connectionTimeoutMillis: connectTimeoutMs,
      ...(options === '' ? {} : { options }),
    });
    client.on('error', () => undefined);
    const u = new URL(url);
    const backend = new PgBackend(client, { host: u.hostname || 'localhost', port: Number(u.port || 5432) });
    try {
      await client.connect();
    } catch (err) {
      await client.end().catch(() => undefined);
      throw Object.assign(new PgError(SqlState.ConnectionFailure, `cannot reach the PostgreSQL engine: ${(err as Error).message}`), { cause: err });
    }
    // A replica not yet promoted, at the engine's address in a failover: the client's writes would fail there.
    if (backend.settings.get('in_hot_standby') === 'on') {
      await client.end().catch(() => undefined);
      throw standbyReached();
    }
    // The start-up's own ParameterStatus values are the backend's, not news for the client.
    backend.parameterChanges.length = 0;
    backend.tap = RowTap.install((client as unknown as { connection: { stream: EventEmitter } }).connection.stream);
    if (backend.tap === null) {
      await client.end().catch(() => undefined);
      throw new PgError(SqlState.InternalError, "node-postgres' connection is not as this cotwire expects: its socket has another reader");
    }
    return backend;
  }

  /** The status of the last ReadyForQuery. */
  get status(): BackendStatus {
    return this.lastStatus;
  }

  /** Whether an exchange is open (messages sent since the last Sync). */
  get inExchange(): boolean {
    return this.group !== null;
  }

  takeParameterChanges(): Array<[string, string]> {
    return this.parameterChanges.splice(0);
  }

  /**
   * The statement's parameter types and result columns (Parse, Describe
   * statement). `statement` names the parse for openPortal to bind without
   * parsing again: kept under a name of its own with `keep` (a client's named
   * statement, bound many times, until closeStatement), else the unnamed
   * statement, until the next Parse of it.
   */
  async describe(
    sql: string,
    types: readonly number[],
    keep = false,
  ): Promise<{ readonly paramTypes: number[]; readonly fields: BackendField[] | null; readonly statement: string }> {
    const group = await this.exchange();
    const wire = await group.ready();
    const statement = `cotwire_s${++this.statements}`;
    const name = keep ? statement : '';
    this.write(group, wire, () => {
      if (!keep) this.unnamedHolds = null;
      wire.parse({ name, text: sql, types: [...types] });
      wire.describe({ type: 'S', name });
      wire.flush();
    });
    const params = await group.next(ACKS);
    if (params.kind !== 'parameterDescription') throw unexpected(params, 'ParameterDescription');
    const result = await group.next(ACKS);
    if (result.kind !== 'noData' && result.kind !== 'rowDescription') throw unexpected(result, 'RowDescription');
    if (keep) this.kept.add(statement);
    else this.unnamedHolds = statement;
    return { paramTypes: params.types, fields: result.kind === 'noData' ? null : result.fields, statement };
  }

  /** A statement describe kept is closed with the next exchange; PostgreSQL keeps it until then. */
  closeStatement(statement: string): void {
    if (this.kept.delete(statement)) this.closing.push(statement);
  }

  /**
   * Parse and Bind into a named portal; answers its result columns (Describe
   * portal). With `executeAll`, the portal's Execute for all its rows goes
   * with them, and the exchange's Sync too when `executeAll.sync`: one round
   * trip for what the client sent at once. Its rows wait for fetch.
   */
  async openPortal(
    portal: string,
    sql: string,
    types: readonly number[],
    values: readonly BindValue[],
    resultFormats: readonly number[],
    { executeAll, takesFrames = false, statement }: PortalOptions = {},
  ): Promise<BackendField[] | null> {
    const group = await this.exchange();
    const wire = await group.ready();
    const kept = statement !== undefined && this.kept.has(statement);
    const parsed = kept || (statement !== undefined && this.unnamedHolds === statement);
    // Rows go to the client as PostgreSQL sent them, in the formats the client asked for, whatever their types.
    const tap = takesFrames ? this.tap : null;
    if (tap === null && resultFormats.some((f) => f !== 0)) {
      throw new PgError(SqlState.InternalError, 'a result asked for in binary was opened for rows to parse');
    }
    if (executeAll !== undefined) {
      group.held = [];
      group.synced = executeAll.sync;
      this.ahead = portal;
      if (tap !== null) tap.take = this.takeFrame;
    }
    this.write(group, wire, () => {
      if (!parsed) {
        this.unnamedHolds = null;
        wire.parse({ text: sql, types: [...types] });
      }
      (wire as unknown as { stream: { write(b: Buffer): void } }).stream.write(bindOfValues(portal, kept ? statement : '', values, resultFormats));
      wire.describe({ type: 'P', name: portal });
      if (executeAll !== undefined) wire.execute({ portal, rows: 0 });
      if (executeAll?.sync === true) wire.sync();
      else wire.flush();
    });
    let m: Message;
    try {
      m = await group.next(ACKS);
    } catch (err) {
      // Gone from the backend (a DEALLOCATE in a function, say): parsed again from now on.
      if (kept && (err as { code?: string }).code === SqlState.InvalidSqlStatementName) this.kept.delete(statement);
      throw err;
    }
    if (m.kind === 'noData') return null;
    if (m.kind !== 'rowDescription') throw unexpected(m, 'RowDescription');
    if (tap !== null) this.framed.add(portal);
    return m.fields;
  }

  /**
   * Execute with a row limit (0: all); each row goes to `onRow` as it
   * arrives, or to `onFrame` as the DataRow PostgreSQL sent when the client
   * takes every column in text.
   */
  async fetch(
    portal: string,
    rows: number,
    onRow: (cells: ReadonlyArray<string | Uint8Array | null>) => void,
    onFrame?: (frame: Uint8Array) => void,
  ): Promise<FetchOutcome> {
    const group = await this.exchange();
    const wire = await group.ready();
    const asSent = this.framed.has(portal) ? (onFrame ?? null) : null;
    if (asSent === null && this.framed.has(portal)) {
      throw new PgError(SqlState.InternalError, 'a portal opened for rows as sent was fetched without taking them');
    }
    if (this.ahead === portal) return this.fetchAhead(group, rows, onRow, asSent);
    const tap = asSent === null ? null : this.tap;
    group.onRow = onRow;
    if (tap !== null) {
      group.onFrame = asSent;
      tap.take = this.takeFrame;
    }
    try {
      this.write(group, wire, () => {
        wire.execute({ portal, rows });
        wire.flush();
      });
      return this.endOfResult(await group.next(ACKS));
    } finally {
      group.onRow = null;
      group.onFrame = null;
      if (tap !== null) tap.take = null;
    }
  }

  /**
   * The rows of a portal whose Execute went with its Bind, `rows` at a time
   * as fetch gives them: between two fetches the backend's socket is not
   * read, so a slow client holds PostgreSQL back as a batch limit would.
   */
  private async fetchAhead(
    group: SyncGroup,
    rows: number,
    deliver: (fields: ReadonlyArray<string | null>) => void,
    asSent: ((frame: Uint8Array) => void) | null,
  ): Promise<FetchOutcome> {
    const limit = rows > 0 ? rows : Number.POSITIVE_INFINITY;
    let got = 0;
    const take = (item: Held): void => {
      if (item instanceof PgError) this.onNotice(item);
      else {
        if (Buffer.isBuffer(item)) {
          if (asSent !== null) asSent(item);
          else deliver(dataRowCells(item));
        } else deliver(item as ReadonlyArray<string | null>);
        got++;
      }
    };
    const held = group.held ?? [];
    while (got < limit && held.length > 0) take(held.shift() as Held);
    if (got >= limit) return { kind: 'suspended' };
    const arrived = (item: Held): void => {
      take(item);
      if (got >= limit) {
        group.onRow = null;
        group.onFrame = null;
        this.reading(false);
        group.batchFull();
      }
    };
    group.onRow = arrived;
    group.onFrame = arrived;
    this.reading(true);
    try {
      const m = await group.next(ACKS);
      if (m.kind === 'batchFull') return { kind: 'suspended' };
      this.ahead = null;
      if (this.tap !== null) this.tap.take = null;
      return this.endOfResult(m);
    } finally {
      group.onRow = null;
      group.onFrame = null;
    }
  }

  /** Whether the backend's socket is read: paused while rows sent ahead wait for the client. */
  private reading(on: boolean): void {
    const stream = (this.client as unknown as { connection: { stream: { pause(): void; resume(): void } } }).connection.stream;
    if (on) stream.resume();
    else stream.pause();
  }

  /** Rows sent ahead that nobody will take: dropped as they come, and the socket read again. */
  private dropAhead(): void {
    if (this.ahead === null) return;
    this.ahead = null;
    if (this.tap !== null) this.tap.take = null;
    if (this.group !== null) this.group.held = null;
    this.reading(true);
  }

  /**
   * A statement of the server's own in the client's exchange (a ledger
   * INSERT's rows, evaluated): Parse, Bind, Execute and Close sent together,
   * one round trip; its rows (text) go to `onRow`. Answers the tag.
   */
  async run(
    portal: string,
    sql: string,
    types: readonly number[],
    values: readonly BindValue[],
    onRow: (cells: ReadonlyArray<string | null>) => void,
  ): Promise<string> {
    const group = await this.exchange();
    const wire = await group.ready();
    group.onRow = onRow;
    try {
      this.write(group, wire, () => {
        this.unnamedHolds = null;
        wire.parse({ text: sql, types: [...types] });
        wire.bind({ portal, values: [...values] });
        wire.execute({ portal, rows: 0 });
        wire.close({ type: 'P', name: portal });
        wire.flush();
      });
      const m = await group.next(ACKS);
      if (m.kind !== 'commandComplete') throw unexpected(m, 'CommandComplete');
      return m.tag;
    } finally {
      group.onRow = null;
    }
  }

  /** COPY TO STDOUT: the data as it comes, then the statement's tag. */
  async copyOut(onData: (data: Buffer) => void): Promise<string> {
    const group = await this.exchange();
    for (;;) {
      const m = await group.next(ACKS);
      if (m.kind === 'copyData') onData(m.data);
      else if (m.kind === 'commandComplete') return m.tag;
      else if (m.kind !== 'copyDone') throw unexpected(m, 'CopyDone');
    }
  }

  async copyInData(data: Buffer): Promise<void> {
    const wire = await (await this.exchange()).ready();
    wire.sendCopyFromChunk(data);
  }

  async copyInDone(): Promise<string> {
    const group = await this.exchange();
    const wire = await group.ready();
    this.write(group, wire, () => {
      wire.endCopyFrom();
      // In the extended protocol PostgreSQL holds its answer until a Flush or a Sync.
      wire.flush();
    });
    const m = await group.next(ACKS);
    if (m.kind !== 'commandComplete') throw unexpected(m, 'CommandComplete');
    return m.tag;
  }

  async copyInFail(message: string): Promise<void> {
    const group = await this.exchange();
    const wire = await group.ready();
    this.write(group, wire, () => {
      wire.sendFailToCopyFrom(message);
      wire.flush();
    });
    await group.next(ACKS).catch(() => undefined);
  }

  /** Close portal; its CloseComplete is skipped when it comes. */
  async closePortal(portal: string): Promise<void> {
    this.framed.delete(portal);
    if (this.ahead === portal) this.dropAhead();
    const group = this.group;
    // After the exchange's Sync, the portal went with its implicit transaction, or waits for the next exchange.
    if (group === null || group.failed || group.synced) return;
    const wire = await group.ready();
    this.write(group, wire, () => {
      wire.close({ type: 'P', name: portal });
      wire.flush();
    });
  }

  async relayWhole(exchange: WholeExchange, out: FrameSink): Promise<WholeOutcome> {
    const tap = this.tap;
    if (tap === null || this.group !== null || this.relaying !== null || this.broken !== null || this.lastStatus !== 'I') return NOT_RELAYED;
    let statement = '';
    if (exchange.kind === 'bound') {
      if (this.kept.has(exchange.statement)) statement = exchange.statement;
      else if (this.unnamedHolds !== exchange.statement) return NOT_RELAYED;
    } else this.unnamedHolds = null;
    const token = exchange.kind === 'parsed' ? `cotwire_s${++this.statements}` : '';
    const wire = (this.client as unknown as { connection: Wire }).connection;
    return new Promise<WholeOutcome>((resolve) => {
      let error: PgError | null = null;
      // A Parse sent with the exchange is described too, privately: its ParameterDescription and the RowDescription
      // (or NoData) after it are the statement's, for the client's later Describe or Bind of it.
      let describing = exchange.kind === 'parsed';
      let parsed = false;
      let paramTypes: number[] = [];
      let described: { paramTypes: number[]; fields: BackendField[] | null; statement: string } | undefined;
      const end = (outcome: WholeOutcome): void => {
        tap.take = null;
        tap.takeAll = false;
        tap.took = null;
        this.relaying = null;
        this.reading(true);
        resolve(outcome);
      };
      // PostgreSQL's own FATAL, when it said one before it closed the connection (57P01 for a terminated backend).
      this.relaying = (lost) => end({ relayed: true, error: error?.isFatal === true ? error : this.lost(lost) });
      tap.takeAll = true;
      // An answer PostgreSQL sends in pieces (it writes every 8 KB) goes on piece by piece, as a bare relay's would:
      // the client reads the first rows while the rest are on their way. The last piece leaves with the
      // session's ReadyForQuery.
      tap.took = () => {
        if (!out.flush()) {
          this.reading(false);
          void out.drained().then(() => {
            if (this.relaying !== null) this.reading(true);
          });
        }
      };
      tap.take = (frame) => {
        const type = frame[0] ?? 0;
        if (describing && (type === BackendCode.ParameterDescription || type === BackendCode.RowDescription || type === BackendCode.NoData)) {
          if (type === BackendCode.ParameterDescription) paramTypes = parameterTypes(frame);
          else {
            describing = false;
            if (parsed) this.unnamedHolds = token;
            described = { paramTypes, fields: type === BackendCode.NoData ? null : rowFields(frame), statement: token };
          }
          return;
        }
        switch (type) {
          case BackendCode.CloseComplete:
            return;
          case BackendCode.ParseComplete:
            parsed = true;
            out.frame(frame);
            return;
          case BackendCode.ParameterStatus: {
            const [name = '', value = ''] = frame.toString('utf8', 5, frame.length - 1).split('\0');
            this.parameterChanges.push([name, value]);
            this.settings.set(name, value);
            return;
          }
          case BackendCode.ErrorResponse:
            error ??= errorOf(frame);
            // Gone from the backend (a DEALLOCATE in a function, say): parsed again from now on.
            if (statement !== '' && error.code === SqlState.InvalidSqlStatementName) this.kept.delete(statement);
            return;
          case BackendCode.ReadyForQuery:
            this.lastStatus = String.fromCharCode(frame[5] ?? 0x49) as BackendStatus;
            end({ relayed: true, error, ...(described === undefined ? {} : { described }) });
            return;
          default:
            if (!ANSWERED.has(type)) {
              error ??= new PgError(
                SqlState.ProtocolViolation,
                `the PostgreSQL engine answered a message of type ${String.fromCharCode(type)} in a relayed exchange`,
              );
              return;
            }
            out.frame(frame);
            // A client that reads slowly holds PostgreSQL back: its backend's socket is not read meanwhile.
            if (!out.flushIfFull()) {
              this.reading(false);
              void out.drained().then(() => {
                if (this.relaying !== null) this.reading(true);
              });
            }
        }
      };
      corked(wire, () => {
        for (const name of this.closing.splice(0)) wire.close({ type: 'S', name });
        if (exchange.kind === 'query') {
          wire.query(exchange.sql);
          return;
        }
        if (exchange.kind === 'parsed') {
          this.unnamedHolds = null;
          wire.parse({ text: exchange.sql, types: [...exchange.types] });
          wire.describe({ type: 'S', name: '' });
        }
        (wire as unknown as { stream: { write(b: Buffer): void } }).stream.write(
          bindMessage('', statement, exchange.params, exchange.paramFormats, exchange.resultFormats),
        );
        if (exchange.describe) wire.describe({ type: 'P', name: '' });
        wire.execute({ portal: '', rows: 0 });
        wire.sync();
      });
    });
  }

  /** The backend's reported settings now (server_version, DateStyle, TimeZone, ...). */
  reportedSettings(): Array<[string, string]> {
    return [...this.settings];
  }

  /** Ends the exchange (Sync) and answers the transaction status. */
  async sync(): Promise<BackendStatus> {
    const group = this.group;
    if (group === null) return this.lastStatus;
    this.dropAhead();
    if (this.broken === null && !group.synced) {
      const wire = await group.ready();
      wire.sync();
    }
    await group.ended();
    this.group = null;
    // An exchange that ended with its backend gone ends in an error, never in a ReadyForQuery: what it did (an
    // append held for this Sync among it) was not made, and the client must not take it for done.
    if (this.broken !== null) throw this.lost(this.broken);
    this.lastStatus = ((this.client as unknown as { _txStatus: BackendStatus | null })._txStatus ?? 'I') as BackendStatus;
    return this.lastStatus;
  }

  /** Whether the open exchange has failed (the backend waits for Sync). */
  get failed(): boolean {
    return this.group?.failed ?? false;
  }

  /** PostgreSQL's CancelRequest for whatever this backend runs. */
  cancel(): void {
    const c = this.client as unknown as { processID: number | null; secretKey: number | null };
    if (c.processID === null || c.secretKey === null) return;
    const msg = Buffer.alloc(16);
    msg.writeInt32BE(16, 0);
    msg.writeInt32BE(80877102, 4);
    msg.writeInt32BE(c.processID, 8);
    msg.writeInt32BE(c.secretKey, 12);
    const socket = netConnect(this.target.port, this.target.host, () => socket.end(msg));
    socket.on('error', () => undefined);
  }

  async close(): Promise<void> {
    this.dropAhead();
    await this.client.end().catch(() => undefined);
  }

  /** The client's session ends with the backend: PostgreSQL's own FATAL (57P01 when terminated), or 08006. */
  private lost(err: Error): PgError {
    const e = engineError(err);
    if (e instanceof PgError && e.isFatal) return e;
    return new PgError(SqlState.ConnectionFailure, `the connection to the PostgreSQL engine broke: ${err.message}`, {}, 'FATAL');
  }

  /**
   * Writes one exchange's messages at once. The exchange's first write
   * closes the kept statements the client closed: nothing before them can
   * make the backend skip them.
   */
  private write(group: SyncGroup, wire: Wire, send: () => void): void {
    corked(wire, () => {
      if (!group.written) {
        group.written = true;
        for (const name of this.closing.splice(0)) wire.close({ type: 'S', name });
      }
      send();
    });
  }

  /** How an Execute ended; DEALLOCATE and DISCARD ALL took the kept statements with them (or some: all are parsed again). */
  private endOfResult(m: Message): FetchOutcome {
    if (m.kind === 'commandComplete' && (m.tag.startsWith('DEALLOCATE') || m.tag === 'DISCARD ALL')) {
      this.closing.push(...this.kept);
      this.kept.clear();
      this.unnamedHolds = null;
    }
    return endOfResult(m);
  }

  private async exchange(): Promise<SyncGroup> {
    if (this.broken !== null) throw this.lost(this.broken);
    if (this.relaying !== null) throw new PgError(SqlState.InternalError, 'an exchange began while another was relayed whole');
    if (this.group === null) {
      this.group = new SyncGroup();
      void this.client.query(this.group as unknown as pg.QueryConfig);
    }
    return this.group;
  }
}

/**
 * Whether a backend that could not be opened was refused by the engine as a
 * whole (nothing listening, starting up, shutting down) rather than for
 * itself alone (too many connections, a password).
 */
export function engineRefusedConnection(err: unknown): boolean {
  const cause = (err as { cause?: unknown }).cause;
  return !(cause instanceof pg.DatabaseError) || cause.code === '57P03';
}

/**
 * Writes a group of messages as one: node-postgres writes each message to
 * the socket as it is made, a system call apiece, which cost a third of the
 * server's CPU under appends before they were corked together.
 */
function corked(wire: Wire, send: () => void): void {
  const stream = (wire as unknown as { stream: { cork?: () => void; uncork?: () => void } }).stream;
  stream.cork?.();
  try {
    send();
  } finally {
    stream.uncork?.();
  }
}

/**
 * The error of a statement as the client sees it. A backend that went
 * without a word from PostgreSQL (its socket closed) ends the client's
 * session as PostgreSQL's own FATAL would: the session cannot go on.
 */
function backendError(err: unknown): unknown {
  const e = engineError(err);
  if (e instanceof PgError && e.code === SqlState.ConnectionFailure && !e.isFatal)
    return new PgError(SqlState.ConnectionFailure, `the connection to the PostgreSQL engine broke: ${(err as Error).message}`, {}, 'FATAL');
  return e;
}

/** How an Execute ended. */
function endOfResult(m: Message): FetchOutcome {
  switch (m.kind) {
    case 'portalSuspended':
      return { kind: 'suspended' };
    case 'commandComplete':
      return { kind: 'complete', tag: m.tag };
    case 'emptyQuery':
      return { kind: 'empty' };
    case 'copyInResponse':
      return { kind: 'copy-in', columns: m.columns };
    case 'copyOutResponse':
      return { kind: 'copy-out', columns: m.columns };
    default:
      throw unexpected(m, 'the end of a result');
  }
}

function unexpected(m: Message, wanted: string): PgError {
  return new PgError(SqlState.ProtocolViolation, `the PostgreSQL engine answered ${m.kind} where ${wanted} was due`);
}

/** A ParameterDescription's type OIDs. */
function parameterTypes(frame: Buffer): number[] {
  const count = frame.readInt16BE(5);
  return Array.from({ length: count }, (_, i) => frame.readUInt32BE(7 + 4 * i));
}

/** A RowDescription's fields, as node-postgres names them. */
function rowFields(frame: Buffer): BackendField[] {
  const count = frame.readInt16BE(5);
  const fields: BackendField[] = [];
  let at = 7;
  for (let i = 0; i < count; i++) {
    const end = frame.indexOf(0, at);
    const name = frame.toString('utf8', at, end);
    at = end + 1;
    fields.push({
      name,
      tableID: frame.readUInt32BE(at),
      columnID: frame.readInt16BE(at + 4),
      dataTypeID: frame.readUInt32BE(at + 6),
      dataTypeSize: frame.readInt16BE(at + 10),
      dataTypeModifier: frame.readInt32BE(at + 12),
    });
    at += 18;
  }
  return fields;
}

/** An ErrorResponse's fields, as engineError keeps them of node-postgres' parse of one. */
function errorOf(frame: Buffer): PgError {
  const fields = new Map<string, string>();
  let at = 5;
  while (at < frame.length && frame[at] !== 0) {
    const code = String.fromCharCode(frame[at] as number);
    const end = frame.indexOf(0, at + 1);
    if (end < 0) break;
    fields.set(code, frame.toString('utf8', at + 1, end));
    at = end + 1;
  }
  const optional = (key: string, code: string) => (fields.has(code) ? { [key]: fields.get(code) } : {});
  const severity = fields.get('V') ?? fields.get('S') ?? 'ERROR';
  return new PgError(
    fields.get('C') ?? SqlState.InternalError,
    fields.get('M') ?? '',
    {
      ...optional('detail', 'D'),
      ...optional('hint', 'H'),
      ...(fields.has('P') ? { position: Number(fields.get('P')) } : {}),
      ...optional('schema', 's'),
      ...optional('table', 't'),
      ...optional('column', 'c'),
      ...optional('constraint', 'n'),
    },
    severity === 'FATAL' || severity === 'PANIC' ? 'FATAL' : 'ERROR',
  );
}

/** A NoticeResponse as node-postgres parses it. */
interface Notice {
  readonly message?: string;
  readonly code?: string;
  readonly severity?: string;
  readonly detail?: string;
  readonly hint?: string;
}

function noticeOf(n: Notice): PgError {
  return new PgError(
    n.code ?? '00000',
    n.message ?? '',
    { ...(n.detail === undefined ? {} : { detail: n.detail }), ...(n.hint === undefined ? {} : { hint: n.hint }) },
    (n.severity ?? 'NOTICE') as Severity,
  );
}
