import { quoteIdentifier, quoteLiteral } from '../../../sql/identifiers.js';
import { exactNumericSql, numericLiteralType, plainNumeric, UNCONSTRAINED_NUMERIC } from '../../../sql/numeric.js';
import { strings } from '../../../sql/pg-tree.js';
import { PG_SCHEMA } from './catalog-sql.js';

/**
 * A type witness: an expression with the DuckDB type that a client's
 * expression will have once rewritten, but none of its aggregates.
 *
 * PostgreSQL's numeric division and avg() return numeric, DuckDB's return
 * double; sum(int4) returns int8 in PostgreSQL and int128 in DuckDB. Which
 * answer is right depends on the operands' types, which only the engine
 * knows. DuckDB picks a macro's overload by the types of its arguments, but
 * not when an argument is an aggregate or a window function (it cannot type
 * those while expanding the macro), so the rewrite passes the macro a
 * witness of each operand beside the operand itself: the overload is chosen
 * on the witness, and the body uses the operand. A witness is never
 * evaluated: no overload's body names it.
 *
 * Only the expressions whose type is certain are witnessed (columns,
 * literals, casts to built-in types, arithmetic, CASE, the common
 * aggregates and window functions); anything else gives null, and the
 * expression keeps DuckDB's types.
 */

type Node = Record<string, unknown>;

/** PostgreSQL's type names, as the rewrite spells them for DuckDB. */
const CAST_TYPES: Readonly<Record<string, string>> = {
  int2: 'SMALLINT',
  smallint: 'SMALLINT',
  int4: 'INTEGER',
  int: 'INTEGER',
  integer: 'INTEGER',
  int8: 'BIGINT',
  bigint: 'BIGINT',
  float8: 'DOUBLE',
  float4: 'FLOAT',
  real: 'FLOAT',
  text: 'VARCHAR',
  varchar: 'VARCHAR',
  bool: 'BOOLEAN',
  date: 'DATE',
  timestamp: 'TIMESTAMP',
  timestamptz: 'TIMESTAMPTZ',
  interval: 'INTERVAL',
};

/** Aggregates and window functions whose result has their argument's type. */
const SAME_TYPE_AGGREGATES = new Set(['min', 'max', 'first_value', 'last_value', 'lag', 'lead', 'nth_value', 'any_value']);

/** Window functions that count: bigint. */
const COUNTING_FUNCTIONS = new Set(['count', 'row_number', 'rank', 'dense_rank']);

/** Functions whose result is integer in PostgreSQL and bigint in DuckDB (rewrite/result-types.ts casts them). */
export const INTEGER_FUNCTIONS = new Set([
  'length',
  'char_length',
  'character_length',
  'octet_length',
  'bit_length',
  'strpos',
  'position',
  'array_length',
  'array_position',
  'cardinality',
  'jsonb_array_length',
  'json_array_length',
  'ascii',
  'ntile',
]);

/** Functions whose result is text, whatever their arguments (concat, replace ...). */
const TEXT_FUNCTIONS = new Set([
  'replace',
  'lower',
  'upper',
  'initcap',
  'trim',
  'btrim',
  'ltrim',
  'rtrim',
  'substr',
  'left',
  'right',
  'lpad',
  'rpad',
  'concat',
  'concat_ws',
  'repeat',
  'reverse',
  'md5',
  'split_part',
  'translate',
  'quote_ident',
  'quote_literal',
  'regexp_replace',
]);

/** Scalar functions whose result has their first argument's type. */
const SAME_TYPE_FUNCTIONS = new Set(['abs', 'round', 'trunc', 'ceil', 'ceiling', 'floor']);

// Typed ones, not NULLs: DuckDB folds arithmetic on a NULL into an untyped NULL.
/** System columns the rewrite replaces (pg_dump's tableoid): a witness could not name them. */
const SYSTEM_COLUMNS = new Set(['tableoid', 'ctid', 'xmin', 'xmax', 'cmin', 'cmax']);

const BIGINT_ONE = 'CAST(1 AS BIGINT)';

function constant(c: Node): string | null {
  if (c.isnull === true) return 'NULL';
  const ival = c.ival as { ival?: number } | undefined;
  if (ival !== undefined) return String(ival.ival ?? 0);
  const fval = (c.fval as { fval?: string } | undefined)?.fval;
  if (fval !== undefined) return /^[0-9.eE+-]+$/.test(fval) ? exactNumericSql(fval) : null;
  const sval = (c.sval as { sval?: string } | undefined)?.sval;
  if (sval !== undefined) return quoteLiteral(sval);
  const boolval = c.boolval as { boolval?: boolean } | undefined;
  if (boolval !== undefined) return boolval.boolval === true ? 'true' : 'false';
  return null;
}

/** A constant's text when it is a number or a string, as a cast to numeric reads it. */
function constantText(c: Node | undefined): string | undefined {
  if (c === undefined) return undefined;
  const ival = c.ival as { ival?: number } | undefined;
  if (ival !== undefined) return String(ival.ival ?? 0);
  return (c.fval as { fval?: string } | undefined)?.fval ?? (c.sval as { sval?: string } | undefined)?.sval;
}

/** A value every cast to `type` reads (castType's types). */
function castSample(type: string): string {
  if (type === 'BOOLEAN') return 'true';
  if (type === 'VARCHAR') return "'x'";
  if (type === 'INTERVAL') return "'1 day'";
  if (type === 'DATE' || type.startsWith('TIMESTAMP')) return "'2000-01-01'";
  return '0';
}

function castType(typeName: Node | undefined): string | null {
  if (typeName === undefined || typeName.arrayBounds !== undefined) return null;
  const name = strings(typeName.names).at(-1);
  if (name === 'numeric' || name === 'decimal') {
    const mods = ((typeName.typmods as Node[] | undefined) ?? []).map(
      (m) => ((m.A_Const as Node | undefined)?.ival as { ival?: number } | undefined)?.ival ?? 0,
    );
    if (mods.length === 0) return UNCONSTRAINED_NUMERIC;
    return `DECIMAL(${mods[0]},${mods[1] ?? 0})`;
  }
  return name === undefined ? null : (CAST_TYPES[name] ?? null);
}

/**
 * The type of a numeric shown with k decimals: DECIMAL(38, k), or DECIMAL(37, k) from k = 9 on, as DECIMAL(38,
 * 9 and more) is numeric whose display scale is not known (sql/numeric.ts), printed without trailing zeros.
 */
export function paddedDecimal(k: number): string {
  return `DECIMAL(${k < 9 ? 38 : 37},${k})`;
}

/** Fields below the second, read as microseconds (rewrite/result-types.ts): the factor to numeric (extract) and the divisor to double (date_part). */
export const SUBSECOND_FIELDS: Readonly<Record<string, { readonly numeric: string; readonly divisor: number }>> = Object.fromEntries([
  ...['second', 'seconds', 'sec', 'secs', 's'].map((f) => [f, { numeric: '0.000001', divisor: 1_000_000 }]),
  ...['millisecond', 'milliseconds', 'ms', 'msec', 'msecs', 'mseconds'].map((f) => [f, { numeric: '0.001', divisor: 1_000 }]),
]);

/** extract's type as rewritten: a sub-second field at its factor's scale, the epoch rounded to the microsecond. */
function extractType(field: string | undefined): string {
  const f = field?.toLowerCase() ?? '';
  const scale = f === 'epoch' ? 6 : (SUBSECOND_FIELDS[f]?.numeric.length ?? 2) - 2;
  return scale > 0 ? `DECIMAL(38,${scale})` : UNCONSTRAINED_NUMERIC;
}

function call(node: Node): string | null {
  const parts = strings(node.funcname);
  if (parts.length > 2 || (parts.length === 2 && parts[0] !== 'pg_catalog')) return null;
  const fn = parts.at(-1) ?? '';
  const args = (node.args as Node[] | undefined) ?? [];
  const first = args[0] === undefined ? null : typeWitness(args[0]);
  if (COUNTING_FUNCTIONS.has(fn)) return BIGINT_ONE;
  if (fn === 'sum') return first === null ? null : `${PG_SCHEMA}.cot_sum_witness(${first})`;
  if (fn === 'avg') return first === null ? null : `${PG_SCHEMA}.cot_avg_witness(${first})`;
  if (fn === 'percent_rank' || fn === 'cume_dist') return 'CAST(1 AS DOUBLE)';
  if (fn === 'ntile') return 'CAST(1 AS INTEGER)';
  if (SAME_TYPE_AGGREGATES.has(fn)) return first;
  // A scalar function in an aggregate's place would be one of its own: only plain calls.
  if (node.over !== undefined || node.agg_filter !== undefined || node.agg_star === true || node.agg_distinct === true) return null;
  // round(x, k) and trunc(x, k) of a constant k are cast to k decimals (rewrite/result-types.ts, paddedScale).
  const places = (args[1]?.A_Const as Node | undefined)?.ival as { ival?: number } | undefined;
  const k = places?.ival ?? 0;
  if ((fn === 'round' || fn === 'trunc') && args.length === 2 && first !== null && places !== undefined && k >= 0 && k <= 36) {
    return `CAST(1 AS ${paddedDecimal(k)})`;
  }
  // round(x, n) of an integer is numeric once rewritten (rewrite/result-types.ts).
  if (fn === 'round' && args.length === 2 && first !== null) return `${PG_SCHEMA}.cot_round_to(${first}, 0, ${first})`;
  // floor and ceil of an integer are double precision (as PostgreSQL's, whose integer goes to their double
  // overload), and round(x) of one is once rewritten: DuckDB's own calls on the witness give those types.
  if ((fn === 'floor' || fn === 'ceil' || fn === 'ceiling') && args.length === 1 && first !== null) {
    return `${PG_SCHEMA}.cot_${fn === 'floor' ? 'floor' : 'ceil'}(${first}, ${first})`;
  }
  if (fn === 'round' && args.length === 1 && first !== null) return `${PG_SCHEMA}.cot_round(${first}, ${first})`;
  if (SAME_TYPE_FUNCTIONS.has(fn)) return first;
  if (fn === 'sqrt' && first !== null) return `${PG_SCHEMA}.cot_sqrt(${first}, ${first})`;
  if (INTEGER_FUNCTIONS.has(fn)) return 'CAST(1 AS INTEGER)';
  if (TEXT_FUNCTIONS.has(fn)) return "CAST('x' AS VARCHAR)";
  // rewrite/result-types.ts makes extract numeric and date_part double precision, as PostgreSQL types them.
  if (fn === 'extract') return `CAST(1 AS ${extractType(((args[0]?.A_Const as Node | undefined)?.sval as { sval?: string } | undefined)?.sval)})`;
  if (fn === 'date_part') return 'CAST(1 AS DOUBLE)';
  // date_trunc as rewritten (rewrite/result-types.ts): timestamptz of a date or a timestamptz, timestamp of a timestamp.
  const second = args[1] === undefined ? null : typeWitness(args[1]);
  if (fn === 'date_trunc' && args.length === 2 && second !== null) return `${PG_SCHEMA}.cot_date_trunc('day', ${second}, ${second})`;
  return null;
}

function list(nodes: unknown): string[] | null {
  const out: string[] = [];
  for (const n of (nodes as Node[] | undefined) ?? []) {
    const w = typeWitness(n);
    if (w === null) return null;
    out.push(w);
  }
  return out;
}

/** The witness of an expression (see above), or null when its type is not certain. */
export function typeWitness(node: Node | undefined): string | null {
  if (node === undefined) return null;
  const [kind, value] = Object.entries(node)[0] ?? [];
  const n = (value ?? {}) as Node;
  switch (kind) {
    case 'ColumnRef': {
      const fields = (n.fields as Node[] | undefined) ?? [];
      const names = fields.map((f) => (f.String as { sval?: string } | undefined)?.sval);
      if (names.length === 0 || names.length > 2 || names.some((x) => x === undefined || SYSTEM_COLUMNS.has(x))) return null;
      return names.map((x) => quoteIdentifier(x as string)).join('.');
    }
    case 'A_Const':
      return constant(n);
    case 'TypeCast': {
      const type = castType(n.typeName as Node | undefined);
      if (type === null) return null;
      // A cast to a type of its own has that type whatever its operand's: a value of it stands in for an operand
      // whose type is not certain ((j ->> 'b')::int4). Not a NULL, which arithmetic would fold into an untyped one.
      const arg = typeWitness(n.arg as Node | undefined) ?? (type === UNCONSTRAINED_NUMERIC ? null : `CAST(${castSample(type)} AS ${type})`);
      if (arg === null) return null;
      // As rewritten (rewrite/numeric.ts, numericTextCast): a double's numeric has a quotient's scale.
      const expression = n.arg as Node | undefined;
      // A constant's numeric has the literal's own digits (rewrite/numeric.ts, numericLiteralCast).
      const literal = type === UNCONSTRAINED_NUMERIC ? constantText(expression?.A_Const as Node | undefined) : undefined;
      const literalType = literal === undefined ? null : numericLiteralType(literal);
      if (literal !== undefined && literalType !== null) return `CAST(${quoteLiteral(plainNumeric(literal))} AS ${literalType})`;
      if (type === UNCONSTRAINED_NUMERIC && expression?.A_Const === undefined && expression?.ParamRef === undefined) {
        return `${PG_SCHEMA}.cot_numeric_cast(${arg}, ${arg})`;
      }
      return `CAST(${arg} AS ${type})`;
    }
    case 'A_Expr': {
      if (n.kind === 'AEXPR_NULLIF') return typeWitness(n.lexpr as Node | undefined);
      const op = strings(n.name);
      if (n.kind !== 'AEXPR_OP' || op.length !== 1) return null;
      const right = typeWitness(n.rexpr as Node | undefined);
      if (right === null) return null;
      if (n.lexpr === undefined) return op[0] === '-' || op[0] === '+' ? `(${op[0]}${right})` : null;
      const left = typeWitness(n.lexpr as Node | undefined);
      if (left === null) return null;
      // Division and subtraction are rewritten with their macros, whose result types the witness must have.
      if (op[0] === '/') return `${PG_SCHEMA}.cot_div(${left}, ${right}, ${left}, ${right})`;
      if (op[0] === '-') return `${PG_SCHEMA}.cot_minus(${left}, ${right}, ${left}, ${right})`;
      if (op[0] === '%') return `${PG_SCHEMA}.cot_mod(${left}, ${right}, ${left}, ${right})`;
      return op[0] === '+' || op[0] === '*' ? `(${left} ${op[0]} ${right})` : null;
    }
    case 'FuncCall':
      return call(n);
    case 'A_Indirection': {
      // a[2]: an element of the array, of the array witness's element type.
      const indices = (n.indirection as Node[] | undefined) ?? [];
      const base = typeWitness(n.arg as Node | undefined);
      const single = indices.length === 1 && (indices[0]?.A_Indices as Node | undefined)?.is_slice !== true;
      return base === null || !single ? null : `(${base})[1]`;
    }
    case 'CaseExpr': {
      const results = list(((n.args as Node[] | undefined) ?? []).map((w) => (w.CaseWhen as Node | undefined)?.result));
      const otherwise = n.defresult === undefined ? null : typeWitness(n.defresult as Node);
      if (results === null || (n.defresult !== undefined && otherwise === null)) return null;
      return `CASE ${results.map((r) => `WHEN true THEN ${r}`).join(' ')}${otherwise === null ? '' : ` ELSE ${otherwise}`} END`;
    }
    case 'CoalesceExpr': {
      const args = list(n.args);
      return args === null ? null : `coalesce(${args.join(', ')})`;
    }
    case 'MinMaxExpr': {
      const args = list(n.args);
      return args === null ? null : `${n.op === 'IS_LEAST' ? 'least' : 'greatest'}(${args.join(', ')})`;
    }
    default:
      return null;
  }
}
