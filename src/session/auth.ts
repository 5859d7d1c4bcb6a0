import { randomBytes } from 'node:crypto';
import { PgError } from '../errors/pg-error.js';
import { SqlState } from '../errors/sqlstate.js';
import { mockScramVerifier, type ScramVerifier } from './scram.js';

export type AuthMethod = 'trust' | 'scram-sha-256' | 'password';

export interface AuthUser {
  readonly name: string;
  readonly verifier: ScramVerifier;
  readonly role: string;
  readonly identity: Readonly<Record<string, string>>;
}

/**
 * Who may connect, and how. With no users configured the server allows only
 * trust from loopback; with users, every user authenticates, by SCRAM or, on
 * TLS connections only, by cleartext password.
 */
export class AuthPolicy {
  private readonly users: ReadonlyMap<string, AuthUser>;
  private readonly mockSecret = randomBytes(32);

  constructor(
    users: readonly AuthUser[],
    private readonly method: AuthMethod,
  ) {
    this.users = new Map(users.map((u) => [u.name, u]));
  }

  get requiresPassword(): boolean {
    return this.users.size > 0;
  }

  /** The method for this connection, or the error that refuses it. */
  methodFor(remoteAddress: string, tls: boolean): AuthMethod | PgError {
    if (this.users.size === 0) {
      if (!isLoopback(remoteAddress)) {
        return new PgError(
          SqlState.InvalidAuthorizationSpecification,
          `no users are configured, so only connections from loopback are accepted (from ${remoteAddress})`,
          {},
          'FATAL',
        );
      }
      return 'trust';
    }
    if (this.method === 'password' && !tls) return 'scram-sha-256';
    return this.method === 'trust' ? 'scram-sha-256' : this.method;
  }

  /**
   * The role and identity a user connects with. Without configured users,
   * every connection is local (trust from loopback only) and is admin.
   */
  grantsOf(user: string): { role: string; identity: Readonly<Record<string, string>> } {
    if (this.users.size === 0) return { role: 'admin', identity: {} };
    const u = this.users.get(user);
    return { role: u?.role ?? 'reader', identity: u?.identity ?? {} };
  }

  /** The user's verifier, or a mock one so that unknown users look like wrong passwords. */
  verifierFor(user: string): { verifier: ScramVerifier; exists: boolean } {
    const u = this.users.get(user);
    if (u !== undefined) return { verifier: u.verifier, exists: true };
    return { verifier: mockScramVerifier(this.mockSecret, user), exists: false };
  }
}

export function isLoopback(address: string): boolean {
  const a = address.startsWith('::ffff:') ? address.slice(7) : address;
  return a === '::1' || a.startsWith('127.') || a === 'localhost';
}

export function passwordFailed(user: string): PgError {
  return new PgError(SqlState.InvalidPassword, `password authentication failed for user "${user}"`, {}, 'FATAL');
}
