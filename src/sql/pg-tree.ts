import { parseSync } from 'libpg-query';

/**
 * PostgreSQL's parse tree of one statement (libpg-query), for the rules
 * that read a client's SQL the way PostgreSQL reads it.
 */
export type PgNode = Record<string, unknown>;

/** The statement's parse tree, or null when the text is not one PostgreSQL statement (DuckDB-only syntax, several statements). */
export function parseOne(text: string): PgNode | null {
  try {
    const tree = parseSync(text) as { stmts?: Array<{ stmt: PgNode }> };
    return tree.stmts?.length === 1 ? (tree.stmts[0]?.stmt ?? null) : null;
  } catch {
    return null;
  }
}

/** A list of String nodes (a qualified name, a column list) as its strings. */
export function strings(list: unknown): string[] {
  return Array.isArray(list) ? list.map((x) => (x as { String?: { sval?: string } }).String?.sval ?? '') : [];
}
