import { createHash } from 'node:crypto';
import { lp } from '../chain/canonical.js';
import type { Hash } from './merkle.js';

/**
 * The global log's shape, the same on both engines: where each complete subtree's hash stands in
 * the order appends complete them, and what a row's leaf is.
 */

/** Hashes stored once m leaves have been appended: 2m - popcount(m). */
export function nodesFor(leaves: number): number {
  let ones = 0;
  for (let m = leaves; m > 0; m = Math.floor(m / 2)) ones += m % 2;
  return 2 * leaves - ones;
}

/** Where (level, index) is stored: it is completed by the leaf at (index + 1)·2^level - 1. */
export function positionOf(level: number, index: number): number {
  const before = (index + 1) * 2 ** level - 1;
  return nodesFor(before) + level;
}

/** The most leaves whose nodes fit in `count` stored hashes. */
export function leavesIn(count: number): number {
  let m = Math.floor(count / 2);
  while (m < count && nodesFor(m + 1) <= count) m++;
  while (m > 0 && nodesFor(m) > count) m--;
  return m;
}

export const LEAF_VERSION = 'cotwire/leaf/v1';

/** The part of a leaf's data that is the same for every row of a table: lp(version) || lp(schema) || lp(table). */
export function leafPrefix(schema: string, table: string): Buffer {
  return Buffer.concat([lp(LEAF_VERSION), lp(schema), lp(table)]);
}

/** SHA-256(0x00 || lp(version) || lp(schema) || lp(table) || lp(chain key) || lp(current_hash)). */
export function rowLeafHash(prefix: Buffer, chainKey: string, currentHash: string): Hash {
  return createHash('sha256').update(LEAF_BYTE).update(prefix).update(lp(chainKey)).update(lp(currentHash)).digest();
}

const LEAF_BYTE = Buffer.from([0]);
