import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api';
import { afterAll, describe, expect, it } from 'vitest';
import { stringColumn } from '../../../src/engines/duckdb/adapter/string-vectors.js';
import { BackendWriter, dataRowCells } from '../../../src/protocol/encode.js';

const dir = mkdtempSync(join(tmpdir(), 'cotwire-strings-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The one-cell DataRow messages of `bytes`, one after another, as their cells. */
function cellsOf(bytes: Buffer): Array<string | null> {
  const cells: Array<string | null> = [];
  for (let at = 0; at < bytes.length; at += 1 + bytes.readInt32BE(at + 1)) cells.push(...dataRowCells(bytes.subarray(at, at + 1 + bytes.readInt32BE(at + 1))));
  return cells;
}

/**
 * Every chunk of a query, each string column read three ways: the bulk copies' bytes, the same written as
 * DataRow cells, and the library's own getItem().
 */
async function compare(conn: DuckDBConnection, sql: string): Promise<{ strings: number; bulk: number }> {
  const result = await conn.stream(sql);
  let strings = 0;
  let bulk = 0;
  for (;;) {
    const chunk = await result.fetchChunk();
    if (chunk === null || chunk.rowCount === 0) break;
    for (let c = 0; c < chunk.columnCount; c++) {
      const vector = chunk.getColumnVector(c);
      const read = stringColumn(vector, chunk.rowCount);
      if (read === null) continue;
      bulk++;
      const expected: Array<string | null> = [];
      const actual: Array<string | null> = [];
      const rows = new BackendWriter();
      for (let r = 0; r < chunk.rowCount; r++) {
        expected.push(vector.getItem(r) as string | null);
        const bytes = read.bytes(r);
        actual.push(bytes === null ? null : Buffer.from(bytes).toString('utf8'));
        rows.beginDataRow(1);
        read.write(r, rows);
        rows.endDataRow();
      }
      expect(actual).toEqual(expected);
      expect(cellsOf(rows.takeCopy())).toEqual(expected);
      strings += chunk.rowCount;
    }
  }
  return { strings, bulk };
}

describe('string vectors read in bulk', () => {
  it('give the bytes getItem() gives: inlined and long strings, NULLs, unicode, from memory and from storage', async () => {
    const instance = await DuckDBInstance.create(join(dir, 's.duckdb'));
    const conn = await instance.connect();
    try {
      // Lengths around the 12-byte inline limit, multi-byte characters, NULLs, repeated and distinct values.
      const rows = `SELECT i,
          CASE WHEN i % 7 = 0 THEN NULL ELSE repeat('é', i % 20) || i END AS a,
          'näive ✓ ' || repeat(chr(CAST(97 + (i % 26) AS INTEGER)), CAST((i * 13) % 300 AS INTEGER)) AS b,
          sha256(i::VARCHAR) AS c,
          CASE WHEN i % 3 = 0 THEN 'short' ELSE 'a longer constant string' END AS d,
          ('{"n":' || i || '}')::JSON AS e
        FROM range(30000) t(i)`;
      const fromMemory = await compare(conn, rows);
      expect(fromMemory.strings).toBe(30000 * 5);
      expect(fromMemory.bulk).toBeGreaterThan(0);
      await conn.run(`CREATE TABLE t AS ${rows}`);
      await conn.run('CHECKPOINT');
      const fromStorage = await compare(conn, 'SELECT a, b, c, d, e FROM t WHERE i % 5 <> 1');
      expect(fromStorage.strings).toBe(24000 * 5);
      expect(fromStorage.bulk).toBeGreaterThan(0);
    } finally {
      conn.closeSync();
      instance.closeSync();
    }
  });

  it('leaves vectors of other types to getItem()', async () => {
    const instance = await DuckDBInstance.create(':memory:');
    const conn = await instance.connect();
    try {
      const chunk = await (await conn.run('SELECT 1 AS i, 2.5 AS d')).fetchChunk();
      if (chunk === null) throw new Error('no chunk');
      expect(stringColumn(chunk.getColumnVector(0), 1)).toBeNull();
      expect(stringColumn(chunk.getColumnVector(1), 1)).toBeNull();
    } finally {
      conn.closeSync();
      instance.closeSync();
    }
  });
});
