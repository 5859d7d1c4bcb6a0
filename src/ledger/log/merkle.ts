import { createHash } from 'node:crypto';

/**
 * The RFC 6962 / RFC 9162 Merkle tree over the global ledger log: leaf
 * `SHA-256(0x00 || data)`, interior node `SHA-256(0x01 || left || right)`,
 * and the tree of n leaves split at the largest power of two below n.
 *
 * Hashes are stored only for complete subtrees: (level, index) covers leaves
 * [index·2^level, (index+1)·2^level). Every one of them is fixed once its
 * last leaf exists, so appends write O(log n) new nodes and never rewrite
 * one; any root, inclusion proof or consistency proof combines O(log n) of
 * them, whatever the size of the log.
 */

export type Hash = Buffer;

/** The stored hash of the complete subtree at (level, index). */
export type SubtreeReader = (level: number, index: number) => Hash;

const LEAF = Buffer.from([0]);
const NODE = Buffer.from([1]);

export const EMPTY_ROOT: Hash = createHash('sha256').digest();

export function leafHash(data: Uint8Array): Hash {
  return createHash('sha256').update(LEAF).update(data).digest();
}

export function nodeHash(left: Uint8Array, right: Uint8Array): Hash {
  return createHash('sha256').update(NODE).update(left).update(right).digest();
}

/** The largest power of two strictly below n (n ≥ 2). */
function splitPoint(n: number): number {
  let k = 1;
  while (k * 2 < n) k *= 2;
  return k;
}

/**
 * MTH of leaves [start, end). In the RFC's recursion every left part is a
 * complete subtree aligned on its size, so it is one stored hash.
 */
function rangeHash(start: number, end: number, read: SubtreeReader): Hash {
  const n = end - start;
  if ((n & (n - 1)) === 0 && start % n === 0) return read(Math.log2(n), start / n);
  const k = splitPoint(n);
  return nodeHash(rangeHash(start, start + k, read), rangeHash(start + k, end, read));
}

/** The tree head of the first `size` leaves. */
export function rootOf(size: number, read: SubtreeReader): Hash {
  return size === 0 ? EMPTY_ROOT : rangeHash(0, size, read);
}

/** RFC 6962 PATH(index, D[0:size]): the audit path of one leaf, from the leaf up. */
export function inclusionProof(index: number, size: number, read: SubtreeReader): Hash[] {
  if (!(index >= 0 && index < size)) throw new RangeError(`leaf ${index} is not in a tree of ${size} leaves`);
  const path: Hash[] = [];
  const walk = (m: number, start: number, end: number): void => {
    if (end - start === 1) return;
    const k = splitPoint(end - start);
    if (m < k) {
      walk(m, start, start + k);
      path.push(rangeHash(start + k, end, read));
    } else {
      walk(m - k, start + k, end);
      path.push(rangeHash(start, start + k, read));
    }
  };
  walk(index, 0, size);
  return path;
}

/** RFC 6962 PROOF(older, D[0:newer]): that the first `older` leaves are the start of the `newer`. */
export function consistencyProof(older: number, newer: number, read: SubtreeReader): Hash[] {
  if (!(older > 0 && older <= newer)) throw new RangeError(`no consistency proof from ${older} to ${newer} leaves`);
  const proof: Hash[] = [];
  const sub = (m: number, start: number, end: number, complete: boolean): void => {
    const n = end - start;
    if (m === n) {
      if (!complete) proof.push(rangeHash(start, end, read));
      return;
    }
    const k = splitPoint(n);
    if (m <= k) {
      sub(m, start, start + k, complete);
      proof.push(rangeHash(start + k, end, read));
    } else {
      sub(m - k, start + k, end, false);
      proof.push(rangeHash(start, start + k, read));
    }
  };
  sub(older, 0, newer, true);
  return proof;
}

/** RFC 9162's step for a right edge: shift both until fn's low bit is set or fn is 0. */
function alignRight(fn: number, sn: number): [number, number] {
  while (fn % 2 === 0 && fn !== 0) {
    fn = Math.floor(fn / 2);
    sn = Math.floor(sn / 2);
  }
  return [fn, sn];
}

/** RFC 9162 §2.1.3.2: whether `proof` places `leaf` at `index` of the tree whose head is `root`. */
export function verifyInclusion(index: number, size: number, leaf: Hash, proof: readonly Hash[], root: Hash): boolean {
  if (!(index >= 0 && index < size)) return false;
  let fn = index;
  let sn = size - 1;
  let r = leaf;
  for (const p of proof) {
    if (sn === 0) return false;
    if (fn % 2 === 1 || fn === sn) {
      r = nodeHash(p, r);
      if (fn % 2 === 0) [fn, sn] = alignRight(fn, sn);
    } else {
      r = nodeHash(r, p);
    }
    fn = Math.floor(fn / 2);
    sn = Math.floor(sn / 2);
  }
  return sn === 0 && r.equals(root);
}

/** RFC 9162 §2.1.4.2: whether `proof` shows the tree of `older` leaves is the start of the `newer`. */
export function verifyConsistency(older: number, newer: number, oldRoot: Hash, newRoot: Hash, proof: readonly Hash[]): boolean {
  if (!(older > 0 && older <= newer)) return false;
  if (older === newer) return proof.length === 0 && oldRoot.equals(newRoot);
  if (proof.length === 0) return false;
  const path = (older & (older - 1)) === 0 ? [oldRoot, ...proof] : [...proof];
  let fn = older - 1;
  let sn = newer - 1;
  while (fn % 2 === 1) {
    fn = Math.floor(fn / 2);
    sn = Math.floor(sn / 2);
  }
  let fr = path[0] as Hash;
  let sr = path[0] as Hash;
  for (const c of path.slice(1)) {
    if (sn === 0) return false;
    if (fn % 2 === 1 || fn === sn) {
      fr = nodeHash(c, fr);
      sr = nodeHash(c, sr);
      if (fn % 2 === 0) [fn, sn] = alignRight(fn, sn);
    } else {
      sr = nodeHash(sr, c);
    }
    fn = Math.floor(fn / 2);
    sn = Math.floor(sn / 2);
  }
  return sn === 0 && fr.equals(oldRoot) && sr.equals(newRoot);
}

/** A complete subtree's hash, to be stored: appends produce these. */
export interface StoredNode {
  readonly level: number;
  readonly index: number;
  readonly hash: Hash;
}

/**
 * The nodes that appending the leaf at position `size` completes: the leaf
 * itself, then each parent whose right child it completes. `read` gives the
 * left siblings, which are already stored.
 */
export function nodesForAppend(size: number, leaf: Hash, read: SubtreeReader): StoredNode[] {
  const nodes: StoredNode[] = [{ level: 0, index: size, hash: leaf }];
  let hash = leaf;
  let index = size;
  for (let level = 0; index % 2 === 1; level++) {
    hash = nodeHash(read(level, index - 1), hash);
    index = (index - 1) / 2;
    nodes.push({ level: level + 1, index, hash });
  }
  return nodes;
}
