import { createHash, hash } from 'node:crypto';
import { createSHA256, type IHasher } from 'hash-wasm';
import { HASH_VERSION, HASH_VERSION_V2 } from './schema.js';

/** The 8-byte length that marks NULL: distinct from every real length, including 0. */
const NULL_LENGTH = 0xffffffffffffffffn;

/**
 * The parts of a pre-image that depend only on the table and its columns:
 * lp(version) || lp(table), then lp(name) of each hashed column. Built once
 * per column list, as each row otherwise encodes them again.
 */
interface Layout {
  readonly head: Buffer;
  /** Per column in table order: lp(name), or null for current_hash (not hashed). */
  readonly names: ReadonlyArray<Buffer | null>;
  readonly fixedBytes: number;
}

/**
 * A table's layout, computed once per column list (the writer passes the
 * same array for every row of a table) and table name.
 */
export function layoutFor<T>(cache: WeakMap<readonly string[], Map<string, T>>, table: string, columns: readonly string[], build: () => T): T {
  let byTable = cache.get(columns);
  if (byTable === undefined) {
    byTable = new Map();
    cache.set(columns, byTable);
  }
  let layout = byTable.get(table);
  if (layout === undefined) {
    layout = build();
    byTable.set(table, layout);
  }
  return layout;
}

const layouts = new WeakMap<readonly string[], Map<string, Layout>>();

function layoutOf(table: string, columns: readonly string[]): Layout {
  return layoutFor(layouts, table, columns, () => {
    const head = Buffer.concat([lp(HASH_VERSION), lp(table)]);
    const names = columns.map((c) => (c === 'current_hash' ? null : lp(c)));
    const fixedBytes = head.length + names.reduce((n, b) => n + (b === null ? 0 : b.length + 8), 0);
    return { head, names, fixedBytes };
  });
}

/** lp(x) = u64 big-endian byte length of x's UTF-8, then those bytes; NULL is eight 0xFF bytes. */
export function lp(text: string): Buffer {
  const bytes = Buffer.from(text, 'utf8');
  const out = Buffer.allocUnsafe(8 + bytes.length);
  out.writeBigUInt64BE(BigInt(bytes.length));
  bytes.copy(out, 8);
  return out;
}

/**
 * The hash pre-image of one ledger row (README, "Hash specification"):
 * lp("cotwire/v1") || lp(table) || for every column except current_hash,
 * in table order: lp(column name) || lp(canonical text or NULL).
 */
export function preimage(table: string, columns: readonly string[], texts: readonly (string | null)[]): Buffer {
  const layout = layoutOf(table, columns);
  let size = layout.fixedBytes;
  for (let i = 0; i < columns.length; i++) {
    const text = texts[i] ?? null;
    if (layout.names[i] !== null && text !== null) size += Buffer.byteLength(text, 'utf8');
  }
  const out = Buffer.allocUnsafe(size);
  let at = layout.head.copy(out, 0);
  for (let i = 0; i < columns.length; i++) {
    const name = layout.names[i];
    if (name === null || name === undefined) continue;
    at += name.copy(out, at);
    const text = texts[i] ?? null;
    if (text === null) {
      at = out.writeBigUInt64BE(NULL_LENGTH, at);
      continue;
    }
    const written = out.write(text, at + 8, 'utf8');
    out.writeBigUInt64BE(BigInt(written), at);
    at += 8 + written;
  }
  return out;
}

export function rowHash(table: string, columns: readonly string[], texts: readonly (string | null)[]): string {
  return createHash('sha256')
    .update(preimage(table, columns, texts))
    .digest('hex');
}

/**
 * `cotwire/v2`, for erasure: the pre-image holds each column's digest,
 * SHA-256(lp(text)), instead of its text, so that a redacted value can be
 * stood for by its digest without changing the row's hash:
 * lp("cotwire/v2") || lp(table) || for every column except current_hash,
 * in table order: lp(column name) || digest (32 bytes).
 */
export { HASH_VERSION_V2 };

/**
 * A v2 row takes one SHA-256 per column, and each of Node's calls costs
 * about 1.25 us for a few bytes: hash-wasm's reusable hasher costs half of
 * that. Loaded once (loadColumnHasher); until then, Node's.
 */
let hasher: IHasher | null = null;

export async function loadColumnHasher(): Promise<void> {
  hasher ??= await createSHA256();
}

/** Digests of short values seen lately: agent, session, step type, model, flags and NULL repeat from row to row. */
const recent = new Map<string, Buffer>();
const RECENT_MAX = 8192;
const RECENT_TEXT = 64;

/** A column value's digest in a v2 pre-image: SHA-256 of lp(text), or of the NULL mark. */
export function columnDigest(text: string | null): Buffer {
  if (text === null) return NULL_DIGEST;
  if (text.length > RECENT_TEXT) return digestOf(text);
  let digest = recent.get(text);
  if (digest === undefined) {
    if (recent.size >= RECENT_MAX) recent.clear();
    digest = digestOf(text);
    recent.set(text, digest);
  }
  return digest;
}

/** Where lp(text) is written for the hasher, so that no buffer is allocated per column. */
const scratch = Buffer.allocUnsafe(64 * 1024);

/** SHA-256(lp(text)). */
function digestOf(text: string): Buffer {
  // A UTF-8 encoding takes at most three bytes per UTF-16 unit.
  return sha256(hasher !== null && text.length * 3 + 8 <= scratch.length ? lpInto(scratch, text) : lp(text));
}

/** SHA-256 of short data, by the reusable hasher once it is loaded; a buffer of its own (`data` may be reused). */
function sha256(data: Buffer): Buffer {
  if (hasher === null) return hash('sha256', data, 'buffer');
  hasher.init();
  hasher.update(data);
  const d = hasher.digest('binary');
  return Buffer.from(d.buffer, d.byteOffset, d.byteLength);
}

function lpInto(out: Buffer, text: string): Buffer {
  const n = out.write(text, 8, 'utf8');
  out.writeBigUInt64BE(BigInt(n), 0);
  return out.subarray(0, 8 + n);
}

const NULL_MARK = Buffer.alloc(8, 0xff);
const NULL_DIGEST = hash('sha256', NULL_MARK, 'buffer');

/**
 * The v2 pre-image of one row. `digests[i]`, when given, stands for column
 * i's value (a redacted value, whose digest its redaction record keeps);
 * texts[i] is then not read.
 */
export function preimageV2(
  table: string,
  columns: readonly string[],
  texts: readonly (string | null)[],
  digests: ReadonlyArray<Buffer | null | undefined> = [],
): Buffer {
  const layout = layoutV2(table, columns);
  const out = Buffer.allocUnsafe(layout.bytes);
  let at = layout.head.copy(out, 0);
  for (let i = 0; i < columns.length; i++) {
    const name = layout.names[i];
    if (name === null || name === undefined) continue;
    const digest = digests[i] ?? columnDigest(texts[i] ?? null);
    if (digest.length !== 32) throw new Error(`the digest of column ${columns[i] as string} is ${digest.length} bytes, not 32`);
    at += name.copy(out, at);
    at += digest.copy(out, at);
  }
  return out;
}

/** lp(version) || lp(table) and each hashed column's lp(name), per column list and table, as for v1. */
const layoutsV2 = new WeakMap<readonly string[], Map<string, { head: Buffer; names: Array<Buffer | null>; bytes: number }>>();

function layoutV2(table: string, columns: readonly string[]): { head: Buffer; names: Array<Buffer | null>; bytes: number } {
  return layoutFor(layoutsV2, table, columns, () => {
    const head = Buffer.concat([lp(HASH_VERSION_V2), lp(table)]);
    const names = columns.map((c) => (c === 'current_hash' ? null : lp(c)));
    return { head, names, bytes: head.length + names.reduce((n, b) => n + (b === null ? 0 : b.length + 32), 0) };
  });
}

export function rowHashV2(
  table: string,
  columns: readonly string[],
  texts: readonly (string | null)[],
  digests: ReadonlyArray<Buffer | null | undefined> = [],
): string {
  return hash('sha256', preimageV2(table, columns, texts, digests), 'hex');
}
