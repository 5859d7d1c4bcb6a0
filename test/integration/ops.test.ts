import { DEFAULTS } from '../../src/config/schema.js';
import { describe, expect, it } from 'vitest';
import { startTestServer } from '../fixtures/server.js';

async function get(port: number, path: string): Promise<{ status: number; body: string }> {
  const res = await fetch(`http://127.0.0.1:${port}${path}`);
  return { status: res.status, body: await res.text() };
}

function value(metrics: string, line: string): number {
  const m = new RegExp(`^${line.replace(/[{}"]/g, (c) => `\\${c}`)} (\\S+)$`, 'm').exec(metrics);
  return m === null ? 0 : Number(m[1]);
}

describe('health and metrics', () => {
  it('serves /healthz and /metrics, whose counters move with real traffic', async () => {
    const server = await startTestServer({ http: { host: '127.0.0.1', port: 0 } });
    const port = server.running.httpAddress?.port as number;
    expect(await get(port, '/healthz')).toEqual({ status: 200, body: 'ok\n' });
    const before = (await get(port, '/metrics')).body;
    expect(before).toContain('# TYPE cotwire_connections_open gauge');
    expect(before).toContain('process_cpu_user_seconds_total');
    const c = await server.client();
    await c.query('SELECT 1');
    await c.query("INSERT INTO _cot_steps (session_id, step_type) VALUES ('m', 'Action')");
    await c.query("UPDATE _cot_steps SET content = 'x'").catch(() => undefined);
    await server.running.securityLog.flushed();
    const after = (await get(port, '/metrics')).body;
    expect(value(after, 'cotwire_connections_open')).toBe(1);
    expect(value(after, 'cotwire_connections_total')).toBeGreaterThanOrEqual(1);
    expect(value(after, 'cotwire_statements_total{kind="SELECT",outcome="ok"}')).toBeGreaterThanOrEqual(1);
    expect(value(after, 'cotwire_statements_total{kind="INSERT",outcome="ok"}')).toBe(1);
    expect(value(after, 'cotwire_refusals_total{operation="UPDATE",reason="ledger"}')).toBe(1);
    expect(value(after, 'cotwire_ledger_rows_appended_total')).toBeGreaterThanOrEqual(2);
    expect(value(after, 'cotwire_ledger_append_seconds_count')).toBeGreaterThanOrEqual(1);
    expect(value(after, 'cotwire_group_commit_units_count')).toBeGreaterThanOrEqual(1);
    expect((await get(port, '/nope')).status).toBe(404);
    await server[Symbol.asyncDispose]();
  });

  it('stops even while a client holds an HTTP request open without finishing it', async () => {
    const server = await startTestServer({ http: { host: '127.0.0.1', port: 0 } });
    const port = server.running.httpAddress?.port as number;
    const { connect } = await import('node:net');
    const socket = connect(port, '127.0.0.1');
    await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
    socket.write('POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{');
    socket.on('error', () => undefined);
    // Read what comes (a 415 for the request's type), so that the socket's end is seen when the server cuts it.
    socket.resume();
    const closedSocket = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    // The stop ends, and the unfinished request's socket is cut (about 5 s after the stop began).
    await server[Symbol.asyncDispose]();
    await closedSocket;
  });

  it('answers 503 while the server drains', async () => {
    const server = await startTestServer({
      http: { host: '127.0.0.1', port: 0 },
      limits: { ...DEFAULTS.limits, maxMessageSize: 1 << 20, maxConnections: 10, shutdownGraceMs: 1500 },
    });
    const port = server.running.httpAddress?.port as number;
    const c = await server.client();
    const long = c.query('SELECT count(*) FROM range(100000000000) t(x) WHERE x % 7 = 3').catch(() => undefined);
    await new Promise((r) => setTimeout(r, 100));
    const closing = server.running.close();
    await new Promise((r) => setTimeout(r, 100));
    expect((await get(port, '/healthz')).status).toBe(503);
    await closing;
    await long;
    await server[Symbol.asyncDispose]();
  });
});
