/**
 * PostgreSQL's text of a jsonb value: jsonb keeps a parsed value, not the
 * text it was given, so it prints objects with their keys sorted (shorter
 * keys first, then by their bytes) and each key once (the last one given),
 * ", " and ": " between items, numbers as numeric prints them (1e2 is 100,
 * 1.50 stays 1.50) and strings with only the escapes JSON requires. DuckDB
 * has one JSON type that keeps the text as written; cotwire prints a jsonb
 * result as PostgreSQL would.
 */

type JsonValue = string | { readonly number: string } | readonly JsonValue[] | JsonObject | boolean | null;

interface JsonObject {
  readonly entries: ReadonlyArray<readonly [string, JsonValue]>;
}

class Reader {
  i = 0;
  constructor(private readonly s: string) {}

  fail(): never {
    throw new SyntaxError(`invalid JSON at ${this.i}`);
  }

  space(): void {
    while (this.i < this.s.length && ' \t\n\r'.includes(this.s[this.i] as string)) this.i++;
  }

  value(): JsonValue {
    this.space();
    const c = this.s[this.i];
    if (c === '{') return this.object();
    if (c === '[') return this.array();
    if (c === '"') return this.string();
    for (const [word, v] of [
      ['true', true],
      ['false', false],
      ['null', null],
    ] as const) {
      if (this.s.startsWith(word, this.i)) {
        this.i += word.length;
        return v;
      }
    }
    const m = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/.exec(this.s.slice(this.i, this.i + 400));
    if (m === null) this.fail();
    this.i += m[0].length;
    return { number: m[0] };
  }

  object(): JsonObject {
    this.i++;
    const entries: Array<readonly [string, JsonValue]> = [];
    this.space();
    if (this.s[this.i] === '}') {
      this.i++;
      return { entries };
    }
    for (;;) {
      this.space();
      if (this.s[this.i] !== '"') this.fail();
      const key = this.string();
      this.space();
      if (this.s[this.i++] !== ':') this.fail();
      entries.push([key, this.value()]);
      this.space();
      const sep = this.s[this.i++];
      if (sep === '}') return { entries };
      if (sep !== ',') this.fail();
    }
  }

  array(): JsonValue[] {
    this.i++;
    const items: JsonValue[] = [];
    this.space();
    if (this.s[this.i] === ']') {
      this.i++;
      return items;
    }
    for (;;) {
      items.push(this.value());
      this.space();
      const sep = this.s[this.i++];
      if (sep === ']') return items;
      if (sep !== ',') this.fail();
    }
  }

  string(): string {
    this.i++;
    let out = '';
    for (;;) {
      const c = this.s[this.i++];
      if (c === undefined) this.fail();
      if (c === '"') return out;
      if (c !== '\\') {
        out += c;
        continue;
      }
      const e = this.s[this.i++];
      const simple: Record<string, string> = { '"': '"', '\\': '\\', '/': '/', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t' };
      if (e !== undefined && simple[e] !== undefined) out += simple[e];
      else if (e === 'u' && /^[0-9a-fA-F]{4}$/.test(this.s.slice(this.i, this.i + 4))) {
        out += String.fromCharCode(Number.parseInt(this.s.slice(this.i, this.i + 4), 16));
        this.i += 4;
      } else this.fail();
    }
  }
}

/** numeric's text of a JSON number: its digits at the scale the text gives (1.50e1 is 15.0, 1e2 is 100, -0 is 0). */
export function numericText(text: string): string {
  const m = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/.exec(text);
  if (m === null) return text;
  const [, sign, whole = '', fraction = '', exponent = '0'] = m;
  const exp = Number(exponent);
  const scale = Math.max(0, fraction.length - exp);
  let digits = whole + fraction;
  let point = whole.length + exp;
  if (point <= 0) {
    digits = '0'.repeat(1 - point) + digits;
    point = 1;
  }
  if (digits.length < point + scale) digits += '0'.repeat(point + scale - digits.length);
  const intPart = digits.slice(0, point).replace(/^0+(?=\d)/, '');
  const fracPart = digits.slice(point, point + scale);
  const out = scale > 0 ? `${intPart}.${fracPart}` : intPart;
  return sign === '-' && /[1-9]/.test(out) ? `-${out}` : out;
}

/** A string as PostgreSQL's escape_json writes it. */
function quoted(s: string): string {
  let out = '"';
  for (const ch of s) {
    const code = ch.codePointAt(0) as number;
    if (ch === '"') out += '\\"';
    else if (ch === '\\') out += '\\\\';
    else if (ch === '\b') out += '\\b';
    else if (ch === '\f') out += '\\f';
    else if (ch === '\n') out += '\\n';
    else if (ch === '\r') out += '\\r';
    else if (ch === '\t') out += '\\t';
    else if (code < 0x20) out += `\\u${code.toString(16).padStart(4, '0')}`;
    else out += ch;
  }
  return `${out}"`;
}

/** jsonb's key order: shorter keys first, then byte by byte. */
function compareKeys(a: string, b: string): number {
  const x = Buffer.from(a, 'utf8');
  const y = Buffer.from(b, 'utf8');
  return x.length - y.length || Buffer.compare(x, y);
}

function render(v: JsonValue): string {
  if (v === null) return 'null';
  if (typeof v === 'boolean') return v ? 'true' : 'false';
  if (typeof v === 'string') return quoted(v);
  if (Array.isArray(v)) return `[${v.map(render).join(', ')}]`;
  if ('number' in v) return numericText(v.number);
  const last = new Map<string, JsonValue>();
  for (const [k, x] of (v as JsonObject).entries) last.set(k, x);
  const keys = [...last.keys()].sort(compareKeys);
  return `{${keys.map((k) => `${quoted(k)}: ${render(last.get(k) as JsonValue)}`).join(', ')}}`;
}

/** PostgreSQL's jsonb text of a JSON text; null when the text is not JSON. */
export function jsonbText(json: string): string | null {
  try {
    const r = new Reader(json);
    const v = r.value();
    r.space();
    return r.i === json.length ? render(v) : null;
  } catch {
    return null;
  }
}

/**
 * One step of jsonb's `->` (a key, or an array's index counted from the end
 * when negative), or of a `#>` path (text, an index where the value is an
 * array and the text is an integer).
 */
export type JsonbStep = { readonly key: string } | { readonly index: number } | { readonly path: string };

/**
 * jsonb's `->` / `#>` (`asText`: `->>` / `#>>`): the value at the steps,
 * as jsonb prints it, or for text a string's own characters (and NULL for
 * JSON null); null where a step finds nothing. DuckDB's JSON reads numbers
 * as doubles (1.10 comes back 1.1); this keeps numeric's text.
 */
export function jsonbAt(json: string, steps: readonly JsonbStep[], asText: boolean): string | null {
  let v = parseJson(json);
  if (v === undefined) throw new SyntaxError('invalid input syntax for type json');
  for (const step of steps) {
    if (v === undefined) return null;
    const kind = kindOf(v);
    if (kind === 'object' && ('key' in step || 'path' in step)) {
      const key = 'key' in step ? step.key : step.path;
      let found: JsonValue | undefined;
      for (const [k, x] of (v as JsonObject).entries) if (k === key) found = x;
      v = found;
    } else if (kind === 'array' && ('index' in step || ('path' in step && /^-?\d+$/.test(step.path)))) {
      const items = v as readonly JsonValue[];
      const n = 'index' in step ? step.index : Number(step.path);
      v = items[n < 0 ? items.length + n : n];
    } else if (kind === 'scalar' && 'index' in step && (step.index === 0 || step.index === -1)) {
      // A scalar is an array of one to ->: 'true'::jsonb -> 0 is true.
    } else return null;
  }
  if (v === undefined) return null;
  if (!asText) return render(v);
  if (v === null) return null;
  return typeof v === 'string' ? v : render(v);
}

function parseJson(text: string): JsonValue | undefined {
  try {
    const r = new Reader(text);
    const v = r.value();
    r.space();
    return r.i === text.length ? v : undefined;
  } catch {
    return undefined;
  }
}

type Kind = 'object' | 'array' | 'scalar';

function kindOf(v: JsonValue): Kind {
  if (Array.isArray(v)) return 'array';
  return v !== null && typeof v === 'object' && 'entries' in v ? 'object' : 'scalar';
}

/** A number's value as a key: 1.0, 1 and 1e0 are one number in jsonb. */
function numberKey(text: string): string {
  const t = numericText(text);
  const trimmed = t.includes('.') ? t.replace(/0+$/, '').replace(/\.$/, '') : t;
  return trimmed === '-0' ? '0' : trimmed;
}

function scalarEquals(a: JsonValue, b: JsonValue): boolean {
  if (a !== null && b !== null && typeof a === 'object' && typeof b === 'object' && 'number' in a && 'number' in b) {
    return numberKey(a.number) === numberKey(b.number);
  }
  return a === b;
}

/** Each key once, the last given: jsonb keeps no duplicates. */
function lastEntries(o: JsonObject): Map<string, JsonValue> {
  const m = new Map<string, JsonValue>();
  for (const [k, v] of o.entries) m.set(k, v);
  return m;
}

/** JsonbDeepContains: an object holds the other's pairs, an array each of the other's elements, a scalar is equal. */
function contains(a: JsonValue, b: JsonValue): boolean {
  const ka = kindOf(a);
  const kb = kindOf(b);
  if (ka === 'object') {
    if (kb !== 'object') return false;
    const have = lastEntries(a as JsonObject);
    for (const [k, v] of lastEntries(b as JsonObject)) {
      if (!have.has(k)) return false;
      const mine = have.get(k) as JsonValue;
      const km = kindOf(mine);
      if (km !== kindOf(v)) return false;
      if (km === 'scalar' ? !scalarEquals(mine, v) : !contains(mine, v)) return false;
    }
    return true;
  }
  if (ka === 'array') {
    const items = a as readonly JsonValue[];
    // A scalar on the right is a one-element array: '["a"]' @> '"a"'.
    const wanted = kb === 'array' ? (b as readonly JsonValue[]) : kb === 'scalar' ? [b] : null;
    if (wanted === null) return false;
    return wanted.every((w) => {
      const kw = kindOf(w);
      return items.some((x) => kindOf(x) === kw && (kw === 'scalar' ? scalarEquals(x, w) : contains(x, w)));
    });
  }
  return kb === 'scalar' && scalarEquals(a, b);
}

/**
 * jsonb's @> as PostgreSQL decides it; null when either text is not JSON.
 * DuckDB's json_contains finds the right side anywhere in the left, at any
 * depth ('{"b": [1]}' would hold '[1]'); PostgreSQL matches structure from
 * the top, and compares numbers by value.
 */
export function jsonbContains(left: string, right: string): boolean | null {
  const a = parseJson(left);
  const b = parseJson(right);
  return a === undefined || b === undefined ? null : contains(a, b);
}
