import type { Token } from '../../../../sql/lexer.js';
import { toCharSql } from '../to-char.js';
import { callOf, type Node, spelledName, type Walker } from './walker.js';

/** PostgreSQL functions DuckDB has under another name, and to_char with a literal format. */

/** PostgreSQL functions DuckDB has under another name, with the same arguments and meaning. */
export const FUNCTION_NAMES: Readonly<Record<string, string>> = {
  json_build_object: 'json_object',
  jsonb_build_object: 'json_object',
  json_build_array: 'json_array',
  jsonb_build_array: 'json_array',
  json_object_agg: 'json_group_object',
  jsonb_object_agg: 'json_group_object',
  to_jsonb: 'to_json',
  row_to_json: 'to_json',
  every: 'bool_and',
  btrim: 'trim',
};

/** to_char(value, 'format'); when it is rewritten, the call's other rules are not asked. */
export function toCharCall(w: Walker, node: Node): boolean {
  const call = callOf(w, node);
  return call !== null && toChar(w, node, call.parts, call.i);
}

/** to_char(value, 'format') with a literal format (engines/duckdb/catalog/to-char.ts). */
function toChar(w: Walker, node: Node, parts: readonly string[], i: number): boolean {
  const fn = parts[parts.length - 1];
  const args = node.args as Node[] | undefined;
  if (fn !== 'to_char' || args?.length !== 2 || parts.length > 2 || (parts.length === 2 && parts[0] !== 'pg_catalog') || !w.expressions) return false;
  const format = ((args[1]?.A_Const as Node | undefined)?.sval as { sval?: string } | undefined)?.sval;
  const span = w.callSpan(i);
  const formatAt = w.index((args[1]?.A_Const as Node | undefined)?.location);
  if (format === undefined || span === null || formatAt === null || w.tokens[formatAt - 1]?.text !== ',' || formatAt !== span.close - 1) return false;
  const value = w.text.slice((w.tokens[span.open] as Token).end, (w.tokens[formatAt - 1] as Token).start);
  const sql = toCharSql(value, format);
  if (sql === null) return false;
  // The value is taken as written: a rewrite inside it (rare in a to_char argument) is not applied.
  w.replaceTokens(i, span.close + 1, sql);
  return true;
}

/** A function DuckDB has under another name (FUNCTION_NAMES); when it is renamed, the call's other rules are not asked. */
export function renamedFunction(w: Walker, node: Node): boolean {
  const call = callOf(w, node);
  const name = call === null ? null : spelledName(w, call);
  if (call === null || name === null) return false;
  const renamed = FUNCTION_NAMES[call.fn];
  if (renamed === undefined || !(call.parts.length === 1 || call.parts[0] === 'pg_catalog')) return false;
  w.replaceTokens(call.i, name.next, renamed);
  return true;
}
