import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * Bearer tokens for the HTTP listener. The configuration holds only a token's SHA-256 (`sha256:<hex>`), as it holds
 * only SCRAM verifiers of passwords: whoever reads the file cannot present the token. A token is 32 random bytes,
 * so one hash, with no salt or stretching, is as strong as the token itself.
 */

const PREFIX = 'cwt_';

export function newToken(): string {
  return `${PREFIX}${randomBytes(32).toString('base64url')}`;
}

export function tokenHash(token: string): string {
  return `sha256:${createHash('sha256').update(token, 'utf8').digest('hex')}`;
}

/** The digest of a configured token hash, or null when the text is not one. */
export function parseTokenHash(text: string): Buffer | null {
  const m = /^sha256:([0-9a-f]{64})$/.exec(text);
  return m === null ? null : Buffer.from(m[1] as string, 'hex');
}

/** Whether `presented` is the token whose hash is `digest`, in time that does not depend on where they differ. */
export function tokenMatches(presented: string, digest: Buffer): boolean {
  const got = createHash('sha256').update(presented, 'utf8').digest();
  return got.length === digest.length && timingSafeEqual(got, digest);
}
