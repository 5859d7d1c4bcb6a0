import { createHash } from 'node:crypto';
import { DuckDBInstance } from '@duckdb/node-api';
import { describe, expect, it } from 'vitest';
import { columnDigest, loadColumnHasher, lp, preimage, preimageV2, rowHash, rowHashV2 } from '../../../src/ledger/chain/canonical.js';
import { canonicalTextSql } from '../../../src/ledger/chain/schema.js';
import { hashSqlV2 } from '../../../src/engines/duckdb/dialect/verify-sql.js';

/** The worked example in the README's hash specification. */
const COLUMNS = ['session_id', 'note', 'extra', 'step_index', 'prev_hash', 'current_hash', 'created_at', 'ledger_seq'];
const TEXTS = ['s-1', 'héllo\nwörld', null, '0', '', null, '1700000000000000', '1'];
const PREIMAGE_HEX =
  '000000000000000a636f74776972652f7631000000000000000c5f636f745f6578616d706c65000000000000000a73657373696f6e5f69640000000000000003732d3100000000000000046e6f7465000000000000000d68c3a96c6c6f0a77c3b6726c6400000000000000056578747261ffffffffffffffff000000000000000a737465705f696e6465780000000000000001300000000000000009707265765f686173680000000000000000000000000000000a637265617465645f6174000000000000001031373030303030303030303030303030000000000000000a6c65646765725f736571000000000000000131';
const HASH = '00c49badb311d08a95e5c0fac77c4c4d60d5864742b1b3a836d1d373557fcbb9';

describe('the hash pre-image', () => {
  it('matches the README example byte for byte', () => {
    expect(preimage('_cot_example', COLUMNS, TEXTS).toString('hex')).toBe(PREIMAGE_HEX);
    expect(rowHash('_cot_example', COLUMNS, TEXTS)).toBe(HASH);
  });

  it('is reproduced by plain DuckDB SQL', async () => {
    const lp = (x: string | null): string =>
      x === null
        ? "unhex('ffffffffffffffff')"
        : `(unhex(printf('%016x', octet_length(encode('${x.replaceAll("'", "''")}')))) || encode('${x.replaceAll("'", "''")}'))`;
    const parts = [lp('cotwire/v1'), lp('_cot_example')];
    COLUMNS.forEach((c, i) => {
      if (c !== 'current_hash') parts.push(lp(c), lp(TEXTS[i] ?? null));
    });
    const instance = await DuckDBInstance.create(':memory:');
    const conn = await instance.connect();
    const [[hash]] = (await conn.runAndReadAll(`SELECT sha256(${parts.join(' || ')})`)).getRows() as [[string]];
    conn.closeSync();
    instance.closeSync();
    expect(hash).toBe(HASH);
  });

  it('tells NULL from the empty string, and a field boundary from its content', () => {
    const a = rowHash('_cot_x', ['a', 'b'], ['', null]);
    const b = rowHash('_cot_x', ['a', 'b'], [null, '']);
    const c = rowHash('_cot_x', ['a', 'b'], ['xy', 'z']);
    const d = rowHash('_cot_x', ['a', 'b'], ['x', 'yz']);
    expect(new Set([a, b, c, d]).size).toBe(4);
  });
});

describe('the cotwire/v2 pre-image (column digests, for redaction)', () => {
  const HASH_V2 = '15694da35923f32f8e66580c498dc0b649393f9ce4eb4980e6ac2a9e4766145a';

  it('is lp(version) || lp(table) || lp(name) || SHA-256(lp(text)) per column, as an independent computation gives it', () => {
    const lpb = (x: string | null): Buffer => {
      if (x === null) return Buffer.alloc(8, 0xff);
      const b = Buffer.from(x, 'utf8');
      const n = Buffer.alloc(8);
      n.writeBigUInt64BE(BigInt(b.length));
      return Buffer.concat([n, b]);
    };
    const sha = (b: Buffer): Buffer => createHash('sha256').update(b).digest();
    const expected = Buffer.concat([
      lpb('cotwire/v2'),
      lpb('_cot_example'),
      ...COLUMNS.flatMap((c, i) => (c === 'current_hash' ? [] : [lpb(c), sha(lpb(TEXTS[i] ?? null))])),
    ]);
    expect(preimageV2('_cot_example', COLUMNS, TEXTS).equals(expected)).toBe(true);
    expect(preimageV2('_cot_example', COLUMNS, TEXTS)).toHaveLength(376);
    expect(rowHashV2('_cot_example', COLUMNS, TEXTS)).toBe(HASH_V2);
    // Another version, another hash: a v1 row cannot pass for a v2 one.
    expect(rowHash('_cot_example', COLUMNS, TEXTS)).not.toBe(HASH_V2);
  });

  it('is reproduced by plain DuckDB SQL', async () => {
    const lit = (x: string): string => `'${x.replaceAll("'", "''")}'`;
    const lp = (x: string | null): string =>
      x === null ? "unhex('ffffffffffffffff')" : `(unhex(printf('%016x', octet_length(encode(${lit(x)})))) || encode(${lit(x)}))`;
    const parts = [lp('cotwire/v2'), lp('_cot_example')];
    COLUMNS.forEach((c, i) => {
      if (c !== 'current_hash') parts.push(lp(c), `unhex(sha256(${lp(TEXTS[i] ?? null)}))`);
    });
    const instance = await DuckDBInstance.create(':memory:');
    const conn = await instance.connect();
    const [[hash]] = (await conn.runAndReadAll(`SELECT sha256(${parts.join(' || ')})`)).getRows() as [[string]];
    conn.closeSync();
    instance.closeSync();
    expect(hash).toBe(HASH_V2);
  });

  it('keeps the row hash when a value is replaced by its digest, and only then', () => {
    const note = COLUMNS.indexOf('note');
    const redacted = [...TEXTS];
    redacted[note] = '[redacted]';
    const digests: Array<Buffer | undefined> = [];
    digests[note] = columnDigest(TEXTS[note] ?? null);
    expect(rowHashV2('_cot_example', COLUMNS, redacted, digests)).toBe(HASH_V2);
    // The wrong digest, or a changed value elsewhere, breaks it.
    digests[note] = columnDigest('hello world');
    expect(rowHashV2('_cot_example', COLUMNS, redacted, digests)).not.toBe(HASH_V2);
    digests[note] = columnDigest(TEXTS[note] ?? null);
    const edited = [...redacted];
    edited[COLUMNS.indexOf('session_id')] = 's-2';
    expect(rowHashV2('_cot_example', COLUMNS, edited, digests)).not.toBe(HASH_V2);
    expect(() => rowHashV2('_cot_example', COLUMNS, redacted, [undefined, Buffer.alloc(31)])).toThrow(/is 31 bytes, not 32/);
  });

  it('tells NULL from the empty string, and a field boundary from its content', () => {
    const a = rowHashV2('_cot_x', ['a', 'b'], ['', null]);
    const b = rowHashV2('_cot_x', ['a', 'b'], [null, '']);
    const c = rowHashV2('_cot_x', ['a', 'b'], ['xy', 'z']);
    const d = rowHashV2('_cot_x', ['a', 'b'], ['x', 'yz']);
    expect(new Set([a, b, c, d]).size).toBe(4);
  });
});

describe('the v2 hash in SQL (verify-sql.ts) and in JavaScript agree', () => {
  it('on rows of every column type a ledger of steps holds, NULLs and Unicode included', async () => {
    const instance = await DuckDBInstance.create(':memory:');
    const conn = await instance.connect();
    try {
      await conn.run(`CREATE TABLE _cot_v2 (session_id VARCHAR, content VARCHAR, data JSON, confidence DOUBLE, n BIGINT, ok BOOLEAN, id UUID,
        step_index INTEGER, prev_hash VARCHAR, current_hash VARCHAR, created_at TIMESTAMPTZ, ledger_seq BIGINT)`);
      await conn.run(`INSERT INTO _cot_v2 SELECT 's' || (i % 7), CASE WHEN i % 5 = 0 THEN NULL ELSE 'héllo ' || i || ' 𝄞' END,
        CASE WHEN i % 3 = 0 THEN NULL ELSE ('{"i":' || i || ',"s":"ü"}')::JSON END, i / 3.0, i * 1000000007, i % 2 = 0,
        uuid(), i, CASE WHEN i = 0 THEN '' ELSE 'x' END, NULL, TIMESTAMPTZ '2026-01-01 00:00:00+00' + i * INTERVAL 1 SECOND, i
        FROM range(200) t(i)`);
      const columns = ['session_id', 'content', 'data', 'confidence', 'n', 'ok', 'id', 'step_index', 'prev_hash', 'current_hash', 'created_at', 'ledger_seq'];
      const types = [
        'VARCHAR',
        'VARCHAR',
        'JSON',
        'DOUBLE',
        'BIGINT',
        'BOOLEAN',
        'UUID',
        'INTEGER',
        'VARCHAR',
        'VARCHAR',
        'TIMESTAMP WITH TIME ZONE',
        'BIGINT',
      ];
      const table = {
        catalog: 'memory',
        schema: 'main',
        name: '_cot_v2',
        columns: columns.map((name, i) => ({ name, type: types[i] as string, defaultSql: null, notNull: false })),
        chainKey: 'session_id',
        serverColumns: new Set<string>(),
        isSteps: false,
        journaled: false,
        hashVersion: 'cotwire/v2' as const,
        redactions: null,
        retention: null,
      };
      const texts = columns.map((c, i) => canonicalTextSql(c, types[i] as string)).join(', ');
      const rows = (await conn.runAndReadAll(`SELECT ${hashSqlV2(table)}, ${texts} FROM _cot_v2 ORDER BY ledger_seq`)).getRows() as Array<Array<string | null>>;
      expect(rows).toHaveLength(200);
      for (const [sqlHash, ...values] of rows) expect(sqlHash).toBe(rowHashV2('_cot_v2', columns, values));
    } finally {
      conn.closeSync();
      instance.closeSync();
    }
  });
});

describe('the column digests', () => {
  it('are the same through the WebAssembly hasher and the cache as through Node, for every length', async () => {
    await loadColumnHasher();
    const texts = [null, '', 'a', 'héllo\nwörld', 'x'.repeat(55), 'x'.repeat(56), 'x'.repeat(64), 'x'.repeat(65), 'y'.repeat(10_000)];
    for (let i = 0; i < 2000; i++) texts.push(`value ${i % 300} ${'z'.repeat(i % 97)}`);
    for (const t of texts) {
      const node = createHash('sha256')
        .update(t === null ? Buffer.alloc(8, 0xff) : lp(t))
        .digest();
      // Twice: the second comes from the cache for short values.
      expect(columnDigest(t).equals(node), String(t).slice(0, 20)).toBe(true);
      expect(columnDigest(t).equals(node)).toBe(true);
    }
    expect(rowHashV2('_cot_example', COLUMNS, TEXTS)).toBe('15694da35923f32f8e66580c498dc0b649393f9ce4eb4980e6ac2a9e4766145a');
  });
});
