import type http from 'node:http';
import { loginPage } from '../viewer/pages.js';
import { PAGE_HEADERS } from '../viewer/html.js';
import type { HttpContext } from './listener.js';

/**
 * Signing in to the viewer with a user's token: a browser cannot send a bearer header when it follows a link, so
 * the token goes into a cookie that only the viewer's pages read (HttpOnly, SameSite=Strict, Secure over TLS).
 */

const COOKIE = 'cotwire_token';
const MAX_FORM_BYTES = 4096;

export function tokenCookie(header: string | undefined): string | null {
  for (const part of (header ?? '').split(';')) {
    const [name, ...rest] = part.trim().split('=');
    if (name === COOKIE) return decodeURIComponent(rest.join('='));
  }
  return null;
}

export async function login(req: http.IncomingMessage, res: http.ServerResponse, ctx: HttpContext, secure: boolean): Promise<void> {
  if (req.method === 'GET' || req.method === 'HEAD') {
    res.writeHead(200, PAGE_HEADERS).end(loginPage(null));
    return;
  }
  if (req.method !== 'POST') {
    res.writeHead(405, { allow: 'GET, POST', 'content-type': 'text/plain' }).end('use GET or POST\n');
    return;
  }
  const form = await readForm(req);
  const token = form?.get('token') ?? '';
  const who = ctx.auth.httpUser(`Bearer ${token}`, req.socket.remoteAddress ?? 'unknown');
  if (!('user' in who)) {
    ctx.prometheus.refusal('HTTP', 'bad-token');
    res.writeHead(401, PAGE_HEADERS).end(loginPage('That token is not valid.'));
    return;
  }
  const attributes = ['HttpOnly', 'SameSite=Strict', 'Path=/', ...(secure ? ['Secure'] : [])].join('; ');
  res.writeHead(303, { location: '/', 'set-cookie': `${COOKIE}=${encodeURIComponent(token)}; ${attributes}`, 'cache-control': 'no-store' }).end();
}

async function readForm(req: http.IncomingMessage): Promise<URLSearchParams | null> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_FORM_BYTES) return null;
    chunks.push(chunk as Buffer);
  }
  return new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
}
