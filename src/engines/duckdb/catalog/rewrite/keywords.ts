import type { Node, Walker } from './walker.js';

/** Column names that DuckDB's grammar reserves and PostgreSQL's does not, quoted. */

/** Words DuckDB's grammar reserves (fully, or from column names) that PostgreSQL takes as column names. */
export const DUCKDB_ONLY_KEYWORDS = new Set([
  'anti',
  'asof',
  'at',
  'by',
  'columns',
  'generated',
  'glob',
  'map',
  'positional',
  'semi',
  'struct',
  'try_cast',
  'unpack',
  'describe',
  'lambda',
  'pivot',
  'pivot_longer',
  'pivot_wider',
  'qualify',
  'show',
  'summarize',
  'unpivot',
]);

/**
 * A column named by a word DuckDB's grammar keeps for itself and PostgreSQL
 * does not (`at`, `by`, `show`, ...: pandas' to_sql writes such names
 * bare): quoted, as DuckDB then reads it as a name.
 */
function quoteKeywordAt(w: Walker, location: unknown): void {
  const i = w.index(location);
  const t = i === null ? undefined : w.tokens[i];
  if (i !== null && t?.kind === 'word' && DUCKDB_ONLY_KEYWORDS.has(t.text.toLowerCase())) w.replaceTokens(i, i + 1, `"${t.text.toLowerCase()}"`);
}

/** `SELECT at, t.by FROM t`: each part of a column reference. */
export function quoteKeywordParts(w: Walker, ref: Node): void {
  const i = w.index(ref.location);
  const name = i === null ? null : w.dotted(i);
  if (i === null || name === null) return;
  for (let k = i; k < name.next; k += 2) {
    const t = w.tokens[k];
    if (t?.kind === 'word' && DUCKDB_ONLY_KEYWORDS.has(t.text.toLowerCase())) w.replaceTokens(k, k + 1, `"${t.text.toLowerCase()}"`);
  }
}

/** `CREATE TABLE t (at timestamp)`. */
export function columnDefinition(w: Walker, def: Node): void {
  quoteKeywordAt(w, def.location);
}

/** `INSERT INTO t (at, by) ...`. */
export function insertColumns(w: Walker, insert: Node): void {
  for (const c of (insert.cols as Node[] | undefined) ?? []) quoteKeywordAt(w, (c.ResTarget as Node | undefined)?.location);
}

/** `UPDATE t SET at = ...`. */
export function updateTargets(w: Walker, update: Node): void {
  for (const c of (update.targetList as Node[] | undefined) ?? []) quoteKeywordAt(w, (c.ResTarget as Node | undefined)?.location);
}
