import { strings } from '../../../../sql/pg-tree.js';
import { type Node, rangeCall, type Walker, wordOf } from './walker.js';

/** Set-returning functions and functions in FROM, shaped as PostgreSQL returns and names them. */

/** Functions that return a scalar per row and, in FROM with an alias, name their column after the alias. */
export const SCALAR_SET_FUNCTIONS = new Set(['generate_series', 'unnest', 'generate_subscripts']);

/** Set-returning functions that DuckDB has as scalars returning a list: in a select list they are unnested. */
const SELECT_LIST_SET_FUNCTIONS = new Set(['generate_series']);

/** Functions that return one value, which PostgreSQL lets FROM use as a one-row table (Grafana's string_to_array(...) s). */
export const SCALAR_FROM_FUNCTIONS = new Set([
  'string_to_array',
  'regexp_split_to_array',
  'parse_ident',
  'current_schemas',
  'array_append',
  'array_cat',
  'current_schema',
  'current_database',
]);

/**
 * `SELECT generate_series(1, 3)` → `SELECT unnest(generate_series(1, 3))`:
 * in PostgreSQL a set-returning function in the select list returns one
 * row per element (several are zipped, the shorter padded with NULLs, as
 * DuckDB's unnest does); DuckDB's scalar version returns one list.
 */
export function setReturningTargets(w: Walker, select: Node): void {
  for (const target of (select.targetList as Node[] | undefined) ?? []) {
    const val = (target.ResTarget as Node | undefined)?.val as Node | undefined;
    // Directly, or under a cast: generate_series(1, 3)::int.
    const call = (val?.FuncCall ?? ((val?.TypeCast as Node | undefined)?.arg as Node | undefined)?.FuncCall) as Node | undefined;
    if (call === undefined) continue;
    const parts = strings(call.funcname);
    const fn = parts[parts.length - 1];
    if (fn === undefined || !SELECT_LIST_SET_FUNCTIONS.has(fn) || (parts.length === 2 && parts[0] !== 'pg_catalog') || parts.length > 2) continue;
    const span = w.callSpan(w.index(call.location));
    if (span === null) continue;
    // Integer arguments give integer values in PostgreSQL; DuckDB's are bigint.
    const integers = integerArguments(call);
    w.insertBefore(span.i, integers ? 'unnest(CAST(' : 'unnest(');
    w.insertAfter(span.close, integers ? ' AS INTEGER[]))' : ')');
  }
}

/**
 * A set-returning function in FROM that DuckDB has as a table function of
 * another column type (generate_series of integers), or a function of one
 * value PostgreSQL lets FROM use as a one-row table: its column named as
 * PostgreSQL names it.
 */
export function fromFunction(w: Walker, node: Node): void {
  const alias = node.alias as { aliasname?: string; colnames?: unknown } | undefined;
  if (node.ordinality === true) return;
  const call = rangeCall(node);
  const parts = strings(call?.funcname);
  const fn = parts[parts.length - 1];
  if (fn === undefined || !(SCALAR_SET_FUNCTIONS.has(fn) || SCALAR_FROM_FUNCTIONS.has(fn))) return;
  const span = w.callSpan(w.index(call?.location));
  if (span === null) return;
  const { i, close } = span;
  if (fn === 'generate_series' && call !== undefined && integerArguments(call) && (parts.length === 1 || parts[0] === 'pg_catalog')) {
    // Integer arguments give an integer column in PostgreSQL; DuckDB's table function's is bigint.
    w.insertBefore(i, '(SELECT CAST(generate_series AS INTEGER) AS generate_series FROM ');
    w.insertAfter(close, alias === undefined ? ') AS generate_series' : ')');
  }
  if (alias?.colnames !== undefined) return;
  if (alias?.aliasname === undefined) {
    // Without an alias PostgreSQL names the table and its column after the function (TypeORM's SELECT * FROM current_schema()).
    if (SCALAR_FROM_FUNCTIONS.has(fn)) {
      w.insertBefore(i, '(SELECT ');
      w.insertAfter(close, ` AS ${fn}) AS ${fn}`);
    }
    return;
  }
  let a = close + 1;
  if (wordOf(w.tokens[a]) === 'as') a++;
  const aliasToken = w.tokens[a];
  if (aliasToken === undefined || wordOf(aliasToken) !== alias.aliasname.toLowerCase()) return;
  if (SCALAR_FROM_FUNCTIONS.has(fn)) {
    // f(...) s → (SELECT f(...) AS s) s
    w.insertBefore(i, '(SELECT ');
    w.insertAfter(close, ` AS ${aliasToken.text})`);
  } else {
    w.insertAfter(a, `(${aliasToken.text})`);
  }
}

/** Whether every argument of a call is an integer literal or a cast to integer: PostgreSQL's int4. */
function integerArguments(call: Node): boolean {
  const args = (call.args as Node[] | undefined) ?? [];
  const int4 = (a: Node): boolean => {
    const ival = (a.A_Const as Node | undefined)?.ival as { ival?: number } | undefined;
    if (ival !== undefined) return Math.abs(ival.ival ?? 0) <= 2147483647;
    const cast = a.TypeCast as Node | undefined;
    const type = strings((cast?.typeName as Node | undefined)?.names).at(-1);
    return cast !== undefined && (cast.typeName as Node).arrayBounds === undefined && (type === 'int4' || type === 'int' || type === 'integer');
  };
  return args.length >= 2 && args.every(int4);
}
