import { quoteIdentifier } from '../../../../sql/identifiers.js';
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

/**
 * Whether every argument of a call is an integer literal or a cast to
 * integer, or a parameter beside one (which PostgreSQL types so, as
 * sql/param-context.ts does): PostgreSQL's int4.
 */
function integerArguments(call: Node): boolean {
  const args = (call.args as Node[] | undefined) ?? [];
  const int4 = (a: Node): boolean => {
    const ival = (a.A_Const as Node | undefined)?.ival as { ival?: number } | undefined;
    if (ival !== undefined) return Math.abs(ival.ival ?? 0) <= 2147483647;
    const cast = a.TypeCast as Node | undefined;
    const type = strings((cast?.typeName as Node | undefined)?.names).at(-1);
    return cast !== undefined && (cast.typeName as Node).arrayBounds === undefined && (type === 'int4' || type === 'int' || type === 'integer');
  };
  return args.length >= 2 && args.some(int4) && args.every((a) => int4(a) || a.ParamRef !== undefined);
}

/** A JSON element's text, JSON null as SQL NULL (the `_text` functions'). */
const ELEMENT_TEXT = `CASE WHEN type = 'NULL' THEN NULL ELSE json_extract_string(value, '$') END`;
/** ... and of a jsonb element, whose object or array prints as jsonb does (DuckDB's json_each gives it without spaces). */
const JSONB_ELEMENT_TEXT = `CASE WHEN type = 'NULL' THEN NULL WHEN type IN ('OBJECT', 'ARRAY') THEN cot_jsonb_text(value) ELSE json_extract_string(value, '$') END`;
const JSONB_VALUE = `CAST(cot_jsonb_text(value) AS JSON)`;

/** An error for a row of json_each that is not what the function takes: `what` is checked on fullkey. */
const only = (element: boolean, fn: string, value: string): string =>
  element
    ? `CASE WHEN fullkey LIKE '$[%' THEN ${value} WHEN fullkey = '$' THEN error('cannot extract elements from a scalar') ELSE error('cannot extract elements from an object') END`
    : `CASE WHEN fullkey LIKE '$.%' THEN ${value} WHEN fullkey = '$' THEN error('cannot call ${fn} on a scalar') ELSE error('cannot call ${fn} on an array') END`;

/** JSON set-returning functions in FROM: the select list over DuckDB's json_each that gives PostgreSQL's columns (`column`: a one-column function's). */
const JSON_SET_FUNCTIONS: Readonly<Record<string, (fn: string, column: string) => string>> = {
  json_each: () => 'key, CAST(value AS JSON) AS value',
  jsonb_each: () => `key, ${JSONB_VALUE} AS value`,
  json_each_text: () => `key, ${ELEMENT_TEXT} AS value`,
  jsonb_each_text: () => `key, ${JSONB_ELEMENT_TEXT} AS value`,
  json_array_elements: (fn, column) => `${only(true, fn, 'CAST(value AS JSON)')} AS ${column}`,
  jsonb_array_elements: (fn, column) => `${only(true, fn, JSONB_VALUE)} AS ${column}`,
  json_array_elements_text: (fn, column) => `${only(true, fn, ELEMENT_TEXT)} AS ${column}`,
  jsonb_array_elements_text: (fn, column) => `${only(true, fn, JSONB_ELEMENT_TEXT)} AS ${column}`,
  json_object_keys: (fn, column) => `${only(false, fn, 'key')} AS ${column}`,
  jsonb_object_keys: (fn, column) => `${only(false, fn, 'key')} AS ${column}`,
};

/** The JSON set-returning functions rewritten in FROM (jsonSetFunction). */
export const JSON_FROM_FUNCTIONS: ReadonlySet<string> = new Set(Object.keys(JSON_SET_FUNCTIONS));

/**
 * `jsonb_each_text(j)`, `jsonb_array_elements(t.meta)`, `jsonb_object_keys(j)`
 * ... in FROM → a lateral query over DuckDB's json_each with PostgreSQL's
 * columns (key and value, or value, or the keys under the function's or the
 * alias's name), JSON null as SQL NULL in the `_text` forms, and
 * PostgreSQL's errors for an argument of the wrong kind. Only the call's
 * name and parentheses are replaced, so that what is rewritten inside its
 * argument (`'{"a":1}'::jsonb`) stays rewritten. True when it is rewritten:
 * the relation's other rules are not asked.
 */
export function jsonSetFunction(w: Walker, node: Node): boolean {
  const alias = node.alias as { aliasname?: string; colnames?: unknown } | undefined;
  const call = rangeCall(node);
  const parts = strings(call?.funcname);
  const fn = parts[parts.length - 1] ?? '';
  const select = JSON_SET_FUNCTIONS[fn];
  if (call === undefined || select === undefined || node.ordinality === true || parts.length > 2 || (parts.length === 2 && parts[0] !== 'pg_catalog'))
    return false;
  if (((call.args as unknown[] | undefined) ?? []).length !== 1) return false;
  const span = w.callSpan(w.index(call.location));
  if (span === null) return false;
  // A function of one column is named by its alias (`jsonb_object_keys(j) AS k`), else value (the array
  // functions' OUT parameter) or after itself (jsonb_object_keys).
  const unaliased = fn.endsWith('_object_keys') ? fn : 'value';
  const column = quoteIdentifier(alias?.colnames === undefined && alias?.aliasname !== undefined ? alias.aliasname : unaliased);
  w.replacedRelations.add(call.location as number);
  // jsonb keeps an object's keys shortest first, then in byte order, and gives them back so: its text, in that order,
  // is what json_each reads (json's as written).
  const jsonb = fn.startsWith('jsonb_');
  w.replaceTokens(span.i, span.open + 1, `LATERAL (SELECT ${select(fn, column)} FROM json_each(${jsonb ? 'cot_jsonb_text(CAST((' : ''}`);
  w.insertAfter(span.close, `${jsonb ? ' AS VARCHAR)))' : ''})${alias === undefined ? ` AS ${fn}` : ''}`);
  return true;
}
