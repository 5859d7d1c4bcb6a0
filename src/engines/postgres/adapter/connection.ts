import { createHash } from 'node:crypto';
import pg from 'pg';
import { PgError } from '../../../errors/pg-error.js';
import { SqlState } from '../../../errors/sqlstate.js';
import type { SqlConnection } from '../../../engine/port.js';

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

/** PostgreSQL's own error, kept as the client would have seen it. */
export function engineError(err: unknown): unknown {
  const e = err as pg.DatabaseError;
  if (typeof e?.code === 'string' && /^[0-9A-Z]{5}$/.test(e.code) && typeof e.message === 'string') {
    return new PgError(e.code, e.message, {
      ...(e.detail === undefined ? {} : { detail: e.detail }),
      ...(e.hint === undefined ? {} : { hint: e.hint }),
      ...(e.position === undefined ? {} : { position: Number(e.position) }),
      ...(e.schema === undefined ? {} : { schema: e.schema }),
      ...(e.table === undefined ? {} : { table: e.table }),
      ...(e.column === undefined ? {} : { column: e.column }),
      ...(e.constraint === undefined ? {} : { constraint: e.constraint }),
    });
  }
  if (err instanceof Error && !(err instanceof PgError)) {
    return new PgError(SqlState.ConnectionFailure, `the PostgreSQL engine: ${err.message}`);
  }
  return err;
}

export class PostgresConnection implements SqlConnection {
  private readonly names = new Map<string, string>();

  private constructor(
    private readonly client: pg.Client,
    private readonly prepares: boolean,
  ) {}

  /**
   * `pipeline`: calls made without waiting are sent at once, in order, and
   * answered in order (node-postgres' pipeline mode): a transaction's
   * statements that need no answer of each other cost one round trip.
   */
  static async open(
    url: string,
    applicationName = 'cotwire',
    options: { readonly pipeline?: boolean; readonly prepare?: boolean } = {},
  ): Promise<PostgresConnection> {
    const client = new pg.Client({ connectionString: url, types, application_name: applicationName, ...(options.pipeline === true ? { pipeline: true } : {}) });
    // A connection that breaks fails the call in flight; without a listener the process would die.
    client.on('error', () => undefined);
    try {
      await client.connect();
    } catch (err) {
      await client.end().catch(() => undefined);
      throw engineError(err);
    }
    return new PostgresConnection(client, options.prepare === true);
  }

  /** The backend's process id, which pg_stat_activity and pg_terminate_backend() know. */
  get processId(): number {
    return (this.client as unknown as { processID: number }).processID;
  }

  async run(sql: string): Promise<void> {
    try {
      await this.client.query(sql);
    } catch (err) {
      throw engineError(err);
    }
  }

  async query(sql: string, params: readonly (string | null)[] = []): Promise<unknown[][]> {
    try {
      const r = await this.client.query({ text: sql, values: params as (string | null)[], rowMode: 'array', ...this.named(sql) });
      return r.rows as unknown[][];
    } catch (err) {
      throw engineError(err);
    }
  }

  close(): void {
    void this.client.end().catch(() => undefined);
  }

  /** Statements the server runs again and again are parsed and planned once per connection (a named statement). */
  private named(sql: string): { name?: string } {
    if (!this.prepares) return {};
    let name = this.names.get(sql);
    if (name === undefined) {
      if (this.names.size >= 512) return {};
      name = `cotwire_${createHash('sha256').update(sql).digest('hex').slice(0, 24)}`;
      this.names.set(sql, name);
    }
    return { name };
  }
}
