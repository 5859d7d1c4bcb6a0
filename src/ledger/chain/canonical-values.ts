/**
 * A ledger row's canonical texts are what `CAST(CAST(value AS type) AS
 * VARCHAR)` gives in DuckDB (schema.ts, canonicalTextSql). For the common
 * column types and the plain spellings clients send, this module computes
 * the same text in JavaScript, so that an INSERT of parameters or literals
 * is chained without a round trip to the engine. A spelling it is not sure
 * of gives `undefined`: the caller then lets DuckDB evaluate the row, which
 * also reports the right error for a value that does not convert.
 *
 * Every rule here is checked against DuckDB itself in
 * test/unit/ledger/canonical-values.test.ts.
 */

/** One column's conversion: the canonical text, or undefined when DuckDB must decide. */
export type CanonicalConverter = (text: string) => string | undefined;

const INTEGER = /^[+-]?\d{1,20}$/;
const DECIMAL = /^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d{1,3})?$/;
const UUID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;
/** yyjson refuses an escaped lone surrogate that JSON.parse accepts: DuckDB decides those. */
const SURROGATE_ESCAPE = /\\u[dD][89a-fA-F]/;

function integer(min: bigint, max: bigint): CanonicalConverter {
  return (text) => {
    if (!INTEGER.test(text)) return undefined;
    const v = BigInt(text);
    return v < min || v > max ? undefined : v.toString();
  };
}

const CONVERTERS: ReadonlyMap<string, CanonicalConverter> = new Map<string, CanonicalConverter>([
  // A NUL is refused or kept differently by each layer: DuckDB decides.
  ['VARCHAR', (text) => (text.includes('\u0000') ? undefined : text)],
  ['SMALLINT', integer(-(2n ** 15n), 2n ** 15n - 1n)],
  ['INTEGER', integer(-(2n ** 31n), 2n ** 31n - 1n)],
  ['BIGINT', integer(-(2n ** 63n), 2n ** 63n - 1n)],
  ['DOUBLE', (text) => (DECIMAL.test(text) ? doubleText(Number(text)) : undefined)],
  ['UUID', (text) => (UUID.test(text) ? text.toLowerCase() : undefined)],
  ['BOOLEAN', booleanText],
  // DuckDB keeps JSON text as it was given, once it parses.
  ['JSON', (text) => (SURROGATE_ESCAPE.test(text) || !parses(text) ? undefined : text)],
]);

/** The converter for a column of this DuckDB type, or null when the engine always evaluates it. */
export function canonicalConverter(duckdbType: string): CanonicalConverter | null {
  return CONVERTERS.get(duckdbType.toUpperCase()) ?? null;
}

function booleanText(text: string): string | undefined {
  switch (text.toLowerCase()) {
    case 'true':
    case 't':
      return 'true';
    case 'false':
    case 'f':
      return 'false';
    default:
      return undefined;
  }
}

function parses(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/**
 * DuckDB's text for a DOUBLE: the shortest digits that read back as the
 * same number (as JavaScript finds them), laid out as Python's repr() does:
 * positional from 1e-4 up to 1e16 with at least one fractional digit,
 * scientific with a signed two-digit exponent beyond.
 */
export function doubleText(v: number): string | undefined {
  // DuckDB writes inf and nan; PostgreSQL refuses some spellings that reach them: DuckDB decides.
  if (!Number.isFinite(v)) return undefined;
  if (v === 0) return Object.is(v, -0) ? '-0.0' : '0.0';
  const sign = v < 0 ? '-' : '';
  const [mantissa = '', exponent = '0'] = Math.abs(v).toExponential().split('e');
  const digits = mantissa.replace('.', '');
  const exp = Number(exponent);
  if (exp < -4 || exp >= 16) {
    const body = digits.length === 1 ? digits : `${digits[0] as string}.${digits.slice(1)}`;
    const e = Math.abs(exp).toString().padStart(2, '0');
    return `${sign}${body}e${exp < 0 ? '-' : '+'}${e}`;
  }
  if (exp < 0) return `${sign}0.${'0'.repeat(-exp - 1)}${digits}`;
  const whole = digits.slice(0, exp + 1).padEnd(exp + 1, '0');
  const fraction = digits.slice(exp + 1);
  return `${sign}${whole}.${fraction === '' ? '0' : fraction}`;
}
