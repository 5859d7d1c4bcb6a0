import { parse, type Expr, type SelectedColumn, type Statement } from 'pgsql-ast-parser';

/**
 * PostgreSQL names an unaliased result column after what it computes
 * (FigureColname): `count(*)` is "count", `'t'::boolean` is "bool", a
 * literal is "?column?". DuckDB names it after its own rendering of the
 * expression ("count_star()", "CAST('t' AS BOOLEAN)"), which breaks clients
 * that read rows by name. These rules recompute the PostgreSQL names from a
 * PostgreSQL parse of the statement.
 */

/** The internal names PostgreSQL gives to the SQL-standard type spellings. */
const TYPE_NAMES: Readonly<Record<string, string>> = {
  int: 'int4',
  integer: 'int4',
  smallint: 'int2',
  bigint: 'int8',
  real: 'float4',
  float: 'float8',
  'double precision': 'float8',
  boolean: 'bool',
  'character varying': 'varchar',
  character: 'bpchar',
  char: 'bpchar',
  decimal: 'numeric',
  'timestamp without time zone': 'timestamp',
  'timestamp with time zone': 'timestamptz',
  'time without time zone': 'time',
  'time with time zone': 'timetz',
};

interface Figured {
  readonly name: string;
  /** PostgreSQL's strength: a name from a column or function beats one from a type cast. */
  readonly strength: number;
}

const UNKNOWN: Figured = { name: '?column?', strength: 0 };

function figure(e: Expr): Figured {
  switch (e.type) {
    case 'ref':
      return { name: e.name, strength: 2 };
    case 'call':
      // TRIM(x) is btrim(x) in PostgreSQL's grammar, and named so.
      return { name: e.function.name === 'trim' ? 'btrim' : e.function.name, strength: 2 };
    case 'extract':
    case 'substring':
    case 'overlay':
      return { name: e.type, strength: 2 };
    case 'keyword':
      return { name: e.keyword, strength: 2 };
    case 'cast': {
      const inner = figure(e.operand);
      if (inner.strength > 1) return inner;
      // $1::text[] is named after its element type, as PostgreSQL takes the type name's last part.
      let to = e.to as { name?: string; kind?: string; arrayOf?: unknown };
      while (to.kind === 'array' && to.arrayOf !== undefined) to = to.arrayOf as typeof to;
      if (to.name === undefined) return inner;
      return { name: TYPE_NAMES[to.name.toLowerCase()] ?? to.name.toLowerCase(), strength: 1 };
    }
    case 'case':
      return { name: 'case', strength: 1 };
    case 'array':
    case 'array select':
      return { name: 'array', strength: 2 };
    case 'select': {
      const first = e.columns?.[0];
      if (first === undefined || e.columns?.length !== 1) return UNKNOWN;
      return first.alias !== undefined ? { name: first.alias.name, strength: 2 } : figure(first.expr);
    }
    default:
      return UNKNOWN;
  }
}

function selectColumns(s: Statement): readonly SelectedColumn[] | 'values' | null {
  switch (s.type) {
    case 'select':
      return s.columns ?? null;
    case 'union':
    case 'union all':
      return selectColumns(s.left);
    case 'with':
    case 'with recursive':
      return selectColumns(s.in);
    case 'values':
      return 'values';
    default:
      return null;
  }
}

const cache = new Map<string, readonly (string | null)[] | null>();

/**
 * The PostgreSQL name of each result column of `sql`; null entries keep the
 * engine's name (aliases, which DuckDB keeps exactly). Returns
 * null when the statement cannot be analysed (DuckDB-only syntax, `*`).
 */
export function postgresColumnNames(sql: string, columnCount: number): readonly (string | null)[] | null {
  const key = `${columnCount}\u0000${sql}`;
  if (cache.has(key)) return cache.get(key) ?? null;
  const names = compute(sql, columnCount);
  if (cache.size >= 2000) cache.clear();
  cache.set(key, names);
  return names;
}

function compute(sql: string, columnCount: number): readonly (string | null)[] | null {
  let statements: Statement[];
  try {
    statements = parse(sql);
  } catch {
    return null;
  }
  if (statements.length !== 1) return null;
  const columns = selectColumns(statements[0] as Statement);
  if (columns === 'values') return Array.from({ length: columnCount }, (_, i) => `column${i + 1}`);
  if (columns === null || columns.length !== columnCount) return null;
  if (columns.some((c) => c.expr.type === 'ref' && c.expr.name === '*')) return null;
  // A column reference keeps its name even where the rewrite replaced it (pg_dump's c.tableoid).
  return columns.map((c) => (c.alias !== undefined ? null : c.expr.type === 'ref' ? c.expr.name : figure(c.expr).name));
}

/** Whether the engine's names look computed from expressions, so that renaming may be needed. */
export function hasComputedNames(names: readonly string[]): boolean {
  return names.some((n) => !/^[A-Za-z_][A-Za-z0-9_]*$/.test(n) || /^col\d+$/.test(n));
}

/** Catalog columns of type name, which PostgreSQL aggregates into name[] (a type node-postgres leaves as text). */
const CATALOG_NAME_COLUMNS = new Set(['attname', 'relname', 'nspname', 'typname', 'conname', 'proname', 'rolname', 'datname', 'indexrelname', 'collname']);

/**
 * The result columns that are `array_agg` of a catalog name column: name[]
 * in PostgreSQL (Sequelize's index query reads one as text, '{a,b}', which
 * is how node-postgres leaves a name[]), text[] in the engine.
 */
export function nameArrayColumns(sql: string): ReadonlySet<number> {
  const out = new Set<number>();
  if (!/array_agg/i.test(sql) || !/\bpg_/i.test(sql)) return out;
  let statements: Statement[];
  try {
    statements = parse(sql);
  } catch {
    return out;
  }
  const columns = statements.length === 1 ? selectColumns(statements[0] as Statement) : null;
  if (columns === null || columns === 'values') return out;
  columns.forEach((c, i) => {
    const e = c.expr;
    const arg = e.type === 'call' && e.function.name === 'array_agg' ? e.args[0] : undefined;
    if (arg?.type === 'ref' && CATALOG_NAME_COLUMNS.has(arg.name)) out.add(i);
  });
  return out;
}
