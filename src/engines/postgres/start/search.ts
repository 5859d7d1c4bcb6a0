import type { Config } from '../../../config/schema.js';
import { embeddersFor } from '../../../embedding/configured.js';
import { PgError } from '../../../errors/pg-error.js';
import { SqlState } from '../../../errors/sqlstate.js';
import type { LedgerCatalog } from '../../../ledger/chain/catalog.js';
import { MAX_TEXT_CHARS, vectorMismatch } from '../../../ledger/embeddings.js';
import type { Logger } from '../../../log/logger.js';
import type { Observer } from '../../../observe/observer.js';
import type { DisposeStack } from '../../../server/dispose-stack.js';
import { EmbeddingError } from '../../../embedding/provider.js';
import { PostgresConnection } from '../adapter/connection.js';
import type { EngineHealth } from '../adapter/health.js';
import { PG_SCHEMA } from '../ledger/names.js';
import { pgArray } from '../ledger/writer.js';
import { VECTORS } from '../search/search-sql.js';
import { EMBEDDER_LEASE_MS, PgEmbeddingWorker } from '../search/worker.js';
import { releaseLease, takeLease } from '../ledger/install.js';

/** cot_search()'s query side: the vectors of a statement's search texts, made before it runs. */
export interface PgSearch {
  prepare(texts: readonly string[]): Promise<void>;
}

/** Query texts an instance knows are stored, so that a dashboard's repeated search asks the provider once. */
const KNOWN_QUERIES = 1000;

/**
 * Semantic search on a PostgreSQL engine: the background embedding of the
 * selected steps (search/worker.ts) when embedding is enabled and the
 * stored vectors are the configured model's, and the vectors of search
 * texts, stored in cotwire.query_vectors for cot_search() to read.
 */
export async function openSearch(
  config: Config,
  log: Logger,
  url: string,
  ledgers: LedgerCatalog,
  observer: Observer,
  health: EngineHealth,
  stack: DisposeStack,
  /** This instance's name in the embedding lease. */
  instance: string,
): Promise<PgSearch> {
  const c = config.embedding;
  const embedders = embeddersFor(c, observer);
  const conn = stack.use(await PostgresConnection.open(url, 'cotwire search', { health }), (x) => x.close());
  const [stored] = (await conn.query(`SELECT model, dimensions FROM ${VECTORS} LIMIT 1`)) as Array<[string, number]>;
  const mismatch = stored === undefined ? null : vectorMismatch({ model: stored[0], dimensions: Number(stored[1]) }, c.model, c.dimensions);
  if (mismatch !== null && c.enabled) log.warn({ model: c.model }, `semantic search is off until the vectors match the configuration: ${mismatch}`);
  if (c.enabled && mismatch === null) {
    const workerConn = stack.use(await PostgresConnection.open(url, 'cotwire embedder', { health }), (x) => x.close());
    let unavailableSince: number | null = null;
    const lease = {
      take: () => takeLease(workerConn, 'embedder', instance, EMBEDDER_LEASE_MS),
      release: () => releaseLease(workerConn, 'embedder', instance),
    };
    const worker = new PgEmbeddingWorker(workerConn, () => ledgers.find(['main', '_cot_steps']), embedders.steps, lease, {
      onUnavailable: (err, retryInMs) => {
        unavailableSince ??= Date.now();
        log.error(
          { err: err.message, provider: c.provider, url: c.url, retryInMs },
          'the embedding provider failed; selected steps wait (appends are not affected)',
        );
      },
      onError: (err) => log.error({ err }, 'embedding selected steps failed; retrying'),
      onRecovered: () => {
        log.info({ downSeconds: unavailableSince === null ? 0 : Math.round((Date.now() - unavailableSince) / 1000) }, 'the embedding provider answers again');
        unavailableSince = null;
      },
    });
    worker.start();
    stack.defer(() => worker.stop());
  }
  const known = new Set<string>();
  return {
    async prepare(texts) {
      const reason = !c.enabled ? 'embedding.enabled is false' : mismatch;
      if (reason !== null) throw new PgError(SqlState.ObjectNotInPrerequisiteState, `semantic search is not available: ${reason}`);
      const missing = [...new Set(texts.map((t) => (t.length > MAX_TEXT_CHARS ? t.slice(0, MAX_TEXT_CHARS) : t)))].filter((t) => !known.has(t));
      if (missing.length === 0) return;
      let vectors: Float32Array[];
      try {
        vectors =
          embedders.queries.embedNow !== undefined
            ? missing.map((t) => (embedders.queries.embedNow as (t: string) => Float32Array)(t))
            : await embedders.queries.embed(missing);
      } catch (err) {
        if (!(err instanceof EmbeddingError)) throw err;
        throw new PgError(SqlState.SystemError, `the embedding provider could not embed the search text: ${err.message}`, {
          hint: 'cot_search() embeds its query text with the configured provider (embedding.url); appends and other reads are not affected. cot_similar() needs no provider.',
        });
      }
      await conn.query(
        `INSERT INTO ${PG_SCHEMA}.query_vectors (query, vector) SELECT q, pg_catalog.string_to_array(v, ',')::real[] FROM unnest($1::text[], $2::text[]) AS x(q, v)
         ON CONFLICT (query) DO UPDATE SET made_at = pg_catalog.now()`,
        [pgArray(missing), pgArray(vectors.map((v) => Array.from(v, (x) => x.toPrecision(9)).join(',')))],
      );
      for (const t of missing) {
        if (known.size >= KNOWN_QUERIES) known.delete(known.values().next().value as string);
        known.add(t);
      }
    },
  };
}
