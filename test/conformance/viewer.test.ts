import { createHash, randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { user, useConformanceServer } from '../fixtures/conformance.js';

/**
 * The viewer's pages are the signed-in user's SQL: a user of one organisation sees its organisation's sessions
 * only, on the list and by a session's address, as its queries over the wire do.
 */
const token = (): string => `cwt_${randomBytes(32).toString('base64url')}`;
const hashOf = (t: string): string => `sha256:${createHash('sha256').update(t).digest('hex')}`;
const tokens = { acme: token(), globex: token(), admin: token() };

const s = useConformanceServer({
  users: [
    { ...user('admin', 'admin'), token: hashOf(tokens.admin) },
    { ...user('acme-writer', 'writer', { orgId: 'acme' }) },
    { ...user('globex-writer', 'writer', { orgId: 'globex' }) },
    { ...user('acme-reader', 'reader', { orgId: 'acme' }), token: hashOf(tokens.acme) },
    { ...user('globex-reader', 'reader', { orgId: 'globex' }), token: hashOf(tokens.globex) },
  ],
});
const base = (): string => `http://127.0.0.1:${s.server.running.httpAddress?.port}`;

async function get(path: string, bearer: string | null, cookie?: string): Promise<{ status: number; body: string; location: string | null }> {
  const headers: Record<string, string> = {};
  if (bearer !== null) headers['authorization'] = `Bearer ${bearer}`;
  if (cookie !== undefined) headers['cookie'] = cookie;
  const res = await fetch(`${base()}${path}`, { headers, redirect: 'manual' });
  return { status: res.status, body: await res.text(), location: res.headers.get('location') };
}

const sessionsIn = (body: string): string[] => [...body.matchAll(/<a class="session" href="[^"]*">([^<]*)<\/a>/g)].map((m) => m[1] as string).sort();

describe('the viewer, as each user sees it', () => {
  it('lists only the sessions of the signed-in user organisation, and shows no other one by its address', async () => {
    await (await s.as('acme-writer')).query("INSERT INTO _cot_steps (session_id, step_type, content) VALUES ('acme-1', 'Observation', 'acme saw')");
    await (await s.as('globex-writer')).query("INSERT INTO _cot_steps (session_id, step_type, content) VALUES ('globex-1', 'Observation', 'globex secret')");
    expect(sessionsIn((await get('/', tokens.acme)).body)).toEqual(['acme-1']);
    expect(sessionsIn((await get('/', tokens.globex)).body)).toEqual(['globex-1']);
    expect(sessionsIn((await get('/', tokens.admin)).body)).toEqual(['acme-1', 'globex-1']);
    const foreign = await get('/sessions/globex-1', tokens.acme);
    expect(foreign.status).toBe(200);
    expect(foreign.body).not.toContain('globex secret');
    expect(foreign.body).toContain('No steps');
    expect((await get('/sessions/globex-1', tokens.globex)).body).toContain('globex secret');
    // Nor its evidence, nor a step receipt.
    expect((await get('/sessions/globex-1/evidence', tokens.acme)).status).toBe(404);
    const [step] = (await (await s.as('admin')).query("SELECT CAST(trace_id AS text) AS t FROM _cot_steps WHERE session_id = 'globex-1'")).rows;
    expect((await get(`/receipts/${step.t}`, tokens.acme)).status).toBe(404);
  });

  it('sends a browser without a token to sign in, and signs it in with a cookie that only the pages read', async () => {
    expect(await get('/', null)).toMatchObject({ status: 303, location: '/login' });
    const bad = await fetch(`${base()}/login`, { method: 'POST', body: new URLSearchParams({ token: token() }), redirect: 'manual' });
    expect(bad.status).toBe(401);
    const signed = await fetch(`${base()}/login`, { method: 'POST', body: new URLSearchParams({ token: tokens.acme }), redirect: 'manual' });
    expect(signed.status).toBe(303);
    const cookie = (signed.headers.get('set-cookie') ?? '').split(';')[0] as string;
    expect(signed.headers.get('set-cookie')).toMatch(/HttpOnly; SameSite=Strict/);
    expect(sessionsIn((await get('/', null, cookie)).body)).toEqual(['acme-1']);
    // The cookie is not a token for anything but the pages.
    expect((await get('/metrics', null, cookie)).status).toBe(401);
    const spans = await fetch(`${base()}/v1/traces`, { method: 'POST', headers: { cookie, 'content-type': 'application/json' }, body: '{}' });
    expect(spans.status).toBe(401);
  });

  it('answers a session path that is not valid percent-encoding with 400 or 404, never 500', async () => {
    expect((await get('/sessions/%E0%A4%A/evidence', tokens.admin)).status).toBe(400);
    expect((await get('/sessions/%E0%A4%A', tokens.admin)).status).toBe(404);
  });

  it('sends pages that run no script and load nothing from elsewhere', async () => {
    const res = await fetch(`${base()}/`, { headers: { authorization: `Bearer ${tokens.admin}` } });
    expect(res.headers.get('content-security-policy')).toContain("default-src 'none'");
    expect(await res.text()).not.toMatch(/<script|https?:\/\/(?!127\.0\.0\.1)/);
  });
});
