import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { DuckDBEngine } from '../../../src/engines/duckdb/adapter/engine.js';

const dir = mkdtempSync(join(tmpdir(), 'cotwire-checkpoint-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/**
 * A redaction or a retention checkpoints the engine so that the erased value
 * leaves the WAL at once; DuckDB refuses a CHECKPOINT while another
 * transaction is open, such as the catalog snapshot's refresh.
 */
describe('the engine checkpoint', () => {
  it('waits out a transaction that ends within its patience, and gives up with DuckDB error past it', async () => {
    const path = join(dir, 'wal.duckdb');
    const engine = await DuckDBEngine.open({ path });
    const writer = await engine.connect();
    const other = await engine.connect();
    const inWal = (): boolean => existsSync(`${path}.wal`) && readFileSync(`${path}.wal`).includes(Buffer.from('planted value'));
    try {
      await writer.run('CREATE TABLE t (x VARCHAR)');
      await writer.run('CREATE TABLE u (x VARCHAR)');
      await engine.checkpoint();
      // A transaction that began before the erasure holds what it changed.
      await other.run('BEGIN');
      await other.run("INSERT INTO u VALUES ('meanwhile')");
      await writer.run("INSERT INTO t VALUES ('planted value')");
      await writer.run("UPDATE t SET x = 'erased'");
      expect(inWal()).toBe(true);
      // DuckDB alone refuses while it is open.
      await expect(engine.checkpoint(0)).rejects.toThrow(/other write transactions/);

      const ends = new Promise<void>((resolve) => setTimeout(() => resolve(other.run('COMMIT')), 200));
      await engine.checkpoint();
      await ends;
      expect(inWal()).toBe(false);
    } finally {
      writer.close();
      other.close();
      await engine.close();
    }
  });
});
