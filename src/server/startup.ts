import { readFileSync } from 'node:fs';
import tls from 'node:tls';
import type { Config } from '../config/schema.js';
import { AuthPolicy, isLoopback } from '../session/auth.js';
import { parseScramVerifier, type ScramVerifier } from '../session/scram.js';

/** What both engines' start-ups share before they listen: the checks of the listener's configuration, its TLS and its users. */

/** A problem the user can fix (a taken port, an unreadable file): reported in one line, without a stack. */
export class StartupError extends Error {}

/** The configured users, their SCRAM verifiers, roles and the identity stamped on their appends. */
export function authPolicy(config: Config): AuthPolicy {
  return new AuthPolicy(
    config.users.map((u) => ({
      name: u.name,
      verifier: parseScramVerifier(u.password) as ScramVerifier,
      role: u.role,
      identity: {
        ...(u.agentId === null ? {} : { agent_id: u.agentId }),
        ...(u.orgId === null ? {} : { org_id: u.orgId }),
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

function isLoopbackHost(host: string): boolean {
  return host === 'localhost' || isLoopback(host);
}

export function loadTls(config: Config): tls.SecureContext | null {
  const { key, cert } = config.tls;
  if (key === null || cert === null) return null;
  try {
    return tls.createSecureContext({ key: readFileSync(key), cert: readFileSync(cert) });
  } catch (err) {
    throw new StartupError(`cannot load the TLS key and certificate (${key}, ${cert}): ${(err as Error).message}`);
  }
}
