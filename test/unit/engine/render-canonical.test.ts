import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DuckDBEngine } from '../../../src/engines/duckdb/adapter/engine.js';
import type { EngineConnection, EngineStatement } from '../../../src/engine/port.js';

/**
 * renderCanonical must print a ledger row's canonical texts exactly as the
 * engine prints the stored row: the session cache and the row store answer
 * with it. Checked by effect, over generated values of every type it
 * renders, against the engine's own cursor.
 */

let engine: DuckDBEngine;
let conn: EngineConnection;

beforeAll(async () => {
  engine = await DuckDBEngine.open({ path: ':memory:' });
  conn = await engine.connect();
  await conn.run(`CREATE TABLE t (
    id INTEGER, u UUID, s VARCHAR, j JSON, b BOOLEAN, i1 TINYINT, i2 SMALLINT, i8 BIGINT, d DOUBLE, ts TIMESTAMP WITH TIME ZONE)`);
  await conn.run(`INSERT INTO t SELECT i,
      CASE WHEN i % 13 = 0 THEN NULL ELSE gen_random_uuid() END,
      CASE WHEN i % 11 = 0 THEN NULL WHEN i % 5 = 0 THEN '' ELSE repeat('é✓ x', i % 7) || i END,
      ('{"k": ' || i || ', "s": "' || repeat('ü', i % 3) || '"}')::JSON,
      i % 3 = 0,
      (i % 255 - 127)::TINYINT,
      (i * 37 % 65535 - 32767)::SMALLINT,
      CASE WHEN i % 17 = 0 THEN -9223372036854775807 WHEN i % 19 = 0 THEN 9223372036854775807 ELSE i * 1234567891011 - 5e15::BIGINT END,
      CASE WHEN i % 23 = 0 THEN 'inf'::DOUBLE WHEN i % 29 = 0 THEN 'nan'::DOUBLE WHEN i % 31 = 0 THEN -0.0 ELSE (i - 500) * pi() * 10 ^ (i % 40 - 20) END,
      CASE WHEN i % 37 = 0 THEN NULL ELSE make_timestamptz(((i * 7919) % 9000 + 1)::BIGINT * 365 * 86400000000 // 2 + i * 1000003) END
    FROM range(1000) r(i)`);
});

afterAll(async () => {
  conn.close();
  await engine.close();
});

async function rows(statement: EngineStatement, timeZone: string): Promise<Array<Array<string | null>>> {
  statement.bind([]);
  const cursor = await statement.execute();
  const out: Array<Array<string | null>> = [];
  await cursor.fetch(
    0,
    [],
    {
      row: (cells) => out.push(cells.map((c) => (c === null || typeof c === 'string' ? c : Buffer.from(c).toString('utf8')))),
      flushIfFull: () => Promise.resolve(),
    },
    { timeZone },
  );
  cursor.close();
  return out;
}

describe('renderCanonical', () => {
  it.each(['UTC', 'Asia/Kolkata', 'America/New_York'])('prints canonical texts as the engine prints the stored row, in %s', async (zone) => {
    const stored = await conn.prepare('SELECT * FROM t ORDER BY id', []);
    const canonical = await conn.prepare(
      `SELECT CAST(id AS VARCHAR), CAST(u AS VARCHAR), s, CAST(j AS VARCHAR), CAST(b AS VARCHAR), CAST(i1 AS VARCHAR), CAST(i2 AS VARCHAR),
         CAST(i8 AS VARCHAR), CAST(d AS VARCHAR), CAST(epoch_us(ts) AS VARCHAR) FROM t ORDER BY id`,
      [],
    );
    const expected = await rows(stored, zone);
    const texts = await rows(canonical, zone);
    expect(expected).toHaveLength(1000);
    expect(stored.renderCanonical?.(texts, { timeZone: zone })).toEqual(expected);
    stored.close();
    canonical.close();
  });
});
