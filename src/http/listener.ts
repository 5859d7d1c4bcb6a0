import http from 'node:http';
import https from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import type { Config } from '../config/schema.js';
import type { PrometheusObserver } from '../server/metrics.js';
import type { PgServer } from '../server/server.js';
import type { AuthPolicy } from '../session/auth.js';
import { evidenceBundle, stepReceipt } from './evidence-route.js';
import { SpanIndex } from '../otlp/span-index.js';
import { login, tokenCookie } from './login.js';
import { ingestTraces } from './otlp-route.js';
import { viewerPage } from './viewer-route.js';
import { WireBusy, WireClients } from './wire-clients.js';

/**
 * The HTTP listener: /healthz, /metrics, the OTLP receiver and the viewer, on one port. It follows the wire's
 * rules: without users only loopback clients are served, and with users every request but /healthz bears a
 * user's token; it speaks TLS, with the wire's certificate, whenever it listens beyond the machine.
 */

export interface HttpContext {
  readonly config: Config;
  readonly auth: AuthPolicy;
  readonly clients: WireClients;
  readonly prometheus: PrometheusObserver;
  readonly log: HttpLog;
  readonly verifierKey: () => string;
  /** Which spans each session's steps came from, for the exactly-once check (otlp/span-index.ts). */
  readonly spanIndex: SpanIndex;
}

export interface HttpLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

/** A request whose user the listener knows. */
export interface Authenticated {
  readonly user: string;
  readonly address: string;
}

export class HttpListener {
  private readonly server: http.Server;
  private readonly context: HttpContext;
  private readonly secure: boolean;
  private readonly sockets = new Set<Socket>();

  constructor(
    wire: PgServer,
    config: Config,
    auth: AuthPolicy,
    prometheus: PrometheusObserver,
    secure: { readonly key: Buffer; readonly cert: Buffer } | null,
    /** Why the server is not healthy now (draining, its engine unreachable), or null when it is. */
    private readonly unhealthy: () => string | null,
    log: HttpLog,
    verifierKey: () => string,
  ) {
    this.context = { config, auth, clients: new WireClients(wire, config.database.name), prometheus, log, verifierKey, spanIndex: new SpanIndex() };
    const handle = (req: http.IncomingMessage, res: http.ServerResponse): void => {
      this.handle(req, res).catch((err: unknown) => {
        const busy = err instanceof WireBusy;
        log.warn({ err: (err as Error).message, path: req.url }, busy ? 'HTTP request not served now' : 'HTTP request failed');
        if (!res.headersSent) res.writeHead(busy ? 503 : 500, { 'content-type': 'text/plain', ...(busy ? { 'retry-after': '5' } : {}) });
        res.end(busy ? `${(err as Error).message}\n` : 'internal error\n');
      });
    };
    this.secure = secure !== null;
    this.server = secure === null ? http.createServer(handle) : https.createServer({ key: secure.key, cert: secure.cert }, handle);
    // Node's own lists miss a socket whose request was answered before its body came (a 415, a 413): the stop ends them all.
    this.server.on(secure === null ? 'connection' : 'secureConnection', (socket: Socket) => {
      this.sockets.add(socket);
      socket.once('close', () => this.sockets.delete(socket));
    });
  }

  listen(host: string, port: number): Promise<AddressInfo> {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen({ host, port }, () => {
        this.server.off('error', reject);
        resolve(this.server.address() as AddressInfo);
      });
    });
  }

  /** Stops taking requests; one still open after CLOSE_GRACE_MS (a client that never finishes sending) is cut. */
  async close(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeIdleConnections();
    await this.context.clients.close();
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([closed, new Promise<void>((resolve) => (timer = setTimeout(resolve, CLOSE_GRACE_MS)))]);
    clearTimeout(timer);
    this.server.closeAllConnections();
    for (const socket of this.sockets) socket.destroy();
    await closed;
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    if (path === '/healthz') {
      if (!allow(req, res, ['GET', 'HEAD'])) return;
      const why = this.unhealthy();
      res.writeHead(why === null ? 200 : 503, { 'content-type': 'text/plain' }).end(`${why ?? 'ok'}\n`);
      return;
    }
    const viewer = path === '/' || path.startsWith('/sessions/') || path.startsWith('/receipts/');
    if (path === '/login' && this.context.auth.requiresPassword) {
      await login(req, res, this.context, this.secure);
      return;
    }
    const who = this.authenticate(req, res, viewer);
    if (who === null) return;
    if (viewer) {
      if (!allow(req, res, ['GET', 'HEAD'])) return;
      const url = new URL(req.url ?? '/', 'http://viewer');
      const evidence = /^\/sessions\/([^/]+)\/evidence$/.exec(path);
      const receipt = /^\/receipts\/([0-9a-fA-F-]{36})$/.exec(path);
      const session = evidence === null ? null : decodePathPart(evidence[1] as string);
      if (evidence !== null && session === null)
        res.writeHead(400, { 'content-type': 'text/plain' }).end('the session in the path is not valid percent-encoding\n');
      else if (session !== null) await evidenceBundle(this.context, who, session, url.searchParams.get('since'), res);
      else if (receipt !== null) await stepReceipt(this.context, who, receipt[1] as string, res);
      else await viewerPage(this.context, who, path, url.searchParams, res);
      return;
    }
    if (path === '/metrics') {
      if (!allow(req, res, ['GET', 'HEAD'])) return;
      res.writeHead(200, { 'content-type': this.context.prometheus.registry.contentType }).end(await this.context.prometheus.registry.metrics());
      return;
    }
    if (path === '/v1/traces') {
      if (!allow(req, res, ['POST'])) return;
      const why = this.unhealthy();
      if (why !== null) {
        res.writeHead(503, { 'content-type': 'text/plain', 'retry-after': '5' }).end(`${why}\n`);
        return;
      }
      await ingestTraces(this.context, who, req, res);
      return;
    }
    res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
  }

  /**
   * The request's user, or null once it has been answered 401 (or 403 from beyond loopback without users). A
   * browser on the viewer's pages may carry the token in the cookie its sign-in set, and is sent to sign in without
   * one; nothing else takes the cookie, so that no page elsewhere can make a browser send spans.
   */
  private authenticate(req: http.IncomingMessage, res: http.ServerResponse, viewer: boolean): Authenticated | null {
    const address = req.socket.remoteAddress ?? 'unknown';
    const cookie = viewer ? tokenCookie(req.headers.cookie) : null;
    const r = this.context.auth.httpUser(req.headers.authorization ?? (cookie === null ? undefined : `Bearer ${cookie}`), address);
    if ('user' in r) return { user: r.user, address };
    this.context.prometheus.refusal('HTTP', r.refused);
    if (r.refused === 'not-loopback') {
      res.writeHead(403, { 'content-type': 'text/plain' }).end('no users are configured, so only requests from loopback are served\n');
      return null;
    }
    if (viewer && req.method === 'GET') {
      res.writeHead(303, { location: '/login', 'cache-control': 'no-store' }).end();
      return null;
    }
    res
      .writeHead(401, { 'content-type': 'text/plain', 'www-authenticate': 'Bearer realm="cotwire"' })
      .end(r.refused === 'no-token' ? 'a bearer token is required (Authorization: Bearer <token>)\n' : 'the bearer token is not valid\n');
    return null;
  }
}

const CLOSE_GRACE_MS = 5000;

function decodePathPart(part: string): string | null {
  try {
    return decodeURIComponent(part);
  } catch {
    return null;
  }
}

function allow(req: http.IncomingMessage, res: http.ServerResponse, methods: readonly string[]): boolean {
  if (methods.includes(req.method ?? '')) return true;
  res.writeHead(405, { allow: methods.join(', '), 'content-type': 'text/plain' }).end(`use ${methods.join(' or ')}\n`);
  return false;
}
