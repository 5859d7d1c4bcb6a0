import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { usePgEngine } from '../fixtures/pg-engine.js';
import { spawnServer } from '../fixtures/server.js';

const ctx = usePgEngine();
const dir = mkdtempSync(join(tmpdir(), 'cotwire-embedder-'));
const DIMENSIONS = 4;

/** An embeddings service in OpenAI's format that counts the texts each instance (its URL's path) asked it for. */
const asked = new Map<string, number>();
const provider = http.createServer((req, res) => {
  let body = '';
  req.on('data', (c: Buffer) => (body += c.toString()));
  req.on('end', () => {
    const { input } = JSON.parse(body) as { input: string[] };
    asked.set(req.url ?? '', (asked.get(req.url ?? '') ?? 0) + input.length);
    const data = input.map((t, index) => ({ index, embedding: Array.from({ length: DIMENSIONS }, (_, i) => (t.charCodeAt(i % t.length) % 7) + i + 1) }));
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ data }));
  });
});
const children: Array<{ kill(signal: NodeJS.Signals): unknown }> = [];
afterAll(() => {
  // An instance a failed assertion left running.
  for (const c of children) c.kill('SIGKILL');
  provider.close();
  rmSync(dir, { recursive: true, force: true });
});

async function until(what: string, check: () => Promise<boolean>, ms = 60_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('embedding on two instances', () => {
  it('asks the provider once per step: the lease holder embeds, and a successor takes over when it stops', async () => {
    await new Promise<void>((r) => provider.listen(0, '127.0.0.1', r));
    const base = `http://127.0.0.1:${(provider.address() as AddressInfo).port}`;
    const instances = [];
    for (const name of ['a', 'b']) {
      const config = join(dir, `${name}.yaml`);
      writeFileSync(config, `embedding:\n  provider: openai\n  url: ${base}/${name}\n  model: fake\n  dimensions: ${DIMENSIONS}\ncheckpoint:\n  sinks: []\n`);
      const instance = await spawnServer(['--config', config, '--engine-url', ctx.engine.url, '--db', join(dir, `${name}.duckdb`)]);
      children.push(instance.child);
      instances.push({ name, ...instance });
    }
    const admin = await ctx.engine.admin();
    const vectors = async (): Promise<number> => ((await admin.query('SELECT count(*)::int FROM public._cot_embeddings')) as [[number]])[0][0];
    const append = async (port: number, from: number, count: number): Promise<void> => {
      const c = new pg.Client({ host: '127.0.0.1', port, user: 'cotwire', database: 'cotwire' });
      await c.connect();
      // Decision steps are always selected for an embedding.
      for (let i = from; i < from + count; i++)
        await c.query("INSERT INTO _cot_steps (session_id, step_type, content) VALUES ('s', 'Decision', $1)", [`decided ${i}`]);
      await c.end();
    };
    // Steps through both instances: one embeds them all.
    await append(instances[0]?.port as number, 0, 20);
    await append(instances[1]?.port as number, 20, 20);
    await until('40 vectors', async () => (await vectors()) === 40);
    const [[holder]] = (await admin.query('SELECT holder FROM cotwire.embedder')) as [[string]];
    const first = instances.find((s) => holder.includes(`:${s.child.pid}:`));
    const second = instances.find((s) => s !== first);
    expect(first, holder).toBeDefined();
    expect(asked.get(`/${first?.name}`)).toBe(40);
    // The holder stops cleanly and gives the lease up; the other embeds what comes next, and nothing twice.
    first?.child.kill('SIGTERM');
    await new Promise((r) => (first?.child.exitCode !== null ? r(null) : first.child.once('exit', r)));
    await append(second?.port as number, 40, 10);
    await until('50 vectors', async () => (await vectors()) === 50);
    expect(Object.fromEntries(asked)).toEqual({ [`/${first?.name}`]: 40, [`/${second?.name}`]: 10 });
    const [[after]] = (await admin.query('SELECT holder FROM cotwire.embedder')) as [[string]];
    expect(after).toContain(`:${second?.child.pid}:`);
    second?.child.kill('SIGTERM');
    await new Promise((r) => (second?.child.exitCode !== null ? r(null) : second.child.once('exit', r)));
  }, 120_000);
});
