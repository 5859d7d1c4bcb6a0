import type { ChainVerdict } from '../chain/verdict.js';

/**
 * What an audit can find. The first three come from holding the rows
 * against the global log: `missing` (an acknowledged row is gone: a
 * deletion, a cut tail), `altered` (a row's hash is not the one the log
 * holds: an edit, re-chained or not, or a row moved to another chain),
 * `unlogged` (a row the writer never wrote: its ledger_seq is beyond the
 * log, repeated or null). The chain kinds (`edited`, `deleted`, `inserted`,
 * `reordered`) come from recomputing each chain. The `ledger_*` kinds are a
 * ledger dropped or reshaped behind the server, and `log_stopped` is a log
 * that could not be brought up to the rows at start-up. A `gap` is no
 * failure: acknowledged appends lost, and recorded as lost by an operator;
 * it is shown at every audit, for ever.
 */
export type FindingKind =
  | 'missing'
  | 'altered'
  | 'unlogged'
  | 'edited'
  | 'deleted'
  | 'inserted'
  | 'reordered'
  | 'ledger_missing'
  | 'ledger_changed'
  | 'log_stopped'
  | 'gap';

/** One thing an audit found wrong, as cot_audit() lists it, on either engine. */
export interface AuditFinding {
  readonly kind: FindingKind;
  /** `schema.table`, or null when the rows are gone and nothing left tells whose they were. */
  readonly ledger: string | null;
  /** The chain (session_id), or null when it is unknown or the finding is about the whole ledger. */
  readonly chainKey: string | null;
  readonly firstSeq: number | null;
  readonly lastSeq: number | null;
  /** How many rows the finding covers. */
  readonly rows: number;
  readonly detail: string;
}

/** A chain that does not verify, as a finding: the same words on either engine. */
export function chainBreakFinding(v: ChainVerdict): AuditFinding {
  return {
    kind: (v.breakKind ?? 'edited') as FindingKind,
    ledger: v.table,
    chainKey: v.chainKey,
    firstSeq: null,
    lastSeq: null,
    rows: 1,
    detail: `the chain breaks at step ${String(v.firstBrokenIndex)} (${String(v.breakKind)}): expected ${String(v.expectedHash)}, found ${String(v.actualHash)}`,
  };
}

/** A recorded loss as the audit shows it. */
export function gapFinding(loss: {
  readonly seqs: string;
  readonly rows: number;
  readonly operator: string;
  readonly reason: string;
  readonly recordedAt: string;
}): AuditFinding {
  const ranges = loss.seqs.split(',');
  const [first] = (ranges[0] ?? '').split('..');
  const last = (ranges[ranges.length - 1] ?? '').split('..').pop();
  return {
    kind: 'gap',
    ledger: null,
    chainKey: null,
    firstSeq: first === undefined || first === '' ? null : Number(first),
    lastSeq: last === undefined || last === '' ? null : Number(last),
    rows: loss.rows,
    detail: `${loss.rows} acknowledged appends (ledger_seq ${loss.seqs}) were lost and recorded as lost at ${loss.recordedAt} by ${loss.operator}: ${loss.reason}. Their leaves stay in the log; no row will fill them`,
  };
}

/** A run of ledger_seq whose rows are gone and whose ledger and chain nothing names. */
export function missingRunFinding(first: number, last: number, detail: string): AuditFinding {
  return { kind: 'missing', ledger: null, chainKey: null, firstSeq: first, lastSeq: last, rows: last - first + 1, detail };
}
