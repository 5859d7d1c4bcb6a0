import { HashedEmbedder } from './hashed.js';
import { OpenAIEmbedder } from './openai.js';
import type { Embedder } from './provider.js';

/** The embedding section of the configuration, as the embedders read it. */
export interface EmbeddingSettings {
  readonly provider: string;
  readonly url: string | null;
  readonly model: string;
  readonly dimensions: number;
  readonly apiKey: string | null;
  readonly timeoutMs: number;
  readonly batchSize: number;
  readonly maxRetries: number;
  readonly sendDimensions: boolean;
}

/** What the embedders report, for the metrics. */
export interface EmbeddingEvents {
  embeddingRequest(seconds: number, ok: boolean): void;
  embeddingFailed(reason: string): void;
}

/** The configured embedders: one for the steps, and one for search texts, which waits less before it gives up. */
export function embeddersFor(c: EmbeddingSettings, observer: EmbeddingEvents): { readonly steps: Embedder; readonly queries: Embedder } {
  if (c.provider === 'builtin') {
    const builtin = new HashedEmbedder({ dimensions: c.dimensions });
    return { steps: builtin, queries: builtin };
  }
  const options = {
    url: c.url as string,
    model: c.model,
    dimensions: c.dimensions,
    apiKey: c.apiKey,
    timeoutMs: c.timeoutMs,
    batchSize: c.batchSize,
    maxRetries: c.maxRetries,
    sendDimensions: c.sendDimensions,
    events: {
      request: (seconds: number, ok: boolean) => observer.embeddingRequest(seconds, ok),
      retry: () => observer.embeddingFailed('retry'),
    },
  };
  return {
    steps: new OpenAIEmbedder(options),
    // A search is a client waiting: one retry, within ten seconds.
    queries: new OpenAIEmbedder({ ...options, maxRetries: Math.min(1, c.maxRetries), timeoutMs: Math.min(c.timeoutMs, 10_000) }),
  };
}
