import { DuckDBInstance } from '@duckdb/node-api';
import { describe, expect, it } from 'vitest';
import { uuidColumn } from '../../../src/engines/duckdb/adapter/uuid-vectors.js';

describe('UUID vectors read from their bytes', () => {
  it('give the text getItem() gives, for random UUIDs, the extremes of both halves and NULLs', async () => {
    const instance = await DuckDBInstance.create(':memory:');
    const conn = await instance.connect();
    try {
      const result = await conn.stream(`
        SELECT CASE WHEN i % 11 = 0 THEN NULL ELSE gen_random_uuid() END AS u FROM range(10000) t(i)
        UNION ALL SELECT u::UUID FROM (VALUES ('00000000-0000-0000-0000-000000000000'), ('ffffffff-ffff-ffff-ffff-ffffffffffff'),
          ('80000000-0000-0000-0000-000000000000'), ('7fffffff-ffff-ffff-ffff-ffffffffffff'), ('00000000-0000-0000-8000-000000000000'),
          ('0123abcd-4567-89ef-fedc-ba9876543210')) v(u)`);
      let read = 0;
      for (;;) {
        const chunk = await result.fetchChunk();
        if (chunk === null || chunk.rowCount === 0) break;
        const vector = chunk.getColumnVector(0);
        const column = uuidColumn(vector, chunk.rowCount);
        expect(column).not.toBeNull();
        for (let r = 0; r < chunk.rowCount; r++) {
          const item = vector.getItem(r);
          expect(column?.(r)).toBe(item === null ? null : String(item));
          read++;
        }
      }
      expect(read).toBe(10006);
    } finally {
      conn.closeSync();
      instance.closeSync();
    }
  });

  it('leaves other vectors alone', async () => {
    const instance = await DuckDBInstance.create(':memory:');
    const conn = await instance.connect();
    try {
      const chunk = await (await conn.run("SELECT 'x' AS s, 1 AS n")).fetchChunk();
      expect(uuidColumn(chunk?.getColumnVector(0), 1)).toBeNull();
      expect(uuidColumn(chunk?.getColumnVector(1), 1)).toBeNull();
    } finally {
      conn.closeSync();
      instance.closeSync();
    }
  });
});
