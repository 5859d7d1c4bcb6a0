import { DuckDBTypeId } from '@duckdb/node-api';
import { describe, expect, it } from 'vitest';
import { floatInput, integerInput } from '../../../src/engines/duckdb/adapter/params.js';
import { fromDuckDBError } from '../../../src/engines/duckdb/adapter/errors.js';

/** What a PgError thrown by `f` carries, or 'ok' with the value. */
function outcome(f: () => unknown): string {
  try {
    return `ok ${String(f())}`;
  } catch (e) {
    const err = e as { code?: string; message?: string };
    return `${err.code} ${err.message}`;
  }
}

describe("a parameter's text for an integer, as int2in, int4in and int8in read it (PostgreSQL 15)", () => {
  it.each([
    [' 12 ', DuckDBTypeId.INTEGER, 'ok 12'],
    ['+12', DuckDBTypeId.INTEGER, 'ok 12'],
    ['-32768', DuckDBTypeId.SMALLINT, 'ok -32768'],
    ['-32769', DuckDBTypeId.SMALLINT, '22003 value "-32769" is out of range for type smallint'],
    ['2147483648', DuckDBTypeId.INTEGER, '22003 value "2147483648" is out of range for type integer'],
    ['-9223372036854775808', DuckDBTypeId.BIGINT, 'ok -9223372036854775808'],
    ['9223372036854775808', DuckDBTypeId.BIGINT, '22003 value "9223372036854775808" is out of range for type bigint'],
    // DuckDB's cast reads each of these (1.5 rounded to 2); PostgreSQL refuses them.
    ['1.5', DuckDBTypeId.INTEGER, '22P02 invalid input syntax for type integer: "1.5"'],
    ['1e5', DuckDBTypeId.BIGINT, '22P02 invalid input syntax for type bigint: "1e5"'],
    ['0x10', DuckDBTypeId.INTEGER, '22P02 invalid input syntax for type integer: "0x10"'],
    ['1_000', DuckDBTypeId.SMALLINT, '22P02 invalid input syntax for type smallint: "1_000"'],
    ['', DuckDBTypeId.INTEGER, '22P02 invalid input syntax for type integer: ""'],
    ['\u00a042', DuckDBTypeId.INTEGER, '22P02 invalid input syntax for type integer: "\u00a042"'],
  ])('%j for %s: %s', (text, type, expected) => {
    expect(outcome(() => integerInput(text, type, 1))).toBe(expected);
  });
});

describe("a parameter's text for a double or a real, as float8in and float4in read it", () => {
  it.each([
    ['.5', 'double precision', 'ok 0.5'],
    ['5.', 'double precision', 'ok 5'],
    ['+.5e+3', 'double precision', 'ok 500'],
    [' -inf ', 'double precision', 'ok -Infinity'],
    ['Infinity', 'real', 'ok Infinity'],
    ['NaN', 'double precision', 'ok NaN'],
    ['0x10', 'double precision', 'ok 16'],
    ['1e-310', 'double precision', 'ok 1e-310'],
    ['0.0e5', 'double precision', 'ok 0'],
    ['1e400', 'double precision', '22003 "1e400" is out of range for type double precision'],
    ['1e-400', 'double precision', '22003 "1e-400" is out of range for type double precision'],
    ['1e39', 'real', '22003 "1e39" is out of range for type real'],
    ['1e-46', 'real', '22003 "1e-46" is out of range for type real'],
    ['1_000', 'real', '22P02 invalid input syntax for type real: "1_000"'],
    ['1e', 'double precision', '22P02 invalid input syntax for type double precision: "1e"'],
    ['', 'double precision', '22P02 invalid input syntax for type double precision: ""'],
  ] as const)('%j for %s: %s', (text, name, expected) => {
    expect(outcome(() => floatInput(text, name, 1))).toBe(expected);
  });
});

describe("DuckDB's conversion errors in PostgreSQL's words and codes", () => {
  it.each([
    ["Conversion Error: Could not convert string 'zzz' to INT128", '22P02', 'invalid input syntax for type uuid: "zzz"'],
    ["Conversion Error: Could not convert string 'abc' to INT32", '22P02', 'invalid input syntax for type integer: "abc"'],
    ["Conversion Error: Could not convert string '99999999999' to INT32", '22003', 'value "99999999999" is out of range for type integer'],
    ["Conversion Error: Could not convert string 'abc' to DOUBLE", '22P02', 'invalid input syntax for type double precision: "abc"'],
    ["Conversion Error: Could not convert string 'abc' to BOOL", '22P02', 'invalid input syntax for type boolean: "abc"'],
    ['Conversion Error: Could not convert string "abc" to DECIMAL(10,2)', '22P02', 'invalid input syntax for type numeric: "abc"'],
    ['Conversion Error: Could not convert string "99999999999" to DECIMAL(10,2)', '22003', 'numeric field overflow'],
    ['Conversion Error: invalid date field format: "abc", expected format is (YYYY-MM-DD)', '22007', 'invalid input syntax for type date: "abc"'],
    [
      'Conversion Error: invalid timestamp field format: "abc", expected format is (YYYY-MM-DD HH:MM:SS[.US][±HH[:MM[:SS]]| ZONE])',
      '22007',
      'invalid input syntax for type timestamp: "abc"',
    ],
    ['Conversion Error: date field value out of range: "2020-13-01"', '22008', 'date/time field value out of range: "2020-13-01"'],
    [
      'Conversion Error: time field value out of range: "24:00:01", expected format is ([YYYY-MM-DD ]HH:MM:SS[.MS])',
      '22008',
      'date/time field value out of range: "24:00:01"',
    ],
    [
      'Conversion Error: time field value out of range: "abc", expected format is ([YYYY-MM-DD ]HH:MM:SS[.MS])',
      '22007',
      'invalid input syntax for type time: "abc"',
    ],
    [
      "Conversion Error: Could not convert string 'abc' to INTERVAL\n\nLINE 1: INSERT INTO t VALUES ('abc')\n                             ^",
      '22007',
      'invalid input syntax for type interval: "abc"',
    ],
    ["Conversion Error: Type VARCHAR with value 'abc' can't be cast to the destination type INTEGER[]", '22P02', 'malformed array literal: "abc"'],
    ['Invalid Input Error: "1e400" is out of range for type double precision', '22003', '"1e400" is out of range for type double precision'],
    ['Invalid Input Error: invalid input syntax for type integer: "1.5"', '22P02', 'invalid input syntax for type integer: "1.5"'],
  ])('%s', (raw, code, message) => {
    const err = fromDuckDBError(new Error(raw));
    expect([err.code, err.message]).toEqual([code, message]);
  });
});
