import type { Token } from './lexer.js';

/**
 * The name an identifier token stands for: unquoted words fold to lower
 * case, "quoted" names keep theirs with "" unescaped, and U&"..." names have
 * their \XXXX and \+XXXXXX escapes (or a UESCAPE character) decoded.
 */
export function identifierText(tokens: readonly Token[], i: number): string | null {
  const t = tokens[i];
  if (t === undefined) return null;
  if (t.kind === 'word') return t.text.toLowerCase();
  if (t.kind !== 'quoted') return null;
  if (t.text.startsWith('"')) return t.text.slice(1, -1).replaceAll('""', '"');
  // U&"..." [UESCAPE 'c']
  const body = t.text.slice(3, -1).replaceAll('""', '"');
  let escapeChar = '\\';
  const next = tokens[i + 1];
  const quote = tokens[i + 2];
  if (next?.kind === 'word' && next.text.toUpperCase() === 'UESCAPE' && quote?.kind === 'string') {
    escapeChar = quote.text.slice(1, -1).replaceAll("''", "'");
  }
  return decodeUnicodeEscapes(body, escapeChar);
}

export function decodeUnicodeEscapes(body: string, escapeChar: string): string {
  let out = '';
  for (let i = 0; i < body.length; i++) {
    const c = body[i] as string;
    if (c !== escapeChar) {
      out += c;
      continue;
    }
    if (body[i + 1] === escapeChar) {
      out += escapeChar;
      i++;
    } else if (body[i + 1] === '+' && /^[0-9a-fA-F]{6}$/.test(body.slice(i + 2, i + 8))) {
      out += String.fromCodePoint(parseInt(body.slice(i + 2, i + 8), 16));
      i += 7;
    } else if (/^[0-9a-fA-F]{4}$/.test(body.slice(i + 1, i + 5))) {
      out += String.fromCharCode(parseInt(body.slice(i + 1, i + 5), 16));
      i += 4;
    } else {
      out += c;
    }
  }
  return out;
}

/**
 * The text a string literal token stands for ('', E'', $tag$, N'', U&''),
 * or null for other tokens. DuckDB takes a string where a table or macro
 * name goes (`UPDATE '_cot_steps' ...`, `CREATE MACRO 'lower'(x) ...`), so
 * the guard reads strings as names too. E'' escapes are decoded as far as
 * they can name something; B'' and X'' literals are returned as written.
 */
export function stringText(tokens: readonly Token[], i: number): string | null {
  const t = tokens[i];
  if (t === undefined || t.kind !== 'string') return null;
  const text = t.text;
  if (text.startsWith('$')) {
    const tag = text.slice(0, text.indexOf('$', 1) + 1);
    return text.endsWith(tag) && text.length >= 2 * tag.length ? text.slice(tag.length, -tag.length) : text.slice(tag.length);
  }
  const first = text[0]?.toUpperCase();
  if (first === 'U' && text[1] === '&') return decodeUnicodeEscapes(unquote(text.slice(2), false), '\\');
  if (first === 'E') return decodeBackslashEscapes(unquote(text.slice(1), true));
  if (first === 'N' || first === 'B' || first === 'X') return unquote(text.slice(1), false);
  return unquote(text, false);
}

/**
 * The body of a '' literal as the lexer delimited it: continuation segments
 * joined, '' unescaped, and with `backslashes` (E'') a backslash and the
 * character after it kept together for decodeBackslashEscapes.
 */
function unquote(literal: string, backslashes: boolean): string {
  let out = '';
  let inside = false;
  for (let i = 0; i < literal.length; i++) {
    const c = literal[i] as string;
    if (!inside) {
      if (c === "'") inside = true;
      continue;
    }
    if (backslashes && c === '\\') {
      out += c + (literal[i + 1] ?? '');
      i++;
    } else if (c === "'" && literal[i + 1] === "'") {
      out += "'";
      i++;
    } else if (c === "'") {
      inside = false;
    } else {
      out += c;
    }
  }
  return out;
}

function decodeBackslashEscapes(body: string): string {
  return body.replace(/\\(x[0-9a-fA-F]{1,2}|[0-7]{1,3}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|.)/gs, (_, e: string) => {
    if (e[0] === 'x') return String.fromCharCode(parseInt(e.slice(1), 16));
    if (e[0] === 'u' || e[0] === 'U') return String.fromCodePoint(parseInt(e.slice(1), 16));
    if (/^[0-7]/.test(e)) return String.fromCharCode(parseInt(e, 8));
    return ({ b: '\b', f: '\f', n: '\n', r: '\r', t: '\t' } as Record<string, string>)[e] ?? e;
  });
}

/** A name as DuckDB reads one: an identifier, or a string literal in a name's place. */
export function nameText(tokens: readonly Token[], i: number): string | null {
  return identifierText(tokens, i) ?? stringText(tokens, i);
}

/** A string as a SQL literal: '...' with its quotes doubled. */
export function quoteLiteral(s: string): string {
  return `'${s.replaceAll("'", "''")}'`;
}

/** A name as a quoted SQL identifier: "..." with its quotes doubled. */
export function quoteIdentifier(s: string): string {
  return `"${s.replaceAll('"', '""')}"`;
}
