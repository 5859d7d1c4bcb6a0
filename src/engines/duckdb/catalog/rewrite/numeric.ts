import { quoteLiteral } from '../../../../sql/identifiers.js';
import { exactNumericSql, numericLiteralType, plainNumeric, readAsDouble } from '../../../../sql/numeric.js';
import { strings } from '../../../../sql/pg-tree.js';
import type { Node, Walker } from './walker.js';

/**
 * Numeric literals held exactly. PostgreSQL's numeric keeps every digit of
 * a literal; DuckDB reads `1e-20` and a literal of more than 38 digits as a
 * double, and a cast to unconstrained numeric (DECIMAL(38,9) here) rounds
 * past the ninth decimal. A literal cast to numeric gets a DECIMAL of its
 * own scale, and a literal DuckDB would read as a double is read from its
 * text, so the digits are the client's or the cast fails out loud.
 */

/** The literal's text and its token span (a negative constant starts at its minus sign), or null. */
function literalSpan(w: Walker, constant: Node | undefined): { readonly text: string; readonly from: number; readonly to: number } | null {
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
  if (typeof constant?.location === 'number') w.castConstants.add(constant.location);
  const typeName = node.typeName as Node | undefined;
  const names = strings(typeName?.names);
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

/** A bare numeric constant DuckDB would read as a double (`1e-20`, 40 digits): numeric, as PostgreSQL reads it. */
export function exactNumericConstant(w: Walker, node: Node): void {
  if (node.fval === undefined || w.castConstants.has(node.location as number)) return;
  const literal = literalSpan(w, node);
  if (literal === null || w.tokens[literal.to - 1]?.kind !== 'number' || !readAsDouble(literal.text)) return;
  w.replaceTokens(literal.from, literal.to, exactNumericSql(literal.text));
}
