import { quoteIdentifier as quoteIdent } from '../sql/identifiers.js';
import type { Token } from '../sql/lexer.js';
import type { ParsedStatement } from '../sql/parsed.js';
import { strings } from '../sql/pg-tree.js';
import { type Node, Spans } from '../sql/spans.js';
import { ProtectedNames } from './names.js';
import type { Refusal } from './refusal.js';
import { type LedgerPredicate, type ScopeResult, withEdits } from './tenant-scope.js';

/**
 * What PostgreSQL's catalog tells of a ledger's size and activity, which is
 * every organisation's: a user with an org_id reads pg_class with the
 * ledgers' row and page estimates hidden (reltuples -1, "not known", as
 * before the first ANALYZE), the activity views with the ledgers' counters
 * at 0, and the column statistics (pg_stats, whose values are rows'
 * values) without the ledgers'. Used on the PostgreSQL engine, where the
 * catalog is PostgreSQL's own (DuckDB's is cotwire's, which answers for the
 * organisation itself).
 */

/** The views of activity counters, by the column that names the table. */
export const COUNTER_VIEWS: ReadonlyMap<string, string> = new Map(
  [
    'pg_stat_all_tables',
    'pg_stat_user_tables',
    'pg_stat_sys_tables',
    'pg_stat_xact_all_tables',
    'pg_stat_xact_user_tables',
    'pg_stat_xact_sys_tables',
    'pg_statio_all_tables',
    'pg_statio_user_tables',
    'pg_statio_sys_tables',
    'pg_stat_all_indexes',
    'pg_stat_user_indexes',
    'pg_stat_sys_indexes',
    'pg_statio_all_indexes',
    'pg_statio_user_indexes',
    'pg_statio_sys_indexes',
  ].map((v) => [v, 'relname'] as const),
);

/** The views of column statistics, by the column that names the table: their rows hold values of the table's rows. */
const VALUE_VIEWS: ReadonlyMap<string, string> = new Map([
  ['pg_stats', 'tablename'],
  ['pg_stats_ext', 'tablename'],
  ['pg_stats_ext_exprs', 'tablename'],
]);

/** The columns of pg_class that count a relation's rows or pages, and what a scoped user reads instead. */
const PG_CLASS_COUNTS: ReadonlyMap<string, string> = new Map([
  ['reltuples', '-1::real'],
  ['relpages', '0'],
  ['relallvisible', '0'],
]);

const NUMBERS = new Set(['int2', 'int4', 'int8', 'float4', 'float8', 'numeric']);

/** The relations the rewrite reads columns of, in this PostgreSQL (they differ between versions). */
export const MASKED_RELATIONS: readonly string[] = ['pg_class', ...COUNTER_VIEWS.keys()];

class StatisticsNames extends ProtectedNames {
  override isProtected(name: string | undefined | null): boolean {
    const n = name?.toLowerCase() ?? '';
    return n === 'pg_class' || COUNTER_VIEWS.has(n) || VALUE_VIEWS.has(n);
  }
}

const names = new StatisticsNames();

/** The relations a scoped statement's catalog reads are rewritten for, with the tests scopeLedgerReads needs. */
export interface CatalogStatistics {
  readonly names: ProtectedNames;
  readonly predicate: LedgerPredicate;
  readonly select: (name: string) => string;
}

/** A catalog relation's columns: name and type name. */
export type CatalogColumns = ReadonlyMap<string, ReadonlyArray<{ readonly name: string; readonly type: string }>>;

/** The rewrite for ledgers named with `prefixes`, given the columns of MASKED_RELATIONS as this PostgreSQL has them. */
export function catalogStatistics(prefixes: readonly string[], columns: CatalogColumns): CatalogStatistics {
  const isLedger = (column: string): string => `(${prefixes.map((p) => `starts_with(${column}::text, '${p.replaceAll("'", "''")}')`).join(' OR ')})`;
  const lists = new Map<string, string>();
  for (const [relation, cols] of columns) {
    const nameColumn = COUNTER_VIEWS.get(relation) ?? 'relname';
    const list = cols.map(({ name, type }) => {
      const masked = relation === 'pg_class' ? PG_CLASS_COUNTS.get(name) : NUMBERS.has(type) ? '0' : undefined;
      const id = quoteIdent(name);
      return masked === undefined ? id : `CASE WHEN ${isLedger(nameColumn)} THEN ${masked} ELSE ${id} END AS ${id}`;
    });
    if (list.length > 0) lists.set(relation, list.join(', '));
  }
  return {
    names,
    predicate: (name, schema) => {
      if (schema !== null && schema !== 'pg_catalog') return null;
      const n = name.toLowerCase();
      const valuesOf = VALUE_VIEWS.get(n);
      if (valuesOf !== undefined) return `NOT ${isLedger(valuesOf)}`;
      return lists.has(n) ? 'true' : null;
    },
    select: (name) => lists.get(name.toLowerCase()) ?? '*',
  };
}

/** The functions that give a relation's size on disk, which grows with every organisation's rows. */
const SIZE_FUNCTIONS = new Set(['pg_relation_size', 'pg_total_relation_size', 'pg_table_size', 'pg_indexes_size']);

/**
 * The statement with each call of a size function answering 0 for a
 * ledger and its indexes (named with `prefixes`), as for a relation never
 * written; other relations' sizes are PostgreSQL's. A refusal when a call
 * cannot be found in the text.
 */
export function scopeSizeCalls(statement: ParsedStatement, prefixes: readonly string[]): ScopeResult {
  const { text, tree } = statement;
  if (tree === null || !/_size\s*\(/i.test(text)) return { text };
  const spans = new Spans(text, statement.tokens);
  const tokens = spans.tokens;
  const edits: Array<{ start: number; end: number; text: string }> = [];
  let unplaced: string | null = null;
  const isLedger = `(${prefixes.map((p) => `starts_with(c.relname::text, '${p.replaceAll("'", "''")}')`).join(' OR ')})`;
  const visit = (value: unknown): void => {
    if (Array.isArray(value)) value.forEach(visit);
    if (value === null || typeof value !== 'object' || Array.isArray(value)) return;
    const node = value as Node;
    const call = node.FuncCall as Node | undefined;
    const name = call === undefined ? '' : (strings(call.funcname).at(-1) ?? '').toLowerCase();
    if (call !== undefined && SIZE_FUNCTIONS.has(name)) {
      const span = spans.callSpan(spans.index(call.location));
      if (span === null) unplaced ??= name;
      else {
        // The relation is the first argument: up to the first comma outside brackets.
        let end = span.open + 1;
        for (let depth = 0; end < span.close; end++) {
          const t = (tokens[end] as Token).text;
          if (t === '(' || t === '[') depth++;
          else if (t === ')' || t === ']') depth--;
          else if (t === ',' && depth === 0) break;
        }
        const start = (tokens[span.i] as Token).start;
        const stop = (tokens[span.close] as Token).end;
        const relation = text.slice((tokens[span.open] as Token).end, (tokens[end - 1] as Token).end);
        const original = text.slice(start, stop);
        edits.push({
          start,
          end: stop,
          text: `(CASE WHEN (SELECT ${isLedger} FROM pg_catalog.pg_class c WHERE c.oid = (${relation})::regclass) THEN 0::bigint ELSE ${original} END)`,
        });
      }
    }
    for (const v of Object.values(node)) visit(v);
  };
  visit(tree);
  if (unplaced !== null) return { refusal: unplacedSizeCall(unplaced) };
  // A call inside another's arguments is inside the other's text, which is kept as written.
  return { text: withEdits(text, edits) };
}

function unplacedSizeCall(name: string): Refusal {
  return {
    reason: 'tenant',
    operation: `${name}()`,
    target: name,
    message: `cannot call ${name}() in this statement: a user with an org_id is told the size of relations only where the server can tell a ledger's apart`,
    hint: `Call ${name}() on its own, with the relation as its first argument.`,
  };
}
