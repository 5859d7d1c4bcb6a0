import { quoteIdentifier, quoteLiteral } from '../../../../sql/identifiers.js';
import { strings } from '../../../../sql/pg-tree.js';
import type { Token } from '../../../../sql/lexer.js';
import { type Node, type Walker, wordOf } from './walker.js';

/**
 * Clauses of queries and DML that DuckDB lacks or reads otherwise: row
 * locks, an empty select list in EXISTS, a sequence read as a relation,
 * OVERRIDING SYSTEM VALUE.
 */

/** The columns of a sequence read as a relation. */
const SEQUENCE_COLUMNS = new Set(['last_value', 'is_called', 'log_cnt']);

/**
 * `SELECT ... FOR UPDATE [OF t] [NOWAIT]` (and FOR SHARE ...): DuckDB has
 * no row locks and refuses the clause. Without it, a transaction that then
 * changes a row another changed first fails at that write (40001) instead
 * of waiting: the same rows are never silently overwritten. With SKIP
 * LOCKED (job queues), the rows are locked by the server (lockRowsSkipped).
 */
export function lockingClause(w: Walker, select: Node): void {
  if (!Array.isArray(select.lockingClause)) return;
  for (let i = 0; i < w.tokens.length; i++) {
    if (wordOf(w.tokens[i]) !== 'for') continue;
    let j = i + 1;
    const word = (k: number): string => wordOf(w.tokens[k]) ?? '';
    if (word(j) === 'update' || word(j) === 'share') j += 1;
    else if (word(j) === 'no' && word(j + 1) === 'key' && word(j + 2) === 'update') j += 3;
    else if (word(j) === 'key' && word(j + 1) === 'share') j += 2;
    else continue;
    if (word(j) === 'of') {
      j++;
      for (;;) {
        const name = w.dotted(j);
        if (name === null) break;
        j = name.next;
        if (w.tokens[j]?.text !== ',') break;
        j++;
      }
    }
    if (word(j) === 'nowait') j++;
    else if (word(j) === 'skip' && word(j + 1) === 'locked') j += 2;
    w.replaceTokens(i, j, '');
    i = j - 1;
  }
  const skip = lockedSkipping(select);
  if (skip !== null) lockRowsSkipped(w, select, skip);
}

/** The lock a SELECT ... SKIP LOCKED takes of its one table's rows, or null for a query that skips none. */
function lockedSkipping(select: Node): { readonly range: Node; readonly mode: 'exclusive' | 'shared' } | null {
  const clauses = ((select.lockingClause as Node[] | undefined) ?? []).map((c) => c.LockingClause as Node);
  const skipping = clauses.filter((c) => c.waitPolicy === 'LockWaitSkip');
  if (skipping.length === 0) return null;
  const from = select.fromClause as Node[] | undefined;
  const range = from?.length === 1 ? (from[0]?.RangeVar as Node | undefined) : undefined;
  if (range === undefined) return null;
  const exclusive = skipping.some((c) => c.strength === 'LCS_FORUPDATE' || c.strength === 'LCS_FORNOKEYUPDATE');
  return { range, mode: exclusive ? 'exclusive' : 'shared' };
}

/**
 * Why a statement's SKIP LOCKED cannot be kept, or null: the server locks
 * the rows of one table read alone (a job queue's claim), not of a join, a
 * set operation or a WITH inside the locking query.
 */
export function skipLockedRefusal(tree: unknown): string | null {
  let refusal: string | null = null;
  const visit = (v: unknown): void => {
    if (refusal !== null || v === null || typeof v !== 'object') return;
    if (Array.isArray(v)) {
      for (const x of v) visit(x);
      return;
    }
    const select = (v as Node).SelectStmt as Node | undefined;
    if (select !== undefined && Array.isArray(select.lockingClause)) {
      const skips = (select.lockingClause as Node[]).some((c) => (c.LockingClause as Node).waitPolicy === 'LockWaitSkip');
      if (skips && (lockedSkipping(select) === null || select.withClause !== undefined)) {
        refusal = 'SKIP LOCKED is kept for a query of one table (SELECT ... FROM t WHERE ... FOR UPDATE SKIP LOCKED), not a join or a WITH inside it';
      }
    }
    for (const x of Object.values(v as Node)) visit(x);
  };
  visit(tree);
  return refusal;
}

/**
 * `SELECT ... FROM t WHERE ... ORDER BY ... LIMIT n FOR UPDATE SKIP LOCKED`:
 * the rows other sessions lock are left out before the LIMIT, and the rows
 * the query returns are locked for the transaction after it, by the
 * server's lock table (cot_row_free, cot_row_take: handler/advisory-locks.ts).
 * The query becomes
 * `SELECT * EXCLUDE (cot_rowid) FROM (SELECT ..., t.cot_rowid FROM (SELECT *, rowid AS cot_rowid FROM t WHERE cot_row_free(...)) AS t ...) AS cot_locked WHERE cot_row_take(...)`:
 * a row another session took between the two is skipped too.
 */
function lockRowsSkipped(w: Walker, select: Node, skip: { readonly range: Node; readonly mode: 'exclusive' | 'shared' }): void {
  const { range, mode } = skip;
  const first = w.leftmost(select.targetList);
  const relation = w.index(range.location);
  if (first === null || relation === null) return;
  let start = first - 1;
  while (start >= 0 && wordOf(w.tokens[start]) !== 'select') start--;
  const name = w.dotted(relation);
  if (start < 0 || name === null || wordOf(w.tokens[relation - 1]) !== 'from') return;
  const open = w.tokens[start - 1]?.text === '(' ? start - 1 : null;
  let end = open === null ? w.tokens.length - 1 : (w.closing(open) ?? w.tokens.length) - 1;
  if (w.tokens[end]?.text === ';') end--;
  const relname = String(range.relname);
  // One key per table however a session spells it: main is public.
  const schema = String(range.schemaname ?? 'public').toLowerCase();
  const key = quoteLiteral(`${schema === 'main' ? 'public' : schema}.${relname.toLowerCase()}`);
  const aliasName = (range.alias as Node | undefined)?.aliasname as string | undefined;
  const star = ((select.targetList as Node[]) ?? []).some(
    (t) =>
      (((t.ResTarget as Node | undefined)?.val as Node | undefined)?.ColumnRef as Node | undefined)?.fields !== undefined &&
      ((((t.ResTarget as Node).val as Node).ColumnRef as Node).fields as Node[]).some((f) => f.A_Star !== undefined),
  );
  w.insertBefore(start, 'SELECT * EXCLUDE (cot_rowid) FROM (');
  if (!star) w.insertBefore(relation - 1, `, ${quoteIdentifier(aliasName ?? relname)}.cot_rowid `);
  w.insertBefore(relation, '(SELECT *, rowid AS cot_rowid FROM ');
  w.insertAfter(name.next - 1, ` WHERE cot_row_free(${key}, rowid, '${mode}'))${aliasName === undefined ? ` AS ${quoteIdentifier(relname)}` : ''}`);
  w.insertAfter(end, `) AS cot_locked WHERE cot_row_take(${key}, cot_rowid, '${mode}')`);
}

/** `EXISTS (SELECT FROM t WHERE ...)`: PostgreSQL allows an empty select list (drizzle-kit writes one); DuckDB wants a column. */
export function emptySelectList(w: Walker, link: Node): void {
  const select = (link.subselect as Node | undefined)?.SelectStmt as Node | undefined;
  if (link.subLinkType !== 'EXISTS_SUBLINK' || select === undefined || select.targetList !== undefined || select.fromClause === undefined) return;
  const i = w.index(link.location);
  if (i === null || wordOf(w.tokens[i]) !== 'exists' || w.tokens[i + 1]?.text !== '(' || wordOf(w.tokens[i + 2]) !== 'select') return;
  w.insertAfter(i + 2, ' 1');
}

/**
 * `SELECT last_value, is_called FROM s`: a sequence read as a one-row
 * relation (pg_dump's data for a sequence). DuckDB's sequences are not
 * relations; their state is in duckdb_sequences().
 */
export function sequenceRelation(w: Walker, select: Node): void {
  const from = select.fromClause as Node[] | undefined;
  const rv = from?.length === 1 ? (from[0]?.RangeVar as Node | undefined) : undefined;
  const targets = (select.targetList as Node[] | undefined) ?? [];
  if (rv === undefined || typeof rv.relname !== 'string' || rv.alias !== undefined || targets.length === 0) return;
  for (const t of targets) {
    const fields = strings((((t.ResTarget as Node | undefined)?.val as Node | undefined)?.ColumnRef as Node | undefined)?.fields);
    if (fields.length !== 1 || !SEQUENCE_COLUMNS.has(fields[0] as string)) return;
  }
  const i = w.index(rv.location);
  const name = i === null ? null : w.dotted(i);
  if (i === null || name === null) return;
  const schema = typeof rv.schemaname === 'string' ? (rv.schemaname === 'public' ? 'main' : rv.schemaname) : null;
  w.replacedRelations.add(rv.location as number);
  w.replaceTokens(
    i,
    name.next,
    `(SELECT coalesce(s.last_value, s.start_value) AS last_value, s.last_value IS NOT NULL AS is_called, CAST(0 AS BIGINT) AS log_cnt
        FROM duckdb_sequences() s WHERE s.sequence_name = ${quoteLiteral(rv.relname)}${schema === null ? '' : ` AND s.schema_name = ${quoteLiteral(schema)}`}
        ORDER BY s.database_name = 'temp' DESC LIMIT 1) AS ${quoteIdentifier(rv.relname)}`,
  );
}

/** `INSERT ... OVERRIDING SYSTEM VALUE`: the handler has allowed the identity's value (planner.ts); DuckDB does not parse the clause. */
export function overriding(w: Walker, insert: Node): void {
  if (insert.override !== 'OVERRIDING_SYSTEM_VALUE') return;
  const i = w.tokens.findIndex((t, k) => wordOf(t) === 'overriding' && wordOf(w.tokens[k + 1]) === 'system' && wordOf(w.tokens[k + 2]) === 'value');
  if (i >= 0) w.replaceTokens(i, i + 3, '');
}

/**
 * `SELECT DISTINCT ON (a, b) ...` without ORDER BY: PostgreSQL sorts by the
 * DISTINCT ON expressions to find each group's first row, and returns the
 * rows in that order; clients rely on it (drizzle-kit reads an index's
 * columns so, one row per column). DuckDB's DISTINCT ON hashes, and returns
 * them in any order: the outermost query gets the ORDER BY PostgreSQL's
 * plan implies. Only a query that ends there (no LIMIT, OFFSET, locking or
 * set operation) is given one.
 */
export function distinctOnOrder(w: Walker, select: Node): void {
  const distinct = select.distinctClause as Node[] | undefined;
  if (!Array.isArray(distinct) || distinct.length === 0 || distinct.some((d) => Object.keys(d).length === 0)) return;
  if (select.sortClause !== undefined || select.limitCount !== undefined || select.limitOffset !== undefined || select.lockingClause !== undefined) return;
  if (w.tokens.some((t) => ['union', 'intersect', 'except'].includes(wordOf(t) ?? ''))) return;
  const at = w.tokens.findIndex((t, i) => wordOf(t) === 'distinct' && wordOf(w.tokens[i + 1]) === 'on' && w.tokens[i + 2]?.text === '(');
  const close = at < 0 ? null : w.closing(at + 2);
  if (close === null || w.tokens[0] === undefined || wordOf(w.tokens[0]) !== 'select') return;
  const open = w.tokens[at + 2] as Token;
  const keys = w.text.slice(open.end, (w.tokens[close] as Token).start);
  // Column names only: an expression there may be rewritten itself, and the copy after ORDER BY would not be.
  if (!/^[\s\w".,$]+$/.test(keys)) return;
  let last = w.tokens.length - 1;
  while (last > 0 && w.tokens[last]?.kind === 'semicolon') last--;
  w.insertAfter(last, ` ORDER BY ${keys}`);
}
