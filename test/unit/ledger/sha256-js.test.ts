import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { sha256Into } from '../../../src/ledger/chain/sha256-js.js';

/** A seeded generator, so that a failure names inputs that can be made again. */
function bytes(seed: number, n: number): Buffer {
  const out = Buffer.alloc(n);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x & 0xff;
  }
  return out;
}

describe('SHA-256 in JavaScript', () => {
  it('gives the standard digests of the FIPS 180-4 examples', () => {
    const digest = (s: string): string => {
      const out = Buffer.alloc(32);
      const data = Buffer.from(s, 'utf8');
      sha256Into(data, 0, data.length, out, 0);
      return out.toString('hex');
    };
    expect(digest('')).toBe('e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
    expect(digest('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    expect(digest('abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq')).toBe('248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1');
  });

  it('agrees with node:crypto on every length up to 300 bytes, at any offset, writing where told', () => {
    for (let n = 0; n <= 300; n++) {
      const data = bytes(n + 1, n + 7);
      const out = Buffer.alloc(40, 0xaa);
      sha256Into(data, 7, n, out, 5);
      const expected = createHash('sha256')
        .update(data.subarray(7, 7 + n))
        .digest();
      expect(out.subarray(5, 37).equals(expected), `length ${n}`).toBe(true);
      // Nothing outside the digest is touched.
      expect(out.subarray(0, 5).equals(Buffer.alloc(5, 0xaa))).toBe(true);
      expect(out.subarray(37).equals(Buffer.alloc(3, 0xaa))).toBe(true);
    }
  });

  it('agrees with node:crypto on long messages', () => {
    for (const n of [1000, 4096, 65_537, 1_000_003]) {
      const data = bytes(n, n);
      const out = Buffer.alloc(32);
      sha256Into(data, 0, n, out, 0);
      expect(out.toString('hex'), `length ${n}`).toBe(createHash('sha256').update(data).digest('hex'));
    }
  });
});
