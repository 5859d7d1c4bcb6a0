import { strings } from '../../../../sql/pg-tree.js';
import type { Node, Walker } from './walker.js';

/**
 * Operands that are NULL before the query runs, made opaque to DuckDB's
 * binder. DuckDB binds a function or an operator with a constant NULL
 * argument (`NULL::numeric - 1`, `s || NULL::text`, `'true'::jsonb ->> 'k'`)
 * to an untyped NULL, which it then describes as integer, so PostgreSQL's
 * `numeric` or `text` column reached the client as `int4` and pg_typeof
 * answered `unknown`. The operand as a scalar subquery, `(SELECT NULL::text)`,
 * is still NULL but no longer folded, so the operator's result keeps its
 * type. Only a NULL cast and a jsonb path of constants (which may give NULL)
 * are wrapped: a constant that is never NULL is left to DuckDB's folding,
 * which filters and pruning rely on.
 */

/**
 * Calls whose macro puts an argument inside a lambda (array_remove's element
 * is read in list_filter's), and jsonb's key-existence operators: DuckDB
 * takes no subquery there, so nothing inside them is wrapped.
 */
const LAMBDA_CALLS = new Set([
  'array_remove',
  'array_to_string',
  'string_to_array',
  'initcap',
  'current_schemas',
  'parse_ident',
  'pg_get_serial_sequence',
  'pg_get_function_arguments',
  '_pg_expandarray',
]);
const LAMBDA_OPERATORS = new Set(['?', '?|', '?&']);

/** Every location in a subtree, kept from being wrapped. */
function keepFolded(w: Walker, v: unknown): void {
  if (Array.isArray(v)) for (const x of v) keepFolded(w, x);
  else if (v !== null && typeof v === 'object') {
    for (const [k, x] of Object.entries(v as Node)) {
      if (k === 'location' && typeof x === 'number') w.inLambdas.add(x);
      else keepFolded(w, x);
    }
  }
}

/** Path operators whose result on constant operands may be NULL (a key that is not there). */
const PATH_OPERATORS = new Set(['->', '->>', '#>', '#>>']);

/** `NULL::type`, `CAST(NULL AS type)`, and casts of those. */
function isNullCast(e: Node | undefined): boolean {
  const cast = e?.TypeCast as Node | undefined;
  if (cast === undefined) return false;
  const arg = cast.arg as Node | undefined;
  return (arg?.A_Const as Node | undefined)?.isnull === true || isNullCast(arg);
}

/** A literal, or casts of one. */
function isConstant(e: Node | undefined): boolean {
  if (e?.A_Const !== undefined) return true;
  const cast = e?.TypeCast as Node | undefined;
  return cast !== undefined && isConstant(cast.arg as Node | undefined);
}

/** `'{"a": 1}'::jsonb ->> 'k'` and the other path operators on constants only, and casts of those. */
function isConstantPath(e: Node | undefined): boolean {
  const cast = e?.TypeCast as Node | undefined;
  if (cast !== undefined) return isConstantPath(cast.arg as Node | undefined);
  const expr = e?.A_Expr as Node | undefined;
  if (expr?.kind !== 'AEXPR_OP' || !PATH_OPERATORS.has(strings(expr.name).join('.'))) return false;
  const left = expr.lexpr as Node | undefined;
  return (isConstant(left) || isConstantPath(left)) && isConstant(expr.rexpr as Node | undefined);
}

/**
 * Marks an operand to wrap. Its own rule wraps it (unfoldedCast,
 * unfoldedPath): a node's rules run after its parent's, so the subquery's
 * parentheses go inside any macro call the parent's rules put around the
 * same text (`cot_minus((SELECT NULL::DECIMAL(38,9)), 1, ...)`).
 */
function mark(w: Walker, operand: Node | undefined): void {
  const inner = (operand?.TypeCast ?? operand?.A_Expr) as Node | undefined;
  if (inner !== undefined && typeof inner.location === 'number' && (isNullCast(operand) || isConstantPath(operand))) w.unfoldedOperands.add(inner.location);
}

function wrap(w: Walker, wrapper: string, node: Node): void {
  if (typeof node.location !== 'number' || !w.unfoldedOperands.has(node.location) || w.inLambdas.has(node.location)) return;
  const operand = { [wrapper]: node };
  let start = w.leftmost(operand);
  let end = start === null ? null : w.exprEnd(operand, start);
  // `(NULL::float8)::numeric`: the leftmost token is inside the operand's own parentheses.
  while (start !== null && end === null && w.tokens[start - 1]?.text === '(') {
    start--;
    end = w.exprEnd(operand, start);
  }
  if (start === null || end === null) return;
  w.insertBefore(start, '(SELECT ');
  w.insertAfter(end, ')');
}

/** The operands of an operator (`a - b`, `-a`, `a || b`). */
export function operatorNullOperands(w: Walker, node: Node): void {
  if (!w.expressions || node.kind !== 'AEXPR_OP') return;
  if (LAMBDA_OPERATORS.has(strings(node.name).join('.'))) {
    keepFolded(w, node);
    return;
  }
  mark(w, node.lexpr as Node | undefined);
  mark(w, node.rexpr as Node | undefined);
}

/** A function's arguments (`right(NULL::text, 2)`, `sum((NULL::jsonb ->> 'b')::int4)`). */
export function callNullArguments(w: Walker, node: Node): void {
  if (!w.expressions) return;
  if (LAMBDA_CALLS.has(strings(node.funcname).at(-1) ?? '')) {
    keepFolded(w, node.args);
    return;
  }
  for (const arg of (node.args as Node[] | undefined) ?? []) mark(w, arg);
}

/** A subscript's array (`(NULL::int4[])[1]`). */
export function subscriptNullArray(w: Walker, node: Node): void {
  if (w.expressions) mark(w, node.arg as Node | undefined);
}

/** A marked NULL cast, wrapped. */
export function unfoldedCast(w: Walker, node: Node): void {
  wrap(w, 'TypeCast', node);
}

/** A marked path of constants, wrapped. */
export function unfoldedPath(w: Walker, node: Node): void {
  wrap(w, 'A_Expr', node);
}
