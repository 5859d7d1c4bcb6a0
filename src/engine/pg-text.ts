import { formatFloat4, formatFloat8, formatInterval, quoteArrayElement } from './pg-format.js';
import { isUnconstrainedDecimal, trimDecimalZeros } from '../sql/numeric.js';

/**
 * PostgreSQL's text of a value that DuckDB prints otherwise, read from
 * DuckDB's own text and type name (typeof): a list as an array's text
 * (`{1,"a b",NULL}` where DuckDB prints `[1, a b, NULL]`) and an interval in
 * IntervalStyle postgres (`1 mon -1 days` for `1 month -1 day`). A cast to
 * text, concat() and format() print values so in PostgreSQL.
 */
export function pgTextOf(text: string, type: string): string {
  if (type.endsWith('[]')) {
    const r = new ListReader(text, type.slice(0, -2));
    const out = r.list();
    if (r.i !== text.length) throw new Error(`cannot read a list's text: ${text}`);
    return out;
  }
  return elementText(text, type);
}

/** One element's text as PostgreSQL prints it, from DuckDB's. */
function elementText(text: string, type: string): string {
  switch (type) {
    case 'DOUBLE':
      return formatFloat8(floatOf(text));
    case 'FLOAT':
      return formatFloat4(Math.fround(floatOf(text)));
    case 'BOOLEAN':
      return text === 'true' ? 't' : text === 'false' ? 'f' : text;
    case 'INTERVAL':
      return intervalText(text);
    default: {
      const decimal = /^DECIMAL\((\d+),(\d+)\)$/.exec(type);
      return decimal !== null && isUnconstrainedDecimal(Number(decimal[1]), Number(decimal[2])) ? trimDecimalZeros(text) : text;
    }
  }
}

function floatOf(text: string): number {
  const t = text.toLowerCase();
  if (t === 'inf' || t === 'infinity') return Number.POSITIVE_INFINITY;
  if (t === '-inf' || t === '-infinity') return Number.NEGATIVE_INFINITY;
  if (t === 'nan' || t === '-nan') return Number.NaN;
  return Number(text);
}

const MICROS_PER_SECOND = 1_000_000n;

/** DuckDB's interval text (`1 year 2 months -3 days -01:02:03.5`) in IntervalStyle postgres. */
export function intervalText(text: string): string {
  let months = 0;
  let days = 0;
  let micros = 0n;
  const units = /(-?\d+) (year|month|day)s?/g;
  for (let m = units.exec(text); m !== null; m = units.exec(text)) {
    const n = Number(m[1]);
    if (m[2] === 'year') months += n * 12;
    else if (m[2] === 'month') months += n;
    else days += n;
  }
  const time = /(-?)(\d+):(\d\d):(\d\d)(?:\.(\d{1,6}))?$/.exec(text);
  if (time !== null) {
    const [, sign, h = '0', mi = '0', s = '0', frac = ''] = time;
    const whole = (BigInt(h) * 3600n + BigInt(mi) * 60n + BigInt(s)) * MICROS_PER_SECOND + BigInt(frac.padEnd(6, '0') || '0');
    micros = sign === '-' ? -whole : whole;
  }
  return formatInterval(months, days, micros);
}

/**
 * DuckDB's text of a list: `[a, 'b, c', NULL, [1, 2]]`. An element is
 * quoted with ' where it holds a separator, a quote, spaces at an end or
 * the word NULL, with \ before a quote or backslash in it; a JSON element
 * is written as it is.
 */
class ListReader {
  i = 0;
  constructor(
    private readonly s: string,
    private readonly element: string,
  ) {}

  list(): string {
    if (this.s[this.i] !== '[') throw new Error(`cannot read a list's text: ${this.s}`);
    this.i++;
    const items: string[] = [];
    if (this.s[this.i] === ']') {
      this.i++;
      return '{}';
    }
    for (;;) {
      items.push(this.item());
      const sep = this.s[this.i];
      if (sep === ']') {
        this.i++;
        return `{${items.join(',')}}`;
      }
      if (sep !== ',') throw new Error(`cannot read a list's text: ${this.s}`);
      this.i++;
      if (this.s[this.i] === ' ') this.i++;
    }
  }

  private item(): string {
    if (this.element.endsWith('[]')) {
      if (this.s.startsWith('NULL', this.i)) {
        this.i += 4;
        return 'NULL';
      }
      return ListReader.nested(this, this.element.slice(0, -2));
    }
    if (this.s[this.i] === "'") return quoteArrayElement(elementText(this.quoted(), this.element));
    const raw = this.bare();
    return raw === 'NULL' ? 'NULL' : quoteArrayElement(elementText(raw, this.element));
  }

  private quoted(): string {
    this.i++;
    let out = '';
    for (;;) {
      const c = this.s[this.i++];
      if (c === undefined) throw new Error(`cannot read a list's text: ${this.s}`);
      if (c === "'") return out;
      if (c === '\\' && this.i < this.s.length) out += this.s[this.i++];
      else out += c;
    }
  }

  /** Up to the next separator outside brackets and JSON strings (a JSON element is not quoted). */
  private bare(): string {
    const start = this.i;
    let depth = 0;
    let inString = false;
    while (this.i < this.s.length) {
      const c = this.s[this.i] as string;
      if (inString) {
        if (c === '\\') this.i++;
        else if (c === '"') inString = false;
      } else if (c === '"') inString = true;
      else if (c === '[' || c === '{') depth++;
      else if (c === ']' || c === '}') {
        if (depth === 0) break;
        depth--;
      } else if (c === ',' && depth === 0) break;
      this.i++;
    }
    return this.s.slice(start, this.i);
  }

  /** Reads a nested list at this reader's position, then moves it past. */
  static nested(outer: ListReader, element: string): string {
    const inner = new ListReader(outer.s, element);
    inner.i = outer.i;
    const text = inner.list();
    outer.i = inner.i;
    return text;
  }
}
