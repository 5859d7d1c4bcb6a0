import { quoteLiteral } from '../../../../sql/identifiers.js';
import { parseArrayLiteral } from '../../../../sql/array-literal.js';
import { strings } from '../../../../sql/pg-tree.js';
import { PG_SCHEMA } from '../pg-catalog.js';
import { typeWitness } from '../type-witness.js';
import { callOf, type Node, operatorOf, spelledName, type Walker } from './walker.js';

/**
 * jsonb as DuckDB's JSON: its operators (`?`, `@>`, `#>>`, and `->`'s
 * precedence), jsonb's ||, and json_agg with ORDER BY.
 */

/** JSON aggregates, which DuckDB has only as macros that take no ORDER BY. */
export const JSON_AGGREGATES = new Set(['json_agg', 'jsonb_agg']);

/** jsonb's key-existence operators, and the macro each becomes. */
const JSON_EXISTS_OPERATORS: Readonly<Record<string, string>> = {
  '?': 'cot_jsonb_exists',
  '?|': 'cot_jsonb_exists_any',
  '?&': 'cot_jsonb_exists_all',
};

/** Operators rewritten for JSON operands (and `?`, which DuckDB reads as a parameter). */
export const JSON_OPERATORS = new Set(['?', '?|', '?&', '@>', '<@', '#>', '#>>']);

/** The arguments each JSON builder makes a JSON value of: all, or every other one from an index. */
const JSON_VALUE_ARGUMENTS: Readonly<Record<string, { readonly from: number; readonly step: number; readonly to?: number }>> = {
  json_build_object: { from: 1, step: 2 },
  jsonb_build_object: { from: 1, step: 2 },
  json_build_array: { from: 0, step: 1 },
  jsonb_build_array: { from: 0, step: 1 },
  to_json: { from: 0, step: 1, to: 1 },
  to_jsonb: { from: 0, step: 1, to: 1 },
  json_agg: { from: 0, step: 1, to: 1 },
  jsonb_agg: { from: 0, step: 1, to: 1 },
  json_object_agg: { from: 1, step: 1, to: 2 },
  jsonb_object_agg: { from: 1, step: 1, to: 2 },
};

/**
 * A JSON builder's values through cot_json_value, which writes them as
 * PostgreSQL's to_jsonb does: DuckDB's to_json writes a timestamp with a
 * space ("2024-05-01 10:15:00", not "2024-05-01T10:15:00"), a double as
 * 0.0. The macro is chosen by the value's type witness
 * (engines/duckdb/catalog/type-witness.ts); a value whose type is not
 * certain is left as it is.
 */
export function jsonValueArguments(w: Walker, node: Node): void {
  const call = callOf(w, node);
  const spec = call === null ? undefined : JSON_VALUE_ARGUMENTS[call.fn];
  if (call === null || spec === undefined || !w.expressions || !(call.parts.length === 1 || call.parts[0] === 'pg_catalog')) return;
  const name = spelledName(w, call);
  if (name === null || w.tokens[name.next]?.text !== '(') return;
  let from = name.next + 1;
  const args = (node.args as Node[] | undefined) ?? [];
  for (let k = 0; k < args.length && k < (spec.to ?? args.length); k++) {
    const arg = args[k] as Node;
    const end = w.exprEnd(arg, from);
    if (end === null) return;
    // A constant's type is never one the macro changes; a parameter's is not known here.
    const value = k >= spec.from && (k - spec.from) % spec.step === 0 && arg.A_Const === undefined && arg.ParamRef === undefined;
    const witness = value ? typeWitness(arg) : null;
    if (witness !== null) {
      w.insertBefore(from, `${PG_SCHEMA}.cot_json_value(`);
      w.insertAfter(end, `, ${witness})`);
    }
    from = end + 2;
  }
}

/** `json_agg(x ORDER BY y)` → a JSON array of list(x ORDER BY y), NULL over no rows as in PostgreSQL; the call's other rules are not asked. */
export function jsonAggregate(w: Walker, node: Node): boolean {
  const call = callOf(w, node);
  const name = call === null ? null : spelledName(w, call);
  if (call === null || name === null) return false;
  const { parts, fn, i } = call;
  if (!JSON_AGGREGATES.has(fn) || !(parts.length === 1 || parts[0] === 'pg_catalog') || !w.expressions) return false;
  const close = w.tokens[name.next]?.text === '(' ? w.closing(name.next) : null;
  if (close === null) return true;
  w.replaceTokens(i, name.next, 'nullif(to_json(list');
  w.insertAfter(close, "), 'null')");
  return true;
}

/** Types whose value DuckDB's reading of a JSON number gives exactly: its double, or an integer. */
const BINARY_NUMBER_TYPES = new Set(['float4', 'float8', 'real', 'double', 'int2', 'int4', 'int8', 'smallint', 'integer', 'int', 'bigint']);

/**
 * `(j ->> 'n')::float8`: the text of the number does not matter to the
 * double (or integer) it becomes, so DuckDB's own ->> stays, at its speed;
 * jsonb's reading (cot_jsonb_arrow_text) costs microseconds a row.
 */
export function binaryNumberText(w: Walker, node: Node): void {
  const type = strings((node.typeName as Node | undefined)?.names).at(-1) ?? '';
  const arg = (node.arg as Node | undefined)?.A_Expr as Node | undefined;
  const op = strings(arg?.name).join('.');
  if (
    BINARY_NUMBER_TYPES.has(type) &&
    (node.typeName as Node).arrayBounds === undefined &&
    (op === '->>' || op === '#>>') &&
    typeof arg?.location === 'number'
  ) {
    w.binaryNumberTexts.add(arg.location);
  }
}

/**
 * PostgreSQL's -> binds tighter than = and AND; DuckDB's binds looser (a = 1
 * AND j->>'k' = 'v' would read as (a = 1 AND j) ->> ...): the operator's own
 * operands are parenthesised. The node's other rules are not asked.
 */
export function arrowOperands(w: Walker, node: Node): boolean {
  const o = operatorOf(w, node);
  if (o === null || node.kind !== 'AEXPR_OP' || o.parts.length !== 1 || (o.op !== '->' && o.op !== '->>') || !w.expressions) return false;
  const { op, i } = o;
  const start = w.argStart(node.lexpr as Node | undefined, i);
  const end = w.tokens[i]?.text === op ? w.exprEnd(node.rexpr as Node | undefined, i + 1) : null;
  if (start === null || end === null) return true;
  if (isJsonbOperand(w, node.lexpr as Node | undefined) && !w.binaryNumberTexts.has(node.location as number)) {
    // jsonb's: numbers as numeric prints them (pg-functions.ts, cot_jsonb_arrow).
    w.insertBefore(start, `${PG_SCHEMA}.cot_jsonb_arrow${op === '->>' ? '_text' : ''}(`);
    w.replaceTokens(i, i + 1, ',');
  } else w.insertBefore(start, '(');
  w.insertAfter(end, ')');
  return true;
}

/** jsonb's other operators (see jsonOperator); the node's other rules are not asked. */
export function jsonbOperator(w: Walker, node: Node): boolean {
  const o = operatorOf(w, node);
  if (o !== null && o.op === '||' && jsonbConcat(w, node, o.i)) return true;
  if (o === null || node.kind !== 'AEXPR_OP' || o.parts.length !== 1 || !JSON_OPERATORS.has(o.op) || !w.expressions) return false;
  jsonOperator(w, node, o.op, o.i);
  return true;
}

/**
 * jsonb's operators on DuckDB's JSON: `j ? k` → cot_jsonb_exists(j, k)
 * (DuckDB reads `?` as a parameter), `j @> '{"a":1}'` → cot_jsonb_contains,
 * `j #>> '{a,0}'` → json_extract_string(j, '$.a[0]'). `@>` and `<@` are
 * rewritten only where an operand is JSON by its text (a JSON literal or a
 * cast to json): on arrays they are DuckDB's own.
 */
function jsonOperator(w: Walker, node: Node, op: string, i: number): void {
  // The operator's tokens: DuckDB's scanner makes #>> two (# and >>), PostgreSQL's one.
  let opEnd = i;
  let spelled = w.tokens[i]?.text ?? '';
  while (spelled !== op && spelled.length < op.length && w.tokens[opEnd + 1]?.start === w.tokens[opEnd]?.end) {
    opEnd++;
    spelled += w.tokens[opEnd]?.text ?? '';
  }
  if (spelled !== op) return;
  const lexpr = node.lexpr as Node | undefined;
  const rexpr = node.rexpr as Node | undefined;
  const start = w.argStart(lexpr, i);
  const end = w.exprEnd(rexpr, opEnd + 1);
  if (start === null || end === null) return;
  const call = (fn: string): void => {
    w.insertBefore(start, `${fn}(`);
    w.replaceTokens(i, opEnd + 1, ',');
    w.insertAfter(end, ')');
  };
  const exists = JSON_EXISTS_OPERATORS[op];
  if (exists !== undefined) {
    call(`${PG_SCHEMA}.${exists}`);
  } else if (op === '@>' || op === '<@') {
    if (isJsonOperand(lexpr) || isJsonOperand(rexpr) || isJsonbOperand(w, lexpr) || isJsonbOperand(w, rexpr))
      call(`${PG_SCHEMA}.${op === '@>' ? 'cot_jsonb_contains' : 'cot_json_contained'}`);
  } else {
    const path = jsonPath(rexpr);
    if (path === null) return;
    if (isJsonbOperand(w, lexpr) && !w.binaryNumberTexts.has(node.location as number)) {
      const texts = JSON.stringify(parseArrayLiteral(((rexpr?.A_Const as Node | undefined)?.sval as { sval?: string } | undefined)?.sval ?? '{}'));
      w.insertBefore(start, `${PG_SCHEMA}.cot_jsonb_path${op === '#>>' ? '_text' : ''}(`);
      w.replaceTokens(i, end + 1, `, ${quoteLiteral(path)}, ${quoteLiteral(texts)})`);
      return;
    }
    w.insertBefore(start, `${op === '#>>' ? 'json_extract_string' : 'json_extract'}(`);
    w.replaceTokens(i, end + 1, `, ${quoteLiteral(path)})`);
  }
}

/** Functions whose result is jsonb. */
const JSONB_FUNCTIONS = new Set([
  'jsonb_build_object',
  'jsonb_build_array',
  'to_jsonb',
  'jsonb_set',
  'jsonb_strip_nulls',
  'jsonb_object',
  'jsonb_insert',
  'jsonb_agg',
  'jsonb_object_agg',
]);

/**
 * Whether an operand is jsonb: by its text (a cast to jsonb, a call of a
 * function that returns jsonb, another jsonb concatenation), as a column
 * declared jsonb of a table the statement names, or as `->` / `#>` of one.
 */
export function isJsonbOperand(w: Walker, e: Node | undefined): boolean {
  const cast = e?.TypeCast as Node | undefined;
  if (cast !== undefined) return strings((cast.typeName as Node | undefined)?.names).at(-1) === 'jsonb';
  const call = e?.FuncCall as Node | undefined;
  if (call !== undefined) return JSONB_FUNCTIONS.has(strings(call.funcname).at(-1) ?? '');
  const ref = e?.ColumnRef as Node | undefined;
  if (ref !== undefined && w.jsonbColumns !== null) {
    const fields = strings(ref.fields).map((f) => f.toLowerCase());
    const column = fields.at(-1) ?? '';
    if (fields.length === 1) return [...w.jsonbColumns.values()].some((columns) => columns.has(column));
    return w.jsonbColumns.get(fields.at(-2) ?? '')?.has(column) === true;
  }
  // COALESCE(j, '{}'::jsonb): of jsonb operands, jsonb.
  const coalesce = e?.CoalesceExpr as Node | undefined;
  if (coalesce !== undefined) return ((coalesce.args as Node[] | undefined) ?? []).some((a) => isJsonbOperand(w, a));
  // CASE ... THEN j ELSE '{}'::jsonb END: of a jsonb branch, jsonb.
  const branches = e?.CaseExpr as Node | undefined;
  if (branches !== undefined) {
    const results = ((branches.args as Node[] | undefined) ?? []).map((a) => (a.CaseWhen as Node | undefined)?.result as Node | undefined);
    return [...results, branches.defresult as Node | undefined].some((r) => isJsonbOperand(w, r));
  }
  const expr = e?.A_Expr as Node | undefined;
  if (expr?.kind === 'AEXPR_NULLIF') return isJsonbOperand(w, expr.lexpr as Node);
  const op = strings(expr?.name).join('.');
  if (op === '->' || op === '#>') return isJsonbOperand(w, expr?.lexpr as Node);
  if (expr === undefined || op !== '||') return false;
  // Beside a value that may be text (s || j), text's || may be the operator (see jsonbConcat): not jsonb for certain.
  const [l, r] = [expr.lexpr as Node | undefined, expr.rexpr as Node | undefined];
  return (isJsonbOperand(w, l) && (isJsonbOperand(w, r) || otherWitness(r) === null)) || (isJsonbOperand(w, r) && otherWitness(l) === null);
}

/**
 * `a || b` where an operand is jsonb by its text → cot_jsonb_concat(a, b):
 * PostgreSQL merges two objects and concatenates arrays, DuckDB joins the
 * two texts ('{"a":1}{"x":1}', not JSON). A column is jsonb as declared
 * (engines/duckdb/catalog/declared.ts); one of a view or a subquery is not
 * seen here (docs/compatibility.md).
 */
function jsonbConcat(w: Walker, node: Node, i: number): boolean {
  const lexpr = node.lexpr as Node | undefined;
  const rexpr = node.rexpr as Node | undefined;
  if (node.kind !== 'AEXPR_OP' || !w.expressions || w.tokens[i]?.text !== '||' || !(isJsonbOperand(w, lexpr) || isJsonbOperand(w, rexpr))) return false;
  const start = w.argStart(lexpr, i);
  const end = w.exprEnd(rexpr, i + 1);
  if (start === null || end === null) return false;
  // Beside a value of another type (a text column: s || j), which only the engine knows, PostgreSQL's
  // text || anything may be the operator: chosen by that value's witness. A literal is jsonb's (unknown).
  const leftJsonb = isJsonbOperand(w, lexpr);
  const other = leftJsonb ? rexpr : lexpr;
  const witness = leftJsonb && isJsonbOperand(w, rexpr) ? null : otherWitness(other);
  w.insertBefore(start, `${PG_SCHEMA}.${witness === null ? 'cot_jsonb_concat' : leftJsonb ? 'cot_jsonb_concat_before' : 'cot_jsonb_concat_after'}(`);
  w.replaceTokens(i, i + 1, ',');
  w.insertAfter(end, witness === null ? ')' : `, ${witness})`);
  return true;
}

/** The witness of `||`'s operand beside jsonb, where it is no constant: its type decides between text's || and jsonb's. */
function otherWitness(e: Node | undefined): string | null {
  if (e === undefined || e.A_Const !== undefined || e.ParamRef !== undefined) return null;
  const cast = e.TypeCast as Node | undefined;
  if (
    cast !== undefined &&
    (cast.arg as Node | undefined)?.A_Const !== undefined &&
    !['text', 'varchar'].includes(strings((cast.typeName as Node | undefined)?.names).at(-1) ?? '')
  )
    return null;
  return typeWitness(e);
}

/** Whether an operand is JSON by its text: a literal that parses as a JSON object or array, or a cast to json or jsonb. */
function isJsonOperand(e: Node | undefined): boolean {
  const cast = e?.TypeCast as Node | undefined;
  if (cast !== undefined) {
    const names = strings((cast.typeName as Node | undefined)?.names);
    if (['json', 'jsonb'].includes(names[names.length - 1] ?? '')) return true;
    return isJsonOperand(cast.arg as Node | undefined);
  }
  const sval = ((e?.A_Const as Node | undefined)?.sval as { sval?: string } | undefined)?.sval;
  if (sval === undefined || !/^\s*[[{]/.test(sval)) return false;
  try {
    return typeof JSON.parse(sval) === 'object';
  } catch {
    return false;
  }
}

/** A text-array path literal ('{a,0,b}') as a JSON path ($.a[0].b); null when the path is not a literal. */
function jsonPath(e: Node | undefined): string | null {
  const sval = ((e?.A_Const as Node | undefined)?.sval as { sval?: string } | undefined)?.sval;
  const items = sval === undefined ? null : parseArrayLiteral(sval);
  if (items === null || items.some((x) => typeof x !== 'string')) return null;
  return `$${(items as string[]).map((k) => (/^\d+$/.test(k) ? `[${k}]` : `.${JSON.stringify(k)}`)).join('')}`;
}
