import { createRequire } from 'node:module';
import { gunzipSync } from 'node:zlib';
import protobuf from 'protobufjs/minimal.js';

/**
 * OTLP/HTTP trace requests, decoded with the OpenTelemetry project's own message definitions: the protobufjs code
 * that `@opentelemetry/otlp-transformer` generated from opentelemetry-proto (its last release that ships them). JSON
 * bodies go through the same message type, after their hex ids become bytes, so that both encodings are read by one
 * definition and come out in one shape.
 */

interface MessageType {
  decode(reader: Uint8Array): object;
  fromObject(object: object): object;
  toObject(message: object, options: object): Record<string, unknown>;
  encode(message: object): { finish(): Uint8Array };
}

interface TraceCollector {
  readonly ExportTraceServiceRequest: MessageType;
  readonly ExportTraceServiceResponse: MessageType;
}

const require = createRequire(import.meta.url);
const collector = (require('otlp-transformer-pb/build/src/generated/root.js') as { opentelemetry: { proto: { collector: { trace: { v1: TraceCollector } } } } })
  .opentelemetry.proto.collector.trace.v1;

/** A value as an attribute holds it, in JSON: int64 beyond 2^53 stays a string of digits, bytes become base64. */
export type AttributeValue = string | number | boolean | null | AttributeValue[] | { [key: string]: AttributeValue };
export type Attributes = Record<string, AttributeValue>;

export interface OtlpEvent {
  readonly name: string;
  readonly timeUnixNano: string;
  readonly attributes: Attributes;
}

export interface OtlpSpan {
  /** Lower-case hex, 32 digits. */
  readonly traceId: string;
  /** Lower-case hex, 16 digits. */
  readonly spanId: string;
  /** Empty for a root span. */
  readonly parentSpanId: string;
  readonly name: string;
  readonly kind: string;
  /** Nanoseconds since the epoch, as digits (beyond 2^53). */
  readonly startTimeUnixNano: string;
  readonly endTimeUnixNano: string;
  readonly attributes: Attributes;
  readonly events: readonly OtlpEvent[];
  readonly links: ReadonlyArray<{ readonly traceId: string; readonly spanId: string; readonly attributes: Attributes }>;
  /** STATUS_CODE_UNSET, STATUS_CODE_OK or STATUS_CODE_ERROR. */
  readonly statusCode: string;
  readonly statusMessage: string;
  readonly resource: Attributes;
  readonly scope: { readonly name: string; readonly version: string };
}

/** A span the request carried that cannot be taken: its position and why. */
export interface InvalidSpan {
  readonly at: string;
  readonly reason: string;
}

export interface DecodedRequest {
  readonly spans: readonly OtlpSpan[];
  readonly invalid: readonly InvalidSpan[];
}

/** The request cannot be read at all: 400, 413 or 415, with a message. */
export class OtlpRequestError extends Error {
  constructor(
    readonly status: 400 | 413 | 415,
    message: string,
  ) {
    super(message);
  }
}

/** Attribute values nested deeper than this are refused: a body of nested lists must not exhaust the stack. */
const MAX_VALUE_DEPTH = 32;

export type OtlpEncoding = 'protobuf' | 'json';

/** The encoding a Content-Type names, or null for one OTLP/HTTP does not define. */
export function encodingOf(contentType: string | undefined): OtlpEncoding | null {
  const type = (contentType ?? '').split(';')[0]?.trim().toLowerCase();
  if (type === 'application/x-protobuf' || type === 'application/protobuf') return 'protobuf';
  if (type === 'application/json') return 'json';
  return null;
}

/** The body as sent, inflated when gzip-encoded, never past `maxBytes`. */
export function inflate(body: Buffer, contentEncoding: string | undefined, maxBytes: number): Buffer {
  const encoding = (contentEncoding ?? 'identity').trim().toLowerCase();
  if (encoding === 'identity' || encoding === '') return body;
  if (encoding !== 'gzip') throw new OtlpRequestError(415, `Content-Encoding "${encoding}" is not supported; send gzip or none`);
  try {
    return gunzipSync(body, { maxOutputLength: maxBytes });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE') {
      throw new OtlpRequestError(413, `the body is larger than ${maxBytes} bytes once inflated (otlp.maxBodyBytes)`);
    }
    throw new OtlpRequestError(400, `the body is not valid gzip: ${(err as Error).message}`);
  }
}

/** An ExportTraceServiceRequest's spans, each with its resource and scope. */
export function decodeTraces(body: Buffer, encoding: OtlpEncoding): DecodedRequest {
  let request: Record<string, unknown>;
  try {
    const message = encoding === 'protobuf' ? collector.ExportTraceServiceRequest.decode(body) : fromJson(body);
    request = collector.ExportTraceServiceRequest.toObject(message, { longs: String, enums: String, bytes: Buffer, arrays: true, defaults: true });
  } catch (err) {
    if (err instanceof OtlpRequestError) throw err;
    // A truncated message (RangeError), a wrong wire type, or nesting deep enough to exhaust the stack.
    throw new OtlpRequestError(400, `the body is not an OTLP ExportTraceServiceRequest in ${encoding}: ${(err as Error).message}`);
  }
  const spans: OtlpSpan[] = [];
  const invalid: InvalidSpan[] = [];
  list(request['resourceSpans']).forEach((rs, r) => {
    const resource = attributes(list(obj(obj(rs)['resource'])['attributes']), 0);
    list(obj(rs)['scopeSpans']).forEach((ss, s) => {
      const scope = obj(obj(ss)['scope']);
      list(obj(ss)['spans']).forEach((raw, i) => {
        const at = `resourceSpans[${r}].scopeSpans[${s}].spans[${i}]`;
        try {
          spans.push(span(obj(raw), resource, { name: text(scope['name']), version: text(scope['version']) }));
        } catch (err) {
          invalid.push({ at, reason: (err as Error).message });
        }
      });
    });
  });
  return { spans, invalid };
}

/** The success answer, with a partial success when some spans were rejected. */
export function encodeResponse(encoding: OtlpEncoding, rejected: number, errorMessage: string): Buffer {
  const partialSuccess = rejected === 0 && errorMessage === '' ? undefined : { rejectedSpans: String(rejected), errorMessage };
  if (encoding === 'json') return Buffer.from(JSON.stringify(partialSuccess === undefined ? {} : { partialSuccess }));
  const message = collector.ExportTraceServiceResponse.fromObject(partialSuccess === undefined ? {} : { partialSuccess });
  return Buffer.from(collector.ExportTraceServiceResponse.encode(message).finish());
}

/** A failure's body: google.rpc.Status, with `code` and `message` (OTLP/HTTP's error answer). */
export function encodeStatus(encoding: OtlpEncoding, code: number, message: string): Buffer {
  if (encoding === 'json') return Buffer.from(JSON.stringify({ code, message }));
  // Status { int32 code = 1; string message = 2; }
  return Buffer.from(protobuf.Writer.create().uint32(8).int32(code).uint32(18).string(message).finish());
}

function fromJson(body: Buffer): object {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch (err) {
    throw new OtlpRequestError(400, `the body is not JSON: ${(err as Error).message}`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new OtlpRequestError(400, 'the body is not an OTLP ExportTraceServiceRequest in JSON: expected an object');
  }
  // OTLP/JSON writes ids as hex, where protobuf's JSON mapping would read base64: they become bytes first.
  for (const rs of list((parsed as Record<string, unknown>)['resourceSpans'])) {
    for (const ss of list(obj(rs)['scopeSpans'])) {
      for (const s of list(obj(ss)['spans'])) {
        hexToBytes(obj(s), ['traceId', 'spanId', 'parentSpanId']);
        for (const l of list(obj(s)['links'])) hexToBytes(obj(l), ['traceId', 'spanId']);
      }
    }
  }
  return collector.ExportTraceServiceRequest.fromObject(parsed);
}

/** Hex ids become bytes; one that is not hex is kept as an empty id, and the span is then refused on its own. */
function hexToBytes(o: Record<string, unknown>, keys: readonly string[]): void {
  for (const k of keys) {
    const v = o[k];
    if (v === undefined || v === null) continue;
    o[k] = typeof v === 'string' && /^(?:[0-9a-fA-F]{2})*$/.test(v) ? Buffer.from(v, 'hex') : Buffer.from('not hex');
  }
}

function span(s: Record<string, unknown>, resource: Attributes, scope: OtlpSpan['scope']): OtlpSpan {
  const traceId = id(s['traceId'], 16, 'traceId');
  const spanId = id(s['spanId'], 8, 'spanId');
  const parent = s['parentSpanId'];
  const parentSpanId = parent instanceof Buffer && parent.length === 0 ? '' : id(parent, 8, 'parentSpanId');
  const status = obj(s['status']);
  const start = text(s['startTimeUnixNano']);
  const end = text(s['endTimeUnixNano']);
  if (!/^\d+$/.test(start) || !/^\d+$/.test(end)) throw new Error('startTimeUnixNano and endTimeUnixNano must be integers');
  return {
    traceId,
    spanId,
    parentSpanId,
    name: text(s['name']),
    kind: text(s['kind']),
    startTimeUnixNano: start,
    endTimeUnixNano: end,
    attributes: attributes(list(s['attributes']), 0),
    events: list(s['events']).map((e) => ({
      name: text(obj(e)['name']),
      timeUnixNano: text(obj(e)['timeUnixNano']),
      attributes: attributes(list(obj(e)['attributes']), 0),
    })),
    links: list(s['links']).map((l) => ({
      traceId: obj(l)['traceId'] instanceof Buffer ? (obj(l)['traceId'] as Buffer).toString('hex') : '',
      spanId: obj(l)['spanId'] instanceof Buffer ? (obj(l)['spanId'] as Buffer).toString('hex') : '',
      attributes: attributes(list(obj(l)['attributes']), 0),
    })),
    statusCode: text(status['code']) || 'STATUS_CODE_UNSET',
    statusMessage: text(status['message']),
    resource,
    scope,
  };
}

function id(v: unknown, bytes: number, name: string): string {
  if (!(v instanceof Buffer) || v.length !== bytes) throw new Error(`${name} must be ${bytes} bytes (${bytes * 2} hex digits)`);
  if (v.every((b) => b === 0)) throw new Error(`${name} must not be all zeros`);
  return v.toString('hex');
}

function attributes(kvs: readonly unknown[], depth: number): Attributes {
  const out: Attributes = {};
  for (const kv of kvs) {
    const key = text(obj(kv)['key']);
    out[key] = value(obj(obj(kv)['value']), depth);
  }
  return out;
}

function value(v: Record<string, unknown>, depth: number): AttributeValue {
  if (depth > MAX_VALUE_DEPTH) throw new OtlpRequestError(400, `an attribute value is nested deeper than ${MAX_VALUE_DEPTH} levels`);
  if (v['stringValue'] !== undefined && v['stringValue'] !== null) return String(v['stringValue']);
  if (v['boolValue'] !== undefined && v['boolValue'] !== null) return Boolean(v['boolValue']);
  if (v['intValue'] !== undefined && v['intValue'] !== null) {
    const digits = String(v['intValue']);
    const n = Number(digits);
    return Number.isSafeInteger(n) ? n : digits;
  }
  if (v['doubleValue'] !== undefined && v['doubleValue'] !== null) {
    const n = Number(v['doubleValue']);
    return Number.isFinite(n) ? n : String(n);
  }
  if (v['bytesValue'] instanceof Buffer) return v['bytesValue'].toString('base64');
  if (v['arrayValue'] !== undefined && v['arrayValue'] !== null) return list(obj(v['arrayValue'])['values']).map((x) => value(obj(x), depth + 1));
  if (v['kvlistValue'] !== undefined && v['kvlistValue'] !== null) return attributes(list(obj(v['kvlistValue'])['values']), depth + 1);
  return null;
}

function obj(v: unknown): Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
}

function list(v: unknown): unknown[] {
  return Array.isArray(v) ? v : [];
}

function text(v: unknown): string {
  return v === undefined || v === null ? '' : String(v);
}
