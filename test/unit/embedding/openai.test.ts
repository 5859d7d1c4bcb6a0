import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { OpenAIEmbedder, type OpenAIEmbedderOptions } from '../../../src/embedding/openai.js';
import { type EmbedderEvents, EmbeddingError, normalize } from '../../../src/embedding/provider.js';

interface Request {
  model: string;
  input: string[];
  dimensions?: number;
  encoding_format?: string;
}

type Handler = (body: Request, res: ServerResponse, n: number) => void;

const DIMS = 4;
// Deterministic, distinct per text, and not of unit length, so that normalisation is visible.
const vectorFor = (text: string) => [text.length, 1, 0, 0];
const expected = (text: string) => normalize(Float32Array.from(vectorFor(text)));

function send(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(typeof body === 'string' ? body : JSON.stringify(body));
}

function answer(res: ServerResponse, body: Request, map: (text: string) => unknown = vectorFor): void {
  const data = body.input.map((text, index) => ({ object: 'embedding', index, embedding: map(text) }));
  send(res, 200, { object: 'list', data: data.reverse(), model: body.model, usage: { prompt_tokens: 1, total_tokens: 1 } });
}

const ok: Handler = (body, res) => answer(res, body);
const hang: Handler = () => {};
const retrySpy = () => vi.fn<NonNullable<EmbedderEvents['retry']>>();

let server: Server;
let url: string;
let handler: Handler;
let requests: { headers: IncomingHttpHeaders; body: Request }[];

beforeEach(async () => {
  handler = ok;
  requests = [];
  server = createServer((req, res) => {
    let data = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => {
      data += chunk;
    });
    req.on('end', () => {
      const body = JSON.parse(data) as Request;
      requests.push({ headers: req.headers, body });
      handler(body, res, requests.length);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/embeddings`;
});

afterEach(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

function embedder(options: Partial<OpenAIEmbedderOptions> = {}): OpenAIEmbedder {
  return new OpenAIEmbedder({
    url,
    model: 'test-embed',
    dimensions: DIMS,
    apiKey: null,
    // Generous, so that a slow first request on a busy machine is not retried: the test on timeouts sets its own.
    timeoutMs: 2000,
    batchSize: 4,
    maxRetries: 2,
    retryBaseMs: 5,
    ...options,
  });
}

async function failure(promise: Promise<unknown>): Promise<EmbeddingError> {
  const err = await promise.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(EmbeddingError);
  return err as EmbeddingError;
}

describe('OpenAIEmbedder', () => {
  it('sends one request per batch and returns the vectors in order, normalised', async () => {
    const texts = Array.from({ length: 10 }, (_, i) => 'x'.repeat(i + 1));
    const vectors = await embedder().embed(texts);
    expect(requests.map((r) => r.body.input.length)).toEqual([4, 4, 2]);
    expect(requests.flatMap((r) => r.body.input)).toEqual(texts);
    expect(vectors).toEqual(texts.map(expected));
    const { body, headers } = requests[0] as (typeof requests)[number];
    expect(body.model).toBe('test-embed');
    expect(body.encoding_format).toBe('float');
    expect(body).not.toHaveProperty('dimensions');
    expect(headers['content-type']).toBe('application/json');
  });

  it('sends dimensions only when asked to', async () => {
    await embedder({ sendDimensions: true }).embed(['a']);
    expect(requests[0]?.body.dimensions).toBe(DIMS);
  });

  it('makes no request for no texts', async () => {
    expect(await embedder().embed([])).toEqual([]);
    expect(requests).toHaveLength(0);
  });

  it('sends the API key as a bearer token, and no Authorization header without one', async () => {
    await embedder({ apiKey: 'sk-test' }).embed(['a']);
    await embedder({ apiKey: null }).embed(['a']);
    expect(requests[0]?.headers.authorization).toBe('Bearer sk-test');
    expect(requests[1]?.headers).not.toHaveProperty('authorization');
  });

  it('retries a 500 and reports the retry and each request', async () => {
    handler = (body, res, n) => (n === 1 ? send(res, 500, { error: { message: 'boom' } }) : answer(res, body));
    const retry = retrySpy();
    const request = vi.fn<NonNullable<EmbedderEvents['request']>>();
    const vectors = await embedder({ events: { retry, request } }).embed(['abc']);
    expect(vectors).toEqual([expected('abc')]);
    expect(requests).toHaveLength(2);
    expect(retry).toHaveBeenCalledTimes(1);
    const [err, attempt, delayMs] = retry.mock.calls[0] ?? [];
    expect(err).toBeInstanceOf(EmbeddingError);
    expect(err?.retryable).toBe(true);
    expect(err?.status).toBe(500);
    expect(err?.message).toContain('boom');
    expect(attempt).toBe(1);
    expect(delayMs).toBeGreaterThanOrEqual(5);
    expect(request.mock.calls.map(([seconds, ok]) => [typeof seconds, ok])).toEqual([
      ['number', false],
      ['number', true],
    ]);
  });

  it('aborts a request that hangs past the timeout, and retries it', async () => {
    handler = (body, res, n) => (n === 1 ? hang(body, res, n) : answer(res, body));
    const retry = retrySpy();
    const vectors = await embedder({ timeoutMs: 200, events: { retry } }).embed(['abcd']);
    expect(vectors).toEqual([expected('abcd')]);
    expect(requests).toHaveLength(2);
    expect(retry.mock.calls[0]?.[0].message).toContain('200 ms');
  });

  it('does not retry a 400, and passes on the service’s message', async () => {
    handler = (_body, res) => send(res, 400, { error: { message: 'input is too long for this model', type: 'invalid_request_error' } });
    const retry = retrySpy();
    const err = await failure(embedder({ events: { retry } }).embed(['a']));
    expect(err.retryable).toBe(false);
    expect(err.status).toBe(400);
    expect(err.message).toContain('HTTP 400: input is too long for this model');
    expect(requests).toHaveLength(1);
    expect(retry).not.toHaveBeenCalled();
  });

  it('gives up after maxRetries on a persistent 503, saying how often it tried', async () => {
    handler = (_body, res) => send(res, 503, 'overloaded');
    const err = await failure(embedder({ maxRetries: 2 }).embed(['a', 'b']));
    expect(requests).toHaveLength(3);
    expect(err.retryable).toBe(true);
    expect(err.status).toBe(503);
    expect(err.message).toContain('after 3 attempts');
    expect(err.message).toContain(url);
    expect(err.message).toContain('"test-embed"');
    expect(err.message).toContain('overloaded');
  });

  it('retries a refused connection, and names its cause', async () => {
    const port = (server.address() as AddressInfo).port;
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    server = createServer().listen(0, '127.0.0.1');
    const err = await failure(embedder({ url: `http://127.0.0.1:${port}/v1/embeddings`, maxRetries: 1 }).embed(['a']));
    expect(err.retryable).toBe(true);
    expect(err.status).toBeNull();
    expect(err.message).toMatch(/after 2 attempts: .*ECONNREFUSED/);
  });

  it('rejects an embedding of the wrong length, without retrying', async () => {
    handler = (body, res) => answer(res, body, (text) => [text.length, 1, 0]);
    const err = await failure(embedder().embed(['a']));
    expect(err.retryable).toBe(false);
    expect(err.message).toContain('3 dimensions, not 4');
    expect(requests).toHaveLength(1);
  });

  const malformed: [what: string, handler: Handler, message: string][] = [
    ['not JSON', (_body, res) => send(res, 200, '<html>gateway</html>'), 'not JSON: <html>gateway</html>'],
    ['no data', (_body, res) => send(res, 200, { object: 'list' }), 'no "data" array'],
    ['too few embeddings', (_body, res) => send(res, 200, { data: [{ index: 0, embedding: [1, 0, 0, 0] }] }), '1 embeddings for 2 inputs'],
    ['a repeated index', (_body, res) => send(res, 200, { data: [0, 0].map((index) => ({ index, embedding: [1, 0, 0, 0] })) }), 'repeated index 0'],
    ['an index out of range', (_body, res) => send(res, 200, { data: [0, 2].map((index) => ({ index, embedding: [1, 0, 0, 0] })) }), 'index 2'],
    ['a non-number', (body, res) => answer(res, body, () => [1, null, 0, 0]), 'holds null'],
    [
      'an infinite number',
      (_body, res) => send(res, 200, `{"data":[{"index":0,"embedding":[1e999,0,0,0]},{"index":1,"embedding":[1,0,0,0]}]}`),
      'holds Infinity',
    ],
  ];

  it.each(malformed)('rejects a response with %s, without retrying', async (_name, respond, message) => {
    handler = respond;
    const err = await failure(embedder().embed(['a', 'b']));
    expect(err.retryable).toBe(false);
    expect(err.message).toContain(message);
    expect(requests).toHaveLength(1);
  });

  it('honours Retry-After: 0 rather than its own backoff', { timeout: 5000 }, async () => {
    handler = (body, res, n) => (n === 1 ? send(res, 429, { error: { message: 'slow down' } }, { 'retry-after': '0' }) : answer(res, body));
    const retry = retrySpy();
    const vectors = await embedder({ retryBaseMs: 60_000, events: { retry } }).embed(['a']);
    expect(vectors).toEqual([expected('a')]);
    expect(retry.mock.calls[0]?.[2]).toBe(0);
  });

  it('stops at once when the caller aborts a request', { timeout: 3000 }, async () => {
    const controller = new AbortController();
    // Aborted once the request has arrived and hangs: a timer could fire before it arrives on a busy machine.
    handler = () => controller.abort();
    const err = await failure(embedder({ timeoutMs: 30_000, maxRetries: 5 }).embed(['a'], controller.signal));
    expect(err.retryable).toBe(false);
    expect(err.message).toContain('cancelled');
    expect(requests).toHaveLength(1);
  });

  it('stops at once when the caller aborts during a backoff', { timeout: 3000 }, async () => {
    handler = (_body, res) => send(res, 503, 'overloaded');
    const controller = new AbortController();
    const retry = retrySpy().mockImplementation(() => controller.abort());
    const err = await failure(embedder({ retryBaseMs: 60_000, maxRetries: 5, events: { retry } }).embed(['a'], controller.signal));
    expect(err.retryable).toBe(false);
    expect(err.message).toContain('cancelled after 1 attempt');
    expect(requests).toHaveLength(1);
  });

  it('keeps the API key out of its messages', async () => {
    handler = (_body, res) => send(res, 401, { error: { message: 'Incorrect API key provided: sk-secret-123.' } });
    const err = await failure(embedder({ apiKey: 'sk-secret-123' }).embed(['a']));
    expect(err.status).toBe(401);
    expect(err.retryable).toBe(false);
    expect(err.message).toContain('Incorrect API key provided');
    expect(err.message).not.toContain('sk-secret-123');
  });

  it('refuses credentials in the URL, without repeating them', () => {
    const make = () => embedder({ url: url.replace('//', '//user:sk-secret-123@') });
    expect(make).toThrow(/must not contain credentials/);
    expect(make).not.toThrow(/sk-secret-123/);
  });
});
