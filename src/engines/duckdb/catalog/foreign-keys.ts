import { identifierText, quoteIdentifier as ident, quoteLiteral as lit } from '../../../sql/identifiers.js';
import type { Token } from '../../../sql/lexer.js';
import type { ParsedStatement } from '../../../sql/parsed.js';
import { strings } from '../../../sql/pg-tree.js';
import { P } from './catalog-sql.js';

/**
 * Foreign keys as PostgreSQL keeps them, which DuckDB's cannot be: DuckDB
 * carries out no action (CASCADE, SET NULL, SET DEFAULT), refuses to
 * delete a parent row whose children were deleted earlier in the same
 * transaction, refuses any update of a referenced row, and will not alter
 * or drop a referenced table. So a permanent table's foreign keys are
 * taken out of its DDL and kept in a table of the database itself,
 * written in the same transaction as the DDL (nothing can commit a table
 * without its keys), and the handler keeps them (handler/foreign-keys.ts).
 * This module reads the declarations and writes the SQL.
 */

type Node = Record<string, unknown>;

/** The schema of cotwire's own bookkeeping in the database: `_cot` names are the guard's, so no client writes it. */
export const KEYS_SCHEMA = '_cot_catalog';
export const FOREIGN_KEYS = `${KEYS_SCHEMA}.foreign_keys`;

export const FOREIGN_KEYS_SETUP: readonly string[] = [
  `CREATE SCHEMA IF NOT EXISTS ${KEYS_SCHEMA}`,
  // Names as DuckDB spells the tables and columns; actions as pg_constraint has them (a, r, c, n, d).
  `CREATE TABLE IF NOT EXISTS ${FOREIGN_KEYS} (
     schema_name VARCHAR NOT NULL, table_name VARCHAR NOT NULL, name VARCHAR NOT NULL, ordinal INTEGER NOT NULL,
     columns VARCHAR[] NOT NULL, ref_schema VARCHAR NOT NULL, ref_table VARCHAR NOT NULL, ref_columns VARCHAR[] NOT NULL,
     on_update VARCHAR NOT NULL, on_delete VARCHAR NOT NULL)`,
];

/** NO ACTION, RESTRICT, CASCADE, SET NULL, SET DEFAULT, as pg_constraint's confupdtype and confdeltype. */
export type KeyAction = 'a' | 'r' | 'c' | 'n' | 'd';

export interface TableName {
  /** DuckDB's schema (`main` for public). */
  readonly schema: string;
  readonly table: string;
}

/** A foreign key as recorded. */
export interface ForeignKey extends TableName {
  readonly name: string;
  readonly ordinal: number;
  readonly columns: readonly string[];
  readonly refSchema: string;
  readonly refTable: string;
  readonly refColumns: readonly string[];
  readonly onUpdate: KeyAction;
  readonly onDelete: KeyAction;
}

/** A foreign key as a statement declares it, before it is checked against the tables. */
export interface ForeignKeyDecl {
  readonly name: string | null;
  readonly columns: readonly string[];
  readonly refSchema: string | null;
  readonly refTable: string;
  /** Null: the referenced table's primary key. */
  readonly refColumns: readonly string[] | null;
  readonly onUpdate: KeyAction;
  readonly onDelete: KeyAction;
  /** MATCH FULL: a key of several columns is NULL in all of them or in none. */
  readonly matchFull: boolean;
}

/** What a DDL statement does to the foreign keys kept. */
export type KeyDdl =
  | {
      readonly op: 'add';
      readonly at: TableName;
      readonly keys: readonly ForeignKeyDecl[];
      /** ALTER TABLE ... ADD FOREIGN KEY: the statement is the key alone, and nothing else runs. */
      readonly alone: boolean;
      /** CREATE TABLE IF NOT EXISTS: a table that exists gains no keys. */
      readonly ifNotExists: boolean;
    }
  | { readonly op: 'drop-constraint'; readonly at: TableName; readonly name: string; readonly missingOk: boolean }
  | {
      readonly op: 'drop-tables';
      readonly tables: readonly TableName[];
      readonly cascade: boolean;
      /** The tables named without a schema, which a temporary table of the name hides (the DROP drops that one). */
      readonly unqualified: readonly string[];
    }
  | { readonly op: 'drop-schemas'; readonly schemas: readonly string[]; readonly cascade: boolean }
  | { readonly op: 'rename-table'; readonly at: TableName; readonly to: string }
  | { readonly op: 'rename-column'; readonly at: TableName; readonly from: string; readonly to: string }
  | { readonly op: 'drop-column'; readonly at: TableName; readonly column: string; readonly cascade: boolean };

/** What a data-changing statement does to a table, as its keys need to know. */
export interface TableWrite {
  readonly kind: 'insert' | 'update' | 'delete' | 'truncate' | 'merge';
  readonly tables: readonly TableName[];
  /** The columns an UPDATE (or an upsert's DO UPDATE) sets; null for every column (MERGE), empty for none. */
  readonly sets: readonly string[] | null;
  /** TRUNCATE ... CASCADE. */
  readonly cascade: boolean;
}

const ACTIONS = new Set(['a', 'r', 'c', 'n', 'd']);

export const tableName = (relation: Node | undefined): TableName | null => {
  if (typeof relation?.relname !== 'string') return null;
  const schema = typeof relation.schemaname === 'string' && relation.schemaname !== 'public' ? relation.schemaname : 'main';
  return { schema, table: relation.relname };
};

/** A FOREIGN KEY or REFERENCES constraint; `column`: the column a column constraint is on. */
function keyDecl(c: Node, column: string | null): ForeignKeyDecl | null {
  if (c.contype !== 'CONSTR_FOREIGN') return null;
  const pk = c.pktable as Node | undefined;
  const columns = column === null ? strings(c.fk_attrs) : [column];
  const refColumns = strings(c.pk_attrs);
  if (typeof pk?.relname !== 'string' || columns.length === 0) return null;
  const action = (v: unknown): KeyAction => (typeof v === 'string' && ACTIONS.has(v) ? (v as KeyAction) : 'a');
  return {
    name: typeof c.conname === 'string' ? c.conname : null,
    columns,
    refSchema: typeof pk.schemaname === 'string' && pk.schemaname !== 'public' ? pk.schemaname : null,
    refTable: pk.relname,
    refColumns: refColumns.length === 0 ? null : refColumns,
    onUpdate: action(c.fk_upd_action),
    onDelete: action(c.fk_del_action),
    matchFull: c.fk_matchtype === 'f',
  };
}

/** Whether a table is one whose keys cotwire keeps: permanent, and not a ledger (whose rows only the writer appends). */
const keptFor = (relation: Node | undefined): boolean =>
  relation?.relpersistence !== 't' && typeof relation?.relname === 'string' && !/^_cot/i.test(relation.relname);

/** The foreign keys a CREATE TABLE declares, on its columns and as table constraints. */
function createdKeys(create: Node): ForeignKeyDecl[] {
  const keys: ForeignKeyDecl[] = [];
  for (const e of (create.tableElts as Node[] | undefined) ?? []) {
    const def = e.ColumnDef as Node | undefined;
    for (const k of (def?.constraints as Node[] | undefined) ?? []) {
      const d = keyDecl(k.Constraint as Node, String(def?.colname));
      if (d !== null) keys.push(d);
    }
    const d = e.Constraint === undefined ? null : keyDecl(e.Constraint as Node, null);
    if (d !== null) keys.push(d);
  }
  return keys;
}

/** What a DDL statement does to the kept foreign keys, or null when it does nothing to them. */
export function keyDdlOf(statement: ParsedStatement): KeyDdl | null {
  const first = statement.tokens.find((t) => t.kind === 'word')?.text.toLowerCase();
  if (first !== 'create' && first !== 'alter' && first !== 'drop') return null;
  const tree = statement.tree;
  const create = tree?.CreateStmt as Node | undefined;
  if (create !== undefined) {
    const at = tableName(create.relation as Node);
    const keys = keptFor(create.relation as Node) ? createdKeys(create) : [];
    return at === null || keys.length === 0 ? null : { op: 'add', at, keys, alone: false, ifNotExists: create.if_not_exists === true };
  }
  const drop = tree?.DropStmt as Node | undefined;
  if (drop !== undefined) {
    if (drop.removeType === 'OBJECT_SCHEMA') {
      const schemas = ((drop.objects as Node[] | undefined) ?? []).flatMap((o) => {
        const name = (o.String as Node | undefined)?.sval;
        return typeof name === 'string' ? [name === 'public' ? 'main' : name] : [];
      });
      return { op: 'drop-schemas', schemas, cascade: drop.behavior === 'DROP_CASCADE' };
    }
    if (drop.removeType !== 'OBJECT_TABLE') return null;
    const names = ((drop.objects as Node[] | undefined) ?? []).map((o) => strings((o.List as Node | undefined)?.items));
    const tables = names.flatMap((parts) => {
      const table = parts.at(-1);
      const schema = parts.length > 1 ? (parts.at(-2) as string) : 'main';
      return table === undefined ? [] : [{ schema: schema === 'public' ? 'main' : schema, table }];
    });
    const unqualified = names.flatMap((parts) => (parts.length === 1 ? parts : []));
    return { op: 'drop-tables', tables, cascade: drop.behavior === 'DROP_CASCADE', unqualified };
  }
  const rename = tree?.RenameStmt as Node | undefined;
  if (rename !== undefined) {
    const at = tableName(rename.relation as Node);
    if (at === null || typeof rename.newname !== 'string') return null;
    if (rename.renameType === 'OBJECT_TABLE') return { op: 'rename-table', at, to: rename.newname };
    if (rename.renameType === 'OBJECT_COLUMN' && typeof rename.subname === 'string')
      return { op: 'rename-column', at, from: rename.subname, to: rename.newname };
    return null;
  }
  const alter = tree?.AlterTableStmt as Node | undefined;
  const cmds = (alter?.cmds as Node[] | undefined) ?? [];
  const at = tableName(alter?.relation as Node);
  const cmd = cmds.length === 1 ? (cmds[0]?.AlterTableCmd as Node | undefined) : undefined;
  if (alter?.objtype !== 'OBJECT_TABLE' || at === null || cmd === undefined || !keptFor(alter.relation as Node)) return null;
  const cascade = cmd.behavior === 'DROP_CASCADE';
  switch (cmd.subtype) {
    case 'AT_AddConstraint': {
      const d = keyDecl((cmd.def as Node | undefined)?.Constraint as Node, null);
      return d === null ? null : { op: 'add', at, keys: [d], alone: true, ifNotExists: false };
    }
    case 'AT_AddColumn': {
      const def = (cmd.def as Node | undefined)?.ColumnDef as Node | undefined;
      const keys = ((def?.constraints as Node[] | undefined) ?? []).flatMap((k) => keyDecl(k.Constraint as Node, String(def?.colname)) ?? []);
      return keys.length === 0 ? null : { op: 'add', at, keys, alone: false, ifNotExists: cmd.missing_ok === true };
    }
    case 'AT_DropConstraint':
      return typeof cmd.name === 'string' ? { op: 'drop-constraint', at, name: cmd.name, missingOk: cmd.missing_ok === true } : null;
    case 'AT_DropColumn':
      return typeof cmd.name === 'string' ? { op: 'drop-column', at, column: cmd.name, cascade } : null;
    default:
      return null;
  }
}

/** The tables a data-changing statement writes, and which columns; null for any other statement. */
export function tableWriteOf(statement: ParsedStatement): TableWrite | null {
  const first = statement.tokens.find((t) => t.kind === 'word')?.text.toLowerCase();
  if (first !== 'insert' && first !== 'update' && first !== 'delete' && first !== 'truncate' && first !== 'merge' && first !== 'with') return null;
  const tree = statement.tree;
  const names = (list: unknown): string[] =>
    ((list as Node[] | undefined) ?? []).flatMap((t) => {
      const name = (t.ResTarget as Node | undefined)?.name;
      return typeof name === 'string' ? [name] : [];
    });
  const one = (kind: TableWrite['kind'], relation: unknown, sets: readonly string[] | null): TableWrite | null => {
    const at = tableName(relation as Node);
    return at === null ? null : { kind, tables: [at], sets, cascade: false };
  };
  if (tree?.InsertStmt !== undefined) {
    const insert = tree.InsertStmt as Node;
    const conflict = insert.onConflictClause as Node | undefined;
    return one('insert', insert.relation, conflict?.action === 'ONCONFLICT_UPDATE' ? names(conflict.targetList) : []);
  }
  if (tree?.UpdateStmt !== undefined) return one('update', (tree.UpdateStmt as Node).relation, names((tree.UpdateStmt as Node).targetList));
  if (tree?.DeleteStmt !== undefined) return one('delete', (tree.DeleteStmt as Node).relation, []);
  if (tree?.MergeStmt !== undefined) return one('merge', (tree.MergeStmt as Node).relation, null);
  const truncate = tree?.TruncateStmt as Node | undefined;
  if (truncate !== undefined) {
    const tables = ((truncate.relations as Node[] | undefined) ?? []).flatMap((r) => tableName(r.RangeVar as Node) ?? []);
    return { kind: 'truncate', tables, sets: [], cascade: truncate.behavior === 'DROP_CASCADE' };
  }
  return null;
}

/**
 * PostgreSQL's name for a foreign key its statement did not name:
 * `<table>_<columns>_fkey`, within 63 bytes, with a number added until no
 * other constraint of the schema has it.
 */
export function defaultKeyName(table: string, columns: readonly string[], taken: ReadonlySet<string>): string {
  let base = `${table}_${columns.join('_')}`;
  const bytes = (s: string): number => Buffer.byteLength(s, 'utf8');
  for (let n = 0; ; n++) {
    const suffix = `_fkey${n === 0 ? '' : n}`;
    while (bytes(base) + bytes(suffix) > 63) base = base.slice(0, -1);
    const name = `${base}${suffix}`;
    if (!taken.has(name)) return name;
  }
}

/** A table's name as SQL, in the database `db`. */
export const qualified = (db: string, t: TableName): string => `${ident(db)}.${ident(t.schema)}.${ident(t.table)}`;

const parentOf = (k: ForeignKey): TableName => ({ schema: k.refSchema, table: k.refTable });

/** `c.a = p.b AND ...`, the join of a key's columns with the referenced ones. */
const joined = (k: ForeignKey): string => k.columns.map((c, i) => `cot_p.${ident(k.refColumns[i] as string)} = cot_c.${ident(c)}`).join(' AND ');

/**
 * The child rows of `k` whose key has no parent row (MATCH SIMPLE: a key
 * with a NULL column references nothing). `newOnly`: only rows the open
 * transaction appended (DuckDB numbers them from 2^55 until they commit),
 * which is every row an INSERT can have added.
 */
export function orphansWhere(db: string, k: ForeignKey, newOnly: boolean, among: string | null = null): string {
  const present = k.columns.map((c) => `cot_c.${ident(c)} IS NOT NULL`).join(' AND ');
  // Keys known to be gone from the parent: the child rows on them, without a scan of the parent.
  if (among !== null) return `${present} AND (${among})`;
  return `${present} AND NOT EXISTS (SELECT 1 FROM ${qualified(db, parentOf(k))} cot_p WHERE ${joined(k)})${newOnly ? ` AND cot_c.rowid >= ${TRANSACTION_ROWID}` : ''}`;
}

/**
 * `alias.a IN (CAST('1' AS INTEGER), ...)`, or for several columns an OR of
 * each tuple's equalities: rows whose key is one of `tuples` (texts, cast to
 * each column's type).
 */
export function keyIn(alias: string, columns: readonly string[], types: readonly string[], tuples: ReadonlyArray<readonly (string | null)[]>): string {
  const value = (v: string | null, i: number): string => (v === null ? 'NULL' : `CAST(${lit(v)} AS ${types[i] ?? 'VARCHAR'})`);
  if (columns.length === 1) return `${alias}.${ident(columns[0] as string)} IN (${tuples.map((t) => value(t[0] ?? null, 0)).join(', ')})`;
  return tuples.map((t) => `(${columns.map((c, i) => `${alias}.${ident(c)} = ${value(t[i] ?? null, i)}`).join(' AND ')})`).join(' OR ');
}

/** Which of `tuples` the parent still has (its keys as text). */
export function presentKeysSql(db: string, k: ForeignKey, types: readonly string[], tuples: ReadonlyArray<readonly (string | null)[]>): string {
  const cells = k.refColumns.map((c) => `CAST(cot_p.${ident(c)} AS VARCHAR)`).join(', ');
  return `SELECT DISTINCT ${cells} FROM ${qualified(db, parentOf(k))} cot_p WHERE ${keyIn('cot_p', k.refColumns, types, tuples)}`;
}

/** DuckDB's first row id for rows a transaction appended, until it commits (MAX_ROW_ID). */
export const TRANSACTION_ROWID = '36028797018960000';

const keyCells = (k: ForeignKey): string => k.columns.map((c) => `CAST(cot_c.${ident(c)} AS VARCHAR)`).join(', ');

/** One orphan's key, as text, for the error's detail. */
export function orphanSql(db: string, k: ForeignKey, newOnly: boolean, among: string | null = null): string {
  return `SELECT ${keyCells(k)} FROM ${qualified(db, k)} cot_c WHERE ${orphansWhere(db, k, newOnly, among)} LIMIT 1`;
}

/** Every orphan's key, as text, once. */
export function orphansSql(db: string, k: ForeignKey, among: string | null = null): string {
  return `SELECT DISTINCT ${keyCells(k)} FROM ${qualified(db, k)} cot_c WHERE ${orphansWhere(db, k, false, among)}`;
}

/** The action a parent's change calls for, carried out on the orphans it left. */
export function actionSql(db: string, k: ForeignKey, action: 'c' | 'n' | 'd', among: string | null = null): string {
  const target = `${qualified(db, k)} AS cot_c`;
  const where = orphansWhere(db, k, false, among);
  if (action === 'c') return `DELETE FROM ${target} WHERE ${where}`;
  const value = action === 'n' ? 'NULL' : 'DEFAULT';
  return `UPDATE ${target} SET ${k.columns.map((c) => `${ident(c)} = ${value}`).join(', ')} WHERE ${where}`;
}

/** The recorded keys, as rows of the registry, in the order they were made (PostgreSQL lists dependents so). */
export const LOAD_KEYS = `SELECT schema_name, table_name, name, ordinal, columns, ref_schema, ref_table, ref_columns, on_update, on_delete FROM ${FOREIGN_KEYS} ORDER BY rowid`;

export function keyFromRow(r: readonly unknown[]): ForeignKey {
  const list = (v: unknown): string[] => (Array.isArray(v) ? v.map(String) : []);
  return {
    schema: String(r[0]),
    table: String(r[1]),
    name: String(r[2]),
    ordinal: Number(r[3]),
    columns: list(r[4]),
    refSchema: String(r[5]),
    refTable: String(r[6]),
    refColumns: list(r[7]),
    onUpdate: String(r[8]) as KeyAction,
    onDelete: String(r[9]) as KeyAction,
  };
}

/** The catalog's copy of the committed keys (pg_constraint and information_schema read it): DuckDB's views cannot name the database's tables. */
export const KEYS_MIRROR = `${P}.cot_foreign_keys`;

export const KEYS_MIRROR_SETUP = `CREATE TABLE ${KEYS_MIRROR} (schema_name VARCHAR, table_name VARCHAR, name VARCHAR, ordinal INTEGER,
  columns VARCHAR[], ref_schema VARCHAR, ref_table VARCHAR, ref_columns VARCHAR[], on_update VARCHAR, on_delete VARCHAR, database_name VARCHAR)`;

/** `database`: the tables' database, which the catalog's views cannot ask for (clients' current_database() is PostgreSQL's name). */
export function mirrorSql(keys: readonly ForeignKey[], database: string): string[] {
  return [`DELETE FROM ${KEYS_MIRROR}`, ...keys.map((k) => insertKeySql(k, KEYS_MIRROR, database))];
}

const listSql = (xs: readonly string[]): string => `[${xs.map(lit).join(', ')}]::VARCHAR[]`;

export function insertKeySql(k: ForeignKey, into = FOREIGN_KEYS, database: string | null = null): string {
  return `INSERT INTO ${into} VALUES (${lit(k.schema)}, ${lit(k.table)}, ${lit(k.name)}, ${k.ordinal}, ${listSql(k.columns)}, ${lit(k.refSchema)}, ${lit(k.refTable)}, ${listSql(k.refColumns)}, ${lit(k.onUpdate)}, ${lit(k.onDelete)}${database === null ? '' : `, ${lit(database)}`})`;
}

const same = (column: string, value: string): string => `lower(${column}) = lower(${lit(value)})`;

export function deleteKeySql(k: ForeignKey): string {
  return `DELETE FROM ${FOREIGN_KEYS} WHERE ${same('schema_name', k.schema)} AND ${same('table_name', k.table)} AND name = ${lit(k.name)}`;
}

/** A table renamed: its keys, and the keys that reference it, follow. */
export function renameTableSql(at: TableName, to: string): string[] {
  return [
    `UPDATE ${FOREIGN_KEYS} SET table_name = ${lit(to)} WHERE ${same('schema_name', at.schema)} AND ${same('table_name', at.table)}`,
    `UPDATE ${FOREIGN_KEYS} SET ref_table = ${lit(to)} WHERE ${same('ref_schema', at.schema)} AND ${same('ref_table', at.table)}`,
  ];
}

/** A column renamed, in the keys on it and in the keys that reference it. */
export function renameColumnSql(at: TableName, from: string, to: string): string[] {
  const swap = (list: string): string => `list_transform(${list}, cot_x -> CASE WHEN lower(cot_x) = lower(${lit(from)}) THEN ${lit(to)} ELSE cot_x END)`;
  return [
    `UPDATE ${FOREIGN_KEYS} SET columns = ${swap('columns')} WHERE ${same('schema_name', at.schema)} AND ${same('table_name', at.table)}`,
    `UPDATE ${FOREIGN_KEYS} SET ref_columns = ${swap('ref_columns')} WHERE ${same('ref_schema', at.schema)} AND ${same('ref_table', at.table)}`,
  ];
}

/** The SQL text of an action, as pg_get_constraintdef prints it after the key. */
export const ACTION_WORDS: Readonly<Record<KeyAction, string>> = { a: 'NO ACTION', r: 'RESTRICT', c: 'CASCADE', n: 'SET NULL', d: 'SET DEFAULT' };

/** An UPDATE's parts as the engine runs it, for the keys an ON UPDATE CASCADE rekeys (foreign-keys.ts). */
export interface UpdateParts {
  /** The target as written, with its alias (`orders AS o`). */
  readonly target: string;
  /** The name the target's columns are read by: its alias, or its name. */
  readonly alias: string;
  /** Each assigned column (lower case) and its expression's text. */
  readonly sets: ReadonlyMap<string, string>;
  readonly from: string | null;
  readonly where: string | null;
}

/**
 * `UPDATE t [AS a] SET c = e, ... [FROM ...] [WHERE ...] [RETURNING ...]`
 * read from its tokens; null for another statement, and for a multiple
 * assignment (`SET (a, b) = ...`), whose columns are not one expression each.
 */
export function updateParts(text: string, tokens: readonly Token[], alias: string): UpdateParts | null {
  const word = (i: number): string => (tokens[i]?.kind === 'word' ? (tokens[i] as Token).text.toLowerCase() : '');
  if (word(0) === 'delete') return deleteParts(text, tokens, alias);
  if (word(0) !== 'update') return null;
  // Where each top-level clause starts (depth 0), by its keyword.
  let depth = 0;
  const at = new Map<string, number>();
  tokens.forEach((t, i) => {
    if (t.text === '(' || t.text === '[') depth++;
    else if (t.text === ')' || t.text === ']') depth--;
    // IS DISTINCT FROM is no clause.
    else if (depth === 0 && ['set', 'from', 'where', 'returning'].includes(word(i)) && !at.has(word(i)) && word(i - 1) !== 'distinct') at.set(word(i), i);
  });
  const set = at.get('set');
  if (set === undefined) return null;
  const end = (i: number): number => {
    const next = [...at.values()].filter((k) => k > i).sort((a, b) => a - b)[0];
    let last = next === undefined ? tokens.length - 1 : next - 1;
    while (tokens[last]?.kind === 'semicolon') last--;
    return last;
  };
  const span = (from: number, to: number): string => (to < from ? '' : text.slice((tokens[from] as Token).start, (tokens[to] as Token).end));
  const sets = new Map<string, string>();
  let depthSet = 0;
  let piece = set + 1;
  const setEnd = end(set);
  for (let i = set + 1; i <= setEnd + 1; i++) {
    const t = tokens[i];
    if (t !== undefined && i <= setEnd) {
      if (t.text === '(' || t.text === '[') depthSet++;
      else if (t.text === ')' || t.text === ']') depthSet--;
      if (!(depthSet === 0 && t.text === ',')) continue;
    }
    const name = identifierText(tokens, piece);
    if (name === null || tokens[piece + 1]?.text !== '=') return null;
    sets.set(name.toLowerCase(), span(piece + 2, i - 1));
    piece = i + 1;
  }
  const from = at.get('from');
  const where = at.get('where');
  return {
    target: span(1, set - 1),
    alias,
    sets,
    from: from === undefined ? null : span(from + 1, end(from)),
    where: where === undefined ? null : span(where + 1, end(where)),
  };
}

/** Each updated row's referenced key before and after, as text: the rows an ON UPDATE CASCADE carries to the children. */
export function keyMappingSql(parts: UpdateParts, refColumns: readonly string[]): string {
  const old = refColumns.map((c) => `CAST(${ident(parts.alias)}.${ident(c)} AS VARCHAR)`);
  const next = refColumns.map((c) => `CAST(${parts.sets.get(c.toLowerCase()) ?? `${ident(parts.alias)}.${ident(c)}`} AS VARCHAR)`);
  return `SELECT ${[...old, ...next].join(', ')} FROM ${parts.target}${parts.from === null ? '' : `, ${parts.from}`}${parts.where === null ? '' : ` WHERE ${parts.where}`}`;
}

/** The name an UPDATE's target columns are read by: its alias, or its name. */
export function updateAlias(statement: ParsedStatement): string {
  const relation = ((statement.tree?.UpdateStmt ?? statement.tree?.DeleteStmt) as Node | undefined)?.relation as Node | undefined;
  const alias = (relation?.alias as Node | undefined)?.aliasname;
  return typeof alias === 'string' ? alias : typeof relation?.relname === 'string' ? relation.relname : '';
}

/** `DELETE FROM t [AS a] [USING ...] [WHERE ...]` as UpdateParts without SET (USING is its FROM). */
function deleteParts(text: string, tokens: readonly Token[], alias: string): UpdateParts | null {
  const word = (i: number): string => (tokens[i]?.kind === 'word' ? (tokens[i] as Token).text.toLowerCase() : '');
  if (word(1) !== 'from') return null;
  let depth = 0;
  const at = new Map<string, number>();
  tokens.forEach((t, i) => {
    if (t.text === '(' || t.text === '[') depth++;
    else if (t.text === ')' || t.text === ']') depth--;
    else if (depth === 0 && i > 1 && ['using', 'where', 'returning'].includes(word(i)) && !at.has(word(i))) at.set(word(i), i);
  });
  let last = tokens.length - 1;
  while (tokens[last]?.kind === 'semicolon') last--;
  const stops = [...at.values()].sort((a, b) => a - b);
  const end = (i: number): number => (stops.find((k) => k > i) ?? last + 1) - 1;
  const span = (from: number, to: number): string | null => (to < from ? null : text.slice((tokens[from] as Token).start, (tokens[to] as Token).end));
  const using = at.get('using');
  const where = at.get('where');
  const target = span(2, end(1));
  if (target === null) return null;
  return {
    target,
    alias,
    sets: new Map(),
    from: using === undefined ? null : span(using + 1, end(using)),
    where: where === undefined ? null : span(where + 1, end(where)),
  };
}
