import { describe, expect, it } from 'vitest';
import { DuckDBEngine } from '../../../src/engines/duckdb/adapter/engine.js';

describe('append() of FLOAT[n] columns from Float32Arrays', () => {
  it('stores every float of every row, across chunk boundaries, beside text and timestamp columns', async () => {
    const engine = await DuckDBEngine.open({ path: ':memory:' });
    const conn = await engine.connect();
    try {
      await conn.run('CREATE TABLE t (id INTEGER, ts TIMESTAMPTZ, v FLOAT[4])');
      // 5000 rows: three chunks of at most 2048; values chosen to be exact in float32.
      const rows = Array.from({ length: 5000 }, (_, i) => [String(i), String(1_700_000_000_000_000 + i), new Float32Array([i, i + 0.5, -i, i / 4])]);
      await conn.append(
        { catalog: 'memory', schema: 'main', name: 't' },
        [{ epochMicros: false }, { epochMicros: true }, { epochMicros: false, floats: 4 }],
        rows,
      );
      const wrong = await conn.query('SELECT count(*) FROM t WHERE v <> [id, id + 0.5, -id, id / 4.0]::FLOAT[4] OR epoch_us(ts) <> 1700000000000000 + id');
      expect(wrong).toEqual([[0n]]);
      expect(await conn.query('SELECT count(*), count(DISTINCT id) FROM t')).toEqual([[5000n, 5000n]]);
      // A vector of the wrong length is refused, and nothing of the statement is kept.
      await expect(
        conn.append(
          { catalog: 'memory', schema: 'main', name: 't' },
          [{ epochMicros: false }, { epochMicros: true }, { epochMicros: false, floats: 4 }],
          [['1', '0', new Float32Array(3)]],
        ),
      ).rejects.toThrow(/a vector of 3 floats for a FLOAT\[4\] column/);
      expect(await conn.query('SELECT count(*) FROM t')).toEqual([[5000n]]);
    } finally {
      conn.close();
      await engine.close();
    }
  });
});
