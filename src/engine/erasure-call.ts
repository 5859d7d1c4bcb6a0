import { PgError } from '../errors/pg-error.js';
import { SqlState } from '../errors/sqlstate.js';
import type { FieldDescription } from '../protocol/messages.js';
import { TypeOid } from '../protocol/type-oids.js';
import type { ErasureArg, ErasureCall } from '../sql/erasure-call.js';

/**
 * cot_redact(), cot_redact_row() and cot_retain() as either engine's
 * handler answers them: the server carries them out on an admin's behalf,
 * outside any transaction block (an erasure commits on its own and cannot
 * be rolled back), and records every attempt, carried out or refused, in
 * the security ledger. The wing gives its access checks, its erasure
 * service and the call's bound parameters.
 */

/** One redaction as its record holds it (ledger/erasure/redactor.ts). */
export interface RedactionResult {
  readonly redactionId: string;
  readonly ledger: string;
  readonly targetSeq: string;
  readonly chainKey: string;
  readonly stepIndex: number;
  readonly traceId: string | null;
  readonly column: string;
  readonly valueDigest: string;
  readonly reason: string;
  readonly redactedBy: string;
  /** The record's own ledger_seq, which the global log and the next checkpoint cover. */
  readonly recordSeq: string;
  /** False when the value had already been redacted by this record. */
  readonly applied: boolean;
  /**
   * Under cotwire/v3, the first time: the value's text and its key, which
   * the redaction erased, as JSON; whoever holds it can prove the value
   * later (README, "cotwire/v3"). Null otherwise.
   */
  readonly opening: string | null;
}

/** One session retention removed, or would remove (ledger/erasure/retention.ts). */
export interface RetainedResult {
  readonly ledger: string;
  readonly chainKey: string;
  readonly stepCount: number;
  readonly firstSeq: string;
  readonly lastSeq: string;
  readonly lastStepAt: Date;
  readonly finalHash: string;
  /** The record's id; null in a dry run. */
  readonly retentionId: string | null;
}

export interface RedactionAsk {
  readonly target: { readonly traceId: string } | { readonly ledger: string; readonly seq: string };
  readonly column: string;
  readonly reason: string;
  readonly actor: string;
}

/** What cot_redact() and cot_retain() call: the server's erasure. */
export interface ErasureService {
  redact(request: RedactionAsk): Promise<RedactionResult>;
  /** Runs ledger.retentionDays now (or lists, dry); refused when retention is off, or shorter than ledger.retentionFloorDays (22023). */
  retain(dryRun: boolean, actor: string): Promise<RetainedResult[]>;
}

/** The wing's access checks: the role decided and every attempt recorded. */
export interface ErasureAccess {
  erasure(operation: string, target: string, statement: string): void;
  erasureDone(operation: string, target: string, statement: string, outcome: string): void;
  erasureFailed(operation: string, target: string, statement: string, err: unknown): void;
}

/** A call's bound parameters as the wire gave them. */
export interface ErasureParams {
  readonly values: ReadonlyArray<Buffer | string | null>;
  readonly formats: readonly number[];
  readonly types: readonly number[];
}

export interface ErasureSink {
  row(cells: ReadonlyArray<string | null>): void;
  flushIfFull(): Promise<void>;
}

const RECORD_COLUMNS = [
  'redaction_id',
  'ledger',
  'target_seq',
  'chain_key',
  'step_index',
  'trace_id',
  'column_name',
  'value_digest',
  'reason',
  'redacted_by',
  'record_seq',
  'applied',
  'opening',
] as const;

const RETAINED_COLUMNS = ['ledger', 'chain_key', 'step_count', 'first_seq', 'last_seq', 'last_step_at', 'final_hash', 'retention_id'] as const;

const field = (name: string): FieldDescription => ({ name, tableOid: 0, columnAttr: 0, typeOid: TypeOid.text, typeSize: -1, typeModifier: -1, format: 0 });

/**
 * The result columns of a call: as a table, the whole record (one per
 * removed session for cot_retain); otherwise one column under the
 * function's name: the redaction_id, or the number of sessions removed.
 */
export function erasureFields(call: ErasureCall): FieldDescription[] {
  if (!call.asTable) return [field(call.column)];
  return (call.fn === 'cot_retain' ? RETAINED_COLUMNS : RECORD_COLUMNS).map(field);
}

/** Parameters of an erasure call are text unless the client declared them otherwise. */
export function erasureParamTypes(call: ErasureCall, declared: readonly number[]): number[] {
  const count = Math.max(declared.length, ...call.args.map((a) => ('param' in a ? a.param : 0)));
  return Array.from({ length: count }, (_, i) => declared[i] || TypeOid.text);
}

/** Carries out a call, answering its rows into `sink`; answers the command tag. */
export async function runErasure(
  call: ErasureCall,
  params: ErasureParams,
  who: { readonly user: string; readonly role: string; readonly inBlock: boolean },
  access: ErasureAccess,
  service: ErasureService,
  statement: string,
  sink: ErasureSink,
): Promise<string> {
  const operation = call.fn === 'cot_retain' ? 'RETAIN' : 'REDACT';
  // The role is decided, and the attempt recorded, before anything about the arguments can fail.
  const named = call.args.map((a) => {
    try {
      return argText(a, params);
    } catch {
      return null;
    }
  });
  const target = call.fn === 'cot_redact' ? `main._cot_steps ${named[0] ?? ''}` : call.fn === 'cot_redact_row' ? `${named[0] ?? ''} ${named[2] ?? ''}` : '';
  access.erasure(operation, target, statement);
  const actor = `${who.user} (${who.role})`;
  try {
    if (who.inBlock) throw new PgError(SqlState.ActiveSqlTransaction, `${call.fn}() cannot run inside a transaction block`);
    const args = call.args.map((a) => argText(a, params));
    if (call.fn === 'cot_retain') {
      const dryRun = parseDryRun(args[0]);
      const removed = await service.retain(dryRun, actor);
      access.erasureDone(operation, dryRun ? 'dry run' : '', statement, `${dryRun ? 'would remove' : 'removed'} ${removed.length} sessions`);
      if (!call.asTable) sink.row([String(removed.length)]);
      else {
        for (const r of removed) {
          sink.row([r.ledger, r.chainKey, String(r.stepCount), r.firstSeq, r.lastSeq, r.lastStepAt.toISOString(), r.finalHash, r.retentionId]);
          await sink.flushIfFull();
        }
      }
      return `SELECT ${call.asTable ? removed.length : 1}`;
    }
    const record = await service.redact(redactionRequest(call, args, actor));
    access.erasureDone(operation, `${record.ledger} ${record.targetSeq}.${record.column}`, statement, record.applied ? 'redacted' : 'already redacted');
    sink.row(call.asTable ? recordCells(record) : [record.redactionId]);
    return 'SELECT 1';
  } catch (err) {
    access.erasureFailed(operation, target, statement, err);
    throw err;
  }
}

/** cot_retain(dry_run): a boolean's text; no argument is a real run. */
function parseDryRun(text: string | null | undefined): boolean {
  if (text === undefined) return false;
  const t = (text ?? '').trim().toLowerCase();
  if (['t', 'true', 'on', 'yes', '1'].includes(t)) return true;
  if (['f', 'false', 'off', 'no', '0'].includes(t)) return false;
  throw new PgError(SqlState.InvalidTextRepresentation, `invalid input syntax for type boolean: "${text ?? 'NULL'}"`);
}

function redactionRequest(call: ErasureCall, args: ReadonlyArray<string | null>, actor: string): RedactionAsk {
  const need = (i: number, what: string): string => {
    const v = args[i];
    if (v === null || v === undefined) throw new PgError(SqlState.NullValueNotAllowed, `${call.fn}(): ${what} must not be NULL`);
    return v;
  };
  if (call.fn === 'cot_redact') return { target: { traceId: need(0, 'trace_id') }, column: need(1, 'column'), reason: need(2, 'reason'), actor };
  return { target: { ledger: need(0, 'ledger'), seq: need(1, 'ledger_seq') }, column: need(2, 'column'), reason: need(3, 'reason'), actor };
}

function argText(arg: ErasureArg, params: ErasureParams): string | null {
  if ('text' in arg) return arg.text;
  const value = params.values[arg.param - 1];
  if (value === undefined) throw new PgError(SqlState.ProtocolViolation, `there is no parameter $${arg.param}`);
  if (value === null) return null;
  if (typeof value === 'string') return value;
  const format = params.formats.length === 1 ? params.formats[0] : params.formats[arg.param - 1];
  const type = params.types[arg.param - 1];
  if ((format ?? 0) === 0 || type === TypeOid.text || type === TypeOid.varchar) return value.toString('utf8');
  if (type === TypeOid.int8 && value.length === 8) return value.readBigInt64BE().toString();
  if (type === TypeOid.int4 && value.length === 4) return String(value.readInt32BE());
  if (type === TypeOid.uuid && value.length === 16) {
    const h = value.toString('hex');
    return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
  }
  throw new PgError(SqlState.FeatureNotSupported, `parameter $${arg.param} (type OID ${String(type)}) in binary format is not supported here; send it as text`);
}

function recordCells(r: RedactionResult): Array<string | null> {
  return [
    r.redactionId,
    r.ledger,
    r.targetSeq,
    r.chainKey,
    String(r.stepIndex),
    r.traceId,
    r.column,
    r.valueDigest,
    r.reason,
    r.redactedBy,
    r.recordSeq,
    r.applied ? 'true' : 'false',
    r.opening,
  ];
}
