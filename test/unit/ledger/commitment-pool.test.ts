import { describe, expect, it } from 'vitest';
import { chainRow, rowLayout } from '../../../src/ledger/chain/append.js';
import { commitmentsAhead } from '../../../src/ledger/chain/commitment-pool.js';
import { columnKey, rowHashV3, SaltKeys } from '../../../src/ledger/chain/commitments.js';
import { committedOf } from '../../../src/ledger/chain/row-hash.js';
import { rowHashFor } from '../../../src/ledger/chain/row-hash.js';
import { HASH_VERSION_V3, type LedgerTable, SALT_COLUMN, serverColumnsOf } from '../../../src/ledger/chain/schema.js';

const NAMES = [
  'trace_id',
  'org_id',
  'agent_id',
  'session_id',
  'step_index',
  'step_type',
  'content',
  'input_data',
  'confidence',
  'prev_hash',
  'current_hash',
  'has_embedding',
  'created_at',
  'ledger_seq',
  SALT_COLUMN,
];

const TABLE: LedgerTable = {
  catalog: 'cotwire',
  schema: 'main',
  name: '_cot_steps',
  columns: NAMES.map((name) => ({ name, type: 'VARCHAR', defaultSql: null, notNull: false })),
  chainKey: 'session_id',
  serverColumns: serverColumnsOf(true, HASH_VERSION_V3),
  isSteps: true,
  journaled: true,
  hashVersion: HASH_VERSION_V3,
  redactions: null,
  retention: null,
};

/** Seeded values of every kind the chain meets: NULLs, empty, non-ASCII, long enough for node:crypto, around the block sizes. */
function rows(seed: number, count: number): (string | null)[][] {
  let x = seed;
  const next = (n: number): number => {
    x = (x * 1103515245 + 12345) % 2 ** 31;
    return x % n;
  };
  const value = (): string | null => {
    switch (next(6)) {
      case 0:
        return null;
      case 1:
        return '';
      case 2:
        return 'é€😀'.repeat(next(40));
      case 3:
        return 'x'.repeat(next(600));
      default:
        return String(next(1e6));
    }
  };
  const client = rowLayout(TABLE).client.map((p) => NAMES[p]);
  return Array.from({ length: count }, (_, r) => client.map((c) => (c === 'session_id' ? `s-${r % 3}` : value())));
}

describe('commitments hashed ahead on the worker thread', () => {
  it('give each row the hash its salt and values give when hashed in the chain, NULLs, non-ASCII and long values included', () => {
    for (const [seed, count, settled] of [
      [1, 16, true],
      [2, 100, true],
      [3, 1000, true],
      // The chain claims the rows the worker has not reached yet.
      [4, 1000, false],
    ] as const) {
      const batch = rows(seed, count);
      const ahead = commitmentsAhead(TABLE, batch);
      expect(ahead, 'a batch this size goes to the worker').not.toBeNull();
      if (settled) expect(ahead?.settle()).toBe(true);
      const heads = new Map<string, { index: number; hash: string }>();
      batch.forEach((row, i) => {
        const pre = ahead?.row(i) ?? null;
        if (settled) expect(pre, `row ${i} of seed ${seed}`).not.toBeNull();
        const chained = chainRow(TABLE, row, (k) => heads.get(k), BigInt(i + 1), 1_700_000_000_000_000n, undefined, null, 'org', pre);
        heads.set(chained.key, { index: chained.index, hash: chained.hash });
        // The row as stored (its salt's text among its columns) verifies by the in-chain computation.
        expect(rowHashFor(HASH_VERSION_V3, TABLE.name, NAMES, chained.texts), `row ${i} of seed ${seed}`).toBe(chained.hash);
        if (pre !== null) expect(chained.texts[NAMES.indexOf(SALT_COLUMN)]).toBe(pre.salt.toString('hex'));
      });
    }
  });

  it('leaves to the chain what it does not take: few rows, and rows past its memory', () => {
    expect(commitmentsAhead(TABLE, rows(4, 15))).toBeNull();
    const batch = rows(5, 40);
    const content = rowLayout(TABLE)
      .client.map((p) => NAMES[p])
      .indexOf('content');
    // 1.5M characters may take 4.5 MB of UTF-8, more than the worker's 4 MB. The rows are written from the last:
    // those after this one go to the worker, this one and those before it stay in the chain.
    (batch[20] as (string | null)[])[content] = 'y'.repeat(1_500_000);
    const ahead = commitmentsAhead(TABLE, batch);
    expect(ahead?.settle()).toBe(true);
    expect(ahead?.row(0)).toBeNull();
    expect(ahead?.row(20)).toBeNull();
    expect(ahead?.row(21)).not.toBeNull();
    expect(ahead?.row(39)).not.toBeNull();
    // A new batch after one whose rows were not all taken.
    const next = commitmentsAhead(TABLE, rows(6, 20));
    expect(next?.settle()).toBe(true);
    expect(next?.row(19)).not.toBeNull();
  });

  it('starts a batch cleanly after one whose chain stopped part way (an error), with rows of the last still unclaimed', () => {
    const stopped = commitmentsAhead(TABLE, rows(7, 500));
    expect(stopped?.row(0)).toBeDefined();
    const batch = rows(8, 50);
    const ahead = commitmentsAhead(TABLE, batch);
    expect(ahead?.settle()).toBe(true);
    const heads = new Map<string, { index: number; hash: string }>();
    batch.forEach((row, i) => {
      const pre = ahead?.row(i) ?? null;
      expect(pre, `row ${i}`).not.toBeNull();
      const chained = chainRow(TABLE, row, (k) => heads.get(k), BigInt(i + 1), 1_700_000_000_000_000n, undefined, null, 'org', pre);
      heads.set(chained.key, { index: chained.index, hash: chained.hash });
      expect(rowHashFor(HASH_VERSION_V3, TABLE.name, NAMES, chained.texts), `row ${i}`).toBe(chained.hash);
    });
  });

  it('hash a row in the chain from blocks of keys derived ahead as from its salt alone', () => {
    const salt = Buffer.from('00112233445566778899aabbccddeeff', 'hex');
    // Two blocks derived ahead (keys 0-3), the others derived from the salt as the row is hashed.
    const blocks = Buffer.concat([Buffer.alloc(5), columnKey(salt, 0), columnKey(salt, 1), columnKey(salt, 2), columnKey(salt, 3)]);
    const texts = NAMES.map((n, i) => (n === SALT_COLUMN ? salt.toString('hex') : `v${i}`));
    const committed = committedOf(NAMES);
    const plain = rowHashV3(TABLE.name, NAMES, texts, committed, SaltKeys.of(salt));
    expect(rowHashV3(TABLE.name, NAMES, texts, committed, SaltKeys.of(salt, { buffer: blocks, at: 5, count: 2 }))).toBe(plain);
    // A wrong block is used, not silently derived again: the hash changes.
    blocks[5] = (blocks[5] as number) ^ 1;
    expect(rowHashV3(TABLE.name, NAMES, texts, committed, SaltKeys.of(salt, { buffer: blocks, at: 5, count: 2 }))).not.toBe(plain);
  });
});
