import type { Token } from './lexer.js';
import { parseOne } from './pg-tree.js';

/**
 * Where a parse-tree node's text is among the statement's tokens: the
 * catalog rewrite's rules find a node by its location (a byte offset) and
 * edit whole tokens, so every byte they do not replace stays as the client
 * wrote it.
 */

export type Node = Record<string, unknown>;

/** A word's text as a name: lower-cased unless quoted; null for anything else. */
export const wordOf = (t: Token | undefined): string | null =>
  t === undefined ? null : t.kind === 'word' ? t.text.toLowerCase() : t.kind === 'quoted' ? t.text.slice(1, -1).replaceAll('""', '"') : null;

export class Spans {
  /** Byte offset (libpg-query's locations) → UTF-16 offset; null when the text is ASCII and the two agree. */
  private readonly charAt: Int32Array | null;
  private readonly tokenAt = new Map<number, number>();

  constructor(
    readonly text: string,
    readonly tokens: readonly Token[],
  ) {
    tokens.forEach((t, i) => {
      this.tokenAt.set(t.start, i);
    });
    // biome-ignore lint/suspicious/noControlCharactersInRegex: the test is for ASCII, control characters included
    if (/^[\x00-\x7f]*$/.test(text)) {
      this.charAt = null;
    } else {
      const bytes = Buffer.byteLength(text, 'utf8');
      const map = new Int32Array(bytes + 1);
      let b = 0;
      for (let i = 0; i < text.length; i++) {
        const c = text.codePointAt(i) as number;
        const n = c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
        for (let k = 0; k < n; k++) map[b + k] = i;
        b += n;
        if (c >= 0x10000) i++;
      }
      map[bytes] = text.length;
      this.charAt = map;
    }
  }

  /** The token a parse-tree location (a byte offset) starts, or null. */
  index(location: unknown): number | null {
    if (typeof location !== 'number' || location < 0) return null;
    const char = this.charAt === null ? location : this.charAt[location];
    if (char === undefined) return null;
    return this.tokenAt.get(char) ?? null;
  }

  /** The dotted name (a.b.c) that starts at token i: its parts, lower-cased unless quoted, and the index after it. */
  dotted(i: number): { parts: string[]; next: number } | null {
    const parts: string[] = [];
    let j = i;
    for (;;) {
      const w = wordOf(this.tokens[j]);
      if (w === null) return null;
      parts.push(w);
      if (this.tokens[j + 1]?.text !== '.') return { parts, next: j + 1 };
      j += 2;
    }
  }

  /** The index of the token that closes the bracket at token i. */
  closing(i: number): number | null {
    let depth = 0;
    for (let j = i; j < this.tokens.length; j++) {
      const t = this.tokens[j] as Token;
      if (t.text === '(' || t.text === '[') depth++;
      else if (t.text === ')' || t.text === ']') {
        depth--;
        if (depth === 0) return j;
      }
    }
    return null;
  }

  /** The call whose name starts at token i: the '(' after its name and the ')' that closes its arguments. */
  callSpan(i: number | null): { readonly i: number; readonly open: number; readonly close: number } | null {
    const name = i === null ? null : this.dotted(i);
    if (i === null || name === null || this.tokens[name.next]?.text !== '(') return null;
    const close = this.closing(name.next);
    return close === null ? null : { i, open: name.next, close };
  }

  /** The text between a call's parentheses. */
  argumentsText(span: { readonly open: number; readonly close: number }): string {
    return this.text.slice((this.tokens[span.open] as Token).end, (this.tokens[span.close] as Token).start);
  }

  /** The last token of a call whose arguments close at `close`: its WITHIN GROUP, FILTER and OVER clauses included. */
  callEnd(close: number): number | null {
    let end: number | null = close;
    if (wordOf(this.tokens[end + 1]) === 'within' && wordOf(this.tokens[end + 2]) === 'group' && this.tokens[end + 3]?.text === '(')
      end = this.closing(end + 3);
    if (end !== null && wordOf(this.tokens[end + 1]) === 'filter' && this.tokens[end + 2]?.text === '(') end = this.closing(end + 2);
    if (end !== null && wordOf(this.tokens[end + 1]) === 'over') end = this.tokens[end + 2]?.text === '(' ? this.closing(end + 2) : end + 2;
    return end === null || this.tokens[end] === undefined ? null : end;
  }

  /** The end of a type name at token i: its dotted name, type modifiers and array bounds. */
  typeNameEnd(i: number): number | null {
    const name = this.dotted(i);
    if (name === null) return null;
    let j = name.next;
    while (this.tokens[j]?.text === '(' || this.tokens[j]?.text === '[') {
      const close = this.closing(j);
      if (close === null) return null;
      j = close + 1;
    }
    return j;
  }

  /** The token of the leftmost location in a node's subtree, or null. */
  leftmost(node: unknown): number | null {
    let min = Infinity;
    const visit = (v: unknown): void => {
      if (Array.isArray(v)) v.forEach(visit);
      else if (v !== null && typeof v === 'object') {
        for (const [k, x] of Object.entries(v as Node)) {
          if (k === 'location') {
            const i = this.index(x);
            if (i !== null && i < min) min = i;
          } else visit(x);
        }
      }
    };
    visit(node);
    return min === Infinity ? null : min;
  }

  /** The first token of an operand that ends just before token `before`: the leftmost location in its subtree, with its parentheses. */
  argStart(arg: Node | undefined, before: number): number | null {
    const min = this.leftmost(arg);
    if (min === null) return null;
    let start = min;
    // (expr)::regclass, ((a -> 2) ->> 'k')::int4, (a) * b / c: the parentheses that open just before the
    // operand's first location and close before `before` are the operand's own.
    for (;;) {
      const close = this.tokens[start - 1]?.text === '(' ? this.closing(start - 1) : null;
      if (close === null || close >= before) return start;
      start--;
    }
  }

  /** The last token of an expression that starts at token `first`: the first end at which the text parses to the same tree. */
  exprEnd(expr: Node | undefined, first: number): number | null {
    const from = this.tokens[first];
    if (expr === undefined || from === undefined) return null;
    let last = first;
    const visit = (v: unknown): void => {
      if (Array.isArray(v)) v.forEach(visit);
      else if (v !== null && typeof v === 'object') {
        for (const [k, x] of Object.entries(v as Node)) {
          if (k === 'location') last = Math.max(last, this.index(x) ?? last);
          else visit(x);
        }
      }
    };
    visit(expr);
    const want = shape(expr);
    for (let j = last; j < Math.min(this.tokens.length, last + 64); j++) {
      const probe = parseOne(`SELECT ${this.text.slice(from.start, (this.tokens[j] as Token).end)}`);
      const targets = (probe?.SelectStmt as Node | undefined)?.targetList as Node[] | undefined;
      if (targets?.length === 1 && shape((targets[0]?.ResTarget as Node | undefined)?.val) === want) return j;
    }
    return null;
  }
}

/** A parse-tree node without its locations, for comparing two parses of the same expression. */
function shape(node: unknown): string {
  return JSON.stringify(node, (key, value: unknown) => (key === 'location' || key === 'list_start' || key === 'list_end' ? undefined : value));
}
