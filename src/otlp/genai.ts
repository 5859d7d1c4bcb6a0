import type { StepType } from '../ledger/chain/schema.js';
import type { AttributeValue, Attributes, OtlpSpan } from './decode.js';

/**
 * What a span says as a step, by the GenAI semantic conventions: their current names, the older ones exporters
 * still send, and the names of the frameworks that write their own (the Vercel AI SDK's `ai.*`, OpenInference's,
 * OpenLLMetry's). docs/ingest.md gives the table attribute by attribute. Every attribute no column takes is kept in
 * `metadata.otel.attributes`, so that nothing the span said is lost.
 */

export interface StepDraft {
  readonly span: OtlpSpan;
  /** Null when the span names no conversation: the ingest gives it its trace's, or else the trace id. */
  readonly conversation: string | null;
  /** Null when the span names no agent: the ingest gives it its nearest ancestor's. */
  readonly agent: string | null;
  readonly operation: string;
  readonly stepType: StepType;
  readonly content: string;
  readonly input: unknown;
  readonly output: unknown;
  readonly durationMs: number;
  readonly tokens: number | null;
  readonly model: string | null;
  readonly metadata: Record<string, unknown>;
}

/** Whether a span describes a GenAI operation, in any of the conventions read here. */
export function isGenAiSpan(span: OtlpSpan): boolean {
  return Object.keys(span.attributes).some(
    (k) => k.startsWith('gen_ai.') || k === 'ai.operationId' || k === 'openinference.span.kind' || k === 'traceloop.span.kind' || k.startsWith('llm.'),
  );
}

const MODEL_CALLS = new Set(['chat', 'text_completion', 'generate_content', 'completion']);

/** The step a span makes; `keepOther` steps of spans that are not GenAI spans are Observations. */
export function stepOf(span: OtlpSpan): StepDraft {
  const a = new Reader(span.attributes);
  const operation = operationOf(span, a);
  const error = span.statusCode === 'STATUS_CODE_ERROR';
  // Tool attributes make a tool call's columns; on any other span they stay in metadata.
  const tool = toolCallOf(operation) ? a.text('gen_ai.tool.name', 'ai.toolCall.name', 'tool.name') : null;
  const toolCall = toolCallOf(operation);
  const inputMessages = a.json('gen_ai.input.messages', 'gen_ai.prompt', 'ai.prompt.messages') ?? indexed(a, 'gen_ai.prompt') ?? eventMessages(span, 'input');
  // The Vercel AI SDK's call as its caller made it: { prompt } or { system, messages }.
  const prompt = a.json('ai.prompt');
  const outputMessages =
    a.json('gen_ai.output.messages', 'gen_ai.completion') ?? indexed(a, 'gen_ai.completion') ?? responseOf(a) ?? eventMessages(span, 'output');
  const system = a.json('gen_ai.system_instructions');
  const args = toolCall ? a.json('gen_ai.tool.call.arguments', 'ai.toolCall.args', 'tool.parameters') : undefined;
  const result = toolCall ? a.json('gen_ai.tool.call.result', 'ai.toolCall.result') : undefined;
  const genericIn = a.json('input.value');
  const genericOut = a.json('output.value');
  const inputTokens = a.number(
    'gen_ai.usage.input_tokens',
    'gen_ai.usage.prompt_tokens',
    'ai.usage.inputTokens',
    'ai.usage.promptTokens',
    'llm.token_count.prompt',
    'llm.usage.prompt_tokens',
  );
  const outputTokens = a.number(
    'gen_ai.usage.output_tokens',
    'gen_ai.usage.completion_tokens',
    'ai.usage.outputTokens',
    'ai.usage.completionTokens',
    'llm.token_count.completion',
    'llm.usage.completion_tokens',
  );
  const totalTokens = a.number('ai.usage.totalTokens', 'llm.usage.total_tokens', 'llm.token_count.total');
  const model = a.text(
    'gen_ai.response.model',
    'ai.response.model',
    'gen_ai.request.model',
    'ai.model.id',
    'llm.model_name',
    'llm.response.model',
    'llm.request.model',
  );
  const conversation = a.text(
    'gen_ai.conversation.id',
    'session.id',
    'ai.telemetry.metadata.sessionId',
    'ai.telemetry.metadata.session_id',
    'langfuse.session.id',
    'traceloop.association.properties.session_id',
  );
  const agent = a.text('gen_ai.agent.name', 'gen_ai.agent.id', 'agent.name');
  const callId = toolCall ? a.text('gen_ai.tool.call.id', 'ai.toolCall.id') : null;
  a.take('gen_ai.operation.name', 'ai.operationId', 'openinference.span.kind', 'traceloop.span.kind');

  const input = toolCall
    ? compact({ tool, call_id: callId, arguments: args ?? genericIn })
    : compact({
        system_instructions: system,
        prompt,
        messages: inputMessages ?? (MODEL_CALLS.has(operation) ? genericIn : undefined),
        input: MODEL_CALLS.has(operation) && inputMessages === undefined ? undefined : genericIn,
      });
  const output = toolCall ? compact({ result: result ?? genericOut }) : compact({ messages: outputMessages, output: genericOut });
  const content = error
    ? errorText(span, a)
    : toolCall
      ? `${tool ?? span.name}: ${textOf(result ?? genericOut ?? args ?? '')}`
      : (textOfMessages(outputMessages) ?? (genericOut === undefined ? null : textOf(genericOut)) ?? span.name);

  const tokens = totalTokens ?? (inputTokens === null && outputTokens === null ? null : (inputTokens ?? 0) + (outputTokens ?? 0));
  const startNs = BigInt(span.startTimeUnixNano);
  const endNs = BigInt(span.endTimeUnixNano);
  const metadata: Record<string, unknown> = {
    otel: {
      trace_id: span.traceId,
      span_id: span.spanId,
      ...(span.parentSpanId === '' ? {} : { parent_span_id: span.parentSpanId }),
      name: span.name,
      kind: span.kind,
      start_time_unix_nano: span.startTimeUnixNano,
      end_time_unix_nano: span.endTimeUnixNano,
      status: { code: span.statusCode, ...(span.statusMessage === '' ? {} : { message: span.statusMessage }) },
      ...(span.scope.name === '' ? {} : { scope: span.scope }),
      ...(Object.keys(span.resource).length === 0 ? {} : { resource: span.resource }),
      ...(Object.keys(a.rest()).length === 0 ? {} : { attributes: a.rest() }),
      ...(span.events.length === 0 ? {} : { events: span.events }),
      ...(span.links.length === 0 ? {} : { links: span.links }),
    },
    gen_ai: compact({
      operation,
      ...(inputTokens === null ? {} : { input_tokens: inputTokens }),
      ...(outputTokens === null ? {} : { output_tokens: outputTokens }),
    }),
  };
  return {
    span,
    conversation,
    agent,
    operation,
    stepType: error ? 'Error' : stepTypeOf(operation, content !== span.name),
    content,
    input: Object.keys(input).length === 0 ? null : input,
    output: Object.keys(output).length === 0 ? null : output,
    durationMs: endNs >= startNs ? Number((endNs - startNs) / 1_000_000n) : 0,
    tokens,
    model,
    metadata,
  };
}

function toolCallOf(operation: string): boolean {
  return operation === 'execute_tool';
}

function stepTypeOf(operation: string, answered: boolean): StepType {
  if (operation === 'execute_tool') return 'ToolCall';
  if (MODEL_CALLS.has(operation)) return 'Reasoning';
  if (operation === 'invoke_agent') return answered ? 'FinalAnswer' : 'Action';
  if (operation === 'create_agent' || operation === 'workflow') return 'Action';
  return 'Observation';
}

/** The operation, from `gen_ai.operation.name` or what each other convention calls it. */
function operationOf(span: OtlpSpan, a: Reader): string {
  const named = a.peek('gen_ai.operation.name');
  if (typeof named === 'string' && named !== '') return named;
  const vercel = a.peek('ai.operationId');
  if (typeof vercel === 'string') {
    if (vercel === 'ai.toolCall') return 'execute_tool';
    if (/\.do(Generate|Stream)$/.test(vercel)) return 'chat';
    if (vercel.startsWith('ai.embed')) return 'embeddings';
    return 'invoke_agent';
  }
  const kind = String(a.peek('openinference.span.kind') ?? a.peek('traceloop.span.kind') ?? '').toLowerCase();
  const byKind: Record<string, string> = {
    llm: 'chat',
    tool: 'execute_tool',
    agent: 'invoke_agent',
    chain: 'workflow',
    workflow: 'workflow',
    task: 'workflow',
    retriever: 'retrieval',
    embedding: 'embeddings',
  };
  if (byKind[kind] !== undefined) return byKind[kind];
  if (a.peek('llm.request.type') !== undefined) return 'chat';
  // The conventions name spans "{operation} {target}".
  const first = span.name.split(' ')[0] ?? '';
  if (['chat', 'text_completion', 'generate_content', 'embeddings', 'execute_tool', 'invoke_agent', 'create_agent', 'retrieval', 'workflow'].includes(first))
    return first;
  return Object.keys(span.attributes).some((k) => k.startsWith('gen_ai.')) ? 'chat' : 'other';
}

/** The Vercel AI SDK's answer: its text and the tool calls it asked for. */
function responseOf(a: Reader): unknown {
  const text = a.json('ai.response.text');
  const toolCalls = a.json('ai.response.toolCalls');
  if (text === undefined && toolCalls === undefined) return undefined;
  return [compact({ role: 'assistant', content: text, tool_calls: toolCalls })];
}

/** OpenLLMetry's `gen_ai.prompt.0.role`, `gen_ai.prompt.0.content`, ...: the messages, in order. */
function indexed(a: Reader, prefix: string): unknown[] | undefined {
  const messages: Array<Record<string, unknown>> = [];
  const pattern = new RegExp(`^${prefix.replaceAll('.', '\\.')}\\.(\\d+)\\.(.+)$`);
  for (const key of a.keys()) {
    const m = pattern.exec(key);
    if (m === null) continue;
    const at = Number(m[1]);
    if (at > 10_000) continue;
    const message = messages[at] ?? {};
    message[m[2] as string] = a.take(key);
    messages[at] = message;
  }
  return messages.length === 0 ? undefined : messages.filter((m) => m !== undefined);
}

/** The older conventions put messages in span events (gen_ai.user.message, gen_ai.choice, ...). */
function eventMessages(span: OtlpSpan, side: 'input' | 'output'): unknown[] | undefined {
  const names =
    side === 'input'
      ? ['gen_ai.system.message', 'gen_ai.user.message', 'gen_ai.assistant.message', 'gen_ai.tool.message', 'gen_ai.content.prompt']
      : ['gen_ai.choice', 'gen_ai.content.completion'];
  const found = span.events
    .filter((e) => names.includes(e.name))
    .map((e) => {
      // Azure's SDKs and Semantic Kernel put the whole message in one attribute, as JSON.
      const body = e.attributes['gen_ai.event.content'];
      let parsed: unknown;
      try {
        parsed = typeof body === 'string' ? JSON.parse(body) : undefined;
      } catch {
        parsed = undefined;
      }
      return { event: e.name, ...e.attributes, ...(typeof parsed === 'object' && parsed !== null ? (parsed as object) : {}) };
    });
  return found.length === 0 ? undefined : found;
}

function errorText(span: OtlpSpan, a: Reader): string {
  const exception = span.events.find((e) => e.name === 'exception');
  const message = span.statusMessage || (exception === undefined ? '' : textOf(exception.attributes['exception.message'] ?? ''));
  const type = a.text('error.type') ?? (exception === undefined ? null : textOf(exception.attributes['exception.type'] ?? ''));
  return [`${span.name} failed`, type, message].filter((p) => p !== null && p !== '').join(': ');
}

/** The text a model answered: every text part of the assistant's messages, in order. */
function textOfMessages(messages: unknown): string | null {
  if (!Array.isArray(messages)) return typeof messages === 'string' && messages !== '' ? messages : null;
  const texts: string[] = [];
  const tools: string[] = [];
  for (const m of messages) {
    if (typeof m !== 'object' || m === null) continue;
    const msg = m as Record<string, unknown>;
    if (Array.isArray(msg['parts'])) {
      for (const p of msg['parts'] as unknown[]) {
        const part = (typeof p === 'object' && p !== null ? p : {}) as Record<string, unknown>;
        if (part['type'] === 'text' && typeof part['content'] === 'string') texts.push(part['content']);
        if (part['type'] === 'tool_call' && typeof part['name'] === 'string') tools.push(part['name']);
      }
    }
    if (typeof msg['content'] === 'string' && msg['content'] !== '') texts.push(msg['content']);
    const inner = msg['message'];
    if (typeof inner === 'object' && inner !== null && typeof (inner as Record<string, unknown>)['content'] === 'string') {
      texts.push((inner as Record<string, unknown>)['content'] as string);
    }
    // OpenLLMetry's indexed messages keep their tool calls as keys of their own: tool_calls.0.name, ...
    for (const [k, v] of Object.entries(msg)) if (/^tool_calls\.\d+\.name$/.test(k) && typeof v === 'string') tools.push(v);
    const calls = msg['tool_calls'];
    if (Array.isArray(calls))
      for (const c of calls) tools.push(String((c as Record<string, unknown>)?.['toolName'] ?? (c as Record<string, unknown>)?.['name'] ?? ''));
  }
  if (texts.length > 0) return texts.join('\n');
  if (tools.length > 0) return `calls ${tools.filter((t) => t !== '').join(', ')}`;
  return null;
}

function textOf(v: unknown): string {
  return typeof v === 'string' ? v : (JSON.stringify(v) ?? '');
}

function compact(o: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined && v !== null));
}

/** The span's attributes, each read at most once: what no reader took is what `metadata` keeps. */
class Reader {
  private readonly taken = new Set<string>();
  constructor(private readonly attrs: Attributes) {}

  keys(): string[] {
    return Object.keys(this.attrs);
  }

  peek(key: string): AttributeValue | undefined {
    return Object.hasOwn(this.attrs, key) ? this.attrs[key] : undefined;
  }

  /** The first of `keys` the span has (not null, not empty); only that one counts as read, the rest stay in metadata. */
  take(...keys: string[]): AttributeValue | undefined {
    for (const k of keys) {
      const v = this.peek(k);
      if (v === undefined || v === null || v === '') continue;
      this.taken.add(k);
      return v;
    }
    return undefined;
  }

  text(...keys: string[]): string | null {
    const v = this.take(...keys);
    return v === undefined ? null : textOf(v);
  }

  number(...keys: string[]): number | null {
    const v = this.take(...keys);
    const n = typeof v === 'number' ? v : typeof v === 'string' && /^\d+$/.test(v) ? Number(v) : Number.NaN;
    return Number.isSafeInteger(n) && n >= 0 ? n : null;
  }

  /** A value that may be JSON in a string (messages, arguments, results), parsed when it is. */
  json(...keys: string[]): unknown {
    const v = this.take(...keys);
    if (typeof v !== 'string') return v;
    const t = v.trim();
    if (t.startsWith('{') || t.startsWith('[')) {
      try {
        return JSON.parse(t) as unknown;
      } catch {
        return v;
      }
    }
    return v;
  }

  rest(): Attributes {
    return Object.fromEntries(Object.entries(this.attrs).filter(([k]) => !this.taken.has(k)));
  }
}
