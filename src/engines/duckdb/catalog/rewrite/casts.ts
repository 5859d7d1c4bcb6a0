import { parseArrayLiteral } from '../../../../sql/array-literal.js';
import { quoteLiteral } from '../../../../sql/identifiers.js';
import type { Token } from '../../../../sql/lexer.js';
import { strings } from '../../../../sql/pg-tree.js';
import { PG_SCHEMA } from '../pg-catalog.js';
import { isArrayOperand } from './arrays.js';
import { isJsonbOperand } from './jsonb.js';
import { pgArrayToList } from './literals.js';
import { REG_TYPES } from './types.js';
import { typeWitness } from '../type-witness.js';
import { type Node, operatorOf, type Walker, wordOf } from './walker.js';

/**
 * Casts to PostgreSQL's reg* types (`'pg_class'::regclass`, `oid::regtype`,
 * `'{int,int8}'::regtype[]`), which look names up in the catalog: each
 * becomes a call of the catalog's lookup macro, from a name to an OID or
 * from an OID to a name, and a reg* value shown as text is the name.
 */

/** Functions whose result is text: a cast of their result to a reg* type looks a name up. */
const TEXT_FUNCTIONS = new Set(['pg_get_serial_sequence', 'quote_ident', 'format', 'concat', 'lower', 'upper', 'current_schema']);

/** `SELECT 'int8'::regtype`: a reg* value of a name as a result is shown as the object's name. */
export function regTargets(w: Walker, select: Node): void {
  for (const target of (select.targetList as Node[] | undefined) ?? []) {
    const val = (target.ResTarget as Node | undefined)?.val as Node | undefined;
    const cast = val?.TypeCast as Node | undefined;
    if (cast === undefined || regNameCast(val) === null) continue;
    const typeAt = w.index((cast.typeName as Node | undefined)?.location);
    const typeEnd = typeAt === null ? null : w.typeNameEnd(typeAt);
    if (typeEnd === null || w.tokens[w.index(cast.location) ?? -1]?.text !== '::') continue;
    regNameShown(w, val as Node, (w.tokens[typeEnd - 1] as Token).end);
  }
}

/** The reg* type a cast names an object of by its name ('bool'::regtype), or null. */
function regNameCast(node: Node | undefined): string | null {
  const cast = node?.TypeCast as Node | undefined;
  const names = strings((cast?.typeName as Node | undefined)?.names);
  const type = names[names.length - 1];
  const arg = cast?.arg as Node | undefined;
  if (type === undefined || !REG_TYPES.has(type) || arg === undefined) return null;
  return isNameExpression(arg) ? type : null;
}

/**
 * A reg* value shown as text is the object's name: `'bool'::regtype::text`
 * (TypeORM) and `SELECT 'int8'::regtype` read `boolean` and `bigint`,
 * where the catalog's functions hold the OID.
 */
function regNameShown(w: Walker, expr: Node | undefined, at: number): void {
  const type = regNameCast(expr);
  const cast = expr?.TypeCast as Node | undefined;
  if (type === null || cast === undefined) return;
  const castAt = w.index(cast.location);
  const start = castAt === null ? null : w.argStart(cast.arg as Node | undefined, castAt);
  if (start === null) return;
  w.insertBefore(start, `${PG_SCHEMA}.cot_${type === 'regprocedure' ? 'regproc' : type}_out(`);
  w.edit({ start: at, end: at, text: ')' });
}

/**
 * `'nextval(''' || pg_get_serial_sequence(t, c)::regclass || '''::regclass)'` (drizzle-kit's test for a serial
 * column): a reg* value concatenated to text is its name, as PostgreSQL prints it.
 */
export function regConcat(w: Walker, node: Node): void {
  if (strings(node.name as Node[] | undefined).at(-1) !== '||') return;
  for (const side of [node.lexpr, node.rexpr] as Array<Node | undefined>) {
    const cast = side?.TypeCast as Node | undefined;
    if (cast === undefined || regNameCast(side) === null) continue;
    const typeAt = w.index((cast.typeName as Node | undefined)?.location);
    const typeEnd = typeAt === null ? null : w.typeNameEnd(typeAt);
    if (typeEnd === null || w.tokens[w.index(cast.location) ?? -1]?.text !== '::') continue;
    regNameShown(w, side, (w.tokens[typeEnd - 1] as Token).end);
  }
}

/**
 * `'n = ' || x`: PostgreSQL prints x by its output function, DuckDB by its
 * cast to VARCHAR, which writes a double 2.0 (PostgreSQL 2) and nan, and a
 * numeric without a precision with nine decimals. Beside an operand that is
 * text by its spelling, each operand whose type is certain goes through
 * cot_concat_operand, chosen by its witness
 * (engines/duckdb/catalog/type-witness.ts); arrays and jsonb have rules of
 * their own before this one.
 */
export function textConcat(w: Walker, select: Node): void {
  if (!w.expressions) return;
  for (const target of (select.targetList as Node[] | undefined) ?? []) concatChain(w, (target.ResTarget as Node | undefined)?.val as Node | undefined);
}

/**
 * The operands of a `||` chain of the query's own select list, and of the
 * chains inside it: only there, as an overloaded macro inside another
 * macro's argument (a reg* cast, a catalog function) cannot be chosen.
 */
function concatChain(w: Walker, e: Node | undefined): void {
  const node = e?.A_Expr as Node | undefined;
  if (node === undefined) return;
  const o = operatorOf(w, node);
  if (o === null || o.op !== '||' || o.parts.length !== 1 || node.kind !== 'AEXPR_OP' || w.tokens[o.i]?.text !== '||') return;
  const lexpr = node.lexpr as Node | undefined;
  const rexpr = node.rexpr as Node | undefined;
  concatChain(w, lexpr);
  concatChain(w, rexpr);
  // Beside an array, || is the array's (rewrite/arrays.ts); beside jsonb, jsonb's (rewrite/jsonb.ts).
  if (isArrayOperand(lexpr) || isArrayOperand(rexpr) || isJsonbOperand(w, lexpr) || isJsonbOperand(w, rexpr)) return;
  if (!isTextBySpelling(lexpr) && !isTextBySpelling(rexpr)) {
    concatPair(w, node, o.i);
    return;
  }
  const spans: Array<[Node | undefined, number | null, number | null]> = [
    [lexpr, w.argStart(lexpr, o.i), o.i - 1],
    [rexpr, o.i + 1, w.exprEnd(rexpr, o.i + 1)],
  ];
  for (const [operand, start, end] of spans) {
    if (operand === undefined || start === null || end === null || operand.A_Const !== undefined || operand.ParamRef !== undefined) continue;
    // A cast of a constant is no macro: it may be wrapped ('' || 'Infinity'::float8 is Infinity, DuckDB's cast writes inf).
    const castConstant = (operand.TypeCast as Node | undefined)?.arg as Node | undefined;
    if (operand.A_Expr !== undefined || (operand.TypeCast !== undefined && castConstant?.A_Const === undefined)) continue;
    const witness = typeWitness(operand);
    if (witness === null) continue;
    w.insertBefore(start, `${PG_SCHEMA}.cot_concat_operand(`);
    w.insertAfter(end, `, ${witness})`);
  }
}

/**
 * `s || n` of two columns (or other values of certain type, neither text by
 * its spelling): which is text only the engine knows, so the pair goes to
 * cot_concat_pair with both witnesses, which prints the other as PostgreSQL
 * does when one is text. Not with a constant (a NULL's witness fits every
 * overload) nor an operator (an overloaded macro in an argument).
 */
function concatPair(w: Walker, node: Node, op: number): void {
  const lexpr = node.lexpr as Node | undefined;
  const rexpr = node.rexpr as Node | undefined;
  const plain = (e: Node | undefined): boolean =>
    e !== undefined && e.A_Const === undefined && e.ParamRef === undefined && e.A_Expr === undefined && e.TypeCast === undefined;
  if (!plain(lexpr) || !plain(rexpr)) return;
  const wa = typeWitness(lexpr);
  const wb = typeWitness(rexpr);
  const start = w.argStart(lexpr, op);
  const end = w.exprEnd(rexpr, op + 1);
  if (wa === null || wb === null || start === null || end === null) return;
  w.insertBefore(start, `${PG_SCHEMA}.cot_concat_pair(`);
  w.replaceTokens(op, op + 1, ',');
  w.insertAfter(end, `, ${wa}, ${wb})`);
}

/** A string constant, a cast to text, or a `||` beside one of those. */
function isTextBySpelling(e: Node | undefined): boolean {
  const constant = e?.A_Const as Node | undefined;
  // '{a,b}' may be an array's literal.
  const sval = (constant?.sval as { sval?: string } | undefined)?.sval;
  if (constant !== undefined) return sval !== undefined && !sval.trimStart().startsWith('{');
  const cast = e?.TypeCast as Node | undefined;
  const type = cast?.typeName as Node | undefined;
  if (cast !== undefined) return type?.arrayBounds === undefined && ['text', 'varchar'].includes(strings(type?.names).at(-1) ?? '');
  const expr = e?.A_Expr as Node | undefined;
  return expr !== undefined && strings(expr.name).join('.') === '||' && (isTextBySpelling(expr.lexpr as Node) || isTextBySpelling(expr.rexpr as Node));
}

/** `'bool'::regtype::text`, `x::regclass::name`: a reg* value cast to text is its name. */
export function regNameAsText(w: Walker, node: Node): void {
  const type = strings((node.typeName as Node | undefined)?.names).at(-1);
  if ((type === 'varchar' || type === 'text' || type === 'name') && w.tokens[w.index(node.location) ?? -1]?.text === '::') {
    regNameShown(w, node.arg as Node, (w.tokens[w.index(node.location) as number] as Token).start);
  }
}

/** `x::regclass`: a name becomes the relation's OID, and an OID becomes its name. */
export function regCast(w: Walker, node: Node): void {
  const typeName = node.typeName as Node | undefined;
  const names = strings(typeName?.names);
  const type = names[names.length - 1];
  if (type === undefined || !REG_TYPES.has(type) || (names.length === 2 && names[0] !== 'pg_catalog')) return;
  const arg = node.arg as Node | undefined;
  if (Array.isArray(typeName?.arrayBounds)) {
    regArrayLiteral(w, node, type);
    return;
  }
  const isName = isNameExpression(arg);
  const fn = `${PG_SCHEMA}.cot_${type === 'regprocedure' ? 'regproc' : type}_${isName ? 'in' : 'out'}`;
  const castAt = w.index(node.location);
  const typeAt = w.index(typeName?.location);
  if (castAt === null || typeAt === null) return;
  const typeEnd = w.typeNameEnd(typeAt);
  if (typeEnd === null) return;
  const castToken = w.tokens[castAt] as Token;
  if (castToken.text === '::') {
    const start = w.argStart(arg, castAt);
    if (start === null) return;
    w.insertBefore(start, `${fn}(`);
    w.replaceTokens(castAt, typeEnd, ')');
  } else if (wordOf(castToken) === 'cast' && w.tokens[castAt + 1]?.text === '(' && wordOf(w.tokens[typeAt - 1]) === 'as') {
    w.replaceTokens(castAt, castAt + 2, `${fn}(`);
    const argEnd = w.tokens[typeAt - 2] as Token;
    w.edit({ start: argEnd.end, end: (w.tokens[typeEnd - 1] as Token).end, text: '' });
  }
}

/** `'{int,int8}'::regtype[]` (drizzle-kit): each name looked up, a list of OIDs. */
function regArrayLiteral(w: Walker, node: Node, type: string): void {
  const constant = (node.arg as Node | undefined)?.A_Const as Node | undefined;
  const sval = (constant?.sval as { sval?: string } | undefined)?.sval;
  const list = sval === undefined ? null : pgArrayToList(sval);
  const start = w.index(constant?.location);
  const castAt = w.index(node.location);
  const typeAt = w.index((node.typeName as Node | undefined)?.location);
  const typeEnd = typeAt === null ? null : w.typeNameEnd(typeAt);
  if (list === null || start === null || castAt === null || typeEnd === null || w.tokens[castAt]?.text !== '::') return;
  const fn = `${PG_SCHEMA}.cot_${type === 'regprocedure' ? 'regproc' : type}_in`;
  // A list of one lookup per name: DuckDB plans it in a few milliseconds, where the list made by a subquery over
  // unnest cost 60-90 ms a query (drizzle-kit sends one per table). The subquery is left for what has no names.
  const items = sval === undefined ? null : parseArrayLiteral(sval);
  if (items !== null && items.length > 0 && items.every((x) => typeof x === 'string')) {
    w.replaceTokens(start, typeEnd, `[${items.map((x) => `${fn}(${quoteLiteral(x as string)})`).join(', ')}]`);
    return;
  }
  // coalesce: a list expression, not a subquery, for = ANY(...) to read as a list.
  w.replaceTokens(start, typeEnd, `coalesce((SELECT list(${fn}(cot_n)) FROM unnest(${list}) AS cot_u(cot_n)), [])`);
}

/**
 * Whether the operand of a reg* cast names the object (a string, a
 * parameter, a cast, a concatenation, a text function); anything else is
 * its OID.
 */
function isNameExpression(arg: Node | undefined): boolean {
  if (arg === undefined) return false;
  const call = strings((arg.FuncCall as Node | undefined)?.funcname);
  const op = strings((arg.A_Expr as Node | undefined)?.name);
  return (
    (arg.A_Const as Node | undefined)?.sval !== undefined ||
    arg.ParamRef !== undefined ||
    arg.TypeCast !== undefined ||
    op[op.length - 1] === '||' ||
    TEXT_FUNCTIONS.has(call[call.length - 1] ?? '')
  );
}
