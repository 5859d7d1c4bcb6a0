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
  let escape = '\\';
  const next = tokens[i + 1];
  const quote = tokens[i + 2];
  if (next?.kind === 'word' && next.text.toUpperCase() === 'UESCAPE' && quote?.kind === 'string') {
    escape = quote.text.slice(1, -1).replaceAll("''", "'");
  }
  return decodeUnicodeEscapes(body, escape);
}

export function decodeUnicodeEscapes(body: string, escape: string): string {
  let out = '';
  for (let i = 0; i < body.length; i++) {
    const c = body[i] as string;
    if (c !== escape) {
      out += c;
      continue;
    }
    if (body[i + 1] === escape) {
      out += escape;
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
