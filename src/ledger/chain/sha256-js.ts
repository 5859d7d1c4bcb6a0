/**
 * SHA-256 (FIPS 180-4) in JavaScript, for the many short messages of a
 * cotwire/v3 row: two hashes per committed column, 24 a step. Each call into
 * node:crypto or hash-wasm costs 1-2 us whatever the message's length, more
 * than hashing one 64-byte block takes here; this one reads the message
 * where it lies and writes the digest where it is wanted, allocating
 * nothing. Checked against node:crypto on random inputs of every length
 * around the block boundaries (test/unit/ledger/sha256-js.test.ts).
 */

const K = new Int32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74,
  0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d,
  0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e,
  0x92722c85, 0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5,
  0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
]);

const INITIAL = new Int32Array([0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19]);

const W = new Int32Array(64);
const state = new Int32Array(8);
/** The message's last bytes with their padding: one or two blocks. */
const tail = new Uint8Array(128);

function compress(block: Uint8Array, at: number): void {
  for (let i = 0; i < 16; i++) {
    const j = at + i * 4;
    W[i] = ((block[j] as number) << 24) | ((block[j + 1] as number) << 16) | ((block[j + 2] as number) << 8) | (block[j + 3] as number);
  }
  for (let i = 16; i < 64; i++) {
    const w15 = W[i - 15] as number;
    const w2 = W[i - 2] as number;
    const s0 = ((w15 >>> 7) | (w15 << 25)) ^ ((w15 >>> 18) | (w15 << 14)) ^ (w15 >>> 3);
    const s1 = ((w2 >>> 17) | (w2 << 15)) ^ ((w2 >>> 19) | (w2 << 13)) ^ (w2 >>> 10);
    W[i] = ((W[i - 16] as number) + s0 + (W[i - 7] as number) + s1) | 0;
  }
  let a = state[0] as number;
  let b = state[1] as number;
  let c = state[2] as number;
  let d = state[3] as number;
  let e = state[4] as number;
  let f = state[5] as number;
  let g = state[6] as number;
  let h = state[7] as number;
  for (let i = 0; i < 64; i++) {
    const S1 = ((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7));
    const ch = (e & f) ^ (~e & g);
    const t1 = (h + S1 + ch + (K[i] as number) + (W[i] as number)) | 0;
    const S0 = ((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10));
    const maj = (a & b) ^ (a & c) ^ (b & c);
    const t2 = (S0 + maj) | 0;
    h = g;
    g = f;
    f = e;
    e = (d + t1) | 0;
    d = c;
    c = b;
    b = a;
    a = (t1 + t2) | 0;
  }
  state[0] = ((state[0] as number) + a) | 0;
  state[1] = ((state[1] as number) + b) | 0;
  state[2] = ((state[2] as number) + c) | 0;
  state[3] = ((state[3] as number) + d) | 0;
  state[4] = ((state[4] as number) + e) | 0;
  state[5] = ((state[5] as number) + f) | 0;
  state[6] = ((state[6] as number) + g) | 0;
  state[7] = ((state[7] as number) + h) | 0;
}

/** Writes SHA-256 of data[start, start + length) to out[outAt, outAt + 32). */
export function sha256Into(data: Uint8Array, start: number, length: number, out: Uint8Array, outAt: number): void {
  state.set(INITIAL);
  const full = Math.floor(length / 64);
  for (let i = 0; i < full; i++) compress(data, start + i * 64);
  const rest = length - full * 64;
  tail.fill(0);
  for (let i = 0; i < rest; i++) tail[i] = data[start + full * 64 + i] as number;
  tail[rest] = 0x80;
  const blocks = rest < 56 ? 1 : 2;
  const end = blocks * 64;
  // The length in bits, big-endian, in the last eight bytes (messages here stay far below 2^32 bytes).
  const bits = length * 8;
  tail[end - 5] = Math.floor(bits / 2 ** 32) & 0xff;
  tail[end - 4] = (bits >>> 24) & 0xff;
  tail[end - 3] = (bits >>> 16) & 0xff;
  tail[end - 2] = (bits >>> 8) & 0xff;
  tail[end - 1] = bits & 0xff;
  compress(tail, 0);
  if (blocks === 2) compress(tail, 64);
  for (let i = 0; i < 8; i++) {
    const v = state[i] as number;
    out[outAt + i * 4] = v >>> 24;
    out[outAt + i * 4 + 1] = (v >>> 16) & 0xff;
    out[outAt + i * 4 + 2] = (v >>> 8) & 0xff;
    out[outAt + i * 4 + 3] = v & 0xff;
  }
}

/**
 * This file's SHA-256 as source text defining `sha256Into`, for the
 * commitment worker (commitment-pool.ts): the same code, on another thread.
 * Its functions read the tables by the names they have here.
 */
export function sha256Source(): string {
  return [
    `const K = new Int32Array([${K.join(', ')}]);`,
    `const INITIAL = new Int32Array([${INITIAL.join(', ')}]);`,
    'const W = new Int32Array(64);',
    'const state = new Int32Array(8);',
    'const tail = new Uint8Array(128);',
    compress.toString(),
    sha256Into.toString(),
  ].join('\n');
}
