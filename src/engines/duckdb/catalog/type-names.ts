import { P } from './catalog-sql.js';
import type { MacroDef } from './pg-functions.js';

/**
 * pg_typeof(x) as PostgreSQL answers it: the type's PostgreSQL name
 * (numeric, text, double precision, timestamp without time zone), where
 * DuckDB's own pg_typeof answers its names (decimal(2,1), varchar). jsonb is
 * the name of DuckDB's JSON, as cotwire holds jsonb as JSON. x is evaluated
 * first, so that its errors are raised (division by zero), as in PostgreSQL.
 */

/** DuckDB's name of a type without array brackets (typeof), as PostgreSQL names it. */
const SCALAR_NAME = `CASE
  WHEN t LIKE 'DECIMAL(%' OR t = 'HUGEINT' OR t = 'UBIGINT' THEN 'numeric'
  WHEN t = 'VARCHAR' THEN 'text'
  WHEN t = 'INTEGER' THEN 'integer'
  WHEN t = 'BIGINT' OR t = 'UINTEGER' THEN 'bigint'
  WHEN t = 'SMALLINT' OR t = 'TINYINT' OR t = 'UTINYINT' THEN 'smallint'
  WHEN t = 'USMALLINT' THEN 'integer'
  WHEN t = 'DOUBLE' THEN 'double precision'
  WHEN t = 'FLOAT' THEN 'real'
  WHEN t = 'BOOLEAN' THEN 'boolean'
  WHEN t = 'TIMESTAMP' THEN 'timestamp without time zone'
  WHEN t = 'TIME' THEN 'time without time zone'
  WHEN t = 'JSON' THEN 'jsonb'
  WHEN t = 'BLOB' THEN 'bytea'
  WHEN t = '"NULL"' THEN 'unknown'
  ELSE lower(t) END`;

export const TYPE_NAME_MACROS: readonly MacroDef[] = [
  ['cot_pg_scalar_type_name', [['t', SCALAR_NAME]]],
  ['cot_pg_type_name', [['t', `${P}.cot_pg_scalar_type_name(regexp_replace(t, '(\\[\\])+$', '')) || coalesce(regexp_extract(t, '(\\[\\])+$'), '')`]]],
  // A double's (or a real's) text from DuckDB's, as PostgreSQL prints it: NaN and Infinity spelled so, no '.0', and
  // in exponent form from 15 digits before the point (a real's 6), where DuckDB's switches at 17: 1e+15, 1.234567e+06.
  [
    'cot_float_text',
    [
      [
        's, digits',
        `CASE s WHEN 'nan' THEN 'NaN' WHEN 'inf' THEN 'Infinity' WHEN '-inf' THEN '-Infinity' ELSE
          CASE WHEN NOT contains(s, 'e') AND length(ltrim(split_part(s, '.', 1), '-')) > digits
            THEN CASE WHEN s LIKE '-%' THEN '-' ELSE '' END
              || regexp_replace(rtrim(ltrim(split_part(s, '.', 1), '-') || split_part(s, '.', 2), '0'), '^([0-9])([0-9]+)$', '\\1.\\2')
              || 'e+' || lpad(CAST(length(ltrim(split_part(s, '.', 1), '-')) - 1 AS VARCHAR), 2, '0')
            ELSE regexp_replace(s, '\\.0$', '') END END`,
      ],
    ],
  ],
  // cot_text of a value given as DuckDB's text of it and its type's name.
  [
    'cot_text_of',
    [
      [
        's, t',
        `CASE WHEN t IN ('DOUBLE', 'FLOAT') THEN ${P}.cot_float_text(s, CASE t WHEN 'FLOAT' THEN 6 ELSE 15 END)
          WHEN regexp_matches(t, '^DECIMAL\\(38,(9|[1-3][0-9])\\)$')
            THEN regexp_replace(regexp_replace(regexp_replace(s, '(\\.[0-9]*?)0+$', '\\1'), '\\.$', ''), '^(-?)\\.', '\\10.')
          WHEN t LIKE 'DECIMAL(%' THEN regexp_replace(s, '^(-?)\\.', '\\10.')
          WHEN t = 'INTERVAL' OR t LIKE '%[]' THEN cot_pg_text(s, t)
          ELSE s END`,
      ],
    ],
  ],
  // x as text, as PostgreSQL prints it where DuckDB's cast differs (rewrite/numeric.ts, textCast); DuckDB prints a
  // DECIMAL with no digit before the point without its 0 (.5 for DECIMAL(1,1)), PostgreSQL with it.
  [
    'cot_text',
    [
      [
        'x',
        // x is named twice, outside the lambda: DuckDB copies a macro's argument wherever its body names it, and
        // nested macros (a value's text inside JSON inside JSON) multiplied those copies into seconds of binding.
        `list_transform([{'s': CAST(x AS VARCHAR), 't': typeof(x)}], cot_v -> ${P}.cot_text_of(cot_v.s, cot_v.t))[1]`,
      ],
    ],
  ],
  // A value bound for numeric without precision (rewrite/numeric.ts, numericTextCast), as text: a double with the 15
  // significant digits PostgreSQL's float8_numeric keeps (a real's 6), where DuckDB's cast keeps the binary value's
  // (123456789.123456784); text refused where DECIMAL(38,9) would round it; any other value as it prints.
  [
    'cot_numeric_text',
    [
      [
        'x',
        `CASE WHEN typeof(x) = 'DOUBLE' THEN printf('%.15g', x) WHEN typeof(x) = 'FLOAT' THEN printf('%.6g', x)
          WHEN typeof(x) = 'VARCHAR' AND (regexp_matches(CAST(x AS VARCHAR), '^\\s*[+-]?[0-9]*\\.[0-9]{9}[0-9]*[1-9]')
            OR (regexp_matches(CAST(x AS VARCHAR), '[eE]')
              AND TRY_CAST(CAST(x AS VARCHAR) AS DOUBLE) <> CAST(TRY_CAST(CAST(x AS VARCHAR) AS DECIMAL(38,9)) AS DOUBLE)))
          THEN error('numeric value ' || CAST(x AS VARCHAR) || ' has more digits than numeric without a precision holds here (38 digits, 9 after the point): cast it to numeric(p,s) with the scale it needs')
          ELSE CAST(x AS VARCHAR) END`,
      ],
    ],
  ],
  // x::numeric where the witness w says what x is (rewrite/numeric.ts, numericTextCast): a double with the 15
  // significant digits PostgreSQL's float8_numeric keeps (a real's 6), at DECIMAL(38,20), a quotient's scale, so that
  // sqrt(1.5)::numeric is 1.22474487139159 and not rounded to 9 decimals; refused (22003) where those digits reach
  // past the 20th decimal or 18 digits before the point. Any other value as cot_numeric_text gives it, at DECIMAL(38,9).
  [
    'cot_numeric_cast',
    [
      ...(
        [
          ['DOUBLE', 14],
          ['FLOAT', 5],
        ] as const
      ).map(([t, digits]) => {
        const e = `printf('%.${digits}e', CAST(x AS DOUBLE))`;
        return [
          `x, w ${t}`,
          `CASE WHEN abs(x) >= 1e18
            THEN error('numeric value ' || printf('%.${digits + 1}g', CAST(x AS DOUBLE)) || ' has more digits than numeric from a double holds here (18 before the point): keep it a double')
          WHEN x <> 0 AND isfinite(x)
            AND length(rtrim(replace(regexp_replace(${e}, '^-|e.*$', '', 'g'), '.', ''), '0')) - 1 - CAST(regexp_extract(${e}, 'e(.*)$', 1) AS INTEGER) > 20
            THEN error('numeric value ' || printf('%.${digits + 1}g', CAST(x AS DOUBLE)) || ' has significant digits past the 20th decimal, which numeric from a double does not hold here: round it first, or keep it a double')
            ELSE CAST(${e} AS DECIMAL(38,20)) END`,
        ] as const;
      }),
      ['x, w', `CAST(${P}.cot_numeric_text(x) AS DECIMAL(38,9))`],
    ],
  ],
  // concat()'s arguments: as cot_text, and a boolean as its output function prints it (t, f).
  // An operand of text || (rewrite/casts.ts, textConcat), chosen by its witness: a double, a real, a numeric without a
  // precision and an interval as a cast to text prints them (2, not 2.0; NaN); every other type as it is. Overloads of
  // their own keep integers, dates and timestamps from being cast to one of those (none for VARCHAR: a list's witness
  // would then match two overloads).
  [
    'cot_concat_operand',
    [
      ...['DOUBLE', 'FLOAT', 'DECIMAL(38,9)', 'INTERVAL'].map((t) => [`x, w ${t}`, `${P}.cot_text(x)`] as const),
      ...['DATE', 'SMALLINT', 'INTEGER', 'BIGINT', 'HUGEINT', 'TIMESTAMP', 'TIMESTAMPTZ'].map((t) => [`x, w ${t}`, 'x'] as const),
      ['x, w', 'x'],
    ],
  ],
  // a || b where neither is text by its spelling (rewrite/casts.ts, concatChain): a text and a value of a type DuckDB
  // prints otherwise than PostgreSQL, that value's PostgreSQL text; chosen by both witnesses. Every other pair of types
  // has an overload of its own, or DuckDB would cast an integer's witness to DECIMAL(38,9) and choose that one.
  [
    'cot_concat_pair',
    [
      ...(['DOUBLE', 'FLOAT', 'DECIMAL(38,9)', 'INTERVAL'] as const).flatMap((t) => [
        [`a, b, wa VARCHAR, wb ${t}`, `a || ${P}.cot_text(b)`] as const,
        [`a, b, wa ${t}, wb VARCHAR`, `${P}.cot_text(a) || b`] as const,
      ]),
      ['a, b, wa VARCHAR, wb VARCHAR', 'a || b'],
      ...(['DATE', 'SMALLINT', 'INTEGER', 'BIGINT', 'HUGEINT', 'TIMESTAMP', 'TIMESTAMPTZ'] as const).flatMap((t) => [
        [`a, b, wa VARCHAR, wb ${t}`, 'a || b'] as const,
        [`a, b, wa ${t}, wb VARCHAR`, 'a || b'] as const,
      ]),
      ['a, b, wa, wb', 'a || b'],
    ],
  ],
  // A jsonb value's text as jsonb prints it (a cast of a jsonb column to text: rewrite/numeric.ts, textCast).
  ['cot_jsonb_cast_text', [['x', 'cot_jsonb_text(CAST(x AS VARCHAR))']]],
  // x || j and j || x where x's type only the engine knows (rewrite/jsonb.ts): of a text, text's ||, with the jsonb's
  // text as jsonb prints it; of anything else, jsonb's. Chosen by overload, as the two give different types: a JSON
  // witness has one of its own (DuckDB casts any type to JSON, and JSON to VARCHAR, where no other overload fits better).
  ...(
    [
      ['cot_jsonb_concat_after', 'x, j', `x || ${P}.cot_jsonb_cast_text(j)`],
      ['cot_jsonb_concat_before', 'j, x', `${P}.cot_jsonb_cast_text(j) || x`],
    ] as const
  ).map(
    ([name, params, text]): MacroDef => [
      name,
      [
        [`${params}, w VARCHAR`, text],
        [`${params}, w JSON`, `${P}.cot_jsonb_concat(${params})`],
        [`${params}, w`, `${P}.cot_jsonb_concat(${params})`],
      ],
    ],
  ),
  ['cot_concat_text', [['x', `CASE WHEN typeof(x) = 'BOOLEAN' THEN CASE WHEN x THEN 't' WHEN NOT x THEN 'f' END ELSE ${P}.cot_text(x) END`]]],
  // A value's JSON text as PostgreSQL's to_json writes it (rewrite/json-builders.ts), chosen by its type where the query
  // runs (typeof is folded while DuckDB binds): a JSON value's own text and a number's digits as they are (DuckDB's
  // builders would read both as doubles), a double as PostgreSQL prints it (NaN as a string), a timestamp in ISO 8601
  // with a T and the offset's minutes, an interval as its output function prints it; anything else as DuckDB writes it.
  [
    'cot_json_text',
    [
      [
        'v',
        // v is named three times, outside the lambda (see cot_text).
        `list_transform([{'s': CAST(v AS VARCHAR), 't': typeof(v), 'j': CAST(to_json(v) AS VARCHAR)}], cot_v -> CASE WHEN cot_v.s IS NULL THEN NULL
          WHEN cot_v.t = 'JSON' THEN cot_v.s
          WHEN cot_v.t IN ('DOUBLE', 'FLOAT') AND ${P}.cot_text_of(cot_v.s, cot_v.t) IN ('NaN', 'Infinity', '-Infinity')
            THEN CAST(to_json(${P}.cot_text_of(cot_v.s, cot_v.t)) AS VARCHAR)
          WHEN cot_v.t IN ('DOUBLE', 'FLOAT', 'BOOLEAN', 'TINYINT', 'SMALLINT', 'INTEGER', 'BIGINT', 'HUGEINT', 'UTINYINT', 'USMALLINT', 'UINTEGER', 'UBIGINT', 'UHUGEINT')
            OR cot_v.t LIKE 'DECIMAL(%' THEN ${P}.cot_text_of(cot_v.s, cot_v.t)
          WHEN cot_v.t = 'TIMESTAMP' THEN CAST(to_json(replace(cot_v.s, ' ', 'T')) AS VARCHAR)
          WHEN cot_v.t = 'TIMESTAMP WITH TIME ZONE' THEN CAST(to_json(regexp_replace(replace(cot_v.s, ' ', 'T'), '([+-][0-9][0-9])$', '\\1:00')) AS VARCHAR)
          WHEN cot_v.t = 'INTERVAL' THEN CAST(to_json(cot_pg_text(cot_v.s, 'INTERVAL')) AS VARCHAR)
          ELSE cot_v.j END)[1]`,
      ],
    ],
  ],
  // An object's key: the value's text as a JSON string; a NULL key is PostgreSQL's error (its message given).
  ['cot_json_key', [['k, message', `CASE WHEN k IS NULL THEN error(message) ELSE CAST(to_json(CAST(${P}.cot_text(k) AS VARCHAR)) AS VARCHAR) END`]]],
  // A value in JSON as to_jsonb makes it (rewrite/jsonb.ts, jsonValueArguments), chosen by its type witness: a timestamp
  // in ISO 8601 with a T and the offset's minutes, an interval as its output function prints it, a double with the digits
  // PostgreSQL prints (0, not 0.0). Every other type is left to DuckDB, which writes a value it is given as itself exactly
  // and would read a JSON number handed to it as a double (123456789.123456789 would lose digits).
  [
    'cot_json_value',
    [
      ['v, w TIMESTAMP', `to_json(replace(CAST(v AS VARCHAR), ' ', 'T'))`],
      ['v, w TIMESTAMPTZ', `to_json(regexp_replace(replace(CAST(v AS VARCHAR), ' ', 'T'), '([+-][0-9][0-9])$', '\\1:00'))`],
      ['v, w INTERVAL', `to_json(cot_pg_text(CAST(v AS VARCHAR), 'INTERVAL'))`],
      ['v, w DOUBLE', `CAST(${P}.cot_text(v) AS JSON)`],
      ['v, w FLOAT', `CAST(${P}.cot_text(v) AS JSON)`],
      // Overloads of their own, or DuckDB would cast these witnesses to one of the above.
      ...['DATE', 'SMALLINT', 'INTEGER', 'BIGINT', 'HUGEINT', 'DECIMAL(38,9)'].map((t) => [`v, w ${t}`, 'v'] as const),
      ['v, w', 'v'],
    ],
  ],
  // Text bound for an integer type: PostgreSQL refuses what is not an integer ('1.5'), DuckDB's cast rounds it.
  [
    'cot_integer_text',
    [
      [
        'x, name',
        `CASE WHEN typeof(x) = 'VARCHAR' AND NOT regexp_matches(CAST(x AS VARCHAR), '^\\s*[+-]?[0-9]+\\s*$')
          THEN error('invalid input syntax for type ' || name || ': "' || CAST(x AS VARCHAR) || '"') ELSE x END`,
      ],
    ],
  ],
  // A numeric bound for a double: read from its text, as PostgreSQL does (DuckDB's cast of a DECIMAL is a digit off).
  // Text bound for a double or a real, as float8in and float4in read it: DuckDB's cast also reads '1_000', and
  // reads '1e400' as Infinity and '1e-400' as 0, where PostgreSQL refuses both as out of range.
  [
    'cot_float_input',
    [
      [
        's, name',
        `CASE WHEN NOT regexp_matches(s, '^[ \\t\\n\\r\\f\\v]*[+-]?((\\d+\\.?\\d*|\\.\\d+)([eE][+-]?\\d+)?|[nN][aA][nN]|[iI][nN][fF]([iI][nN][iI][tT][yY])?)[ \\t\\n\\r\\f\\v]*$')
            THEN error('invalid input syntax for type ' || name || ': "' || s || '"')
          WHEN regexp_matches(s, '[nN]') THEN CAST(s AS DOUBLE)
          WHEN isinf(CAST(s AS DOUBLE))
            OR (CAST(s AS DOUBLE) = 0 AND regexp_matches(regexp_replace(s, '[eE].*$', ''), '[1-9]'))
            OR (name = 'real' AND (abs(CAST(s AS DOUBLE)) > 3.4028234663852886e38
              OR (CAST(s AS DOUBLE) <> 0 AND abs(CAST(s AS DOUBLE)) <= 7.006492321624085e-46)))
            THEN error('"' || s || '" is out of range for type ' || name)
          ELSE CAST(s AS DOUBLE) END`,
      ],
    ],
  ],
  [
    'cot_float_of',
    [
      ['x', `CASE WHEN typeof(x) LIKE 'DECIMAL%' THEN CAST(CAST(x AS VARCHAR) AS DOUBLE) ELSE CAST(x AS DOUBLE) END`],
      [
        'x, name',
        `CASE WHEN typeof(x) LIKE 'DECIMAL%' THEN CAST(CAST(x AS VARCHAR) AS DOUBLE)
          WHEN typeof(x) = 'VARCHAR' THEN ${P}.cot_float_input(CAST(x AS VARCHAR), name) ELSE CAST(x AS DOUBLE) END`,
      ],
    ],
  ],
  ['pg_typeof', [['x', `CASE WHEN x IS NULL THEN ${P}.cot_pg_type_name(typeof(x)) ELSE ${P}.cot_pg_type_name(typeof(x)) END`]]],
];
