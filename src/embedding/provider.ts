/**
 * What computes embeddings: the built-in hashed embedder (hashed.ts), or an
 * HTTP service speaking OpenAI's embeddings format (openai.ts). The ledger's
 * embedding worker and the query side of cot_search() only see this.
 */
export interface Embedder {
  /** The model name stored with each vector; vectors of different models are never compared. */
  readonly model: string;
  /** The length of every vector. */
  readonly dimensions: number;
  /** The most texts one call of embed() is given. */
  readonly batchSize: number;
  /**
   * One vector per text, in order, each of `dimensions` floats and of unit
   * length. Rejects with an EmbeddingError when the texts could not be
   * embedded (after the provider's own retries).
   */
  embed(texts: readonly string[], signal?: AbortSignal): Promise<Float32Array[]>;
  /** The vector computed in-process, synchronously; absent when the provider is remote. */
  embedNow?(text: string): Float32Array;
}

/** Why a provider could not embed: `retryable` when trying again later may succeed (network, timeout, 429, 5xx). */
export class EmbeddingError extends Error {
  constructor(
    message: string,
    readonly retryable: boolean,
    /** The HTTP status, when the provider answered. */
    readonly status: number | null = null,
  ) {
    super(message);
    this.name = 'EmbeddingError';
  }
}

/** What a provider reports about its calls (the metrics). */
export interface EmbedderEvents {
  /** One HTTP request (or in-process call) finished: how long it took, and whether it succeeded. */
  request?(seconds: number, ok: boolean): void;
  /** A request failed and will be tried again after `delayMs`. */
  retry?(err: EmbeddingError, attempt: number, delayMs: number): void;
}

/** Scales a vector to unit length in place (a zero vector stays zero). */
export function normalize(v: Float32Array): Float32Array {
  let sum = 0;
  for (const x of v) sum += x * x;
  if (sum === 0) return v;
  const inv = 1 / Math.sqrt(sum);
  for (let i = 0; i < v.length; i++) v[i] = (v[i] as number) * inv;
  return v;
}
