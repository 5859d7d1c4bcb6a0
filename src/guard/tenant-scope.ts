import type { Token } from '../sql/lexer.js';
import type { ParsedStatement } from '../sql/parsed.js';
import { type Node, Spans, wordOf } from '../sql/spans.js';
import { quoteLiteral } from '../sql/identifiers.js';
import type { ProtectedNames } from './names.js';
import type { Refusal } from './refusal.js';

/**
 * Tenants: a user with an org_id reads only its organisation's rows. Every
 * reference to a ledger in such a user's statement is replaced, before the
 * engine sees the statement, by a subquery that reads the same relation
 * through a filter the server writes:
 *
 *   FROM _cot_steps s   →   FROM (SELECT * FROM _cot_steps WHERE org_id = 'a') s
 *
 * The name inside the subquery is the client's, as written, so the engine
 * resolves it exactly as it would have; nothing the client writes around
 * the subquery can reach the rows the filter leaves out. References are
 * found in PostgreSQL's parse tree of the statement, at any depth (joins,
 * subqueries, WITH, EXPLAIN, DECLARE, PREPARE); a statement PostgreSQL
 * cannot parse that names a ledger is refused, since nothing then says
 * where its references are.
 */

/** Which rows of one ledger a scoped user reads: a predicate over its columns, or null for every row (the log's own history). */
export type LedgerPredicate = (name: string, schema: string | null) => string | null;

/** The predicates an organisation's users read each ledger through, by what the ledger holds. */
export interface TenantLedgers {
  /** Whether the ledgers of this name (in this schema, or any) have an org_id column. */
  hasOrgColumn(name: string, schema: string | null): boolean;
  /** The steps ledger as the engine names it, for ledgers whose rows belong to a step (vectors, redactions). */
  readonly stepsRelation: string;
}

/** Ledgers every user reads whole: the global log's checkpoints and its own events, one history for all. */
const SHARED = new Set(['_cot_checkpoints', '_cot_log_events']);
/** Ledgers whose rows belong to a step of `_cot_steps`, by the column that names it. */
const BY_STEP: Readonly<Record<string, string>> = { _cot_embeddings: 'trace_id', _cot_redactions: 'target_trace_id' };

/** The predicate for an organisation: its rows of ledgers with org_id, its steps' rows of the records about steps, none of the rest. */
export function organisationPredicate(org: string, ledgers: TenantLedgers): LedgerPredicate {
  const own = `org_id = ${quoteLiteral(org)}`;
  return (name, schema) => {
    const n = name.toLowerCase();
    if (schema === null || schema === 'main' || schema === 'public' || schema === 'ledger') {
      if (SHARED.has(n)) return null;
      const step = BY_STEP[n];
      if (step !== undefined) return `${step} IN (SELECT trace_id FROM ${ledgers.stepsRelation} WHERE ${own})`;
    }
    return ledgers.hasOrgColumn(name, schema) ? own : 'false';
  };
}

/** Statements that name a relation without reading its rows: their references stay as written. */
const NO_READ = new Set(['LockStmt', 'VacuumStmt', 'TruncateStmt', 'IndexStmt', 'AlterTableStmt', 'RenameStmt', 'CommentStmt', 'GrantStmt', 'CreateStmt']);
/** Fields whose range variable is the statement's target, written and not read. */
const TARGET_OF: ReadonlySet<string> = new Set(['InsertStmt', 'UpdateStmt', 'DeleteStmt', 'MergeStmt']);

export type ScopeResult = { readonly text: string } | { readonly refusal: Refusal };

/** The refusal of a statement whose ledger references cannot be found with certainty. */
export function unscopableRefusal(name: string): Refusal {
  return {
    reason: 'tenant',
    operation: 'SELECT',
    target: name,
    message: `cannot read ledger table "${name}" in this statement: a user with an org_id reads ledgers only in statements PostgreSQL's grammar parses, where the server can restrict them to its organisation`,
    hint: 'Write the query in PostgreSQL syntax (SELECT ... FROM ledger ...), or call the cot_* functions.',
  };
}

/**
 * The statement with each ledger reference read through its predicate; the
 * same text when it names no ledger. A refusal when it names one in a form
 * the rewrite cannot place.
 */
export function scopeLedgerReads(
  statement: ParsedStatement,
  names: ProtectedNames,
  predicate: LedgerPredicate,
  select: (name: string) => string = () => '*',
): ScopeResult {
  const { text, tokens } = statement;
  const mentioned = names.mentions(tokens);
  if (mentioned.length === 0) return { text };
  const tree = statement.tree;
  if (tree === null) return { refusal: unscopableRefusal(mentioned[0] ?? '') };
  const top = Object.keys(tree)[0] ?? '';
  if (NO_READ.has(top)) return { text };
  const spans = new Spans(text, tokens);
  const edits: Array<{ start: number; end: number; text: string }> = [];
  let unplaced: string | null = null;
  const visit = (value: unknown, parentKind: string | null, field: string | null): void => {
    if (Array.isArray(value)) {
      for (const v of value) visit(v, parentKind, field);
      return;
    }
    if (value === null || typeof value !== 'object') return;
    const node = value as Node;
    if (typeof node.relname === 'string' && names.isProtected(node.relname)) {
      const target =
        field === 'relation' &&
        parentKind !== null &&
        (TARGET_OF.has(parentKind) || (parentKind === 'CopyStmt' && tree.CopyStmt !== undefined && (tree.CopyStmt as Node).is_from === true));
      if (!target) {
        const edit = rangeEdit(spans, node, predicate, parentKind === 'CopyStmt' && field === 'relation', select);
        if (edit === null) unplaced ??= node.relname;
        else if (edit !== undefined) edits.push(edit);
      }
    }
    for (const [k, v] of Object.entries(node)) {
      // A wrapper ({ SelectStmt: {...} }) names the kind of the node it holds.
      const kind = /^[A-Z]/.test(k) ? k : parentKind;
      visit(v, kind, /^[A-Z]/.test(k) ? null : k);
    }
  };
  visit(tree, null, null);
  if (unplaced !== null) return { refusal: unscopableRefusal(unplaced) };
  return { text: withEdits(text, edits) };
}

/** `text` with each span replaced, in order; a span inside one already replaced goes with it (it is kept as written there). */
export function withEdits(text: string, edits: Array<{ start: number; end: number; text: string }>): string {
  if (edits.length === 0) return text;
  edits.sort((a, b) => a.start - b.start);
  let out = '';
  let at = 0;
  for (const e of edits) {
    if (e.start < at) continue;
    out += text.slice(at, e.start) + e.text;
    at = e.end;
  }
  return out + text.slice(at);
}

/**
 * The edit that reads one range variable through its predicate: null when
 * its text cannot be found, undefined when it reads every row.
 */
function rangeEdit(
  spans: Spans,
  range: Node,
  predicate: LedgerPredicate,
  copied: boolean,
  select: (name: string) => string,
): { start: number; end: number; text: string } | null | undefined {
  const relname = range.relname as string;
  const schema = typeof range.schemaname === 'string' ? range.schemaname.toLowerCase() : null;
  const where = predicate(relname, schema);
  if (where === null) return undefined;
  const first = spans.index(range.location);
  const name = first === null ? null : spans.dotted(first);
  if (first === null || name === null || name.parts[name.parts.length - 1] !== relname) return null;
  const tokens = spans.tokens;
  const nameText = spans.text.slice((tokens[first] as Token).start, (tokens[name.next - 1] as Token).end);
  if (copied) {
    // COPY name [(columns)] TO ...: COPY (SELECT columns FROM name WHERE ...) TO ...
    const close = tokens[name.next]?.text === '(' ? spans.closing(name.next) : name.next - 1;
    if (close === null) return null;
    const columns = close === name.next - 1 ? '*' : spans.text.slice((tokens[name.next] as Token).end, (tokens[close] as Token).start);
    return { start: (tokens[first] as Token).start, end: (tokens[close] as Token).end, text: `(SELECT ${columns} FROM ${nameText} WHERE ${where})` };
  }
  let start = first;
  let end = name.next - 1;
  // `relation *` (inheritance, PostgreSQL's default) and `ONLY relation` read the relation itself.
  if (tokens[end + 1]?.text === '*') end += 1;
  const before = wordOf(tokens[start - 1]);
  if (before === 'only') start -= 1;
  const hasAlias = range.alias !== undefined;
  const alias = hasAlias ? '' : ` AS ${spans.text.slice((tokens[name.next - 1] as Token).start, (tokens[name.next - 1] as Token).end)}`;
  const subquery = `(SELECT ${select(relname)} FROM ${nameText} WHERE ${where})${alias}`;
  // TABLE name is SELECT * FROM name.
  if (wordOf(tokens[start - 1]) === 'table')
    return { start: (tokens[start - 1] as Token).start, end: (tokens[end] as Token).end, text: `SELECT * FROM ${subquery}` };
  return { start: (tokens[start] as Token).start, end: (tokens[end] as Token).end, text: subquery };
}

/** What the predicates need to know of the ledgers a catalog holds: their names, schemas and columns. */
export function tenantLedgers(
  ledgers: ReadonlyArray<{ readonly schema: string; readonly name: string; readonly columns: ReadonlyArray<{ readonly name: string }> }>,
  stepsRelation: string,
): TenantLedgers {
  return {
    stepsRelation,
    hasOrgColumn(name, schema) {
      const n = name.toLowerCase();
      const s = schema === 'public' || schema === 'ledger' ? 'main' : schema;
      const found = ledgers.filter((l) => l.name.toLowerCase() === n && (s === null || l.schema.toLowerCase() === s));
      return found.length > 0 && found.every((l) => l.columns.some((c) => c.name.toLowerCase() === 'org_id'));
    },
  };
}

/** An append to another organisation's (or agent's) session, as the security ledger records it. */
export function foreignSessionRefusal(err: {
  readonly ledger: string;
  readonly session: string;
  readonly message: string;
  readonly hint?: string | undefined;
}): Refusal {
  return { reason: 'tenant', operation: `INSERT INTO ${err.ledger}`, target: `session ${err.session}`, message: err.message, hint: err.hint ?? '' };
}
