/**
 * PostgreSQL's `numeric` without a precision holds any number of digits;
 * DuckDB's DECIMAL without one is DECIMAL(18,3), which rounds '1.23456' to
 * 1.235 without a word. cotwire spells an unconstrained numeric as
 * DECIMAL(38,9): 29 digits before the point, 9 after. Arithmetic on it keeps
 * DuckDB's widest precision (38) and a scale of at least 9 (a product of two
 * has scale 18), which is how such a value is recognised on the way out: it
 * is described as `numeric` without a type modifier and printed without the
 * trailing zeros its DuckDB scale pads it with.
 */
export const UNCONSTRAINED_NUMERIC = 'DECIMAL(38,9)';

/** Whether a DuckDB DECIMAL(width, scale) stands for PostgreSQL's unconstrained numeric. */
export function isUnconstrainedDecimal(width: number, scale: number): boolean {
  return width === 38 && scale >= 9;
}

/** '1.500000000' → '1.5', '2.000000000' → '2': the digits PostgreSQL would print for the value. */
export function trimDecimalZeros(text: string): string {
  if (!text.includes('.')) return text;
  const trimmed = text.replace(/0+$/, '');
  return trimmed.endsWith('.') ? trimmed.slice(0, -1) : trimmed;
}

/** The widest DECIMAL DuckDB has: a numeric needing more digits cannot be held exactly. */
export const MAX_DECIMAL_DIGITS = 38;

/** A numeric's text as PostgreSQL reads it (numeric_in): sign, digits before and after the point, exponent. */
const NUMERIC_TEXT = /^\s*([+-]?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?\s*$/;

/**
 * The digits of a numeric's text, as PostgreSQL keeps them: how many come
 * before the point (leading zeros dropped) and its display scale (the digits
 * after the point, exponent applied: '1e-20' has 20, '1.50' has 2, '1.5e3'
 * none). Null when the text is not a finite number (NaN and Infinity, which
 * DuckDB's DECIMAL cannot hold, and anything else, refused by the cast).
 */
export function numericDigits(text: string): { readonly integer: number; readonly scale: number } | null {
  const m = NUMERIC_TEXT.exec(text);
  if (m === null) return null;
  const whole = m[2] ?? '';
  const frac = m[3] ?? '';
  if (whole === '' && frac === '') return null;
  const exponent = Number(m[4] ?? '0');
  if (!Number.isSafeInteger(exponent)) return null;
  const scale = Math.max(0, frac.length - exponent);
  // The digits before the point once the exponent has moved it.
  const digits = (whole + frac).replace(/^0+/, '');
  const integer = Math.max(0, digits.length - (frac.length - exponent));
  return { integer, scale };
}

/**
 * The DuckDB type that holds a numeric literal exactly, as PostgreSQL holds
 * it: DECIMAL(its digits, its display scale), so `1.23456789012345678901::numeric`
 * keeps its 20 decimals and `'1e-20'::numeric` is not 0. The width is the
 * literal's own, not 38, because DuckDB gives a VALUES list or a CASE of
 * DECIMAL(38,1) and DECIMAL(3,2) the type DECIMAL(38,1), and would round
 * the other. A literal needing more than 38 digits gets DECIMAL(38, its
 * scale) all the same, whose cast then fails: numeric value out of range,
 * never a rounded number. Null when the text is not a finite number.
 */
export function numericLiteralType(text: string): string | null {
  const digits = numericDigits(text);
  if (digits === null) return null;
  const scale = Math.min(digits.scale, MAX_DECIMAL_DIGITS);
  return `DECIMAL(${Math.min(MAX_DECIMAL_DIGITS, Math.max(1, digits.integer + scale))},${scale})`;
}

/**
 * Whether a numeric's text has digits that DECIMAL(38, scale) would round
 * away: nonzero digits past `scale` after the point, or more digits before
 * the point than 38 - scale leaves.
 */
export function losesDigits(text: string, scale: number): boolean {
  const m = NUMERIC_TEXT.exec(text);
  const digits = numericDigits(text);
  if (m === null || digits === null) return false;
  if (digits.integer > MAX_DECIMAL_DIGITS - scale) return true;
  if (digits.scale <= scale) return false;
  // Exponent applied: the digits past the point, of which those past `scale` must all be zero.
  const exponent = Number(m[4] ?? '0');
  const all = `${m[2] ?? ''}${m[3] ?? ''}`;
  const point = (m[2] ?? '').length + exponent;
  const past = point < 0 ? '0'.repeat(-point) + all : all.slice(point);
  return /[1-9]/.test(past.slice(scale));
}

/** Whether DuckDB reads a number token as a double: an exponent, or more digits than its widest integer and decimal hold. */
export function readAsDouble(text: string): boolean {
  return /[eE]/.test(text) || text.replace(/[^0-9]/g, '').replace(/^0+/, '').length > MAX_DECIMAL_DIGITS;
}

/**
 * A numeric's text without an exponent ('1.5e-3' → '0.0015'): DuckDB's cast
 * from text reads an exponent only when the DECIMAL has a digit to spare.
 * The text itself when it has none or is not a finite number.
 */
export function plainNumeric(text: string): string {
  const m = NUMERIC_TEXT.exec(text);
  if (m === null || m[4] === undefined) return text.trim();
  const exponent = Number(m[4]);
  const whole = m[2] ?? '';
  const frac = m[3] ?? '';
  const point = whole.length + exponent;
  const all = whole + frac;
  const digits =
    point <= 0 ? `0.${'0'.repeat(-point)}${all}` : point >= all.length ? all + '0'.repeat(point - all.length) : `${all.slice(0, point)}.${all.slice(point)}`;
  return `${m[1] === '-' ? '-' : ''}${digits.replace(/^0+(?=\d)/, '')}`;
}

/**
 * A numeric constant as DuckDB reads it exactly: itself, or read from its
 * text where DuckDB would read a double. A constant wider than any DECIMAL
 * (`1e300`, `1e-50`) stays the double DuckDB reads: it is most often headed
 * for a float column, where PostgreSQL too makes it a double, and refusing
 * it would refuse an INSERT PostgreSQL takes.
 */
export function exactNumericSql(text: string): string {
  const digits = readAsDouble(text) ? numericDigits(text) : null;
  if (digits === null || digits.integer + digits.scale > MAX_DECIMAL_DIGITS) return text;
  return `CAST('${plainNumeric(text)}' AS ${numericLiteralType(text)})`;
}

/** The largest scale PostgreSQL gives a quotient's display (NUMERIC_MAX_DISPLAY_SCALE), and the significant digits it keeps at least. */
const NUMERIC_MIN_SIG_DIGITS = 16;

/**
 * numeric's quotient scale rule (select_div_scale): at least 16 significant
 * digits, judged on the first base-10000 digit group of each operand, and no
 * fewer decimals than either operand shows.
 */
function divisionScale(a: { digits: bigint; scale: number }, b: { digits: bigint; scale: number }): number {
  const group = (v: { digits: bigint; scale: number }): { weight: number; first: number } => {
    const text = (v.digits < 0n ? -v.digits : v.digits).toString();
    if (text === '0') return { weight: 0, first: 0 };
    // Digits before the point, and after it, as decimal strings.
    const intPart = text.length > v.scale ? text.slice(0, text.length - v.scale) : '';
    if (intPart !== '') {
      const weight = Math.floor((intPart.length - 1) / 4);
      return { weight, first: Number(intPart.slice(0, intPart.length - 4 * weight)) };
    }
    const frac = text.padStart(v.scale, '0');
    const k = Math.floor(frac.search(/[1-9]/) / 4);
    return { weight: -(k + 1), first: Number(frac.slice(4 * k, 4 * k + 4).padEnd(4, '0')) };
  };
  const x = group(a);
  const y = group(b);
  let qweight = x.weight - y.weight;
  if (x.first <= y.first) qweight--;
  return Math.min(1000, Math.max(NUMERIC_MIN_SIG_DIGITS - qweight * 4, a.scale, b.scale, 0));
}

/** A decimal's text as an integer of its digits and a scale; trailing zeros after the point dropped when `trim`. */
function scaled(text: string, trim: boolean): { digits: bigint; scale: number } {
  const plain = plainNumeric(text);
  const [whole = '0', rawFrac = ''] = plain.replace(/^[+-]/, '').split('.');
  const frac = trim ? rawFrac.replace(/0+$/, '') : rawFrac;
  const digits = BigInt(`${whole}${frac}` || '0');
  return { digits: plain.startsWith('-') ? -digits : digits, scale: frac.length };
}

/**
 * a / b as PostgreSQL's numeric computes it: exact, rounded half away from
 * zero at the scale select_div_scale chooses. `trimA`/`trimB` drop an
 * operand's trailing zeros first, for values of numeric without precision
 * whose DuckDB type pads them (PostgreSQL keeps each value's own scale, and
 * cotwire prints those without the padding). Returns the quotient's text and
 * its scale. b must not be zero.
 */
export function numericQuotient(a: string, b: string, trimA = false, trimB = false): { readonly text: string; readonly scale: number } {
  const x = scaled(a, trimA);
  const y = scaled(b, trimB);
  if (y.digits === 0n) throw new RangeError('division by zero');
  const scale = divisionScale(x, y);
  // x/y = (X / 10^sx) / (Y / 10^sy); at `scale` decimals: X * 10^(sy + scale - sx) / Y.
  const shift = y.scale + scale - x.scale;
  let num = shift >= 0 ? x.digits * 10n ** BigInt(shift) : x.digits;
  let den = shift >= 0 ? y.digits : y.digits * 10n ** BigInt(-shift);
  if (den < 0n) {
    num = -num;
    den = -den;
  }
  const negative = num < 0n;
  const abs = negative ? -num : num;
  let q = abs / den;
  if ((abs % den) * 2n >= den) q += 1n;
  const body = q.toString().padStart(scale + 1, '0');
  const text = scale === 0 ? body : `${body.slice(0, body.length - scale)}.${body.slice(body.length - scale)}`;
  return { text: q === 0n || !negative ? text : `-${text}`, scale };
}

/** The scale of a numeric quotient or average as DuckDB holds it: DECIMAL(38,20), 18 digits before the point. */
export const QUOTIENT_SCALE = 20;

/**
 * The text of a numeric quotient for DECIMAL(38,20), given each operand's
 * text and DuckDB type (typeof): a value of numeric without precision
 * (DECIMAL(38, 9 or more)) is read without its padding zeros. Throws a
 * RangeError when PostgreSQL's answer has digits past the 20th decimal,
 * which the DECIMAL would round away.
 */
export function quotientText(a: string, typeA: string, b: string, typeB: string): string {
  const padded = (type: string): boolean => {
    const m = /^DECIMAL\((\d+),(\d+)\)$/.exec(type);
    return m !== null && isUnconstrainedDecimal(Number(m[1]), Number(m[2]));
  };
  const q = numericQuotient(a, b, padded(typeA), padded(typeB));
  if (q.scale > QUOTIENT_SCALE && /[1-9]/.test(q.text.slice(q.text.length - (q.scale - QUOTIENT_SCALE)))) {
    throw new RangeError(
      `numeric quotient ${a} / ${b} has significant digits past the ${QUOTIENT_SCALE}th decimal, which cotwire's numeric division does not hold; cast an operand to double precision, or scale it`,
    );
  }
  return q.text;
}

/**
 * sqrt(x) of a numeric as PostgreSQL computes it (numeric_sqrt): rounded
 * half up at a scale of 16 significant digits judged on x's first base-10000
 * digit group, and no fewer decimals than x shows. Returns the text and
 * its scale; throws a RangeError for a negative x.
 */
export function numericSquareRoot(x: string, trim = false): { readonly text: string; readonly scale: number } {
  const v = scaled(x, trim);
  if (v.digits < 0n) throw new RangeError('cannot take square root of a negative number');
  const text = v.digits.toString();
  const intLength = text.length - v.scale;
  let weight = 0;
  if (v.digits !== 0n) {
    if (intLength > 0) weight = Math.floor((intLength - 1) / 4);
    else weight = -(Math.floor(text.padStart(v.scale, '0').search(/[1-9]/) / 4) + 1);
  }
  const scale = Math.min(1000, Math.max(NUMERIC_MIN_SIG_DIGITS - (2 * weight + 1), v.scale, 0));
  // sqrt(X / 10^s) at `scale` decimals: isqrt(X * 10^(2 * scale - s)), rounded.
  const n = v.digits * 10n ** BigInt(2 * scale - v.scale);
  let r = integerSquareRoot(n);
  if (n - r * r > r) r += 1n;
  const body = r.toString().padStart(scale + 1, '0');
  return { text: scale === 0 ? body : `${body.slice(0, body.length - scale)}.${body.slice(body.length - scale)}`, scale };
}

function integerSquareRoot(n: bigint): bigint {
  if (n < 2n) return n;
  let x = BigInt(`1${'0'.repeat(Math.ceil(n.toString().length / 2))}`);
  for (;;) {
    const y = (x + n / x) / 2n;
    if (y >= x) return x;
    x = y;
  }
}

/** The text of a numeric square root for DECIMAL(38,20), given x's text and DuckDB type (see quotientText). */
export function squareRootText(x: string, type: string): string {
  const m = /^DECIMAL\((\d+),(\d+)\)$/.exec(type);
  const r = numericSquareRoot(x, m !== null && isUnconstrainedDecimal(Number(m[1]), Number(m[2])));
  if (r.scale > QUOTIENT_SCALE && /[1-9]/.test(r.text.slice(r.text.length - (r.scale - QUOTIENT_SCALE)))) {
    throw new RangeError(
      `numeric value sqrt(${x}) has significant digits past the ${QUOTIENT_SCALE}th decimal, which cotwire's numeric does not hold; cast it to double precision`,
    );
  }
  return r.text;
}
