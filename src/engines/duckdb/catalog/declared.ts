import { parsedOf, type SqlSource, textOf } from '../../../sql/parsed.js';
import { strings } from '../../../sql/pg-tree.js';
import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { P } from './catalog-sql.js';
import { quoteLiteral as lit } from '../../../sql/identifiers.js';

/**
 * What a client declared that DuckDB does not keep: a column's `varchar(n)`,
 * `char(n)` or `jsonb` (DuckDB has one string type and one JSON type), and
 * the names given to constraints (DuckDB names them itself). The catalog
 * reports them as PostgreSQL would (pg_attribute, information_schema,
 * pg_constraint), so that ORMs that compare their model with the database
 * (TypeORM's synchronize, Knex's columnInfo) see what they created.
 *
 * The declarations live in two tables of the catalog's in-memory database,
 * kept in a file beside the database (`<db>.pgtypes`) and loaded at start.
 * A change is recorded once its DDL has committed (the engine writes one
 * database per transaction); if the server stops in between, the column
 * reads as DuckDB's type, which is still its value's type.
 */

type Node = Record<string, unknown>;

export const DECLARED_COLUMNS = `${P}.cot_declared_columns`;
export const DECLARED_CONSTRAINTS = `${P}.cot_declared_constraints`;

/** The extensions created (CREATE EXTENSION), for pg_extension. */
export const DECLARED_EXTENSIONS = `${P}.cot_declared_extensions`;

export const DECLARED_SETUP: readonly string[] = [
  `CREATE TABLE ${DECLARED_COLUMNS} (schema_name VARCHAR, table_name VARCHAR, column_name VARCHAR, pg_type VARCHAR, typmod INTEGER)`,
  // contype as pg_constraint has it (p, u, f, c); columns: the constrained columns, lower case, comma-separated
  // (a check's: the columns its expression names, sorted).
  `CREATE TABLE ${DECLARED_CONSTRAINTS} (schema_name VARCHAR, table_name VARCHAR, contype VARCHAR, columns VARCHAR, name VARCHAR)`,
  `CREATE TABLE ${DECLARED_EXTENSIONS} (name VARCHAR, schema_name VARCHAR)`,
];

/**
 * The extensions CREATE EXTENSION takes: those whose functions the catalog
 * has (pg-functions.ts): uuid-ossp's, and of pgcrypto's gen_random_uuid()
 * and digest(). Their OIDs are cotwire's own; versions are PostgreSQL 15's.
 */
export const AVAILABLE_EXTENSIONS: Readonly<Record<string, { readonly oid: number; readonly version: string; readonly comment: string }>> = {
  'uuid-ossp': { oid: 16390, version: '1.1', comment: 'generate universally unique identifiers (UUIDs)' },
  pgcrypto: { oid: 16391, version: '1.3', comment: 'cryptographic functions' },
};

/** The mark of a GENERATED ALWAYS AS IDENTITY column: a client's value for it is refused (428C9). */
export const IDENTITY_ALWAYS = 'identity always';

interface DeclaredColumn {
  readonly column: string;
  /** varchar, bpchar, jsonb or IDENTITY_ALWAYS; null: nothing DuckDB does not keep. */
  readonly pgType: string | null;
  readonly typmod: number;
}

interface DeclaredConstraint {
  readonly contype: 'p' | 'u' | 'f' | 'c';
  readonly columns: string;
  readonly name: string;
}

/** One committed DDL statement's effect on the declarations. */
export type DeclaredChange =
  | {
      readonly op: 'table';
      readonly schema: string;
      readonly table: string;
      readonly columns: readonly DeclaredColumn[];
      readonly constraints: readonly DeclaredConstraint[];
    }
  | { readonly op: 'column'; readonly schema: string; readonly table: string; readonly column: DeclaredColumn }
  | { readonly op: 'constraint'; readonly schema: string; readonly table: string; readonly constraint: DeclaredConstraint }
  | { readonly op: 'drop-column'; readonly schema: string; readonly table: string; readonly column: string }
  | { readonly op: 'rename-column'; readonly schema: string; readonly table: string; readonly from: string; readonly to: string }
  | { readonly op: 'rename-table'; readonly schema: string; readonly table: string; readonly to: string }
  | { readonly op: 'drop-table'; readonly schema: string; readonly table: string }
  | { readonly op: 'extension'; readonly name: string; readonly schema: string }
  | { readonly op: 'drop-extension'; readonly name: string };

const schemaOf = (relation: Node | undefined): string => {
  const s = typeof relation?.schemaname === 'string' ? relation.schemaname : 'public';
  return s === 'public' ? 'main' : s;
};

function declaredColumn(def: Node): DeclaredColumn | null {
  if (typeof def.colname !== 'string') return null;
  const always = ((def.constraints as Node[] | undefined) ?? []).some((c) => {
    const k = c.Constraint as Node | undefined;
    return k?.contype === 'CONSTR_IDENTITY' && k.generated_when === 'a';
  });
  if (always) return { column: def.colname, pgType: IDENTITY_ALWAYS, typmod: -1 };
  const typeName = def.typeName as Node | undefined;
  const names = strings(typeName?.names);
  const type = names[names.length - 1] ?? '';
  if (Array.isArray(typeName?.arrayBounds)) return { column: def.colname, pgType: null, typmod: -1 };
  const mod = ((typeName?.typmods as Node[] | undefined)?.[0]?.A_Const as Node | undefined)?.ival as { ival?: number } | undefined;
  if (type === 'varchar' || type === 'bpchar') {
    // character without a length is character(1) in PostgreSQL.
    const n = mod?.ival ?? (type === 'bpchar' ? 1 : null);
    return { column: def.colname, pgType: type, typmod: n === null ? -1 : n + 4 };
  }
  if (type === 'jsonb') return { column: def.colname, pgType: 'jsonb', typmod: -1 };
  return { column: def.colname, pgType: null, typmod: -1 };
}

/** The columns an expression names, each once, sorted: how a CHECK's declaration is matched with DuckDB's. */
function columnsNamed(expr: unknown): string[] {
  const found = new Set<string>();
  const visit = (v: unknown): void => {
    if (Array.isArray(v)) v.forEach(visit);
    else if (v !== null && typeof v === 'object') {
      const ref = (v as Node).ColumnRef as Node | undefined;
      const last = ref === undefined ? undefined : strings(ref.fields).at(-1);
      if (last !== undefined) found.add(last.toLowerCase());
      else for (const x of Object.values(v as Node)) visit(x);
    }
  };
  visit(expr);
  return [...found].sort();
}

function declaredConstraint(c: Node, columns: readonly string[] | null): DeclaredConstraint | null {
  if (typeof c.conname !== 'string') return null;
  const contype =
    c.contype === 'CONSTR_PRIMARY'
      ? 'p'
      : c.contype === 'CONSTR_UNIQUE'
        ? 'u'
        : c.contype === 'CONSTR_FOREIGN'
          ? 'f'
          : c.contype === 'CONSTR_CHECK'
            ? 'c'
            : null;
  const keys = contype === 'c' ? columnsNamed(c.raw_expr) : (columns ?? strings(contype === 'f' ? c.fk_attrs : c.keys));
  if (contype === null || keys.length === 0) return null;
  return { contype, columns: keys.map((k) => k.toLowerCase()).join(','), name: c.conname };
}

/** The declarations a DDL statement makes or changes; empty for anything else. */
export function declaredChanges(sql: SqlSource): DeclaredChange[] {
  if (!/^\s*(create|alter|drop)\b/i.test(textOf(sql))) return [];
  const stmt = parsedOf(sql).tree ?? undefined;
  const create = stmt?.CreateStmt as Node | undefined;
  if (create !== undefined) {
    const relation = create.relation as Node;
    if (relation.relpersistence === 't' || typeof relation.relname !== 'string') return [];
    const columns: DeclaredColumn[] = [];
    const constraints: DeclaredConstraint[] = [];
    for (const e of (create.tableElts as Node[] | undefined) ?? []) {
      const def = e.ColumnDef as Node | undefined;
      if (def !== undefined) {
        const c = declaredColumn(def);
        if (c !== null) columns.push(c);
        for (const k of (def.constraints as Node[] | undefined) ?? []) {
          const d = declaredConstraint(k.Constraint as Node, [String(def.colname)]);
          if (d !== null) constraints.push(d);
        }
      }
      const table = e.Constraint as Node | undefined;
      const d = table === undefined ? null : declaredConstraint(table, null);
      if (d !== null) constraints.push(d);
    }
    return [{ op: 'table', schema: schemaOf(relation), table: relation.relname, columns, constraints }];
  }
  const alter = stmt?.AlterTableStmt as Node | undefined;
  if (alter !== undefined && alter.objtype === 'OBJECT_TABLE') {
    const relation = alter.relation as Node;
    if (typeof relation.relname !== 'string') return [];
    const at = { schema: schemaOf(relation), table: relation.relname };
    const out: DeclaredChange[] = [];
    for (const x of (alter.cmds as Node[] | undefined) ?? []) {
      const cmd = x.AlterTableCmd as Node;
      if (cmd.subtype === 'AT_AddColumn') {
        const c = declaredColumn(((cmd.def as Node).ColumnDef ?? cmd.def) as Node);
        if (c !== null) out.push({ op: 'column', ...at, column: c });
      } else if (cmd.subtype === 'AT_AlterColumnType' && typeof cmd.name === 'string') {
        const c = declaredColumn({ ...((cmd.def as Node).ColumnDef as Node), colname: cmd.name });
        if (c !== null) out.push({ op: 'column', ...at, column: c });
      } else if (cmd.subtype === 'AT_DropColumn' && typeof cmd.name === 'string') {
        out.push({ op: 'drop-column', ...at, column: cmd.name });
      } else if (cmd.subtype === 'AT_AddConstraint') {
        const d = declaredConstraint((cmd.def as Node).Constraint as Node, null);
        if (d !== null) out.push({ op: 'constraint', ...at, constraint: d });
      }
    }
    return out;
  }
  const rename = stmt?.RenameStmt as Node | undefined;
  if (rename !== undefined && typeof (rename.relation as Node | undefined)?.relname === 'string' && typeof rename.newname === 'string') {
    const relation = rename.relation as Node;
    const at = { schema: schemaOf(relation), table: relation.relname as string };
    if (rename.renameType === 'OBJECT_COLUMN' && typeof rename.subname === 'string')
      return [{ op: 'rename-column', ...at, from: rename.subname, to: rename.newname }];
    if (rename.renameType === 'OBJECT_TABLE') return [{ op: 'rename-table', ...at, to: rename.newname }];
    return [];
  }
  const drop = stmt?.DropStmt as Node | undefined;
  if (drop !== undefined && drop.removeType === 'OBJECT_TABLE') {
    return ((drop.objects as Node[] | undefined) ?? []).flatMap((o) => {
      const parts = strings((o.List as Node | undefined)?.items);
      const table = parts[parts.length - 1];
      if (table === undefined) return [];
      const schema = parts.length > 1 ? (parts[parts.length - 2] as string) : 'public';
      return [{ op: 'drop-table' as const, schema: schema === 'public' ? 'main' : schema, table }];
    });
  }
  return [];
}

/** The statements that record a change in the declaration tables. */
export function changeSql(change: DeclaredChange): string[] {
  if (change.op === 'extension' || change.op === 'drop-extension') {
    return [
      `DELETE FROM ${DECLARED_EXTENSIONS} WHERE name = ${lit(change.name)}`,
      ...(change.op === 'extension' ? [`INSERT INTO ${DECLARED_EXTENSIONS} VALUES (${lit(change.name)}, ${lit(change.schema)})`] : []),
    ];
  }
  const where = `lower(schema_name) = lower(${lit(change.schema)}) AND lower(table_name) = lower(${lit(change.table)})`;
  const column = (c: DeclaredColumn): string[] => [
    `DELETE FROM ${DECLARED_COLUMNS} WHERE ${where} AND lower(column_name) = lower(${lit(c.column)})`,
    ...(c.pgType === null
      ? []
      : [`INSERT INTO ${DECLARED_COLUMNS} VALUES (${lit(change.schema)}, ${lit(change.table)}, ${lit(c.column)}, ${lit(c.pgType)}, ${c.typmod})`]),
  ];
  const constraint = (d: DeclaredConstraint): string =>
    `INSERT INTO ${DECLARED_CONSTRAINTS} VALUES (${lit(change.schema)}, ${lit(change.table)}, ${lit(d.contype)}, ${lit(d.columns)}, ${lit(d.name)})`;
  switch (change.op) {
    case 'table':
      return [
        `DELETE FROM ${DECLARED_COLUMNS} WHERE ${where}`,
        `DELETE FROM ${DECLARED_CONSTRAINTS} WHERE ${where}`,
        ...change.columns.flatMap((c) => column(c).slice(1)),
        ...change.constraints.map(constraint),
      ];
    case 'column':
      return column(change.column);
    case 'constraint':
      return [
        `DELETE FROM ${DECLARED_CONSTRAINTS} WHERE ${where} AND contype = ${lit(change.constraint.contype)} AND columns = ${lit(change.constraint.columns)}`,
        constraint(change.constraint),
      ];
    case 'drop-column':
      return [`DELETE FROM ${DECLARED_COLUMNS} WHERE ${where} AND lower(column_name) = lower(${lit(change.column)})`];
    case 'rename-column':
      return [
        `UPDATE ${DECLARED_COLUMNS} SET column_name = ${lit(change.to)} WHERE ${where} AND lower(column_name) = lower(${lit(change.from)})`,
        `UPDATE ${DECLARED_CONSTRAINTS} SET columns = array_to_string(list_transform(string_split(columns, ','), x -> CASE WHEN x = lower(${lit(change.from)}) THEN lower(${lit(change.to)}) ELSE x END), ',') WHERE ${where}`,
      ];
    case 'rename-table':
      return [
        `UPDATE ${DECLARED_COLUMNS} SET table_name = ${lit(change.to)} WHERE ${where}`,
        `UPDATE ${DECLARED_CONSTRAINTS} SET table_name = ${lit(change.to)} WHERE ${where}`,
      ];
    case 'drop-table': {
      // DROP TABLE t may have dropped a temporary t: the declarations go only if no such table is left.
      const gone = `NOT EXISTS (SELECT 1 FROM duckdb_tables() WHERE database_name <> 'temp' AND lower(schema_name) = lower(${lit(change.schema)}) AND lower(table_name) = lower(${lit(change.table)}))`;
      return [`DELETE FROM ${DECLARED_COLUMNS} WHERE ${where} AND ${gone}`, `DELETE FROM ${DECLARED_CONSTRAINTS} WHERE ${where} AND ${gone}`];
    }
  }
}

interface Runner {
  run(sql: string): Promise<void>;
  query(sql: string): Promise<unknown[][]>;
}

/** The declarations' file beside the database: loaded at start, written after each recorded change. */
export class DeclaredStore {
  private saving: Promise<void> = Promise.resolve();
  /** GENERATED ALWAYS identity columns, as `schema.table` (lower case) → column names: every INSERT is checked against them. */
  private always = new Map<string, Set<string>>();
  /** Columns declared jsonb, the same way: `a || b` on one is jsonb's (rewrite/jsonb.ts). */
  private jsonb = new Map<string, Set<string>>();

  /** `path`: the file, or null for an in-memory database (nothing is kept across starts). */
  constructor(private readonly path: string | null) {}

  anyIdentityAlways(): boolean {
    return this.always.size > 0;
  }

  /** The GENERATED ALWAYS identity columns of a table (schema `main` for public), lower case. */
  identityAlways(schema: string, table: string): ReadonlySet<string> | undefined {
    return this.always.get(`${schema}.${table}`.toLowerCase());
  }

  /** The jsonb columns of a table (schema `main` for public), lower case. */
  jsonbColumns(schema: string, table: string): ReadonlySet<string> | undefined {
    return this.jsonb.get(`${schema}.${table}`.toLowerCase());
  }

  private async refreshAlways(conn: Runner): Promise<void> {
    const rows = await conn.query(
      `SELECT schema_name, table_name, column_name, pg_type FROM ${DECLARED_COLUMNS} WHERE pg_type IN (${lit(IDENTITY_ALWAYS)}, 'jsonb')`,
    );
    const always = new Map<string, Set<string>>();
    const jsonb = new Map<string, Set<string>>();
    for (const [s, t, c, type] of rows) {
      const byTable = type === 'jsonb' ? jsonb : always;
      const key = `${String(s)}.${String(t)}`.toLowerCase();
      const set = byTable.get(key) ?? new Set<string>();
      set.add(String(c).toLowerCase());
      byTable.set(key, set);
    }
    this.always = always;
    this.jsonb = jsonb;
  }

  /** After the saved rows are loaded: what the INSERT check needs. */
  async loaded(conn: Runner): Promise<void> {
    await this.refreshAlways(conn);
  }

  /** The rows recorded at the last run, as statements that put them back. */
  loadSql(): string[] {
    if (this.path === null || !existsSync(this.path)) return [];
    try {
      const saved = JSON.parse(readFileSync(this.path, 'utf8')) as { columns?: unknown[][]; constraints?: unknown[][]; extensions?: unknown[][] };
      const row = (r: unknown[]): string => `(${r.map((v) => (typeof v === 'number' ? String(v) : lit(String(v)))).join(', ')})`;
      return [
        ...(saved.columns?.length ? [`INSERT INTO ${DECLARED_COLUMNS} VALUES ${saved.columns.map(row).join(', ')}`] : []),
        ...(saved.constraints?.length ? [`INSERT INTO ${DECLARED_CONSTRAINTS} VALUES ${saved.constraints.map(row).join(', ')}`] : []),
        ...(saved.extensions?.length ? [`INSERT INTO ${DECLARED_EXTENSIONS} VALUES ${saved.extensions.map(row).join(', ')}`] : []),
      ];
    } catch {
      // A damaged file loses the declarations only: columns read as DuckDB's types.
      return [];
    }
  }

  /** Records committed changes, then writes the file (changes from several sessions are written one after another). */
  async apply(conn: Runner, changes: readonly DeclaredChange[]): Promise<void> {
    if (changes.length === 0) return;
    for (const c of changes) for (const sql of changeSql(c)) await conn.run(sql);
    await this.refreshAlways(conn);
    const path = this.path;
    if (path === null) return;
    const save = this.saving.then(async () => {
      const columns = await conn.query(`SELECT schema_name, table_name, column_name, pg_type, typmod FROM ${DECLARED_COLUMNS}`);
      const constraints = await conn.query(`SELECT schema_name, table_name, contype, columns, name FROM ${DECLARED_CONSTRAINTS}`);
      const extensions = await conn.query(`SELECT name, schema_name FROM ${DECLARED_EXTENSIONS}`);
      const tmp = `${path}.tmp`;
      writeFileSync(tmp, `${JSON.stringify({ version: 1, columns, constraints, extensions })}\n`, { mode: 0o644 });
      renameSync(tmp, path);
    });
    this.saving = save.catch(() => undefined);
    await save;
  }
}
