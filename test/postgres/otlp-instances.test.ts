import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { context, trace } from '@opentelemetry/api';
import { ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { usePgEngine } from '../fixtures/pg-engine.js';
import { spawnServer } from '../fixtures/server.js';

/**
 * docs/ingest.md, "Exactly once": two cotwire instances on one PostgreSQL engine take the same OTLP export, sent to
 * both at once and again (as exporters retry, to whichever instance the load balancer picks). Each session's spans are
 * taken under an advisory lock that both instances share, so the session holds each span once and its chain verifies.
 */

const ctx = usePgEngine();
const dir = mkdtempSync(join(tmpdir(), 'cotwire-otlp-instances-'));
const children: ChildProcess[] = [];
const clients: pg.Client[] = [];
afterAll(async () => {
  await Promise.all(clients.map((c) => c.end().catch(() => undefined)));
  await Promise.all(
    children.map(
      (child) =>
        new Promise((resolve) => {
          if (child.exitCode !== null || child.signalCode !== null) return resolve(null);
          child.once('exit', resolve);
          child.kill('SIGTERM');
        }),
    ),
  );
  rmSync(dir, { recursive: true, force: true });
});

interface Export {
  readonly conversation: string;
  readonly body: Uint8Array;
  readonly spanIds: readonly string[];
  readonly agentSpanId: string;
}

/** One agent turn as the GenAI conventions describe it: invoke_agent, and inside it model calls and tool calls. */
async function exportOf(conversationId: string): Promise<Export> {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': 'support-agent' }),
    spanProcessors: [new SimpleSpanProcessor(exporter)],
  });
  const tracer = provider.getTracer('agent-framework', '1.0.0');
  const t0 = Date.now();
  const conversation = { 'gen_ai.conversation.id': conversationId };
  const agent = tracer.startSpan('invoke_agent Support', {
    startTime: t0,
    attributes: { ...conversation, 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'Support' },
  });
  const inside = trace.setSpan(context.active(), agent);
  const child = (name: string, from: number, to: number, attributes: Record<string, string | number>): void => {
    tracer.startSpan(name, { startTime: t0 + from, attributes: { ...conversation, ...attributes } }, inside).end(t0 + to);
  };
  child('chat gpt-4o', 10, 200, {
    'gen_ai.operation.name': 'chat',
    'gen_ai.request.model': 'gpt-4o',
    'gen_ai.usage.input_tokens': 120,
    'gen_ai.usage.output_tokens': 30,
    'gen_ai.output.messages': JSON.stringify([
      { role: 'assistant', parts: [{ type: 'tool_call', id: 'call_1', name: 'lookup_order', arguments: { id: 42 } }] },
    ]),
  });
  child('execute_tool lookup_order', 210, 260, {
    'gen_ai.operation.name': 'execute_tool',
    'gen_ai.tool.name': 'lookup_order',
    'gen_ai.tool.call.id': 'call_1',
    'gen_ai.tool.call.arguments': '{"id":42}',
    'gen_ai.tool.call.result': '{"status":"shipped"}',
  });
  child('execute_tool lookup_customer', 270, 300, {
    'gen_ai.operation.name': 'execute_tool',
    'gen_ai.tool.name': 'lookup_customer',
    'gen_ai.tool.call.id': 'call_2',
    'gen_ai.tool.call.result': '{"name":"Ada"}',
  });
  child('chat gpt-4o', 310, 400, {
    'gen_ai.operation.name': 'chat',
    'gen_ai.request.model': 'gpt-4o',
    'gen_ai.usage.input_tokens': 160,
    'gen_ai.usage.output_tokens': 12,
    'gen_ai.output.messages': JSON.stringify([{ role: 'assistant', parts: [{ type: 'text', content: 'Order 42 has shipped.' }] }]),
  });
  agent.setAttribute('gen_ai.output.messages', JSON.stringify([{ role: 'assistant', parts: [{ type: 'text', content: 'Order 42 has shipped.' }] }]));
  agent.end(t0 + 410);
  await provider.forceFlush();
  const spans = exporter.getFinishedSpans();
  const body = ProtobufTraceSerializer.serializeRequest(spans);
  if (body === undefined) throw new Error('the serializer wrote nothing');
  await provider.shutdown();
  return { conversation: conversationId, body, spanIds: spans.map((s) => s.spanContext().spanId), agentSpanId: agent.spanContext().spanId };
}

async function post(httpPort: number, body: Uint8Array): Promise<{ status: number; rejected: number; error: string }> {
  const res = await fetch(`http://127.0.0.1:${httpPort}/v1/traces`, { method: 'POST', body, headers: { 'content-type': 'application/x-protobuf' } });
  const answer = Buffer.from(await res.arrayBuffer());
  if (res.status !== 200) return { status: res.status, rejected: -1, error: answer.toString('utf8') };
  const partial = ProtobufTraceSerializer.deserializeResponse(answer).partialSuccess;
  return { status: res.status, rejected: Number(partial?.rejectedSpans ?? 0), error: partial?.errorMessage ?? '' };
}

describe('two cotwire instances on one PostgreSQL, taking the same OTLP export', () => {
  it('append each span once, however many times and through whichever instance it is sent, and the chain verifies', async () => {
    const instances: Array<{ port: number; httpPort: number }> = [];
    for (let i = 0; i < 2; i++) {
      const s = await spawnServer(['--engine-url', ctx.engine.url, '--db', join(dir, `i${i}.duckdb`)]);
      children.push(s.child);
      if (s.httpPort === undefined) throw new Error(`instance ${i} did not say its HTTP port: ${s.out()}`);
      instances.push({ port: s.port, httpPort: s.httpPort });
    }
    const exports: Export[] = [];
    for (let turn = 0; turn < 3; turn++) exports.push(await exportOf(`conv-${process.pid}-${Date.now()}-${turn}`));
    for (const e of exports) expect(e.spanIds).toHaveLength(5);

    // Each turn's export, five times to each instance at once: every copy races for the session's lock.
    const everywhere = (body: Uint8Array): Array<Promise<Awaited<ReturnType<typeof post>>>> =>
      instances.flatMap((s) => Array.from({ length: 5 }, () => post(s.httpPort, body)));
    const ok = (n: number): Array<Awaited<ReturnType<typeof post>>> => Array.from({ length: n }, () => ({ status: 200, rejected: 0, error: '' }));
    for (const [turn, e] of exports.entries()) expect(await Promise.all(everywhere(e.body)), `turn ${turn}`).toEqual(ok(10));
    // Then all three again at once: every request a retry of a batch already appended.
    expect(await Promise.all(exports.flatMap((e) => everywhere(e.body))), 'retries').toEqual(ok(30));

    for (const [i, s] of instances.entries()) {
      const c = new pg.Client({ host: '127.0.0.1', port: s.port, user: 'cotwire', database: 'cotwire' });
      c.on('error', () => undefined);
      await c.connect();
      clients.push(c);
      for (const e of exports) {
        const at = `instance ${i}, session ${e.conversation}`;
        const counts = await c.query(
          `SELECT count(*)::int AS steps, count(DISTINCT metadata->'otel'->>'span_id')::int AS spans, count(DISTINCT step_index)::int AS indexes
           FROM _cot_steps WHERE session_id = $1`,
          [e.conversation],
        );
        expect(counts.rows[0], at).toEqual({ steps: e.spanIds.length, spans: e.spanIds.length, indexes: e.spanIds.length });
        const tree = await c.query(
          `SELECT metadata->'otel'->>'span_id' AS span, CAST(trace_id AS text) AS step, CAST(parent_trace_id AS text) AS parent
           FROM _cot_steps WHERE session_id = $1`,
          [e.conversation],
        );
        const rows = tree.rows as Array<{ span: string; step: string; parent: string | null }>;
        expect(rows.map((r) => r.span).sort(), at).toEqual([...e.spanIds].sort());
        // Every step inside the agent names the agent's step as its parent.
        const agentStep = rows.find((r) => r.span === e.agentSpanId);
        expect(agentStep?.parent, at).toBeNull();
        expect(
          rows.filter((r) => r.span !== e.agentSpanId).map((r) => r.parent),
          at,
        ).toEqual(Array.from({ length: e.spanIds.length - 1 }, () => agentStep?.step));
        const verified = await c.query('SELECT valid FROM cot_verify($1)', [e.conversation]);
        expect(verified.rows, at).toEqual([{ valid: true }]);
      }
    }
  }, 120_000);
});
