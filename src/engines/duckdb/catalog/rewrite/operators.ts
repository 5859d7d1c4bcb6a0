import type { Token } from '../../../../sql/lexer.js';
import { quoteLiteral } from '../../../../sql/identifiers.js';
import { strings } from '../../../../sql/pg-tree.js';
import { PG_SCHEMA } from '../pg-catalog.js';
import { type Node, operatorOf, type Walker, wordOf } from './walker.js';

/**
 * PostgreSQL's operators where DuckDB's differ: `OPERATOR(pg_catalog.~)`,
 * the regular-expression matches (anywhere in the string, not the whole
 * string), LIKE's backslash escape, `x = ANY(list)` over a list from the
 * outer query, and the collations every client may name.
 */

/** PostgreSQL's regular-expression match operators: a match anywhere in the string. */
export const REGEX_OPERATORS = new Set(['~', '!~', '~*', '!~*']);

/** LIKE and its spellings, whose pattern has `\` as its escape character in PostgreSQL and none in DuckDB. */
export const LIKE_WORDS = new Set(['like', 'ilike']);

/** Collations every PostgreSQL client may name and DuckDB does not have; the engine compares bytes, as C does. */
const IGNORED_COLLATIONS = new Set(['default', 'c', 'posix', 'ucs_basic']);

/**
 * A PostgreSQL regular expression as a DuckDB full-match pattern: `~` in
 * PostgreSQL matches anywhere, DuckDB's `~` matches the whole string.
 */
export function partialPattern(pattern: string, caseInsensitive: boolean): string {
  return `(?s:.*)(?${caseInsensitive ? 'i' : ''}:${pattern})(?s:.*)`;
}

/** LIKE and ILIKE: the pattern's escapes (see likeEscape); the node's other rules are not asked. */
export function likePattern(w: Walker, node: Node): boolean {
  const o = operatorOf(w, node);
  if (o === null || (node.kind !== 'AEXPR_LIKE' && node.kind !== 'AEXPR_ILIKE')) return false;
  likeEscape(w, node, o.i);
  return true;
}

/**
 * `x LIKE 'a\_b'` → `x LIKE 'a\_b' ESCAPE '\'`: PostgreSQL's LIKE takes a
 * backslash as its escape character unless told otherwise, DuckDB's none.
 * Applied where the pattern holds a parameter or a literal with a
 * backslash, after the whole pattern (`$1::text || '%'`); a pattern with
 * its own ESCAPE (like_escape in PostgreSQL's tree) is left alone.
 */
function likeEscape(w: Walker, node: Node, at: number): void {
  const pattern = node.rexpr as Node | undefined;
  const call = pattern?.FuncCall as Node | undefined;
  if (call !== undefined && strings(call.funcname).at(-1) === 'like_escape') return;
  if (!escapableExpression(pattern)) return;
  const like = [at, at + 1].find((i) => LIKE_WORDS.has(wordOf(w.tokens[i]) ?? ''));
  if (like === undefined) return;
  const end = w.exprEnd(pattern, like + 1);
  if (end === null) return;
  const only = w.tokens[like + 1] as Token;
  if (end === like + 1 && only.kind === 'string') {
    // DuckDB notices a trailing escape only when matching reaches it; PostgreSQL always refuses it.
    const trailing = (/\\+'$/.exec(only.text)?.[0].length ?? 1) - 1;
    if (trailing % 2 === 1) {
      w.replaceTokens(like + 1, like + 2, "CAST(system.main.error('LIKE pattern must not end with escape character') AS VARCHAR)");
      return;
    }
  }
  w.insertAfter(end, " ESCAPE '\\'");
}

/** `x = ANY(list)` and `x <> ALL(list)` (see anyOfList); the node's other rules are not asked. */
export function anyList(w: Walker, node: Node): boolean {
  const o = operatorOf(w, node);
  if (o === null) return false;
  const { op, i } = o;
  if (!((node.kind === 'AEXPR_OP_ANY' && op === '=') || (node.kind === 'AEXPR_OP_ALL' && op === '<>'))) return false;
  // The operator may be spelled OPERATOR(pg_catalog.=), as psql and pg_dump write it.
  const spelled = wordOf(w.tokens[i]) === 'operator' && w.tokens[i + 1]?.text === '(' ? w.closing(i + 1) : i;
  if (spelled !== null) anyOfList(w, node, i, spelled, op === '<>');
  return true;
}

/**
 * `x = ANY(list)` → `cot_any_eq(list, x)`: DuckDB cannot unnest a list
 * that comes from the outer query (psql's \d asks pg_policy this way), and
 * the macro answers NULL where PostgreSQL does (no match, a NULL element).
 */
function anyOfList(w: Walker, node: Node, i: number, opEnd: number, negated: boolean): void {
  if (w.tokens[opEnd]?.text !== (negated ? '<>' : opEnd === i ? '=' : ')') || w.tokens[opEnd + 2]?.text !== '(') return;
  const close = w.closing(opEnd + 2);
  const start = w.argStart(node.lexpr as Node | undefined, i);
  const first = w.tokens[opEnd + 3];
  const last = close === null ? undefined : w.tokens[close - 1];
  if (close === null || start === null || first === undefined || last === undefined) return;
  const list = w.text.slice(first.start, last.end);
  // A parameter inside a macro's arguments could not be typed from the column beside it.
  const macro = w.expressions && !w.tokens.slice(start, close).some((t) => t.kind === 'param');
  const left = w.tokens[start] as Token;
  const closing = w.tokens[close] as Token;
  w.move({
    from: first.start,
    to: last.end,
    edits: [
      { start: left.start, end: left.start, text: `${negated ? 'NOT ' : ''}${macro ? `${PG_SCHEMA}.cot_any_eq` : 'list_contains'}(${list}, ` },
      { start: (w.tokens[i - 1] ?? (w.tokens[i] as Token)).end, end: closing.end, text: ')' },
    ],
  });
}

/** `OPERATOR(pg_catalog.~)` → `~`, and the regular-expression operators as DuckDB's (see partialPattern). */
export function operatorSpelling(w: Walker, node: Node): void {
  const o = operatorOf(w, node);
  if (o === null) return;
  const { op, i } = o;
  const isRegex = node.kind === 'AEXPR_OP' && REGEX_OPERATORS.has(op);
  const engineOp = isRegex ? op.replace('*', '') : op;
  const t = w.tokens[i];
  if (wordOf(t) === 'operator' && w.tokens[i + 1]?.text === '(') {
    // OPERATOR(pg_catalog.~) → ~
    const close = w.closing(i + 1);
    if (close !== null) w.replaceTokens(i, close + 1, ` ${engineOp} `);
  } else if (isRegex && engineOp !== op && t?.text === op) {
    w.replaceTokens(i, i + 1, engineOp);
  }
  if (isRegex) regexOperand(w, node.rexpr as Node | undefined, op.endsWith('*'));
}

/** The pattern of a regex match, made a partial match (see partialPattern). */
function regexOperand(w: Walker, rexpr: Node | undefined, caseInsensitive: boolean): void {
  let operand = rexpr;
  while (operand !== undefined) {
    const inner = (operand.CollateClause ?? operand.TypeCast) as Node | undefined;
    if (inner === undefined) break;
    operand = inner.arg as Node | undefined;
  }
  if (operand === undefined) return;
  const constant = operand.A_Const as Node | undefined;
  if (constant !== undefined) {
    const sval = (constant.sval as { sval?: string } | undefined)?.sval;
    const i = w.index(constant.location);
    if (typeof sval === 'string' && i !== null) w.replaceTokens(i, i + 1, quoteLiteral(partialPattern(sval, caseInsensitive)));
    return;
  }
  const param = operand.ParamRef as Node | undefined;
  const column = operand.ColumnRef as Node | undefined;
  const i = w.index((param ?? column)?.location);
  if (i === null) return;
  const next = param !== undefined ? i + 1 : (w.dotted(i)?.next ?? null);
  if (next === null) return;
  const [before, after] = partialPattern('\u0000', caseInsensitive).split('\u0000') as [string, string];
  w.insertBefore(i, `(${quoteLiteral(before)} || `);
  w.insertAfter(next - 1, ` || ${quoteLiteral(after)})`);
}

/** `COLLATE "C"`, `COLLATE pg_catalog.default`: collations DuckDB does not have, dropped (the engine compares bytes, as C does). */
export function collate(w: Walker, node: Node): void {
  const parts = strings(node.collname);
  const last = parts[parts.length - 1]?.toLowerCase();
  if (last === undefined || !IGNORED_COLLATIONS.has(last)) return;
  if (parts.length === 2 && parts[0] !== 'pg_catalog') return;
  const i = w.index(node.location);
  if (i === null || wordOf(w.tokens[i]) !== 'collate') return;
  const name = w.dotted(i + 1);
  if (name !== null) w.replaceTokens(i, name.next, '');
}

/** Whether a LIKE pattern's escapes matter: it holds a parameter, or a literal with a backslash. */
function escapableExpression(e: unknown): boolean {
  if (Array.isArray(e)) return e.some(escapableExpression);
  if (e === null || typeof e !== 'object') return false;
  const n = e as Node;
  if (n.ParamRef !== undefined) return true;
  const sval = ((n.A_Const as Node | undefined)?.sval as { sval?: string } | undefined)?.sval;
  if (sval?.includes('\\') === true) return true;
  return Object.values(n).some(escapableExpression);
}

/**
 * `a[i]`: PostgreSQL's subscript below the array's first element is NULL,
 * DuckDB's negative one counts from the end (`a[-1]` is the last). The
 * subscript is given only when it is 1 or more. Slices are left as written.
 */
export function arraySubscript(w: Walker, node: Node): void {
  const index = node.uidx as Node | undefined;
  if (node.is_slice === true || index === undefined || !w.expressions) return;
  // A positive constant needs nothing.
  const ival = ((index.A_Const as Node | undefined)?.ival as { ival?: number } | undefined)?.ival;
  if (ival !== undefined && ival >= 1) return;
  // The subscript is what stands between its brackets, its own parentheses included.
  let start = w.leftmost(index);
  if (start === null) return;
  while (w.tokens[start - 1]?.text === '(') start--;
  if (w.tokens[start - 1]?.text !== '[') return;
  let depth = 0;
  let close = start;
  for (; close < w.tokens.length; close++) {
    const text = w.tokens[close]?.text;
    if (text === '[' || text === '(') depth++;
    else if (text === ')' || (text === ']' && depth > 0)) depth--;
    else if (text === ']' || (text === ':' && depth === 0)) break;
  }
  if (w.tokens[close]?.text !== ']' || close === start) return;
  w.insertBefore(start, `${PG_SCHEMA}.cot_subscript(`);
  w.insertAfter(close - 1, ')');
}
