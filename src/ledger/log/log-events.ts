import { randomUUID } from 'node:crypto';
import type { SqlConnection } from '../../engine/port.js';
import { CHAIN_COLUMNS, qualifiedName, type LedgerTable } from '../chain/schema.js';
import { decodeSeqs, RetainedSeqs, retainedSeqs } from '../erasure/retention-sql.js';

/**
 * Events of the log itself, each a chained row and a leaf of the log, so that
 * every later verification meets it: a key rotation (signed by the old key),
 * a lost key (signed by the new one only), and a recorded loss of
 * acknowledged appends (the ledger_seq ranges that no row will ever fill).
 */
export const LOG_EVENTS_TABLE = '_cot_log_events';

export const LOG_EVENTS_DDL = `CREATE TABLE IF NOT EXISTS main.${LOG_EVENTS_TABLE} (
  event_id UUID NOT NULL,
  kind VARCHAR NOT NULL,
  tree_size BIGINT NOT NULL,
  seqs VARCHAR NOT NULL,
  old_key VARCHAR NOT NULL,
  new_key VARCHAR NOT NULL,
  operator VARCHAR NOT NULL,
  reason VARCHAR NOT NULL,
  recorded_at TIMESTAMP WITH TIME ZONE NOT NULL,
  note VARCHAR NOT NULL,
  ${CHAIN_COLUMNS.map((c) => `${c.name} ${c.type} NOT NULL`).join(',\n  ')}
)`;

export type LogEventKind = 'key rotated' | 'key lost' | 'appends lost';

export interface LogEvent {
  readonly kind: LogEventKind;
  /** The log's size when the event was recorded (before its own leaf). */
  readonly treeSize: number;
  /** For a loss: the ledger_seq ranges lost, as encodeSeqs writes them; '' otherwise. */
  readonly seqs: string;
  /** The key that signed until now: its verifier key when known, else its name and hash. */
  readonly oldKey: string;
  /** The verifier key that signs from now on; '' for a loss. */
  readonly newKey: string;
  readonly operator: string;
  readonly reason: string;
}

/** The text a log event's signed note carries: every field that matters, one per line. */
export function logEventText(origin: string, e: LogEvent, recordedAt: string): string {
  const line = (v: string): string => v.replace(/[\r\n]+/g, ' ');
  return [
    `${origin}`,
    `cotwire log event: ${e.kind}`,
    `tree size ${e.treeSize}`,
    `lost ledger_seq ${e.seqs === '' ? '-' : e.seqs}`,
    `old key ${line(e.oldKey) || '-'}`,
    `new key ${line(e.newKey) || '-'}`,
    `operator ${line(e.operator) || '-'}`,
    `reason ${line(e.reason) || '-'}`,
    `recorded at ${recordedAt}`,
    '',
  ].join('\n');
}

/** A log event's row in LOG_EVENTS_TABLE's column order (before the chain columns), with its signed note; `recordedAt` is ISO 8601. */
export function logEventRow(e: LogEvent, recordedAt: string, note: string): string[] {
  // A timestamp's text in a chained row is its microseconds since the epoch, as the writers take it.
  const micros = String(BigInt(Date.parse(recordedAt)) * 1000n);
  return [randomUUID(), e.kind, String(e.treeSize), e.seqs, e.oldKey, e.newKey, e.operator, e.reason, micros, note];
}

/** A recorded loss of acknowledged appends, as the audit and verification report it. */
export interface RecordedLoss {
  readonly seqs: string;
  readonly rows: number;
  readonly operator: string;
  readonly reason: string;
  readonly recordedAt: string;
}

/** Every recorded loss, in the order recorded; none where the database has no log events ledger. */
export async function recordedLosses(conn: SqlConnection, ledgers: readonly LedgerTable[]): Promise<RecordedLoss[]> {
  const table = ledgers.find((t) => t.name === LOG_EVENTS_TABLE);
  if (table === undefined) return [];
  const rows = (await conn.query(
    `SELECT seqs, operator, reason, CAST(recorded_at AS VARCHAR) FROM ${qualifiedName(table)} WHERE kind = 'appends lost' ORDER BY ledger_seq`,
  )) as Array<[string, string, string, string]>;
  return rows.map(([seqs, operator, reason, recordedAt]) => ({
    seqs,
    rows: decodeSeqs(seqs).reduce((n, [a, b]) => n + b - a + 1, 0),
    operator,
    reason,
    recordedAt,
  }));
}

/**
 * The ledger_seq whose rows are gone and that a record accounts for: removed by retention, or lost and
 * recorded as lost. Their leaves stay in the log; no row will ever fill them.
 */
export async function accountedSeqs(conn: SqlConnection, ledgers: readonly LedgerTable[]): Promise<RetainedSeqs> {
  const retained = await retainedSeqs(conn, ledgers);
  const lost = await recordedLosses(conn, ledgers);
  if (lost.length === 0) return retained;
  return new RetainedSeqs([...retained.ranges(), ...lost.flatMap((l) => decodeSeqs(l.seqs))]);
}
