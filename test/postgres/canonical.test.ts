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
