import { parsedOf, type SqlSource, textOf } from './parsed.js';
import { type PgNode, strings } from './pg-tree.js';

/**
 * PostgreSQL names an unaliased result column after what it computes
 * (FigureColname in parse_target.c): `count(*)` is "count", `'t'::boolean`
 * is "bool", a literal is "?column?". DuckDB names it after its own
 * rendering of the expression ("count_star()", "CAST('t' AS BOOLEAN)"),
 * which breaks clients that read rows by name. These rules recompute
 * PostgreSQL's names on PostgreSQL's own parse tree of the statement.
 */

interface Figured {
  readonly name: string;
  /** PostgreSQL's strength: a name from a column or function (2) beats one from a type cast or CASE (1). */
  readonly strength: number;
}

const UNKNOWN: Figured = { name: '?column?', strength: 0 };

const SQL_VALUE_FUNCTIONS: Readonly<Record<string, string>> = {
  SVFOP_CURRENT_DATE: 'current_date',
  SVFOP_CURRENT_TIME: 'current_time',
  SVFOP_CURRENT_TIME_N: 'current_time',
  SVFOP_CURRENT_TIMESTAMP: 'current_timestamp',
  SVFOP_CURRENT_TIMESTAMP_N: 'current_timestamp',
  SVFOP_LOCALTIME: 'localtime',
  SVFOP_LOCALTIME_N: 'localtime',
  SVFOP_LOCALTIMESTAMP: 'localtimestamp',
  SVFOP_LOCALTIMESTAMP_N: 'localtimestamp',
  SVFOP_CURRENT_ROLE: 'current_role',
  SVFOP_CURRENT_USER: 'current_user',
  SVFOP_USER: 'user',
  SVFOP_SESSION_USER: 'session_user',
  SVFOP_CURRENT_CATALOG: 'current_catalog',
  SVFOP_CURRENT_SCHEMA: 'current_schema',
};

const last = <T>(xs: readonly T[]): T | undefined => xs[xs.length - 1];

function figure(node: PgNode | undefined): Figured {
  if (node === undefined) return UNKNOWN;
  const [kind, value] = Object.entries(node)[0] ?? [];
  const n = (value ?? {}) as PgNode;
  switch (kind) {
    case 'ColumnRef': {
      const field = last((n.fields as PgNode[] | undefined) ?? []);
      const name = (field?.String as { sval?: string } | undefined)?.sval;
      return name === undefined ? UNKNOWN : { name, strength: 2 };
    }
    case 'A_Indirection': {
      const step = last((n.indirection as PgNode[] | undefined) ?? []);
      const name = (step?.String as { sval?: string } | undefined)?.sval;
      if (name !== undefined) return { name, strength: 2 };
      return figure(n.arg as PgNode | undefined);
    }
    case 'FuncCall': {
      const name = last(strings(n.funcname));
      return name === undefined ? UNKNOWN : { name, strength: 2 };
    }
    case 'A_Expr':
      return n.kind === 'AEXPR_NULLIF' ? { name: 'nullif', strength: 2 } : UNKNOWN;
    case 'TypeCast': {
      const inner = figure(n.arg as PgNode | undefined);
      if (inner.strength > 1) return inner;
      const name = last(strings((n.typeName as PgNode | undefined)?.names));
      return name === undefined ? inner : { name, strength: 1 };
    }
    case 'CollateClause':
      return figure(n.arg as PgNode | undefined);
    case 'GroupingFunc':
      return { name: 'grouping', strength: 2 };
    case 'SubLink':
      switch (n.subLinkType) {
        case 'EXISTS_SUBLINK':
          return { name: 'exists', strength: 2 };
        case 'ARRAY_SUBLINK':
          return { name: 'array', strength: 2 };
        case 'EXPR_SUBLINK': {
          // The name of the subquery's single column, as the subquery names it.
          const names = selectNames(n.subselect as PgNode | undefined);
          const first = names?.length === 1 ? names[0] : undefined;
          return first === undefined || first === null ? UNKNOWN : { name: first, strength: 2 };
        }
        default:
          return UNKNOWN;
      }
    case 'CaseExpr':
      return { name: 'case', strength: 1 };
    case 'A_ArrayExpr':
      return { name: 'array', strength: 2 };
    case 'RowExpr':
      return { name: 'row', strength: 2 };
    case 'CoalesceExpr':
      return { name: 'coalesce', strength: 2 };
    case 'MinMaxExpr':
      return { name: n.op === 'IS_LEAST' ? 'least' : 'greatest', strength: 2 };
    case 'SQLValueFunction': {
      const name = SQL_VALUE_FUNCTIONS[String(n.op)];
      return name === undefined ? UNKNOWN : { name, strength: 2 };
    }
    default:
      return UNKNOWN;
  }
}

/** A select's result-column names as PostgreSQL gives them (aliases included); null when a `*` leaves them to the engine. */
function selectNames(select: PgNode | undefined): ReadonlyArray<string | null> | null {
  const s = (select?.SelectStmt ?? select) as PgNode | undefined;
  if (s === undefined) return null;
  if (s.op !== undefined && s.op !== 'SETOP_NONE') return selectNames(s.larg as PgNode | undefined);
  const values = s.valuesLists as unknown[] | undefined;
  if (Array.isArray(values)) {
    const first = (values[0] as { List?: { items?: unknown[] } } | undefined)?.List?.items ?? [];
    return first.map((_, i) => `column${i + 1}`);
  }
  return targetNames(s.targetList);
}

/** The names of a select list's columns (aliases included); null when a `*` leaves them to the engine. */
export function targetNames(list: unknown): ReadonlyArray<string | null> | null {
  if (!Array.isArray(list)) return null;
  const out: string[] = [];
  for (const item of list as PgNode[]) {
    const target = item.ResTarget as PgNode | undefined;
    const val = target?.val as PgNode | undefined;
    const fields = (val?.ColumnRef as PgNode | undefined)?.fields as PgNode[] | undefined;
    if (fields !== undefined && last(fields)?.A_Star !== undefined) return null;
    out.push(typeof target?.name === 'string' ? target.name : figure(val).name);
  }
  return out;
}

/** The result-column names of one statement: a query's select list, or the RETURNING list of a write. */
function statementNames(stmt: PgNode): ReadonlyArray<string | null> | null {
  const [kind, value] = Object.entries(stmt)[0] ?? [];
  const n = (value ?? {}) as PgNode;
  switch (kind) {
    case 'SelectStmt':
      return selectNames(n);
    case 'InsertStmt':
    case 'UpdateStmt':
    case 'DeleteStmt':
      // PostgreSQL 18's parser keeps the list in a RETURNING clause node.
      return targetNames((n.returningClause as PgNode | undefined)?.exprs ?? n.returningList);
    default:
      return null;
  }
}

const cache = new Map<string, readonly (string | null)[] | null>();

/**
 * The PostgreSQL name of each result column of `sql`. Returns null when the
 * statement cannot be analysed (DuckDB-only syntax, `*`) or has another
 * number of columns, so that the engine's names stand.
 */
export function postgresColumnNames(sql: SqlSource, columnCount: number): readonly (string | null)[] | null {
  const key = `${columnCount}\u0000${textOf(sql)}`;
  if (cache.has(key)) return cache.get(key) ?? null;
  const stmt = parsedOf(sql).tree;
  const figured = stmt === null ? null : statementNames(stmt);
  const names = figured !== null && figured.length === columnCount ? figured : null;
  if (cache.size >= 2000) cache.clear();
  cache.set(key, names);
  return names;
}

/**
 * Whether the engine's names may differ from PostgreSQL's: names computed
 * from expressions, and capitals, which DuckDB keeps in an unquoted alias
 * (`AS Total`) where PostgreSQL folds them.
 */
export function hasComputedNames(names: readonly string[]): boolean {
  return names.some((n) => !/^[a-z_][a-z0-9_]*$/.test(n) || /^col\d+$/.test(n));
}

/** Catalog columns of type name, which PostgreSQL aggregates into name[] (a type node-postgres leaves as text). */
const CATALOG_NAME_COLUMNS = new Set(['attname', 'relname', 'nspname', 'typname', 'conname', 'proname', 'rolname', 'datname', 'indexrelname', 'collname']);

/**
 * The result columns that are `array_agg` of a catalog name column: name[]
 * in PostgreSQL (Sequelize's index query reads one as text, '{a,b}', which
 * is how node-postgres leaves a name[]), text[] in the engine.
 */
export function nameArrayColumns(sql: SqlSource): ReadonlySet<number> {
  const out = new Set<number>();
  const text = textOf(sql);
  if (!/array_agg/i.test(text) || !/\bpg_/i.test(text)) return out;
  const stmt = parsedOf(sql).tree;
  let select = stmt?.SelectStmt as PgNode | undefined;
  while (select !== undefined && select.op !== undefined && select.op !== 'SETOP_NONE')
    select = (select.larg as PgNode | undefined)?.SelectStmt as PgNode | undefined;
  const targets = (select?.targetList as PgNode[] | undefined) ?? [];
  targets.forEach((item, i) => {
    const call = ((item.ResTarget as PgNode | undefined)?.val as PgNode | undefined)?.FuncCall as PgNode | undefined;
    if (call === undefined || last(strings(call.funcname)) !== 'array_agg') return;
    const arg = (call.args as PgNode[] | undefined)?.[0]?.ColumnRef as PgNode | undefined;
    const name = (last((arg?.fields as PgNode[] | undefined) ?? [])?.String as { sval?: string } | undefined)?.sval;
    if (name !== undefined && CATALOG_NAME_COLUMNS.has(name)) out.add(i);
  });
  return out;
}
