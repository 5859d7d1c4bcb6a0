import type { Token } from '../../../sql/lexer.js';
import { ParsedStatement } from '../../../sql/parsed.js';
import { pgArrayToList, SPACED_OFFSET } from './rewrite/literals.js';
import { RULES } from './rewrite/rules.js';
import { mayNeedRewrite } from './rewrite/triggers.js';
import { type Edit, type JsonbColumns, type Node, type TargetColumns, Walker, wordOf } from './rewrite/walker.js';

/**
 * PostgreSQL-only syntax rewritten onto DuckDB, on the statement as
 * PostgreSQL's own parser (libpg-query) reads it. Each rewrite replaces
 * the source text of one parse-tree node, found by the node's location,
 * and leaves every other byte of the statement as the client wrote it.
 * The walk and its token machinery are in rewrite/walker.ts, the rules one
 * family to a file beside it (rewrite/rules.ts lists which node kinds each
 * is given); docs/compatibility.md lists each rule and why it exists.
 */

export { mayNeedRewrite } from './rewrite/triggers.js';
export { partialPattern } from './rewrite/operators.js';
export { pgArrayToList, pgBoolean } from './rewrite/literals.js';
export type { TargetColumns } from './rewrite/walker.js';

/** A statement as the engine runs it, and how to find a position of it in the client's text. */
export interface Rewritten {
  readonly text: string;
  /** A 1-based position in `text` (an error's) as a position in the statement the client sent. */
  clientPosition(position: number): number;
}

const UNCHANGED = (text: string): Rewritten => ({ text, clientPosition: (p) => p });

function withEdits(text: string, edits: readonly Edit[]): Rewritten {
  if (edits.length === 0) return UNCHANGED(text);
  return {
    text,
    clientPosition(position) {
      const p = position - 1;
      let delta = 0;
      for (const e of edits) {
        const start = e.start + delta;
        if (p < start) break;
        // Inside replaced text: the position of what it replaced.
        if (p < start + e.text.length) return e.start + 1;
        delta += e.text.length - (e.end - e.start);
      }
      return p - delta + 1;
    },
  };
}

const CACHE_LIMIT = 10_000;

/** A number literal with a non-zero digit past the ninth decimal (or an exponent, which may put one there). */
const FINE_NUMBER = /^[0-9]*\.[0-9]{9}[0-9]*[1-9]|[eE]/;
/** A string literal holding a number that is not a plain integer: a point, an exponent, a digit separator, hexadecimal. */
const NUMBER_TEXT = /^'\s*[+-]?(0[xX][0-9a-fA-F_]+|(?=[\d_.]*[._eE])[\d_]*\.?[\d_]*([eE][+-]?\d+)?|inf|infinity|nan)\s*'$/i;

/** Tokens of what reads a jsonb column as jsonb does (jsonbTables). */
const JSONB_READS: ReadonlySet<string> = new Set(['||', '->', '->>', '#>', '#>>', '@>', '<@', 'text', 'varchar', 'concat', 'concat_ws']);

/**
 * Rewrites statements for the engine, caching by statement text (catalog
 * queries repeat: every psql \d, every driver's type lookup).
 */
export class CompatRewriter {
  private readonly cache = new Map<string, Rewritten>();

  /** `database`: the name clients connect to, which they may use to qualify a schema. */
  constructor(private readonly database = 'cotwire') {}

  /** The statement as DuckDB should run it; the same text when nothing needs rewriting. */
  rewrite(text: string, tokens: readonly Token[], target: TargetColumns | null = null): string {
    return this.rewriteMapped(new ParsedStatement(text, tokens), target).text;
  }

  /**
   * The statement as DuckDB should run it, with the map from its positions
   * back to the client's. `target` describes an INSERT's table (see insertTarget).
   */
  rewriteMapped(statement: ParsedStatement, target: TargetColumns | null = null, jsonb: JsonbColumns | null = null): Rewritten {
    const { text, tokens } = statement;
    if (target === null && jsonb === null && !mayNeedRewrite(tokens)) return UNCHANGED(text);
    // What the tables hold decides a rewrite made with them: it is not cached by text.
    const cached = target === null && jsonb === null;
    const hit = cached ? this.cache.get(text) : undefined;
    if (hit !== undefined) return hit;
    let out = UNCHANGED(text);
    const stmt = statement.tree;
    if (stmt !== null) {
      const rewriter = new Walker(text, tokens, RULES, target, this.database, jsonb);
      try {
        out = withEdits(rewriter.run(stmt), rewriter.applied);
      } catch {
        // A parse tree no rule foresaw: the engine reads the statement as written, and answers for it.
        out = UNCHANGED(text);
      }
    }
    if (!cached) return out;
    if (this.cache.size >= CACHE_LIMIT) this.cache.clear();
    this.cache.set(text, out);
    return out;
  }

  /**
   * For INSERT ... VALUES with a PostgreSQL array literal among its values
   * ('{a,b}', which is how psycopg2 sends an empty list): the target table,
   * whose column types decide which literals are arrays. Null otherwise.
   */
  /**
   * The tables a statement names, each by the name or alias its columns are
   * read by, when it has what reads a jsonb column otherwise than DuckDB's
   * JSON (rewrite/jsonb.ts): `||` (merging), `->`, `->>`, `#>`, `#>>`
   * (numbers as numeric prints them), a cast to text (jsonb's own text).
   * Null for a statement without any.
   */
  jsonbTables(statement: ParsedStatement): ReadonlyArray<{ readonly schema: string; readonly table: string; readonly as: string }> | null {
    // The lexer gives `#>` and `#>>` as `#` then `>` or `>>`.
    const reads = (t: Token, k: number): boolean =>
      JSONB_READS.has(t.kind === 'word' ? t.text.toLowerCase() : t.text) || (t.text === '#' && ['>', '>>'].includes(statement.tokens[k + 1]?.text ?? ''));
    if (!statement.tokens.some(reads)) return null;
    const found: Array<{ schema: string; table: string; as: string }> = [];
    const visit = (v: unknown): void => {
      if (Array.isArray(v)) v.forEach(visit);
      else if (v !== null && typeof v === 'object') {
        const range = (v as Node).RangeVar as Node | undefined;
        if (typeof range?.relname === 'string') {
          const schema = typeof range.schemaname === 'string' && range.schemaname !== 'public' ? range.schemaname : 'main';
          const alias = (range.alias as Node | undefined)?.aliasname;
          found.push({ schema, table: range.relname, as: (typeof alias === 'string' ? alias : range.relname).toLowerCase() });
        }
        for (const x of Object.values(v as Node)) visit(x);
      }
    };
    visit(statement.tree);
    return found;
  }

  insertTarget(statement: ParsedStatement): { readonly schema: string | null; readonly table: string } | null {
    const { tokens } = statement;
    // A JSON object ('{"k": 1}') is not an array literal; '{}' may be either, and the column decides.
    const arrayLike = (t: Token): boolean =>
      t.kind === 'string' && t.text.startsWith("'{") && pgArrayToList(t.text.slice(1, -1).replaceAll("''", "'")) !== null;
    const spaced = (t: Token): boolean => t.kind === 'string' && SPACED_OFFSET.test(t.text.slice(1, -1));
    const first = wordOf(tokens[0]);
    // A number with a digit past the ninth decimal: bound for numeric without a precision, it would be rounded.
    const fine = (t: Token): boolean => t.kind === 'number' && FINE_NUMBER.test(t.text);
    // Text that DuckDB's cast reads as a number and PostgreSQL's input may not ('1.5' for an integer, '1e400', '0x10').
    const numberText = (t: Token): boolean => t.kind === 'string' && NUMBER_TEXT.test(t.text);
    if (
      !(
        (first === 'insert' && tokens.some((t) => arrayLike(t) || spaced(t) || fine(t) || numberText(t))) ||
        (first === 'update' && tokens.some((t) => spaced(t) || fine(t) || numberText(t)))
      )
    )
      return null;
    const stmt = statement.tree;
    const relation = ((stmt?.InsertStmt ?? stmt?.UpdateStmt) as Node | undefined)?.relation as Node | undefined;
    if (typeof relation?.relname !== 'string') return null;
    const schema = typeof relation.schemaname === 'string' ? relation.schemaname : null;
    return { schema: schema === 'public' ? 'main' : schema, table: relation.relname };
  }
}
