import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { DuckDBEngine, type EngineCompression } from '../../../src/engines/duckdb/adapter/engine.js';
import { loadConfig } from '../../../src/config/load.js';

const dir = mkdtempSync(join(tmpdir(), 'cotwire-compression-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The compression methods DuckDB chose for a table of hashes and counters once it is checkpointed. */
async function methods(compression: EngineCompression): Promise<Set<string>> {
  const engine = await DuckDBEngine.open({ path: join(dir, `${compression}.duckdb`), compression });
  const conn = await engine.connect();
  try {
    await conn.run(
      'CREATE TABLE t AS SELECT sha256(i::VARCHAR) AS hash, i AS seq, [sin(i), cos(i), sin(i) * cos(i)]::FLOAT[3] AS v, i / 7.0 AS x, (i // 1000) % 3 AS runs FROM range(200000) r(i)',
    );
    await conn.run('CHECKPOINT');
    const rows = await conn.query("SELECT DISTINCT compression FROM pragma_storage_info('t')");
    return new Set(rows.map((r) => String(r[0])));
  } finally {
    conn.close();
    await engine.close();
  }
}

describe('database.compression', () => {
  it('leaves out FSST, bit-packing, RLE and the float codecs for fast reads, and lets DuckDB use them otherwise', async () => {
    const small = await methods('small');
    expect(small.has('FSST') || small.has('BitPacking')).toBe(true);
    expect(small.has('ALP') || small.has('ALPRD')).toBe(true);
    expect(small.has('RLE')).toBe(true);
    const fast = await methods('fast-reads');
    for (const method of ['FSST', 'BitPacking', 'RLE', 'ALP', 'ALPRD', 'Chimp', 'Patas']) expect(fast.has(method), method).toBe(false);
  });

  it('is fast-reads unless configured', () => {
    expect(loadConfig({ argv: {}, env: {} }).database.compression).toBe('fast-reads');
  });
});
