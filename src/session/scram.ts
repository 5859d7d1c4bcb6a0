import { createHash, createHmac, pbkdf2Sync, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * SCRAM-SHA-256 (RFC 5802, RFC 7677) as PostgreSQL uses it, without channel
 * binding. Verifiers use PostgreSQL's own text form, so one can be copied
 * from `pg_authid.rolpassword`:
 *   SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>
 */
export interface ScramVerifier {
  readonly iterations: number;
  readonly salt: Buffer;
  readonly storedKey: Buffer;
  readonly serverKey: Buffer;
}

const VERIFIER = /^SCRAM-SHA-256\$(\d+):([A-Za-z0-9+/=]+)\$([A-Za-z0-9+/=]+):([A-Za-z0-9+/=]+)$/;

export function parseScramVerifier(text: string): ScramVerifier | null {
  const m = VERIFIER.exec(text);
  if (m === null) return null;
  const iterations = Number(m[1]);
  const salt = Buffer.from(m[2] as string, 'base64');
  const storedKey = Buffer.from(m[3] as string, 'base64');
  const serverKey = Buffer.from(m[4] as string, 'base64');
  if (!Number.isSafeInteger(iterations) || iterations < 1 || storedKey.length !== 32 || serverKey.length !== 32) {
    return null;
  }
  return { iterations, salt, storedKey, serverKey };
}

const hmac = (key: Buffer, data: string | Buffer): Buffer => createHmac('sha256', key).update(data).digest();
const sha256 = (data: Buffer): Buffer => createHash('sha256').update(data).digest();

/** Derives a verifier from a password (PostgreSQL's default of 4096 iterations). */
export function makeScramVerifier(password: string, iterations = 4096, salt: Buffer = randomBytes(16)): string {
  const salted = pbkdf2Sync(password.normalize('NFKC'), salt, iterations, 32, 'sha256');
  const clientKey = hmac(salted, 'Client Key');
  const storedKey = sha256(clientKey);
  const serverKey = hmac(salted, 'Server Key');
  return `SCRAM-SHA-256$${iterations}:${salt.toString('base64')}$${storedKey.toString('base64')}:${serverKey.toString('base64')}`;
}

/** A verifier for a user who does not exist, so that a failed login reveals nothing about which users exist. */
export function mockScramVerifier(secret: Buffer, user: string): ScramVerifier {
  const salt = hmac(secret, `salt:${user}`).subarray(0, 16);
  return { iterations: 4096, salt, storedKey: hmac(secret, `stored:${user}`), serverKey: hmac(secret, `server:${user}`) };
}

export class ScramError extends Error {}

/** One server-side exchange: call `serverFirst`, then `serverFinal`. */
export class ScramExchange {
  private clientFirstBare = '';
  private serverFirstMessage = '';
  private nonce = '';
  private gs2Header = '';

  /** `serverNonce` is for test vectors only; by default 18 random bytes. */
  constructor(
    private readonly verifier: ScramVerifier,
    private readonly serverNonce: string = randomBytes(18).toString('base64'),
  ) {}

  /** Takes client-first-message, returns server-first-message. */
  serverFirst(clientFirst: string): string {
    // gs2-header: we never offer SCRAM-SHA-256-PLUS, so "p=" is a client error.
    const m = /^([ny]|p=[^,]*),(a=[^,]*)?,(.*)$/s.exec(clientFirst);
    if (m === null) throw new ScramError('malformed SCRAM client-first-message');
    if ((m[1] as string).startsWith('p=')) throw new ScramError('channel binding is not supported');
    this.gs2Header = `${m[1]},${m[2] ?? ''},`;
    this.clientFirstBare = m[3] as string;
    // The user name inside SCRAM is ignored in favour of the startup user, as PostgreSQL does.
    const r = /(?:^|,)r=([^,]+)/.exec(this.clientFirstBare);
    if (r === null || /[^\x21-\x2b\x2d-\x7e]/.test(r[1] as string)) {
      throw new ScramError('malformed SCRAM client nonce');
    }
    this.nonce = (r[1] as string) + this.serverNonce;
    this.serverFirstMessage = `r=${this.nonce},s=${this.verifier.salt.toString('base64')},i=${this.verifier.iterations}`;
    return this.serverFirstMessage;
  }

  /** Takes client-final-message; returns server-final-message, or null when the proof is wrong. */
  serverFinal(clientFinal: string): string | null {
    const m = /^c=([^,]*),r=([^,]*)(?:,.*)?,p=([A-Za-z0-9+/=]+)$/s.exec(clientFinal);
    if (m === null) throw new ScramError('malformed SCRAM client-final-message');
    if (Buffer.from(m[1] as string, 'base64').toString('latin1') !== this.gs2Header) {
      throw new ScramError('SCRAM channel binding check failed');
    }
    if (m[2] !== this.nonce) throw new ScramError('SCRAM nonce mismatch');
    const withoutProof = clientFinal.slice(0, clientFinal.lastIndexOf(',p='));
    const authMessage = `${this.clientFirstBare},${this.serverFirstMessage},${withoutProof}`;
    const proof = Buffer.from(m[3] as string, 'base64');
    if (proof.length !== 32) return null;
    const clientSignature = hmac(this.verifier.storedKey, authMessage);
    const clientKey = Buffer.alloc(32);
    for (let i = 0; i < 32; i++) clientKey[i] = (proof[i] as number) ^ (clientSignature[i] as number);
    if (!timingSafeEqual(sha256(clientKey), this.verifier.storedKey)) return null;
    return `v=${hmac(this.verifier.serverKey, authMessage).toString('base64')}`;
  }
}

/** Checks a cleartext password against a verifier (the `password` method, only over TLS). */
export function checkPassword(verifier: ScramVerifier, password: string): boolean {
  const salted = pbkdf2Sync(password.normalize('NFKC'), verifier.salt, verifier.iterations, 32, 'sha256');
  return timingSafeEqual(sha256(hmac(salted, 'Client Key')), verifier.storedKey);
}
