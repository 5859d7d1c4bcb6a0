import { randomUUID } from 'node:crypto';
import type { Engine, EngineConnection } from '../engine/port.js';

/** One refused statement, as recorded in the security ledger. */
export interface SecurityEvent {
  readonly user: string;
  readonly remoteAddress: string;
  readonly applicationName: string;
  readonly operation: string;
  readonly target: string;
  readonly sqlstate: string;
  readonly reason: string;
  readonly fingerprint: string;
  readonly statement: string;
}

export const SECURITY_EVENTS_TABLE = '_cot_security_events';

const DDL = `CREATE TABLE IF NOT EXISTS main.${SECURITY_EVENTS_TABLE} (
  event_id UUID NOT NULL,
  occurred_at TIMESTAMPTZ NOT NULL,
  user_name VARCHAR NOT NULL,
  remote_address VARCHAR NOT NULL,
  application_name VARCHAR NOT NULL,
  operation VARCHAR NOT NULL,
  target VARCHAR NOT NULL,
  sqlstate VARCHAR NOT NULL,
  reason VARCHAR NOT NULL,
  statement_fingerprint VARCHAR NOT NULL,
  statement_excerpt VARCHAR NOT NULL
)`;

const INSERT = `INSERT INTO main.${SECURITY_EVENTS_TABLE} VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`;

/** Statements longer than this are recorded by fingerprint and their beginning only. */
const EXCERPT_LIMIT = 2000;

/**
 * Appends every refusal to the `_cot_security_events` ledger, on a
 * connection of its own, so that a refused client's transaction (which the
 * refusal fails) cannot take the record with it. Appends are queued and
 * never block or fail the client's statement.
 */
export class SecurityEventLog {
  private queue: Promise<void> = Promise.resolve();

  private constructor(
    private readonly conn: EngineConnection,
    private readonly onError: (err: unknown) => void,
  ) {}

  static async open(engine: Engine, onError: (err: unknown) => void): Promise<SecurityEventLog> {
    const conn = await engine.connect();
    await conn.run(DDL);
    return new SecurityEventLog(conn, onError);
  }

  record(e: SecurityEvent): void {
    const params = [
      randomUUID(),
      new Date().toISOString(),
      e.user,
      e.remoteAddress,
      e.applicationName,
      e.operation,
      e.target,
      e.sqlstate,
      e.reason,
      e.fingerprint,
      e.statement.slice(0, EXCERPT_LIMIT),
    ];
    this.queue = this.queue.then(
      () => this.conn.query(INSERT, params).then(() => undefined),
    ).catch(this.onError);
  }

  /** Waits for queued appends, then closes the connection. */
  async close(): Promise<void> {
    await this.queue;
    this.conn.close();
  }

  /** Waits for queued appends (for tests). */
  flushed(): Promise<void> {
    return this.queue;
  }
}
