import type { SqlConnection } from '../../engine/port.js';
import type { LedgerTable } from '../chain/schema.js';

/**
 * What redaction and retention need of an engine, beside its writer: a
 * connection of their own, the SQL that differs between engines, and a way
 * to change ledger rows that clients can never take.
 */
export interface ErasureStore {
  /** Reads, on a connection used by nothing else. */
  readonly conn: SqlConnection;
  /** A column's canonical text, as the hash covers it. */
  textSql(column: string, type: string): string;
  /** The relation that holds a ledger. */
  relation(table: LedgerTable): string;
  /**
   * One row per session of a chained ledger whose last step is older than
   * $1 (a timestamptz's text): its key, step count, first and last
   * step_index, first and last ledger_seq, last created_at in microseconds,
   * last current_hash and its ledger_seqs joined by commas, oldest first.
   */
  sessionsSql(table: LedgerTable): string;
  /** The relation of the steps' vectors, or null where there is none. */
  vectors(): Promise<string | null>;
  /**
   * Runs the statements in one transaction that may change ledger rows,
   * then makes the values they removed leave the engine's files (a
   * checkpoint, a VACUUM) as far as the engine allows.
   */
  change(tables: readonly LedgerTable[], statements: ReadonlyArray<{ readonly sql: string; readonly params?: readonly string[] }>): Promise<void>;
}
