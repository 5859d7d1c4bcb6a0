import type { ExecuteOutcome, ResultSink } from '../../../session/handler-port.js';
import { PgError } from '../../../errors/pg-error.js';
import { SqlState } from '../../../errors/sqlstate.js';
import type { RedactionRecord, RedactionRequest } from '../erasure/redactor.js';
import { TypeOid } from '../../../protocol/type-oids.js';
import type { FieldDescription } from '../../../protocol/messages.js';
import type { ErasureArg, ErasureCall } from '../../../sql/erasure-call.js';
import type { HandlerContext } from './context.js';
import type { ConnectionPortal } from './plan.js';

/**
 * cot_redact() and cot_redact_row(): the server carries them out on an
 * admin's behalf, outside any transaction block (a redaction commits on its
 * own and cannot be rolled back), and records every attempt, carried out or
 * refused, in the security ledger.
 */

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
] as const;

const field = (name: string): FieldDescription => ({ name, tableOid: 0, columnAttr: 0, typeOid: TypeOid.text, typeSize: -1, typeModifier: -1, format: 0 });

const RETAINED_COLUMNS = ['ledger', 'chain_key', 'step_count', 'first_seq', 'last_seq', 'last_step_at', 'final_hash', 'retention_id'] as const;

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

export async function executeErasure(
  ctx: HandlerContext,
  portal: ConnectionPortal,
  call: ErasureCall,
  statement: string,
  sink: ResultSink,
): Promise<ExecuteOutcome> {
  const operation = call.fn === 'cot_retain' ? 'RETAIN' : 'REDACT';
  // The role is decided, and the attempt recorded, before anything about the arguments can fail.
  const named = call.args.map((a) => {
    try {
      return argText(a, portal);
    } catch {
      return null;
    }
  });
  const target = call.fn === 'cot_redact' ? `main._cot_steps ${named[0] ?? ''}` : call.fn === 'cot_redact_row' ? `${named[0] ?? ''} ${named[2] ?? ''}` : '';
  ctx.access.erasure(operation, target, statement);
  try {
    if (ctx.tx.status !== 'I') throw new PgError(SqlState.ActiveSqlTransaction, `${call.fn}() cannot run inside a transaction block`);
    const args = call.args.map((a) => argText(a, portal));
    if (call.fn === 'cot_retain') {
      const dryRun = parseDryRun(args[0]);
      const removed = await ctx.services.erasure.retain(dryRun, `${ctx.info.user} (${ctx.info.role})`);
      ctx.access.erasureDone(operation, dryRun ? 'dry run' : '', statement, `${dryRun ? 'would remove' : 'removed'} ${removed.length} sessions`);
      if (!call.asTable) sink.row([String(removed.length)]);
      else {
        for (const r of removed) {
          sink.row([r.ledger, r.chainKey, String(r.stepCount), r.firstSeq, r.lastSeq, r.lastStepAt.toISOString(), r.finalHash, r.retentionId]);
          await sink.flushIfFull();
        }
      }
      return { done: true, tag: `SELECT ${call.asTable ? removed.length : 1}` };
    }
    const request = redactionRequest(call, args, `${ctx.info.user} (${ctx.info.role})`);
    const record = await ctx.services.erasure.redact(request);
    ctx.access.erasureDone(operation, `${record.ledger} ${record.targetSeq}.${record.column}`, statement, record.applied ? 'redacted' : 'already redacted');
    sink.row(call.asTable ? recordCells(record) : [record.redactionId]);
    return { done: true, tag: 'SELECT 1' };
  } catch (err) {
    ctx.access.erasureFailed(operation, target, statement, err);
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

function redactionRequest(call: ErasureCall, args: ReadonlyArray<string | null>, actor: string): RedactionRequest {
  const need = (i: number, what: string): string => {
    const v = args[i];
    if (v === null || v === undefined) throw new PgError(SqlState.NullValueNotAllowed, `${call.fn}(): ${what} must not be NULL`);
    return v;
  };
  if (call.fn === 'cot_redact') return { target: { traceId: need(0, 'trace_id') }, column: need(1, 'column'), reason: need(2, 'reason'), actor };
  return { target: { ledger: need(0, 'ledger'), seq: need(1, 'ledger_seq') }, column: need(2, 'column'), reason: need(3, 'reason'), actor };
}

function argText(arg: ErasureArg, portal: ConnectionPortal): string | null {
  if ('text' in arg) return arg.text;
  const value = portal.params[arg.param - 1];
  if (value === undefined) throw new PgError(SqlState.ProtocolViolation, `there is no parameter $${arg.param}`);
  if (value === null) return null;
  const format = portal.paramFormats.length === 1 ? portal.paramFormats[0] : portal.paramFormats[arg.param - 1];
  const type = portal.statement.paramTypes[arg.param - 1];
  if ((format ?? 0) === 0 || type === TypeOid.text || type === TypeOid.varchar) return value.toString('utf8');
  if (type === TypeOid.int8 && value.length === 8) return value.readBigInt64BE().toString();
  if (type === TypeOid.int4 && value.length === 4) return String(value.readInt32BE());
  if (type === TypeOid.uuid && value.length === 16) {
    const h = value.toString('hex');
    return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
  }
  throw new PgError(SqlState.FeatureNotSupported, `parameter $${arg.param} (type OID ${String(type)}) in binary format is not supported here; send it as text`);
}

function recordCells(r: RedactionRecord): Array<string | null> {
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
  ];
}
