import { gzipSync } from 'node:zlib';
import { context, SpanStatusCode, trace, type Span, type Tracer } from '@opentelemetry/api';
import { OTLPTraceExporter as JsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as ProtoExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, BatchSpanProcessor, type ReadableSpan, SimpleSpanProcessor, type SpanExporter } from '@opentelemetry/sdk-trace-base';
import { describe, expect, it } from 'vitest';
import { chainProblems, chainOf, countOf, useConformanceServer } from '../fixtures/conformance.js';

/**
 * OpenTelemetry spans into the ledger, sent by the OpenTelemetry SDK's own OTLP exporters to the HTTP listener,
 * and read back over the wire.
 */
const s = useConformanceServer();
const url = (): string => `http://127.0.0.1:${s.server.running.httpAddress?.port}/v1/traces`;

/**
 * A tracer whose spans go to the listener through `exporter`: in batches, as every SDK's default setup sends them,
 * or one export per span as it ends.
 */
function tracerWith(exporter: SpanExporter, processor: 'batch' | 'simple' = 'batch'): { tracer: Tracer; provider: BasicTracerProvider } {
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': 'support-agent' }),
    spanProcessors: [processor === 'batch' ? new BatchSpanProcessor(exporter) : new SimpleSpanProcessor(exporter)],
  });
  return { tracer: provider.getTracer('agent-framework', '1.0.0'), provider };
}

/** An agent's turn as the GenAI conventions describe it: invoke_agent, a model call that asks for a tool, the tool, the answer. */
function agentTurn(
  tracer: Tracer,
  conversation: string,
  t0: number,
  conversationOnEverySpan = false,
  times: { readonly firstCall?: number; readonly tool?: readonly [number, number]; readonly secondCall?: number } = {},
): void {
  const at = (ms: number): number => t0 + ms;
  const agent = tracer.startSpan('invoke_agent Support', {
    startTime: at(0),
    attributes: {
      'gen_ai.operation.name': 'invoke_agent',
      'gen_ai.agent.name': 'Support',
      'gen_ai.conversation.id': conversation,
      'gen_ai.provider.name': 'openai',
    },
  });
  const inside = trace.setSpan(context.active(), agent);
  // Each span ends, and is exported by a simple processor, before the agent's: only what it carries names the conversation.
  const named = conversationOnEverySpan ? { 'gen_ai.conversation.id': conversation } : {};
  const chat1 = tracer.startSpan(
    'chat gpt-4o',
    {
      startTime: at(times.firstCall ?? 10),
      attributes: {
        ...named,
        'gen_ai.operation.name': 'chat',
        'gen_ai.request.model': 'gpt-4o',
        'gen_ai.response.model': 'gpt-4o-2024-08-06',
        'gen_ai.usage.input_tokens': 120,
        'gen_ai.usage.output_tokens': 30,
        'gen_ai.input.messages': JSON.stringify([{ role: 'user', parts: [{ type: 'text', content: 'Where is order 42?' }] }]),
        'gen_ai.output.messages': JSON.stringify([
          { role: 'assistant', parts: [{ type: 'tool_call', id: 'call_1', name: 'lookup_order', arguments: { id: 42 } }], finish_reason: 'tool_call' },
        ]),
      },
    },
    inside,
  );
  chat1.end(at(200));
  const tool = tracer.startSpan(
    'execute_tool lookup_order',
    {
      startTime: at(times.tool?.[0] ?? 210),
      attributes: {
        ...named,
        'gen_ai.operation.name': 'execute_tool',
        'gen_ai.tool.name': 'lookup_order',
        'gen_ai.tool.call.id': 'call_1',
        'gen_ai.tool.call.arguments': '{"id":42}',
        'gen_ai.tool.call.result': '{"status":"shipped"}',
        'custom.attribute': 'kept',
      },
    },
    inside,
  );
  tool.end(at(times.tool?.[1] ?? 260));
  const chat2 = tracer.startSpan(
    'chat gpt-4o',
    {
      startTime: at(times.secondCall ?? 270),
      attributes: {
        ...named,
        'gen_ai.operation.name': 'chat',
        'gen_ai.request.model': 'gpt-4o',
        'gen_ai.usage.input_tokens': 160,
        'gen_ai.usage.output_tokens': 12,
        'gen_ai.output.messages': JSON.stringify([{ role: 'assistant', parts: [{ type: 'text', content: 'Order 42 has shipped.' }], finish_reason: 'stop' }]),
      },
    },
    inside,
  );
  chat2.end(at(400));
  agent.setAttribute('gen_ai.output.messages', JSON.stringify([{ role: 'assistant', parts: [{ type: 'text', content: 'Order 42 has shipped.' }] }]));
  agent.end(at(410));
}

interface StepRow {
  step_index: number;
  step_type: string;
  agent_id: string | null;
  content: string;
  model: string | null;
  token_count: number | null;
  duration_ms: string | null;
  input_data: unknown;
  output_data: unknown;
  metadata: { otel: { span_id: string; parent_span_id?: string; name: string; attributes?: Record<string, unknown> } };
  trace_id: string;
  parent_trace_id: string | null;
}

async function stepsOf(session: string): Promise<StepRow[]> {
  const c = await s.as();
  const r = await c.query(
    `SELECT step_index, step_type, agent_id, content, model, token_count, duration_ms, input_data, output_data, metadata, CAST(trace_id AS text) AS trace_id,
            CAST(parent_trace_id AS text) AS parent_trace_id
     FROM _cot_steps WHERE session_id = $1 ORDER BY step_index`,
    [session],
  );
  return r.rows.map((row: Record<string, unknown>) => ({
    ...row,
    input_data: typeof row['input_data'] === 'string' ? JSON.parse(row['input_data']) : row['input_data'],
    output_data: typeof row['output_data'] === 'string' ? JSON.parse(row['output_data']) : row['output_data'],
    metadata: typeof row['metadata'] === 'string' ? JSON.parse(row['metadata']) : row['metadata'],
  })) as StepRow[];
}

/** The spans of one finished turn, as the SDK hands them to an exporter. */
async function capturedTurn(conversation: string): Promise<ReadableSpan[]> {
  const spans: ReadableSpan[] = [];
  const { tracer, provider } = tracerWith({
    export: (batch, done) => {
      spans.push(...batch);
      done({ code: 0 });
    },
    shutdown: async () => undefined,
  });
  agentTurn(tracer, conversation, Date.now());
  await provider.forceFlush();
  return spans;
}

async function post(body: Uint8Array | string, headers: Record<string, string>): Promise<{ status: number; body: Buffer; type: string | null }> {
  const res = await fetch(url(), { method: 'POST', body, headers });
  return { status: res.status, body: Buffer.from(await res.arrayBuffer()), type: res.headers.get('content-type') };
}

describe('OTLP/HTTP at /v1/traces', () => {
  it('lands an agent turn sent by the OTLP protobuf exporter as chained steps, in the order the spans started', async () => {
    const { tracer, provider } = tracerWith(new ProtoExporter({ url: url() }));
    agentTurn(tracer, 'conv-proto', Date.now());
    await provider.forceFlush();
    await provider.shutdown();

    const steps = await stepsOf('conv-proto');
    expect(steps.map((r) => [r.step_type, r.metadata.otel.name])).toEqual([
      ['FinalAnswer', 'invoke_agent Support'],
      ['Reasoning', 'chat gpt-4o'],
      ['ToolCall', 'execute_tool lookup_order'],
      ['Reasoning', 'chat gpt-4o'],
    ]);
    const [agent, chat1, tool, chat2] = steps as [StepRow, StepRow, StepRow, StepRow];
    expect(chainProblems(await chainOf(await s.as(), 'conv-proto'))).toEqual([]);
    // Every step names the agent, which only the agent span carries; the children are under the agent's step.
    expect(steps.map((r) => r.agent_id)).toEqual(['Support', 'Support', 'Support', 'Support']);
    expect([chat1.parent_trace_id, tool.parent_trace_id, chat2.parent_trace_id]).toEqual([agent.trace_id, agent.trace_id, agent.trace_id]);
    expect(agent.parent_trace_id).toBeNull();
    expect(agent.content).toBe('Order 42 has shipped.');
    expect(chat1).toMatchObject({ model: 'gpt-4o-2024-08-06', token_count: 150, content: 'calls lookup_order' });
    expect(Number(chat1.duration_ms)).toBe(190);
    expect(chat1.input_data).toEqual({ messages: [{ role: 'user', parts: [{ type: 'text', content: 'Where is order 42?' }] }] });
    expect(tool).toMatchObject({
      content: 'lookup_order: {"status":"shipped"}',
      input_data: { tool: 'lookup_order', call_id: 'call_1', arguments: { id: 42 } },
      output_data: { result: { status: 'shipped' } },
    });
    // What no column takes stays in metadata, with the span's own ids.
    expect(tool.metadata.otel.attributes).toEqual({ 'custom.attribute': 'kept' });
    expect(tool.metadata.otel.span_id).toMatch(/^[0-9a-f]{16}$/);
    expect(chat2.content).toBe('Order 42 has shipped.');
    const c = await s.as();
    expect((await c.query("SELECT valid, step_count FROM cot_verify('conv-proto')")).rows).toEqual([{ valid: true, step_count: '4' }]);
  });

  it('puts the span that holds another first when both start at the same instant, whatever order they ended in', async () => {
    // A clock's tick can hold an agent's run and its first model call (the SDK stamps spans in milliseconds).
    const { tracer, provider } = tracerWith(new ProtoExporter({ url: url() }));
    agentTurn(tracer, 'conv-tie', Date.now(), false, { firstCall: 0 });
    await provider.forceFlush();
    await provider.shutdown();
    const steps = await stepsOf('conv-tie');
    expect(steps.map((r) => r.step_type)).toEqual(['FinalAnswer', 'Reasoning', 'ToolCall', 'Reasoning']);
    const [agent, chat1] = steps as [StepRow, StepRow];
    expect(chat1.parent_trace_id).toBe(agent.trace_id);
    expect(chainProblems(await chainOf(await s.as(), 'conv-tie'))).toEqual([]);
  });

  it('puts a tool call that ended within the millisecond it started before the model call stamped with the same start', async () => {
    // The model call that reads the tool's result begins as the tool ends, within one tick of a millisecond clock.
    const { tracer, provider } = tracerWith(new ProtoExporter({ url: url() }));
    agentTurn(tracer, 'conv-tie-tool', Date.now(), false, { tool: [210, 210.06], secondCall: 210 });
    await provider.forceFlush();
    await provider.shutdown();
    const steps = await stepsOf('conv-tie-tool');
    expect(steps.map((r) => r.step_type)).toEqual(['FinalAnswer', 'Reasoning', 'ToolCall', 'Reasoning']);
    expect(chainProblems(await chainOf(await s.as(), 'conv-tie-tool'))).toEqual([]);
  });

  it('puts the longer of two unrelated spans of a millisecond or more first when they share a start', async () => {
    // An SDK run traced with no context manager: the run and its first model call are roots of traces of their own.
    const { tracer, provider } = tracerWith(new ProtoExporter({ url: url() }));
    const t0 = Date.now();
    const conversation = { 'gen_ai.conversation.id': 'conv-tie-flat' };
    const run = tracer.startSpan('invoke_agent Support', { startTime: t0, attributes: { ...conversation, 'gen_ai.operation.name': 'invoke_agent' } });
    const call = tracer.startSpan('chat gpt-4o', { startTime: t0, attributes: { ...conversation, 'gen_ai.operation.name': 'chat' } });
    call.end(t0 + 6.8);
    run.end(t0 + 10.7);
    await provider.forceFlush();
    await provider.shutdown();
    const steps = await stepsOf('conv-tie-flat');
    expect(steps.map((r) => r.step_type)).toEqual(['Action', 'Reasoning']);
    expect(steps.map((r) => r.parent_trace_id)).toEqual([null, null]);
  });

  it('lands the same turn sent by the OTLP JSON exporter', async () => {
    const { tracer, provider } = tracerWith(new JsonExporter({ url: url() }));
    agentTurn(tracer, 'conv-json', Date.now());
    await provider.forceFlush();
    await provider.shutdown();
    const steps = await stepsOf('conv-json');
    expect(steps.map((r) => r.step_type)).toEqual(['FinalAnswer', 'Reasoning', 'ToolCall', 'Reasoning']);
    expect(steps[2]?.input_data).toEqual({ tool: 'lookup_order', call_id: 'call_1', arguments: { id: 42 } });
    expect(chainProblems(await chainOf(await s.as(), 'conv-json'))).toEqual([]);
  });

  it('files spans exported one at a time under the conversation each names, the tree kept in metadata when a child comes before its parent', async () => {
    const { tracer, provider } = tracerWith(new ProtoExporter({ url: url() }), 'simple');
    agentTurn(tracer, 'conv-simple', Date.now(), true);
    await provider.forceFlush();
    await provider.shutdown();
    const steps = await stepsOf('conv-simple');
    // In the order the exports arrived (each span's own request, sent as it ended): the agent's ends last.
    expect(steps.map((r) => r.step_type).sort()).toEqual(['FinalAnswer', 'Reasoning', 'Reasoning', 'ToolCall']);
    const agent = steps.find((r) => r.step_type === 'FinalAnswer') as StepRow;
    const children = steps.filter((r) => r !== agent);
    // A child appended before its parent cannot name the parent's step: its span's parent stays in metadata.
    for (const child of children) {
      expect(child.metadata.otel.parent_span_id).toBe(agent.metadata.otel.span_id);
      expect(child.parent_trace_id).toBe(child.step_index < agent.step_index ? null : agent.trace_id);
    }
    expect(chainProblems(await chainOf(await s.as(), 'conv-simple'))).toEqual([]);
  });

  it('appends nothing for a retried export, even when the retries arrive together', async () => {
    const body = ProtobufTraceSerializer.serializeRequest(await capturedTurn('conv-retry')) as Uint8Array;
    const headers = { 'content-type': 'application/x-protobuf' };
    expect((await post(body, headers)).status).toBe(200);
    const c = await s.as();
    expect(await countOf(c, "SELECT count(*) FROM _cot_steps WHERE session_id = 'conv-retry'")).toBe(4);
    const again = await Promise.all(Array.from({ length: 6 }, () => post(body, headers)));
    expect(again.map((r) => r.status)).toEqual([200, 200, 200, 200, 200, 200]);
    // gzip is the same request.
    expect((await post(gzipSync(body), { ...headers, 'content-encoding': 'gzip' })).status).toBe(200);
    expect(await countOf(c, "SELECT count(*) FROM _cot_steps WHERE session_id = 'conv-retry'")).toBe(4);
    expect(chainProblems(await chainOf(c, 'conv-retry'))).toEqual([]);
  });

  it('takes a burst of exports beyond its connections, each in its turn', async () => {
    const bodies = await Promise.all(
      Array.from({ length: 40 }, async (_, i) => ProtobufTraceSerializer.serializeRequest(await capturedTurn(`conv-burst-${i}`)) as Uint8Array),
    );
    const answers = await Promise.all(bodies.map((b) => post(b, { 'content-type': 'application/x-protobuf' })));
    expect(answers.map((a) => a.status)).toEqual(bodies.map(() => 200));
    const c = await s.as();
    expect(await countOf(c, "SELECT count(*) FROM _cot_steps WHERE session_id LIKE 'conv-burst-%'")).toBe(160);
  });

  it('answers a body it cannot read with 400, 413 or 415 and writes nothing', async () => {
    const c = await s.as();
    const before = await countOf(c, 'SELECT count(*) FROM _cot_steps');
    const body = ProtobufTraceSerializer.serializeRequest(await capturedTurn('conv-bad')) as Uint8Array;
    const proto = { 'content-type': 'application/x-protobuf' };
    const truncated = await post(body.subarray(0, body.length - 7), proto);
    expect(truncated.status).toBe(400);
    expect(truncated.type).toBe('application/x-protobuf');
    expect((await post(Buffer.from([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f]), proto)).status).toBe(400);
    const json = await post('{"resourceSpans": [', { 'content-type': 'application/json' });
    expect(json.status).toBe(400);
    expect(JSON.parse(json.body.toString())).toMatchObject({ code: 3, message: expect.stringMatching(/not JSON/) });
    expect((await post('not gzip', { ...proto, 'content-encoding': 'gzip' })).status).toBe(400);
    expect((await post(body, { 'content-type': 'text/plain' })).status).toBe(415);
    expect((await post(body, { ...proto, 'content-encoding': 'br' })).status).toBe(415);
    expect((await post(Buffer.alloc(17 * 1024 * 1024), proto)).status).toBe(413);
    // A small body that inflates past the limit.
    expect((await post(gzipSync(Buffer.alloc(17 * 1024 * 1024)), { ...proto, 'content-encoding': 'gzip' })).status).toBe(413);
    expect(await countOf(c, 'SELECT count(*) FROM _cot_steps')).toBe(before);
    expect((await fetch(url())).status).toBe(405);
  });

  it('drops spans that are not GenAI spans and counts them; keeps an error as an Error step', async () => {
    const { tracer, provider } = tracerWith(new ProtoExporter({ url: url() }));
    const http = tracer.startSpan('GET /orders/42', { attributes: { 'http.request.method': 'GET' } });
    const failed = tracer.startSpan(
      'chat gpt-4o',
      {
        attributes: { 'gen_ai.operation.name': 'chat', 'gen_ai.conversation.id': 'conv-error', 'gen_ai.request.model': 'gpt-4o', 'error.type': 'rate_limited' },
      },
      trace.setSpan(context.active(), http),
    );
    failed.setStatus({ code: SpanStatusCode.ERROR, message: 'HTTP 429 from the provider' });
    failed.end();
    http.end();
    await provider.forceFlush();
    await provider.shutdown();
    const steps = await stepsOf('conv-error');
    expect(steps.map((r) => [r.step_type, r.content])).toEqual([['Error', 'chat gpt-4o failed: rate_limited: HTTP 429 from the provider']]);
    // The dropped parent is named in metadata only.
    expect(steps[0]?.parent_trace_id).toBeNull();
    expect(steps[0]?.metadata.otel.parent_span_id).toBe((http as Span).spanContext().spanId);
    const metrics = await (await fetch(`http://127.0.0.1:${s.server.running.httpAddress?.port}/metrics`)).text();
    expect(Number(/^cotwire_otlp_spans_total\{outcome="dropped"\} (\d+)/m.exec(metrics)?.[1])).toBeGreaterThanOrEqual(1);
  });
});
