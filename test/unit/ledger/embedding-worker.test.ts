import { describe, expect, it } from 'vitest';
import { EmbeddingError, type Embedder } from '../../../src/embedding/provider.js';
import { DuckDBEngine } from '../../../src/engines/duckdb/adapter/engine.js';
import { EmbeddingWorker } from '../../../src/engines/duckdb/search/embedding-worker.js';
import { openVectorTable } from '../../../src/engines/duckdb/search/embeddings.js';
import { STEPS_DDL } from '../../../src/ledger/chain/schema.js';
import { LedgerWriter } from '../../../src/engines/duckdb/ledger/writer.js';
import { NO_OBSERVER } from '../../../src/observe/observer.js';
import { duckdbLedgers } from '../../../src/engines/duckdb/ledger/catalog-source.js';

/** An embedder that counts what it is given, and fails while `down`. */
class Scripted implements Embedder {
  readonly model = 'scripted';
  readonly dimensions = 4;
  readonly batchSize = 8;
  down = false;
  readonly texts: string[] = [];
  async embed(texts: readonly string[]): Promise<Float32Array[]> {
    if (this.down) throw new EmbeddingError('service unavailable', true, 503);
    this.texts.push(...texts);
    return texts.map((t) => new Float32Array([t.length, 1, 0, 0]));
  }
}

const until = async (what: () => Promise<boolean>): Promise<void> => {
  for (let i = 0; i < 400; i++) {
    if (await what()) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error('timed out');
};

describe('the embedding worker', () => {
  it('embeds the steps the writer hands over, keeps no more than its bound in memory, and reads the rest from the ledger', async () => {
    const engine = await DuckDBEngine.open({ path: ':memory:' });
    const conn = await engine.connect();
    const workerConn = await engine.connect();
    await conn.run(STEPS_DDL);
    await openVectorTable(conn, 4);
    const catalog = duckdbLedgers(conn, (n) => n.startsWith('_cot'));
    const table = await catalog.find(['_cot_steps']);
    if (table === null) throw new Error('no _cot_steps');
    const writer = await LedgerWriter.open(engine, catalog, { journalPath: null, embeddingSample: { rate: 0, alwaysTypes: new Set(['Decision']) } });
    const embedder = new Scripted();
    const worker = new EmbeddingWorker(workerConn, embedder, {
      appliedSeq: () => writer.appliedSeq,
      pollMs: 10,
      memoryQueue: 5,
      firstRetryMs: 20,
      observer: NO_OBSERVER,
      onUnavailable: () => undefined,
      onRejected: () => undefined,
      onError: (err) => {
        throw err;
      },
    });
    writer.onDurable = (tables) => worker.appended(tables);
    const append = async (from: number, n: number, type = 'Decision'): Promise<void> => {
      for (let i = from; i < from + n; i++) {
        await writer.append([{ table, rows: [[null, 'agent', `s${i % 3}`, type, `step number ${i}`, null, null, null, null, null, null, null, null]] }]);
      }
    };
    const vectors = async (): Promise<number> => Number((await conn.query('SELECT count(*) FROM _cot_embeddings'))[0]?.[0]);
    try {
      // Steps before the start are the backlog, recomputed from the ledger.
      await append(0, 3);
      await append(100, 2, 'Observation');
      worker.start();
      await until(async () => (await vectors()) === 3);
      // The service goes down: 12 selected steps arrive, more than the 5 kept in memory.
      embedder.down = true;
      await append(3, 12);
      await until(async () => worker.queueDepth === 12);
      embedder.down = false;
      await until(async () => (await vectors()) === 15);
      // Caught up, it keeps the writer's steps in memory again.
      await append(15, 4);
      await until(async () => (await vectors()) === 19);
      const rows = await conn.query(
        `SELECT count(*), count(DISTINCT e.trace_id), count(*) FILTER (WHERE e.vector[1] = length(s.content)) FROM _cot_embeddings e JOIN _cot_steps s USING (trace_id) WHERE s.step_type = 'Decision'`,
      );
      expect(rows).toEqual([[19n, 19n, 19n]]);
      // Each selected step was embedded once, and the others never.
      expect(embedder.texts.filter((t) => t.startsWith('step number')).sort()).toEqual(Array.from({ length: 19 }, (_, i) => `step number ${i}`).sort());
      expect(worker.queueDepth).toBe(0);
      expect(worker.embedded).toBe(19);
    } finally {
      await worker.stop();
      await writer.close();
      workerConn.close();
      conn.close();
      await engine.close();
    }
  });
});
