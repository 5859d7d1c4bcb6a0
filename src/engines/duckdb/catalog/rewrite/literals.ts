import { parseArrayLiteral, type ArrayItem } from '../../../../sql/array-literal.js';
import { quoteLiteral } from '../../../../sql/identifiers.js';
import { strings } from '../../../../sql/pg-tree.js';
import { pgIntervalText } from '../../../../sql/interval-text.js';
import { plainNumeric } from '../../../../sql/numeric.js';
import { pgTimestampText } from '../../../../sql/timestamp-text.js';
import { PG_SCHEMA } from '../pg-catalog.js';
import { literalSpan } from './numeric.js';
import { REG_TYPES } from './types.js';
import { type Node, operatorOf, type Walker, wordOf } from './walker.js';

/**
 * Literals PostgreSQL reads otherwise than DuckDB: array literals
 * ('{a,b}') where a list is expected, timestamps with a spaced offset,
 * bytea's hex format, and booleans spelled on, off, yes, no.
 */

/** A timestamp whose numeric offset follows a space: the date and time, and the offset. */
export const SPACED_OFFSET = /^(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?) +([+-]\d{2}(?::?\d{2})?)$/;

/** Comparison operators: a timestamp literal compared with a column is read as a timestamp. */
const COMPARISONS = new Set(['=', '<>', '!=', '<', '>', '<=', '>=']);

/**
 * A PostgreSQL array literal ('{a,"b c",NULL}', nested '{{1,2},{3}}') as a
 * DuckDB list expression (['a', 'b c', NULL]); null when the text is not
 * one. DuckDB casts a list of strings to the target's element type.
 */
export function pgArrayToList(text: string): string | null {
  const items = parseArrayLiteral(text);
  const list = (xs: ArrayItem[]): string => `[${xs.map((x) => (x === null ? 'NULL' : Array.isArray(x) ? list(x) : quoteLiteral(x))).join(', ')}]`;
  return items === null ? null : list(items);
}

/** A boolean as PostgreSQL's boolin reads it (any unique prefix of true, false, yes, no, on, off; 1 and 0), or null. */
export function pgBoolean(text: string): 'true' | 'false' | null {
  const t = text.trim().toLowerCase();
  if (t === '') return null;
  const prefix = (word: string, min = 1): boolean => t.length >= min && word.startsWith(t);
  if (prefix('true') || prefix('yes') || prefix('on', 2) || t === '1') return 'true';
  if (prefix('false') || prefix('no') || prefix('off', 2) || t === '0') return 'false';
  return null;
}

/** A PostgreSQL array literal where a list is expected: the literal becomes a DuckDB list. */
function arrayLiteral(w: Walker, constant: Node | undefined): void {
  const sval = (constant?.sval as { sval?: string } | undefined)?.sval;
  const i = w.index(constant?.location);
  if (typeof sval !== 'string' || i === null || w.tokens[i]?.kind !== 'string') return;
  const list = pgArrayToList(sval);
  if (list !== null) w.replaceTokens(i, i + 1, list);
}

/** `'{a,b}'::text[]`: an array literal cast to an array type. */
export function arrayLiteralCast(w: Walker, node: Node): void {
  const typeName = node.typeName as Node | undefined;
  const type = strings(typeName?.names).at(-1);
  if (Array.isArray(typeName?.arrayBounds) && !REG_TYPES.has(type ?? '')) arrayLiteral(w, (node.arg as Node | undefined)?.A_Const as Node | undefined);
}

/** `'\\xdeadbeef'::bytea` (see hexBytea). */
export function byteaLiteral(w: Walker, node: Node): void {
  if (strings((node.typeName as Node | undefined)?.names).at(-1) === 'bytea') hexBytea(w, node);
}

/**
 * `'\xdeadbeef'::bytea`: PostgreSQL's hex format. DuckDB reads `\x` as
 * the escape of one byte, so the literal would store other bytes.
 */
function hexBytea(w: Walker, node: Node): void {
  const constant = (node.arg as Node | undefined)?.A_Const as Node | undefined;
  const sval = (constant?.sval as { sval?: string } | undefined)?.sval;
  const i = w.index(constant?.location);
  if (sval === undefined || i === null || !/^\\x([0-9a-fA-F]{2}|\s)*$/.test(sval) || w.tokens[i]?.kind !== 'string') return;
  w.replaceTokens(i, i + 1, `unhex(${quoteLiteral(sval.slice(2).replace(/\s+/g, ''))})`);
}

/** `'off'::boolean`, `'yes'::bool` (see booleanLiteral). */
export function booleanCast(w: Walker, node: Node): void {
  const type = strings((node.typeName as Node | undefined)?.names).at(-1);
  if (type === 'bool' || type === 'boolean') booleanLiteral(w, node.arg as Node | undefined);
}

/** `'off'::boolean`: PostgreSQL's spellings of a boolean (on, off, yes, no and their prefixes) as DuckDB's. */
function booleanLiteral(w: Walker, arg: Node | undefined): void {
  const constant = arg?.A_Const as Node | undefined;
  const sval = (constant?.sval as { sval?: string } | undefined)?.sval;
  const at = w.index(constant?.location);
  if (sval === undefined || at === null || w.tokens[at]?.kind !== 'string') return;
  const value = pgBoolean(sval);
  if (value !== null) w.replaceTokens(at, at + 1, `'${value}'`);
}

/** INSERT ... VALUES ('{a,b}'): array literals bound for list columns (the handler says which columns are lists), and timestamps with a spaced offset. */
export function insertValues(w: Walker, node: Node): void {
  if (w.target === null) return;
  const named = Array.isArray(node.cols) ? (node.cols as Node[]).map((c) => String((c.ResTarget as Node | undefined)?.name ?? '')) : null;
  const lists = new Set(w.target.filter((c) => c.list).map((c) => c.name.toLowerCase()));
  const temporal = new Set(w.target.filter((c) => c.temporal === true).map((c) => c.name.toLowerCase()));
  const numeric9 = new Set(w.target.filter((c) => c.numeric9 === true).map((c) => c.name.toLowerCase()));
  const numbers = numberInputs(w);
  const order = named ?? w.target.map((c) => c.name.toLowerCase());
  const rows = ((node.selectStmt as Node | undefined)?.SelectStmt as Node | undefined)?.valuesLists;
  if (!Array.isArray(rows)) return;
  for (const row of rows as Node[]) {
    const items = (row.List as Node | undefined)?.items;
    if (!Array.isArray(items)) continue;
    items.forEach((item, k) => {
      const column = order[k];
      if (column !== undefined && lists.has(column.toLowerCase())) arrayLiteral(w, (item as Node).A_Const as Node | undefined);
      if (column !== undefined && temporal.has(column.toLowerCase())) spacedOffset(w, (item as Node).A_Const as Node | undefined);
      if (column !== undefined && numeric9.has(column.toLowerCase())) fineNumeric(w, (item as Node).A_Const as Node | undefined);
      if (column !== undefined) checkedText(w, (item as Node).A_Const as Node | undefined, numbers.get(column.toLowerCase()));
    });
  }
}

/** UPDATE ... SET col = '2024-07-01 00:00:00 +00:00' into a timestamp column (Sequelize's increment, save). */
export function updateValues(w: Walker, node: Node): void {
  if (w.target === null) return;
  const temporal = new Set(w.target.filter((c) => c.temporal === true).map((c) => c.name.toLowerCase()));
  const numeric9 = new Set(w.target.filter((c) => c.numeric9 === true).map((c) => c.name.toLowerCase()));
  const numbers = numberInputs(w);
  for (const t of (node.targetList as Node[] | undefined) ?? []) {
    const res = t.ResTarget as Node | undefined;
    if (typeof res?.name === 'string') checkedText(w, (res.val as Node | undefined)?.A_Const as Node | undefined, numbers.get(res.name.toLowerCase()));
    if (typeof res?.name === 'string' && temporal.has(res.name.toLowerCase())) spacedOffset(w, (res.val as Node | undefined)?.A_Const as Node | undefined);
    if (typeof res?.name === 'string' && numeric9.has(res.name.toLowerCase())) fineNumeric(w, (res.val as Node | undefined)?.A_Const as Node | undefined);
  }
}

function numberInputs(w: Walker): Map<string, string> {
  return new Map((w.target ?? []).flatMap((c) => (c.numberInput === undefined ? [] : [[c.name.toLowerCase(), c.numberInput] as const])));
}

/**
 * A string written into an integer or float column: DuckDB's cast reads
 * '1.5' into an integer as 2, and '1e400' into a double as Infinity, where
 * PostgreSQL refuses both. The text goes through the check a cast of text
 * to the type makes (numeric.ts, checkedCast).
 */
function checkedText(w: Walker, constant: Node | undefined, type: string | undefined): void {
  if (type === undefined || (constant?.sval as { sval?: string } | undefined)?.sval === undefined) return;
  const at = w.index(constant?.location);
  if (at === null || w.tokens[at]?.kind !== 'string') return;
  const check = type === 'real' || type === 'double precision' ? 'cot_float_of' : 'cot_integer_text';
  w.insertBefore(at, `${PG_SCHEMA}.${check}(`);
  w.insertAfter(at, `, '${type}')`);
}

/**
 * A number literal bound for numeric without a precision (DECIMAL(38,9))
 * with a digit the column would round away: PostgreSQL keeps it, so it is
 * refused (22003), as a parameter or a cast of text with such digits is.
 */
function fineNumeric(w: Walker, constant: Node | undefined): void {
  if (constant?.fval === undefined) return;
  const literal = literalSpan(w, constant);
  if (literal === null || w.tokens[literal.to - 1]?.kind !== 'number') return;
  const text = literal.text.trim();
  if (!roundsAtScale9(text)) return;
  w.replaceTokens(
    literal.from,
    literal.to,
    `CAST(error(${quoteLiteral(`numeric value ${text} has more digits than numeric without a precision holds here (38 digits, 9 after the point): cast it to numeric(p,s) with the scale it needs`)}) AS DECIMAL(38,9))`,
  );
}

/** Whether DECIMAL(38,9) would change the number a literal's text names. */
function roundsAtScale9(text: string): boolean {
  const plain = plainNumeric(text.replace(/^[+-]/, ''));
  const point = plain.indexOf('.');
  return point >= 0 && /[1-9]/.test(plain.slice(point + 10));
}

/** A timestamp literal with a spaced offset compared with a column: `created_at > '2024-07-01 00:00:00 +00:00'` (see spacedOffset). */
export function spacedComparison(w: Walker, node: Node): void {
  const o = operatorOf(w, node);
  if (o === null) return;
  if ((node.kind === 'AEXPR_OP' && COMPARISONS.has(o.op)) || node.kind === 'AEXPR_BETWEEN' || node.kind === 'AEXPR_NOT_BETWEEN' || node.kind === 'AEXPR_IN') {
    const l = node.lexpr as Node | undefined;
    const r = node.rexpr as Node | undefined;
    const items = (x: Node | undefined): Node[] => {
      if (x === undefined) return [];
      if (Array.isArray(x)) return x as Node[];
      const list = (x.List as Node | undefined)?.items;
      return Array.isArray(list) ? (list as Node[]) : [x];
    };
    if (l?.ColumnRef !== undefined) for (const item of items(r)) spacedOffset(w, item.A_Const as Node | undefined);
    if (r?.ColumnRef !== undefined) spacedOffset(w, l?.A_Const as Node | undefined);
  }
}

/**
 * `'2024-07-01 00:00:00.000 +00:00'` (Sequelize writes dates so): PostgreSQL
 * reads the offset after a space, DuckDB takes it for a zone name and
 * fails. Applied where the literal is a timestamp: inserted into a
 * timestamp column, or compared with a column.
 */
function spacedOffset(w: Walker, constant: Node | undefined): void {
  const sval = (constant?.sval as { sval?: string } | undefined)?.sval;
  const i = w.index(constant?.location);
  if (sval === undefined || i === null || w.tokens[i]?.kind !== 'string' || !SPACED_OFFSET.test(sval)) return;
  w.replaceTokens(i, i + 1, quoteLiteral(sval.replace(SPACED_OFFSET, '$1$2')));
}

/** The timestamp types, and the macro that casts a text column to each as PostgreSQL reads it. */
const TIMESTAMP_CASTS: Readonly<Record<string, string>> = { timestamptz: 'cot_timestamptz', timestamp: 'cot_timestamp' };

/**
 * `'2024-07-01 00:00:00.000 +00:00'::timestamptz`, `timestamptz '2024-01-02
 * 00:00+00'`, `CAST(col AS timestamp)`: a timestamp's text as PostgreSQL
 * reads it (sql/timestamp-text.ts). A literal is rewritten here; a column,
 * whose type only the engine knows, is cast by a macro that reads text so
 * and any other type as DuckDB's cast does. Parameters are bound as
 * timestamps by the engine's adapter.
 */
export function timestampCast(w: Walker, node: Node): void {
  const typeName = node.typeName as Node | undefined;
  const names = strings(typeName?.names);
  const macro = TIMESTAMP_CASTS[names.at(-1) ?? ''];
  if (macro === undefined || typeName?.arrayBounds !== undefined || (names.length === 2 && names[0] !== 'pg_catalog') || names.length > 2) return;
  const arg = node.arg as Node | undefined;
  const constant = arg?.A_Const as Node | undefined;
  if (constant !== undefined) {
    const sval = (constant.sval as { sval?: string } | undefined)?.sval;
    const i = w.index(constant.location);
    const text = sval === undefined ? null : pgTimestampText(sval);
    if (text !== null && i !== null && w.tokens[i]?.kind === 'string') w.replaceTokens(i, i + 1, quoteLiteral(text));
    return;
  }
  if (arg?.ColumnRef === undefined || !w.expressions) return;
  const castAt = w.index(node.location);
  const typeAt = w.index(typeName?.location);
  let typeEnd = typeAt === null ? null : w.typeNameEnd(typeAt);
  if (castAt === null || typeAt === null || typeEnd === null) return;
  // timestamp [(p)] with[out] time zone
  const zone = wordOf(w.tokens[typeEnd]);
  if ((zone === 'with' || zone === 'without') && wordOf(w.tokens[typeEnd + 1]) === 'time' && wordOf(w.tokens[typeEnd + 2]) === 'zone') typeEnd += 3;
  if (w.tokens[castAt]?.text === '::') {
    // col::timestamptz → cot_timestamptz(col)
    const start = w.argStart(arg, castAt);
    if (start === null) return;
    w.insertBefore(start, `${PG_SCHEMA}.${macro}(`);
    w.replaceTokens(castAt, typeEnd, ')');
  } else if (wordOf(w.tokens[castAt]) === 'cast' && wordOf(w.tokens[typeAt - 1]) === 'as' && w.tokens[typeEnd]?.text === ')') {
    // CAST(col AS timestamptz) → cot_timestamptz(col)
    w.replaceTokens(castAt, castAt + 1, `${PG_SCHEMA}.${macro}`);
    w.replaceTokens(typeAt - 1, typeEnd, '');
  }
}

/**
 * `'P1DT2H'::interval`, `interval 'PT1.5S'`, `CAST('-3 days +04:05:06' AS
 * interval)`: an ISO 8601 duration, or PostgreSQL's own output with a signed
 * time, which DuckDB does not read, as the same interval in a form it reads
 * (sql/interval-text.ts). Only a literal: a column's text is DuckDB's to cast.
 */
export function intervalCast(w: Walker, node: Node): void {
  const typeName = node.typeName as Node | undefined;
  const names = strings(typeName?.names);
  if (names.at(-1) !== 'interval' || typeName?.arrayBounds !== undefined || typeName?.typmods !== undefined || names.length > 2) return;
  const constant = (node.arg as Node | undefined)?.A_Const as Node | undefined;
  const sval = (constant?.sval as { sval?: string } | undefined)?.sval;
  const i = w.index(constant?.location);
  const text = sval === undefined ? null : pgIntervalText(sval);
  if (text !== null && i !== null && w.tokens[i]?.kind === 'string') w.replaceTokens(i, i + 1, quoteLiteral(text));
}
