import { hash } from 'node:crypto';
import { layoutFor, lp } from './canonical.js';
import { HASH_VERSION_V3, SALT_COLUMN } from './schema.js';
import { sha256Into } from './sha256-js.js';

/**
 * `cotwire/v3`: each value a client supplies enters a row's pre-image as a
 * salted commitment, so that a value erased together with its salt cannot
 * be found again by hashing guesses (README, "cotwire/v3"). With m a
 * column's place among the row's committed columns (0, 1, ...):
 *
 *   block(b)      = SHA-256(lp("cotwire/v3 keys") || salt || u32_be(b))   the row's 16-byte salt
 *   key(m)        = 16 bytes of block(floor(m / 2)), from byte 16 * (m mod 2)
 *   commitment(m) = SHA-256(key(m) || lp(text))
 *   pre-image     = lp("cotwire/v3") || lp(table) || for every column except current_hash and row_salt:
 *                   lp(name) || commitment (a committed column) or lp(text) (any other)
 *
 * Two keys per block keeps a row's hashing to 6 blocks of keys for
 * `_cot_steps`' 12 committed columns; each key is 128 bits, and one key
 * says nothing of another. The salt is kept in the server column `row_salt`
 * as 32 hex digits. A redaction replaces it by the keys of the row's
 * columns still committed to a value it holds (SaltKeys), so that the rest
 * of the row still verifies and nothing derives the erased value's key.
 */

/** Bytes of salt per row: 128 bits. */
export const SALT_BYTES = 16;

/** lp("cotwire/v3 keys"), which begins every block of keys. */
export const KEYS_DOMAIN = lp('cotwire/v3 keys');
const NULL_MARK = Buffer.alloc(8, 0xff);
/** A commitment's input from this many bytes on is hashed by node:crypto, whose call costs more than a few blocks in JavaScript. */
export const NATIVE_FROM = 200;

/** The first `count` blocks of a salt's keys, derived ahead: block b at buffer[at + 32b]. */
export interface DerivedBlocks {
  readonly buffer: Uint8Array;
  readonly at: number;
  readonly count: number;
}

/**
 * A row's salt and the commitments of its committed columns, hashed ahead
 * of the chain (commitment-pool.ts): column m's at commitments[at + 32m].
 * Null commitments: the chain hashes them, from the blocks of keys derived
 * ahead where there are some.
 */
export interface Precommitted {
  readonly salt: Buffer;
  readonly commitments: Buffer | null;
  readonly at: number;
  readonly blocks: DerivedBlocks | null;
}

/** Where a block's or a commitment's input is assembled: each hash reads it before the next is written. */
let work = Buffer.allocUnsafe(64 * 1024);

function workFor(bytes: number): Buffer {
  if (bytes > work.length) work = Buffer.allocUnsafe(Math.max(bytes, work.length * 2));
  return work;
}

/**
 * Writes text's UTF-8 at `at` of `out`, which has room; returns its length.
 * Short ASCII, which most of a step's values are, by hand: Buffer.write's
 * call costs more than the bytes.
 */
export function writeText(out: Buffer, at: number, text: string): number {
  const n = text.length;
  if (n <= 64) {
    let i = 0;
    for (; i < n; i++) {
      const c = text.charCodeAt(i);
      if (c >= 0x80) break;
      out[at + i] = c;
    }
    if (i === n) return n;
  }
  return out.write(text, at, 'utf8');
}

/** Copies n bytes (a few dozen) from src[from] to out[at]: Buffer.copy's call costs more than the bytes. */
function copySmall(src: Uint8Array, from: number, n: number, out: Uint8Array, at: number): void {
  for (let i = 0; i < n; i++) out[at + i] = src[from + i] as number;
}

/** Writes lp(text) at `at` of `out`, which has room; returns where it ends. */
function writeLp(out: Buffer, at: number, text: string | null): number {
  if (text === null) {
    copySmall(NULL_MARK, 0, 8, out, at);
    return at + 8;
  }
  const n = writeText(out, at + 8, text);
  out.writeUInt32BE(Math.floor(n / 2 ** 32), at);
  out.writeUInt32BE(n >>> 0, at + 4);
  return at + 8 + n;
}

/** Writes block(b) of `salt`'s keys to out[outAt, outAt + 32). */
function blockInto(salt: Buffer, b: number, out: Buffer, outAt: number): void {
  const data = workFor(KEYS_DOMAIN.length + salt.length + 4);
  copySmall(KEYS_DOMAIN, 0, KEYS_DOMAIN.length, data, 0);
  copySmall(salt, 0, salt.length, data, KEYS_DOMAIN.length);
  const at = data.writeUInt32BE(b, KEYS_DOMAIN.length + salt.length);
  sha256Into(data, 0, at, out, outAt);
}

/** Writes commitment(text) under a 16-byte key (key[keyAt, keyAt + 16)) to out[outAt, outAt + 32). */
function commitmentInto(key: Uint8Array, keyAt: number, text: string | null, out: Buffer, outAt: number): void {
  // A UTF-8 encoding takes at most three bytes per UTF-16 unit.
  const data = workFor(16 + 8 + (text === null ? 0 : text.length * 3));
  copySmall(key, keyAt, 16, data, 0);
  const at = writeLp(data, 16, text);
  if (at < NATIVE_FROM) sha256Into(data, 0, at, out, outAt);
  else hash('sha256', data.subarray(0, at), 'buffer').copy(out, outAt);
}

/** The key of committed column m under a row's salt (16 bytes). */
export function columnKey(salt: Buffer, m: number): Buffer {
  const block = Buffer.allocUnsafe(32);
  blockInto(salt, Math.floor(m / 2), block, 0);
  return block.subarray((m % 2) * 16, (m % 2) * 16 + 16);
}

/** A value's commitment under its column's 16-byte key: SHA-256(key || lp(text)), lp(NULL) being the NULL mark. */
export function commitment(key: Buffer, text: string | null): Buffer {
  const out = Buffer.allocUnsafe(32);
  commitmentInto(key, 0, text, out, 0);
  return out;
}

/**
 * What a row's `row_salt` holds: its salt (32 hex digits), from which every
 * key derives, or after a redaction the keys themselves of the columns still
 * committed to their values, as a JSON object of 32-hex-digit keys by name.
 */
export class SaltKeys {
  private readonly salt: Buffer | null;
  private readonly listed: ReadonlyMap<string, Buffer> | null;
  /** The block last derived, which holds the next column's key too. */
  private readonly block = Buffer.allocUnsafe(32);
  private blockIndex = -1;

  private constructor(salt: Buffer | null, listed: ReadonlyMap<string, Buffer> | null) {
    this.salt = salt;
    this.listed = listed;
  }

  /** Reads a `row_salt` text; null when it is neither form (the row then fails to verify). */
  static parse(text: string | null): SaltKeys | null {
    if (text === null) return null;
    if (text.length === 32 && /^[0-9a-f]{32}$/.test(text)) return new SaltKeys(Buffer.from(text, 'hex'), null);
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      return null;
    }
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return null;
    const keys = new Map<string, Buffer>();
    for (const [column, hex] of Object.entries(parsed)) {
      if (typeof hex !== 'string' || !/^[0-9a-f]{32}$/.test(hex)) return null;
      keys.set(column, Buffer.from(hex, 'hex'));
    }
    return new SaltKeys(null, keys);
  }

  /** Blocks of keys derived ahead (commitment-pool.ts): block b at derived[derivedAt + 32b], for b below derivedCount. */
  private derived: Uint8Array | null = null;
  private derivedAt = 0;
  private derivedCount = 0;

  /** A fresh row's salt, with the first blocks of its keys when they were derived ahead. */
  static of(salt: Buffer, blocks: DerivedBlocks | null = null): SaltKeys {
    const keys = new SaltKeys(salt, null);
    if (blocks !== null) {
      keys.derived = blocks.buffer;
      keys.derivedAt = blocks.at;
      keys.derivedCount = blocks.count;
    }
    return keys;
  }

  /** The key of committed column m (named `column`), or null where this row no longer holds one (its value was erased). */
  keyOf(m: number, column: string): Buffer | null {
    if (this.salt !== null) return columnKey(this.salt, m);
    return this.listed?.get(column) ?? null;
  }

  /** Writes commitment(text) of committed column m (named `column`) to out[at, at + 32); false where this row holds no key for it. */
  commitInto(m: number, column: string, text: string | null, out: Buffer, at: number): boolean {
    if (this.salt !== null) {
      const b = Math.floor(m / 2);
      if (b < this.derivedCount && this.derived !== null) {
        commitmentInto(this.derived, this.derivedAt + b * 32 + (m % 2) * 16, text, out, at);
        return true;
      }
      if (b !== this.blockIndex) {
        blockInto(this.salt, b, this.block, 0);
        this.blockIndex = b;
      }
      commitmentInto(this.block, (m % 2) * 16, text, out, at);
      return true;
    }
    const key = this.listed?.get(column);
    if (key === undefined) return false;
    commitmentInto(key, 0, text, out, at);
    return true;
  }

  /** The `row_salt` text that lists the keys of `columns` (name and place among the committed) and of no other: a redaction's. */
  listing(columns: ReadonlyArray<readonly [column: string, m: number]>): string {
    const out: Record<string, string> = {};
    for (const [c, m] of columns) {
      const key = this.keyOf(m, c);
      if (key !== null) out[c] = key.toString('hex');
    }
    return JSON.stringify(out);
  }
}

/** Per column list and table: lp(version) || lp(table), and each hashed column's lp(name) (null: not hashed). */
const layouts = new WeakMap<readonly string[], Map<string, { head: Buffer; names: Array<Buffer | null> }>>();

function layoutV3(table: string, columns: readonly string[]): { head: Buffer; names: Array<Buffer | null> } {
  return layoutFor(layouts, table, columns, () => ({
    head: Buffer.concat([lp(HASH_VERSION_V3), lp(table)]),
    names: columns.map((c) => (c === 'current_hash' || c === SALT_COLUMN ? null : lp(c))),
  }));
}

/**
 * The v3 pre-image of one row. `committed[i]` says whether column i enters
 * as a commitment; its key comes from `keys`, and `commitments[i]`, when
 * given, stands for the value (a redacted one, whose commitment its
 * redaction record keeps). A committed column without either cannot be
 * hashed: the pre-image is then null.
 */
export function preimageV3(
  table: string,
  columns: readonly string[],
  texts: readonly (string | null)[],
  committed: readonly boolean[],
  keys: SaltKeys | null,
  commitments: ReadonlyArray<Buffer | null | undefined> = [],
  pre: Precommitted | null = null,
): Buffer | null {
  const layout = layoutV3(table, columns);
  let size = layout.head.length;
  for (let i = 0; i < columns.length; i++) {
    const name = layout.names[i];
    if (name === null || name === undefined) continue;
    const text = texts[i] ?? null;
    size += name.length + (committed[i] === true ? 32 : 8 + (text === null ? 0 : Buffer.byteLength(text, 'utf8')));
  }
  const out = Buffer.allocUnsafe(size);
  let at = layout.head.copy(out, 0);
  let m = 0;
  for (let i = 0; i < columns.length; i++) {
    const name = layout.names[i];
    if (name === null || name === undefined) continue;
    copySmall(name, 0, name.length, out, at);
    at += name.length;
    const text = texts[i] ?? null;
    if (committed[i] !== true) {
      at = writeLp(out, at, text);
      continue;
    }
    const stand = commitments[i];
    if (stand !== null && stand !== undefined) stand.copy(out, at);
    else if (pre !== null && pre.commitments !== null) copySmall(pre.commitments, pre.at + m * 32, 32, out, at);
    else if (keys === null || !keys.commitInto(m, columns[i] as string, text, out, at)) return null;
    at += 32;
    m++;
  }
  return out;
}

/** A v3 row's hash, or null where a committed column has neither key nor recorded commitment. */
export function rowHashV3(
  table: string,
  columns: readonly string[],
  texts: readonly (string | null)[],
  committed: readonly boolean[],
  keys: SaltKeys | null,
  commitments?: ReadonlyArray<Buffer | null | undefined>,
): string | null {
  const pre = preimageV3(table, columns, texts, committed, keys, commitments);
  return pre === null ? null : hash('sha256', pre, 'hex');
}

/** A fresh row's hash from the commitments hashed ahead for it. */
export function rowHashV3Precommitted(
  table: string,
  columns: readonly string[],
  texts: readonly (string | null)[],
  committed: readonly boolean[],
  pre: Precommitted,
): string {
  return hash('sha256', preimageV3(table, columns, texts, committed, null, [], pre) as Buffer, 'hex');
}
