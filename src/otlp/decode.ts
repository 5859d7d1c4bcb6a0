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
  decode(reader: Uint8Array | protobuf.Reader): object;
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
  let message: object;
  /** JSON spans whose values the message type would read as other values: refused, by position. */
  let refused = new Map<string, string>();
  try {
    if (encoding === 'protobuf') {
      // protobufjs' reader of a Buffer lets a string's length run past the message (swallowing what follows);
      // its reader of plain bytes checks every length.
      message = collector.ExportTraceServiceRequest.decode(new CheckedReader(body));
    } else {
      ({ message, refused } = fromJson(body));
    }
    // Without defaults (a third of the time): a field left out reads as its default below.
    request = collector.ExportTraceServiceRequest.toObject(message, { longs: String, enums: String, bytes: Buffer, arrays: true });
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
        const why = refused.get(at);
        if (why !== undefined) {
          invalid.push({ at, reason: why });
          return;
        }
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

/**
 * protobufjs' reader of a Buffer, whose strings stop at the body's end instead of refusing a length that runs past
 * it (which swallowed the spans after it): here a string past the end is an error, as bytes are, and is decoded by
 * Buffer, which replaces invalid UTF-8 with U+FFFD (protobufjs' own decoder made lone surrogates, which no JSON
 * column takes, and invented characters).
 */
class CheckedReader extends protobuf.BufferReader {
  override string(): string {
    const len = this.uint32();
    const end = this.pos + len;
    if (end > this.len) throw new RangeError(`index out of range: ${this.pos} + ${len} > ${this.len} (a string runs past the end of the body)`);
    const s = (this.buf as Buffer).toString('utf8', this.pos, end);
    this.pos = end;
    return s;
  }
}

function fromJson(body: Buffer): { message: object; refused: Map<string, string> } {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8').replace(/^\uFEFF/, ''));
  } catch (err) {
    throw new OtlpRequestError(400, `the body is not JSON: ${(err as Error).message}`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new OtlpRequestError(400, 'the body is not an OTLP ExportTraceServiceRequest in JSON: expected an object');
  }
  // The message type's fromObject reads what it cannot read as another value ("abc" as 0, "false" as true): each
  // span's values are checked first, and a span with one it would misread is refused on its own.
  const refused = new Map<string, string>();
  list((parsed as Record<string, unknown>)['resourceSpans']).forEach((rs, r) => {
    const resourceProblem = attributesProblem(obj(obj(rs)['resource'])['attributes'], 0);
    if (resourceProblem !== null) throw new OtlpRequestError(400, `resourceSpans[${r}].resource: ${resourceProblem}`);
    list(obj(rs)['scopeSpans']).forEach((ss, si) => {
      list(obj(ss)['spans']).forEach((sp, i) => {
        const problem = jsonSpanProblem(obj(sp));
        if (problem !== null) {
          refused.set(`resourceSpans[${r}].scopeSpans[${si}].spans[${i}]`, problem);
          // What the message type would throw on, or misread, is not given to it: the span is refused on its own.
          (obj(ss)['spans'] as unknown[])[i] = {};
          return;
        }
        // OTLP/JSON writes ids as hex, where protobuf's JSON mapping would read base64: they become bytes first.
        hexToBytes(obj(sp), ['traceId', 'spanId', 'parentSpanId']);
        for (const l of list(obj(sp)['links'])) hexToBytes(obj(l), ['traceId', 'spanId']);
      });
    });
  });
  return { message: collector.ExportTraceServiceRequest.fromObject(parsed), refused };
}

const TIME_LIMIT = 1n << 63n;
const INT64_MIN = -(1n << 63n);
const INT64_MAX = (1n << 63n) - 1n;

/**
 * A time in nanoseconds since the epoch: digits, or a safe integer. Below 2^63, the year 2262, where protobufjs
 * reads the field's JSON as a signed number.
 */
function timeProblem(what: string, v: unknown): string | null {
  const digits = typeof v === 'number' && Number.isSafeInteger(v) && v >= 0 ? String(v) : typeof v === 'string' && /^\d+$/.test(v) ? v : null;
  if (digits === null || BigInt(digits) >= TIME_LIMIT) return `${what} must be nanoseconds since the epoch (an integer below 2^63), not ${JSON.stringify(v)}`;
  return null;
}

/** Why a JSON span's times or attribute values are not what OTLP/JSON allows, or null. */
function jsonSpanProblem(s: Record<string, unknown>): string | null {
  for (const k of ['startTimeUnixNano', 'endTimeUnixNano']) {
    if (s[k] === undefined || s[k] === null) return `${k} is required`;
    const p = timeProblem(k, s[k]);
    if (p !== null) return p;
  }
  for (const e of list(s['events'])) {
    const t = obj(e)['timeUnixNano'];
    const p = t === undefined || t === null ? null : timeProblem('an event timeUnixNano', t);
    if (p !== null) return p;
  }
  for (const k of ['events', 'links']) {
    const v = s[k];
    if (v !== undefined && v !== null && (!Array.isArray(v) || v.some((x) => typeof x !== 'object' || x === null || Array.isArray(x))))
      return `${k} must be a list of objects`;
  }
  if (s['status'] !== undefined && s['status'] !== null && (typeof s['status'] !== 'object' || Array.isArray(s['status']))) return 'status must be an object';
  const own = attributesProblem(s['attributes'], 0);
  if (own !== null) return own;
  for (const e of list(s['events'])) {
    const p = attributesProblem(obj(e)['attributes'], 0);
    if (p !== null) return `an event: ${p}`;
  }
  for (const l of list(s['links'])) {
    const p = attributesProblem(obj(l)['attributes'], 0);
    if (p !== null) return `a link: ${p}`;
  }
  return null;
}

function attributesProblem(kvs: unknown, depth: number): string | null {
  if (kvs === undefined || kvs === null) return null;
  if (!Array.isArray(kvs)) return 'attributes must be a list of { key, value }';
  for (const kv of kvs) {
    const key = obj(kv)['key'];
    if (typeof key !== 'string') return 'an attribute key must be a string';
    const p = anyValueProblem(obj(kv)['value'], depth);
    if (p !== null) return `attribute ${JSON.stringify(key)}: ${p}`;
  }
  return null;
}

/** An AnyValue as OTLP/JSON writes it: one of its fields, of that field's JSON type. */
function anyValueProblem(v: unknown, depth: number): string | null {
  if (v === undefined || v === null) return null;
  if (depth > MAX_VALUE_DEPTH) return `nested deeper than ${MAX_VALUE_DEPTH} levels`;
  if (typeof v !== 'object' || Array.isArray(v)) return 'a value must be an object such as { "stringValue": "..." }';
  const o = v as Record<string, unknown>;
  if (o['stringValue'] !== undefined && o['stringValue'] !== null && typeof o['stringValue'] !== 'string') return 'stringValue must be a string';
  if (o['boolValue'] !== undefined && o['boolValue'] !== null && typeof o['boolValue'] !== 'boolean') return 'boolValue must be true or false';
  const int = o['intValue'];
  if (int !== undefined && int !== null) {
    // The OpenTelemetry SDK's JSON writes an integer as a JSON number, even past 2^53 (its last digits are then lost).
    const digits = typeof int === 'number' && Number.isInteger(int) ? BigInt(int).toString() : typeof int === 'string' && /^-?\d+$/.test(int) ? int : null;
    if (digits === null || BigInt(digits) < INT64_MIN || BigInt(digits) > INT64_MAX) return 'intValue must be a 64-bit integer';
  }
  const dbl = o['doubleValue'];
  if (
    dbl !== undefined &&
    dbl !== null &&
    typeof dbl !== 'number' &&
    !(typeof dbl === 'string' && /^(-?Infinity|NaN|-?\d+(\.\d+)?([eE][-+]?\d+)?)$/.test(dbl))
  ) {
    return 'doubleValue must be a number';
  }
  const bytes = o['bytesValue'];
  if (bytes !== undefined && bytes !== null && !(typeof bytes === 'string' && /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/.test(bytes))) {
    return 'bytesValue must be base64';
  }
  for (const k of ['arrayValue', 'kvlistValue']) {
    const inner = o[k];
    if (inner === undefined || inner === null) continue;
    if (typeof inner !== 'object' || Array.isArray(inner)) return `${k} must be an object with values`;
    const values = (inner as Record<string, unknown>)['values'];
    if (values !== undefined && values !== null && !Array.isArray(values)) return `${k}.values must be a list`;
    if (k === 'kvlistValue') return attributesProblem(values, depth + 1);
    for (const x of list(values)) {
      // Absent in an attribute, a value is empty; in a list it must be there.
      if (typeof x !== 'object' || x === null || Array.isArray(x)) return 'arrayValue.values must be a list of values';
      const p = anyValueProblem(x, depth + 1);
      if (p !== null) return p;
    }
  }
  return null;
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
  const parent = bytesOf(s['parentSpanId']);
  // No parent, or a parent id of zeros (which some exporters write for none): a root.
  const parentSpanId = parent === null || parent.length === 0 || parent.every((b) => b === 0) ? '' : id(parent, 8, 'parentSpanId');
  const status = obj(s['status']);
  const start = text(s['startTimeUnixNano']) || '0';
  const end = text(s['endTimeUnixNano']) || '0';
  if (!/^\d+$/.test(start) || !/^\d+$/.test(end)) throw new Error('startTimeUnixNano and endTimeUnixNano must be integers');
  if (BigInt(start) >= TIME_LIMIT || BigInt(end) >= TIME_LIMIT) throw new Error('times must be nanoseconds since the epoch below 2^63 (the year 2262)');
  if (start === '0') throw new Error('startTimeUnixNano is required');
  if (end === '0') throw new Error('endTimeUnixNano is required');
  const code = text(status['code']);
  return {
    traceId,
    spanId,
    parentSpanId,
    name: text(s['name']),
    kind: text(s['kind']) || 'SPAN_KIND_UNSPECIFIED',
    startTimeUnixNano: start,
    endTimeUnixNano: end,
    attributes: attributes(list(s['attributes']), 0),
    events: list(s['events']).map((e) => ({
      name: text(obj(e)['name']),
      timeUnixNano: text(obj(e)['timeUnixNano']) || '0',
      attributes: attributes(list(obj(e)['attributes']), 0),
    })),
    links: list(s['links']).map((l) => ({
      traceId: hexOf(obj(l)['traceId'], 16),
      spanId: hexOf(obj(l)['spanId'], 8),
      attributes: attributes(list(obj(l)['attributes']), 0),
    })),
    statusCode: STATUS_CODES.includes(code) ? code : 'STATUS_CODE_UNSET',
    statusMessage: text(status['message']),
    resource,
    scope,
  };
}

const STATUS_CODES = ['STATUS_CODE_UNSET', 'STATUS_CODE_OK', 'STATUS_CODE_ERROR'];

/** A bytes field as the decoder gives it (a Buffer, or plain bytes), or null. */
function bytesOf(v: unknown): Buffer | null {
  if (v instanceof Buffer) return v;
  if (v instanceof Uint8Array) return Buffer.from(v.buffer, v.byteOffset, v.length);
  return null;
}

function id(v: unknown, bytes: number, name: string): string {
  const b = bytesOf(v);
  if (b === null || b.length !== bytes) throw new Error(`${name} must be ${bytes} bytes (${bytes * 2} hex digits)`);
  if (b.every((x) => x === 0)) throw new Error(`${name} must not be all zeros`);
  return b.toString('hex');
}

/** A link's id as hex, or empty when it is not an id of that length. */
function hexOf(v: unknown, bytes: number): string {
  const b = bytesOf(v);
  return b !== null && b.length === bytes ? b.toString('hex') : '';
}

function attributes(kvs: readonly unknown[], depth: number): Attributes {
  const out: Attributes = {};
  for (const kv of kvs) {
    const key = text(obj(kv)['key']);
    // Defined, not assigned: a key "__proto__" is an attribute like any other, not the object's prototype.
    Object.defineProperty(out, key, { value: value(obj(obj(kv)['value']), depth), enumerable: true, writable: true, configurable: true });
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
  const bytes = bytesOf(v['bytesValue']);
  if (bytes !== null) return bytes.toString('base64');
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
