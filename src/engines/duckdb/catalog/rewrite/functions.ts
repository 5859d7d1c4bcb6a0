import type { Token } from '../../../../sql/lexer.js';
import { quoteLiteral } from '../../../../sql/identifiers.js';
import { PG_SCHEMA } from '../pg-catalog.js';
import { toCharSql } from '../to-char.js';
import { typeWitness } from '../type-witness.js';
import { callOf, type Node, spelledName, type Walker, wordOf } from './walker.js';

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
  // uuid-ossp's random UUID: DuckDB's own, so that it serves as a column's DEFAULT too (TypeORM's uuid columns).
  uuid_generate_v4: 'gen_random_uuid',
  // DuckDB's upper makes ß the capital ẞ; PostgreSQL's, a character at a time, has no capital for it and keeps ß.
  upper: `${PG_SCHEMA}.cot_upper`,
  // array_cat(NULL, NULL) is NULL, where DuckDB's list_concat gives an empty list.
  array_cat: `${PG_SCHEMA}.cot_array_cat`,
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
  const sql = toCharSql(value, format, typeWitness(args[0]));
  if (sql === null) return false;
  // The value is taken as written: a rewrite inside it (rare in a to_char argument) is not applied.
  w.replaceTokens(i, span.close + 1, sql);
  return true;
}

/**
 * Calls whose shorter forms DuckDB lacks, given the argument PostgreSQL
 * defaults (`lpad(s, 5)` pads with spaces), and array_to_string, whose
 * third argument (the text of a NULL element) DuckDB's has not, and whose
 * elements it prints as DuckDB casts them (`2.0` for PostgreSQL's `2`).
 */
export const DEFAULTED_ARGUMENTS: Readonly<Record<string, { readonly arity: number; readonly added: string; readonly macro?: string }>> = {
  lpad: { arity: 2, added: "' '" },
  rpad: { arity: 2, added: "' '" },
  array_to_string: { arity: 2, added: 'NULL', macro: 'cot_array_to_string' },
};

export function defaultedArguments(w: Walker, node: Node): void {
  const call = callOf(w, node);
  const spec = call === null ? undefined : DEFAULTED_ARGUMENTS[call.fn];
  if (call === null || spec === undefined || !w.expressions || !(call.parts.length === 1 || call.parts[0] === 'pg_catalog')) return;
  const args = (node.args as Node[] | undefined) ?? [];
  const name = spelledName(w, call);
  const close = name === null || w.tokens[name.next]?.text !== '(' ? null : w.closing(name.next);
  if (name === null || close === null || node.agg_order !== undefined || (args.length !== spec.arity && spec.macro === undefined)) return;
  if (spec.macro !== undefined) {
    if (args.length !== spec.arity && args.length !== spec.arity + 1) return;
    w.replaceTokens(call.i, name.next, `${PG_SCHEMA}.${spec.macro}`);
  }
  if (args.length === spec.arity) w.insertBefore(close, `, ${spec.added}`);
}

/** A function DuckDB has under another name (FUNCTION_NAMES); when it is renamed, the call's other rules are not asked. */
export function renamedFunction(w: Walker, node: Node): boolean {
  const call = callOf(w, node);
  const name = call === null ? null : spelledName(w, call);
  if (call === null || name === null) return false;
  const renamed = FUNCTION_NAMES[call.fn];
  if (renamed === undefined || !(call.parts.length === 1 || call.parts[0] === 'pg_catalog')) return false;
  // A catalog macro is for queries: a view's stored text names only DuckDB's own functions.
  if (renamed.startsWith(`${PG_SCHEMA}.`) && !w.expressions) return false;
  w.replaceTokens(call.i, name.next, renamed);
  return true;
}

/**
 * `substring(s FROM 'pattern')`, `substring(s, 'pattern')`: a text pattern
 * is a POSIX regular expression in PostgreSQL, whose first match (or that
 * of its first parenthesised part) is the result; DuckDB's substring takes
 * only positions. `substring(s FROM 'pattern' FOR 'escape')` and
 * `substring(s SIMILAR 'pattern' ESCAPE 'escape')` are SQL regular
 * expressions, rewritten to the POSIX one PostgreSQL makes of them. Only a
 * literal pattern is rewritten: a parameter or a column keeps DuckDB's
 * positional meaning. The call's other rules are not asked.
 */
export function substringCall(w: Walker, node: Node): boolean {
  const call = callOf(w, node);
  const args = (node.args as Node[] | undefined) ?? [];
  if (call === null || call.fn !== 'substring' || call.parts.length > 2 || (call.parts.length === 2 && call.parts[0] !== 'pg_catalog')) return false;
  if (wordOf(w.tokens[call.i]) !== 'substring' || (args.length !== 2 && args.length !== 3)) return false;
  const text = (a: Node | undefined): string | undefined => ((a?.A_Const as Node | undefined)?.sval as { sval?: string } | undefined)?.sval;
  const pattern = text(args[1]);
  const escapeChar = args.length === 3 ? text(args[2]) : null;
  if (pattern === undefined || escapeChar === undefined) return false;
  const span = w.callSpan(call.i);
  if (span === null) return false;
  // The separators at the call's own level: FROM/FOR, SIMILAR/ESCAPE, or commas.
  const separators: number[] = [];
  let depth = 0;
  for (let j = span.open + 1; j < span.close; j++) {
    const t = w.tokens[j] as Token;
    if (t.text === '(' || t.text === '[') depth++;
    else if (t.text === ')' || t.text === ']') depth--;
    else if (depth === 0 && (t.text === ',' || ['from', 'for', 'similar', 'escape'].includes(wordOf(t) ?? ''))) separators.push(j);
  }
  const first = separators[0];
  if (separators.length !== args.length - 1 || first === undefined) return false;
  if (escapeChar === null) {
    w.replaceTokens(call.i, call.i + 1, `${PG_SCHEMA}.${capturingGroups(pattern) > 0 ? 'cot_substring_group' : 'cot_substring_match'}`);
    w.replaceTokens(first, first + 1, ',');
    return true;
  }
  const regex = similarToRegex(pattern, escapeChar);
  if (regex === null) return false;
  w.replaceTokens(call.i, call.i + 1, `${PG_SCHEMA}.${regex.groups > 0 ? 'cot_substring_group' : 'cot_substring_match'}`);
  w.replaceTokens(first, span.close, `, ${quoteLiteral(regex.source)}`);
  return true;
}

/** The capturing groups of a regular expression: `(` not escaped, not in brackets, not `(?`. */
function capturingGroups(pattern: string): number {
  let n = 0;
  let bracket = false;
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === '\\') i++;
    else if (bracket) bracket = c !== ']';
    else if (c === '[') bracket = true;
    else if (c === '(' && pattern[i + 1] !== '?') n++;
  }
  return n;
}

/**
 * A SQL regular expression (SIMILAR TO's) as the POSIX one PostgreSQL makes
 * of it (similar_escape): anchored, `%` and `_` as `.*` and `.`, and the
 * part between the two escape-double-quote separators as the group whose
 * text substring returns (the part before them matched as short as it can).
 * Null for an escape of more than one character.
 */
function similarToRegex(pattern: string, escapeChar: string): { readonly source: string; readonly groups: number } | null {
  if ([...escapeChar].length > 1) return null;
  let out = '^(?:';
  let quotes = 0;
  let afterEscape = false;
  let bracket = false;
  for (const c of pattern) {
    if (afterEscape) {
      afterEscape = false;
      if (c === '"' && !bracket) {
        if (quotes >= 2) return null;
        out += quotes === 0 ? '){1,1}?(' : '){1,1}(?:';
        quotes++;
      } else {
        out += `\\${c}`;
      }
    } else if (escapeChar !== '' && c === escapeChar) {
      afterEscape = true;
    } else if (bracket) {
      out += c === '\\' ? '\\\\' : c;
      if (c === ']') bracket = false;
    } else if (c === '[') {
      out += c;
      bracket = true;
    } else if (c === '%') {
      out += '.*';
    } else if (c === '_') {
      out += '.';
    } else if (c === '(') {
      out += '(?:';
    } else if (c === '\\' || c === '.' || c === '^' || c === '$') {
      out += `\\${c}`;
    } else {
      out += c;
    }
  }
  return { source: `${out})$`, groups: quotes > 0 ? 1 : 0 };
}
