import { parseSync } from 'libpg-query';

/**
 * PostgreSQL's parse tree of one statement (libpg-query), for the rules
 * that read a client's SQL the way PostgreSQL reads it.
 */
export type PgNode = Record<string, unknown>;

/** What libpg-query makes of a text: its statements, or null when PostgreSQL cannot parse it. */
export interface PgParse {
  readonly stmts: readonly PgNode[];
  /** The whole result, every statement's tree under it, for walks that look at all of them. */
  readonly raw: unknown;
}

/** The one call of libpg-query's parser behind every reading of a client's statement (sql/parsed.ts). */
export function parseStatements(text: string): PgParse | null {
  try {
    const raw = parseSync(text) as { stmts?: Array<{ stmt: PgNode }> };
    return { stmts: (raw.stmts ?? []).map((s) => s.stmt), raw };
  } catch {
    return null;
  }
}

/** The statement's parse tree, or null when the text is not one PostgreSQL statement (DuckDB-only syntax, several statements). */
export function parseOne(text: string): PgNode | null {
  return onlyStatement(parseStatements(text));
}

/** The one statement of a parse, or null for none, several, or a text PostgreSQL cannot parse. */
export function onlyStatement(parse: PgParse | null): PgNode | null {
  return parse?.stmts.length === 1 ? (parse.stmts[0] ?? null) : null;
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

/** Every function call in a parse, at any depth of any of its statements; null when PostgreSQL cannot parse the text. */
export function callsIn(parse: PgParse | null): FunctionCall[] | null {
  if (parse === null) return null;
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
  visit(parse.raw);
  return out;
}
