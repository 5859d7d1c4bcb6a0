import { UNCONSTRAINED_NUMERIC } from '../../../../sql/numeric.js';
import { PG_SCHEMA } from '../pg-catalog.js';
import { INTEGER_FUNCTIONS, paddedDecimal, SUBSECOND_FIELDS, typeWitness } from '../type-witness.js';

export { INTEGER_FUNCTIONS };
import { strings } from '../../../../sql/pg-tree.js';
import { callOf, type Node, operatorOf, spelledName, type Walker, wordOf } from './walker.js';

/**
 * Result types as PostgreSQL gives them where DuckDB's differ: integer
 * string functions, extract's numeric and date_part's double, int8 sums,
 * numeric averages, round half to even, numeric division and integer date
 * differences, and division by zero as an error. Where the type depends on
 * the operands', a macro chooses it by the operands' type witnesses
 * (engines/duckdb/catalog/type-witness.ts, result-types.ts).
 */

/** Aggregates whose result is double precision in PostgreSQL and has the ordering column's type in DuckDB. */
export const DOUBLE_AGGREGATES = new Set(['percentile_cont']);

/** Aggregates whose result type PostgreSQL derives otherwise than DuckDB (int8 sums, numeric averages), and the macro that corrects it. */
export const NUMERIC_AGGREGATES: Readonly<Record<string, string>> = { sum: 'cot_sum_as', avg: 'cot_avg_as' };

/** Division and modulo: PostgreSQL raises division_by_zero (22012) where DuckDB returns NULL or Infinity. */
export const DIVISION_OPERATORS = new Set(['/', '%']);

/** `length(s)` and its kin as integer (see integerResult). */
export function integerCall(w: Walker, node: Node): void {
  const call = callOf(w, node);
  if (call !== null) integerResult(w, call.parts, call.i);
}

/** `extract(...)` and `date_part(...)` (see datePartResult). */
export function datePartCall(w: Walker, node: Node): void {
  const call = callOf(w, node);
  if (call !== null) datePartResult(w, node, call.parts, call.i);
}

/** sum, avg, round, trunc and percentile_cont, called by their own names: their results as PostgreSQL types them. */
export function aggregateResult(w: Walker, node: Node): void {
  const call = callOf(w, node);
  const name = call === null ? null : spelledName(w, call);
  if (call === null || name === null) return;
  const { parts, fn, i } = call;
  if ((parts.length === 1 || parts[0] === 'pg_catalog') && w.expressions && w.tokens[name.next]?.text === '(') {
    if (NUMERIC_AGGREGATES[fn] !== undefined) numericAggregate(w, node, fn, i, name.next);
    witnessedCall(w, node, fn, i, name.next);
    const close = fn === 'trunc' && (node.args as Node[] | undefined)?.length === 2 ? w.closing(name.next) : null;
    if (close !== null) paddedScale(w, (node.args as Node[])[1], i, close);
    doubleResult(w, node, fn, i, name.next);
  }
}

/**
 * `length(s)`, `position(a IN b)` ...: integer in PostgreSQL, bigint in
 * DuckDB, which drivers read as another type (a string in node-postgres).
 */
function integerResult(w: Walker, parts: readonly string[], i: number): void {
  const fn = parts[parts.length - 1] as string;
  if (!INTEGER_FUNCTIONS.has(fn) || !w.expressions || (parts.length === 2 && parts[0] !== 'pg_catalog') || parts.length > 2) return;
  const name = w.dotted(i);
  if (name === null || name.parts[name.parts.length - 1] !== fn || w.tokens[name.next]?.text !== '(') return;
  castCall(w, i, name.next, 'INTEGER');
}

/** The call whose name starts at token i and whose arguments open at `open`, its window and ordering included, cast to `type`. */
function castCall(w: Walker, i: number, open: number, type: string): void {
  const close = w.closing(open);
  const end = close === null ? null : w.callEnd(close);
  if (end === null) return;
  w.insertBefore(i, 'CAST(');
  w.insertAfter(end, ` AS ${type})`);
}

/**
 * extract(field FROM x) is numeric in PostgreSQL 14 and later, date_part
 * double precision; DuckDB's are bigint, and its seconds and milliseconds
 * drop the fraction (45 where PostgreSQL has 45.500000). A sub-second field
 * is read as microseconds and scaled, so it keeps PostgreSQL's digits.
 */
function datePartResult(w: Walker, node: Node, parts: readonly string[], i: number): void {
  const fn = parts[parts.length - 1];
  if ((fn !== 'extract' && fn !== 'date_part') || parts.length > 2 || (parts.length === 2 && parts[0] !== 'pg_catalog') || !w.expressions) return;
  const field = (((node.args as Node[] | undefined)?.[0]?.A_Const as Node | undefined)?.sval as { sval?: string } | undefined)?.sval?.toLowerCase();
  const span = w.callSpan(i);
  if (field === undefined || span === null) return;
  const fieldAt = span.open + 1;
  const spelled = w.tokens[fieldAt];
  if (spelled === undefined || (wordOf(spelled) ?? spelled.text.slice(1, -1).toLowerCase()) !== field) return;
  const scale = SUBSECOND_FIELDS[field];
  const numeric = fn === 'extract';
  if (scale !== undefined) {
    w.replaceTokens(fieldAt, fieldAt + 1, numeric ? 'microseconds' : "'microseconds'");
    w.insertBefore(i, '(CAST(');
    w.insertAfter(span.close, numeric ? ` AS DECIMAL(38,0)) * ${scale.numeric})` : ` AS DOUBLE) / ${scale.divisor})`);
  } else if (numeric && field === 'epoch') {
    // A double of seconds: its digits past the microsecond are noise.
    w.insertBefore(i, 'round(CAST(');
    w.insertAfter(span.close, ` AS ${UNCONSTRAINED_NUMERIC}), 6)`);
  } else {
    w.insertBefore(i, 'CAST(');
    w.insertAfter(span.close, ` AS ${numeric ? UNCONSTRAINED_NUMERIC : 'DOUBLE'})`);
  }
}

/**
 * Calls whose PostgreSQL result depends on an argument's type, each becoming
 * a macro given that argument's witness last: round(x) of a double rounds
 * half to even (rint), DuckDB's half away from zero; sqrt(x) of a numeric is
 * numeric, DuckDB's a double; date_trunc(field, d) of a date is timestamp
 * with time zone (PostgreSQL casts the date to it), DuckDB's a timestamp.
 */
const WITNESSED_CALLS: Readonly<Record<string, ReadonlyArray<{ readonly macro: string; readonly args: number; readonly witnessed: number }>>> = {
  // round(x, n) of an integer is numeric: PostgreSQL has round(numeric, int) only.
  round: [
    { macro: 'cot_round', args: 1, witnessed: 0 },
    { macro: 'cot_round_to', args: 2, witnessed: 0 },
  ],
  sqrt: [{ macro: 'cot_sqrt', args: 1, witnessed: 0 }],
  // ceil and floor of an int128 (a sum of bigints, numeric in PostgreSQL): numeric, where DuckDB's are doubles.
  ceil: [{ macro: 'cot_ceil', args: 1, witnessed: 0 }],
  ceiling: [{ macro: 'cot_ceil', args: 1, witnessed: 0 }],
  floor: [{ macro: 'cot_floor', args: 1, witnessed: 0 }],
  date_trunc: [{ macro: 'cot_date_trunc', args: 2, witnessed: 1 }],
};

/** `-1`, `(-2)`: a negative integer constant. */
function negativeConstant(e: Node | undefined): boolean {
  const ival = ((e?.A_Const as Node | undefined)?.ival as { ival?: number } | undefined)?.ival;
  return ival !== undefined && ival < 0;
}

/** `f(..., x)` → `macro(..., x, wx)` (see WITNESSED_CALLS). */
function witnessedCall(w: Walker, node: Node, fn: string, i: number, open: number): void {
  const args = node.args as Node[] | undefined;
  const call = WITNESSED_CALLS[fn]?.find((c) => c.args === args?.length);
  const witness = call !== undefined ? typeWitness(args?.[call.witnessed]) : null;
  const close = w.closing(open);
  if (call === undefined || witness === null || close === null) return;
  // round(x, -1): left of the point, which DuckDB's round of a narrow DECIMAL gets wrong.
  const left = fn === 'round' && args?.length === 2 && negativeConstant(args[1]);
  w.replaceTokens(i, open, `${PG_SCHEMA}.${left ? 'cot_round_left' : call.macro}`);
  w.insertBefore(close, `, ${witness}`);
  if (fn === 'round' && args?.length === 2) paddedScale(w, args[1], i, close);
}

/**
 * round(x, k) and trunc(x, k) of a constant k have k decimals in PostgreSQL
 * (round(1.5, 3) is 1.500), where DuckDB keeps x's scale when it has fewer.
 * The call is cast to paddedDecimal(k).
 */
function paddedScale(w: Walker, places: Node | undefined, from: number, close: number): void {
  const ival = (places?.A_Const as Node | undefined)?.ival as { ival?: number } | undefined;
  if (ival === undefined) return;
  const k = ival.ival ?? 0;
  if (k < 0 || k > 36) return;
  w.insertBefore(from, 'CAST(');
  w.insertAfter(close, ` AS ${paddedDecimal(k)})`);
}

/**
 * percentile_cont(f) WITHIN GROUP (ORDER BY x): double precision in
 * PostgreSQL, which interpolates in doubles; DuckDB interpolates in x's type,
 * and at a numeric(10,2)'s scale 110.245 would be 110.24. The ordering
 * expression is a double; the result is one too.
 */
function doubleResult(w: Walker, node: Node, fn: string, i: number, open: number): void {
  const first = (node.args as Node[] | undefined)?.[0];
  if (!DOUBLE_AGGREGATES.has(fn) || first?.A_ArrayExpr !== undefined || !w.expressions) return;
  const order = (node.agg_order as Node[] | undefined)?.[0]?.SortBy as Node | undefined;
  const expr = order?.node as Node | undefined;
  const close = w.closing(open);
  const by = close === null ? null : w.tokens.findIndex((t, j) => j > close && wordOf(t) === 'by');
  const start = by === null || by < 0 ? null : by + 1;
  const end = start === null ? null : w.exprEnd(expr, start);
  if (start !== null && end !== null && (node.agg_order as Node[]).length === 1) {
    w.insertBefore(start, 'CAST(');
    w.insertAfter(end, ' AS DOUBLE)');
  }
  castCall(w, i, open, 'DOUBLE');
}

/**
 * `sum(x)` → `cot_sum_as(sum(x), wx)`, `avg(x)` → `cot_avg_as(avg(x), wx)`:
 * int8 sums of int2 and int4, numeric averages of integers and numerics,
 * chosen by the type witness of x. The call keeps its DISTINCT, ORDER BY,
 * FILTER and OVER.
 */
function numericAggregate(w: Walker, node: Node, fn: string, i: number, open: number): void {
  const args = node.args as Node[] | undefined;
  if (args?.length !== 1 || node.agg_star === true || node.agg_within_group === true) return;
  const witness = typeWitness(args[0]);
  const close = w.closing(open);
  const end = close === null ? null : w.callEnd(close);
  if (witness === null || end === null) return;
  w.insertBefore(i, `${PG_SCHEMA}.${NUMERIC_AGGREGATES[fn]}(`);
  w.insertAfter(end, `, ${witness})`);
  if (fn === 'avg') exactAverage(w, i, open, end);
  // sum(interval), which DuckDB lacks: a macro chosen by the argument's type, for a call a macro can stand for.
  const plain = node.agg_distinct !== true && node.agg_filter === undefined && node.over === undefined && node.agg_order === undefined;
  if (fn === 'sum' && plain) w.replaceTokens(i, open, `${PG_SCHEMA}.cot_sum`);
}

/**
 * avg(x) of integers and numerics is numeric in PostgreSQL, sum(x) / count(x)
 * at its division's scale, where DuckDB's is a double of 15 digits. The macro
 * is also given `sum(...)` and `count(...)` of the same arguments, DISTINCT,
 * FILTER and OVER (the text as the client wrote it), and divides them
 * exactly. Only when no other rule rewrites inside the call, or the copies
 * would differ from it; then the average is the double's 15 digits.
 */
function exactAverage(w: Walker, i: number, open: number, end: number): void {
  const from = w.tokens[open];
  const to = w.tokens[end];
  const at = w.tokens[i];
  if (from === undefined || to === undefined || at === undefined) return;
  const call = w.text.slice(from.start, to.end);
  w.copiedArguments.push({ from: from.start, to: to.end });
  w.move({ from: from.start, to: to.end, edits: [{ start: at.start, end: at.start, text: `sum${call}, count${call}, ` }] });
}

/** `a - b` (see typedOperation); the node's other rules are not asked. */
export function minus(w: Walker, node: Node): boolean {
  const o = operatorOf(w, node);
  if (o === null || node.kind !== 'AEXPR_OP' || o.parts.length !== 1 || o.op !== '-' || node.lexpr === undefined || !w.expressions) return false;
  typedOperation(w, node, o.i, 'cot_minus');
  return true;
}

/** `a / b` and `a % b` (see typedOperation, checkedDivisor); the node's other rules are not asked. */
export function division(w: Walker, node: Node): boolean {
  const o = operatorOf(w, node);
  if (o === null || node.kind !== 'AEXPR_OP' || o.parts.length !== 1 || !DIVISION_OPERATORS.has(o.op) || !w.expressions) return false;
  if (!typedOperation(w, node, o.i, o.op === '/' ? 'cot_div' : 'cot_mod')) checkedDivisor(w, node.rexpr as Node | undefined, o.i);
  return true;
}

/**
 * `a / b` → `a / cot_divisor(b)`, which raises division_by_zero when b is 0.
 * The parse tree gives where b starts, not where it ends: the end is the
 * first token after which the text, parsed alone, is b again.
 */
function checkedDivisor(w: Walker, rexpr: Node | undefined, op: number): void {
  if (w.tokens[op]?.kind !== 'operator') return;
  const end = w.exprEnd(rexpr, op + 1);
  if (end === null) return;
  w.insertBefore(op + 1, `${PG_SCHEMA}.cot_divisor(`);
  w.insertAfter(end, ')');
}

/** The operator each typed macro stands for. */
const MACRO_OPERATORS = { cot_div: '/', cot_mod: '%', cot_minus: '-' } as const;

/**
 * `a / b` → `cot_div(a, b, wa, wb)`, `a % b` → `cot_mod(...)`, `a - b` →
 * `cot_minus(...)`: the operator as PostgreSQL types it (numeric division
 * and modulo of integers and numerics mixed, an integer count of days
 * between two dates), chosen by the operands' type witnesses
 * (engines/duckdb/catalog/type-witness.ts). False, and the operator left as
 * it is, when an operand's type is not certain.
 */
function typedOperation(w: Walker, node: Node, op: number, macro: keyof typeof MACRO_OPERATORS): boolean {
  const spelled = w.tokens[op];
  if (spelled?.kind !== 'operator' || spelled.text !== MACRO_OPERATORS[macro]) return false;
  const lexpr = node.lexpr as Node | undefined;
  const rexpr = node.rexpr as Node | undefined;
  const wa = typeWitness(lexpr);
  const wb = wa === null ? null : typeWitness(rexpr);
  if (wa === null || wb === null) return false;
  const start = w.argStart(lexpr, op);
  const end = w.exprEnd(rexpr, op + 1);
  if (start === null || end === null) return false;
  w.insertBefore(start, `${PG_SCHEMA}.${macro}(`);
  w.replaceTokens(op, op + 1, ',');
  w.insertAfter(end, `, ${wa}, ${wb})`);
  return true;
}

/** Whether an expression is a quotient by its text (a division, a remainder, avg, sqrt): DECIMAL(38,20) once rewritten, when numeric. */
function quotientLike(e: Node | undefined): boolean {
  const expr = e?.A_Expr as Node | undefined;
  if (expr !== undefined) return expr.kind === 'AEXPR_OP' && ['/', '%'].includes(strings(expr.name).join('.'));
  const call = e?.FuncCall as Node | undefined;
  const fn = strings(call?.funcname).at(-1);
  return fn === 'avg' || fn === 'sqrt';
}

/**
 * Where a branch starts and ends: its leftmost token, or the parenthesis
 * before it when the branch is parenthesised inside (`((a * b) + c)`, whose
 * leftmost token `a` starts no expression that ends with the branch).
 */
function branchSpan(w: Walker, branch: Node): { readonly start: number; readonly end: number } | null {
  const leftmost = w.leftmost(branch);
  if (leftmost === null) return null;
  for (let start = leftmost; start >= 0 && (start === leftmost || w.tokens[start]?.text === '('); start--) {
    const end = w.exprEnd(branch, start);
    if (end !== null) return { start, end };
  }
  return null;
}

/** The values a CASE, COALESCE, GREATEST, LEAST or NULLIF chooses among. */
function branchesOf(node: Node): Array<Node | undefined> {
  if (node.kind === 'AEXPR_NULLIF') return [node.lexpr as Node | undefined, node.rexpr as Node | undefined];
  const args = (node.args as Node[] | undefined) ?? [];
  if (args.some((a) => a.CaseWhen !== undefined)) {
    return [...args.map((c) => (c.CaseWhen as Node | undefined)?.result as Node | undefined), node.defresult as Node | undefined];
  }
  return args;
}

/**
 * CASE, COALESCE, NULLIF, GREATEST and LEAST of a quotient and another
 * numeric: DuckDB gives DECIMAL(38,20) and DECIMAL(38,9) together the
 * smaller scale, and rounds the quotient to 9 decimals, where PostgreSQL's
 * numeric keeps each value's digits. Each branch goes through cot_widen,
 * which makes a numeric DECIMAL(38,20) (an operand of more than 18 digits
 * before the point is 22003 there, never rounded), chosen by its witness;
 * a branch whose type is not certain is left as it is.
 */
export function widenedBranches(w: Walker, node: Node): void {
  if (!w.expressions) return;
  if (node.name !== undefined && node.kind !== 'AEXPR_NULLIF') return;
  const values = branchesOf(node).filter((b): b is Node => b !== undefined);
  if (!values.some(quotientLike)) {
    if (node.kind !== 'AEXPR_NULLIF') scaledBranches(w, values);
    return;
  }
  for (const branch of values) {
    const witness = typeWitness(branch);
    const span = branchSpan(w, branch);
    if (witness === null || span === null) continue;
    w.insertBefore(span.start, `${PG_SCHEMA}.cot_widen(`);
    w.insertAfter(span.end, `, ${witness})`);
  }
}

/** Aggregates a witness stands in for (type-witness.ts): a branch holding one is in an aggregate's query. */
const WITNESSED_AGGREGATES = new Set(['count', 'sum', 'avg', 'min', 'max', 'any_value']);

/** What a branch holds that cannot be copied into the type its siblings share: a subquery or a window function. */
function copyable(branch: Node): { readonly ok: boolean; readonly aggregate: boolean } {
  let ok = true;
  let aggregate = false;
  const visit = (v: unknown): void => {
    if (!ok || v === null || typeof v !== 'object') return;
    if (Array.isArray(v)) {
      v.forEach(visit);
      return;
    }
    const n = v as Node;
    if (n.SubLink !== undefined) ok = false;
    const call = n.FuncCall as Node | undefined;
    if (call !== undefined) {
      if (call.over !== undefined) ok = false;
      else if (WITNESSED_AGGREGATES.has(strings(call.funcname).at(-1) ?? '')) aggregate = true;
    }
    Object.values(n).forEach(visit);
  };
  visit(branch);
  return { ok, aggregate };
}

/**
 * CASE, COALESCE, GREATEST and LEAST of numerics with different scales:
 * DuckDB gives DECIMAL(38,9) and DECIMAL(38,3) (a sum of numeric(12,3))
 * together DECIMAL(38,3), and so rounds the other branch to 3 decimals, as
 * it keeps the digits before the point and caps the width at 38. A sum of
 * two DECIMALs keeps the larger scale instead (an overflow is 22003), so
 * each numeric branch gets a zero of the sum of all the branches' types
 * added (cot_scaled; the sum is in a CASE WHEN false, never evaluated), and
 * the branches then share the larger scale. The branches' witnesses stand in
 * for them in the sum, each aggregate's in any_value, as a witness names the
 * aggregate's columns bare. Nothing is done when a branch has a subquery or
 * a window function (the sum would copy it) or a type that is not certain,
 * when at most one branch is other than an integer's, a string's or a NULL
 * literal, or inside an avg() computed from copies of its argument
 * (exactAverage), where an edit would make it a double's.
 */
function scaledBranches(w: Walker, values: readonly Node[]): void {
  // An integer, a string or a NULL has no scale to lose (COALESCE(sum(x), 0) is the common case): two other branches
  // are needed. A number with a point counts: DuckDB gives -0.001 beside a sum of integers' DECIMAL(38,0) that scale.
  const scaled = (v: Node): boolean => {
    const c = v.A_Const as Node | undefined;
    return c === undefined || ((c.fval as { fval?: string } | undefined)?.fval ?? '').includes('.');
  };
  if (values.filter(scaled).length < 2) return;
  const first = w.leftmost(values[0]);
  const at = first === null ? undefined : w.tokens[first]?.start;
  if (at === undefined || w.copiedArguments.some((a) => at >= a.from && at < a.to)) return;
  const parts: Array<{ span: { start: number; end: number }; witness: string; aggregate: boolean }> = [];
  for (const branch of values) {
    const witness = typeWitness(branch);
    const { ok, aggregate } = copyable(branch);
    const span = branchSpan(w, branch);
    if (witness === null || !ok || span === null) return;
    parts.push({ span, witness, aggregate });
  }
  const shared = parts.map((p) => `${PG_SCHEMA}.cot_scale_of(${p.aggregate ? `any_value(${p.witness})` : p.witness}, ${p.witness})`).join(' + ');
  for (const { span, witness } of parts) {
    w.insertBefore(span.start, `${PG_SCHEMA}.cot_scaled(`);
    w.insertAfter(span.end, `, ${shared}, ${witness})`);
  }
}
