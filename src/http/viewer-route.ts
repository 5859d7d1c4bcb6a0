import type http from 'node:http';
import type { WireLease } from './wire-clients.js';
import { STEP_TYPES } from '../ledger/chain/schema.js';
import { stepTypeColumn } from '../ledger/sql-functions.js';
import { PAGE_HEADERS } from '../viewer/html.js';
import {
  type ListFilters,
  messagePage,
  PAGE_SIZE,
  type SearchHit,
  type SessionSummary,
  sessionListPage,
  sessionPage,
  type StepView,
  type Verdict,
} from '../viewer/pages.js';
import type { Authenticated, HttpContext } from './listener.js';

/**
 * The viewer's pages, read over the wire as the signed-in user: its role and its organisation's scoping apply to
 * every row shown, as they do to its SQL, because these are its SQL (cot_session_summary, cot_verify,
 * cot_replay, cot_search).
 */
export async function viewerPage(ctx: HttpContext, who: Authenticated, path: string, search: URLSearchParams, res: http.ServerResponse): Promise<void> {
  const lease = await ctx.clients.acquire(who.user, who.address);
  let broken = true;
  try {
    const c = lease.client;
    let body: string;
    let status = 200;
    if (path === '/') {
      body = await listPage(c, who.user, search);
    } else {
      const id = sessionOf(path);
      if (id === null) {
        status = 404;
        body = messagePage(who.user, 'not found', `There is no page at ${path}.`);
      } else {
        body = await sessionView(c, who.user, id, search.get('view') === 'tree' ? 'tree' : 'timeline');
      }
    }
    broken = false;
    res.writeHead(status, PAGE_HEADERS).end(body);
  } catch (err) {
    const e = err as { message?: string; code?: string };
    // An error of the user's SQL (a reader's refusal, a bad filter) is the page's answer; anything else is the listener's.
    if (typeof e.code !== 'string') throw err;
    broken = false;
    res.writeHead(e.code === '42501' ? 403 : 400, PAGE_HEADERS).end(messagePage(who.user, 'error', `${e.message ?? ''} (SQLSTATE ${e.code})`));
  } finally {
    lease.release(broken);
  }
}

function sessionOf(path: string): string | null {
  const m = /^\/sessions\/([^/]+)$/.exec(path);
  if (m === null) return null;
  try {
    return decodeURIComponent(m[1] as string);
  } catch {
    return null;
  }
}

const DATETIME = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2})?)?$/;

async function listPage(c: WireLease['client'], user: string, search: URLSearchParams): Promise<string> {
  const type = search.get('type') ?? '';
  const filters: ListFilters = {
    agent: search.get('agent') ?? '',
    type: (STEP_TYPES as readonly string[]).includes(type) ? type : '',
    from: DATETIME.test(search.get('from') ?? '') ? (search.get('from') as string) : '',
    to: DATETIME.test(search.get('to') ?? '') ? (search.get('to') as string) : '',
    q: search.get('q') ?? '',
    offset: Math.max(0, Math.min(1_000_000, Number.parseInt(search.get('offset') ?? '0', 10) || 0)),
  };
  const where: string[] = [];
  const params: unknown[] = [];
  const param = (v: unknown): string => {
    params.push(v);
    return `$${params.length}`;
  };
  if (filters.agent !== '') where.push(`agent_id = CAST(${param(filters.agent)} AS text)`);
  if (filters.type !== '') where.push(`${stepTypeColumn(filters.type)} > 0`);
  if (filters.from !== '') where.push(`last_step_at >= CAST(${param(filters.from.replace('T', ' '))} AS timestamptz)`);
  if (filters.to !== '') where.push(`first_step_at <= CAST(${param(filters.to.replace('T', ' '))} AS timestamptz)`);
  const r = await c.query(
    `SELECT session_id, agent_id, step_count, CAST(first_step_at AS text) AS first_step_at, CAST(last_step_at AS text) AS last_step_at
     FROM cot_session_summary() ${where.length === 0 ? '' : `WHERE ${where.join(' AND ')}`}
     ORDER BY last_step_at DESC, session_id LIMIT ${PAGE_SIZE + 1} OFFSET ${filters.offset}`,
    params,
  );
  const rows = r.rows.slice(0, PAGE_SIZE) as Array<Record<string, unknown>>;
  const sessions: SessionSummary[] = [];
  for (const row of rows) {
    const id = String(row['session_id']);
    sessions.push({
      sessionId: id,
      agentId: row['agent_id'] === null ? null : String(row['agent_id']),
      stepCount: Number(row['step_count']),
      firstStepAt: String(row['first_step_at']),
      lastStepAt: String(row['last_step_at']),
      verdict: await verdictOf(c, id),
    });
  }
  let hits: SearchHit[] | string | null = null;
  if (filters.q !== '') {
    try {
      const h = await c.query('SELECT session_id, step_index, step_type, content, similarity FROM cot_search($1, 20)', [filters.q]);
      hits = (h.rows as Array<Record<string, unknown>>).map((x) => ({
        sessionId: String(x['session_id']),
        stepIndex: Number(x['step_index']),
        stepType: String(x['step_type']),
        content: x['content'] === null ? null : String(x['content']),
        similarity: Number(x['similarity']),
      }));
    } catch (err) {
      hits = (err as Error).message;
    }
  }
  return sessionListPage(user, STEP_TYPES, filters, sessions, r.rows.length > PAGE_SIZE, hits);
}

async function verdictOf(c: WireLease['client'], session: string): Promise<Verdict> {
  const r = await c.query('SELECT valid, step_count, first_broken_index, break_kind FROM cot_verify($1)', [session]);
  const v = (r.rows[0] ?? {}) as Record<string, unknown>;
  return {
    valid: v['valid'] === true,
    stepCount: Number(v['step_count'] ?? 0),
    firstBrokenIndex: v['first_broken_index'] === null || v['first_broken_index'] === undefined ? null : Number(v['first_broken_index']),
    breakKind: v['break_kind'] === null || v['break_kind'] === undefined ? null : String(v['break_kind']),
  };
}

async function sessionView(c: WireLease['client'], user: string, session: string, view: 'timeline' | 'tree'): Promise<string> {
  const verdict = await verdictOf(c, session);
  const r = await c.query(
    `SELECT CAST(trace_id AS text) AS trace_id, step_index, step_type, agent_id, model, token_count, duration_ms, content, input_data, output_data,
            metadata, CAST(created_at AS text) AS created_at, CAST(parent_trace_id AS text) AS parent_trace_id
     FROM cot_replay($1)`,
    [session],
  );
  const redactions = await redactedColumns(c, session);
  const steps: StepView[] = (r.rows as Array<Record<string, unknown>>).map((x) => ({
    traceId: String(x['trace_id']),
    stepIndex: Number(x['step_index']),
    stepType: String(x['step_type']),
    agentId: x['agent_id'] === null ? null : String(x['agent_id']),
    model: x['model'] === null ? null : String(x['model']),
    tokenCount: x['token_count'] === null ? null : Number(x['token_count']),
    durationMs: x['duration_ms'] === null ? null : Number(x['duration_ms']),
    content: x['content'] === null ? null : String(x['content']),
    input: parsed(x['input_data']),
    output: parsed(x['output_data']),
    metadata: (parsed(x['metadata']) as Record<string, unknown> | null) ?? null,
    createdAt: String(x['created_at']),
    parentTraceId: x['parent_trace_id'] === null ? null : String(x['parent_trace_id']),
    redacted: redactions.get(String(x['trace_id'])) ?? new Set(),
  }));
  return sessionPage(user, session, verdict, steps, view);
}

/** The session's redacted values, by step and column, from the record every redaction leaves. */
async function redactedColumns(c: WireLease['client'], session: string): Promise<Map<string, Set<string>>> {
  const r = await c.query(
    `SELECT CAST(target_trace_id AS text) AS step, column_name FROM _cot_redactions WHERE target_chain_key = $1 AND ledger LIKE '%._cot_steps'`,
    [session],
  );
  const out = new Map<string, Set<string>>();
  for (const row of r.rows as Array<Record<string, unknown>>) {
    const set = out.get(String(row['step'])) ?? new Set<string>();
    set.add(String(row['column_name']));
    out.set(String(row['step']), set);
  }
  return out;
}

/** A json column's value as a driver hands it: parsed already (jsonb, json), or the text. */
function parsed(v: unknown): unknown {
  if (typeof v !== 'string') return v ?? null;
  try {
    return JSON.parse(v) as unknown;
  } catch {
    return v;
  }
}
