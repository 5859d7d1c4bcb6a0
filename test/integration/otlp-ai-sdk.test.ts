import { AsyncLocalStorage } from 'node:async_hooks';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createOpenAI } from '@ai-sdk/openai';
import { type Context, type ContextManager, context, ROOT_CONTEXT } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { generateText, stepCountIs, tool } from 'ai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { chainOf, chainProblems, useConformanceServer } from '../fixtures/conformance.js';

/**
 * An agent built with the Vercel AI SDK, its telemetry on, exporting its spans through the OpenTelemetry SDK's OTLP
 * protobuf exporter to the HTTP listener, and read back over the wire. Its model is OpenAI's chat completions API,
 * answered by a fake on port 0: a call of get_weather first, then, once the tool's result is in, the answer.
 */
const s = useConformanceServer();

interface ChatRequest {
  model: string;
  messages: Array<{ role: string; content?: unknown; tool_call_id?: string }>;
  tools?: Array<{ type: string; function: { name: string } }>;
}

const ANSWER = 'It is sunny in Paris.';
const WEATHER = { city: 'Paris', forecast: 'sunny', celsius: 21 };

/** A non-streaming chat completion, as @ai-sdk/openai's openaiChatResponseSchema reads it. */
function completion(request: ChatRequest, n: number): Record<string, unknown> {
  const answered = request.messages.some((m) => m.role === 'tool');
  const message = answered
    ? { role: 'assistant', content: ANSWER }
    : {
        role: 'assistant',
        content: null,
        tool_calls: [{ id: 'call_weather_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }],
      };
  return {
    id: `chatcmpl-fake-${n}`,
    object: 'chat.completion',
    created: 1_700_000_000 + n,
    model: 'gpt-4o-mini-2024-07-18',
    choices: [{ index: 0, message, finish_reason: answered ? 'stop' : 'tool_calls' }],
    usage: answered ? { prompt_tokens: 60, completion_tokens: 7, total_tokens: 67 } : { prompt_tokens: 40, completion_tokens: 12, total_tokens: 52 },
  };
}

const requests: ChatRequest[] = [];
let fake: Server;
let fakeUrl: string;

beforeAll(async () => {
  fake = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method !== 'POST' || req.url !== '/v1/chat/completions') {
        res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: `no ${req.method} ${req.url}` } }));
        return;
      }
      const request = JSON.parse(Buffer.concat(chunks).toString('utf8')) as ChatRequest;
      requests.push(request);
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(completion(request, requests.length)));
    });
  });
  await new Promise<void>((resolve) => fake.listen(0, '127.0.0.1', resolve));
  fakeUrl = `http://127.0.0.1:${(fake.address() as AddressInfo).port}/v1`;
});

afterAll(async () => {
  await new Promise<void>((resolve) => fake.close(() => resolve()));
});

beforeEach(() => {
  requests.length = 0;
});

/**
 * What @opentelemetry/context-async-hooks's AsyncLocalStorageContextManager does, and NodeSDK or NodeTracerProvider
 * registers: the active span follows the async calls, so the AI SDK's spans nest. Without one, each is a root span.
 */
class AsyncContextManager implements ContextManager {
  private readonly storage = new AsyncLocalStorage<Context>();
  active(): Context {
    return this.storage.getStore() ?? ROOT_CONTEXT;
  }
  with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(ctx: Context, fn: F, thisArg?: ThisParameterType<F>, ...args: A): ReturnType<F> {
    return this.storage.run(ctx, () => fn.call(thisArg, ...args));
  }
  bind<T>(ctx: Context, target: T): T {
    if (typeof target !== 'function') return target;
    const run = (...args: unknown[]): unknown => this.with(ctx, target as (...a: unknown[]) => unknown, undefined, ...args);
    return run as T;
  }
  enable(): this {
    return this;
  }
  disable(): this {
    this.storage.disable();
    return this;
  }
}

/** One generateText run with a tool, its spans exported in one batch, flushed before it returns. */
async function agentRun(session: string): Promise<string> {
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': 'weather-agent' }),
    // One export, at the flush: the processor's 5 s timer, run out on a busy machine, would send the spans that
    // ended first in a request of their own, and a session's steps keep the order their requests arrived in.
    spanProcessors: [
      new BatchSpanProcessor(new OTLPTraceExporter({ url: `http://127.0.0.1:${s.server.running.httpAddress?.port}/v1/traces` }), {
        scheduledDelayMillis: 3_600_000,
      }),
    ],
  });
  const openai = createOpenAI({ baseURL: fakeUrl, apiKey: 'test' });
  try {
    const result = await generateText({
      model: openai.chat('gpt-4o-mini'),
      tools: {
        get_weather: tool({
          description: 'The weather in a city',
          inputSchema: z.object({ city: z.string() }),
          execute: async ({ city }) => ({ ...WEATHER, city }),
        }),
      },
      stopWhen: stepCountIs(3),
      prompt: 'What is the weather in Paris?',
      experimental_telemetry: { isEnabled: true, tracer: provider.getTracer('ai'), metadata: { sessionId: session } },
    });
    return result.text;
  } finally {
    await provider.forceFlush();
    await provider.shutdown();
  }
}

interface StepRow {
  step_index: number;
  step_type: string;
  content: string;
  model: string | null;
  token_count: number | null;
  input_data: unknown;
  output_data: unknown;
  metadata: {
    otel: { trace_id: string; span_id: string; parent_span_id?: string; name: string; attributes?: Record<string, unknown> };
    gen_ai: Record<string, unknown>;
  };
  trace_id: string;
  parent_trace_id: string | null;
}

async function stepsOf(session: string): Promise<StepRow[]> {
  const c = await s.as();
  const r = await c.query(
    `SELECT step_index, step_type, content, model, token_count, input_data, output_data, metadata, CAST(trace_id AS text) AS trace_id,
            CAST(parent_trace_id AS text) AS parent_trace_id
     FROM _cot_steps WHERE session_id = $1 ORDER BY step_index`,
    [session],
  );
  const parsed = (v: unknown): unknown => (typeof v === 'string' ? JSON.parse(v) : v);
  return r.rows.map((row: Record<string, unknown>) => ({
    ...row,
    token_count: row['token_count'] === null ? null : Number(row['token_count']),
    input_data: parsed(row['input_data']),
    output_data: parsed(row['output_data']),
    metadata: parsed(row['metadata']),
  })) as StepRow[];
}

async function verified(session: string): Promise<{ valid: boolean; steps: number }> {
  const c = await s.as();
  const row = (await c.query('SELECT valid, step_count FROM cot_verify($1)', [session])).rows[0] as { valid: boolean; step_count: string };
  return { valid: row.valid, steps: Number(row.step_count) };
}

describe('a Vercel AI SDK agent traced over OTLP', () => {
  it('lands a generateText run with a tool call as one chained session: the run, both model calls, the tool call', async () => {
    const manager = new AsyncContextManager();
    expect(context.setGlobalContextManager(manager)).toBe(true);
    let text: string;
    try {
      text = await agentRun('ai-sdk-run');
    } finally {
      context.disable();
    }
    expect(text).toBe(ANSWER);
    // The fake saw what the SDK sends: the tool offered, then its result under the call's id.
    expect(requests.map((r) => r.model)).toEqual(['gpt-4o-mini', 'gpt-4o-mini']);
    expect(requests[0]?.tools?.map((t) => t.function.name)).toEqual(['get_weather']);
    expect(requests[1]?.messages.find((m) => m.role === 'tool')).toMatchObject({ tool_call_id: 'call_weather_1', content: JSON.stringify(WEATHER) });

    const steps = await stepsOf('ai-sdk-run');
    expect(steps.map((r) => [r.step_type, r.metadata.otel.name])).toEqual([
      ['FinalAnswer', 'ai.generateText'],
      ['Reasoning', 'ai.generateText.doGenerate'],
      ['ToolCall', 'ai.toolCall'],
      ['Reasoning', 'ai.generateText.doGenerate'],
    ]);
    const [run, ask, call, answer] = steps as [StepRow, StepRow, StepRow, StepRow];

    // One OTel trace: the model calls and the tool call are children of the run, in the spans and in the ledger.
    expect(new Set(steps.map((r) => r.metadata.otel.trace_id)).size).toBe(1);
    expect(run.parent_trace_id).toBeNull();
    expect(run.metadata.otel.parent_span_id).toBeUndefined();
    for (const child of [ask, call, answer]) {
      expect(child.parent_trace_id).toBe(run.trace_id);
      expect(child.metadata.otel.parent_span_id).toBe(run.metadata.otel.span_id);
    }

    // The run: its prompt, its final text, the model asked for and the tokens of both calls.
    expect(run).toMatchObject({
      content: ANSWER,
      model: 'gpt-4o-mini',
      token_count: 119,
      output_data: { messages: [{ role: 'assistant', content: ANSWER }] },
    });
    expect(run.input_data).toEqual({ prompt: { prompt: 'What is the weather in Paris?' } });

    // The first model call asks for the tool; the model and the tokens are the fake's.
    expect(ask).toMatchObject({ content: 'calls get_weather', model: 'gpt-4o-mini-2024-07-18', token_count: 52 });
    expect(ask.metadata.gen_ai).toMatchObject({ operation: 'chat', input_tokens: 40, output_tokens: 12 });
    expect(ask.input_data).toEqual({ messages: [{ role: 'user', content: [{ type: 'text', text: 'What is the weather in Paris?' }] }] });
    expect(ask.output_data).toMatchObject({
      messages: [{ role: 'assistant', tool_calls: [{ toolCallId: 'call_weather_1', toolName: 'get_weather' }] }],
    });
    expect(ask.metadata.otel.attributes).toMatchObject({ 'ai.response.finishReason': 'tool-calls', 'gen_ai.response.id': 'chatcmpl-fake-1' });

    // The tool call: its name, call id and arguments in, its result out.
    expect(call).toMatchObject({
      content: `get_weather: ${JSON.stringify(WEATHER)}`,
      model: null,
      token_count: null,
      input_data: { tool: 'get_weather', call_id: 'call_weather_1', arguments: { city: 'Paris' } },
      output_data: { result: WEATHER },
    });

    // The second model call has the tool's result in its prompt and answers.
    expect(answer).toMatchObject({
      content: ANSWER,
      model: 'gpt-4o-mini-2024-07-18',
      token_count: 67,
      output_data: { messages: [{ role: 'assistant', content: ANSWER }] },
    });
    expect((answer.input_data as { messages: Array<{ role: string }> }).messages.map((m) => m.role)).toEqual(['user', 'assistant', 'tool']);

    expect(chainProblems(await chainOf(await s.as(), 'ai-sdk-run'))).toEqual([]);
    expect(await verified('ai-sdk-run')).toEqual({ valid: true, steps: 4 });
  });

  it('gathers a run traced with no context manager, each span a trace of its own, into its session by the sessionId', async () => {
    expect(await agentRun('ai-sdk-flat')).toBe(ANSWER);
    const steps = await stepsOf('ai-sdk-flat');
    expect(steps.map((r) => r.step_type)).toEqual(['FinalAnswer', 'Reasoning', 'ToolCall', 'Reasoning']);
    expect(new Set(steps.map((r) => r.metadata.otel.trace_id)).size).toBe(4);
    expect(steps.map((r) => r.parent_trace_id)).toEqual([null, null, null, null]);
    expect(steps[2]?.input_data).toEqual({ tool: 'get_weather', call_id: 'call_weather_1', arguments: { city: 'Paris' } });
    expect(steps[3]?.content).toBe(ANSWER);
    expect(chainProblems(await chainOf(await s.as(), 'ai-sdk-flat'))).toEqual([]);
    expect(await verified('ai-sdk-flat')).toEqual({ valid: true, steps: 4 });
  });
});
