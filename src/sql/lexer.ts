/**
 * A lexer for DuckDB's surface syntax: statement boundaries, and the tokens
 * the guard reads where no parse tree answers. Its token boundaries are
 * DuckDB's scanner's (a fork of PostgreSQL's scan.l), rule for rule:
 * whitespace is exactly space, tab, LF, CR and FF (a vertical tab or any
 * other control character is a token of its own, which DuckDB's grammar
 * rejects); `--` comments end at LF or CR; block comments nest; every byte
 * from 0x80 up is an identifier character; '' strings continue across a
 * newline ('a'<LF>'b' is one string), with the escape rules of the string
 * they continue; `#` and `?` are not operator characters. DuckDB replaces
 * some Unicode spaces before scanning: statements are passed through the
 * same replacement (unicode-spaces.ts) before they are lexed, and DuckDB is
 * sent the replaced text. test/unit/sql/lexer-parity.test.ts checks these
 * rules against DuckDB itself.
 */

import { stripUnicodeSpaces } from './unicode-spaces.js';

export type TokenKind =
  | 'word' // unquoted identifier or keyword
  | 'quoted' // "quoted identifier"
  | 'string' // any string literal form
  | 'number'
  | 'param' // $1
  | 'operator'
  | 'punct' // ( ) , [ ] . :: etc.
  | 'semicolon';

export interface Token {
  readonly kind: TokenKind;
  /** Source text of the token. */
  readonly text: string;
  /** Offset (in UTF-16 code units) into the lexed string. */
  readonly start: number;
  readonly end: number;
}

const isWordStart = (c: number): boolean => (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || c === 0x5f || c >= 0x80;
const isWordPart = (c: number): boolean => isWordStart(c) || (c >= 0x30 && c <= 0x39) || c === 0x24;
const isDigit = (c: number): boolean => c >= 0x30 && c <= 0x39;
const isSpace = (c: number): boolean => c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d || c === 0x0c;
const isNewline = (c: number): boolean => c === 0x0a || c === 0x0d;
const OPERATOR_CHARS = new Set('+-*/<>=~!@%^&|`');

export function tokenize(sql: string): Token[] {
  const tokens: Token[] = [];
  const n = sql.length;
  let i = 0;
  const push = (kind: TokenKind, start: number, end: number): void => {
    tokens.push({ kind, text: sql.slice(start, end), start, end });
  };
  while (i < n) {
    const c = sql.charCodeAt(i);
    if (isSpace(c)) {
      i++;
      continue;
    }
    const start = i;
    // -- line comment, to LF or CR
    if (c === 0x2d && sql.charCodeAt(i + 1) === 0x2d) {
      i = lineCommentEnd(sql, i);
      continue;
    }
    // /* nested block comment */
    if (c === 0x2f && sql.charCodeAt(i + 1) === 0x2a) {
      let depth = 1;
      i += 2;
      while (i < n && depth > 0) {
        if (sql.charCodeAt(i) === 0x2f && sql.charCodeAt(i + 1) === 0x2a) {
          depth++;
          i += 2;
        } else if (sql.charCodeAt(i) === 0x2a && sql.charCodeAt(i + 1) === 0x2f) {
          depth--;
          i += 2;
        } else {
          i++;
        }
      }
      continue;
    }
    if (c === 0x3b) {
      push('semicolon', i, i + 1);
      i++;
      continue;
    }
    // String literal prefixes: E'', B'', X'', N'', U&''
    if (isWordStart(c)) {
      const next = sql.charCodeAt(i + 1);
      const upper = c & ~0x20;
      if (next === 0x27 && (upper === 0x45 || upper === 0x42 || upper === 0x58 || upper === 0x4e)) {
        i = scanString(sql, i + 1, upper === 0x45);
        push('string', start, i);
        continue;
      }
      if (upper === 0x55 && next === 0x26 && (sql.charCodeAt(i + 2) === 0x27 || sql.charCodeAt(i + 2) === 0x22)) {
        const q = sql.charCodeAt(i + 2);
        i = q === 0x27 ? scanString(sql, i + 2, false) : scanQuoted(sql, i + 2, q, false);
        push(q === 0x27 ? 'string' : 'quoted', start, i);
        continue;
      }
      i++;
      while (i < n && isWordPart(sql.charCodeAt(i))) i++;
      push('word', start, i);
      continue;
    }
    if (c === 0x27) {
      i = scanString(sql, i, false);
      push('string', start, i);
      continue;
    }
    if (c === 0x22) {
      i = scanQuoted(sql, i, 0x22, false);
      push('quoted', start, i);
      continue;
    }
    if (c === 0x24) {
      // $1 parameter, or $tag$ ... $tag$ dollar quote
      if (isDigit(sql.charCodeAt(i + 1))) {
        i++;
        while (i < n && isDigit(sql.charCodeAt(i))) i++;
        push('param', start, i);
        continue;
      }
      let j = i + 1;
      while (j < n && isWordPart(sql.charCodeAt(j)) && sql.charCodeAt(j) !== 0x24) j++;
      if (sql.charCodeAt(j) === 0x24 && (j === i + 1 || isWordStart(sql.charCodeAt(i + 1)))) {
        const tag = sql.slice(i, j + 1);
        const close = sql.indexOf(tag, j + 1);
        i = close < 0 ? n : close + tag.length;
        push('string', start, i);
        continue;
      }
      i++;
      push('operator', start, i);
      continue;
    }
    if (isDigit(c) || (c === 0x2e && isDigit(sql.charCodeAt(i + 1)))) {
      i++;
      while (i < n) {
        const d = sql.charCodeAt(i);
        if (isDigit(d) || d === 0x2e || d === 0x5f || isWordStart(d)) {
          // exponent sign: 1e-5
          if ((d === 0x65 || d === 0x45) && (sql.charCodeAt(i + 1) === 0x2d || sql.charCodeAt(i + 1) === 0x2b)) i++;
          i++;
        } else {
          break;
        }
      }
      push('number', start, i);
      continue;
    }
    // ?1, DuckDB's other spelling of $1
    if (c === 0x3f && isDigit(sql.charCodeAt(i + 1))) {
      i++;
      while (i < n && isDigit(sql.charCodeAt(i))) i++;
      push('param', start, i);
      continue;
    }
    if (c === 0x3a && sql.charCodeAt(i + 1) === 0x3a) {
      push('punct', i, i + 2);
      i += 2;
      continue;
    }
    if (OPERATOR_CHARS.has(sql[i] as string)) {
      i++;
      while (i < n && OPERATOR_CHARS.has(sql[i] as string)) {
        // an operator never swallows the start of a comment
        const d = sql.charCodeAt(i);
        if ((d === 0x2d && sql.charCodeAt(i + 1) === 0x2d) || (d === 0x2f && sql.charCodeAt(i + 1) === 0x2a)) break;
        i++;
      }
      push('operator', start, i);
      continue;
    }
    push('punct', i, i + 1);
    i++;
  }
  return tokens;
}

/** The offset just past a `--` comment starting at `i`: its LF or CR, or the end of input. */
function lineCommentEnd(sql: string, i: number): number {
  const n = sql.length;
  let j = i + 2;
  while (j < n && !isNewline(sql.charCodeAt(j))) j++;
  return j < n ? j + 1 : n;
}

/**
 * A '' string (plain, E, B, X, N or U& form) from its opening quote, with
 * every continuation: another '' after whitespace that holds a newline
 * (and `--` comments) continues the same string, under the same escape
 * rules (scan.l's quotecontinue).
 */
function scanString(sql: string, open: number, backslashEscapes: boolean): number {
  let end = scanQuoted(sql, open, 0x27, backslashEscapes);
  for (;;) {
    const next = continuationQuote(sql, end);
    if (next < 0) return end;
    end = scanQuoted(sql, next, 0x27, backslashEscapes);
  }
}

/**
 * Where a string continues after its closing quote: the offset of the next
 * quote when only whitespace with a newline lies between (horizontal
 * whitespace and comments, a newline, then any whitespace, and comments
 * each followed by a newline), else -1.
 */
function continuationQuote(sql: string, from: number): number {
  const n = sql.length;
  let i = from;
  let newline = false;
  while (i < n) {
    const c = sql.charCodeAt(i);
    if (c === 0x27) return newline ? i : -1;
    if (isNewline(c)) {
      newline = true;
      i++;
    } else if (c === 0x20 || c === 0x09 || c === 0x0c) {
      i++;
    } else if (c === 0x2d && sql.charCodeAt(i + 1) === 0x2d) {
      // A comment always ends in a newline here: at the end of input there is no quote to continue.
      const end = lineCommentEnd(sql, i);
      if (end >= n) return -1;
      i = end;
      newline = true;
    } else {
      return -1;
    }
  }
  return -1;
}

/** Returns the offset just past the closing quote (or the end of input when unterminated). */
function scanQuoted(sql: string, open: number, quote: number, backslashEscapes: boolean): number {
  let i = open + 1;
  const n = sql.length;
  while (i < n) {
    const c = sql.charCodeAt(i);
    if (backslashEscapes && c === 0x5c) {
      i += 2;
      continue;
    }
    if (c === quote) {
      if (sql.charCodeAt(i + 1) === quote) {
        i += 2;
        continue;
      }
      return i + 1;
    }
    i++;
  }
  return n;
}

export interface StatementText {
  /** The statement without its terminating semicolon. */
  readonly text: string;
  /** Where it starts in the whole string, for error positions. */
  readonly offset: number;
  readonly tokens: readonly Token[];
}

/**
 * Splits a query string at top-level semicolons. Statements made only of
 * whitespace and comments are dropped, so an empty result means an empty
 * query (PostgreSQL's EmptyQueryResponse).
 */
export function splitStatements(sql: string): readonly StatementText[] {
  // Drivers send the same texts again and again (an unnamed Parse per execution): lex each once.
  const cached = SPLIT_CACHE.get(sql);
  if (cached !== undefined) return cached;
  const out = split(sql);
  if (sql.length <= SPLIT_CACHE_MAX_TEXT) {
    if (SPLIT_CACHE.size >= SPLIT_CACHE_ENTRIES) SPLIT_CACHE.clear();
    SPLIT_CACHE.set(sql, out);
  }
  return out;
}

const SPLIT_CACHE = new Map<string, readonly StatementText[]>();
const SPLIT_CACHE_ENTRIES = 2_000;
const SPLIT_CACHE_MAX_TEXT = 16 * 1024;

/**
 * One statement's text as DuckDB will scan it (its Unicode spaces replaced
 * as DuckDB replaces them, which moves no offset), and its tokens. Every
 * text cotwire sends DuckDB on a client's behalf comes from here, so the
 * tokens are those of the text DuckDB parses.
 */
export function lexStatement(text: string): { readonly text: string; readonly tokens: Token[] } {
  const scanned = stripUnicodeSpaces(text);
  return { text: scanned, tokens: tokenize(scanned) };
}

function split(sql: string): readonly StatementText[] {
  const tokens = tokenize(sql);
  const out: StatementText[] = [];
  let current: Token[] = [];
  const finish = (): void => {
    if (current.length === 0) return;
    const first = current[0] as Token;
    const last = current[current.length - 1] as Token;
    const offset = first.start;
    const text = sql.slice(offset, last.end);
    // DuckDB replaces Unicode spaces in each statement it is sent, on its own.
    const scanned = stripUnicodeSpaces(text);
    out.push({
      text: scanned,
      offset,
      tokens: scanned !== text ? tokenize(scanned) : current.map((t) => ({ ...t, start: t.start - offset, end: t.end - offset })),
    });
    current = [];
  };
  for (const t of tokens) {
    if (t.kind === 'semicolon') finish();
    else current.push(t);
  }
  finish();
  return out;
}

/** The upper-cased leading words of a statement, for recognising commands such as BEGIN or SET. */
export function leadingWords(tokens: readonly Token[], max: number): string[] {
  const words: string[] = [];
  for (const t of tokens) {
    if (t.kind !== 'word' || words.length >= max) break;
    words.push(t.text.toUpperCase());
  }
  return words;
}

/**
 * The text with each `$n` token replaced by what `replace` returns for its
 * number (kept where it returns null); null when nothing was replaced.
 * Parameters inside strings and comments are not tokens, so never touched.
 */
export function replaceParams(sql: string, replace: (n: number, token: Token) => string | null, tokens: readonly Token[] = tokenize(sql)): string | null {
  let out = '';
  let last = 0;
  let changed = false;
  for (const t of tokens) {
    if (t.kind !== 'param') continue;
    const text = replace(Number(t.text.slice(1)), t);
    if (text === null) continue;
    out += sql.slice(last, t.start) + text;
    last = t.end;
    changed = true;
  }
  return changed ? out + sql.slice(last) : null;
}
