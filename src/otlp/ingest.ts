import { createHash } from 'node:crypto';
import type { DecodedRequest, OtlpSpan } from './decode.js';
import { isGenAiSpan, stepOf, type StepDraft } from './genai.js';
import { type SpanIndex, spanKey } from './span-index.js';

/**
 * Spans into `_cot_steps`, as a client of the wire: every row is an INSERT that the guard, the roles, identity
 * stamping, tenants and the writer treat as any client's. Exactly once per span: each session's spans are taken
 * under an advisory lock on the session (held across instances on a PostgreSQL engine), and a span whose
 * trace and span ids a step of its session already holds is not appended again.
 */

/** What the ingest asks of a connection: node-postgres' `query`. */
export interface SqlClient {
  query(text: string, values?: unknown[]): Promise<{ rows: Array<Record<string, unknown>> }>;
}

export interface IngestOptions {
  /** `keep` makes an Observation of a span that is not a GenAI span; `drop` counts it. */
  readonly nonGenAiSpans: 'drop' | 'keep';
  /** The user's appends are stamped with its own agent_id: the span's agent is kept in metadata instead. */
  readonly stampedAgent: boolean;
  /** The largest content the ledger takes, in bytes; a longer text is cut there (the whole is in output_data). */
  readonly maxContentBytes: number;
  /** The spans each session's steps came from, kept between requests; `user` is whose reads fill it. */
  readonly index: SpanIndex;
  readonly user: string;
}

export interface IngestResult {
  readonly appended: number;
  /** Already in the ledger: a retried export. */
  readonly duplicates: number;
  /** Not GenAI spans, under `drop`. */
  readonly dropped: number;
  /** Refused, with why: the spans the request could not take. */
  readonly rejected: ReadonlyArray<{ readonly span: string; readonly reason: string; readonly sqlstate: string | null }>;
}

/** An error of the wire that a later try may not meet: the exporter should send the batch again (503). */
export class IngestUnavailable extends Error {}

/** Rows per INSERT: far below the 65,535 parameters a statement may have. */
const ROWS_PER_STATEMENT = 1000;

const COLUMNS = ['session_id', 'step_type', 'content', 'input_data', 'output_data', 'duration_ms', 'token_count', 'model', 'metadata', 'parent_trace_id'];

export async function ingestSpans(request: DecodedRequest, client: SqlClient, options: IngestOptions): Promise<IngestResult> {
  const rejected: Array<IngestResult['rejected'][number]> = request.invalid.map((s) => ({ span: s.at, reason: s.reason, sqlstate: null }));
  const byId = new Map<string, OtlpSpan>();
  for (const s of request.spans) if (!byId.has(spanKey(s.traceId, s.spanId))) byId.set(spanKey(s.traceId, s.spanId), s);
  let dropped = 0;
  const drafts: StepDraft[] = [];
  for (const span of byId.values()) {
    if (options.nonGenAiSpans === 'drop' && !isGenAiSpan(span)) dropped++;
    else drafts.push(stepOf(span));
  }
  const steps = resolve(drafts, byId);
  if (steps.length === 0) return { appended: 0, duplicates: request.spans.length - byId.size, dropped, rejected };

  const sessions = [...new Set(steps.map((s) => s.session))].sort();
  const locks = sessions.map(lockKey);
  // The keys are written as constants: a statement that locks constant keys waits for them on either engine.
  for (const k of locks) await wire(() => client.query(`SELECT pg_advisory_lock(${k})`));
  try {
    const known = new Map<string, string>();
    for (const session of sessions) for (const [k, v] of await wire(() => options.index.of(client, options.user, session))) known.set(k, v);
    const fresh = steps.filter((s) => !known.has(spanKey(s.draft.span.traceId, s.draft.span.spanId)));
    const duplicates = request.spans.length - byId.size + (steps.length - fresh.length);
    let appended = 0;
    for (const batch of statements(fresh)) appended += await append(client, batch, known, options, rejected);
    return { appended, duplicates, dropped, rejected };
  } finally {
    for (const k of locks.reverse()) await client.query(`SELECT pg_advisory_unlock(${k})`).catch(() => undefined);
  }
}

interface Step {
  readonly draft: StepDraft;
  readonly session: string;
  readonly agent: string | null;
  /** The span whose step this one's parent_trace_id names: its nearest ancestor that makes a step. */
  readonly parentSpan: string | null;
}

/**
 * Each span's session and agent, where it names none: the conversation another span of its trace in the batch
 * names (else the trace id), and the agent of its nearest ancestor that names one.
 */
function resolve(drafts: readonly StepDraft[], byId: ReadonlyMap<string, OtlpSpan>): Step[] {
  const conversationOfTrace = new Map<string, string>();
  for (const d of drafts) if (d.conversation !== null && !conversationOfTrace.has(d.span.traceId)) conversationOfTrace.set(d.span.traceId, d.conversation);
  const draftOf = new Map(drafts.map((d) => [spanKey(d.span.traceId, d.span.spanId), d]));
  const ancestors = function* (span: OtlpSpan): Generator<OtlpSpan> {
    let at = span;
    for (let depth = 0; depth < 256 && at.parentSpanId !== ''; depth++) {
      const parent = byId.get(spanKey(at.traceId, at.parentSpanId));
      if (parent === undefined) return;
      yield parent;
      at = parent;
    }
  };
  return drafts.map((d) => {
    let agent = d.agent;
    let parentSpan: string | null = null;
    for (const a of ancestors(d.span)) {
      const ad = draftOf.get(spanKey(a.traceId, a.spanId));
      if (ad === undefined) continue;
      parentSpan ??= a.spanId;
      agent ??= ad.agent;
      if (agent !== null) break;
    }
    // A parent the batch does not hold may be in the ledger already.
    if (parentSpan === null && d.span.parentSpanId !== '' && !byId.has(spanKey(d.span.traceId, d.span.parentSpanId))) parentSpan = d.span.parentSpanId;
    return { draft: d, session: d.conversation ?? conversationOfTrace.get(d.span.traceId) ?? d.span.traceId, agent, parentSpan };
  });
}

/** Nanoseconds in a millisecond, the resolution of many SDKs' start times. */
const MILLISECOND = 1_000_000n;

/**
 * Which of two spans stamped with the same start came first. OpenTelemetry's JavaScript SDK stamps a start
 * with the wall clock's milliseconds and an end as that start plus the span's duration measured in
 * nanoseconds, so a tie says only that both began within one millisecond, and their ends compare their
 * durations, not when they ended. A parent began first. A span of under a millisecond may have run and
 * ended before the other began (a quick tool call before the model call that reads its result); one that
 * lasted longer cannot have, so it overlapped the other's start: of two such, the longer holds the other.
 * Two quick ones keep the order the exporter sent them in, which is the order they ended in.
 */
function startTie(a: OtlpSpan, b: OtlpSpan): number {
  if (b.parentSpanId === a.spanId && b.traceId === a.traceId) return -1;
  if (a.parentSpanId === b.spanId && a.traceId === b.traceId) return 1;
  const aLasted = BigInt(a.endTimeUnixNano) - BigInt(a.startTimeUnixNano);
  const bLasted = BigInt(b.endTimeUnixNano) - BigInt(b.startTimeUnixNano);
  const [aQuick, bQuick] = [aLasted < MILLISECOND, bLasted < MILLISECOND];
  if (aQuick && bQuick) return 0;
  if (aQuick !== bQuick) return aQuick ? -1 : 1;
  return aLasted > bLasted ? -1 : aLasted < bLasted ? 1 : 0;
}

/**
 * The new steps in the order of their spans' start (ties: startTie), cut into INSERTs so that a step's parent
 * is appended by an earlier statement than the step (parent_trace_id must name a step that exists).
 */
function statements(steps: readonly Step[]): Step[][] {
  const ordered = [...steps].sort((a, b) => {
    const x = BigInt(a.draft.span.startTimeUnixNano);
    const y = BigInt(b.draft.span.startTimeUnixNano);
    return x !== y ? (x < y ? -1 : 1) : startTie(a.draft.span, b.draft.span);
  });
  const out: Step[][] = [];
  let current: Step[] = [];
  let inCurrent = new Set<string>();
  for (const s of ordered) {
    const parentHere = s.parentSpan !== null && inCurrent.has(spanKey(s.draft.span.traceId, s.parentSpan));
    if (parentHere || current.length >= ROWS_PER_STATEMENT) {
      out.push(current);
      current = [];
      inCurrent = new Set();
    }
    current.push(s);
    inCurrent.add(spanKey(s.draft.span.traceId, s.draft.span.spanId));
  }
  if (current.length > 0) out.push(current);
  return out;
}

/**
 * One INSERT of the steps; when the wire refuses it for a reason of its rows, each row again on its own, so that
 * one bad span does not take the others with it. Returns how many were appended; `known` learns their trace_ids.
 */
async function append(
  client: SqlClient,
  steps: readonly Step[],
  known: Map<string, string>,
  options: IngestOptions,
  rejected: Array<IngestResult['rejected'][number]>,
): Promise<number> {
  try {
    await insert(client, steps, known, options);
    return steps.length;
  } catch (err) {
    if (err instanceof IngestUnavailable) throw err;
    if (steps.length === 1) {
      const e = err as { message?: string; code?: string };
      rejected.push({ span: describe(steps[0] as Step), reason: e.message ?? String(err), sqlstate: e.code ?? null });
      return 0;
    }
  }
  let appended = 0;
  for (const s of steps) appended += await append(client, [s], known, options, rejected);
  return appended;
}

async function insert(client: SqlClient, steps: readonly Step[], known: Map<string, string>, options: IngestOptions): Promise<void> {
  const columns = options.stampedAgent ? COLUMNS : [...COLUMNS, 'agent_id'];
  const values: unknown[] = [];
  const rows = steps.map((s) => {
    const d = s.draft;
    const parent = s.parentSpan === null ? null : (known.get(spanKey(d.span.traceId, s.parentSpan)) ?? null);
    const metadata = options.stampedAgent && s.agent !== null ? { ...d.metadata, gen_ai: { ...(d.metadata['gen_ai'] as object), agent: s.agent } } : d.metadata;
    const row = [
      s.session,
      d.stepType,
      cut(d.content, options.maxContentBytes),
      d.input === null ? null : JSON.stringify(d.input),
      d.output === null ? null : JSON.stringify(d.output),
      d.durationMs,
      d.tokens,
      d.model,
      JSON.stringify(metadata),
      parent,
      ...(options.stampedAgent ? [] : [s.agent]),
    ];
    const at = values.length;
    values.push(...row);
    return `(${row.map((_, i) => `$${at + i + 1}`).join(', ')})`;
  });
  const r = await wire(() => client.query(`INSERT INTO _cot_steps (${columns.join(', ')}) VALUES ${rows.join(', ')} RETURNING trace_id, step_index`, values));
  // The writer returns the rows in the order they were given.
  const bySession = new Map<string, Array<readonly [string, string, number]>>();
  r.rows.forEach((row, i) => {
    const s = steps[i] as Step;
    const k = spanKey(s.draft.span.traceId, s.draft.span.spanId);
    known.set(k, String(row['trace_id']));
    const list = bySession.get(s.session) ?? [];
    list.push([k, String(row['trace_id']), Number(row['step_index'])]);
    bySession.set(s.session, list);
  });
  for (const [session, added] of bySession) options.index.appended(options.user, session, added);
}

/** Runs a call of the wire; a failure that trying again later may cure becomes IngestUnavailable. */
async function wire<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    const transient = typeof code !== 'string' || /^(08|53|57|58|40|55P03)/.test(code);
    if (transient) throw new IngestUnavailable((err as Error).message ?? String(err));
    throw err;
  }
}

/** Text cut to at most `max` bytes of UTF-8, at a character's boundary, with an ellipsis when cut. */
function cut(text: string, max: number): string {
  if (Buffer.byteLength(text, 'utf8') <= max) return text;
  const bytes = Buffer.from(text, 'utf8');
  let end = Math.max(0, max - 3);
  // Back off to the start of a character: a continuation byte is 10xxxxxx.
  while (end > 0 && ((bytes[end] ?? 0) & 0xc0) === 0x80) end--;
  return `${bytes.subarray(0, end).toString('utf8')}…`;
}

function describe(s: Step): string {
  return `span ${s.draft.span.spanId} of trace ${s.draft.span.traceId} (${s.draft.span.name})`;
}

/** The advisory lock a session's ingest holds: 64 bits of SHA-256, as PostgreSQL's bigint keys are. */
function lockKey(session: string): bigint {
  return createHash('sha256').update(`cotwire.otlp\0${session}`).digest().readBigInt64BE(0);
}
