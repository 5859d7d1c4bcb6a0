import type { EventEmitter } from 'node:events';
import { connect as netConnect } from 'node:net';
import pg from 'pg';
import { PgError, type Severity } from '../../../errors/pg-error.js';
import { SqlState } from '../../../errors/sqlstate.js';
import type { BackendField, BackendStatus, BindValue, FetchOutcome, PortalOptions, RelayBackend } from '../../../engine/port.js';
import { binaryEncoder, type BinaryEncoder } from './binary.js';
import { engineError, KEEPALIVE_DELAY_MS } from './connection.js';
import { dataRowCells, RowTap } from './row-tap.js';

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
 * Results come in text: node-postgres reads no other format. Rows are
 * fetched in batches (Execute with a row limit), each handed on before the
 * next is asked for, so a large result waits for a slow client instead of
 * filling memory.
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
  /** Why the group was never submitted. */
  private failure: unknown = null;
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

  /** The connection went: nothing more will come, not even ReadyForQuery. */
  abandon(err: Error): void {
    if (!this.failed) this.handleError(err);
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
    const w = this.waiter;
    this.waiter = null;
    w?.();
  }
}

type Held = ReadonlyArray<string | null> | Buffer | PgError;

const NONE: ReadonlySet<Message['kind']> = new Set();
/** A portal whose rows PostgreSQL encodes in binary itself: nothing to convert, and only frames to take. */
const AS_SENT: ReadonlyArray<BinaryEncoder | null> = [];
const ACKS: ReadonlySet<Message['kind']> = new Set(['parseComplete', 'bindComplete', 'closeComplete']);

const TEXT = { getTypeParser: () => (v: string) => v };

export class PgBackend implements RelayBackend {
  private group: SyncGroup | null = null;
  private lastStatus: BackendStatus = 'I';
  private readonly parameterChanges: Array<[string, string]> = [];
  /** The backend's reported settings (DateStyle, IntervalStyle, ...), as ParameterStatus gave them. */
  private readonly settings = new Map<string, string>();
  /** Per open portal: how each result column is sent (null: as text). */
  private readonly encoders = new Map<string, ReadonlyArray<BinaryEncoder | null>>();
  /** Notices the backend sent, for the statement that caused them. */
  onNotice: (notice: PgError) => void = () => undefined;
  /** The connection broke: the client's session cannot go on. */
  broken: Error | null = null;
  /** The portal whose Execute went with its Bind, until its result ends. */
  private ahead: string | null = null;
  /** DataRows as PostgreSQL sent them, for results the client takes in text (null: the stream was not as expected). */
  private tap: RowTap | null = null;
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
    // The start-up's own ParameterStatus values are the backend's, not news for the client.
    backend.parameterChanges.length = 0;
    backend.tap = RowTap.install((client as unknown as { connection: { stream: EventEmitter } }).connection.stream);
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

  /** The statement's parameter types and result columns (Parse, Describe statement). */
  async describe(sql: string, types: readonly number[]): Promise<{ readonly paramTypes: number[]; readonly fields: BackendField[] | null }> {
    const group = await this.exchange();
    const wire = await group.ready();
    corked(wire, () => {
      wire.parse({ text: sql, types: [...types] });
      wire.describe({ type: 'S' });
      wire.flush();
    });
    const params = await group.next(ACKS);
    if (params.kind !== 'parameterDescription') throw unexpected(params, 'ParameterDescription');
    const result = await group.next(ACKS);
    if (result.kind === 'noData') return { paramTypes: params.types, fields: null };
    if (result.kind !== 'rowDescription') throw unexpected(result, 'RowDescription');
    return { paramTypes: params.types, fields: result.fields };
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
    { executeAll, takesFrames = false }: PortalOptions = {},
  ): Promise<BackendField[] | null> {
    const group = await this.exchange();
    const wire = await group.ready();
    // Every column in binary, for a caller that takes rows as sent: PostgreSQL encodes them, whatever their type.
    const native = takesFrames && this.tap !== null && resultFormats.length > 0 && resultFormats.every((f) => f === 1);
    if (executeAll !== undefined) {
      group.held = [];
      group.synced = executeAll.sync;
      this.ahead = portal;
      // Rows that need no conversion are held as PostgreSQL sent them (the tap), to go to the client as they are.
      if (this.tap !== null && (native || resultFormats.every((f) => f === 0))) this.tap.take = this.takeFrame;
    }
    corked(wire, () => {
      wire.parse({ text: sql, types: [...types] });
      wire.bind({ portal, values: [...values], binary: native });
      wire.describe({ type: 'P', name: portal });
      if (executeAll !== undefined) wire.execute({ portal, rows: 0 });
      if (executeAll?.sync === true) wire.sync();
      else wire.flush();
    });
    const m = await group.next(ACKS);
    if (m.kind === 'noData') {
      this.encoders.delete(portal);
      return null;
    }
    if (m.kind !== 'rowDescription') throw unexpected(m, 'RowDescription');
    if (native) {
      this.encoders.set(portal, AS_SENT);
      return m.fields;
    }
    // Bind's result formats: none (all text), one for all, or one per column.
    const formatOf = (i: number): number => (resultFormats.length === 1 ? (resultFormats[0] as number) : (resultFormats[i] ?? 0));
    const dateStyle = this.settings.get('DateStyle') ?? 'ISO, MDY';
    const intervalStyle = this.settings.get('IntervalStyle') ?? 'postgres';
    this.encoders.set(
      portal,
      m.fields.map((f, i) => (formatOf(i) === 1 ? binaryEncoder(f.dataTypeID, dateStyle, intervalStyle) : null)),
    );
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
    const deliver = this.rowsOf(portal, onRow);
    const asSent = onFrame !== undefined && deliver === onRow ? onFrame : null;
    if (asSent === null && this.encoders.get(portal) === AS_SENT) {
      throw new PgError(SqlState.InternalError, 'a portal opened for rows as sent was fetched without taking them');
    }
    if (this.ahead === portal) return this.fetchAhead(group, rows, deliver, asSent);
    const tap = asSent === null ? null : this.tap;
    group.onRow = deliver;
    if (tap !== null) {
      group.onFrame = asSent;
      tap.take = this.takeFrame;
    }
    try {
      corked(wire, () => {
        wire.execute({ portal, rows });
        wire.flush();
      });
      return endOfResult(await group.next(ACKS));
    } finally {
      group.onRow = null;
      group.onFrame = null;
      if (tap !== null) tap.take = null;
    }
  }

  /** A portal's rows as the client asked for them: text, or binary converted from text. */
  private rowsOf(portal: string, onRow: (cells: ReadonlyArray<string | Uint8Array | null>) => void): (fields: ReadonlyArray<string | null>) => void {
    const encoders = this.encoders.get(portal);
    return encoders === undefined || encoders.every((e) => e === null)
      ? onRow
      : (fields) => onRow(fields.map((v, i) => (v === null ? null : (encoders[i]?.(v) ?? v))));
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
    asSent: ((frame: Buffer) => void) | null,
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
      return endOfResult(m);
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
      corked(wire, () => {
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
    corked(wire, () => {
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
    corked(wire, () => {
      wire.sendFailToCopyFrom(message);
      wire.flush();
    });
    await group.next(ACKS).catch(() => undefined);
  }

  /** Close portal; its CloseComplete is skipped when it comes. */
  async closePortal(portal: string): Promise<void> {
    this.encoders.delete(portal);
    if (this.ahead === portal) this.dropAhead();
    const group = this.group;
    // After the exchange's Sync, the portal went with its implicit transaction, or waits for the next exchange.
    if (group === null || group.failed || group.synced) return;
    const wire = await group.ready();
    corked(wire, () => {
      wire.close({ type: 'P', name: portal });
      wire.flush();
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

  private async exchange(): Promise<SyncGroup> {
    if (this.broken !== null) throw this.lost(this.broken);
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
