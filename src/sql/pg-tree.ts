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

/** A function call found in a parse tree: its unqualified name (as written) and its arguments. */
export interface FunctionCall {
  readonly name: string;
  readonly args: readonly PgNode[];
}

/** Every function call in a statement's parse tree, at any depth; null when PostgreSQL cannot parse the text. */
export function functionCalls(sql: string): FunctionCall[] | null {
  let tree: unknown;
  try {
    tree = parseSync(sql);
  } catch {
    return null;
  }
  const out: FunctionCall[] = [];
  const visit = (v: unknown): void => {
    if (Array.isArray(v)) v.forEach(visit);
    else if (v !== null && typeof v === 'object') {
      const call = (v as PgNode).FuncCall as PgNode | undefined;
      if (call !== undefined) {
        const names = strings(call.funcname);
        out.push({ name: names[names.length - 1] ?? '', args: (call.args as PgNode[] | undefined) ?? [] });
      }
      for (const x of Object.values(v as PgNode)) visit(x);
    }
  };
  visit(tree);
  return out;
}
