import { randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import { stepRow } from './dataset.js';
import { decodeTraces } from '../src/otlp/decode.js';
import { stepOf } from '../src/otlp/genai.js';

/**
 * OTLP/HTTP export requests of GenAI spans that become the same steps as `stepRow` (issue 37's ingest rate), built
 * with the OpenTelemetry project's generated message code, as an exporter's serializer writes them.
 */

interface MessageType {
  fromObject(o: object): object;
  encode(m: object): { finish(): Uint8Array };
}
const require = createRequire(import.meta.url);
const Request = (
  require('otlp-transformer-pb/build/src/generated/root.js') as {
    opentelemetry: { proto: { collector: { trace: { v1: { ExportTraceServiceRequest: MessageType } } } } };
  }
).opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest;

const str = (key: string, value: string): object => ({ key, value: { stringValue: value } });
const int = (key: string, value: number): object => ({ key, value: { intValue: value } });

/** One request of `n` chat spans of `session`, steps `from` .. `from + n - 1`, each a root span of its own trace. */
export function otlpBatch(session: string, from: number, n: number): Uint8Array {
  const t0 = BigInt(Date.now()) * 1_000_000n;
  const spans = Array.from({ length: n }, (_, k) => {
    const i = from + k;
    const row = stepRow(session, i);
    const start = t0 + BigInt(i) * 1_000_000n;
    return {
      traceId: randomBytes(16),
      spanId: randomBytes(8),
      name: `chat ${String(row[9])}`,
      kind: 3,
      startTimeUnixNano: start.toString(),
      endTimeUnixNano: (start + BigInt(Number(row[7])) * 1_000_000n).toString(),
      attributes: [
        str('gen_ai.operation.name', 'chat'),
        str('gen_ai.conversation.id', session),
        str('gen_ai.agent.name', String(row[1])),
        str('gen_ai.request.model', String(row[9])),
        int('gen_ai.usage.input_tokens', Number(row[8]) - 40),
        int('gen_ai.usage.output_tokens', 40),
        str('gen_ai.input.messages', JSON.stringify([{ role: 'user', parts: [{ type: 'text', content: String(row[4]) }] }])),
        str('gen_ai.output.messages', JSON.stringify([{ role: 'assistant', parts: [{ type: 'text', content: String(row[3]) }], finish_reason: 'stop' }])),
      ],
      status: {},
    };
  });
  const message = Request.fromObject({
    resourceSpans: [{ resource: { attributes: [str('service.name', 'bench-agent')] }, scopeSpans: [{ scope: { name: 'bench', version: '1' }, spans }] }],
  });
  return Request.encode(message).finish();
}

/** POSTs one export request; throws unless every span was taken. */
export async function exportSpans(httpPort: number, body: Uint8Array): Promise<void> {
  const res = await fetch(`http://127.0.0.1:${httpPort}/v1/traces`, { method: 'POST', headers: { 'content-type': 'application/x-protobuf' }, body });
  const answer = Buffer.from(await res.arrayBuffer());
  // An ExportTraceServiceResponse without partial_success is empty.
  if (res.status !== 200 || answer.length !== 0)
    throw new Error(`OTLP export answered ${res.status} (${answer.length} bytes): ${answer.toString('latin1').slice(0, 200)}`);
}

/**
 * The rows the server makes of a request's spans, in `STEP_COLUMNS` order: the INSERT that appends the same steps
 * over the wire, so that the two ways are compared on the same rows.
 */
export function rowsOf(body: Uint8Array): Array<Array<string | number | null>> {
  return decodeTraces(Buffer.from(body), 'protobuf').spans.map((span) => {
    const d = stepOf(span);
    return [
      d.conversation,
      d.agent,
      d.stepType,
      d.content,
      d.input === null ? null : JSON.stringify(d.input),
      d.output === null ? null : JSON.stringify(d.output),
      null,
      d.durationMs,
      d.tokens,
      d.model,
      JSON.stringify(d.metadata),
    ];
  });
}
