import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { leafHash, rootOf, verifyConsistency, verifyInclusion } from '../../../src/ledger/log/merkle.js';
import { MerkleLog } from '../../../src/ledger/log/merkle-log.js';
import { leavesIn, nodesFor, positionOf } from '../../../src/ledger/log/leaf.js';
import { openNodeFile } from '../../../src/engines/duckdb/log/node-file.js';

const dir = mkdtempSync(join(tmpdir(), 'cotwire-merkle-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const leaf = (i: number): Buffer => leafHash(Buffer.from(`leaf ${i}`));

/** RFC 6962's MTH, computed from all the leaves: the reference. */
function naiveRoot(leaves: readonly Buffer[]): Buffer {
  const reader = (level: number, index: number): Buffer => {
    const span = 2 ** level;
    return naiveRange(leaves.slice(index * span, (index + 1) * span));
  };
  return rootOf(leaves.length, reader);
}

function naiveRange(leaves: readonly Buffer[]): Buffer {
  if (leaves.length === 1) return leaves[0] as Buffer;
  let k = 1;
  while (k * 2 < leaves.length) k *= 2;
  return createHash('sha256')
    .update(Buffer.from([1]))
    .update(naiveRange(leaves.slice(0, k)))
    .update(naiveRange(leaves.slice(k)))
    .digest();
}

describe('node positions in the append-ordered file', () => {
  it('place every complete subtree once, in the order appends complete them', () => {
    const seen: string[] = [];
    for (let m = 0; m < 300; m++) {
      // Appending leaf m stores the leaf, then each parent it completes, lowest first.
      let index = m;
      let level = 0;
      seen.push(`${level}/${index}`);
      while (index % 2 === 1) {
        index = (index - 1) / 2;
        level++;
        seen.push(`${level}/${index}`);
      }
      expect(nodesFor(m + 1)).toBe(seen.length);
    }
    seen.forEach((node, position) => {
      const [level, index] = node.split('/').map(Number) as [number, number];
      expect(positionOf(level, index)).toBe(position);
    });
    for (let count = 0; count < 600; count++) {
      const m = leavesIn(count);
      expect(nodesFor(m)).toBeLessThanOrEqual(count);
      expect(nodesFor(m + 1)).toBeGreaterThan(count);
    }
  });
});

describe('MerkleLog', () => {
  it('gives the reference root, and proofs that verify, at every size up to 200', () => {
    const log = MerkleLog.inMemory();
    const leaves: Buffer[] = [];
    for (let n = 1; n <= 200; n++) {
      leaves.push(leaf(n - 1));
      log.append([leaf(n - 1)]);
      const root = log.root();
      expect(root.equals(naiveRoot(leaves))).toBe(true);
      for (const i of [0, Math.floor(n / 2), n - 1]) expect(verifyInclusion(i, n, leaves[i] as Buffer, log.inclusion(i), root)).toBe(true);
      for (const m of [1, Math.ceil(n / 3), n]) expect(verifyConsistency(m, n, log.root(m), root, log.consistency(m))).toBe(true);
    }
  });

  it('keeps its nodes in a file: reopened, cut to a torn append, it gives the same roots and goes on', () => {
    const path = join(dir, 'a.merkle');
    const log = openNodeFile(path);
    const leaves = Array.from({ length: 1000 }, (_, i) => leaf(i));
    log.append(leaves.slice(0, 700));
    log.append(leaves.slice(700, 777));
    const root777 = log.root();
    log.close();
    expect(statSync(path).size).toBe(16 + 32 * nodesFor(777));
    // A crash in the middle of an append leaves part of its nodes.
    truncateSync(path, 16 + 32 * nodesFor(777) + 40);
    const reopened = openNodeFile(path);
    expect(reopened.size).toBe(777);
    expect(reopened.root().equals(root777)).toBe(true);
    reopened.append(leaves.slice(777));
    expect(reopened.root().equals(naiveRoot(leaves))).toBe(true);
    reopened.truncate(500);
    expect(reopened.root().equals(naiveRoot(leaves.slice(0, 500)))).toBe(true);
    expect(() => reopened.root(501)).toThrow(RangeError);
    reopened.close();
  });

  it('moves a file that is not its own aside and starts afresh; read-only, it names the file', () => {
    const path = join(dir, 'other.merkle');
    writeFileSync(path, 'not a merkle file at all');
    expect(() => openNodeFile(path, true)).toThrow(`${path} is not a cotwire Merkle node file`);
    const moved: string[] = [];
    const log = openNodeFile(path, false, (to) => moved.push(to));
    expect(log.size).toBe(0);
    log.append([leaf(1)]);
    log.close();
    expect(moved).toHaveLength(1);
    expect(readFileSync(moved[0] as string, 'utf8')).toBe('not a merkle file at all');
    expect(openNodeFile(path).size).toBe(1);
  });
});

describe("docs/transparency-log.md's examples", () => {
  it('leaf hash of the worked example row, and its one-leaf checkpoint signed with the example key', async () => {
    const { leafPrefix, rowLeafHash } = await import('../../../src/ledger/log/leaf.js');
    const { checkpointText, parseSigner, signNote, verifierKeyOf } = await import('../../../src/ledger/log/note.js');
    const leaf = rowLeafHash(leafPrefix('main', '_cot_example'), 's-1', '00c49badb311d08a95e5c0fac77c4c4d60d5864742b1b3a836d1d373557fcbb9');
    expect(leaf.toString('hex')).toBe('ece3c18466cb4d2f0b850bde2d58592efcaa7bc3c03b3336327138dbff9c817f');
    // The example key's seed is 32 bytes of 0x07.
    const signer = parseSigner(`PRIVATE+KEY+example.com/agents+5a87bea1+${Buffer.concat([Buffer.from([1]), Buffer.alloc(32, 7)]).toString('base64')}`);
    expect(verifierKeyOf(signer)).toBe('example.com/agents+5a87bea1+AepKbGPinFIKvvVQexMuxfmVR3auvr57kkIe6mkURtIs');
    expect(signNote(checkpointText({ origin: 'example.com/agents', size: 1, root: leaf }), signer)).toBe(
      'example.com/agents\n1\n7OPBhGbLTS8LhQveLVhZLvyqe8PAOzM2MnE42/+cgX8=\n\n\u2014 example.com/agents Woe+oU4ukOXuKMrIHjHr3zCvJ1IfqCtkECEAWWtnVuttHfQpUIS2G2Kohomays9niHwHn1wWV6OhBXhD3JL9oYFb9Ao=\n',
    );
  });
});
