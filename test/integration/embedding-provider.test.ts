import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import { DEFAULTS, type Config } from '../../src/config/schema.js';
import { createLogger } from '../../src/log/logger.js';
import { startServer, type RunningServer } from '../../src/engines/duckdb/start.js';

const DIMENSIONS = 8;

/** A deterministic vector per text: a service's "model". */
function vectorOf(text: string): number[] {
  const h = createHash('sha256').update(text).digest();
  return Array.from({ length: DIMENSIONS }, (_, i) => (h[i] as number) - 127.5);
}

/**
 * An embeddings service speaking OpenAI's format, whose next answers the
 * test scripts: 'ok', a 500, 'hang' (never answers), or 'down' (503 until
 * told otherwise).
 */
class FakeProvider {
  readonly server = http.createServer((req, res) => void this.handle(req, res));
  readonly batches: string[][] = [];
  readonly script: Array<'500' | 'hang'> = [];
  down = false;
  /** Texts answered with a 400, as a service refuses an input it cannot take. */
  readonly refused = new Set<string>();
  /** Every request answered with a 401, as for a wrong key. */
  unauthorized = false;
  requests = 0;
  authorization: string | undefined;

  async listen(): Promise<string> {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/v1/embeddings`;
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    let body = '';
    for await (const chunk of req) body += chunk;
    this.requests++;
    this.authorization = req.headers.authorization;
    const next = this.script.shift();
    if (next === 'hang') return;
    if (next === '500' || this.down) {
      res.writeHead(next === '500' ? 500 : 503, { 'content-type': 'application/json' }).end('{"error":{"message":"model is loading"}}');
      return;
    }
    const { input, model } = JSON.parse(body) as { input: string[]; model: string };
    if (this.unauthorized || input.some((t) => this.refused.has(t))) {
      const status = this.unauthorized ? 401 : 400;
      res.writeHead(status, { 'content-type': 'application/json' }).end(`{"error":{"message":"${status === 401 ? 'invalid api key' : 'input too long'}"}}`);
      return;
    }
    this.batches.push(input);
    res
      .writeHead(200, { 'content-type': 'application/json' })
      .end(JSON.stringify({ object: 'list', model, data: input.map((t, index) => ({ object: 'embedding', index, embedding: vectorOf(t) })) }));
  }
}

describe('background embedding through an OpenAI-compatible service', () => {
  const provider = new FakeProvider();
  let url = '';
  let dir = '';
  beforeAll(async () => {
    url = await provider.listen();
    dir = mkdtempSync(join(tmpdir(), 'cotwire-embed-'));
  });
  afterAll(() => {
    provider.server.closeAllConnections();
    provider.server.close();
    rmSync(dir, { recursive: true, force: true });
  });

  async function start(): Promise<{ running: RunningServer; client: pg.Client; metrics: () => Promise<string>; [Symbol.asyncDispose](): Promise<void> }> {
    const base = loadConfig({
      argv: { port: '0', 'http-port': '0', db: join(dir, 'embed.duckdb'), 'log-level': 'silent', 'metrics-port': '0' },
      env: { COTWIRE_EMBEDDING_API_KEY: 'sk-test' },
    });
    const config = {
      ...base,
      ledger: { ...DEFAULTS.ledger, embeddingSampleRate: 0 },
      embedding: { ...base.embedding, provider: 'openai', url, model: 'fake-embed', dimensions: DIMENSIONS, batchSize: 4, timeoutMs: 300, maxRetries: 3 },
    } as Config;
    const running = await startServer(config, createLogger('silent', false));
    const client = new pg.Client({ host: '127.0.0.1', port: running.address.port, user: 'cotwire', database: 'cotwire' });
    await client.connect();
    const metricsUrl = `http://127.0.0.1:${running.httpAddress?.port}`;
    return {
      running,
      client,
      metrics: async () => (await fetch(`${metricsUrl}/metrics`)).text(),
      async [Symbol.asyncDispose]() {
        await client.end();
        await running.close();
      },
    };
  }

  const append = (c: pg.Client, n: number, from: number) =>
    (async () => {
      for (let i = from; i < from + n; i++)
        await c.query("INSERT INTO _cot_steps (session_id, step_type, content) VALUES ('s', 'Decision', $1)", [`decision ${i}`]);
    })();

  async function vectors(c: pg.Client, n: number): Promise<void> {
    for (let i = 0; i < 300; i++) {
      if ((await c.query('SELECT count(*)::int AS n FROM _cot_embeddings')).rows[0].n >= n) return;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`fewer than ${n} vectors`);
  }

  it('embeds in batches, retries a 500 and a request that times out, and sends the API key', async () => {
    await using s = await start();
    provider.script.push('500', 'hang');
    await append(s.client, 10, 0);
    await vectors(s.client, 10);
    // Each stored vector is the service's, normalised; every batch held at most four texts.
    expect(provider.batches.every((b) => b.length <= 4)).toBe(true);
    expect(provider.batches.flat().sort()).toEqual(Array.from({ length: 10 }, (_, i) => `decision ${i}`).sort());
    const { rows } = await s.client.query(
      "SELECT s.content, e.vector, e.model, e.dimensions FROM _cot_embeddings e JOIN _cot_steps s USING (trace_id) WHERE s.content = 'decision 3'",
    );
    const expected = vectorOf('decision 3');
    const norm = Math.hypot(...expected);
    expect(rows[0].model).toBe('fake-embed');
    expect(rows[0].dimensions).toBe(DIMENSIONS);
    // float4[] on the wire, which node-postgres parses.
    const stored = rows[0].vector as number[];
    expect(stored).toHaveLength(DIMENSIONS);
    for (const [i, x] of stored.entries()) expect(x).toBeCloseTo((expected[i] as number) / norm, 5);
    expect(provider.authorization).toBe('Bearer sk-test');
    const metrics = await s.metrics();
    expect(metrics).toMatch(/cotwire_embedding_errors_total\{kind="retry"\} [2-9]/);
    expect(metrics).toMatch(/cotwire_embedded_steps_total 10/);
    expect(
      metrics,
      metrics
        .split('\n')
        .filter((l) => l.includes('embedding'))
        .join('\n'),
    ).toMatch(/cotwire_embedding_queue_depth 0/);
    // The search text goes to the same service.
    const found = await s.client.query("SELECT content, similarity FROM cot_search('decision 7', 1)");
    expect(found.rows[0].content).toBe('decision 7');
    expect(Number(found.rows[0].similarity)).toBeCloseTo(1, 5);
  });

  it('loses nothing queued when the server stops while the service is down, and appends never wait for it', async () => {
    provider.down = true;
    {
      await using s = await start();
      const before = provider.requests;
      await append(s.client, 6, 100);
      // The service is tried and fails; appends and reads go on, /healthz stays healthy.
      for (let i = 0; i < 100 && provider.requests === before; i++) await new Promise((r) => setTimeout(r, 20));
      expect(provider.requests).toBeGreaterThan(before);
      const health = await fetch(`http://127.0.0.1:${s.running.httpAddress?.port}/healthz`);
      expect(health.status).toBe(200);
      expect((await s.client.query("SELECT count(*)::int AS n FROM _cot_steps WHERE content LIKE 'decision 1__'")).rows[0].n).toBe(6);
      expect(s.running.embeddings?.queueDepth).toBeGreaterThanOrEqual(6);
      expect(await s.metrics()).toMatch(/cotwire_embedding_queue_depth [6-9]/);
      // A search needs the service: a clear error with its SQLSTATE, and the connection goes on.
      await expect(s.client.query("SELECT * FROM cot_search('decision', 3)")).rejects.toMatchObject({
        code: '58000',
        message: expect.stringMatching(/^the embedding provider could not embed the search text: .*503/),
      });
      await expect(s.client.query('SELECT * FROM cot_search($1, 3)', ['decision 2'])).rejects.toMatchObject({ code: '58000' });
      expect((await s.client.query('SELECT 1 AS one')).rows[0].one).toBe(1);
    }
    // Restarted with the service back: the queue is recomputed from the steps without a vector.
    provider.down = false;
    await using s = await start();
    await vectors(s.client, 16);
    const { rows } = await s.client.query(
      'SELECT count(*)::int AS n, count(DISTINCT trace_id)::int AS steps FROM _cot_embeddings e WHERE trace_id IN (SELECT trace_id FROM _cot_steps WHERE has_embedding)',
    );
    expect(rows[0]).toEqual({ n: 16, steps: 16 });
  });

  it('skips only the step a service refuses, and keeps the queue when the service refuses everything (a wrong key)', async () => {
    await using s = await start();
    const base = (await s.client.query('SELECT count(*)::int AS n FROM _cot_embeddings')).rows[0].n as number;
    provider.refused.add('decision 303');
    await append(s.client, 6, 300);
    await vectors(s.client, base + 5);
    const { rows } = await s.client.query(
      "SELECT s.content FROM _cot_steps s ANTI JOIN _cot_embeddings e USING (trace_id) WHERE s.content LIKE 'decision 3__'",
    );
    expect(rows).toEqual([{ content: 'decision 303' }]);
    expect(await s.metrics()).toMatch(/cotwire_embedding_errors_total\{kind="rejected"\} 1/);
    // A 401 is no step's fault: nothing is skipped, the steps wait.
    provider.unauthorized = true;
    const before = provider.requests;
    await append(s.client, 2, 310);
    for (let i = 0; i < 100 && provider.requests === before; i++) await new Promise((r) => setTimeout(r, 20));
    expect(provider.requests).toBeGreaterThan(before);
    expect(await s.metrics()).toMatch(/cotwire_embedding_errors_total\{kind="rejected"\} 1/);
    expect(s.running.embeddings?.queueDepth).toBe(2);
    provider.unauthorized = false;
    provider.refused.clear();
  });

  it('cotwire reembed rebuilds the vectors with another model, and a server configured for the old one says so', async () => {
    const db = join(dir, 'embed.duckdb');
    const reembed = await run(process.execPath, [CLI, 'reembed', '--db', db, '--provider', 'builtin', '--dimensions', '64']);
    expect(reembed.stdout).toMatch(/^dropping the vectors of fake-embed \(8 dimensions\)\nOK: 24 steps embedded with cotwire-hashed-v1 \(64 dimensions\)/);
    // Run again: nothing is missing, nothing is embedded twice.
    expect((await run(process.execPath, [CLI, 'reembed', '--db', db, '--provider', 'builtin', '--dimensions', '64'])).stdout).toMatch(/^OK: 0 steps embedded/);
    {
      await using s = await start();
      // The vectors are another model's: search refuses with the way out, appends go on.
      await expect(s.client.query("SELECT * FROM cot_search('decision', 3)")).rejects.toMatchObject({
        code: '55000',
        message: expect.stringMatching(
          /holds vectors of cotwire-hashed-v1 \(64 dimensions\), and the configuration asks for fake-embed \(8 dimensions\); run `cotwire reembed --model fake-embed`/,
        ),
      });
      await append(s.client, 1, 200);
      expect(s.running.embeddings).toBeNull();
    }
    const base = loadConfig({ argv: { port: '0', 'http-port': '0', db, 'log-level': 'silent' }, env: {} });
    const running = await startServer({ ...base, embedding: { ...base.embedding, dimensions: 64 } } as Config, createLogger('silent', false));
    try {
      const c = new pg.Client({ host: '127.0.0.1', port: running.address.port, user: 'cotwire', database: 'cotwire' });
      await c.connect();
      await vectors(c, 25);
      const { rows } = await c.query("SELECT content FROM cot_search('decision 104', 1)");
      expect(rows).toEqual([{ content: 'decision 104' }]);
      await c.end();
    } finally {
      await running.close();
    }
  });
});

const CLI = join(import.meta.dirname, '../../dist/cli.js');
const run = promisify(execFile);
