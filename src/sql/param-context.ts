import { UNCONSTRAINED_NUMERIC } from './numeric.js';
import { parsedOf, type SqlSource } from './parsed.js';
import { strings } from './pg-tree.js';

/**
 * Where PostgreSQL would type a parameter that DuckDB leaves untyped. In
 * `amount + $1` or `1 + $1` PostgreSQL gives the parameter the type of the
 * other operand (an unknown operand is assumed to be of the known one's
 * type); DuckDB finds two candidate functions and types neither. These
 * rules read the statement with PostgreSQL's parser and say, for each
 * parameter, the type the other operand has or the column it names.
 */

type Node = Record<string, unknown>;

/** A table the statement reads or writes, by the name or alias its columns may be qualified with. */
export interface RelationRef {
  readonly schema: string | null;
  readonly name: string;
  readonly alias: string | null;
}

export type ParamHint =
  /** A DuckDB type, known from the statement alone (a literal or a cast). */
  | { readonly kind: 'type'; readonly type: string }
  /** The type of a column of one of `relations`; `qualifier` is the table or alias written before it. */
  | { readonly kind: 'column'; readonly qualifier: string | null; readonly column: string; readonly array: boolean };

export interface ParamContext {
  readonly hints: ReadonlyMap<number, ParamHint>;
  readonly relations: readonly RelationRef[];
}

/** PostgreSQL type names (as the parser leaves them) and the DuckDB type a parameter of that type is given. */
const ENGINE_TYPES: Readonly<Record<string, string>> = {
  int2: 'SMALLINT',
  int4: 'INTEGER',
  int8: 'BIGINT',
  float4: 'FLOAT',
  float8: 'DOUBLE',
  numeric: UNCONSTRAINED_NUMERIC,
  text: 'VARCHAR',
  varchar: 'VARCHAR',
  bpchar: 'VARCHAR',
  bool: 'BOOLEAN',
  date: 'DATE',
  time: 'TIME',
  timestamp: 'TIMESTAMP',
  timestamptz: 'TIMESTAMPTZ',
  interval: 'INTERVAL',
  uuid: 'UUID',
  json: 'JSON',
  jsonb: 'JSON',
  bytea: 'BLOB',
};

/**
 * cotwire's own functions whose arguments have one type, as a PostgreSQL
 * function's signature types the parameters passed to it: the log's sizes
 * and leaf indexes.
 */
const FUNCTION_ARGUMENTS: Readonly<Record<string, readonly string[]>> = {
  cot_consistency: ['BIGINT', 'BIGINT'],
  cot_consistency_proof: ['BIGINT', 'BIGINT'],
  cot_inclusion_proof: ['BIGINT', 'BIGINT'],
  cot_log_root: ['BIGINT'],
};

/** Operators whose operands PostgreSQL resolves to one type when one of them is unknown. */
const SAME_TYPE_OPERATORS = new Set(['+', '-', '*', '/', '%', '=', '<>', '!=', '<', '>', '<=', '>=', '||']);

/** Numeric types by width: arithmetic on two of them has the wider type. */
const NUMERIC_RANK = ['SMALLINT', 'INTEGER', 'BIGINT', UNCONSTRAINED_NUMERIC, 'FLOAT', 'DOUBLE'];

/** The DuckDB type of a PostgreSQL TypeName node, when it is one a parameter can take. */
function typeNameType(typeName: Node | undefined): string | null {
  const names = strings(typeName?.names);
  const base = ENGINE_TYPES[names[names.length - 1] ?? ''];
  if (base === undefined || (names.length === 2 && names[0] !== 'pg_catalog') || names.length > 2) return null;
  return Array.isArray(typeName?.arrayBounds) ? `${base}[]` : base;
}

/** What an operand's type is known to be, without the catalog: a literal, a cast, or arithmetic on those. */
type Known = { readonly type: string } | { readonly column: string; readonly qualifier: string | null } | null;

function known(e: Node | undefined): Known {
  if (e === undefined) return null;
  const constant = e.A_Const as Node | undefined;
  if (constant !== undefined) {
    if (constant.ival !== undefined) return { type: 'INTEGER' };
    if (constant.fval !== undefined) {
      const f = String((constant.fval as { fval?: string }).fval ?? '');
      // An integer too wide for int4 parses as a float node: PostgreSQL calls it int8, or numeric past that.
      return { type: /^-?\d+$/.test(f) ? (f.replace('-', '').length <= 18 ? 'BIGINT' : UNCONSTRAINED_NUMERIC) : UNCONSTRAINED_NUMERIC };
    }
    if (constant.boolval !== undefined) return { type: 'BOOLEAN' };
    // An unknown literal beside an unknown parameter: PostgreSQL resolves both as text.
    if (constant.sval !== undefined) return { type: 'VARCHAR' };
    return null;
  }
  const cast = e.TypeCast as Node | undefined;
  if (cast !== undefined) {
    const type = typeNameType(cast.typeName as Node | undefined);
    return type === null ? null : { type };
  }
  const ref = e.ColumnRef as Node | undefined;
  if (ref !== undefined) {
    const fields = strings(ref.fields);
    const column = fields[fields.length - 1];
    if (column === undefined || column === '' || fields.length > 3) return null;
    return { column, qualifier: fields.length >= 2 ? (fields[fields.length - 2] ?? null) : null };
  }
  const expr = e.A_Expr as Node | undefined;
  if (expr !== undefined && expr.kind === 'AEXPR_OP') {
    const op = strings(expr.name)[0];
    if (op === undefined || !['+', '-', '*', '/', '%'].includes(op)) return null;
    const l = known(expr.lexpr as Node | undefined);
    const r = known(expr.rexpr as Node | undefined);
    // Arithmetic on a column keeps the column's type family, which is what the parameter needs.
    if (l !== null && 'column' in l && (r === null || 'type' in r)) return l;
    if (r !== null && 'column' in r && (l === null || 'type' in l)) return r;
    if (l !== null && r !== null && 'type' in l && 'type' in r) {
      const a = NUMERIC_RANK.indexOf(l.type);
      const b = NUMERIC_RANK.indexOf(r.type);
      if (a >= 0 && b >= 0) return { type: NUMERIC_RANK[Math.max(a, b)] as string };
    }
    return null;
  }
  return null;
}

function paramNumber(e: Node | undefined): number | null {
  const p = e?.ParamRef as Node | undefined;
  return typeof p?.number === 'number' ? p.number : null;
}

function hintOf(k: Known, array: boolean): ParamHint | null {
  if (k === null) return null;
  if ('type' in k) return { kind: 'type', type: array ? `${k.type}[]` : k.type };
  return { kind: 'column', qualifier: k.qualifier, column: k.column, array };
}

/**
 * generate_series(start, stop[, step]): PostgreSQL resolves an unknown
 * bound as the other bound's type (generate_series(1, $1) is of int4), and
 * an unknown step as that type, or interval beside timestamps.
 */
function seriesArguments(call: Node, note: (n: number | null, hint: ParamHint | null) => void): void {
  const args = (call.args as Node[] | undefined) ?? [];
  if (args.length < 2 || args.length > 3) return;
  const bound = [args[0], args[1]].map((a) => known(a)).find((k) => k !== null && 'type' in k) as { readonly type: string } | undefined;
  if (bound === undefined) return;
  note(paramNumber(args[0]), { kind: 'type', type: bound.type });
  note(paramNumber(args[1]), { kind: 'type', type: bound.type });
  note(paramNumber(args[2]), { kind: 'type', type: bound.type.startsWith('TIMESTAMP') ? 'INTERVAL' : bound.type });
}

/**
 * For each parameter of `sql` whose type its context fixes, the hint; and
 * the tables whose columns those hints may name. Empty when the statement
 * is not PostgreSQL.
 */
export function paramContext(sql: SqlSource): ParamContext {
  const hints = new Map<number, ParamHint>();
  const relations: RelationRef[] = [];
  const stmt = parsedOf(sql).tree;
  if (stmt === null) return { hints, relations };
  const note = (n: number | null, hint: ParamHint | null): void => {
    if (n !== null && hint !== null && !hints.has(n)) hints.set(n, hint);
  };
  const visit = (value: unknown): void => {
    if (Array.isArray(value)) {
      for (const v of value) visit(v);
      return;
    }
    if (value === null || typeof value !== 'object') return;
    const node = value as Node;
    if (typeof node.relname === 'string') {
      const alias = (node.alias as { aliasname?: string } | undefined)?.aliasname ?? null;
      relations.push({ schema: typeof node.schemaname === 'string' ? node.schemaname : null, name: node.relname, alias });
    }
    const expr = node.A_Expr as Node | undefined;
    if (expr !== undefined) {
      const op = strings(expr.name)[0] ?? '';
      const l = expr.lexpr as Node | undefined;
      const r = expr.rexpr as Node | undefined;
      if (expr.kind === 'AEXPR_OP' && SAME_TYPE_OPERATORS.has(op)) {
        note(paramNumber(r), hintOf(known(l), false));
        note(paramNumber(l), hintOf(known(r), false));
      } else if (expr.kind === 'AEXPR_OP_ANY' || expr.kind === 'AEXPR_OP_ALL') {
        note(paramNumber(r), hintOf(known(l), true));
      } else if (expr.kind === 'AEXPR_IN' && Array.isArray(r)) {
        for (const item of r) note(paramNumber(item as Node), hintOf(known(l), false));
      }
    }
    // $1::int4: the parameter has the type it is cast to, as PostgreSQL types it.
    const cast = node.TypeCast as Node | undefined;
    if (cast !== undefined) {
      const type = typeNameType(cast.typeName as Node | undefined);
      note(paramNumber(cast.arg as Node | undefined), type === null ? null : { kind: 'type', type });
    }
    const call = node.FuncCall as Node | undefined;
    if (call !== undefined) {
      const name = strings(call.funcname);
      const types = name.length === 1 ? FUNCTION_ARGUMENTS[(name[0] as string).toLowerCase()] : undefined;
      if (types !== undefined) {
        for (const [i, arg] of ((call.args as Node[] | undefined) ?? []).entries()) {
          const type = types[i];
          if (type !== undefined) note(paramNumber(arg), { kind: 'type', type });
        }
      }
      if (name.at(-1) === 'generate_series' && (name.length === 1 || name[0] === 'pg_catalog')) seriesArguments(call, note);
    }
    for (const v of Object.values(node)) visit(v);
  };
  visit(stmt);
  return { hints, relations };
}
