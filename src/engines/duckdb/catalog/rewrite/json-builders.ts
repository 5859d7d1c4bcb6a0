import { quoteLiteral } from '../../../../sql/identifiers.js';
import { PG_SCHEMA } from '../pg-catalog.js';
import { callOf, type Node, spelledName, type Walker, wordOf } from './walker.js';

/**
 * PostgreSQL's JSON builders as text that DuckDB concatenates. DuckDB's own
 * (json_object, json_array, to_json of a list) parse every JSON value they
 * are given again and keep its numbers as doubles, so
 * `jsonb_build_object('k', '{"n": 123456789.123456789}'::jsonb)` lost digits
 * ("123456789.12345679") and `'2.50'` became `2.5`; and they write a DECIMAL
 * as a double (`1.50` as `1.5`). Each value here is written by
 * cot_json_text, which keeps a JSON value's text and a number's digits as
 * they are, and the builder joins the texts with json's spacing (`{"a" : 1}`,
 * as json_build_object writes it; jsonb's is printed on the way out).
 */

interface Builder {
  readonly open: string;
  readonly close: string;
  /** Whether the arguments alternate key, value (objects). */
  readonly pairs: boolean;
  /** Between a key and its value. */
  readonly colon: string;
}

const JSON_OBJECT: Builder = { open: '{', close: '}', pairs: true, colon: ' : ' };
const JSONB_OBJECT: Builder = { open: '{', close: '}', pairs: true, colon: ': ' };
const ARRAY: Builder = { open: '[', close: ']', pairs: false, colon: '' };

const BUILDERS: Readonly<Record<string, Builder>> = {
  json_build_object: JSON_OBJECT,
  jsonb_build_object: JSONB_OBJECT,
  json_build_array: ARRAY,
  jsonb_build_array: ARRAY,
};

/** Aggregates, and how each writes its rows: json_object_agg puts spaces inside its braces (`{ "a" : 1 }`). */
const AGGREGATES: Readonly<Record<string, Builder>> = {
  json_agg: ARRAY,
  jsonb_agg: ARRAY,
  json_object_agg: { open: '{ ', close: ' }', pairs: true, colon: ' : ' },
  jsonb_object_agg: JSONB_OBJECT,
};

const SCALARS = new Set(['to_json', 'to_jsonb']);

/** Every function rewritten here: the rewrite's triggers. */
export const JSON_BUILDERS: readonly string[] = [...Object.keys(BUILDERS), ...Object.keys(AGGREGATES), ...SCALARS];

/** The token span of each argument of a call whose `(` is at `open`, or null (a named or VARIADIC argument). */
function argumentSpans(w: Walker, args: readonly Node[], open: number): Array<{ readonly start: number; readonly end: number }> | null {
  const out: Array<{ readonly start: number; readonly end: number }> = [];
  let from = open + 1;
  for (const arg of args) {
    if (arg.NamedArgExpr !== undefined || wordOf(w.tokens[from]) === 'variadic') return null;
    const end = w.exprEnd(arg, from);
    if (end === null) return null;
    out.push({ start: from, end });
    from = end + 2;
  }
  return out;
}

/** `t.*`: a row, which a macro cannot take. */
const isStar = (arg: Node): boolean => (((arg.ColumnRef as Node | undefined)?.fields as Node[] | undefined) ?? []).some((f) => f.A_Star !== undefined);

const text = (): string => `${PG_SCHEMA}.cot_json_text(`;
const key = (): string => `${PG_SCHEMA}.cot_json_key(`;

/** `jsonb_build_object(k, v, ...)`, `jsonb_build_array(...)`, `to_jsonb(x)` and the json twins; the call's other rules are not asked. */
export function jsonBuilder(w: Walker, node: Node): boolean {
  const call = callOf(w, node);
  const name = call === null ? null : spelledName(w, call);
  if (call === null || name === null || !w.expressions || !(call.parts.length === 1 || call.parts[0] === 'pg_catalog')) return false;
  const builder = BUILDERS[call.fn];
  if (builder === undefined && !SCALARS.has(call.fn)) return false;
  const open = name.next;
  const close = w.tokens[open]?.text === '(' ? w.closing(open) : null;
  const args = (node.args as Node[] | undefined) ?? [];
  const spans = close === null ? null : argumentSpans(w, args, open);
  if (close === null || spans === null || node.over !== undefined) return false;
  if (builder === undefined) {
    // to_jsonb(NULL) is NULL: the function is strict.
    if (spans.length !== 1) return false;
    w.replaceTokens(call.i, open + 1, `CAST(${text()}`);
    w.replaceTokens(close, close + 1, ') AS JSON)');
    return true;
  }
  if (builder.pairs && spans.length % 2 === 1) return false; // PostgreSQL's error for an odd count, from DuckDB's own
  if (spans.length === 0) {
    w.replaceTokens(call.i, close + 1, `CAST('${builder.open}${builder.close}' AS JSON)`);
    return true;
  }
  w.replaceTokens(call.i, open + 1, `CAST(concat('${builder.open}', `);
  spans.forEach((span, k) => {
    const isKey = builder.pairs && k % 2 === 0;
    const constant = ((args[k]?.A_Const as Node | undefined)?.sval as { sval?: string } | undefined)?.sval;
    if (isKey && constant !== undefined && span.end === span.start) {
      // A key spelled as a string: its JSON text, written once here rather than in every row.
      w.replaceTokens(span.start, span.end + 1, quoteLiteral(JSON.stringify(constant)));
    } else {
      w.insertBefore(span.start, isKey ? key() : `coalesce(${text()}`);
      w.insertAfter(span.end, isKey ? `, 'argument ${k + 1}: key must not be null')` : `), 'null')`);
    }
    const comma = span.end + 1;
    if (k < spans.length - 1) w.replaceTokens(comma, comma + 1, isKey ? `, '${builder.colon}', ` : `, ', ', `);
  });
  w.replaceTokens(close, close + 1, `, '${builder.close}') AS JSON)`);
  return true;
}

/** `jsonb_agg(x ORDER BY y) FILTER (...) OVER (...)`, `jsonb_object_agg(k, v ...)` and the json twins; the call's other rules are not asked. */
export function jsonTextAggregate(w: Walker, node: Node): boolean {
  const call = callOf(w, node);
  const name = call === null ? null : spelledName(w, call);
  if (call === null || name === null || !w.expressions || !(call.parts.length === 1 || call.parts[0] === 'pg_catalog')) return false;
  const builder = AGGREGATES[call.fn];
  if (builder === undefined) return false;
  const open = name.next;
  const close = w.tokens[open]?.text === '(' ? w.closing(open) : null;
  const args = (node.args as Node[] | undefined) ?? [];
  if (args.some(isStar)) return false;
  const distinct = node.agg_distinct === true ? 1 : 0;
  if (distinct === 1 && (builder.pairs || wordOf(w.tokens[open + 1]) !== 'distinct')) return false;
  const spans = close === null ? null : argumentSpans(w, args, open + distinct);
  const end = close === null ? null : w.callEnd(close);
  if (close === null || end === null || spans === null || spans.length !== (builder.pairs ? 2 : 1)) return false;
  const [first, second] = spans;
  if (first === undefined) return false;
  if (distinct === 1) {
    // DISTINCT compares values (DuckDB's list), in their order as PostgreSQL's sort for DISTINCT leaves them;
    // with FILTER or OVER, DuckDB's own aggregate.
    if (end !== close) return false;
    w.replaceTokens(call.i, open + 1, `CAST(('${builder.open}' || array_to_string(list_transform(list(`);
    const ordered = node.agg_order !== undefined;
    const value = w.text.slice((w.tokens[first.start] as { start: number }).start, (w.tokens[first.end] as { end: number }).end);
    if (!ordered) w.insertAfter(first.end, ` ORDER BY ${value}`);
    w.replaceTokens(close, close + 1, `), cot_e -> coalesce(${text()}cot_e), 'null')), ', ') || '${builder.close}') AS JSON)`);
    return true;
  }
  w.replaceTokens(call.i, open + 1, `CAST(('${builder.open}' || string_agg(`);
  if (second === undefined) {
    w.insertBefore(first.start, `coalesce(${text()}`);
    w.insertAfter(first.end, `), 'null'), ', '`);
  } else {
    w.insertBefore(first.start, `concat(${key()}`);
    w.insertAfter(first.end, `, 'field name must not be null')`);
    w.replaceTokens(first.end + 1, first.end + 2, `, '${builder.colon}', `);
    w.insertBefore(second.start, `coalesce(${text()}`);
    w.insertAfter(second.end, `), 'null')), ', '`);
  }
  w.insertAfter(end, ` || '${builder.close}') AS JSON)`);
  return true;
}
