/**
 * DuckDB's parser replaces some Unicode spaces with ASCII spaces before its
 * scanner runs (Parser::StripUnicodeSpaces in DuckDB 1.5), so that
 * `DROP<U+00A0>TABLE` is two words to DuckDB while any scanner that follows
 * PostgreSQL's rules reads one identifier. cotwire applies the same
 * replacement, byte for byte and quirk for quirk, to every statement before
 * it reads it, and sends DuckDB the replaced text: DuckDB's own pass then
 * changes nothing, so the text cotwire classifies is the text DuckDB scans.
 *
 * The pass is not a scanner. It tracks '', "", $tag$ quotes and `--`
 * comments only, knows nothing of E'' escapes or block comments, and skips
 * the last two bytes of the text; where it disagrees with the scanner it
 * leaves a Unicode space in place, and the scanner (DuckDB's, and
 * cotwire's lexer) then reads it as part of an identifier, as it reads any
 * byte from 0x80 up.
 */

/** The characters the pass replaces: U+00A0, U+2000..U+200B, U+202F, U+205F, U+2060, U+3000, U+FEFF. */
export const DUCKDB_UNICODE_SPACES: readonly number[] = [0x00a0, ...range(0x2000, 0x200b), 0x202f, 0x205f, 0x2060, 0x3000, 0xfeff];

const CANDIDATE = /[\u00a0\u2000-\u200b\u202f\u205f\u2060\u3000\ufeff]/;

function range(from: number, to: number): number[] {
  const out: number[] = [];
  for (let c = from; c <= to; c++) out.push(c);
  return out;
}

const DOLLAR = 0x24;
const isTagStart = (b: number | undefined): boolean => b !== undefined && ((b >= 0x41 && b <= 0x5a) || (b >= 0x61 && b <= 0x7a) || b === 0x5f || b >= 0x80);
const isTagPart = (b: number | undefined): boolean => isTagStart(b) || (b !== undefined && b >= 0x30 && b <= 0x39);

/** The byte length of the Unicode space starting at `pos` as the pass recognises it, or 0. */
function spaceAt(q: Buffer, pos: number): number {
  const b = q[pos];
  if (b === 0xc2) return q[pos + 1] === 0xa0 ? 2 : 0;
  if (b === 0xe2) {
    const b1 = q[pos + 1];
    const b2 = q[pos + 2] as number;
    if (b1 === 0x80 && ((b2 >= 0x80 && b2 <= 0x8b) || b2 === 0xaf)) return 3;
    if (b1 === 0x81 && (b2 === 0x9f || b2 === 0xa0)) return 3;
    return 0;
  }
  if (b === 0xe3) return q[pos + 1] === 0x80 && q[pos + 2] === 0x80 ? 3 : 0;
  if (b === 0xef) return q[pos + 1] === 0xbb && q[pos + 2] === 0xbf ? 3 : 0;
  return 0;
}

type PassState = 'regular' | 'quoted' | 'dollar' | 'comment';

/** The positions (byte offset, byte length) of the spaces DuckDB's pass replaces in `q`. */
function replacedSpaces(q: Buffer): Array<readonly [number, number]> {
  const n = q.length;
  const found: Array<readonly [number, number]> = [];
  let pos = 0;
  let state: PassState = 'regular';
  let quote = 0;
  let tag: Buffer = Buffer.alloc(0);
  for (;;) {
    switch (state) {
      case 'regular': {
        let next: PassState | null = null;
        // Only positions with two more bytes after them are examined.
        for (; pos + 2 < n; pos++) {
          const width = spaceAt(q, pos);
          if (width > 0) {
            found.push([pos, width]);
            continue;
          }
          const b = q[pos];
          if (b === 0x22 || b === 0x27) {
            quote = b;
            pos++;
            next = 'quoted';
            break;
          }
          if (b === DOLLAR && (q[pos + 1] === DOLLAR || isTagStart(q[pos + 1]))) {
            const start = ++pos;
            let tagEnd = -1;
            for (; pos + 2 < n; pos++) {
              if (q[pos] === DOLLAR) {
                tagEnd = pos;
                break;
              }
              if (!isTagPart(q[pos])) break;
            }
            if (tagEnd >= 0) {
              tag = q.subarray(start, tagEnd);
              next = 'dollar';
              break;
            }
            if (pos + 2 >= n) return found;
            // Not a tag after all: this byte is examined again as ordinary text.
            pos--;
            continue;
          }
          if (b === 0x2d && q[pos + 1] === 0x2d) {
            next = 'comment';
            break;
          }
        }
        if (next === null) return found;
        state = next;
        break;
      }
      case 'quoted': {
        let closed = false;
        for (; pos + 1 < n; pos++) {
          if (q[pos] !== quote) continue;
          if (q[pos + 1] === quote) {
            pos++;
            continue;
          }
          pos++;
          closed = true;
          break;
        }
        if (!closed) return found;
        state = 'regular';
        break;
      }
      case 'dollar': {
        let closed = false;
        const t = tag.length;
        for (; pos + 2 < n; pos++) {
          if (q[pos] === DOLLAR && n - (pos + 1) >= t + 1 && q[pos + t + 1] === DOLLAR && q.compare(tag, 0, t, pos + 1, pos + 1 + t) === 0) {
            // The pass resumes on the closing dollar sign itself.
            pos += t + 1;
            closed = true;
            break;
          }
        }
        if (!closed) return found;
        state = 'regular';
        break;
      }
      case 'comment': {
        for (; pos < n; pos++) {
          if (q[pos] === 0x0a || q[pos] === 0x0d) break;
        }
        if (pos >= n) return found;
        state = 'regular';
        break;
      }
    }
  }
}

/** One application of DuckDB's pass: every space it would replace becomes ' '. */
export function stripUnicodeSpacesOnce(text: string): string {
  if (!CANDIDATE.test(text)) return text;
  const q = Buffer.from(text, 'utf8');
  const spaces = replacedSpaces(q);
  if (spaces.length === 0) return text;
  const parts: Buffer[] = [];
  let prev = 0;
  for (const [pos, width] of spaces) {
    parts.push(q.subarray(prev, pos), SPACE);
    prev = pos + width;
  }
  parts.push(q.subarray(prev));
  return Buffer.concat(parts).toString('utf8');
}

const SPACE = Buffer.from(' ');

/**
 * The text as DuckDB's scanner will see it, and a fixed point of DuckDB's
 * pass: DuckDB applies it again to whatever it is sent (a statement on its
 * own, where the pass may track quotes differently than over the whole
 * string), and must find nothing left to replace. Each replaced character
 * is one UTF-16 unit, so offsets into the text do not move.
 */
export function stripUnicodeSpaces(text: string): string {
  let current = text;
  for (;;) {
    const next = stripUnicodeSpacesOnce(current);
    if (next === current) return current;
    current = next;
  }
}
