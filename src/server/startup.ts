import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import tls from 'node:tls';
import { serverShareMB, type Config } from '../config/schema.js';
import { AuthPolicy, isLoopback } from '../session/auth.js';
import { parseTokenHash } from '../session/bearer-token.js';
import { parseScramVerifier, type ScramVerifier } from '../session/scram.js';
import type { DisposeStack } from './dispose-stack.js';
import type { PgServer, ServerOptions } from './server.js';

/** What both engines' start-ups share around the wire's listener: its configuration's checks, TLS, users, listening and the metrics port. */

/** A problem the user can fix (a taken port, an unreadable file): reported in one line, without a stack. */
export class StartupError extends Error {}

/** The configured users, their SCRAM verifiers, roles and the identity stamped on their appends. */
export function authPolicy(config: Config): AuthPolicy {
  return new AuthPolicy(
    config.users.map((u) => ({
      name: u.name,
      verifier: u.password === null ? null : (parseScramVerifier(u.password) as ScramVerifier),
      tokenDigest: u.token == null ? null : parseTokenHash(u.token),
      role: u.role,
      identity: {
        // A user written without one (a configuration built in code) has none, as with null.
        ...(typeof u.agentId === 'string' ? { agent_id: u.agentId } : {}),
        ...(typeof u.orgId === 'string' ? { org_id: u.orgId } : {}),
      },
    })),
    config.auth.method,
  );
}

/** Refuses to listen beyond the machine without users: anyone who reached the port could connect. */
export function checkListenAuth(config: Config): void {
  if (config.users.length === 0 && !isLoopbackHost(config.listen.host)) {
    throw new StartupError(
      `refusing to listen on ${config.listen.host} without authentication: no users are configured, so anyone who can reach the port could connect. Add users to the configuration file (see \`cotwire passwd\`), or listen on 127.0.0.1.`,
    );
  }
}

export function isLoopbackHost(host: string): boolean {
  return host === 'localhost' || isLoopback(host);
}

/** The wire's TLS, which the HTTP listener serves too: the files' contents, checked to make a context. */
export interface TlsFiles {
  readonly key: Buffer;
  readonly cert: Buffer;
  readonly context: tls.SecureContext;
}

export function loadTls(config: Config): TlsFiles | null {
  const { key, cert } = config.tls;
  if (key === null || cert === null) return null;
  try {
    const files = { key: readFileSync(key), cert: readFileSync(cert) };
    return { ...files, context: tls.createSecureContext(files) };
  } catch (err) {
    throw new StartupError(`cannot load the TLS key and certificate (${key}, ${cert}): ${(err as Error).message}`);
  }
}

/** Listens on the wire, or says in one line why it cannot; the listener is closed at the unwind. */
export async function listenOrExplain(server: PgServer, config: Config, stack: DisposeStack): Promise<AddressInfo> {
  let address: AddressInfo;
  try {
    address = await server.listen();
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EADDRINUSE') {
      throw new StartupError(`port ${config.listen.port} on ${config.listen.host} is already in use; stop the other server or choose another port with --port`);
    }
    throw new StartupError(`cannot listen on ${config.listen.host}:${config.listen.port}: ${(err as Error).message}`);
  }
  stack.defer((graceMs) => server.close(graceMs));
  return address;
}

/** The wire's options from the configuration, the same for both engines; each adds its TLS, observer, handlers and logger. */
export function wireOptions(
  config: Config,
): Pick<
  ServerOptions,
  | 'host'
  | 'port'
  | 'maxMessageSize'
  | 'messageMemoryBytes'
  | 'maxConnections'
  | 'maxStartupConnections'
  | 'maxStartupConnectionsPerAddress'
  | 'auth'
  | 'slowStatementMs'
  | 'startupTimeoutMs'
  | 'maxPreparedStatements'
  | 'maxPortals'
> {
  return {
    host: config.listen.host,
    port: config.listen.port,
    maxMessageSize: config.limits.maxMessageSize,
    messageMemoryBytes: serverShareMB(config.limits) * 1024 * 1024,
    maxConnections: config.limits.maxConnections,
    maxStartupConnections: config.limits.maxStartupConnections,
    maxStartupConnectionsPerAddress: config.limits.maxStartupConnectionsPerAddress,
    auth: authPolicy(config),
    slowStatementMs: config.log.slowStatementMs,
    startupTimeoutMs: config.limits.startupTimeoutMs,
    maxPreparedStatements: config.limits.maxPreparedStatements,
    maxPortals: config.limits.maxPortals,
  };
}
