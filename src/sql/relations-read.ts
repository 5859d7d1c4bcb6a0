import type { Token } from './lexer.js';
import type { PgNode } from './pg-tree.js';

/**
 * Whether a query can read no ledger row: what lets it skip the wait for
 * acknowledged appends to reach the engine, which costs an engine commit
 * whenever appends are pending (engines/duckdb/handler/plan.ts). The answer
 * errs one way only: a query it cannot see through is taken to read the
 * ledgers.
 */

/** What the caller knows of the schema's names at the time of asking. */
export interface SchemaKinds {
  /** Whether a relation the query names, by its name and schema (unqualified: undefined), is a table of the client's, and no view or ledger. */
  isPlainTable(name: string, schema: string | undefined): boolean;
  /** Whether a function, by its lower-case name, is one a client made (a macro may read any table). */
  isFunctionMade(name: string): boolean;
}

/** Nodes through which a query reads what its parse tree does not name: table functions, and what PostgreSQL's grammar reads as one. */
const OPAQUE = new Set(['RangeFunction', 'RangeTableFunc', 'JsonTable']);

/**
 * True when `tree` is a SELECT whose relations are all plain tables (or its
 * own CTEs), whose functions are all built in and not cotwire's, and whose
 * text nowhere names a ledger (`_cot...`, a name a regclass literal or a
 * size function could take).
 */
export function readsNoLedger(tree: PgNode | null, tokens: readonly Token[], kinds: SchemaKinds): boolean {
  if (tree === null || tree.SelectStmt === undefined) return false;
  for (const t of tokens) {
    if ((t.kind === 'word' || t.kind === 'quoted' || t.kind === 'string') && t.text.toLowerCase().includes('_cot')) return false;
  }
  const ctes = new Set<string>();
  const relations: Array<{ readonly name: string; readonly schema: string | undefined; readonly catalog: boolean }> = [];
  let opaque = false;
  const visit = (v: unknown): void => {
    if (opaque) return;
    if (Array.isArray(v)) {
      v.forEach(visit);
      return;
    }
    if (v === null || typeof v !== 'object') return;
    const node = v as PgNode;
    for (const [type, inner] of Object.entries(node)) {
      if (OPAQUE.has(type)) opaque = true;
      if (type === 'CommonTableExpr' && typeof (inner as PgNode).ctename === 'string') ctes.add(((inner as PgNode).ctename as string).toLowerCase());
      if (type === 'RangeVar') {
        const r = inner as PgNode;
        relations.push({
          name: String(r.relname ?? ''),
          schema: typeof r.schemaname === 'string' ? r.schemaname : undefined,
          catalog: typeof r.catalogname === 'string',
        });
      }
      if (type === 'FuncCall') {
        const names =
          ((inner as PgNode).funcname as PgNode[] | undefined)?.map((n) => String((n.String as PgNode | undefined)?.sval ?? '').toLowerCase()) ?? [];
        const name = names.at(-1) ?? '';
        if (names.length > 2 || (names.length === 2 && names[0] !== 'pg_catalog') || name.startsWith('cot_') || kinds.isFunctionMade(name)) opaque = true;
      }
      visit(inner);
    }
  };
  visit(tree);
  if (opaque) return false;
  return relations.every((r) => !r.catalog && ((r.schema === undefined && ctes.has(r.name.toLowerCase())) || kinds.isPlainTable(r.name, r.schema)));
}
