import { targetNames } from './column-names.js';
import { parsedOf, type SqlSource } from './parsed.js';
import { type PgNode, strings } from './pg-tree.js';

/**
 * Where a query's result columns come from, on PostgreSQL's parse tree: a
 * column of a table in FROM (or of a subquery in FROM that reads one), every
 * column of one (`*`, `t.*`), a cast to jsonb, or something computed.
 * PostgreSQL's RowDescription names the table and column of each plain
 * column reference (pgjdbc's getTableName and getColumnName, and with them
 * the tools that edit rows, read it), and a column's declared type is what
 * DuckDB does not keep (varchar(n), jsonb).
 */

/** A table in FROM, as the query names it. */
export interface FromTable {
  readonly kind: 'table';
  /** The name the query reaches it by: its alias, else its own name. */
  readonly key: string;
  readonly schema: string | null;
  readonly name: string;
}

/** A subquery in FROM, with the names of its columns. */
export interface FromSubquery {
  readonly kind: 'subquery';
  readonly key: string;
  readonly sources: SelectSources;
  readonly names: ReadonlyArray<string | null>;
}

export type TargetSource =
  | { readonly kind: 'column'; readonly qualifier: string | null; readonly column: string }
  | { readonly kind: 'star'; readonly qualifier: string | null }
  | { readonly kind: 'jsonb' }
  /** An expression that is jsonb when this column is (`j -> 'k'`, `coalesce(j, ...)`). */
  | { readonly kind: 'jsonbOf'; readonly qualifier: string | null; readonly column: string }
  /** A type's name as regtype (pg_typeof, a cast to regtype), which the engine holds as text. */
  | { readonly kind: 'regtype' }
  /** A cast to a type with a modifier (`x::numeric(10,2)`), which PostgreSQL describes with it. */
  | { readonly kind: 'typmod' }
  | { readonly kind: 'other' };

export interface SelectSources {
  readonly from: ReadonlyArray<FromTable | FromSubquery>;
  /** FROM holds something else (a function, a CTE, a NATURAL join): an unqualified column may come from it. */
  readonly opaque: boolean;
  /** Columns a JOIN ... USING merged, each with the FROM items the merged column reads (the left side's, a RIGHT JOIN's right side's, none for FULL). */
  readonly merged: ReadonlyMap<string, readonly string[]>;
  /** Whether `*` expands to the FROM items' columns in order (a USING join puts its merged columns first). */
  readonly plainStar: boolean;
  readonly targets: readonly TargetSource[];
}

interface FromScan {
  plain: boolean;
  plainStar: boolean;
  readonly merged: Map<string, readonly string[]>;
}

/** The items of a FROM clause, in order, into `out`; what cannot be followed is marked in `scan`. */
function fromItems(items: readonly PgNode[], ctes: ReadonlySet<string>, out: Array<FromTable | FromSubquery>, scan: FromScan): void {
  for (const item of items) {
    const range = item.RangeVar as PgNode | undefined;
    const join = item.JoinExpr as PgNode | undefined;
    const sub = item.RangeSubselect as PgNode | undefined;
    const alias = ((range ?? sub)?.alias as { aliasname?: string; colnames?: unknown } | undefined) ?? undefined;
    if (alias?.colnames !== undefined) {
      scan.plain = false;
    } else if (range !== undefined && typeof range.relname === 'string') {
      const schema = typeof range.schemaname === 'string' ? range.schemaname : null;
      if (typeof range.catalogname === 'string' || (schema === null && ctes.has(range.relname))) {
        scan.plain = false;
        continue;
      }
      out.push({ kind: 'table', key: alias?.aliasname ?? range.relname, schema, name: range.relname });
    } else if (sub !== undefined && alias?.aliasname !== undefined && sub.lateral !== true) {
      const select = sub.subquery as PgNode | undefined;
      const sources = select === undefined ? null : selectSourcesOf(select);
      const names = targetNames(((select?.SelectStmt as PgNode | undefined)?.targetList as unknown) ?? null);
      if (sources === null || names === null) scan.plain = false;
      else out.push({ kind: 'subquery', key: alias.aliasname, sources, names });
    } else if (join !== undefined) {
      if (join.isNatural === true || join.alias !== undefined) scan.plain = false;
      const left: Array<FromTable | FromSubquery> = [];
      const right: Array<FromTable | FromSubquery> = [];
      fromItems([join.larg as PgNode], ctes, left, scan);
      fromItems([join.rarg as PgNode], ctes, right, scan);
      out.push(...left, ...right);
      const using = strings(join.usingClause);
      if (using.length > 0) {
        scan.plainStar = false;
        const side = join.jointype === 'JOIN_RIGHT' ? right : join.jointype === 'JOIN_FULL' ? [] : left;
        for (const name of using)
          scan.merged.set(
            name.toLowerCase(),
            side.map((f) => f.key.toLowerCase()),
          );
      }
    } else {
      scan.plain = false;
    }
  }
}

function target(val: PgNode | undefined): TargetSource {
  const ref = val?.ColumnRef as PgNode | undefined;
  if (ref !== undefined) {
    const fields = (ref.fields as PgNode[] | undefined) ?? [];
    const names = fields.map((f) => (f.String as { sval?: string } | undefined)?.sval);
    const star = fields[fields.length - 1]?.A_Star !== undefined;
    if (star && fields.length <= 2) return { kind: 'star', qualifier: fields.length === 2 ? (names[0] ?? null) : null };
    const column = names[names.length - 1];
    if (star || column === undefined || names.length > 2 || names.some((n) => n === undefined)) return { kind: 'other' };
    return { kind: 'column', qualifier: names.length === 2 ? (names[0] as string) : null, column };
  }
  const call = val?.FuncCall as PgNode | undefined;
  const cast = val?.TypeCast as PgNode | undefined;
  if (
    (call !== undefined &&
      strings(call.funcname)
        .join('.')
        .replace(/^pg_catalog\./, '') === 'pg_typeof') ||
    castName(cast) === 'regtype'
  ) {
    return { kind: 'regtype' };
  }
  if (cast !== undefined && (cast.typeName as PgNode | undefined)?.typmods !== undefined) return { kind: 'typmod' };
  const jsonb = jsonbSource(val);
  if (jsonb === true) return { kind: 'jsonb' };
  if (jsonb !== null && jsonb !== false) return { kind: 'jsonbOf', ...jsonb };
  return { kind: 'other' };
}

function castName(cast: PgNode | undefined): string | undefined {
  const typeName = cast?.typeName as PgNode | undefined;
  return typeName?.arrayBounds === undefined ? strings(typeName?.names).at(-1) : undefined;
}

/** Functions whose result is jsonb. */
const JSONB_FUNCTIONS = new Set([
  'jsonb_build_object',
  'jsonb_build_array',
  'to_jsonb',
  'jsonb_agg',
  'jsonb_object_agg',
  'jsonb_set',
  'jsonb_insert',
  'jsonb_strip_nulls',
  'jsonb_object',
  'jsonb_extract_path',
  'jsonb_path_query_first',
  'jsonb_concat',
]);

/** Operators whose result has their left operand's json type: jsonb when it is jsonb. */
const JSONB_OPERATORS = new Set(['->', '#>', '||', '-', '#-']);

/**
 * Whether an expression is jsonb: true by its text (a cast to jsonb, a
 * jsonb function), the column whose declared type decides it (`j -> 'k'`,
 * `coalesce(j, ...)`), or false. DuckDB holds json and jsonb alike.
 */
function jsonbSource(e: PgNode | undefined): boolean | { readonly qualifier: string | null; readonly column: string } | null {
  if (e === undefined) return false;
  const cast = e.TypeCast as PgNode | undefined;
  if (cast !== undefined) return castName(cast) === 'jsonb';
  const ref = e.ColumnRef as PgNode | undefined;
  if (ref !== undefined) {
    const names = ((ref.fields as PgNode[] | undefined) ?? []).map((f) => (f.String as { sval?: string } | undefined)?.sval);
    const column = names.at(-1);
    if (column === undefined || names.length > 2 || names.some((n) => n === undefined)) return null;
    return { qualifier: names.length === 2 ? (names[0] as string) : null, column };
  }
  const call = e.FuncCall as PgNode | undefined;
  if (call !== undefined) {
    const name = strings(call.funcname).at(-1) ?? '';
    if (JSONB_FUNCTIONS.has(name)) return true;
    return name === 'coalesce' || name === 'nullif' || name === 'greatest' || name === 'least' ? anyJsonb(call.args) : false;
  }
  const expr = e.A_Expr as PgNode | undefined;
  if (expr !== undefined) {
    if (expr.kind === 'AEXPR_NULLIF') return jsonbSource(expr.lexpr as PgNode | undefined);
    const op = strings(expr.name).join('.');
    if (expr.kind !== 'AEXPR_OP' || !JSONB_OPERATORS.has(op)) return false;
    const left = jsonbSource(expr.lexpr as PgNode | undefined);
    return op === '||' && left !== true ? (jsonbSource(expr.rexpr as PgNode | undefined) === true ? true : left) : left;
  }
  const coalesce = e.CoalesceExpr as PgNode | undefined;
  if (coalesce !== undefined) return anyJsonb(coalesce.args);
  const minMax = e.MinMaxExpr as PgNode | undefined;
  if (minMax !== undefined) return anyJsonb(minMax.args);
  const caseExpr = e.CaseExpr as PgNode | undefined;
  if (caseExpr !== undefined) {
    const results = ((caseExpr.args as PgNode[] | undefined) ?? []).map((w) => (w.CaseWhen as PgNode | undefined)?.result as PgNode);
    return anyJsonb([...results, ...(caseExpr.defresult === undefined ? [] : [caseExpr.defresult])]);
  }
  return false;
}

/** The first of several expressions whose json type is known or follows a column. */
function anyJsonb(args: unknown): boolean | { readonly qualifier: string | null; readonly column: string } | null {
  for (const a of (args as PgNode[] | undefined) ?? []) {
    const s = jsonbSource(a);
    if (s !== false) return s;
  }
  return false;
}

function selectSourcesOf(stmt: PgNode): SelectSources | null {
  const select = stmt.SelectStmt as PgNode | undefined;
  if (select === undefined || (select.op !== undefined && select.op !== 'SETOP_NONE') || select.valuesLists !== undefined) return null;
  const ctes = new Set<string>();
  for (const c of ((select.withClause as PgNode | undefined)?.ctes as PgNode[] | undefined) ?? []) {
    const name = (c.CommonTableExpr as PgNode | undefined)?.ctename;
    if (typeof name === 'string') ctes.add(name);
  }
  const from: Array<FromTable | FromSubquery> = [];
  const scan: FromScan = { plain: true, plainStar: true, merged: new Map() };
  fromItems((select.fromClause as PgNode[] | undefined) ?? [], ctes, from, scan);
  const targets = ((select.targetList as PgNode[] | undefined) ?? []).map((t) => target((t.ResTarget as PgNode | undefined)?.val as PgNode | undefined));
  return { from, opaque: !scan.plain, merged: scan.merged, plainStar: scan.plainStar, targets };
}

/** The sources of a query's result columns; null for anything but one plain SELECT. */
export function selectSources(sql: SqlSource): SelectSources | null {
  const stmt = parsedOf(sql).tree;
  return stmt === null ? null : selectSourcesOf(stmt);
}

/** Every table a query's FROM clauses read, subqueries' included. */
export function tablesOf(sources: SelectSources): FromTable[] {
  return sources.from.flatMap((f) => (f.kind === 'table' ? [f] : tablesOf(f.sources)));
}
