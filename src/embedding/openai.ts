import { setTimeout as delay } from 'node:timers/promises';
import { type Embedder, type EmbedderEvents, EmbeddingError, normalize } from './provider.js';

export interface OpenAIEmbedderOptions {
  /** The full endpoint, e.g. `http://localhost:11434/v1/embeddings`. */
  url: string;
  model: string;
  dimensions: number;
  /** Sent as `Authorization: Bearer …` when not null. */
  apiKey: string | null;
  /** For each request, body included. */
  timeoutMs: number;
  batchSize: number;
  /** Retries after the first attempt, for network errors, timeouts, 408, 409, 429 and 5xx. */
  maxRetries: number;
  /** The first backoff, doubled at each retry (default 500 ms). */
  retryBaseMs?: number;
  /** Whether to send `dimensions` in the request (default false: Ollama and TEI reject or ignore it). */
  sendDimensions?: boolean;
  events?: EmbedderEvents;
  fetch?: typeof fetch;
}

const MAX_DELAY_MS = 30_000;
const EXCERPT_CHARS = 200;

/** Why one attempt failed, before it is known whether it will be retried. */
class Failure {
  constructor(
    readonly reason: string,
    readonly retryable: boolean,
    readonly status: number | null = null,
    readonly retryAfterMs: number | null = null,
  ) {}
}

/** Any service speaking OpenAI's embeddings API: OpenAI itself, Ollama, vLLM, Hugging Face TEI, LiteLLM… */
export class OpenAIEmbedder implements Embedder {
  readonly model: string;
  readonly dimensions: number;
  readonly batchSize: number;
  private readonly url: string;
  private readonly headers: Record<string, string>;
  private readonly fetch: typeof fetch;

  constructor(private readonly options: OpenAIEmbedderOptions) {
    const { url, model, dimensions, batchSize, timeoutMs, maxRetries, apiKey } = options;
    const parsed = new URL(url);
    // fetch() refuses them anyway, and they would end up in error messages, hence in logs.
    if (parsed.username || parsed.password) throw new RangeError('the embeddings URL must not contain credentials: give the key as apiKey');
    if (!Number.isInteger(dimensions) || dimensions < 1) throw new RangeError(`dimensions must be a positive integer, not ${dimensions}`);
    if (!Number.isInteger(batchSize) || batchSize < 1) throw new RangeError(`batchSize must be a positive integer, not ${batchSize}`);
    if (!(timeoutMs > 0)) throw new RangeError(`timeoutMs must be positive, not ${timeoutMs}`);
    if (!Number.isInteger(maxRetries) || maxRetries < 0) throw new RangeError(`maxRetries must be a non-negative integer, not ${maxRetries}`);
    this.url = url;
    this.model = model;
    this.dimensions = dimensions;
    this.batchSize = batchSize;
    this.headers = { 'content-type': 'application/json', ...(apiKey === null ? {} : { authorization: `Bearer ${apiKey}` }) };
    this.fetch = options.fetch ?? globalThis.fetch;
  }

  async embed(texts: readonly string[], signal?: AbortSignal): Promise<Float32Array[]> {
    const vectors: Float32Array[] = [];
    for (let i = 0; i < texts.length; i += this.batchSize) {
      vectors.push(...(await this.embedBatch(texts.slice(i, i + this.batchSize), signal)));
    }
    return vectors;
  }

  private async embedBatch(batch: readonly string[], signal: AbortSignal | undefined): Promise<Float32Array[]> {
    const { events, maxRetries, retryBaseMs = 500 } = this.options;
    for (let attempt = 1; ; attempt++) {
      if (signal?.aborted) throw this.cancelled(batch, attempt - 1);
      const started = performance.now();
      const result = await this.attempt(batch, signal);
      events?.request?.((performance.now() - started) / 1000, !(result instanceof Failure));
      if (!(result instanceof Failure)) return result;
      if (signal?.aborted) throw this.cancelled(batch, attempt);
      const error = this.error(batch, result, attempt);
      if (!result.retryable || attempt > maxRetries) throw error;
      const delayMs = result.retryAfterMs ?? backoff(retryBaseMs, attempt);
      events?.retry?.(error, attempt, delayMs);
      try {
        await delay(delayMs, undefined, { signal });
      } catch {
        throw this.cancelled(batch, attempt);
      }
    }
  }

  private async attempt(batch: readonly string[], signal: AbortSignal | undefined): Promise<Float32Array[] | Failure> {
    const { timeoutMs, sendDimensions = false } = this.options;
    // Not AbortSignal.any(): on Node 20 each call leaves a dependant on the caller's signal, which lives as long as the
    // embedding worker, so it would grow by one entry per request (nodejs/node#55351).
    const controller = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      controller.abort();
    }, timeoutMs);
    const onAbort = () => controller.abort();
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      const body = { model: this.model, input: batch, ...(sendDimensions ? { dimensions: this.dimensions } : {}), encoding_format: 'float' };
      const res = await this.fetch(this.url, { method: 'POST', headers: this.headers, body: JSON.stringify(body), signal: controller.signal });
      const text = await res.text();
      if (!res.ok) {
        const retryable = res.status === 408 || res.status === 409 || res.status === 429 || res.status >= 500;
        const excerpt = this.excerpt(errorMessage(text));
        return new Failure(`HTTP ${res.status}${excerpt ? `: ${excerpt}` : ''}`, retryable, res.status, retryable ? retryAfter(res.headers) : null);
      }
      return this.parse(text, batch.length, res.status);
    } catch (err) {
      if (timedOut) return new Failure(`no complete response within ${timeoutMs} ms`, true);
      return new Failure(describe(err), true);
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    }
  }

  private parse(text: string, count: number, status: number): Float32Array[] | Failure {
    const malformed = (why: string) => new Failure(`malformed response: ${why}`, false, status);
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      return malformed(`not JSON: ${this.excerpt(text)}`);
    }
    const data = (json as { data?: unknown } | null)?.data;
    if (!Array.isArray(data)) return malformed('no "data" array');
    if (data.length !== count) return malformed(`${data.length} embeddings for ${count} inputs`);
    const vectors: Float32Array[] = new Array(count);
    for (const [position, item] of data.entries()) {
      const { index = position, embedding } = (item ?? {}) as { index?: unknown; embedding?: unknown };
      if (!Number.isInteger(index) || (index as number) < 0 || (index as number) >= count || vectors[index as number]) {
        return malformed(`bad or repeated index ${JSON.stringify(index)}`);
      }
      if (!Array.isArray(embedding)) return malformed(`embedding ${index} is not an array of numbers`);
      if (embedding.length !== this.dimensions) return malformed(`embedding ${index} has ${embedding.length} dimensions, not ${this.dimensions}`);
      const v = new Float32Array(embedding.length);
      for (const [i, x] of embedding.entries()) {
        if (typeof x !== 'number' || !Number.isFinite(x)) return malformed(`embedding ${index} holds ${typeof x === 'number' ? x : JSON.stringify(x)}`);
        v[i] = x;
      }
      vectors[index as number] = normalize(v);
    }
    return vectors;
  }

  private error(batch: readonly string[], failure: Failure, attempts: number): EmbeddingError {
    const what = `embedding ${batch.length} text${batch.length === 1 ? '' : 's'} with model "${this.model}" at ${this.url}`;
    const message = `${what} failed after ${attempts} attempt${attempts === 1 ? '' : 's'}: ${failure.reason}`;
    return new EmbeddingError(this.redact(message), failure.retryable, failure.status);
  }

  private cancelled(batch: readonly string[], attempts: number): EmbeddingError {
    const what = `embedding ${batch.length} text${batch.length === 1 ? '' : 's'} with model "${this.model}" at ${this.url}`;
    return new EmbeddingError(this.redact(`${what} was cancelled after ${attempts} attempt${attempts === 1 ? '' : 's'}`), false);
  }

  /** The start of a provider's text, on one line: enough to tell "model not found" from "rate limited". */
  private excerpt(text: string): string {
    const line = this.redact(text).replace(/\s+/g, ' ').trim();
    return line.length > EXCERPT_CHARS ? `${line.slice(0, EXCERPT_CHARS)}…` : line;
  }

  // Some services echo the key they were given in their error messages.
  private redact(text: string): string {
    const { apiKey } = this.options;
    return apiKey ? text.replaceAll(apiKey, '[api key]') : text;
  }
}

/** OpenAI's `{"error":{"message":…}}`, TEI's `{"error":…}`, or else the body itself. */
function errorMessage(body: string): string {
  try {
    const json = JSON.parse(body) as { error?: unknown; message?: unknown } | null;
    const err = json?.error;
    if (typeof err === 'string') return err;
    if (err && typeof err === 'object' && typeof (err as { message?: unknown }).message === 'string') return (err as { message: string }).message;
    if (typeof json?.message === 'string') return json.message;
  } catch {
    // Not JSON: a proxy's HTML page, or plain text.
  }
  return body;
}

function retryAfter(headers: Headers): number | null {
  const value = headers.get('retry-after')?.trim();
  if (!value) return null;
  const seconds = Number(value);
  const ms = Number.isFinite(seconds) ? seconds * 1000 : Date.parse(value) - Date.now();
  return Number.isNaN(ms) ? null : Math.min(MAX_DELAY_MS, Math.max(0, Math.round(ms)));
}

/** Exponential, plus up to half again at random, so that clients failed together do not retry together. */
function backoff(baseMs: number, attempt: number): number {
  const exp = Math.min(MAX_DELAY_MS, baseMs * 2 ** (attempt - 1));
  return Math.min(MAX_DELAY_MS, Math.round(exp + (Math.random() * exp) / 2));
}

/** fetch() says only "fetch failed"; the reason (ECONNREFUSED, a reset socket…) is in its cause. */
function describe(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const cause = err.cause instanceof Error ? err.cause.message : null;
  return cause ? `${err.message} (${cause})` : err.message;
}
