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
 * that could not be brought up to the rows at start-up.
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
  | 'log_stopped';

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
