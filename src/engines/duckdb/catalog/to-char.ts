import { quoteLiteral as quote } from '../../../sql/identifiers.js';
import { P } from './catalog-sql.js';
import type { MacroDef } from './pg-functions.js';

/**
 * PostgreSQL's to_char(value, 'format') with a literal format, as DuckDB
 * SQL: a date/time pattern becomes strftime pieces (with PostgreSQL's
 * padding of month and day names), a numeric pattern (9, 0, '.', ',', FM)
 * a printf with PostgreSQL's widths. A pattern with anything else is left
 * alone, so the call fails as an unknown function rather than answering
 * differently.
 */

/** Date/time tokens, longest first, and the SQL each becomes over the value `v` (`fm`: no padding). */
const TIME_TOKENS: ReadonlyArray<readonly [string, (v: string, fm: boolean) => string]> = [
  ['HH24', (v, fm) => `strftime(${v}, '${fm ? '%-H' : '%H'}')`],
  ['HH12', (v, fm) => `strftime(${v}, '${fm ? '%-I' : '%I'}')`],
  ['YYYY', (v) => `strftime(${v}, '%Y')`],
  ['MONTH', (v, fm) => (fm ? `upper(strftime(${v}, '%B'))` : `rpad(upper(strftime(${v}, '%B')), 9, ' ')`)],
  ['Month', (v, fm) => (fm ? `strftime(${v}, '%B')` : `rpad(strftime(${v}, '%B'), 9, ' ')`)],
  ['month', (v, fm) => (fm ? `lower(strftime(${v}, '%B'))` : `rpad(lower(strftime(${v}, '%B')), 9, ' ')`)],
  ['DAY', (v, fm) => (fm ? `upper(strftime(${v}, '%A'))` : `rpad(upper(strftime(${v}, '%A')), 9, ' ')`)],
  ['Day', (v, fm) => (fm ? `strftime(${v}, '%A')` : `rpad(strftime(${v}, '%A'), 9, ' ')`)],
  ['day', (v, fm) => (fm ? `lower(strftime(${v}, '%A'))` : `rpad(lower(strftime(${v}, '%A')), 9, ' ')`)],
  ['MON', (v) => `upper(strftime(${v}, '%b'))`],
  ['Mon', (v) => `strftime(${v}, '%b')`],
  ['mon', (v) => `lower(strftime(${v}, '%b'))`],
  ['DDD', (v, fm) => `strftime(${v}, '${fm ? '%-j' : '%j'}')`],
  ['DY', (v) => `upper(strftime(${v}, '%a'))`],
  ['Dy', (v) => `strftime(${v}, '%a')`],
  ['dy', (v) => `lower(strftime(${v}, '%a'))`],
  ['YY', (v) => `strftime(${v}, '%y')`],
  ['MM', (v, fm) => `strftime(${v}, '${fm ? '%-m' : '%m'}')`],
  ['DD', (v, fm) => `strftime(${v}, '${fm ? '%-d' : '%d'}')`],
  ['HH', (v, fm) => `strftime(${v}, '${fm ? '%-I' : '%I'}')`],
  ['MI', (v, fm) => `strftime(${v}, '${fm ? '%-M' : '%M'}')`],
  ['SS', (v, fm) => `strftime(${v}, '${fm ? '%-S' : '%S'}')`],
  ['MS', (v) => `strftime(${v}, '%g')`],
  ['US', (v) => `strftime(${v}, '%f')`],
  ['AM', (v) => `strftime(${v}, '%p')`],
  ['PM', (v) => `strftime(${v}, '%p')`],
  ['am', (v) => `lower(strftime(${v}, '%p'))`],
  ['pm', (v) => `lower(strftime(${v}, '%p'))`],
  ['TZ', (v) => `strftime(${v}, '%Z')`],
  ['Q', (v) => `CAST(quarter(${v}) AS VARCHAR)`],
];

/** Characters PostgreSQL copies as they are. */
const LITERAL = /^[ \-/:.,;T_()]$/;

function timeFormat(value: string, format: string): string | null {
  const parts: string[] = [];
  let i = 0;
  while (i < format.length) {
    if (format[i] === '"') {
      const end = format.indexOf('"', i + 1);
      if (end < 0) return null;
      parts.push(quote(format.slice(i + 1, end)));
      i = end + 1;
      continue;
    }
    let fm = false;
    if (format.startsWith('FM', i)) {
      fm = true;
      i += 2;
    }
    const token = TIME_TOKENS.find(([t]) => format.startsWith(t, i));
    if (token !== undefined) {
      parts.push(token[1](value, fm));
      i += token[0].length;
      continue;
    }
    const ch = format[i] as string;
    if (fm || !LITERAL.test(ch)) return null;
    parts.push(quote(ch));
    i++;
  }
  return parts.length === 0 ? null : `(${parts.join(' || ')})`;
}

function numberFormat(value: string, format: string, witness: string | null): string | null {
  const fm = format.startsWith('FM');
  const pattern = fm ? format.slice(2) : format;
  const m = /^([90,]*)(?:\.([90]*))?$/.exec(pattern);
  if (m === null || !/[90]/.test(pattern)) return null;
  const whole = m[1] as string;
  const fraction = m[2];
  if (whole.startsWith(',') || whole.endsWith(',') || whole.includes(',,')) return null;
  const digits = whole.replaceAll(',', '').length;
  const decimals = fraction?.length ?? 0;
  const firstZero = whole.replaceAll(',', '').indexOf('0');
  const minDigits = firstZero < 0 ? (decimals > 0 ? 0 : 1) : digits - firstZero;
  const grouped = whole.includes(',');
  // Rounded as numeric rounds (half away from zero, on the decimal value), or a double as PostgreSQL's printf rounds
  // its binary value (2.675 is 2.67499999... and prints 2.67), chosen by the value's witness; then printed.
  const x = witness === null ? `round(CAST(${value} AS DECIMAL(38,10)), ${decimals})` : `${P}.cot_to_char_round(${value}, ${decimals}, ${witness})`;
  const body = grouped ? `format('{:,.${decimals}f}', abs(${x}))` : `printf('%0${minDigits + (decimals > 0 ? decimals + 1 : 0)}.${decimals}f', abs(${x}))`;
  // A zero integer part prints as PostgreSQL prints it: nothing before the point for 9s (' .50'), 0 for a 0.
  const noLeadingZero = minDigits === 0 ? `regexp_replace(${body}, '^0\\.', '.')` : body;
  const trimmed = fm && decimals > 0 && !(fraction as string).includes('0') ? `rtrim(${noLeadingZero}, '0')` : noLeadingZero;
  // A double's sign is its own, a numeric's its rounded value's (PostgreSQL: -0.1 is '-0' as float8, ' 0' as numeric).
  const negative = witness === null ? `${x} < 0` : `coalesce(${P}.cot_to_char_negative(${value}, ${witness}), ${x} < 0)`;
  const signed = `CASE WHEN ${negative} THEN '-' ELSE '' END || ${trimmed}`;
  const width = whole.length + (fraction === undefined ? 0 : decimals + 1) + 1;
  const overflow = `abs(${x}) >= ${10 ** digits}`;
  // An overflow keeps its sign where the number's would stand: '-###.##'.
  const marks = `${whole.replace(/[90]/g, '#')}${fraction === undefined ? '' : `.${'#'.repeat(decimals)}`}`;
  const hashes = `CASE WHEN ${x} < 0 THEN ${quote(`-${marks}`)} ELSE ${quote(`${' '.repeat(fm ? 0 : 1)}${marks}`)} END`;
  const padded = fm ? signed : `lpad(${signed}, ${width}, ' ')`;
  return `(CASE WHEN ${value} IS NULL THEN NULL WHEN ${overflow} THEN ${hashes} ELSE ${padded} END)`;
}

/** to_char(value, format) as DuckDB SQL, or null when the format is not one translated here. */
export function toCharSql(value: string, format: string, witness: string | null = null): string | null {
  const v = `(${value})`;
  return /^(FM)?[90,.]+$/.test(format) ? numberFormat(v, format, witness) : timeFormat(v, format);
}

/** The number a to_char pattern prints, rounded to `d` places as PostgreSQL rounds the value's type (see numberFormat). */
export const TO_CHAR_MACROS: readonly MacroDef[] = [
  [
    'cot_to_char_round',
    [
      ...(['DOUBLE', 'FLOAT'] as const).map((t) => [`x, d, w ${t}`, `CAST(printf('%.' || d || 'f', x) AS DECIMAL(38,10))`] as const),
      // Overloads of their own, or DuckDB would cast these witnesses to double.
      ...(['SMALLINT', 'INTEGER', 'BIGINT', 'HUGEINT', 'DECIMAL(38,9)'] as const).map((t) => [`x, d, w ${t}`, 'round(CAST(x AS DECIMAL(38,10)), d)'] as const),
      ['x, d, w', 'round(CAST(x AS DECIMAL(38,10)), d)'],
    ],
  ],
  [
    'cot_to_char_negative',
    [
      ...(['DOUBLE', 'FLOAT'] as const).map((t) => [`x, w ${t}`, 'x < 0'] as const),
      ...(['SMALLINT', 'INTEGER', 'BIGINT', 'HUGEINT', 'DECIMAL(38,9)'] as const).map((t) => [`x, w ${t}`, 'CAST(NULL AS BOOLEAN)'] as const),
      ['x, w', 'CAST(NULL AS BOOLEAN)'],
    ],
  ],
];
