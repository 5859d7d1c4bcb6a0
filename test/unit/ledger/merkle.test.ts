import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  consistencyProof,
  EMPTY_ROOT,
  inclusionProof,
  leafHash,
  nodeHash,
  nodesForAppend,
  rootOf,
  verifyConsistency,
  verifyInclusion,
  type Hash,
  type SubtreeReader,
} from '../../../src/ledger/log/merkle.js';

/** The Certificate Transparency test vectors (RFC 6962's tree over these eight entries). */
const ENTRIES = ['', '00', '10', '2021', '3031', '40414243', '5051525354555657', '606162636465666768696a6b6c6d6e6f'].map((h) => Buffer.from(h, 'hex'));
const ROOTS = [
  'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
  '6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d',
  'fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125',
  'aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77',
  'd37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7',
  '4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4',
  '76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef',
  'ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c',
  '5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328',
];
const INCLUSION: Array<[number, number, string[]]> = [
  [
    0,
    8,
    [
      '96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7',
      '5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e',
      '6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4',
    ],
  ],
  [
    5,
    8,
    [
      'bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b',
      'ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0',
      'd37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7',
    ],
  ],
  [2, 3, ['fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125']],
  [
    1,
    5,
    [
      '6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d',
      '5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e',
      'bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b',
    ],
  ],
];
const CONSISTENCY: Array<[number, number, string[]]> = [
  [1, 1, []],
  [
    1,
    8,
    [
      '96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7',
      '5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e',
      '6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4',
    ],
  ],
  [
    6,
    8,
    [
      '0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a',
      'ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0',
      'd37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7',
    ],
  ],
  [2, 5, ['5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e', 'bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b']],
];

const hex = (hs: readonly Hash[]): string[] => hs.map((h) => h.toString('hex'));
const unhex = (h: string): Hash => Buffer.from(h, 'hex');

/** The stored complete subtrees of a log, built leaf by leaf as the server appends them. */
function storedLog(leaves: readonly Hash[]): SubtreeReader {
  const nodes = new Map<string, Hash>();
  const read: SubtreeReader = (level, index) => {
    const h = nodes.get(`${level}/${index}`);
    if (h === undefined) throw new Error(`node ${level}/${index} is not stored`);
    return h;
  };
  leaves.forEach((leaf, size) => {
    for (const n of nodesForAppend(size, leaf, read)) nodes.set(`${n.level}/${n.index}`, n.hash);
  });
  return read;
}

/** RFC 6962 section 2.1, word for word, over the whole list: the reference the stored tree must match. */
function naiveRoot(leaves: readonly Hash[]): Hash {
  if (leaves.length === 0) return createHash('sha256').digest();
  if (leaves.length === 1) return leaves[0] as Hash;
  let k = 1;
  while (k * 2 < leaves.length) k *= 2;
  return nodeHash(naiveRoot(leaves.slice(0, k)), naiveRoot(leaves.slice(k)));
}

function naivePath(m: number, leaves: readonly Hash[]): Hash[] {
  if (leaves.length <= 1) return [];
  let k = 1;
  while (k * 2 < leaves.length) k *= 2;
  return m < k ? [...naivePath(m, leaves.slice(0, k)), naiveRoot(leaves.slice(k))] : [...naivePath(m - k, leaves.slice(k)), naiveRoot(leaves.slice(0, k))];
}

function naiveProof(m: number, leaves: readonly Hash[], complete = true): Hash[] {
  if (m === leaves.length) return complete ? [] : [naiveRoot(leaves)];
  let k = 1;
  while (k * 2 < leaves.length) k *= 2;
  return m <= k
    ? [...naiveProof(m, leaves.slice(0, k), complete), naiveRoot(leaves.slice(k))]
    : [...naiveProof(m - k, leaves.slice(k), false), naiveRoot(leaves.slice(0, k))];
}

describe('the Merkle log (RFC 6962 / RFC 9162)', () => {
  const leaves = ENTRIES.map(leafHash);
  const read = storedLog(leaves);

  it('gives the published tree heads for sizes 0 to 8', () => {
    expect(EMPTY_ROOT.toString('hex')).toBe(ROOTS[0]);
    for (let n = 0; n <= 8; n++) expect(rootOf(n, read).toString('hex')).toBe(ROOTS[n]);
  });

  it.each(INCLUSION)('gives the published inclusion proof of leaf %i in a tree of %i', (index, size, path) => {
    const proof = inclusionProof(index, size, read);
    expect(hex(proof)).toEqual(path);
    expect(verifyInclusion(index, size, leaves[index] as Hash, proof, unhex(ROOTS[size] as string))).toBe(true);
    expect(verifyInclusion(index, size, leaves[index] as Hash, proof, EMPTY_ROOT)).toBe(false);
  });

  it.each(CONSISTENCY)('gives the published consistency proof from %i to %i leaves', (older, newer, path) => {
    const proof = consistencyProof(older, newer, read);
    expect(hex(proof)).toEqual(path);
    expect(verifyConsistency(older, newer, unhex(ROOTS[older] as string), unhex(ROOTS[newer] as string), proof)).toBe(true);
  });

  it('agrees with the naive reference for every size from 1 to 300, and sizes up to 1000 around each power of two', () => {
    const many = Array.from({ length: 1000 }, (_, i) => leafHash(Buffer.from(`step ${i}`)));
    const stored = storedLog(many);
    // The naive reference is quadratic: every size up to 300, then a spread and each power of two and its neighbours,
    // where the tree's shape changes, so that the test stays well within its time on a busy machine.
    const sizes = new Set<number>();
    for (let n = 1; n <= 300; n++) sizes.add(n);
    for (let n = 301; n <= 1000; n += 37) sizes.add(n);
    for (const p of [256, 512]) for (const n of [p - 1, p, p + 1]) sizes.add(n);
    sizes.add(999).add(1000);
    for (const n of [...sizes].sort((a, b) => a - b)) {
      const prefix = many.slice(0, n);
      const root = rootOf(n, stored);
      expect(root.equals(naiveRoot(prefix))).toBe(true);
      // Proofs for a spread of leaves and older sizes in every tree (all of them would be quadratic).
      for (const m of new Set([0, n - 1, Math.floor(n / 2), (n * 7) % n, Math.floor(n / 3)])) {
        const proof = inclusionProof(m, n, stored);
        expect(hex(proof)).toEqual(hex(naivePath(m, prefix)));
        expect(verifyInclusion(m, n, prefix[m] as Hash, proof, root)).toBe(true);
      }
      for (const older of new Set([1, n, Math.max(1, n - 1), Math.max(1, Math.floor(n / 2)), Math.max(1, Math.floor((n * 5) / 7))])) {
        const proof = consistencyProof(older, n, stored);
        expect(hex(proof)).toEqual(hex(naiveProof(older, prefix)));
        expect(verifyConsistency(older, n, naiveRoot(many.slice(0, older)), root, proof)).toBe(true);
      }
    }
  });

  it('refuses a wrong leaf, a wrong index, a truncated path and an altered history', () => {
    const many = Array.from({ length: 37 }, (_, i) => leafHash(Buffer.from([i])));
    const stored = storedLog(many);
    const root = rootOf(37, stored);
    const proof = inclusionProof(20, 37, stored);
    expect(verifyInclusion(20, 37, many[20] as Hash, proof, root)).toBe(true);
    expect(verifyInclusion(20, 37, many[21] as Hash, proof, root)).toBe(false);
    expect(verifyInclusion(21, 37, many[20] as Hash, proof, root)).toBe(false);
    expect(verifyInclusion(20, 37, many[20] as Hash, proof.slice(0, -1), root)).toBe(false);
    expect(verifyInclusion(37, 37, many[20] as Hash, proof, root)).toBe(false);
    const consistency = consistencyProof(13, 37, stored);
    const oldRoot = rootOf(13, stored);
    expect(verifyConsistency(13, 37, oldRoot, root, consistency)).toBe(true);
    // The old tree as someone who rewrote leaf 4 would present it.
    const rewritten = storedLog(many.map((l, i) => (i === 4 ? leafHash(Buffer.from('forged')) : l)));
    expect(verifyConsistency(13, 37, rootOf(13, rewritten), root, consistency)).toBe(false);
    expect(verifyConsistency(13, 37, oldRoot, rootOf(37, rewritten), consistencyProof(13, 37, rewritten))).toBe(false);
    expect(verifyConsistency(13, 37, oldRoot, root, [])).toBe(false);
    expect(verifyConsistency(16, 37, rootOf(16, stored), root, [])).toBe(false);
  });

  it('stores O(log n) nodes per append and never rewrites one', () => {
    const seen = new Set<string>();
    const nodes = new Map<string, Hash>();
    const read: SubtreeReader = (level, index) => nodes.get(`${level}/${index}`) as Hash;
    let most = 0;
    for (let size = 0; size < 4096; size++) {
      const written = nodesForAppend(size, leafHash(Buffer.from([size & 0xff, size >> 8])), read);
      most = Math.max(most, written.length);
      for (const n of written) {
        const key = `${n.level}/${n.index}`;
        expect(seen.has(key)).toBe(false);
        seen.add(key);
        nodes.set(key, n.hash);
      }
    }
    expect(most).toBe(13);
    expect(seen.size).toBe(2 * 4096 - 1);
  });
});
