import { consistencyProof, inclusionProof, nodeHash, rootOf, type Hash, type SubtreeReader } from './merkle.js';
import { leavesIn, nodesFor, positionOf } from './leaf.js';

/**
 * The global log's Merkle tree over a store of its complete subtrees.
 *
 * The store holds every complete subtree's hash in the order appends
 * complete them: the leaf at position m, then each parent it completes,
 * lowest first. So the node (level, index) sits at a position computable
 * from its coordinates alone, an append writes O(log n) hashes at the end,
 * and a root or a proof reads O(log n) of them. The nodes are derived data:
 * they can always be rebuilt from the ledgers' rows.
 */

const HASH_BYTES = 32;

/** Where a log's nodes are kept: in memory, or in a file (each engine's own). */
export interface NodeStore {
  count(): number;
  read(position: number): Hash;
  /** `count` consecutive hashes from `position`, in one buffer. */
  readRange(position: number, count: number): Buffer;
  write(hashes: readonly Hash[]): void;
  truncate(count: number): void;
  sync(): void;
  close(): void;
}

/** Nodes in one growing buffer: 32 bytes each, no object per node. */
class MemoryNodeStore implements NodeStore {
  private buf = Buffer.alloc(64 * HASH_BYTES);
  private stored = 0;
  count(): number {
    return this.stored;
  }
  read(position: number): Hash {
    if (position >= this.stored) throw new RangeError(`Merkle node ${position} is not stored`);
    return Buffer.from(this.buf.subarray(position * HASH_BYTES, (position + 1) * HASH_BYTES));
  }
  readRange(position: number, count: number): Buffer {
    if (position + count > this.stored) throw new RangeError(`Merkle nodes ${position}..${position + count - 1} are not stored`);
    return Buffer.from(this.buf.subarray(position * HASH_BYTES, (position + count) * HASH_BYTES));
  }
  write(hashes: readonly Hash[]): void {
    const needed = (this.stored + hashes.length) * HASH_BYTES;
    if (needed > this.buf.length) {
      const grown = Buffer.alloc(Math.max(needed, this.buf.length * 2));
      this.buf.copy(grown, 0, 0, this.stored * HASH_BYTES);
      this.buf = grown;
    }
    for (const h of hashes) h.copy(this.buf, this.stored++ * HASH_BYTES);
  }
  truncate(count: number): void {
    this.stored = Math.min(count, this.stored);
  }
  sync(): void {}
  close(): void {}
}

/**
 * The tree over the leaves appended so far. The right edge (the newest
 * complete subtree at each level) is kept in memory: it is all an append
 * needs, so appending never reads the file.
 */
export class MerkleLog {
  private leaves = 0;
  /** frontier[level]: the hash of the last complete subtree at that level, if the tree has one. */
  private frontier: Hash[] = [];
  readonly read: SubtreeReader = (level, index) => this.store.read(positionOf(level, index));

  private constructor(private readonly store: NodeStore) {}

  /** The tree over the nodes a store holds, cut to its last whole append. */
  static over(store: NodeStore): MerkleLog {
    const log = new MerkleLog(store);
    log.truncate(leavesIn(store.count()));
    return log;
  }

  /** A tree kept in memory only (an in-memory database). */
  static inMemory(): MerkleLog {
    return new MerkleLog(new MemoryNodeStore());
  }

  get size(): number {
    return this.leaves;
  }

  /** Forgets every leaf from `leaves` on. */
  truncate(leaves: number): void {
    if (leaves > this.leaves && leaves > leavesIn(this.store.count())) throw new RangeError(`the Merkle log holds fewer than ${leaves} leaves`);
    const nodes = nodesFor(leaves);
    if (this.store.count() > nodes) this.store.truncate(nodes);
    this.leaves = leaves;
    this.frontier = [];
    for (let level = 0; 2 ** level <= leaves; level++) {
      const last = Math.floor(leaves / 2 ** level) - 1;
      this.frontier[level] = this.read(level, last);
    }
  }

  /** Integrates leaf hashes, in order; one write for all of them, and nothing changes if it fails. */
  append(leafHashes: readonly Hash[]): void {
    const out: Hash[] = [];
    const frontier = [...this.frontier];
    let leaves = this.leaves;
    for (const leaf of leafHashes) {
      out.push(leaf);
      let hash = leaf;
      let index = leaves;
      let level = 0;
      // A right child completes its parent; the left sibling is the level's frontier as it stood.
      while (index % 2 === 1) {
        const left = frontier[level] as Hash;
        frontier[level] = hash;
        hash = nodeHash(left, hash);
        index = (index - 1) / 2;
        level++;
        out.push(hash);
      }
      frontier[level] = hash;
      leaves++;
    }
    this.store.write(out);
    this.frontier = frontier;
    this.leaves = leaves;
  }

  /**
   * The leaf hashes from index `from` up to `to` (exclusive), read in one
   * pass: a leaf and the parents it completes are stored together, so the
   * leaves of a range lie in one stretch of the file.
   */
  leafRange(from: number, to: number): Hash[] {
    this.check(to);
    if (from >= to) return [];
    const start = nodesFor(from);
    const nodes = this.store.readRange(start, nodesFor(to - 1) + 1 - start);
    const out: Hash[] = [];
    for (let i = from; i < to; i++) {
      const at = (nodesFor(i) - start) * HASH_BYTES;
      out.push(nodes.subarray(at, at + HASH_BYTES));
    }
    return out;
  }

  root(size = this.leaves): Hash {
    this.check(size);
    return rootOf(size, this.read);
  }

  inclusion(index: number, size = this.leaves): Hash[] {
    this.check(size);
    return inclusionProof(index, size, this.read);
  }

  consistency(older: number, newer = this.leaves): Hash[] {
    this.check(newer);
    return consistencyProof(older, newer, this.read);
  }

  /** Makes every stored node durable: before a checkpoint signs a root computed from them. */
  sync(): void {
    this.store.sync();
  }

  close(): void {
    this.store.close();
  }

  private check(size: number): void {
    if (!Number.isSafeInteger(size) || size < 0 || size > this.leaves) {
      throw new RangeError(`the log has ${this.leaves} leaves; a tree of ${size} is not available`);
    }
  }
}
