import type { Config } from '../../../config/schema.js';
import { embeddersFor } from '../../../embedding/configured.js';
import type { Engine, EngineConnection } from '../../../engine/port.js';
import type { Logger } from '../../../log/logger.js';
import type { Observer } from '../../../observe/observer.js';
import { EmbeddingWorker } from '../search/embedding-worker.js';
import { openVectorTable, vectorMismatch } from '../search/embeddings.js';
import { QueryVectors } from '../search/search-sql.js';
import { duckdbDialect } from '../dialect/dialect.js';

export { embeddersFor } from '../../../embedding/configured.js';

export interface Search {
  readonly vectors: QueryVectors;
  readonly macros: readonly string[];
  readonly worker: EmbeddingWorker | null;
  close(): Promise<void>;
}

/** The vector table, the background embedding of selected steps, and cot_search()'s query side. */
export async function openSearch(
  config: Config,
  engine: Engine,
  internal: EngineConnection,
  observer: Observer,
  log: Logger,
  /** The writer's applied ledger_seq; null when the steps ledger is damaged. */
  appliedSeq: (() => number) | null,
): Promise<Search> {
  const c = config.embedding;
  const embedders = embeddersFor(c, observer);
  const state = appliedSeq !== null ? await openVectorTable(internal, c.dimensions) : null;
  const mismatch = state === null ? null : vectorMismatch(state, c.model, c.dimensions);
  if (mismatch !== null && c.enabled) log.warn({ model: c.model }, `semantic search is off until the vectors match the configuration: ${mismatch}`);
  const vectors = new QueryVectors(embedders.queries, () =>
    !c.enabled ? 'embedding.enabled is false' : state === null ? 'the steps ledger is damaged' : mismatch,
  );
  await engine.registerFunction(vectors.engineFunction());
  const macros = duckdbDialect.searchFunctions?.(c.dimensions) ?? [];
  if (!c.enabled || appliedSeq === null || mismatch !== null) return { vectors, macros, worker: null, close: async () => undefined };
  const conn = await engine.connect();
  let unavailableSince: number | null = null;
  const worker = new EmbeddingWorker(conn, embedders.steps, {
    appliedSeq,
    observer,
    onUnavailable: (err, retryInMs) => {
      unavailableSince ??= Date.now();
      log.error(
        { err: err.message, provider: c.provider, url: c.url, queued: worker.queueDepth, retryInMs },
        'the embedding provider failed; selected steps wait in the queue (appends are not affected)',
      );
    },
    onRejected: (step, err) =>
      log.error({ traceId: step.traceId, err: err.message }, 'the embedding provider refused a step; it is skipped until the next start'),
    onError: (err) => log.error({ err }, 'embedding selected steps failed; retrying'),
    onRecovered: () => {
      log.info({ downSeconds: unavailableSince === null ? 0 : Math.round((Date.now() - unavailableSince) / 1000) }, 'the embedding provider answers again');
      unavailableSince = null;
    },
  });
  return {
    vectors,
    macros,
    worker,
    close: async () => {
      await worker.stop();
      conn.close();
    },
  };
}
