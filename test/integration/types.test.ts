import { describe, expect, it } from 'vitest';
import pg from 'pg';
import { serialize } from 'pg-protocol';
import { dataRowCells, rowDescription, WireClient } from '../fixtures/wire.js';
import { useTestServer } from '../fixtures/server.js';

const ctx = useTestServer();

const raw = { getTypeParser: () => (v: string) => v } as unknown as pg.CustomTypesConfig;

/**
 * Each case: a DuckDB expression, the PostgreSQL type OID it must arrive
 * as, and the exact text PostgreSQL would send for that value. The parsed
 * value must then equal what node-postgres's own parser makes of that
 * PostgreSQL text, which is what it would get from PostgreSQL.
 */
const CASES: Array<[string, number, string]> = [
  ['true', 16, 't'],
  ['false', 16, 'f'],
  ['1::TINYINT', 21, '1'],
  ['-2::SMALLINT', 21, '-2'],
  ['2147483647::INTEGER', 23, '2147483647'],
  ['9007199254740993::BIGINT', 20, '9007199254740993'],
  ['170141183460469231731687303715884105727::HUGEINT', 1700, '170141183460469231731687303715884105727'],
  ['18446744073709551615::UBIGINT', 1700, '18446744073709551615'],
  ['1.5::FLOAT', 700, '1.5'],
  ['0.1::FLOAT', 700, '0.1'],
  ['0.1::DOUBLE', 701, '0.1'],
  ["'nan'::DOUBLE", 701, 'NaN'],
  ["'inf'::DOUBLE", 701, 'Infinity'],
  ["'-inf'::DOUBLE", 701, '-Infinity'],
  ['1e300::DOUBLE', 701, '1e+300'],
  ['1.25e-7::DOUBLE', 701, '1.25e-07'],
  ['123456789012345.0::DOUBLE', 701, '123456789012345'],
  ['1234567890123456.0::DOUBLE', 701, '1.234567890123456e+15'],
  ['12.340::DECIMAL(10,3)', 1700, '12.340'],
  ['-0.05::DECIMAL(4,2)', 1700, '-0.05'],
  ["'héllo'", 25, 'héllo'],
  ["'\\x01\\xff'::BLOB", 17, '\\x01ff'],
  ["DATE '2024-02-29'", 1082, '2024-02-29'],
  ["DATE '0044-03-15' - INTERVAL 0 DAY", 1114, '0044-03-15 00:00:00'],
  ["'infinity'::DATE", 1082, 'infinity'],
  ["TIME '12:34:56.789'", 1083, '12:34:56.789'],
  ["TIMESTAMP '2024-01-02 03:04:05.123456'", 1114, '2024-01-02 03:04:05.123456'],
  ["TIMESTAMPTZ '2024-01-02 03:04:05+02'", 1184, '2024-01-02 01:04:05+00'],
  ["INTERVAL '1 year 2 months 3 days 04:05:06.5'", 1186, '1 year 2 mons 3 days 04:05:06.5'],
  ["INTERVAL '-1 day 02:00:00'", 1186, '-1 days +02:00:00'],
  ["INTERVAL '0 seconds'", 1186, '00:00:00'],
  ["'550e8400-e29b-41d4-a716-446655440000'::UUID", 2950, '550e8400-e29b-41d4-a716-446655440000'],
  ['\'{"a": [1, 2]}\'::JSON', 114, '{"a": [1, 2]}'],
  ['[1, 2, NULL]', 1007, '{1,2,NULL}'],
  ["['a', 'b c', '', 'NULL', 'q\"\\']", 1009, '{a,"b c","","NULL","q\\"\\\\"}'],
  ['[[1, 2], [3, 4]]', 1007, '{{1,2},{3,4}}'],
  ['[1.5, 2.5]::DOUBLE[]', 1022, '{1.5,2.5}'],
  ["[DATE '2024-01-01']", 1182, '{2024-01-01}'],
  ["{'x': 1, 'y': 'z'}", 114, '{"x":1,"y":"z"}'],
  ["MAP {'k': 1}", 114, '{"k":1}'],
  ['NULL::INTEGER', 23, 'NULL'],
];

describe('DuckDB types travel as Postgres types', () => {
  it.each(CASES)('%s', async (expr, oid, text) => {
    const r = await ctx.client.query(`SELECT ${expr} AS v`);
    expect(r.fields[0]?.dataTypeID).toBe(oid);
    if (text === 'NULL') {
      expect(r.rows[0].v).toBeNull();
      return;
    }
    const rawRow = await ctx.client.query({ text: `SELECT ${expr} AS v`, types: raw });
    expect(rawRow.rows[0].v).toBe(text);
    const fromPostgres: unknown = pg.types.getTypeParser(oid, 'text')(text);
    expect(r.rows[0].v).toEqual(fromPostgres);
  });

  it('parses dates and timestamps into the same Date values as from Postgres', async () => {
    const r = await ctx.client.query("SELECT TIMESTAMPTZ '2024-01-02 03:04:05.678+00' AS tz, DATE '2024-02-29' AS d");
    expect((r.rows[0].tz as Date).toISOString()).toBe('2024-01-02T03:04:05.678Z');
    expect(r.rows[0].d).toBeInstanceOf(Date);
  });

  it('writes BC dates as Postgres does', async () => {
    const r = await ctx.client.query({ text: "SELECT DATE '0001-01-01' - 1 AS d, make_date(-43, 3, 15) AS e", types: raw });
    expect(r.rows[0]).toEqual({ d: '0001-12-31 BC', e: '0044-03-15 BC' });
  });

  it('sends ENUM values as text', async () => {
    await ctx.client.query("CREATE TYPE mood AS ENUM ('happy', 'sad')");
    const r = await ctx.client.query("SELECT 'sad'::mood AS m");
    expect(r.fields[0]?.dataTypeID).toBe(25);
    expect(r.rows[0].m).toBe('sad');
  });
});

describe('binary results on the wire', () => {
  /** Expected bytes are PostgreSQL's binary send formats, written out by hand. */
  const CASES: Array<[string, number, string]> = [
    ['true', 16, '01'],
    ['7::SMALLINT', 21, '0007'],
    ['-2::INTEGER', 23, 'fffffffe'],
    ['9007199254740993::BIGINT', 20, '0020000000000001'],
    ['1.5::FLOAT', 700, '3fc00000'],
    ['2.25::DOUBLE', 701, '4002000000000000'],
    ["'héllo'", 25, Buffer.from('héllo').toString('hex')],
    ["'\\xde\\xad'::BLOB", 17, 'dead'],
    ["DATE '2000-01-02'", 1082, '00000001'],
    ["DATE '1999-12-31'", 1082, 'ffffffff'],
    ["TIMESTAMP '2000-01-01 00:00:01.5'", 1114, '000000000016e360'],
    ["TIMESTAMPTZ '2000-01-01 00:00:00+00'", 1184, '0000000000000000'],
    ["'infinity'::TIMESTAMP", 1114, '7fffffffffffffff'],
    ["TIME '00:00:01'", 1083, '00000000000f4240'],
    ["INTERVAL '1 month 2 days 3 seconds'", 1186, '00000000002dc6c0' + '00000002' + '00000001'],
    ["'550e8400-e29b-41d4-a716-446655440000'::UUID", 2950, '550e8400e29b41d4a716446655440000'],
    // numeric 12.340: ndigits 2, weight 0, sign +, dscale 3, digits 12 3400
    ['12.340::DECIMAL(10,3)', 1700, '0002' + '0000' + '0000' + '0003' + '000c' + '0d48'],
    // numeric -0.05: ndigits 1, weight -1, sign -, dscale 2, digits 500
    ['-0.05::DECIMAL(4,2)', 1700, '0001' + 'ffff' + '4000' + '0002' + '01f4'],
    ['\'{"a":1}\'::JSON', 114, Buffer.from('{"a":1}').toString('hex')],
    // int4[] {1,NULL}: ndim 1, has nulls, element oid 23, dim 2 lbound 1, then elements
    ['[1, NULL]', 1007, '00000001' + '00000001' + '00000017' + '00000002' + '00000001' + '00000004' + '00000001' + 'ffffffff'],
  ];

  it('sends text and json in text format as DuckDB holds their bytes, short and long, across chunks', async () => {
    // Strings of up to 12 bytes live inside DuckDB's vector, longer ones elsewhere: both are copied
    // to the DataRow byte for byte (engine.ts reads them without making JavaScript strings).
    const c = await WireClient.startup(ctx.server.port);
    try {
      const texts = ['', 'short', 'exactly12byt', 'héllo wörld, well past twelve bytes 😀', 'a\nb\tc\\d'];
      const values = texts.map((t) => `('${t}')`).join(', ');
      c.write(
        serialize.query(
          `SELECT t, CAST('{"t": ' || to_json(t) || '}' AS JSON) AS j, NULL::VARCHAR AS n, i FROM (VALUES ${values}) v(t), range(1000) r(i) ORDER BY i, t`,
        ),
      );
      const msgs = await c.until('Z');
      const rows = msgs.filter((m) => m.type === 'D').map((m) => dataRowCells(m.body));
      expect(rows).toHaveLength(5000);
      const sorted = [...texts].sort();
      rows.forEach((cells, k) => {
        const t = sorted[k % 5] as string;
        expect(cells[0]?.equals(Buffer.from(t, 'utf8'))).toBe(true);
        expect(JSON.parse(cells[1]?.toString('utf8') ?? 'null')).toEqual({ t });
        expect(cells[2]).toBeNull();
      });
    } finally {
      c.end();
    }
  });

  it.each(CASES)('%s', async (expr, oid, hex) => {
    const c = await WireClient.startup(ctx.server.port);
    try {
      c.write(serialize.parse({ text: `SELECT ${expr} AS v` }));
      c.write(serialize.bind({ binary: true }));
      c.write(serialize.describe({ type: 'P' }));
      c.write(serialize.execute());
      c.write(serialize.sync());
      const msgs = await c.until('Z');
      expect(msgs.map((m) => m.type).join('')).toBe('12TDCZ');
      const described = rowDescription(msgs[2]?.body as Buffer);
      expect(described).toEqual([{ name: 'v', oid, format: 1 }]);
      expect(dataRowCells(msgs[3]?.body as Buffer)[0]?.toString('hex')).toBe(hex);
    } finally {
      c.end();
    }
  });
});
