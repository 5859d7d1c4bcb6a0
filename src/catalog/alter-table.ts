import { parseSync } from 'libpg-query';
import type { Token } from '../sql/lexer.js';

/**
 * `ALTER TABLE [ONLY] t ADD [CONSTRAINT name] FOREIGN KEY (...) REFERENCES
 * ...`, which DuckDB cannot do to an existing table (Knex, TypeORM, Drizzle
 * and pg_dump's output all add foreign keys this way). The handler rebuilds
 * the table with the key instead (handler/table-create.ts); this reads the
 * statement.
 */

type Node = Record<string, unknown>;

export interface ForeignKeyAddition {
  readonly schema: string | null;
  readonly table: string;
  /** `FOREIGN KEY (a) REFERENCES t (b)`, as the statement wrote it. */
  readonly constraint: string;
}

export function translateAddForeignKey(text: string, tokens: readonly Token[]): ForeignKeyAddition | null {
  if (tokens[0]?.text.toLowerCase() !== 'alter' || !tokens.some((t) => t.kind === 'word' && t.text.toLowerCase() === 'foreign')) return null;
  let stmt: Node | undefined;
  try {
    const tree = parseSync(text) as { stmts?: Array<{ stmt: Node }> };
    if (tree.stmts?.length !== 1) return null;
    stmt = tree.stmts[0]?.stmt.AlterTableStmt as Node | undefined;
  } catch {
    return null;
  }
  const cmds = stmt?.cmds as Node[] | undefined;
  const cmd = cmds?.length === 1 ? (cmds[0]?.AlterTableCmd as Node | undefined) : undefined;
  const constraint = (cmd?.def as Node | undefined)?.Constraint as Node | undefined;
  const relation = stmt?.relation as Node | undefined;
  if (stmt?.objtype !== 'OBJECT_TABLE' || cmd?.subtype !== 'AT_AddConstraint' || constraint?.contype !== 'CONSTR_FOREIGN') return null;
  if (typeof relation?.relname !== 'string') return null;
  const first = tokens.findIndex((t) => t.kind === 'word' && t.text.toLowerCase() === 'foreign');
  let last = tokens.length - 1;
  while (tokens[last]?.kind === 'semicolon') last--;
  // NOT VALID skips checking the rows already there; the rebuild checks them all, which is stricter.
  if (tokens[last]?.text.toLowerCase() === 'valid' && tokens[last - 1]?.text.toLowerCase() === 'not') last -= 2;
  const from = tokens[first];
  const to = tokens[last];
  if (from === undefined || to === undefined || last < first) return null;
  return {
    schema: typeof relation.schemaname === 'string' ? relation.schemaname : null,
    table: relation.relname,
    constraint: text.slice(from.start, to.end),
  };
}

/** A table's CREATE TABLE (as DuckDB prints it in duckdb_tables().sql), named `target` and with one more constraint. */
export function withConstraint(createSql: string, target: string, constraint: string): string | null {
  const name = /^CREATE TABLE ((?:"(?:[^"]|"")*"|[^\s(."]+)(?:\.(?:"(?:[^"]|"")*"|[^\s(."]+))*)\(/.exec(createSql);
  const end = createSql.lastIndexOf(')');
  if (name === null || end < 0) return null;
  return `CREATE TABLE ${target}(${createSql.slice(name[0].length, end)}, ${constraint})`;
}
