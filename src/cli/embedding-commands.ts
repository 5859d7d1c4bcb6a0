import type { Config } from '../config/schema.js';
import { embeddersFor } from '../engines/duckdb/start.js';
import { openVectorTable, rebuildVectorTable, vectorMismatch } from '../engines/duckdb/search/embeddings.js';
import { EmbeddingWorker } from '../engines/duckdb/search/embedding-worker.js';
import { EmbeddingError } from '../embedding/provider.js';
import { NO_OBSERVER } from '../observe/observer.js';
import { withDatabase } from './database.js';

type Out = (s: string) => void;

/**
 * `cotwire reembed`: the vector table made again from the ledger with the
 * configured (or given) model, offline. A table of another model or length
 * is emptied first; one of the same model only gets the vectors it lacks,
 * so a run that failed half-way continues where it stopped (--force starts
 * over).
 */
export async function reembedCommand(db: string, embedding: Config['embedding'], force: boolean, out: Out): Promise<number> {
  const { steps: embedder } = embeddersFor(embedding, NO_OBSERVER);
  return withDatabase(
    db,
    false,
    async (conn) => {
      const state = await openVectorTable(conn, embedding.dimensions);
      if (force || vectorMismatch(state, embedding.model, embedding.dimensions) !== null) {
        if (state.model !== null) out(`dropping the vectors of ${state.model} (${state.dimensions} dimensions)\n`);
        await rebuildVectorTable(conn, embedding.dimensions);
      }
      const started = performance.now();
      const worker = new EmbeddingWorker(conn, embedder, {
        appliedSeq: () => 0,
        observer: NO_OBSERVER,
        onUnavailable: () => undefined,
        onRejected: (step, err) => out(`skipped step ${step.traceId}: the provider refused it: ${err.message}\n`),
        onError: () => undefined,
      });
      let reported = started;
      try {
        await worker.drain(() => {
          if (performance.now() - reported < 5000) return;
          reported = performance.now();
          out(`${worker.embedded} steps embedded, ${worker.queueDepth} to go\n`);
        });
      } catch (err) {
        if (!(err instanceof EmbeddingError)) throw err;
        out(`FAILED after ${worker.embedded} steps (kept; run reembed again to continue): ${err.message}\n`);
        return 1;
      }
      const seconds = (performance.now() - started) / 1000;
      out(
        `OK: ${worker.embedded} steps embedded with ${embedding.model} (${embedding.dimensions} dimensions) in ${seconds.toFixed(1)} s; the server searches them when its configuration names this model (embedding.model, embedding.dimensions)\n`,
      );
      return 0;
    },
    true,
  );
}
