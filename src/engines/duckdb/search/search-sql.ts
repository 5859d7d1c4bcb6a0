import { EmbeddingError, type Embedder } from '../../../embedding/provider.js';
import type { EngineFunction } from '../../../engine/port.js';
import { PgError } from '../../../errors/pg-error.js';
import { SqlState } from '../../../errors/sqlstate.js';
import { EMBEDDINGS_TABLE, MAX_TEXT_CHARS, vectorText } from './embeddings.js';
import { STEPS_TABLE, quoteLiteral } from '../../../ledger/chain/schema.js';

/** Query texts whose vectors are kept, so that a dashboard's repeated search asks the provider once. */
const CACHED_QUERIES = 1000;

/**
 * The query side of cot_search(): the query text's vector, from the
 * configured embedder. DuckDB asks for it through the engine function
 * cot_query_vector(text), which must answer at once; an in-process embedder
 * computes it there, while a remote one's vectors are fetched by the handler
 * before the statement is prepared (literal query texts) or executed
 * (parameters), and kept here.
 */
export class QueryVectors {
  private readonly cache = new Map<string, string>();

  constructor(
    private readonly embedder: Embedder,
    /** Why search cannot answer now (off, or the vectors are another model's), or null. */
    private readonly unavailable: () => string | null,
  ) {}

  /** Refuses a search that cannot be answered, and fetches the vectors of these query texts. */
  async prepare(texts: readonly string[]): Promise<void> {
    const reason = this.unavailable();
    if (reason !== null) throw new PgError(SqlState.ObjectNotInPrerequisiteState, `semantic search is not available: ${reason}`);
    if (this.embedder.embedNow !== undefined) return;
    // A query text is embedded as steps are: its first MAX_TEXT_CHARS characters.
    const missing = [...new Set(texts.map(clip))].filter((t) => !this.cache.has(t));
    if (missing.length === 0) return;
    let vectors: Float32Array[];
    try {
      vectors = await this.embedder.embed(missing);
    } catch (err) {
      if (!(err instanceof EmbeddingError)) throw err;
      throw new PgError(SqlState.SystemError, `the embedding provider could not embed the search text: ${err.message}`, {
        hint: 'cot_search() embeds its query text with the configured provider (embedding.url); appends and other reads are not affected. cot_similar() needs no provider.',
      });
    }
    for (const [i, t] of missing.entries()) this.remember(t, vectorText(vectors[i] as Float32Array));
  }

  /** The engine function: the vector of a query text as a list literal, or null when it is not at hand. */
  engineFunction(): EngineFunction {
    return {
      name: 'cot_query_vector',
      parameters: ['VARCHAR'],
      call: ([text]) => {
        // The engine function runs on the event loop: a query text of megabytes must not hold it.
        const q = clip(String(text));
        const cached = this.cache.get(q);
        if (cached !== undefined) return cached;
        if (this.embedder.embedNow === undefined) return null;
        const v = vectorText(this.embedder.embedNow(q));
        this.remember(q, v);
        return v;
      },
    };
  }

  private remember(text: string, vector: string): void {
    this.cache.delete(text);
    this.cache.set(text, vector);
    if (this.cache.size > CACHED_QUERIES) this.cache.delete(this.cache.keys().next().value as string);
  }
}

const clip = (text: string): string => (text.length > MAX_TEXT_CHARS ? text.slice(0, MAX_TEXT_CHARS) : text);

const STEPS = `main.${STEPS_TABLE}`;
const VECTORS = `main.${EMBEDDINGS_TABLE}`;

/**
 * cot_search(query, k, filters) and cot_similar(trace_id, k) as table
 * macros: every column of the step, then its cosine similarity, best first.
 * Every vector is of unit length, so the cosine is the inner product, which
 * DuckDB computes a fifth faster. The filters read the columns copied
 * beside each vector; only the k best are joined back to the ledger. The
 * table holds one model's vectors at a time (a server whose model differs
 * refuses to search, and `cotwire reembed` replaces them all), so nothing
 * compares the model row by row, which cost as much as the product.
 */
export function searchMacros(dimensions: number): string[] {
  const filters = `(step_types IS NULL OR list_contains(CAST(step_types AS VARCHAR[]), e.step_type))
        AND (agent_id IS NULL OR e.agent_id = CAST(agent_id AS VARCHAR))
        AND (session_id IS NULL OR e.session_id = CAST(session_id AS VARCHAR))
        AND (since IS NULL OR e.step_created_at >= CAST(since AS TIMESTAMPTZ))
        AND (until IS NULL OR e.step_created_at < CAST(until AS TIMESTAMPTZ))`;
  const notFound = quoteLiteral('cot_search: the query text has no vector: pass it as a literal or a parameter when embedding.provider is remote');
  return [
    `CREATE OR REPLACE TEMP MACRO cot_search(query, k := 10, step_types := NULL, agent_id := NULL, session_id := NULL, since := NULL, until := NULL, min_similarity := NULL) AS TABLE
     WITH q AS (SELECT CAST(coalesce(system.main.cot_query_vector(CAST(query AS VARCHAR)), system.main.error(${notFound})) AS FLOAT[${dimensions}]) AS v),
     hits AS (
       SELECT e.trace_id, array_inner_product(e.vector, q.v) AS similarity
       FROM ${VECTORS} e, q
       WHERE ${filters}
         AND (min_similarity IS NULL OR array_inner_product(e.vector, q.v) >= CAST(min_similarity AS DOUBLE))
       ORDER BY similarity DESC, e.trace_id LIMIT k)
     SELECT s.*, h.similarity FROM hits h JOIN ${STEPS} s ON s.trace_id = h.trace_id
     ORDER BY h.similarity DESC, s.trace_id`,
    `CREATE OR REPLACE TEMP MACRO cot_similar(trace, k := 10) AS TABLE
     WITH t AS (SELECT v FROM (SELECT (SELECT any_value(vector) FROM ${VECTORS} WHERE trace_id = CAST(trace AS UUID)) AS v)
                WHERE CASE WHEN v IS NULL
                      THEN system.main.error('cot_similar: step ' || CAST(trace AS VARCHAR) || ' has no vector: it was not selected for an embedding (has_embedding is false), or is not embedded yet') IS NULL
                      ELSE true END),
     hits AS (
       SELECT e.trace_id, array_inner_product(e.vector, t.v) AS similarity
       FROM ${VECTORS} e, t
       WHERE e.trace_id <> CAST(trace AS UUID)
       ORDER BY similarity DESC, e.trace_id LIMIT k)
     SELECT s.*, h.similarity FROM hits h JOIN ${STEPS} s ON s.trace_id = h.trace_id
     ORDER BY h.similarity DESC, s.trace_id`,
  ];
}
