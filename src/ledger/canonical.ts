import { createHash } from 'node:crypto';
import { HASH_VERSION } from './schema.js';

/** The 8-byte length that marks NULL: distinct from every real length, including 0. */
const NULL_MARK = Buffer.alloc(8, 0xff);

/** lp(x) = u64 big-endian byte length of x's UTF-8, then those bytes; NULL is eight 0xFF bytes. */
function lp(text: string | null, parts: Buffer[]): void {
  if (text === null) {
    parts.push(NULL_MARK);
    return;
  }
  const bytes = Buffer.from(text, 'utf8');
  const len = Buffer.allocUnsafe(8);
  len.writeBigUInt64BE(BigInt(bytes.length));
  parts.push(len, bytes);
}

/**
 * The hash pre-image of one ledger row (README, "Hash specification"):
 * lp("cotwire/v1") || lp(table) || for every column except current_hash,
 * in table order: lp(column name) || lp(canonical text or NULL).
 */
export function preimage(table: string, columns: readonly string[], texts: readonly (string | null)[]): Buffer {
  const parts: Buffer[] = [];
  lp(HASH_VERSION, parts);
  lp(table, parts);
  for (let i = 0; i < columns.length; i++) {
    const name = columns[i] as string;
    if (name === 'current_hash') continue;
    lp(name, parts);
    lp(texts[i] ?? null, parts);
  }
  return Buffer.concat(parts);
}

export function rowHash(table: string, columns: readonly string[], texts: readonly (string | null)[]): string {
  return createHash('sha256').update(preimage(table, columns, texts)).digest('hex');
}
