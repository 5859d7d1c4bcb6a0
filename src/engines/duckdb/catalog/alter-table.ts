import { identifierText, quoteIdentifier } from '../../../sql/identifiers.js';
import { lexStatement, type Token } from '../../../sql/lexer.js';
import type { ParsedStatement } from '../../../sql/parsed.js';
import { strings } from '../../../sql/pg-tree.js';

/**
 * `ALTER TABLE [ONLY] t ADD [CONSTRAINT name] FOREIGN KEY (...) REFERENCES
 * ...` and `... ADD [CONSTRAINT name] CHECK (...)`, which DuckDB cannot do
 * to an existing table (Knex, TypeORM, Drizzle and pg_dump's output all add
 * foreign keys this way, and ORMs add checks so). The handler rebuilds the
 * table with the constraint instead (engines/duckdb/handler/table-create.ts),
 * which checks every row already there; this reads the statement. The
 * constraint's name is kept as a declaration (declared.ts).
 */

type Node = Record<string, unknown>;

export interface ConstraintAddition {
  readonly schema: string | null;
  readonly table: string;
  /** `FOREIGN KEY (a) REFERENCES t (b)` or `CHECK (a > 0)`, as the statement wrote it. */
  readonly constraint: string;
}

/** The keyword each constraint added by a rebuild starts with. */
const REBUILT_CONSTRAINTS: Readonly<Record<string, string>> = { CONSTR_FOREIGN: 'foreign', CONSTR_CHECK: 'check' };

export function translateAddConstraint(statement: ParsedStatement): ConstraintAddition | null {
  const { text, tokens } = statement;
  if (tokens[0]?.text.toLowerCase() !== 'alter' || !tokens.some((t) => t.kind === 'word' && ['foreign', 'check'].includes(t.text.toLowerCase()))) return null;
  const stmt = statement.tree?.AlterTableStmt as Node | undefined;
  const cmds = stmt?.cmds as Node[] | undefined;
  const cmd = cmds?.length === 1 ? (cmds[0]?.AlterTableCmd as Node | undefined) : undefined;
  const constraint = (cmd?.def as Node | undefined)?.Constraint as Node | undefined;
  const relation = stmt?.relation as Node | undefined;
  const keyword = REBUILT_CONSTRAINTS[String(constraint?.contype)];
  if (stmt?.objtype !== 'OBJECT_TABLE' || cmd?.subtype !== 'AT_AddConstraint' || keyword === undefined) return null;
  if (typeof relation?.relname !== 'string') return null;
  const first = tokens.findIndex((t) => t.kind === 'word' && t.text.toLowerCase() === keyword);
  let last = tokens.length - 1;
  while (tokens[last]?.kind === 'semicolon') last--;
  // NOT VALID skips checking the rows already there; the rebuild checks them all, which is stricter.
  if (tokens[last]?.text.toLowerCase() === 'valid' && tokens[last - 1]?.text.toLowerCase() === 'not') last -= 2;
  // NO INHERIT: no table inherits in cotwire.
  if (tokens[last]?.text.toLowerCase() === 'inherit' && tokens[last - 1]?.text.toLowerCase() === 'no') last -= 2;
  const from = tokens[first];
  const to = tokens[last];
  if (from === undefined || to === undefined || last < first) return null;
  return {
    schema: typeof relation.schemaname === 'string' ? relation.schemaname : null,
    table: relation.relname,
    constraint: text.slice(from.start, to.end),
  };
}

/** A table's CREATE TABLE (as DuckDB prints it in duckdb_tables().sql), named `target`, with one more constraint if given. */
export function withConstraint(createSql: string, target: string, constraint: string | null): string | null {
  const name = /^CREATE TABLE ((?:"(?:[^"]|"")*"|[^\s(."]+)(?:\.(?:"(?:[^"]|"")*"|[^\s(."]+))*)\(/.exec(createSql);
  const end = createSql.lastIndexOf(')');
  if (name === null || end < 0) return null;
  return `CREATE TABLE ${target}(${createSql.slice(name[0].length, end)}${constraint === null ? '' : `, ${constraint}`})`;
}

/** ALTER TABLE that DuckDB refuses while an index depends on a column it touches: which columns it drops or renames. */
export interface ColumnAlter {
  /** The statement, as the engine runs it once the indexes are set aside. */
  readonly sql: string;
  readonly schema: string | null;
  readonly table: string;
  readonly dropped: readonly string[];
  readonly renamed: { readonly from: string; readonly to: string } | null;
  /**
   * Columns added or retyped, with the length their new type allows
   * (varchar(n)), or null for none: DuckDB has one unbounded string type, and
   * cotwire keeps varchar(n) as a CHECK on the length, which an added column
   * must gain and which blocks a change of the column's type.
   */
  readonly lengths: ReadonlyArray<{ readonly column: string; readonly length: number | null; readonly padded: boolean; readonly added: boolean }>;
  /**
   * When the statement only changes column types (no USING): each column's
   * new type, as the engine spells it. DuckDB will not change the type of a
   * key's column, so such a table is made again with the new types instead.
   */
  readonly retyped: ReadonlyArray<{ readonly column: string; readonly type: string }> | null;
  /** Whether it changes an existing column (DROP, TYPE, NOT NULL, DEFAULT, RENAME), which an index on the table blocks. */
  readonly changesColumns: boolean;
}

/** The words that end a column's type in a CREATE TABLE as DuckDB prints it. */
const AFTER_TYPE = new Set(['not', 'null', 'default', 'primary', 'unique', 'check', 'references', 'collate', 'generated', 'constraint', 'using', 'as']);

/** The tokens of a type that starts at `from`: up to a constraint's word, or a comma or parenthesis that closes its list. */
function typeEnd(tokens: readonly Token[], from: number): number {
  let depth = 0;
  let i = from;
  for (; i < tokens.length; i++) {
    const t = tokens[i] as Token;
    if (t.text === '(' || t.text === '[') depth++;
    else if (t.text === ')' || t.text === ']') {
      if (depth === 0) break;
      depth--;
    } else if (depth === 0 && (t.text === ',' || t.kind === 'semicolon' || (t.kind === 'word' && AFTER_TYPE.has(t.text.toLowerCase())))) break;
  }
  return i;
}

/** A table's CREATE TABLE (duckdb_tables().sql) with columns' types changed; null when a column is not found. */
export function retypedDefinition(createSql: string, retyped: ReadonlyArray<{ readonly column: string; readonly type: string }>): string | null {
  const { tokens } = lexStatement(createSql);
  const open = tokens.findIndex((t) => t.text === '(');
  const edits: Array<{ start: number; end: number; type: string }> = [];
  for (const { column, type } of retyped) {
    let depth = 0;
    let found = -1;
    for (let i = open; i < tokens.length && found < 0; i++) {
      const t = tokens[i] as Token;
      if (t.text === '(') depth++;
      else if (t.text === ')') depth--;
      const startsElement = depth === 1 && (tokens[i - 1]?.text === ',' || i - 1 === open);
      if (startsElement && identifierText(tokens, i)?.toLowerCase() === column.toLowerCase()) found = i;
    }
    const first = tokens[found + 1];
    if (found < 0 || first === undefined) return null;
    const last = tokens[typeEnd(tokens, found + 1) - 1];
    if (last === undefined) return null;
    edits.push({ start: first.start, end: last.end, type });
  }
  edits.sort((a, b) => b.start - a.start);
  return edits.reduce((sql, e) => `${sql.slice(0, e.start)}${e.type}${sql.slice(e.end)}`, createSql);
}

/** n of a varchar(n) or char(n) type name, and whether it is char(n); null for any other type. */
function boundedLength(typeName: Node | undefined): { readonly n: number; readonly padded: boolean } | null {
  const n = (((typeName?.typmods as Node[] | undefined)?.[0]?.A_Const as Node | undefined)?.ival as { ival?: number } | undefined)?.ival;
  const type = strings(typeName?.names).at(-1);
  if ((type !== 'varchar' && type !== 'bpchar') || n === undefined || Array.isArray(typeName?.arrayBounds)) return null;
  return { n, padded: type === 'bpchar' };
}

/**
 * The CHECK that stands for a varchar(n) or char(n) column's length (the
 * rewrite adds the same to CREATE TABLE). char(n) takes trailing spaces past
 * n, as PostgreSQL's does (which drops them).
 */
export function lengthCheck(column: string, length: number, padded = false): string {
  const col = quoteIdentifier(column);
  return `CHECK (length(${padded ? `rtrim(${col})` : col}) <= ${length})`;
}

const escaped = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** The length checks of a column in a CREATE TABLE as DuckDB prints it: CHECK((length("c") <= 5)), CHECK((length(rtrim(c)) <= 3)). */
const lengthChecks = (column: string): RegExp => {
  const name = `(?:${escaped(column)}|"${escaped(column.replaceAll('"', '""'))}")`;
  return new RegExp(`,\\s*CHECK\\(\\(length\\((?:${name}|rtrim\\(${name}\\))\\) <= \\d+\\)\\)`, 'gi');
};

/** Whether a table's CREATE TABLE (duckdb_tables().sql) holds a length check on one of the columns. */
export function hasLengthCheck(createSql: string, columns: readonly string[]): boolean {
  return columns.some((c) => lengthChecks(c).test(createSql));
}

/** A table's CREATE TABLE without the length checks of the columns. */
export function withoutLengthChecks(createSql: string, columns: readonly string[]): string {
  return columns.reduce((sql, c) => sql.replace(lengthChecks(c), ''), createSql);
}

/** The column changes DuckDB refuses on a table with an index (Sequelize's sync({ alter: true }) makes each of them). */
const INDEX_BLOCKED = new Set(['AT_DropColumn', 'AT_AlterColumnType', 'AT_DropNotNull', 'AT_SetNotNull', 'AT_ColumnDefault']);

/** DROP COLUMN, ALTER COLUMN ... TYPE, [SET|DROP] NOT NULL and DEFAULT, and RENAME COLUMN: the statements an index blocks in DuckDB. */
export function translateColumnAlter(statement: ParsedStatement): ColumnAlter | null {
  const { text, tokens } = statement;
  if (tokens[0]?.text.toLowerCase() !== 'alter' || tokens[1]?.text.toLowerCase() !== 'table') return null;
  const stmt = statement.tree ?? undefined;
  const rename = stmt?.RenameStmt as Node | undefined;
  const alter = stmt?.AlterTableStmt as Node | undefined;
  const relation = (rename ?? alter)?.relation as Node | undefined;
  if (typeof relation?.relname !== 'string') return null;
  const schema = typeof relation.schemaname === 'string' ? relation.schemaname : null;
  if (rename !== undefined) {
    if (rename.renameType !== 'OBJECT_COLUMN' || typeof rename.subname !== 'string' || typeof rename.newname !== 'string') return null;
    return {
      sql: text,
      schema,
      table: relation.relname,
      dropped: [],
      renamed: { from: rename.subname, to: rename.newname },
      lengths: [],
      retyped: null,
      changesColumns: true,
    };
  }
  const cmds = ((alter?.cmds as Node[] | undefined) ?? []).map((c) => c.AlterTableCmd as Node | undefined);
  const touching = cmds.filter((c) => INDEX_BLOCKED.has(String(c?.subtype)));
  const lengths = cmds.flatMap((c) => {
    const def = (c?.def as Node | undefined)?.ColumnDef as Node | undefined;
    const added = c?.subtype === 'AT_AddColumn';
    const column = added ? def?.colname : c?.name;
    const bounded = boundedLength(def?.typeName as Node | undefined);
    if ((!added && c?.subtype !== 'AT_AlterColumnType') || typeof column !== 'string' || (added && bounded === null)) return [];
    return [{ column, length: bounded?.n ?? null, padded: bounded?.padded ?? false, added }];
  });
  if (alter?.objtype !== 'OBJECT_TABLE' || (touching.length === 0 && lengths.length === 0)) return null;
  const dropped = cmds.filter((c) => c?.subtype === 'AT_DropColumn').map((c) => String(c?.name));
  const retyped = cmds.every(
    (c) => c?.subtype === 'AT_AlterColumnType' && ((c.def as Node | undefined)?.ColumnDef as Node | undefined)?.raw_default === undefined,
  )
    ? cmds.flatMap((c) => {
        const typeName = ((c?.def as Node | undefined)?.ColumnDef as Node | undefined)?.typeName as Node | undefined;
        const at = tokens.findIndex((t) => t.start === typeName?.location);
        const last = tokens[typeEnd(tokens, at) - 1];
        return at < 0 || last === undefined ? [] : [{ column: String(c?.name), type: text.slice((tokens[at] as Token).start, last.end) }];
      })
    : null;
  return {
    sql: text,
    schema,
    table: relation.relname,
    dropped,
    renamed: null,
    lengths,
    retyped: retyped?.length === cmds.length ? retyped : null,
    changesColumns: touching.length > 0,
  };
}

/** The column list of an index's CREATE INDEX (as duckdb_indexes().sql prints it). */
function indexColumns(indexSql: string): { readonly at: number; readonly list: string } | null {
  const on = /\sON\s+(?:"(?:[^"]|"")*"|[^\s(."]+)(?:\.(?:"(?:[^"]|"")*"|[^\s(."]+))*\s*\(/i.exec(indexSql);
  const end = indexSql.lastIndexOf(')');
  if (on === null || end < 0) return null;
  const at = on.index + on[0].length;
  return { at, list: indexSql.slice(at, end) };
}

/** A column's name in an index's column list, bare or quoted, not inside another identifier. */
const mentions = (column: string): RegExp =>
  new RegExp(`(^|[^A-Za-z0-9_$"])(${escaped(column)}|"${escaped(column.replaceAll('"', '""'))}")(?![A-Za-z0-9_$"])`, 'gi');

/**
 * An index as it is recreated after the ALTER: null when it was on a dropped
 * column (PostgreSQL drops such an index with the column), and with the new
 * name where a column was renamed.
 */
export function indexAfterAlter(indexSql: string, alter: ColumnAlter): string | null {
  const cols = indexColumns(indexSql);
  if (cols === null) return indexSql;
  if (alter.dropped.some((c) => mentions(c).test(cols.list))) return null;
  if (alter.renamed === null) return indexSql;
  const to = /^[a-z_][a-z0-9_$]*$/.test(alter.renamed.to) ? alter.renamed.to : `"${alter.renamed.to.replaceAll('"', '""')}"`;
  const list = cols.list.replace(mentions(alter.renamed.from), (_m, before: string) => `${before}${to}`);
  return indexSql.slice(0, cols.at) + list + indexSql.slice(cols.at + cols.list.length);
}
