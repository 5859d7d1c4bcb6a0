import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ledgerColumnTypeProblem, parseDuckType } from '../../../src/engines/duckdb/ledger/column-types.js';
import { unchainable } from '../../../src/engines/duckdb/ledger/writer.js';

/**
 * The ledger column types the server accepts are the ones whose values come
 * back unchanged through what the writer and the applier do with them: the
 * value's text (CAST AS VARCHAR), read back by the cast and by DuckDB's
 * appender. Generated types and awkward values, on the bare engine.
 */

const STRINGS = ["'NULL'", "' padded '", "'b]'", "'}'", "','", `'"q"'`, "'a''b'", "''", "'[x]'", "'{a: 1}'", "'\\'", "'x=y'", "'ä ☃'", "'k: v'", 'NULL'];
const LEAVES: Readonly<Record<string, readonly string[]>> = {
  BOOLEAN: ['true', 'NULL'],
  SMALLINT: ['-32768'],
  INTEGER: ['-2147483648', '0'],
  BIGINT: ['-9223372036854775808'],
  HUGEINT: ['-170141183460469231731687303715884105728'],
  UBIGINT: ['18446744073709551615'],
  FLOAT: ["'nan'::FLOAT", "'-inf'::FLOAT", '-0.0::FLOAT', '0.1::FLOAT'],
  DOUBLE: ["'nan'::DOUBLE", "'inf'::DOUBLE", '5e-324::DOUBLE', '0.1::DOUBLE'],
  'DECIMAL(10,2)': ['-12345678.99'],
  DATE: ["'infinity'::DATE", "'2020-02-29'::DATE"],
  TIME: ["'24:00:00'::TIME"],
  'TIME WITH TIME ZONE': ["'12:00:00+15:59'::TIMETZ"],
  TIMESTAMP: ["'-infinity'::TIMESTAMP", "'2020-01-01 00:00:00.000001'::TIMESTAMP"],
  'TIMESTAMP WITH TIME ZONE': ["'2020-01-01 00:00:00.000001+00'::TIMESTAMPTZ"],
  TIMESTAMP_NS: ["'2020-01-01 00:00:00.000000001'::TIMESTAMP_NS"],
  UUID: ["'ffffffff-ffff-ffff-ffff-ffffffffffff'::UUID"],
  INTERVAL: ["INTERVAL '1 second'", "INTERVAL '-1 year 2 days'"],
  VARCHAR: STRINGS,
  BLOB: ["'\\x00\\xFF\\x5C\\x27'::BLOB", "'NULL'::BLOB", "'a, b]'::BLOB"],
  JSON: [`'{"a": "]", "b": [1, "x, y"]}'::JSON`, `'"NULL"'::JSON`, "' 1 '::JSON"],
  "ENUM('a', 'b c', 'NULL', ']')": ["'b c'", "'NULL'", "']'"],
};

type Shape = (t: string) => { readonly type: string; readonly values: (v: readonly string[]) => string[] };
const SHAPES: Readonly<Record<string, Shape>> = {
  scalar: (t) => ({ type: t, values: (v) => [...v] }),
  list: (t) => ({ type: `${t}[]`, values: (v) => [`[${v.join(', ')}]`, '[]'] }),
  array2: (t) => ({ type: `${t}[2]`, values: (v) => v.map((x) => `[${x}, ${v[0]}]`) }),
  listOfLists: (t) => ({ type: `${t}[][]`, values: (v) => [`[[${v.join(', ')}], []]`] }),
  struct: (t) => ({ type: `STRUCT(a ${t}, "b c" INTEGER)`, values: (v) => v.map((x) => `{'a': ${x}, 'b c': 1}`) }),
  structOfList: (t) => ({ type: `STRUCT(a ${t}[])`, values: (v) => [`{'a': [${v.join(', ')}]}`] }),
  listOfStructs: (t) => ({ type: `STRUCT(a ${t})[]`, values: (v) => [`[${v.map((x) => `{'a': ${x}}`).join(', ')}]`] }),
  mapValue: (t) => ({ type: `MAP(VARCHAR, ${t})`, values: (v) => v.map((x) => `MAP {'k': ${x}}`) }),
  mapOfLists: (t) => ({ type: `MAP(VARCHAR, ${t}[])`, values: (v) => [`MAP {'k': [${v.join(', ')}]}`] }),
};

let conn: DuckDBConnection;
beforeAll(async () => {
  conn = await (await DuckDBInstance.create(':memory:')).connect();
});
afterAll(() => conn.closeSync());

/** Null when the value's text reads back, through the cast and the appender, as the value; otherwise what went wrong. */
async function roundTrip(type: string, value: string): Promise<string | null> {
  await conn.run(`CREATE OR REPLACE TABLE rt (x ${type})`);
  const printed = (await conn.runAndReadAll(`SELECT CAST(CAST(${value} AS ${type}) AS VARCHAR)`)).getRows()[0]?.[0];
  if (printed === null || printed === undefined) return null;
  const text = String(printed);
  const back = await conn
    .runAndReadAll(
      `SELECT CAST(CAST($1::VARCHAR AS ${type}) AS VARCHAR) = $1 AND CAST($1::VARCHAR AS ${type}) IS NOT DISTINCT FROM CAST(${value} AS ${type})`,
      [text],
    )
    .then((r) => (r.getRows()[0]?.[0] === true ? null : `reads back otherwise: ${text}`))
    .catch((e: Error) => `the cast refuses its text ${text}: ${e.message.split('\n')[0]}`);
  if (back !== null) return back;
  const appender = await conn.createAppender('rt');
  try {
    appender.appendVarchar(text);
    appender.endRow();
    appender.flushSync();
  } catch (e) {
    appender.clear();
    return `the appender refuses ${text}: ${(e as Error).message.split('\n')[0]}`;
  } finally {
    appender.closeSync();
  }
  const stored = (await conn.runAndReadAll('SELECT CAST(x AS VARCHAR) FROM rt')).getRows()[0]?.[0];
  return stored === text ? null : `stored as ${String(stored)}`;
}

describe('the column types a DuckDB ledger may have', () => {
  it('parses DuckDB printed types', () => {
    expect(parseDuckType('STRUCT(a VARCHAR[], "b c" MAP(VARCHAR, INTEGER))[2]')).toEqual({
      kind: 'list',
      fixed: true,
      of: {
        kind: 'struct',
        fields: [
          { kind: 'list', fixed: false, of: { kind: 'scalar', name: 'VARCHAR' } },
          { kind: 'map', key: { kind: 'scalar', name: 'VARCHAR' }, value: { kind: 'scalar', name: 'INTEGER' } },
        ],
      },
    });
    expect(parseDuckType("ENUM('a]', 'b,c')[]")).toEqual({ kind: 'list', fixed: false, of: { kind: 'scalar', name: 'ENUM' } });
  });

  it('accepts only types whose every value reads back from its text through the cast and the appender', async () => {
    const accepted: string[] = [];
    const refused: string[] = [];
    for (const [leaf, leafValues] of Object.entries(LEAVES)) {
      for (const shape of Object.values(SHAPES)) {
        const { type, values } = shape(leaf);
        if (ledgerColumnTypeProblem(type) !== null) {
          refused.push(type);
          continue;
        }
        accepted.push(type);
        for (const value of values(leafValues)) expect(await roundTrip(type, value), `${type}: ${value}`).toBeNull();
      }
    }
    // What a ledger can hold stays broad: every leaf as a column and in a list, struct or map of its own.
    expect(accepted).toEqual(
      expect.arrayContaining(['VARCHAR', 'VARCHAR[]', 'INTEGER[][]', 'STRUCT(a INTEGER, "b c" INTEGER)', 'MAP(VARCHAR, VARCHAR)', 'FLOAT[2]', 'INTERVAL[]']),
    );
    expect(refused).toEqual(expect.arrayContaining(['INTERVAL', 'VARCHAR[2]', 'VARCHAR[][]', 'STRUCT(a VARCHAR[])', 'STRUCT(a VARCHAR)[]', 'JSON[]']));
  }, 120_000);

  it('refuses what fails on the bare engine, and UNION', async () => {
    for (const [type, value] of [
      ['INTERVAL', "INTERVAL '1 second'"],
      ['VARCHAR[2]', "['NULL', ' padded']"],
      ['VARCHAR[][]', "[['b]']]"],
      ['STRUCT(a VARCHAR[])', "{'a': ['b]']}"],
      ['MAP(VARCHAR, VARCHAR[])', "MAP {'k': ['b]']}"],
    ] as const) {
      expect(await roundTrip(type, value), type).not.toBeNull();
      expect(ledgerColumnTypeProblem(type), type).not.toBeNull();
    }
    expect(ledgerColumnTypeProblem('UNION(a INTEGER, t TIMESTAMP WITH TIME ZONE)')).not.toBeNull();
  });

  it('refuses appends to a ledger made with such a column before they were refused', () => {
    const old = {
      name: '_cot_tool_calls',
      columns: [
        { name: 'tool', type: 'VARCHAR' },
        { name: 'took', type: 'INTERVAL' },
      ],
    } as const;
    expect(unchainable(old as never)).toMatchObject({
      code: '0A000',
      message: 'ledger "_cot_tool_calls" cannot take appends: its column "took" is of type INTERVAL',
    });
    expect(unchainable({ name: '_cot_ok', columns: [{ name: 'tags', type: 'VARCHAR[]' }] } as never)).toBeNull();
  });
});
