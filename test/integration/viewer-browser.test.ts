import { context, trace } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { BasicTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EngineConnection } from '../../src/engine/port.js';
import { startTestServer, type TestServer } from '../fixtures/server.js';

/**
 * The viewer in a real browser: Debian's chromium, driven by playwright-core through its executable path. The
 * spans come from the OpenTelemetry SDK's OTLP exporter; one session is then changed behind the server, through a
 * connection to the engine that the guard never sees.
 */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
let server: TestServer;
let browser: Browser;
let page: Page;
let bypass: EngineConnection;
const base = (): string => `http://127.0.0.1:${server.running.httpAddress?.port}`;

async function sendTurn(conversation: string): Promise<void> {
  const provider = new BasicTracerProvider({ spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter({ url: `${base()}/v1/traces` }))] });
  const tracer = provider.getTracer('agent');
  const agent = tracer.startSpan('invoke_agent Support', {
    attributes: { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'Support', 'gen_ai.conversation.id': conversation },
  });
  const inside = trace.setSpan(context.active(), agent);
  tracer
    .startSpan(
      'chat gpt-4o',
      { attributes: { 'gen_ai.operation.name': 'chat', 'gen_ai.request.model': 'gpt-4o', 'gen_ai.usage.input_tokens': 90, 'gen_ai.usage.output_tokens': 10 } },
      inside,
    )
    .end();
  tracer
    .startSpan(
      'execute_tool lookup_order',
      {
        attributes: {
          'gen_ai.operation.name': 'execute_tool',
          'gen_ai.tool.name': 'lookup_order',
          'gen_ai.tool.call.arguments': '{"id":42}',
          'gen_ai.tool.call.result': '{"status":"shipped"}',
        },
      },
      inside,
    )
    .end();
  agent.setAttribute('gen_ai.output.messages', JSON.stringify([{ role: 'assistant', parts: [{ type: 'text', content: 'Order 42 has shipped.' }] }]));
  agent.end();
  await provider.forceFlush();
  await provider.shutdown();
}

beforeAll(async () => {
  server = await startTestServer();
  await sendTurn('turn-intact');
  await sendTurn('turn-tampered');
  const c = await server.client();
  await c.query(
    `INSERT INTO _cot_steps (session_id, agent_id, step_type, content) VALUES
     ('hostile', 'mallory', 'Observation', '<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2">'),
     ('hostile', 'mallory', 'Decision', 'a secret customer name')`,
  );
  const [secret] = (await c.query("SELECT CAST(trace_id AS text) AS t FROM _cot_steps WHERE session_id = 'hostile' AND step_index = 1")).rows;
  await c.query('SELECT cot_redact($1, $2, $3)', [secret.t, 'content', 'a test of the viewer']);
  await server.running.writer.visible();
  bypass = await server.duckdb.engine.connect();
  await bypass.run("UPDATE _cot_steps SET content = 'a forged answer' WHERE session_id = 'turn-tampered' AND step_index = 2");
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu'] });
  page = await browser.newPage();
  page.on('dialog', (d) => void d.dismiss());
}, 120_000);

afterAll(async () => {
  await browser?.close();
  bypass?.close();
  await server?.[Symbol.asyncDispose]();
});

describe('the viewer, in chromium', () => {
  it('lists the sessions with their agent, steps and chain status', async () => {
    await page.goto(`${base()}/`);
    const row = (session: string) => page.locator('table.sessions tbody tr', { has: page.locator(`a.session:text-is("${session}")`) });
    await expect.poll(() => row('turn-intact').count()).toBe(1);
    expect(await row('turn-intact').locator('td').nth(1).textContent()).toBe('Support');
    expect(await row('turn-intact').locator('td').nth(4).textContent()).toBe('3');
    expect(await row('turn-intact').locator('td').nth(5).textContent()).toContain('✓ intact');
    expect(await row('turn-tampered').locator('td').nth(5).textContent()).toContain('✗ broken at step');
    // Filtered by agent, only that agent's sessions are left.
    await page.fill('input[name=agent]', 'mallory');
    await page.click('button[type=submit]');
    await page.waitForURL(/agent=mallory/);
    expect(await page.locator('a.session').allTextContents()).toEqual(['hostile']);
  });

  it('searches steps by meaning, and links each hit to its session', async () => {
    // The agent turns' answers (FinalAnswer) are always embedded; wait until the background embedder has done them.
    const c = await server.client();
    await expect
      .poll(async () => Number((await c.query('SELECT count(*) AS n FROM cot_search($1, 5)', ['order shipped'])).rows[0].n), { timeout: 30_000, interval: 100 })
      .toBeGreaterThan(0);
    await page.goto(`${base()}/`);
    await page.fill('input[name=q]', 'has the order shipped');
    await page.click('button[type=submit]');
    await page.waitForURL(/q=has/);
    const hits = page.locator('section.hits tbody tr');
    expect(await hits.count()).toBeGreaterThan(0);
    const sessions = await hits.locator('td:nth-child(2) a').allTextContents();
    expect(sessions.some((x) => x.startsWith('turn-'))).toBe(true);
  });

  it('follows a session to its steps, its tool call and a verified mark on each', async () => {
    await page.goto(`${base()}/`);
    await page.click('a.session:text-is("turn-intact")');
    await page.waitForURL(/\/sessions\/turn-intact$/);
    const steps = page.locator('article.step');
    expect(await steps.count()).toBe(3);
    expect(await page.locator('.step-mark[data-mark=verified]').count()).toBe(3);
    const tool = page.locator('article.step[data-step-type=ToolCall]');
    expect(await tool.locator('.content').textContent()).toBe('lookup_order: {"status":"shipped"}');
    expect(await tool.locator('details', { hasText: 'tool call' }).locator('pre').textContent()).toContain('"tool": "lookup_order"');
    expect(await page.locator('article.step[data-step-type=Reasoning] .meta').textContent()).toContain('100 tokens');
    // As a tree, the model call and the tool call are under the agent turn.
    await page.click('a:text-is("tree")');
    await page.waitForURL(/view=tree/);
    const nested = page.locator('ul.tree.root > li > ul.tree > li > article.step');
    expect(await nested.evaluateAll((els) => els.map((e) => e.getAttribute('data-step-type')))).toEqual(['Reasoning', 'ToolCall']);
  });

  it('marks the step changed behind the server as broken', async () => {
    await page.goto(`${base()}/sessions/turn-tampered`);
    expect(await page.locator('main > p').first().textContent()).toContain('✗ broken at step');
    const marks = await page.locator('.step-mark').evaluateAll((els) => els.map((e) => e.getAttribute('data-mark')));
    expect(marks).toContain('broken');
    expect(marks.indexOf('broken')).toBe(marks.filter((m) => m === 'verified').length);
  });

  it('shows a step of hostile text as text, and a redacted value as redacted', async () => {
    await page.goto(`${base()}/sessions/hostile`);
    expect(await page.locator('article.step').first().locator('.content').textContent()).toContain('<script>window.pwned = 1</script>');
    expect(await page.evaluate(() => (globalThis as unknown as { pwned?: number }).pwned)).toBeUndefined();
    const redacted = page.locator('article.step').nth(1).locator('.content .redacted');
    expect(await redacted.textContent()).toBe('redacted');
    // Redaction keeps the chain whole.
    expect(await page.locator('.step-mark[data-mark=verified]').count()).toBe(2);
  });
});
