import { randomBytes } from 'node:crypto';
import { PgError } from '../errors/pg-error.js';
import { SqlState } from '../errors/sqlstate.js';
import { tokenMatches } from './bearer-token.js';
import { mockScramVerifier, type ScramVerifier } from './scram.js';

export type AuthMethod = 'trust' | 'scram-sha-256' | 'password';

export interface AuthUser {
  readonly name: string;
  /** Null: the user has no password, and reaches only the HTTP listener, with its token. */
  readonly verifier: ScramVerifier | null;
  readonly role: string;
  readonly identity: Readonly<Record<string, string>>;
  /** The SHA-256 of the user's bearer token for the HTTP listener, or null. */
  readonly tokenDigest?: Buffer | null;
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
    if (u !== undefined && u.verifier !== null) return { verifier: u.verifier, exists: true };
    return { verifier: mockScramVerifier(this.mockSecret, user), exists: false };
  }

  /**
   * Who an HTTP request is, from its `Authorization` header: without configured users, anyone from loopback (as the
   * wire trusts it), named `cotwire`; with users, the user whose token it bears. Every user's digest is compared, so
   * the time taken does not tell which one matched.
   */
  httpUser(authorization: string | undefined, remoteAddress: string): { user: string } | { refused: 'no-token' | 'bad-token' | 'not-loopback' } {
    if (this.users.size === 0) return isLoopback(remoteAddress) ? { user: 'cotwire' } : { refused: 'not-loopback' };
    const m = /^Bearer[ ]+(\S+)\s*$/i.exec(authorization ?? '');
    if (m === null) return { refused: 'no-token' };
    let found: string | null = null;
    for (const u of this.users.values()) {
      if (u.tokenDigest != null && tokenMatches(m[1] as string, u.tokenDigest)) found = u.name;
    }
    return found === null ? { refused: 'bad-token' } : { user: found };
  }
}

export function isLoopback(address: string): boolean {
  const a = address.startsWith('::ffff:') ? address.slice(7) : address;
  return a === '::1' || a.startsWith('127.') || a === 'localhost';
}

export function passwordFailed(user: string): PgError {
  return new PgError(SqlState.InvalidPassword, `password authentication failed for user "${user}"`, {}, 'FATAL');
}
