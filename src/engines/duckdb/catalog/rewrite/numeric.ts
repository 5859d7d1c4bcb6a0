import { quoteLiteral } from '../../../../sql/identifiers.js';
import { exactNumericSql, numericLiteralType, plainNumeric, readAsDouble } from '../../../../sql/numeric.js';
import { strings } from '../../../../sql/pg-tree.js';
import { PG_SCHEMA } from '../pg-catalog.js';
import { isJsonbOperand } from './jsonb.js';
import { typeWitness } from '../type-witness.js';
import { SCALAR_SET_FUNCTIONS } from './set-functions.js';
import { REG_TYPES } from './types.js';
import { type Node, type Walker, wordOf } from './walker.js';

/**
 * Numeric literals held exactly. PostgreSQL's numeric keeps every digit of
 * a literal; DuckDB reads `1e-20` and a literal of more than 38 digits as a
 * double, and a cast to unconstrained numeric (DECIMAL(38,9) here) rounds
 * past the ninth decimal. A literal cast to numeric gets a DECIMAL of its
 * own scale, and a literal DuckDB would read as a double is read from its
 * text, so the digits are the client's or the cast fails out loud.
 */

/** The literal's text and its token span (a negative constant starts at its minus sign), or null. */
export function literalSpan(w: Walker, constant: Node | undefined): { readonly text: string; readonly from: number; readonly to: number } | null {
  const fval = (constant?.fval as { fval?: string } | undefined)?.fval;
  const sval = (constant?.sval as { sval?: string } | undefined)?.sval;
  const ival = (constant?.ival as { ival?: number } | undefined)?.ival;
  const i = w.index(constant?.location);
  if (i === null) return null;
  const first = w.tokens[i];
  if (first?.kind === 'operator' && first.text === '-' && w.tokens[i + 1]?.kind === 'number') return { text: `-${w.tokens[i + 1]?.text}`, from: i, to: i + 2 };
  if (first?.kind === 'number' && (fval !== undefined || ival !== undefined || constant?.ival !== undefined)) return { text: first.text, from: i, to: i + 1 };
  if (first?.kind === 'string' && sval !== undefined) return { text: sval, from: i, to: i + 1 };
  return null;
}

/**
 * `1.23456789012345678901::numeric`, `'1e-20'::numeric`, `numeric '1.5'`,
 * `CAST(x AS decimal)` of a constant: the cast's type is DECIMAL(38, the
 * literal's scale), and a number is given as text. The type name's own rule
 * (types.ts) edits the same tokens after this one, and the first edit made
 * at a span is the one applied.
 */
export function numericLiteralCast(w: Walker, node: Node): void {
  const constant = (node.arg as Node | undefined)?.A_Const as Node | undefined;
  const typeName = node.typeName as Node | undefined;
  const names = strings(typeName?.names);
  // A constant cast to text is a numeric's text ((-1e3)::text is -1000), as one beside nothing is.
  if (typeof constant?.location === 'number' && !TEXT_TYPES.has(names.at(-1) ?? '')) w.castConstants.add(constant.location);
  if (typeName === undefined || names.at(-1) !== 'numeric' || typeName.typmods !== undefined || typeName.arrayBounds !== undefined) return;
  if (names.length === 2 && names[0] !== 'pg_catalog') return;
  const literal = literalSpan(w, constant);
  const typeAt = w.index(typeName.location);
  const name = typeAt === null ? null : w.dotted(typeAt);
  const spelled = name?.parts.at(-1);
  if (literal === null || typeAt === null || name === null || spelled === undefined || !['numeric', 'decimal', 'dec'].includes(spelled)) return;
  const type = numericLiteralType(literal.text);
  if (type === null) return;
  w.replaceTokens(typeAt, name.next, type);
  w.replaceTokens(literal.from, literal.to, quoteLiteral(plainNumeric(literal.text)));
}

/**
 * `s::numeric` of a value that is not a constant (a column, an expression):
 * PostgreSQL keeps every digit of text, DuckDB's DECIMAL(38,9) rounds past
 * the ninth decimal; PostgreSQL keeps 15 significant digits of a double,
 * DuckDB's cast its binary noise. The value goes through cot_numeric_text,
 * which refuses text with digits the cast would round away (22003) and
 * gives a double's 15 digits, as text the cast reads exactly.
 */
export function numericTextCast(w: Walker, node: Node): void {
  const typeName = node.typeName as Node | undefined;
  const arg = node.arg as Node | undefined;
  const names = strings(typeName?.names);
  if (!w.expressions || names.at(-1) !== 'numeric' || typeName?.typmods !== undefined || typeName?.arrayBounds !== undefined) return;
  if (arg === undefined || arg.A_Const !== undefined || arg.ParamRef !== undefined) return;
  if (!witnessedNumericCast(w, node, arg)) wrapCastArgument(w, node, arg, 'cot_numeric_text(', ')');
}

/**
 * `x::numeric` → `cot_numeric_cast(x, witness)` where x's type is certain:
 * a double becomes numeric with its 15 digits at a quotient's scale, which
 * the cast to DECIMAL(38,9) would round to 9 decimals. The macro is the
 * cast, so the cast's own tokens go.
 */
function witnessedNumericCast(w: Walker, node: Node, arg: Node): boolean {
  const witness = typeWitness(arg);
  const at = w.index(node.location);
  if (witness === null || at === null || returnsSet(arg)) return false;
  if (w.tokens[at]?.text === '::' && wordOf(w.tokens[at + 1]) === 'numeric') {
    const start = w.argStart(arg, at);
    if (start === null) return false;
    w.insertBefore(start, `${PG_SCHEMA}.cot_numeric_cast(`);
    w.replaceTokens(at, at + 2, `, ${witness})`);
    return true;
  }
  if (wordOf(w.tokens[at]) === 'cast' && w.tokens[at + 1]?.text === '(') {
    const end = w.exprEnd(arg, at + 2);
    if (end === null || wordOf(w.tokens[end + 1]) !== 'as' || wordOf(w.tokens[end + 2]) !== 'numeric' || w.tokens[end + 3]?.text !== ')') return false;
    w.replaceTokens(at, at + 2, `${PG_SCHEMA}.cot_numeric_cast(`);
    w.replaceTokens(end + 1, end + 3, `, ${witness}`);
    return true;
  }
  return false;
}

/** A bare numeric constant DuckDB would read as a double (`1e-20`, 40 digits): numeric, as PostgreSQL reads it. */
export function exactNumericConstant(w: Walker, node: Node): void {
  if (node.fval === undefined || w.castConstants.has(node.location as number)) return;
  const literal = literalSpan(w, node) ?? negatedNumber(w, node);
  if (literal === null || w.tokens[literal.to - 1]?.kind !== 'number' || !readAsDouble(literal.text)) return;
  w.replaceTokens(literal.from, literal.to, exactNumericSql(literal.text));
}

/**
 * `- (1e3)`, `- (-1e3)`: PostgreSQL's parser folds the minus signs into the
 * constant and locates it at the first; the number token alone is
 * rewritten, and the signs stay in the text.
 */
function negatedNumber(w: Walker, node: Node): { readonly text: string; readonly from: number; readonly to: number } | null {
  let i = w.index(node.location);
  while (i !== null && (w.tokens[i]?.text === '-' || w.tokens[i]?.text === '(')) i++;
  return i === null || i === w.index(node.location) || w.tokens[i]?.kind !== 'number'
    ? null
    : { text: (w.tokens[i] as { text: string }).text, from: i, to: i + 1 };
}

/** Types whose text a cast to text gives otherwise in DuckDB: numeric without precision, and doubles. */
const TEXT_TYPES = new Set(['text', 'varchar']);

/**
 * `x::text`, `CAST(x AS varchar)`: numeric without precision and double
 * precision as PostgreSQL prints them (1.5, not DuckDB's 1.500000000; 6,
 * not 6.0), through cot_text, which leaves other types to DuckDB's cast.
 */
export function textCast(w: Walker, node: Node): void {
  const typeName = node.typeName as Node | undefined;
  const arg = node.arg as Node | undefined;
  const name = strings(typeName?.names).at(-1);
  if (!w.expressions || name === undefined || !TEXT_TYPES.has(name) || typeName?.typmods !== undefined || typeName?.arrayBounds !== undefined) return;
  if (arg === undefined || arg.A_Const !== undefined || arg.ParamRef !== undefined) return;
  // The catalog's own columns (int2vector, reg* names) have rules of their own, and no numeric or double to print.
  const inner = strings(((arg.TypeCast as Node | undefined)?.typeName as Node | undefined)?.names).at(-1) ?? '';
  if (w.catalogTables.size > 0 || REG_TYPES.has(inner)) return;
  // jsonb's text is its own: keys in jsonb's order, one space after each colon and comma (DuckDB's is the stored text).
  if (isJsonbOperand(w, arg)) wrapCastArgument(w, node, arg, 'cot_jsonb_cast_text(', ')');
  else wrapCastArgument(w, node, arg, 'cot_text(', ')');
}

/** PostgreSQL's integer types, as DuckDB names them in an error. */
const INTEGER_TYPES: Readonly<Record<string, string>> = { int2: 'smallint', int4: 'integer', int8: 'bigint' };

/** Double precision and real. */
const FLOAT_TYPES = new Set(['float8', 'float4']);

/**
 * `s::int4` of text that is not an integer ('1.5'): PostgreSQL's 22P02,
 * where DuckDB's cast rounds; and `x::float8` of a numeric, read from its
 * text (DuckDB's cast of a DECIMAL can be a digit off). A literal number
 * cast to a double is given as text for the same reason.
 */
export function checkedCast(w: Walker, node: Node): void {
  const typeName = node.typeName as Node | undefined;
  const arg = node.arg as Node | undefined;
  const name = strings(typeName?.names).at(-1) ?? '';
  const integer = INTEGER_TYPES[name];
  if (!w.expressions || (integer === undefined && !FLOAT_TYPES.has(name)) || typeName?.arrayBounds !== undefined || arg === undefined) return;
  if (arg.ParamRef !== undefined) return;
  const constant = arg.A_Const as Node | undefined;
  if (constant !== undefined) {
    // A number: DuckDB reads 1.23456789012345678901 as a DECIMAL, then casts it a digit off.
    const literal = FLOAT_TYPES.has(name) && constant.fval !== undefined ? literalSpan(w, constant) : null;
    // A numeric zero has no sign: (-0.0)::float8 is 0 in PostgreSQL, where the text '-0.0' would read as -0.
    const text = literal === null ? '' : /^\s*-[0.]*(?:[eE][+-]?\d+)?\s*$/.test(literal.text) ? literal.text.replace('-', '') : literal.text;
    if (literal !== null && w.tokens[literal.to - 1]?.kind === 'number') w.replaceTokens(literal.from, literal.to, quoteLiteral(text));
    if ((constant.sval as { sval?: string } | undefined)?.sval === undefined) return;
  }
  const typeText = integer ?? (name === 'float4' ? 'real' : 'double precision');
  wrapCastArgument(w, node, arg, integer === undefined ? 'cot_float_of(' : 'cot_integer_text(', `, '${typeText}')`);
}

/** Whether an expression returns a set (generate_series, unnest): its rows are the statement's, and no macro may hold it. */
function returnsSet(e: Node): boolean {
  const name = strings((e.FuncCall as Node | undefined)?.funcname).at(-1);
  return name !== undefined && (SCALAR_SET_FUNCTIONS.has(name) || /^jsonb?_(each|array_elements|object_keys)/.test(name));
}

/** The argument of a cast (`x::t` or `CAST(x AS t)`) between `before` and `after`. */
function wrapCastArgument(w: Walker, node: Node, arg: Node, before: string, after: string): void {
  const at = w.index(node.location);
  if (at === null || returnsSet(arg)) return;
  if (w.tokens[at]?.text === '::') {
    const start = w.argStart(arg, at);
    if (start === null) return;
    w.insertBefore(start, `${PG_SCHEMA}.${before}`);
    w.insertBefore(at, after);
  } else if (wordOf(w.tokens[at]) === 'cast' && w.tokens[at + 1]?.text === '(') {
    const end = w.exprEnd(arg, at + 2);
    if (end === null) return;
    w.insertBefore(at + 2, `${PG_SCHEMA}.${before}`);
    w.insertAfter(end, after);
  }
}

/** `concat(a, b, ...)`, `concat_ws(sep, ...)`: each argument printed as a cast to text prints it (see textCast). */
export function concatArguments(w: Walker, node: Node): void {
  const fn = strings(node.funcname);
  if (!w.expressions || fn.length !== 1 || (fn[0] !== 'concat' && fn[0] !== 'concat_ws')) return;
  const open = (w.index(node.location) ?? -2) + 1;
  if (w.tokens[open]?.text !== '(') return;
  let from = open + 1;
  for (const arg of (node.args as Node[] | undefined) ?? []) {
    const end = w.exprEnd(arg, from);
    if (end === null) return;
    if ((arg.A_Const as Node | undefined)?.sval === undefined && arg.ParamRef === undefined) {
      // A jsonb argument prints as jsonb's text (keys in order, its spacing), as its cast to text does.
      w.insertBefore(from, `${PG_SCHEMA}.${isJsonbOperand(w, arg) ? 'cot_jsonb_cast_text' : 'cot_concat_text'}(`);
      w.insertAfter(end, ')');
    }
    from = end + 2;
  }
}
