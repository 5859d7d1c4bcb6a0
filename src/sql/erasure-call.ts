import { parsedOf, type SqlSource, textOf } from './parsed.js';
import { strings, type PgNode } from './pg-tree.js';

/**
 * The server's erasure functions, which change ledgers on an admin's behalf
 * and so cannot run inside DuckDB: a statement that calls one is answered
 * by the server, and must be that call alone:
 *
 *   SELECT cot_redact(trace_id, column, reason)          -- a step of _cot_steps
 *   SELECT cot_redact_row(ledger, ledger_seq, column, reason)
 *   SELECT cot_retain()  /  SELECT cot_retain(dry_run)
 *
 * also as `SELECT * FROM f(...)`. Each argument is a constant or a
 * parameter, through casts.
 */

export const ERASURE_FUNCTIONS = ['cot_redact', 'cot_redact_row', 'cot_retain'] as const;
export type ErasureFunction = (typeof ERASURE_FUNCTIONS)[number];

/** An argument: a constant's text (null for NULL), or a 1-based parameter number. */
export type ErasureArg = { readonly text: string | null } | { readonly param: number };

export interface ErasureCall {
  readonly fn: ErasureFunction;
  readonly args: readonly ErasureArg[];
  /** `SELECT * FROM f(...)`: every column of the result; otherwise one column named after the function. */
  readonly asTable: boolean;
  /** The column's name in the scalar form: the alias, or the function's name. */
  readonly column: string;
}

const ARITY: Record<ErasureFunction, readonly number[]> = { cot_redact: [3], cot_redact_row: [4], cot_retain: [0, 1] };

const NAMES = new RegExp(`\\b(${ERASURE_FUNCTIONS.join('|')})\\b`, 'i');

/** Thrown for a statement that calls an erasure function in any other way. */
export class ErasureCallError extends Error {}

/**
 * The erasure call a statement is, or null when it calls none. A statement
 * that mentions one in any other shape (nested, with other columns, with a
 * computed argument) is refused rather than sent to DuckDB.
 */
export function erasureCall(sql: SqlSource): ErasureCall | null {
  if (!NAMES.test(textOf(sql))) return null;
  const statement = parsedOf(sql);
  const calls = statement.calls;
  if (calls === null) return null;
  const named = calls.filter((c) => isErasure(c.name.toLowerCase()));
  if (named.length === 0) return null;
  const shape = new ErasureCallError(
    `${named[0]?.name.toLowerCase() ?? 'cot_redact'}() must be called alone, as SELECT ${named[0]?.name.toLowerCase() ?? 'cot_redact'}(...) or SELECT * FROM ${named[0]?.name.toLowerCase() ?? 'cot_redact'}(...), with constants or parameters as arguments`,
  );
  const select = statement.tree?.SelectStmt as PgNode | undefined;
  if (select === undefined || named.length !== 1 || calls.length !== 1) throw shape;
  const onlyKeys = Object.keys(select).filter((k) => k !== 'targetList' && k !== 'fromClause' && k !== 'limitOption' && k !== 'op');
  if (onlyKeys.length > 0 || select.op !== 'SETOP_NONE') throw shape;
  const targets = (select.targetList as PgNode[] | undefined) ?? [];
  const from = (select.fromClause as PgNode[] | undefined) ?? [];
  if (targets.length !== 1) throw shape;
  const target = (targets[0] as PgNode).ResTarget as PgNode;
  let call: PgNode | undefined;
  let asTable: boolean;
  if (from.length === 0) {
    call = (target.val as PgNode | undefined)?.FuncCall as PgNode | undefined;
    asTable = false;
  } else {
    const star = ((target.val as PgNode | undefined)?.ColumnRef as PgNode | undefined)?.fields as PgNode[] | undefined;
    if (from.length !== 1 || star?.length !== 1 || (star[0] as PgNode).A_Star === undefined) throw shape;
    const range = (from[0] as PgNode).RangeFunction as PgNode | undefined;
    const items = (range?.functions as PgNode[] | undefined) ?? [];
    const first = ((items[0] as PgNode | undefined)?.List as PgNode | undefined)?.items as PgNode[] | undefined;
    call = (first?.[0] as PgNode | undefined)?.FuncCall as PgNode | undefined;
    if (items.length !== 1 || range?.alias !== undefined || range?.lateral === true) throw shape;
    asTable = true;
  }
  if (call === undefined || (asTable && target.name !== undefined)) throw shape;
  const names = strings(call.funcname);
  const fn = (names[names.length - 1] ?? '').toLowerCase();
  if (!isErasure(fn) || (names.length > 1 && names.slice(0, -1).join('.').toLowerCase() !== 'pg_catalog')) throw shape;
  const raw = (call.args as PgNode[] | undefined) ?? [];
  const args = raw.map(argOf);
  if (args.some((a) => a === null) || !ARITY[fn].includes(args.length)) {
    throw new ErasureCallError(`${fn}() takes ${ARITY[fn].join(' or ')} arguments, each a constant or a parameter`);
  }
  return { fn, args: args as ErasureArg[], asTable, column: typeof target.name === 'string' ? target.name : fn };
}

function isErasure(name: string): name is ErasureFunction {
  return (ERASURE_FUNCTIONS as readonly string[]).includes(name);
}

function argOf(e: PgNode): ErasureArg | null {
  const cast = e.TypeCast as PgNode | undefined;
  if (cast !== undefined) return argOf(cast.arg as PgNode);
  const param = (e.ParamRef as { number?: number } | undefined)?.number;
  if (param !== undefined) return { param };
  const c = e.A_Const as PgNode | undefined;
  if (c === undefined) return null;
  if (c.isnull === true) return { text: null };
  const s = (c.sval as { sval?: string } | undefined)?.sval;
  if (c.sval !== undefined) return { text: s ?? '' };
  const i = (c.ival as { ival?: number } | undefined)?.ival;
  if (c.ival !== undefined) return { text: String(i ?? 0) };
  const b = (c.boolval as { boolval?: boolean } | undefined)?.boolval;
  if (c.boolval !== undefined) return { text: b === true ? 'true' : 'false' };
  const f = (c.fval as { fval?: string } | undefined)?.fval;
  if (f !== undefined) return { text: f };
  return null;
}
