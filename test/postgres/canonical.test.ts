import { DuckDBInstance } from '@duckdb/node-api';
import { describe, expect, it } from 'vitest';
import { canonicalPgExprSql } from '../../src/engines/postgres/dialect/verify-sql.js';
import { usePgEngine } from '../fixtures/pg-engine.js';

const ctx = usePgEngine();

/** Doubles where a text form could differ: every power of ten, the edges of precision, subnormals, random bit patterns. */
function doubles(): number[] {
  const out = [
    0,
    -0,
    1,
    -1,
    0.5,
    0.1,
    1 / 3,
    2 ** 53,
    2 ** 53 + 2,
    2 ** -1074,
    -(2 ** -1074),
    2 ** -1022,
    Number.MAX_VALUE,
    -Number.MAX_VALUE,
    Number.MIN_VALUE,
  ];
  for (let e = -324; e <= 308; e++) out.push(Number(`1e${e}`), Number(`1.5e${e}`), Number(`-9.87654321e${e}`));
  const view = new DataView(new ArrayBuffer(8));
  let seed = 42;
  const rand = (): number => {
    seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
    return seed;
  };
  while (out.length < 4000) {
    view.setUint32(0, rand() * 2 + (rand() % 2));
    view.setUint32(4, rand() * 2 + (rand() % 2));
    const v = view.getFloat64(0);
    if (Number.isFinite(v)) out.push(v);
  }
  return out.filter(Number.isFinite);
}

describe('the canonical text of a double, in PostgreSQL and in DuckDB', () => {
  it('is the same for thousands of doubles, so a chain verifies on either engine', async () => {
    const values = doubles();
    const duck = await (await DuckDBInstance.create(':memory:')).connect();
    const duckTexts = (
      await duck.runAndReadAll(
        `SELECT CAST(v AS VARCHAR) FROM unnest([${values.map((v) => `CAST('${Object.is(v, -0) ? '-0' : String(v)}' AS DOUBLE)`).join(', ')}]) AS t(v)`,
      )
    )
      .getRows()
      .map((r) => String(r[0]));
    const admin = await ctx.engine.admin();
    const rows = (await admin.query(`SELECT ${canonicalPgExprSql('v', 'DOUBLE')} FROM unnest($1::float8[]) WITH ORDINALITY AS t(v, i) ORDER BY i`, [
      `{${values.map((v) => (Object.is(v, -0) ? '-0' : String(v))).join(',')}}`,
    ])) as Array<[string]>;
    const pgTexts = rows.map((r) => r[0]);
    const differ = values.map((v, i) => [v, duckTexts[i], pgTexts[i]] as const).filter(([, d, p]) => d !== p);
    expect(differ.slice(0, 10)).toEqual([]);
    expect(pgTexts.length).toBe(values.length);
  });
});

/**
 * The converters the PostgreSQL wing uses for plain VALUES (canonical-values.ts)
 * against PostgreSQL itself: for every generated spelling a converter answers,
 * PostgreSQL must read it as the column's type and give the same canonical
 * text; a spelling PostgreSQL refuses must get no answer from the converter.
 */
describe("the plain values' converters, held to PostgreSQL", () => {
  it('give the canonical text PostgreSQL gives, or leave the spelling to PostgreSQL', async () => {
    const { pgCanonicalConverter: canonicalConverter } = await import('../../src/engines/postgres/handler/appends.js');
    const { pgTypeName } = await import('../../src/engines/postgres/dialect/verify-sql.js');
    const admin = await ctx.engine.admin();
    let seed = 7;
    const rand = (n: number): number => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed % n;
    };
    const numberSpellings = (): string[] => {
      const out = [
        '0',
        '-0',
        '+1',
        '007',
        '-007',
        '1.',
        '.5',
        '1e5',
        '1E-5',
        '-1.5e+10',
        '1e400',
        '-1e400',
        '1e-400',
        '2147483647',
        '2147483648',
        '-2147483648',
        '-2147483649',
        '9223372036854775807',
        '9223372036854775808',
        '-9223372036854775808',
        '32767',
        '32768',
        '-32768',
        '-32769',
        ' 1',
        '1 ',
        '1_000',
        '0x10',
        'NaN',
        'Infinity',
        '',
        '+',
        '-',
        '1e',
        '12345678901234567890123',
      ];
      for (let i = 0; i < 400; i++) {
        const digits =
          String(rand(10 ** (1 + rand(9)))) + (rand(3) === 0 ? `.${rand(1000)}` : '') + (rand(4) === 0 ? `e${rand(2) === 0 ? '-' : ''}${rand(320)}` : '');
        out.push(rand(2) === 0 ? `-${digits}` : digits);
      }
      return out;
    };
    const corpus: Record<string, string[]> = {
      SMALLINT: numberSpellings(),
      INTEGER: numberSpellings(),
      BIGINT: numberSpellings(),
      DOUBLE: numberSpellings(),
      BOOLEAN: ['true', 'false', 't', 'f', 'TRUE', 'False', 'T', 'yes', 'no', 'on', 'off', '1', '0', ' true', 'tru', ''],
      UUID: [
        '0193b5e4-7c1a-7d2e-9f00-0123456789ab',
        '0193B5E4-7C1A-7D2E-9F00-0123456789AB',
        '{0193b5e4-7c1a-7d2e-9f00-0123456789ab}',
        '0193b5e47c1a7d2e9f000123456789ab',
        '0193b5e4-7c1a-7d2e-9f00-0123456789a',
        'not a uuid',
      ],
      JSON: [
        '{}',
        '[]',
        '{"a":1}',
        '{"a" : [1, 2.50, "x"]}',
        ' {"b":null} ',
        '"text"',
        '1',
        '1.0e5',
        'true',
        'null',
        '{"a":1,"a":2}',
        '"\\u00e9"',
        '"\\ud800"',
        '{"a":}',
        "{'a':1}",
        '',
        'NaN',
        '[1,]',
      ],
      VARCHAR: ['', 'plain', 'héllo\nwörld', '  spaces  ', '\\N', 'emoji 😀', 'tab\tin'],
    };
    for (const [type, spellings] of Object.entries(corpus)) {
      const convert = canonicalConverter(type);
      expect(convert, type).not.toBeNull();
      for (const text of spellings) {
        const ours = convert?.(text);
        let theirs: string | null | undefined;
        try {
          const [[t]] = (await admin.query(`SELECT ${canonicalPgExprSql(`CAST($1::text AS ${pgTypeName(type)})`, type)}`, [text])) as [[string | null]];
          theirs = t;
        } catch {
          theirs = undefined;
        }
        if (ours !== undefined) expect(theirs, `${type} ${JSON.stringify(text)}`).toBe(ours);
      }
    }
  });
});
