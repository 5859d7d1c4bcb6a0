import { QUOTIENT_SCALE, UNCONSTRAINED_NUMERIC } from '../../../sql/numeric.js';
import { P } from './catalog-sql.js';
import type { MacroDef } from './pg-functions.js';

/**
 * Results typed as PostgreSQL types them where DuckDB's differ: numeric
 * division and avg() of integers and numerics (double in DuckDB), sum() of
 * int2 and int4 (int8; int128 in DuckDB), date - date (integer; bigint).
 * Each macro's overload is chosen by the type of a witness argument
 * (engines/duckdb/catalog/type-witness.ts), which no body evaluates.
 */

/** The types whose division and average are numeric in PostgreSQL, as DuckDB holds them. */
const EXACT_TYPES = ['SMALLINT', 'INTEGER', 'BIGINT', 'HUGEINT', 'DECIMAL(38,9)'];

/**
 * A double as numeric with 15 significant digits, all a double carries
 * (a plain cast to DECIMAL would print its binary noise: 33.5033333333333374).
 */
const NUMERIC_OF_DOUBLE = `CASE WHEN q = 0 OR NOT isfinite(q) THEN CAST(q AS DECIMAL(38,16))
  ELSE CAST(round(q * power(10, least(16, 15 - CAST(ceil(log10(abs(q))) AS INTEGER)))) AS DECIMAL(38,0))
     * CAST(power(10, -least(16, 15 - CAST(ceil(log10(abs(q))) AS INTEGER))) AS DECIMAL(38,16)) END`;

/**
 * a / b as PostgreSQL's numeric divides (cot_numeric_quotient, registered by
 * the engine adapter on sql/numeric.ts), held as DECIMAL(38,20). It reads
 * each operand's digits as text and costs about 15 microseconds a row here,
 * where DuckDB's double division costs nanoseconds: the macros built on
 * 128-bit integers instead (weights and display scales per row) cost more,
 * 60 microseconds a row, as DuckDB expands a macro's arguments wherever the
 * body names them.
 */
const quotient = (a: string, b: string): string =>
  `CAST(cot_numeric_quotient(CAST(${a} AS VARCHAR), typeof(${a}), CAST(${b} AS VARCHAR), typeof(${b})) AS DECIMAL(38,${QUOTIENT_SCALE}))`;

const OWN_DIVISION = `a / ${P}.cot_divisor(b, a)`;
const NUMERIC_DIVISION = quotient('a', `${P}.cot_divisor(b, a)`);

export const RESULT_TYPE_MACROS: readonly MacroDef[] = [
  ['cot_numeric', [['q', NUMERIC_OF_DOUBLE]]],
  // a / b, chosen by the witnesses' types: numeric for integers and numerics mixed, or int128 (a sum of
  // bigints, numeric in PostgreSQL); DuckDB's own for integers (integer_division), doubles and the rest.
  [
    'cot_div',
    [
      ['a, b, wa DECIMAL(38,9), wb DECIMAL(38,9)', NUMERIC_DIVISION],
      ['a, b, wa HUGEINT, wb HUGEINT', NUMERIC_DIVISION],
      // An interval divided by a number (integer_division makes DuckDB's / an integer division, which intervals lack).
      ['a, b, wa INTERVAL, wb DOUBLE', `a * (1 / CAST(${P}.cot_divisor(b, a) AS DOUBLE))`],
      ['a, b, wa DOUBLE, wb DOUBLE', OWN_DIVISION],
      ['a, b, wa BIGINT, wb BIGINT', OWN_DIVISION],
      ['a, b, wa INTEGER, wb INTEGER', OWN_DIVISION],
      ['a, b, wa SMALLINT, wb SMALLINT', OWN_DIVISION],
      ['a, b, wa, wb', OWN_DIVISION],
    ],
  ],
  // a % b, chosen by the witnesses' types: numerics (and int128s) each given the type of their sum, where DuckDB
  // takes two DECIMALs of different widths, or an int128 and a DECIMAL, for doubles (-12345678901234567890 %
  // 88710.27 would be 900 off). The sum's type has the larger scale, which is the remainder's in PostgreSQL
  // (7.50 % 2 is 1.50). Each operand is named once, in a one-element list's lambda, as a macro copies its
  // arguments wherever the body names them. DuckDB's own for the rest.
  [
    'cot_mod',
    [
      ...(['DECIMAL(38,9)', 'HUGEINT'] as const).map(
        (t) =>
          [
            `a, b, wa ${t}, wb ${t}`,
            `list_transform([{'x': a, 'y': b}], v -> (v.x + CASE WHEN false THEN v.y ELSE 0 END) % ${P}.cot_divisor(v.y + CASE WHEN false THEN v.x ELSE 0 END, v.x))[1]`,
          ] as const,
      ),
      ...(['DOUBLE', 'BIGINT', 'INTEGER', 'SMALLINT'] as const).map((t) => [`a, b, wa ${t}, wb ${t}`, `a % ${P}.cot_divisor(b, a)`] as const),
      ['a, b, wa, wb', `a % ${P}.cot_divisor(b, a)`],
    ],
  ],
  // A branch beside a quotient (rewrite/result-types.ts, widenedBranches): a numeric at the quotients' scale.
  [
    'cot_widen',
    [
      ...(['DECIMAL(38,9)', 'HUGEINT'] as const).map((t) => [`x, w ${t}`, `CAST(x AS DECIMAL(38,${QUOTIENT_SCALE}))`] as const),
      // Overloads of their own, or DuckDB would cast these witnesses to one above: an integer (an integer
      // quotient's branch) and a double keep their types.
      ...(['BIGINT', 'INTEGER', 'SMALLINT', 'DOUBLE'] as const).map((t) => [`x, w ${t}`, 'x'] as const),
      ['x, w', 'x'],
    ],
  ],
  // A branch of a CASE, COALESCE, GREATEST or LEAST beside numerics of other scales (rewrite/result-types.ts,
  // scaledBranches): a DECIMAL plus a zero of the sum of every branch's type, which has the largest scale. The
  // other types keep theirs; cot_scale_of makes each a numeric for the sum (0 for what is not a number).
  [
    'cot_scaled',
    [
      ['x, shared, w DECIMAL(38,9)', 'x + CASE WHEN false THEN shared ELSE 0 END'],
      ...(['HUGEINT', 'BIGINT', 'INTEGER', 'SMALLINT', 'DOUBLE', 'FLOAT'] as const).map((t) => [`x, shared, w ${t}`, 'x'] as const),
      ['x, shared, w', 'x'],
    ],
  ],
  [
    'cot_scale_of',
    [...(['DECIMAL(38,9)', 'HUGEINT', 'BIGINT', 'INTEGER', 'SMALLINT', 'DOUBLE', 'FLOAT'] as const).map((t) => [`x, w ${t}`, 'x'] as const), ['x, w', '0']],
  ],
  // sqrt(numeric) is numeric, computed as PostgreSQL does; of any other type, DuckDB's double.
  [
    'cot_sqrt',
    [
      ...(['DECIMAL(38,9)', 'HUGEINT'] as const).map(
        (t) => [`x, w ${t}`, `CAST(cot_numeric_sqrt(CAST(x AS VARCHAR), typeof(x)) AS DECIMAL(38,${QUOTIENT_SCALE}))`] as const,
      ),
      ...(['DOUBLE', 'FLOAT', 'SMALLINT', 'INTEGER', 'BIGINT'] as const).map((t) => [`x, w ${t}`, 'sqrt(x)'] as const),
      ['x, w', 'sqrt(x)'],
    ],
  ],
  // date_trunc(field, date) is timestamptz, as PostgreSQL casts the date to it.
  [
    'cot_date_trunc',
    [
      ['f, x, w DATE', 'date_trunc(f, CAST(x AS TIMESTAMPTZ))'],
      ['f, x, w TIMESTAMP', 'date_trunc(f, x)'],
      ['f, x, w TIMESTAMPTZ', 'date_trunc(f, x)'],
      ['f, x, w INTERVAL', 'date_trunc(f, x)'],
      ['f, x, w', 'date_trunc(f, x)'],
    ],
  ],
  // date - date is a count of days, integer in PostgreSQL (bigint in DuckDB); the rest is DuckDB's own.
  [
    'cot_minus',
    [
      ['a, b, wa DATE, wb DATE', 'CAST(a - b AS INTEGER)'],
      ['a, b, wa, wb', 'a - b'],
    ],
  ],
  // ceil(x) and floor(x) of an int128 (a sum of bigints, numeric in PostgreSQL) as numeric: DuckDB's are doubles,
  // which lose digits past 2^53. Overloads of their own keep the other types from being cast to it.
  ...(['ceil', 'floor'] as const).map(
    (fn): MacroDef => [
      `cot_${fn}`,
      [
        ['x, w HUGEINT', `CAST(x AS DECIMAL(38,0))`],
        ...(['BIGINT', 'INTEGER', 'SMALLINT', 'DOUBLE', 'DECIMAL(38,9)'] as const).map((t) => [`x, w ${t}`, `${fn}(x)`] as const),
        ['x, w', `${fn}(x)`],
      ],
    ],
  ),
  // round(x) of a double: half to even, as PostgreSQL's rint.
  [
    'cot_round',
    [
      ['x, w DOUBLE', 'round_even(x, 0)'],
      // round(x) of an integer is PostgreSQL's round(double precision), to which it casts an integer: a double.
      ...(['SMALLINT', 'INTEGER', 'BIGINT'] as const).map((t) => [`x, w ${t}`, 'CAST(x AS DOUBLE)'] as const),
      // Overloads of their own, or DuckDB would cast these witnesses to double.
      ...(['HUGEINT', 'DECIMAL(38,9)'] as const).map((t) => [`x, w ${t}`, 'round(x)'] as const),
      ['x, w', 'round(x)'],
    ],
  ],
  // round(x, n) of an integer: numeric, as PostgreSQL casts it to round it; of the rest, DuckDB's.
  [
    'cot_round_to',
    [
      ...(['SMALLINT', 'INTEGER', 'BIGINT', 'HUGEINT'] as const).map((t) => [`x, n, w ${t}`, `round(CAST(x AS ${UNCONSTRAINED_NUMERIC}), n)`] as const),
      ...(['DECIMAL(38,9)', 'DOUBLE'] as const).map((t) => [`x, n, w ${t}`, 'round(x, n)'] as const),
      ['x, n, w', 'round(x, n)'],
    ],
  ],
  // round(x, -n), left of the point (rewrite/result-types.ts): a DECIMAL widened first, as DuckDB rounds within the
  // DECIMAL's own width (round(-7.125, -1) was 0); only there, as the widening gives the result DuckDB's widest width.
  [
    'cot_round_left',
    [
      ...(['SMALLINT', 'INTEGER', 'BIGINT', 'HUGEINT', 'DECIMAL(38,9)'] as const).map(
        (t) => [`x, n, w ${t}`, `round(CAST(x AS DECIMAL(38,${QUOTIENT_SCALE})), n)`] as const,
      ),
      ['x, n, w DOUBLE', 'round(x, n)'],
      ['x, n, w', 'round(x, n)'],
    ],
  ],
  // sum(interval), which DuckDB has not: months, days and microseconds each summed, as PostgreSQL's interval_pl adds them.
  [
    'cot_sum',
    [
      [
        'x INTERVAL',
        `to_months(CAST(sum(datepart('year', x) * 12 + datepart('month', x)) AS INTEGER)) + to_days(CAST(sum(datepart('day', x)) AS INTEGER))
          + to_microseconds(CAST(sum(datepart('hour', x) * 3600000000 + datepart('minute', x) * 60000000 + datepart('microseconds', x)) AS BIGINT))`,
      ],
      ['x', 'sum(x)'],
    ],
  ],
  // sum(int2) and sum(int4) are int8.
  [
    'cot_sum_as',
    [
      ['s, w SMALLINT', 'CAST(s AS BIGINT)'],
      ['s, w INTEGER', 'CAST(s AS BIGINT)'],
      ['s, w', 's'],
    ],
  ],
  // avg(x), and with the sum and count of x beside it (rewrite/result-types.ts, exactAverage), exact.
  [
    'cot_avg_as',
    [
      ...EXACT_TYPES.map((t) => [`a, w ${t}`, `${P}.cot_numeric(a)`] as const),
      ['a, w', 'a'],
      ...EXACT_TYPES.map((t) => [`s, c, a, w ${t}`, quotient('s', 'c')] as const),
      ['s, c, a, w', 'a'],
    ],
  ],
  // Witnesses of sum(x) and avg(x) for a division around them: the type each returns once rewritten.
  [
    'cot_sum_witness',
    [
      ['w SMALLINT', 'CAST(1 AS BIGINT)'],
      ['w INTEGER', 'CAST(1 AS BIGINT)'],
      ['w BIGINT', 'CAST(1 AS HUGEINT)'],
      ['w', 'w'],
    ],
  ],
  ['cot_avg_witness', [...EXACT_TYPES.map((t) => [`w ${t}`, `CAST(1 AS DECIMAL(38,${QUOTIENT_SCALE}))`] as const), ['w', 'w']]],
];
