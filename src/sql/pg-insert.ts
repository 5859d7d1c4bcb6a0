import { scanSync } from 'libpg-query';
import { quoteIdentifier } from './identifiers.js';

/**
 * An INSERT cut into the pieces cotwire evaluates itself when the target is
 * a ledger on a PostgreSQL engine: its WITH clause, its rows' source, its
 * RETURNING list. The cuts are made at PostgreSQL's own tokens (libpg-query's
 * scanner) and at the parse tree's locations, never by searching the text.
 */

export interface InsertPieces {
  /** `WITH ...` before INSERT, or ''. */
  readonly withText: string;
  /** The target columns as listed, or null when the INSERT lists none. */
  readonly columns: readonly string[] | null;
  /** The rows' source (VALUES ..., SELECT ..., (...)), DEFAULT in a VALUES list written as NULL; null for DEFAULT VALUES. */
  readonly source: string | null;
  /** The RETURNING list's text, or null. */
  readonly returning: string | null;
  /** The name RETURNING may qualify columns with: the alias, or the table's name. */
  readonly alias: string;
}

interface Token {
  readonly start: number;
  readonly end: number;
  readonly text: string;
}

type Node = Record<string, unknown>;

/** Byte locations of every DEFAULT inside a VALUES list. */
function defaults(node: unknown, out: number[] = []): number[] {
  if (Array.isArray(node)) for (const x of node) defaults(x, out);
  else if (node !== null && typeof node === 'object') {
    const d = (node as { SetToDefault?: { location?: number } }).SetToDefault;
    if (d !== undefined && typeof d.location === 'number') out.push(d.location);
    for (const v of Object.values(node)) defaults(v, out);
  }
  return out;
}

/** PostgreSQL's tokens of a statement, comments left out. */
function scanTokens(text: string): Token[] {
  return (scanSync(text) as { tokens: Array<Token & { tokenName?: string }> }).tokens.filter(
    (t) => t.tokenName !== 'SQL_COMMENT' && t.tokenName !== 'C_COMMENT',
  );
}

type Target = { readonly relname: string; readonly location: number; readonly alias?: { readonly aliasname?: string } };

/** The index of the INSERT target's first token, and of the token after its (qualified) name and alias; null when the tree's location is not a token's. */
function targetTokens(tokens: readonly Token[], relation: Target): { readonly at: number; readonly after: number } | null {
  const at = tokens.findIndex((t) => t.start === relation.location);
  if (at < 0) return null;
  let i = at + 1;
  while (tokens[i]?.text === '.') i += 2;
  if (tokens[i]?.text.toUpperCase() === 'AS') i += 2;
  else if (relation.alias?.aliasname !== undefined) i += 1;
  return { at, after: i };
}

export function insertPieces(text: string, insert: Node): InsertPieces {
  const bytes = Buffer.from(text, 'utf8');
  const slice = (from: number, to: number): string => bytes.subarray(from, to).toString('utf8');
  const tokens = scanTokens(text);
  const relation = insert.relation as Target;
  const target = targetTokens(tokens, relation);
  if (target === null) throw new Error('the INSERT target is not where the parse tree puts it');
  const insertToken = tokens.slice(0, target.at).findLastIndex((t) => t.text.toUpperCase() === 'INSERT');
  // Every piece ends at its last token, not at the text after it: a trailing `--` comment would swallow what cotwire writes after it.
  const endOfTokenBefore = (index: number): number => (index > 0 ? (tokens[index - 1] as Token).end : 0);
  const withText = insert.withClause === undefined || insertToken < 0 ? '' : slice(0, endOfTokenBefore(insertToken)).trim();
  // After the target's (qualified) name and alias: its column list, OVERRIDING ... VALUE.
  let i = target.after;
  const alias = relation.alias?.aliasname;
  const cols = (insert.cols as Array<{ ResTarget: { name: string } }> | undefined)?.map((c) => c.ResTarget.name) ?? null;
  if (cols !== null && tokens[i]?.text === '(') {
    for (let depth = 0; i < tokens.length; i++) {
      const t = (tokens[i] as Token).text;
      if (t === '(') depth++;
      else if (t === ')' && --depth === 0) {
        i++;
        break;
      }
    }
  }
  if (tokens[i]?.text.toUpperCase() === 'OVERRIDING') i += 3;
  const returningList = (insert.returningList ?? (insert.returningClause as { exprs?: unknown } | undefined)?.exprs) as unknown[] | undefined;
  let returningAt = -1;
  if (returningList !== undefined && returningList.length > 0) {
    for (let j = tokens.length - 1, depth = 0; j > i; j--) {
      const t = (tokens[j] as Token).text;
      if (t === ')') depth++;
      else if (t === '(') depth--;
      else if (depth === 0 && t.toUpperCase() === 'RETURNING') {
        returningAt = j;
        break;
      }
    }
  }
  const sourceStart = (tokens[i] as Token | undefined)?.start ?? bytes.length;
  const lastToken = tokens.findLastIndex((t) => t.text !== ';');
  const sourceEnd = returningAt < 0 ? ((tokens[lastToken] as Token | undefined)?.end ?? bytes.length) : endOfTokenBefore(returningAt);
  let source: string | null = null;
  if (insert.selectStmt !== undefined) {
    // DEFAULT is the column's default, and a ledger's client columns default to NULL; a subquery has no DEFAULT.
    const cuts = defaults(insert.selectStmt)
      .filter((at) => at >= sourceStart && at < sourceEnd)
      .sort((a, b) => a - b);
    let out = '';
    let from = sourceStart;
    for (const at of cuts) {
      out += `${slice(from, at)}NULL`;
      from = at + 'DEFAULT'.length;
    }
    source = (out + slice(from, sourceEnd)).trim().replace(/;$/, '');
  }
  const returning = returningAt < 0 ? null : slice((tokens[returningAt] as Token).end, (tokens[lastToken] as Token).end).trim();
  return { withText, columns: cols, source, returning, alias: alias ?? relation.relname };
}

/**
 * An INSERT without a column list, given one: its first `names` columns.
 * PostgreSQL fills a table's columns in order from an INSERT's values and
 * gives the rest their defaults (`INSERT INTO t VALUES (1)` into three
 * columns); DuckDB wants a value for every column unless the columns are
 * listed. Null when the INSERT lists its columns already.
 */
export function withTargetColumns(text: string, insert: Node, names: readonly string[]): string | null {
  if (insert.cols !== undefined) return null;
  const tokens = scanTokens(text);
  const target = targetTokens(tokens, insert.relation as Target);
  if (target === null) return null;
  const bytes = Buffer.from(text, 'utf8');
  const at = (tokens[target.after - 1] as Token).end;
  return `${bytes.subarray(0, at).toString('utf8')} (${names.map(quoteIdentifier).join(', ')})${bytes.subarray(at).toString('utf8')}`;
}
