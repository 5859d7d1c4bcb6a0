import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { describe, expect, it } from 'vitest';
import { loadColumnHasher } from '../../../src/ledger/chain/canonical.js';
import { columnKey, commitment, preimageV3, rowHashV3, SaltKeys } from '../../../src/ledger/chain/commitments.js';

/** The README's example row under cotwire/v3, with the salt 00 01 ... 0f; the values below are Python's (hashlib), by the formulas of commitments.ts. */
const COLUMNS = ['session_id', 'note', 'extra', 'step_index', 'prev_hash', 'current_hash', 'created_at', 'ledger_seq', 'row_salt'];
const TEXTS = ['s-1', 'héllo\nwörld', null, '0', '', null, '1700000000000000', '1', '000102030405060708090a0b0c0d0e0f'];
const COMMITTED = COLUMNS.map((c) => c === 'note' || c === 'extra');
const SALT = Buffer.from('000102030405060708090a0b0c0d0e0f', 'hex');
const KEY_NOTE = '2c1a55f9a69ebe419f11ab900ad8ca30';
const KEY_EXTRA = '8c8be4d95211519c4926a9e46dc06ade';
const C_NOTE = '8e60ae6df40d3525c726e9571b4606893713e1060639cd97a2613d3bf40ff16e';
const C_EXTRA = '7245a4511b367d5c64432b857b7fa58d0962ef1d3a34bb1ea9c814ad1a268817';
const HASH_V3 = 'a1d89a5cb9e4a6535ed0b7c08644cb9c5dd29b9ad6c7216fecc3cd06664d07d7';
/** A value long enough for node:crypto's hash, under the first key. */
const C_LONG = '4c99c0a5dfa5d537d5741ae9c4b5efce92c6b7c8a82b2cf1004de7498f51db6b';

describe('the cotwire/v3 pre-image (salted commitments)', () => {
  it('derives each key and commitment, and the row hash, as an independent computation gives them', async () => {
    for (const loaded of [false, true]) {
      if (loaded) await loadColumnHasher();
      expect(columnKey(SALT, 0).toString('hex')).toBe(KEY_NOTE);
      expect(columnKey(SALT, 1).toString('hex')).toBe(KEY_EXTRA);
      expect(commitment(Buffer.from(KEY_NOTE, 'hex'), 'x'.repeat(500)).toString('hex')).toBe(C_LONG);
      expect(commitment(Buffer.from(KEY_NOTE, 'hex'), 'héllo\nwörld').toString('hex')).toBe(C_NOTE);
      expect(commitment(Buffer.from(KEY_EXTRA, 'hex'), null).toString('hex')).toBe(C_EXTRA);
      const keys = SaltKeys.parse(TEXTS[8] ?? null);
      expect(preimageV3('_cot_example', COLUMNS, TEXTS, COMMITTED, keys)).toHaveLength(277);
      expect(rowHashV3('_cot_example', COLUMNS, TEXTS, COMMITTED, keys)).toBe(HASH_V3);
    }
  });

  it('verifies a row whose value was erased from its recorded commitment and the keys left, and from nothing less', () => {
    const keys = SaltKeys.parse(TEXTS[8] ?? null) as SaltKeys;
    // A redaction: the value becomes its marker, the salt becomes the keys of the other committed columns.
    const listing = keys.listing([['extra', 1]]);
    expect(JSON.parse(listing)).toEqual({ extra: KEY_EXTRA });
    const erased = TEXTS.map((t, i) => (COLUMNS[i] === 'note' ? '[redacted]' : COLUMNS[i] === 'row_salt' ? listing : t));
    const left = SaltKeys.parse(listing);
    const recorded = COLUMNS.map((c) => (c === 'note' ? Buffer.from(C_NOTE, 'hex') : null));
    expect(rowHashV3('_cot_example', COLUMNS, erased, COMMITTED, left, recorded)).toBe(HASH_V3);
    // Without the record, the erased column has no key: no hash at all, never a wrong one taken for right.
    expect(rowHashV3('_cot_example', COLUMNS, erased, COMMITTED, left)).toBeNull();
    // The other committed column is still bound to its value.
    const changed = erased.map((t, i) => (COLUMNS[i] === 'extra' ? 'x' : t));
    expect(rowHashV3('_cot_example', COLUMNS, changed, COMMITTED, left, recorded)).not.toBe(HASH_V3);
  });

  it('refuses a salt column in neither form', () => {
    for (const bad of ['00', '{"note": "zz"}', '[1]', 'not json', '000102030405060708090A0B0C0D0E0F']) expect(SaltKeys.parse(bad), bad).toBeNull();
  });

  it('is reproduced by plain DuckDB SQL', async () => {
    const lit = (x: string): string => `'${x.replaceAll("'", "''")}'`;
    const lp = (x: string | null): string =>
      x === null ? "unhex('ffffffffffffffff')" : `(unhex(printf('%016x', octet_length(encode(${lit(x)})))) || encode(${lit(x)}))`;
    // key(m): 32 hex digits of the block's, unhexed.
    const key = (m: number): string =>
      `unhex(substr(sha256(${lp('cotwire/v3 keys')} || unhex('000102030405060708090a0b0c0d0e0f') || unhex(printf('%08x', ${Math.floor(m / 2)}))), ${1 + (m % 2) * 32}, 32))`;
    const parts = [lp('cotwire/v3'), lp('_cot_example')];
    let m = 0;
    COLUMNS.forEach((c, i) => {
      if (c === 'current_hash' || c === 'row_salt') return;
      parts.push(lp(c), COMMITTED[i] ? `unhex(sha256(${key(m++)} || ${lp(TEXTS[i] ?? null)}))` : lp(TEXTS[i] ?? null));
    });
    const instance = await DuckDBInstance.create(':memory:');
    const conn = await instance.connect();
    const [[hash]] = (await conn.runAndReadAll(`SELECT sha256(${parts.join(' || ')})`)).getRows() as [[string]];
    conn.closeSync();
    instance.closeSync();
    expect(hash).toBe(HASH_V3);
  });

  it('is what the Python of the README computes, run as written', () => {
    const readme = readFileSync(join(import.meta.dirname, '../../../README.md'), 'utf8');
    const blocks = [...readme.matchAll(/```python\n([\s\S]*?)```/g)].map((m) => m[1] as string);
    const v1 = blocks.find((b) => b.includes('def lp(x)'));
    const v3 = blocks.find((b) => b.includes('cotwire/v3 keys'));
    expect(v1 !== undefined && v3 !== undefined).toBe(true);
    const run = spawnSync('python3', ['-c', `${v1}\n${v3}`], { encoding: 'utf8' });
    expect(run.status, run.stderr).toBe(0);
    expect(run.stdout.trim().split('\n').at(-1)).toBe(HASH_V3);
  });
});
