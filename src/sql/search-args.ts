import { parsedOf, type SqlSource, textOf } from './parsed.js';

/** The query texts of a statement's cot_search() calls: literal strings, and parameters by number. */
export interface SearchArgs {
  /** Whether the statement calls cot_search() at all. */
  readonly searches: boolean;
  readonly literals: readonly string[];
  /** 1-based parameter numbers. */
  readonly params: readonly number[];
}

export const NO_SEARCH: SearchArgs = { searches: false, literals: [], params: [] };

type Node = Record<string, unknown>;

/** A string constant or a parameter, through casts ('text'::text, CAST($1 AS varchar)). */
function queryArg(e: Node | undefined, literals: string[], params: number[]): void {
  const c = e?.A_Const as Node | undefined;
  const sval = (c?.sval as { sval?: string } | undefined)?.sval;
  if (c !== undefined && c.sval !== undefined) literals.push(sval ?? '');
  const p = e?.ParamRef as { number?: number } | undefined;
  if (p?.number !== undefined) params.push(p.number);
  const cast = e?.TypeCast as Node | undefined;
  if (cast !== undefined) queryArg(cast.arg as Node | undefined, literals, params);
}

/**
 * Where a statement's cot_search() calls take their query text from, read
 * from PostgreSQL's parse tree, so that a remote embedder's vectors are at
 * hand before DuckDB asks for them. A query text computed in the statement
 * is not found here; DuckDB then asks for a vector nobody fetched, and the
 * macro says so.
 */
export function searchArgs(sql: SqlSource): SearchArgs {
  if (!/cot_search/i.test(textOf(sql))) return NO_SEARCH;
  const calls = parsedOf(sql).calls;
  if (calls === null) return { searches: true, literals: [], params: [] };
  const literals: string[] = [];
  const params: number[] = [];
  let searches = false;
  for (const call of calls) {
    if (call.name.toLowerCase() !== 'cot_search') continue;
    searches = true;
    const named = call.args.find((a) => (a.NamedArgExpr as Node | undefined)?.name === 'query')?.NamedArgExpr as Node | undefined;
    queryArg(named === undefined ? call.args[0] : (named.arg as Node | undefined), literals, params);
  }
  return { searches, literals, params };
}
