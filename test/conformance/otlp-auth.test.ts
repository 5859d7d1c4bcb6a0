import { createHash, randomBytes } from 'node:crypto';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { BasicTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { countOf, PASSWORD, user, useConformanceServer } from '../fixtures/conformance.js';

/**
 * The HTTP listener with users configured: every request but /healthz bears a user's token, and the spans it
 * sends are appended as that user, with its role and its identity, exactly as its INSERTs over the wire would be.
 */
const token = (): string => `cwt_${randomBytes(32).toString('base64url')}`;
const hashOf = (t: string): string => `sha256:${createHash('sha256').update(t).digest('hex')}`;
const tokens = { planner: token(), acme: token(), reader: token() };

const s = useConformanceServer({
  otlp: { nonGenAiSpans: 'keep', maxBodyBytes: 16 * 1024 * 1024 },
  users: [
    user('admin', 'admin'),
    { ...user('planner-exporter', 'writer', { agentId: 'planner' }), token: hashOf(tokens.planner) },
    // A user with a token and no password reaches the HTTP listener only.
    { name: 'acme-exporter', password: null, role: 'writer', agentId: null, orgId: 'acme', token: hashOf(tokens.acme) },
    { ...user('dashboard', 'reader'), token: hashOf(tokens.reader) },
  ],
});
const base = (): string => `http://127.0.0.1:${s.server.running.httpAddress?.port}`;

/** One agent span of `conversation`, exported with `headers`; the exporter's outcome. */
async function exportSpan(conversation: string, headers: Record<string, string>): Promise<{ code: number; error?: Error }> {
  let outcome: { code: number; error?: Error } = { code: -1 };
  const exporter = new OTLPTraceExporter({ url: `${base()}/v1/traces`, headers });
  const provider = new BasicTracerProvider({
    spanProcessors: [
      new BatchSpanProcessor({
        export: (spans, done) =>
          exporter.export(spans, (r) => {
            outcome = r;
            done(r);
          }),
        shutdown: () => exporter.shutdown(),
      }),
    ],
  });
  provider
    .getTracer('t')
    .startSpan('invoke_agent Planner', {
      attributes: { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'Planner', 'gen_ai.conversation.id': conversation },
    })
    .end();
  // A refused export fails the flush too: the outcome says how.
  await provider.forceFlush().catch(() => undefined);
  await provider.shutdown().catch(() => undefined);
  return outcome;
}

describe('the HTTP listener with users', () => {
  it('answers /healthz to anyone, and every other path only with a valid token', async () => {
    expect((await fetch(`${base()}/healthz`)).status).toBe(200);
    const anonymous = await fetch(`${base()}/metrics`);
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get('www-authenticate')).toBe('Bearer realm="cotwire"');
    expect((await fetch(`${base()}/metrics`, { headers: { authorization: `Bearer ${token()}` } })).status).toBe(401);
    expect((await fetch(`${base()}/metrics`, { headers: { authorization: `Bearer ${tokens.reader}` } })).status).toBe(200);
  });

  it('refuses spans without a token, or from a reader, and writes nothing', async () => {
    const admin = await s.as('admin');
    expect((await exportSpan('conv-anonymous', {})).code).not.toBe(0);
    const reader = await exportSpan('conv-reader', { Authorization: `Bearer ${tokens.reader}` });
    expect(reader.code).not.toBe(0);
    expect(String(reader.error?.message)).toMatch(/Forbidden|403|permission/i);
    expect(await countOf(admin, "SELECT count(*) FROM _cot_steps WHERE session_id IN ('conv-anonymous', 'conv-reader')")).toBe(0);
  });

  it('stamps the identity of the token holder on its spans, as on the wire', async () => {
    expect((await exportSpan('conv-planner', { Authorization: `Bearer ${tokens.planner}` })).code).toBe(0);
    expect((await exportSpan('conv-acme', { Authorization: `Bearer ${tokens.acme}` })).code).toBe(0);
    const admin = await s.as('admin');
    const rows = (
      await admin.query(
        "SELECT session_id, agent_id, org_id, metadata->'gen_ai'->>'agent' AS span_agent FROM _cot_steps WHERE session_id IN ('conv-planner', 'conv-acme') ORDER BY session_id",
      )
    ).rows;
    expect(rows).toEqual([
      // No agent_id of its own: the span's agent is the step's.
      { session_id: 'conv-acme', agent_id: 'Planner', org_id: 'acme', span_agent: null },
      // The user's agent_id is stamped; the agent the span named is kept beside it.
      { session_id: 'conv-planner', agent_id: 'planner', org_id: null, span_agent: 'Planner' },
    ]);
  });

  it('keeps spans that are not GenAI spans as Observation steps under otlp.nonGenAiSpans: keep', async () => {
    const exporter = new OTLPTraceExporter({ url: `${base()}/v1/traces`, headers: { Authorization: `Bearer ${tokens.acme}` } });
    const provider = new BasicTracerProvider({ spanProcessors: [new BatchSpanProcessor(exporter)] });
    provider
      .getTracer('web')
      .startSpan('GET /orders/42', { attributes: { 'http.request.method': 'GET', 'session.id': 'conv-http' } })
      .end();
    await provider.forceFlush();
    await provider.shutdown();
    const admin = await s.as('admin');
    const rows = (
      await admin.query(
        "SELECT step_type, content, metadata->'otel'->'attributes'->>'http.request.method' AS method FROM _cot_steps WHERE session_id = 'conv-http'",
      )
    ).rows;
    expect(rows).toEqual([{ step_type: 'Observation', content: 'GET /orders/42', method: 'GET' }]);
  });

  it('lets a user with a token and no password nowhere near the wire', async () => {
    const c = new pg.Client({ ...s.server.connectionOptions({ user: 'acme-exporter', password: PASSWORD }) });
    c.on('error', () => undefined);
    await expect(c.connect()).rejects.toMatchObject({ code: '28P01' });
  });
});
