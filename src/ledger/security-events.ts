import { randomUUID } from 'node:crypto';
import type { LedgerCatalog } from './chain/catalog.js';
import { CHAIN_COLUMNS, type LedgerTable } from './chain/schema.js';
import type { LedgerAppender } from './chain/append.js';

/** One refused statement, as recorded in the security ledger. */
export interface SecurityEvent {
  readonly user: string;
  /** The user's organisation (its org_id), or null. */
  readonly org: string | null;
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

export const SECURITY_EVENTS_DDL = `CREATE TABLE IF NOT EXISTS main.${SECURITY_EVENTS_TABLE} (
  event_id UUID NOT NULL,
  user_name VARCHAR NOT NULL,
  remote_address VARCHAR NOT NULL,
  application_name VARCHAR NOT NULL,
  operation VARCHAR NOT NULL,
  target VARCHAR NOT NULL,
  sqlstate VARCHAR NOT NULL,
  reason VARCHAR NOT NULL,
  statement_fingerprint VARCHAR NOT NULL,
  statement_excerpt VARCHAR NOT NULL,
  org_id VARCHAR,
  ${CHAIN_COLUMNS.map((c) => `${c.name} ${c.type} NOT NULL`).join(',\n  ')}
)`;

/** Statements longer than this are recorded by fingerprint and their beginning only. */
const EXCERPT_LIMIT = 2000;

/**
 * Appends every refusal to the `_cot_security_events` ledger through the
 * writer, outside the refused client's transaction (which the refusal
 * fails), so attempts to tamper are themselves chained. Appends never block
 * or fail the client's statement.
 */
export class SecurityEventLog {
  private queue: Promise<void> = Promise.resolve();

  private constructor(
    private readonly writer: LedgerAppender,
    /** Null while the security ledger is damaged: each refusal is then reported through onError instead. */
    private readonly table: LedgerTable | null,
    private readonly onError: (err: unknown) => void,
  ) {}

  /** Over the security ledger (created by the caller); a damaged one fails closed, and refusals are still logged. */
  static async open(catalog: LedgerCatalog, writer: LedgerAppender, onError: (err: unknown) => void): Promise<SecurityEventLog> {
    let table: LedgerTable | null;
    try {
      table = await catalog.find(['main', SECURITY_EVENTS_TABLE]);
      if (table === null) throw new Error(`${SECURITY_EVENTS_TABLE} is not a chained ledger`);
    } catch (err) {
      onError(err);
      table = null;
    }
    return new SecurityEventLog(writer, table, onError);
  }

  record(e: SecurityEvent): void {
    const values: Readonly<Record<string, string | null>> = {
      event_id: randomUUID(),
      user_name: e.user,
      remote_address: e.remoteAddress,
      application_name: e.applicationName,
      operation: e.operation,
      target: e.target,
      sqlstate: e.sqlstate,
      reason: e.reason,
      statement_fingerprint: e.fingerprint,
      statement_excerpt: e.statement.slice(0, EXCERPT_LIMIT),
      // A ledger made before organisations were recorded has no org_id column: its rows go without.
      org_id: e.org,
    };
    const row = (this.table?.columns ?? []).filter((c) => !this.table?.serverColumns.has(c.name)).map((c) => values[c.name] ?? null);
    const { table } = this;
    if (table === null) {
      this.onError(new Error(`the security ledger ${SECURITY_EVENTS_TABLE} is damaged; this refusal is not recorded there: ${JSON.stringify(values)}`));
      return;
    }
    this.queue = this.queue.then(() => this.writer.append([{ table, rows: [row] }])).then(() => undefined, this.onError);
  }

  /** Waits for queued appends. */
  async flushed(): Promise<void> {
    await this.queue;
    // And in the engine, for a reader that does not go through a client connection.
    await this.writer.visible();
  }

  close(): Promise<void> {
    return this.queue;
  }
}
