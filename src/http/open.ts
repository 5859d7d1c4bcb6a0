import type { AddressInfo } from 'node:net';
import type { Config } from '../config/schema.js';
import type { DisposeStack } from '../server/dispose-stack.js';
import type { PrometheusObserver } from '../server/metrics.js';
import type { PgServer } from '../server/server.js';
import { authPolicy, isLoopbackHost, StartupError, type TlsFiles } from '../server/startup.js';
import { HttpListener, type HttpLog } from './listener.js';

/**
 * The HTTP listener (/healthz, /metrics, OTLP, the viewer), unless http.port is off; closed at the unwind. Beyond
 * loopback it needs users (their tokens) and TLS, as the wire needs users.
 */
export interface HttpParts {
  readonly prometheus: PrometheusObserver | null;
  readonly server: PgServer;
  readonly config: Config;
  readonly tls: TlsFiles | null;
  readonly log: HttpLog;
  readonly stack: DisposeStack;
  /** Whether what the server stands on answers (a PostgreSQL engine); /healthz says 503 while it does not. */
  readonly engineReachable?: () => boolean;
  /** The checkpoints' verifier key now, which evidence bundles name. */
  readonly verifierKey: () => string;
}

export async function openHttp(parts: HttpParts): Promise<AddressInfo | null> {
  const { prometheus, server, config, tls: tlsFiles, log, stack, verifierKey } = parts;
  const engineReachable = parts.engineReachable ?? ((): boolean => true);
  const { host, port } = config.http;
  if (prometheus === null || port === null) return null;
  if (!isLoopbackHost(host)) {
    if (config.users.length === 0) {
      throw new StartupError(
        `refusing to serve HTTP on ${host} without authentication: no users are configured. Give users tokens (see \`cotwire token\`), or set http.host to 127.0.0.1.`,
      );
    }
    if (tlsFiles === null) {
      throw new StartupError(
        `refusing to serve HTTP on ${host} without TLS: set tls.key and tls.cert (the wire's certificate serves both), or set http.host to 127.0.0.1.`,
      );
    }
  }
  const listener = new HttpListener(
    server,
    config,
    authPolicy(config),
    prometheus,
    isLoopbackHost(host) ? null : tlsFiles,
    () => (!server.isListening ? 'draining' : engineReachable() ? null : 'engine unreachable'),
    log,
    verifierKey,
  );
  try {
    const address = await listener.listen(host, port);
    stack.defer(() => listener.close());
    return address;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EADDRINUSE') {
      throw new StartupError(`HTTP port ${port} on ${host} is already in use; choose another with --http-port, or turn the listener off with --http-port off`);
    }
    throw new StartupError(`cannot serve HTTP on ${host}:${port}: ${(err as Error).message}`);
  }
}
