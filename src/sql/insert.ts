import { identifierText } from './identifiers.js';
import { tokenize, type Token } from './lexer.js';

/** The parts of an INSERT statement, found on its tokens. */
export interface InsertParts {
  /** The target's name parts, decoded (schema and catalog when qualified). */
  readonly target: readonly string[];
  /** The column list, decoded, or null when none was given. */
  readonly columns: readonly string[] | null;
  /** The source query (`VALUES ...` or `SELECT ...`) as text, or null for DEFAULT VALUES. */
  readonly source: string | null;
  /** Where the source starts in the statement text. */
  readonly sourceStart: number;
  /** The RETURNING list as text, or null. */
  readonly returning: string | null;
  /** DuckDB's BY NAME: the source's column names are the column list. */
  readonly byName: boolean;
  /** DuckDB's OR REPLACE / OR IGNORE and ON CONFLICT: none of them is supported here. */
  readonly unsupported: string | null;
}

const upper = (t: Token | undefined): string => (t?.kind === 'word' ? t.text.toUpperCase() : '');

/**
 * Splits `INSERT INTO name [AS alias] [(columns)] source [RETURNING list]`.
 * Returns null when the statement does not have this shape.
 */
export function parseInsert(text: string, tokens: readonly Token[]): InsertParts | null {
  const decode = identifierText;
  if (upper(tokens[0]) !== 'INSERT') return null;
  let i = 1;
  let unsupported: string | null = null;
  if (upper(tokens[i]) === 'OR') {
    unsupported = `INSERT OR ${upper(tokens[i + 1])}`;
    i += 2;
  }
  if (upper(tokens[i]) !== 'INTO') return null;
  i++;
  const target: string[] = [];
  for (;;) {
    const part = decode(tokens, i);
    if (part === null) return null;
    target.push(part);
    i++;
    if (upper(tokens[i]) === 'UESCAPE') i += 2;
    if (tokens[i]?.text !== '.') break;
    i++;
  }
  if (upper(tokens[i]) === 'AS') i += 2;
  let columns: string[] | null = null;
  if (tokens[i]?.text === '(' && !['SELECT', 'VALUES', 'WITH', 'FROM', 'TABLE'].includes(upper(tokens[i + 1]))) {
    columns = [];
    i++;
    for (;;) {
      const c = decode(tokens, i);
      if (c === null) return null;
      columns.push(c);
      i++;
      if (tokens[i]?.text === ',') {
        i++;
        continue;
      }
      if (tokens[i]?.text === ')') {
        i++;
        break;
      }
      return null;
    }
  }
  let byName = false;
  if (upper(tokens[i]) === 'BY') {
    // DuckDB takes BY only without a column list; BY POSITION is what an INSERT does anyway.
    const how = upper(tokens[i + 1]);
    if (columns !== null || (how !== 'NAME' && how !== 'POSITION')) return null;
    byName = how === 'NAME';
    i += 2;
  }
  if (upper(tokens[i]) === 'DEFAULT' && upper(tokens[i + 1]) === 'VALUES') {
    const rest = tokens[i + 2];
    const returning = upper(rest) === 'RETURNING' ? text.slice((tokens[i + 3] as Token | undefined)?.start ?? text.length) : null;
    return { target, columns, source: null, sourceStart: tokens[i]?.start ?? text.length, returning, byName, unsupported };
  }
  const sourceToken = tokens[i];
  if (sourceToken === undefined) return null;
  // The source is run on its own inside a query cotwire builds, so its
  // parentheses must balance by themselves.
  let balance = 0;
  for (let j = i; j < tokens.length; j++) {
    const t = tokens[j] as Token;
    if (t.text === '(') balance++;
    else if (t.text === ')' && --balance < 0) return null;
  }
  if (balance !== 0) return null;
  let depth = 0;
  let end = tokens.length;
  let returning: string | null = null;
  for (let j = i; j < tokens.length; j++) {
    const t = tokens[j] as Token;
    if (t.text === '(') depth++;
    else if (t.text === ')') depth--;
    else if (depth === 0 && upper(t) === 'RETURNING') {
      end = j;
      returning = text.slice((tokens[j + 1] as Token | undefined)?.start ?? text.length);
      break;
    } else if (depth === 0 && upper(t) === 'ON' && upper(tokens[j + 1]) === 'CONFLICT') {
      unsupported ??= 'INSERT ... ON CONFLICT';
      end = j;
      break;
    }
  }
  const last = tokens[end - 1] as Token;
  return { target, columns, source: text.slice(sourceToken.start, last.end), sourceStart: sourceToken.start, returning, byName, unsupported };
}

/** An INSERT whose WITH clause comes first, rewritten with the WITH clause in front of its source. */
export interface HoistedInsert {
  /** `INSERT INTO target [(columns)] WITH ... source [RETURNING ...]` */
  readonly text: string;
  /** A position (1-based) in `text`, as the position it came from in the original statement. */
  readonly position: (p: number) => number;
}

/**
 * `WITH ... INSERT INTO t [(columns)] source` as `INSERT INTO t [(columns)]
 * WITH ... source`, which means the same in PostgreSQL and DuckDB: the
 * ledger writer then takes it like any other INSERT ... SELECT. Null when
 * the statement is not a WITH before an INSERT of this shape.
 */
export function hoistInsertWith(text: string, tokens: readonly Token[]): HoistedInsert | null {
  if (upper(tokens[0]) !== 'WITH') return null;
  let depth = 0;
  let at = -1;
  for (let j = 1; j < tokens.length; j++) {
    const t = tokens[j] as Token;
    if (t.text === '(') depth++;
    else if (t.text === ')') depth--;
    // The main statement follows the last CTE's closing parenthesis; a CTE may itself be named insert.
    else if (depth === 0 && upper(t) === 'INSERT' && tokens[j - 1]?.text === ')') {
      at = j;
      break;
    }
  }
  if (at < 0) return null;
  const withText = text.slice(0, (tokens[at - 1] as Token).end);
  const insertStart = (tokens[at] as Token).start;
  const insertTokens = tokens.slice(at).map((t) => ({ ...t, start: t.start - insertStart, end: t.end - insertStart }));
  const insertText = text.slice(insertStart);
  const parts = parseInsert(insertText, insertTokens);
  if (parts === null || parts.source === null) return null;
  const s = parts.sourceStart;
  const moved = withText.length + 1;
  return {
    text: `${insertText.slice(0, s)}${withText} ${insertText.slice(s)}`,
    position: (p) => {
      const q = p - 1;
      if (q < s) return insertStart + q + 1;
      if (q < s + moved) return q - s + 1;
      return insertStart + q - moved + 1;
    },
  };
}

/**
 * The first of `names` a RETURNING list asks for (`*` asks for every one),
 * or null when it asks for none of them: a ledger INSERT inside a
 * transaction block can return only what is known before COMMIT.
 */
export function returnsAnyOf(returning: string, names: ReadonlySet<string>): string | null {
  const tokens = tokenize(returning);
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i] as Token;
    const prev = tokens[i - 1]?.text;
    if (t.text === '*' && (prev === undefined || prev === ',' || prev === '.')) return '*';
    const name = t.kind === 'word' ? t.text.toLowerCase() : t.kind === 'quoted' ? t.text.slice(1, -1).replaceAll('""', '"') : null;
    if (name !== null && names.has(name)) return name;
  }
  return null;
}
