import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { canonicalConverter, doubleText } from '../../../src/ledger/chain/canonical-values.js';

/**
 * The JavaScript conversions stand in for DuckDB's casts in the hash
 * pre-image, so each is held to what DuckDB itself gives for the same text:
 * a difference would make a chained row fail verification.
 */
let instance: DuckDBInstance;
let conn: DuckDBConnection;

beforeAll(async () => {
  instance = await DuckDBInstance.create(':memory:');
  conn = await instance.connect();
});
afterAll(() => {
  conn.closeSync();
  instance.closeSync();
});

/** DuckDB's canonical texts of many inputs at once, or the error of each. */
async function duckdb(type: string, inputs: readonly string[]): Promise<Array<string | Error>> {
  const out: Array<string | Error> = [];
  for (const text of inputs) {
    try {
      const [[v]] = (await conn.runAndReadAll(`SELECT CAST(CAST($1 AS ${type}) AS VARCHAR)`, [text])).getRows() as [[string]];
      out.push(v);
    } catch (err) {
      out.push(err as Error);
    }
  }
  return out;
}

/** Each input the converter accepts must give DuckDB's text; each it refuses is left to DuckDB. */
async function agrees(type: string, inputs: readonly string[]): Promise<number> {
  const convert = canonicalConverter(type);
  if (convert === null) throw new Error(`no converter for ${type}`);
  const expected = await duckdb(type, inputs);
  let converted = 0;
  inputs.forEach((text, i) => {
    const mine = convert(text);
    if (mine === undefined) return;
    converted++;
    expect({ text, value: mine }).toEqual({ text, value: expected[i] });
  });
  return converted;
}

/** A deterministic generator, so that a failure can be reproduced. */
function random(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s ^ (s >>> 15), 0x2c1b3c6d) + 0x9e3779b9) >>> 0;
    return s / 2 ** 32;
  };
}

describe('canonical texts computed in JavaScript', () => {
  it('DOUBLE: the shortest round-trip digits, laid out as DuckDB lays them out', async () => {
    const next = random(7);
    const inputs = [
      '0',
      '-0',
      '1',
      '1.0',
      '100',
      '0.9',
      '0.1',
      '0.30000000000000004',
      '1e15',
      '1e16',
      '9999999999999998',
      '1e20',
      '1e21',
      '0.0001',
      '0.00001',
      '1e-5',
      '5e-324',
      '1.7976931348623157e308',
      '123456789012345678',
      '12345678.9',
      '.5',
      '1.',
      '+1.5',
      '-2.5e-7',
      '6.02214076e23',
      '1E5',
      '0.07',
      '0.99',
    ];
    for (let i = 0; i < 1500; i++) {
      const magnitude = Math.floor(next() * 40) - 20;
      const v = (next() - 0.5) * 10 ** magnitude;
      inputs.push(String(v), v.toPrecision(1 + Math.floor(next() * 17)), (Math.round(v * 100) / 100).toString());
    }
    expect(await agrees('DOUBLE', inputs)).toBe(inputs.length);
  });

  it('DOUBLE: leaves infinities, NaN and other spellings to DuckDB', () => {
    const convert = canonicalConverter('DOUBLE');
    for (const text of ['1e400', 'inf', 'NaN', '1_000', '0x10', ' 1', '']) expect(convert?.(text)).toBeUndefined();
    expect(doubleText(Number.POSITIVE_INFINITY)).toBeUndefined();
  });

  it('integers: decimal digits without leading zeros, inside the type range', async () => {
    const inputs = ['0', '-0', '+5', '007', '2147483647', '-2147483648', '9223372036854775807', '-9223372036854775808', '32767', '-32768'];
    const next = random(11);
    for (let i = 0; i < 300; i++) inputs.push(String(Math.floor((next() - 0.5) * 2 ** Math.floor(next() * 60))));
    for (const type of ['SMALLINT', 'INTEGER', 'BIGINT']) expect(await agrees(type, inputs)).toBeGreaterThan(0);
    const int = canonicalConverter('INTEGER');
    for (const text of ['2147483648', '1.5', '1_000', '0x10', ' 5', '', '1e3']) expect(int?.(text)).toBeUndefined();
  });

  it('UUID, BOOLEAN, VARCHAR and JSON', async () => {
    expect(await agrees('UUID', ['A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11', '019a0b4c-1d2e-7f00-8a1b-2c3d4e5f6a7b'])).toBe(2);
    expect(canonicalConverter('UUID')?.('{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}')).toBeUndefined();
    expect(await agrees('BOOLEAN', ['true', 'FALSE', 't', 'F'])).toBe(4);
    expect(canonicalConverter('BOOLEAN')?.('yes')).toBeUndefined();
    expect(await agrees('VARCHAR', ['', 'héllo\nwörld', "it's", '\\n', '😀'])).toBe(5);
    expect(canonicalConverter('VARCHAR')?.('a\u0000b')).toBeUndefined();
    const json = ['{"a": 1}', ' {"a":1} ', '{"a":1.0e2}', '[1, 2 ,3]', '"x"', 'true', '1e400', '{"é":"\\u00e9"}', '{"b":1,"a":2}'];
    expect(await agrees('JSON', json)).toBe(json.length);
    const refused = ['{"a":1,}', 'NaN', '[1,2', '', '{"a":"\\ud800"}', '{"a":"\t"}', '01'];
    const convert = canonicalConverter('JSON');
    for (const text of refused) expect(convert?.(text)).toBeUndefined();
  });

  it('has no converter for types DuckDB must evaluate', () => {
    for (const type of ['TIMESTAMP WITH TIME ZONE', 'DATE', 'DECIMAL(10,2)', 'VARCHAR[]', 'FLOAT']) expect(canonicalConverter(type)).toBeNull();
  });
});
