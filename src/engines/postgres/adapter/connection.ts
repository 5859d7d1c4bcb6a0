import { createHash } from 'node:crypto';
import type { EventEmitter } from 'node:events';
import pg from 'pg';
import { PgError } from '../../../errors/pg-error.js';
import { SqlState } from '../../../errors/sqlstate.js';
import type { SqlConnection } from '../../../engine/port.js';
import type { EngineHealth } from './health.js';

/**
 * The server's own connections to a PostgreSQL engine, through node-postgres.
 * Values come back as node-postgres parses them, except int8, which is a
 * bigint here as it is from DuckDB.
 */

const INT8 = 20;
const types = {
  getTypeParser(oid: number, format?: 'text' | 'binary') {
    if (oid === INT8 && format !== 'binary') return (v: string) => BigInt(v);
    return pg.types.getTypeParser(oid, format);
  },
};

/** Where to connect, as a URL, with the role and password replaced when given. */
export function urlAs(url: string, user?: string, password?: string): string {
  if (user === undefined) return url;
  const u = new URL(url);
  u.username = encodeURIComponent(user);
  u.password = password === undefined ? '' : encodeURIComponent(password);
  return u.toString();
}

/** PostgreSQL's own error, kept as the client would have seen it (a FATAL one stays FATAL). */
export function engineError(err: unknown): unknown {
  // Only the server's ErrorResponse carries an SQLSTATE: a socket's EPIPE has a five-letter code too.
  const code = err instanceof pg.DatabaseError ? err.code : undefined;
  if (err instanceof pg.DatabaseError && code !== undefined && /^[0-9A-Z]{5}$/.test(code)) {
    const e = err;
    return new PgError(
      code,
      e.message,
      {
        ...(e.detail === undefined ? {} : { detail: e.detail }),
        ...(e.hint === undefined ? {} : { hint: e.hint }),
        ...(e.position === undefined ? {} : { position: Number(e.position) }),
        ...(e.schema === undefined ? {} : { schema: e.schema }),
        ...(e.table === undefined ? {} : { table: e.table }),
        ...(e.column === undefined ? {} : { column: e.column }),
        ...(e.constraint === undefined ? {} : { constraint: e.constraint }),
      },
      e.severity === 'FATAL' || e.severity === 'PANIC' ? 'FATAL' : 'ERROR',
    );
  }
  if (err instanceof Error && !(err instanceof PgError)) {
    return new PgError(SqlState.ConnectionFailure, `the PostgreSQL engine: ${err.message}`);
  }
  return err;
}

/**
 * Whether an error says the connection to the engine is gone (the socket
 * closed, the backend terminated, the server shutting down or starting),
 * rather than that a statement failed.
 */
export function isConnectionLoss(err: unknown): boolean {
  if (err instanceof PgError) return err.code.startsWith('08') || err.code.startsWith('57P') || err.isFatal;
  if (err instanceof pg.DatabaseError) {
    const code = err.code ?? '';
    return code.startsWith('08') || code.startsWith('57P') || err.severity === 'FATAL' || err.severity === 'PANIC';
  }
  return err instanceof Error;
}

/**
 * Whether the server a connection reached is a standby in recovery, as
 * PostgreSQL (14 and later) reports in_hot_standby at startup: the engine's
 * address can lead to a replica not yet promoted in a failover, where every
 * write fails (25006). Listened for before connecting.
 */
export function watchStandby(client: pg.Client): () => boolean {
  let standby = false;
  (client as unknown as { connection: EventEmitter }).connection.on('parameterStatus', (m: { parameterName: string; parameterValue: string }) => {
    if (m.parameterName === 'in_hot_standby') standby = m.parameterValue === 'on';
  });
  return () => standby;
}

/** A connection that reached a standby: the engine is down for cotwire until the standby is promoted. */
export function standbyReached(): PgError {
  return new PgError(SqlState.ConnectionFailure, 'cannot reach the PostgreSQL engine: the server at the engine URL is a standby in recovery');
}

export interface ConnectionOptions {
  /**
   * Calls made without waiting are sent at once, in order, and answered in
   * order (node-postgres' pipeline mode): a transaction's statements that
   * need no answer of each other cost one round trip.
   */
  readonly pipeline?: boolean;
  /** Statements the server runs again and again are parsed and planned once per backend. */
  readonly prepare?: boolean;
  /** Run on each new backend before anything else (a search_path), as the first connection and every reconnection. */
  readonly setup?: readonly string[];
  /** Shared by the server's connections: a failed connection marks the engine down, and calls fail at once until it is back. */
  readonly health?: EngineHealth;
  /**
   * For a connection whose calls are all short (the writer's, the lease's):
   * a call with no answer after this long takes the backend for lost, as a
   * network cut leaves a socket that neither answers nor fails for many
   * minutes. It bounds connecting too (by default CONNECT_TIMEOUT_MS).
   */
  readonly answerTimeoutMs?: number;
  /** Takes a standby in recovery (a test's reads of a replica); the server's own connections are refused one. */
  readonly readsStandby?: boolean;
}

/** How long connecting may take when no answerTimeoutMs bounds it. */
const CONNECT_TIMEOUT_MS = 30_000;
/** An idle connection is probed after this long, and taken for lost about ten seconds of silence later (libuv's keepalive). */
export const KEEPALIVE_DELAY_MS = 10_000;

/**
 * One of the server's own connections to the engine. It outlives its
 * backend: when the backend goes (PostgreSQL restarted, failed over, the
 * backend terminated, the network cut) the call in flight fails with the
 * engine's error or 08006, and the next call connects again. A transaction
 * cannot span two backends: after a loss inside one, every call fails
 * until the caller's ROLLBACK (or COMMIT, which fails) ends it.
 */
export class PostgresConnection implements SqlConnection {
  private readonly names = new Map<string, string>();
  private client: pg.Client | null = null;
  private connecting: Promise<pg.Client> | null = null;
  /** `lost`: the backend went inside a transaction, which PostgreSQL rolled back. */
  private transaction: 'none' | 'open' | 'lost' = 'none';
  private closed = false;

  private constructor(
    private readonly url: string,
    private readonly applicationName: string,
    private readonly options: ConnectionOptions,
  ) {}

  static async open(url: string, applicationName = 'cotwire', options: ConnectionOptions = {}): Promise<PostgresConnection> {
    const conn = new PostgresConnection(url, applicationName, options);
    await conn.connect();
    return conn;
  }

  /** The current backend's process id, which pg_stat_activity and pg_terminate_backend() know (0 while it has none). */
  get processId(): number {
    return (this.client as unknown as { processID: number } | null)?.processID ?? 0;
  }

  run(sql: string): Promise<void> {
    const ends = sql === 'COMMIT' || sql === 'ROLLBACK';
    if (ends && this.transaction === 'lost') {
      this.transaction = 'none';
      return sql === 'ROLLBACK' ? Promise.resolve() : Promise.reject(lostInTransaction());
    }
    // Nothing to roll back on a backend that is gone: PostgreSQL did it when the backend ended.
    if (sql === 'ROLLBACK' && this.client === null && this.connecting === null) {
      this.transaction = 'none';
      return Promise.resolve();
    }
    return this.on(async (client) => {
      if (sql === 'BEGIN') this.transaction = 'open';
      else if (ends) this.transaction = 'none';
      try {
        await client.query(sql);
      } catch (err) {
        throw this.failure(client, err);
      }
    });
  }

  /** Parameters go in text; one given as bytes goes in binary, as node-postgres sends a Buffer. */
  query(sql: string, params: readonly (string | Uint8Array | null)[] = []): Promise<unknown[][]> {
    // A read outside a transaction that met a backend just terminated (its FATAL still on the way) is asked once
    // more, of a new one: it changed nothing, and its caller (a check of a parent step, a catalog read) goes on.
    if (this.transaction !== 'none' || !/^\s*SELECT\b/i.test(sql)) return this.send(sql, params);
    return this.send(sql, params).catch((err: unknown) => (isConnectionLoss(err) && !this.closed ? this.send(sql, params) : Promise.reject(err)));
  }

  private send(sql: string, params: readonly (string | Uint8Array | null)[]): Promise<unknown[][]> {
    return this.on(async (client) => {
      try {
        const r = await client.query({ text: sql, values: params as unknown[], rowMode: 'array', ...this.named(sql) });
        return r.rows as unknown[][];
      } catch (err) {
        throw this.failure(client, err);
      }
    });
  }

  /**
   * Runs `calls` with the socket corked, so that the statements they send
   * at once (a pipelined transaction's) leave in one write instead of one
   * system call per message.
   */
  corked<T>(calls: () => T): T {
    const stream = (this.client as unknown as { connection?: { stream?: { cork?: () => void; uncork?: () => void } } } | null)?.connection?.stream;
    stream?.cork?.();
    try {
      return calls();
    } finally {
      stream?.uncork?.();
    }
  }

  /** A call on the live backend: at once when there is one, so that calls made together are sent together and in order. */
  private on<T>(call: (client: pg.Client) => Promise<T>): Promise<T> {
    const bounded = this.options.answerTimeoutMs === undefined ? call : (client: pg.Client) => this.answered(client, call(client));
    if (this.transaction !== 'lost' && this.client !== null && this.connecting === null) return bounded(this.client);
    return this.live().then(bounded);
  }

  /** The call's answer, or, after answerTimeoutMs without one, the backend ended: the call fails as a lost connection. */
  private answered<T>(client: pg.Client, answer: Promise<T>): Promise<T> {
    const ms = this.options.answerTimeoutMs as number;
    const timer = setTimeout(() => {
      const stream = (client as unknown as { connection?: { stream?: { destroy(err?: Error): void } } }).connection?.stream;
      stream?.destroy(new Error(`the PostgreSQL engine did not answer within ${ms} ms (engine.answerTimeoutMs)`));
    }, ms);
    return answer.finally(() => clearTimeout(timer));
  }

  close(): void {
    this.closed = true;
    const client = this.client;
    this.client = null;
    if (client !== null) void client.end().catch(() => undefined);
  }

  private async live(): Promise<pg.Client> {
    if (this.transaction === 'lost') throw lostInTransaction();
    if (this.client !== null) return this.client;
    if (this.closed) throw new PgError(SqlState.AdminShutdown, 'the server is shutting down');
    const health = this.options.health;
    if (health !== undefined && !health.reachable) throw new PgError(SqlState.ConnectionFailure, `the PostgreSQL engine is unreachable: ${health.why}`);
    return this.connect();
  }

  /** One connection attempt at a time; calls made meanwhile wait for it, in the order they were made. */
  private connect(): Promise<pg.Client> {
    this.connecting ??= this.attach().finally(() => {
      this.connecting = null;
    });
    return this.connecting;
  }

  private async attach(): Promise<pg.Client> {
    const client = new pg.Client({
      connectionString: this.url,
      types,
      application_name: this.applicationName,
      keepAlive: true,
      keepAliveInitialDelayMillis: KEEPALIVE_DELAY_MS,
      connectionTimeoutMillis: this.options.answerTimeoutMs ?? CONNECT_TIMEOUT_MS,
      ...(this.options.pipeline === true ? { pipeline: true } : {}),
    });
    // Without a listener a broken connection would end the process; with it, the next call connects again.
    client.on('error', (err: Error) => this.drop(client, err));
    client.on('end', () => this.drop(client, new Error('the connection to the engine ended')));
    const standby = watchStandby(client);
    try {
      await client.connect();
      if (standby() && this.options.readsStandby !== true) throw standbyReached();
      for (const sql of this.options.setup ?? []) await client.query(sql);
    } catch (err) {
      await client.end().catch(() => undefined);
      if (isConnectionLoss(err)) this.options.health?.lost(err as Error);
      throw engineError(err);
    }
    if (this.closed) {
      await client.end().catch(() => undefined);
      throw new PgError(SqlState.AdminShutdown, 'the server is shutting down');
    }
    this.client = client;
    return client;
  }

  /** The error a call reports; one that says the backend is gone drops it, so that the next call connects again. */
  private failure(client: pg.Client, err: unknown): unknown {
    const e = engineError(err);
    if (isConnectionLoss(e)) this.drop(client, err as Error);
    return e;
  }

  private drop(client: pg.Client, err: Error): void {
    if (this.client !== client) return;
    this.client = null;
    if (this.transaction === 'open') this.transaction = 'lost';
    void client.end().catch(() => undefined);
    if (!this.closed) this.options.health?.suspect(err);
  }

  /** Statements the server runs again and again are parsed and planned once per connection (a named statement). */
  private named(sql: string): { name?: string } {
    if (this.options.prepare !== true) return {};
    let name = this.names.get(sql);
    if (name === undefined) {
      if (this.names.size >= 512) return {};
      name = `cotwire_${createHash('sha256').update(sql).digest('hex').slice(0, 24)}`;
      this.names.set(sql, name);
    }
    return { name };
  }
}

function lostInTransaction(): PgError {
  return new PgError(SqlState.ConnectionFailure, 'the connection to the PostgreSQL engine was lost inside a transaction, which PostgreSQL rolled back');
}
