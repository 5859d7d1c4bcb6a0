import { quoteLiteral } from '../../../../sql/identifiers.js';
import { strings } from '../../../../sql/pg-tree.js';
import { PG_SCHEMA } from '../pg-catalog.js';
import { isJsonbOperand } from './jsonb.js';
import { pgArrayToList } from './literals.js';
import { type Node, operatorOf, type Walker } from './walker.js';

/** Functions whose result is an array. */
const ARRAY_FUNCTIONS = new Set([
  'array_append',
  'array_prepend',
  'array_cat',
  'array_remove',
  'array_replace',
  'array_agg',
  'string_to_array',
  'regexp_split_to_array',
  'array_fill',
]);

/**
 * Whether an operand is an array by its text: ARRAY[...], a cast to an array
 * type, a function that returns one, another array concatenation, or a
 * COALESCE, CASE or NULLIF of one.
 */
export function isArrayOperand(e: Node | undefined): boolean {
  if (e?.A_ArrayExpr !== undefined) return true;
  const cast = e?.TypeCast as Node | undefined;
  if (cast !== undefined) return (cast.typeName as Node | undefined)?.arrayBounds !== undefined;
  const call = e?.FuncCall as Node | undefined;
  if (call !== undefined) return ARRAY_FUNCTIONS.has(strings(call.funcname).at(-1) ?? '');
  const coalesce = e?.CoalesceExpr as Node | undefined;
  if (coalesce !== undefined) return ((coalesce.args as Node[] | undefined) ?? []).some(isArrayOperand);
  const branches = e?.CaseExpr as Node | undefined;
  if (branches !== undefined) {
    const results = ((branches.args as Node[] | undefined) ?? []).map((c) => (c.CaseWhen as Node | undefined)?.result as Node | undefined);
    return [...results, branches.defresult as Node | undefined].some(isArrayOperand);
  }
  const expr = e?.A_Expr as Node | undefined;
  if (expr?.kind === 'AEXPR_NULLIF') return isArrayOperand(expr.lexpr as Node | undefined);
  return expr !== undefined && strings(expr.name).join('.') === '||' && (isArrayOperand(expr.lexpr as Node) || isArrayOperand(expr.rexpr as Node));
}

/**
 * `a || b` where an operand is an array by its text → cot_array_cat(a, b):
 * PostgreSQL's array concatenation takes a NULL array as an empty one
 * (`ta || ARRAY['x']` is {x} where ta is NULL), DuckDB's gives NULL. An
 * operand that is an array only by its column's type is not seen here.
 * The node's other rules are not asked.
 */
export function arrayConcat(w: Walker, node: Node): boolean {
  return arrayOperator(w, node, { '||': 'cot_array_cat' });
}

/**
 * `a @> b` and `a <@ b` where an operand is an array by its text →
 * cot_array_contains: PostgreSQL's containment never matches a NULL element
 * (ARRAY[1, NULL] @> ARRAY[NULL] is false), DuckDB's skips them. The
 * node's other rules are not asked.
 */
export function arrayContainment(w: Walker, node: Node): boolean {
  return arrayOperator(w, node, { '@>': 'cot_array_contains', '<@': 'cot_array_contained' });
}

/** Functions whose result is never an array. */
const SCALAR_FUNCTIONS = new Set(['upper', 'lower', 'trim', 'btrim', 'ltrim', 'rtrim', 'substr', 'substring', 'replace', 'concat', 'length', 'abs', 'round']);

/** Whether an operand is not an array by its text: a cast to a type that is not one, a number, a boolean, or a text function. */
function isScalarOperand(e: Node | undefined): boolean {
  const cast = e?.TypeCast as Node | undefined;
  if (cast !== undefined) return (cast.typeName as Node | undefined)?.arrayBounds === undefined;
  const constant = e?.A_Const as Node | undefined;
  if (constant !== undefined) return constant.ival !== undefined || constant.fval !== undefined || constant.boolval !== undefined;
  const call = e?.FuncCall as Node | undefined;
  return call !== undefined && call.over === undefined && SCALAR_FUNCTIONS.has(strings(call.funcname).at(-1) ?? '');
}

const isNull = (e: Node | undefined): boolean => (e?.A_Const as Node | undefined)?.isnull === true;

const textOf = (e: Node | undefined): string | undefined => ((e?.A_Const as Node | undefined)?.sval as { sval?: string } | undefined)?.sval;

/**
 * A string that is an array literal and not JSON (`'{1,2}'`, not `'{"a": 1}'`
 * or `'{}'`, which jsonb's @> takes): beside @> or <@ it makes the other
 * operand an array, as PostgreSQL resolves `tags @> '{a}'`.
 */
function isArrayText(e: Node | undefined): boolean {
  const text = textOf(e);
  if (text === undefined || !/^\s*\{/.test(text) || pgArrayToList(text) === null) return false;
  try {
    JSON.parse(text);
    return false;
  } catch {
    return true;
  }
}

/**
 * `ARRAY[1] || '{2,3}'`, `a @> '{1}'`: a string beside an array is an array literal of
 * the array's type in PostgreSQL. It becomes a list of its texts, which the
 * macro casts to the other operand's type; text that is not an array
 * literal is PostgreSQL's error. Null when neither operand is a string.
 */
function textOperand(w: Walker, op: string, lexpr: Node | undefined, rexpr: Node | undefined): string | null {
  const macros = LITERAL_MACROS[op];
  if (macros === undefined) return null;
  const [literal, macro] = textOf(rexpr) !== undefined ? [rexpr, macros.right] : textOf(lexpr) !== undefined ? [lexpr, macros.left] : [undefined, null];
  const text = textOf(literal);
  const at = w.index((literal?.A_Const as Node | undefined)?.location);
  if (text === undefined || macro === null || at === null || w.tokens[at]?.kind !== 'string') return null;
  const list = pgArrayToList(text);
  w.replaceTokens(at, at + 1, list ?? `error(${quoteLiteral(`malformed array literal: "${text}"`)})`);
  return list === null ? macros.plain : macro;
}

/**
 * `a @> b` of two operands neither of which is jsonb, by its text or its
 * column's declared type (known for every table the statement names): DuckDB
 * has @> and <@ for lists only, so they are arrays (`tags @> tags` of
 * '{7,NULL}' is false in PostgreSQL, whose NULL element matches nothing;
 * DuckDB's list_has_all skipped it). A string operand is left to the jsonb
 * rules, as is an operand of a subquery's column, whose type is not seen.
 */
function notJsonb(w: Walker, lexpr: Node | undefined, rexpr: Node | undefined): boolean {
  const plain = (e: Node | undefined): boolean => e?.ColumnRef !== undefined && !isJsonbOperand(w, e);
  return w.jsonbColumns !== null && plain(lexpr) && plain(rexpr);
}

/** For each operator, the macros for an array literal on its right or left, and the plain one a malformed literal errs in. */
const LITERAL_MACROS: Readonly<Record<string, { readonly right: string; readonly left: string; readonly plain: string }>> = {
  '||': { right: 'cot_array_cat_literal', left: 'cot_literal_cat_array', plain: 'cot_array_cat' },
  '@>': { right: 'cot_array_contains_literal', left: 'cot_literal_contains_array', plain: 'cot_array_contains' },
  '<@': { right: 'cot_array_contained_literal', left: 'cot_literal_contained_array', plain: 'cot_array_contained' },
};

/**
 * The macro for `a || b` where an operand is an array by its text: an
 * element by its text is appended or prepended; another array, or NULL,
 * concatenated; an operand whose type only the engine knows goes to a
 * macro chosen by that type (an element type appends, a list concatenates).
 */
function concatMacro(lexpr: Node | undefined, rexpr: Node | undefined): string {
  if (isScalarOperand(rexpr)) return 'cot_array_append';
  if (isScalarOperand(lexpr)) return 'cot_array_prepend';
  if (isArrayOperand(lexpr) && (isArrayOperand(rexpr) || isNull(rexpr))) return 'cot_array_cat';
  if (isArrayOperand(rexpr) && isNull(lexpr)) return 'cot_array_cat';
  return isArrayOperand(lexpr) ? 'cot_array_cat_or_append' : 'cot_array_cat_or_prepend';
}

/**
 * `a op b` → `macro(a, b)` where an operand is an array by its text; for
 * `||`, an array and an element are array_append and array_prepend, where
 * the element is not an array by its text either.
 */
function arrayOperator(w: Walker, node: Node, macros: Readonly<Record<string, string>>): boolean {
  const o = operatorOf(w, node);
  const lexpr = node.lexpr as Node | undefined;
  const rexpr = node.rexpr as Node | undefined;
  let macro = o === null ? undefined : macros[o.op];
  if (o === null || macro === undefined || o.parts.length !== 1 || node.kind !== 'AEXPR_OP' || !w.expressions || w.tokens[o.i]?.text !== o.op) return false;
  if (!(isArrayOperand(lexpr) || isArrayOperand(rexpr) || (o.op !== '||' && (isArrayText(lexpr) || isArrayText(rexpr) || notJsonb(w, lexpr, rexpr))))) {
    return false;
  }
  macro = textOperand(w, o.op, lexpr, rexpr) ?? (o.op === '||' ? concatMacro(lexpr, rexpr) : macro);
  const start = w.argStart(lexpr, o.i);
  const end = w.exprEnd(rexpr, o.i + 1);
  if (start === null || end === null) return false;
  w.insertBefore(start, `${PG_SCHEMA}.${macro}(`);
  w.replaceTokens(o.i, o.i + 1, ',');
  w.insertAfter(end, ')');
  return true;
}
