import { quoteIdentifier } from '../../../sql/identifiers.js';
import type { ParsedStatement } from '../../../sql/parsed.js';
import { strings } from '../../../sql/pg-tree.js';

/** The kinds of object a DROP names as relations, with DuckDB's word for each. */
const RELATION_KINDS: Readonly<Record<string, string>> = {
  OBJECT_TABLE: 'TABLE',
  OBJECT_VIEW: 'VIEW',
  OBJECT_SEQUENCE: 'SEQUENCE',
  OBJECT_INDEX: 'INDEX',
};

/**
 * `DROP TABLE a, b` and `DROP TABLE public.t`: DuckDB drops one object per
 * statement, and has no schema `public` (its `main` is PostgreSQL's
 * public). Such a DROP becomes one DROP per object, which the handler runs
 * in one transaction; null for any other statement (DuckDB runs it as it
 * is).
 */
export function translateDrop(statement: ParsedStatement): readonly string[] | null {
  // Only a DROP is parsed for it: a statement's tree is read once, and most rules never ask for it.
  if (statement.tokens.find((t) => t.kind === 'word')?.text.toLowerCase() !== 'drop') return null;
  const drop = statement.tree?.DropStmt as Record<string, unknown> | undefined;
  const kind = drop === undefined ? undefined : RELATION_KINDS[String(drop.removeType)];
  if (drop === undefined || kind === undefined) return null;
  const names = ((drop.objects as Array<Record<string, unknown>> | undefined) ?? []).map((o) =>
    strings((o.List as Record<string, unknown> | undefined)?.items),
  );
  if (names.some((n) => n.length === 0)) return null;
  const inPublic = (n: readonly string[]): boolean => n.length >= 2 && n[n.length - 2] === 'public';
  if (names.length < 2 && !names.some(inPublic)) return null;
  const options = `${drop.missing_ok === true ? ' IF EXISTS' : ''}`;
  const behavior = drop.behavior === 'DROP_CASCADE' ? ' CASCADE' : '';
  return names.map((n) => {
    const name = n.map((part, i) => (i === n.length - 2 && part === 'public' ? 'main' : part)).map(quoteIdentifier);
    return `DROP ${kind}${options} ${name.join('.')}${behavior}`;
  });
}
