import { createHash } from 'node:crypto';
import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import { checkpointConfig, sqlstate, useConformanceServer } from '../fixtures/conformance.js';

/**
 * The global Merkle log (RFC 9162) over every ledger row, its signed
 * checkpoints and proofs, each checked here against a tree computed by the
 * client from the rows it reads and the README's leaf format.
 */
// A checkpoint after every four new leaves, and none on a timer: the test decides when one is due.
const MAX_LEAVES = 4;
const s = useConformanceServer({ checkpoint: checkpointConfig({ intervalSeconds: 3600, maxLeaves: MAX_LEAVES }) });

const sha256 = (...parts: Buffer[]): Buffer => createHash('sha256').update(Buffer.concat(parts)).digest();
const nodeHash = (left: Buffer, right: Buffer): Buffer => sha256(Buffer.from([1]), left, right);

function lp(text: string): Buffer {
  const bytes = Buffer.from(text, 'utf8');
  const len = Buffer.alloc(8);
  len.writeBigUInt64BE(BigInt(bytes.length));
  return Buffer.concat([len, bytes]);
}

/** The README's leaf: lp("cotwire/leaf/v1") || lp(schema) || lp(table) || lp(chain key) || lp(current_hash), hashed under 0x00. */
const leafHash = (table: string, chainKey: string, currentHash: string): Buffer =>
  sha256(Buffer.from([0]), lp('cotwire/leaf/v1'), lp('main'), lp(table), lp(chainKey), lp(currentHash));

/** RFC 9162 §2.1.1: the root of leaves [from, to). */
function rootOf(leaves: readonly Buffer[], from = 0, to = leaves.length): Buffer {
  const n = to - from;
  if (n === 0) return sha256();
  if (n === 1) return leaves[from] as Buffer;
  let k = 1;
  while (k * 2 < n) k *= 2;
  return nodeHash(rootOf(leaves, from, from + k), rootOf(leaves, from + k, to));
}

/** RFC 9162 §2.1.3.2: whether `proof` takes leaf `index` of a tree of `size` to `root`. */
function verifyInclusion(index: number, size: number, leaf: Buffer, proof: readonly Buffer[], root: Buffer): boolean {
  if (index >= size) return false;
  let fn = index;
  let sn = size - 1;
  let r = leaf;
  for (const p of proof) {
    if (sn === 0) return false;
    if (fn % 2 === 1 || fn === sn) {
      r = nodeHash(p, r);
      if (fn % 2 === 0) {
        while (fn % 2 === 0 && fn !== 0) {
          fn >>= 1;
          sn >>= 1;
        }
      }
    } else {
      r = nodeHash(r, p);
    }
    fn >>= 1;
    sn >>= 1;
  }
  return sn === 0 && r.equals(root);
}

/** RFC 9162 §2.1.4.2: whether `proof` shows the tree of `first` leaves is a prefix of the tree of `second`. */
function verifyConsistency(first: number, second: number, firstRoot: Buffer, secondRoot: Buffer, proof: readonly Buffer[]): boolean {
  if (first === second) return proof.length === 0 && firstRoot.equals(secondRoot);
  if (first === 0 || first > second || proof.length === 0) return false;
  const path = (first & (first - 1)) === 0 ? [firstRoot, ...proof] : [...proof];
  let fn = first - 1;
  let sn = second - 1;
  while (fn % 2 === 1) {
    fn >>= 1;
    sn >>= 1;
  }
  let fr = path[0] as Buffer;
  let sr = path[0] as Buffer;
  for (const c of path.slice(1)) {
    if (sn === 0) return false;
    if (fn % 2 === 1 || fn === sn) {
      fr = nodeHash(c, fr);
      sr = nodeHash(c, sr);
      if (fn % 2 === 0) {
        while (fn % 2 === 0 && fn !== 0) {
          fn >>= 1;
          sn >>= 1;
        }
      }
    } else {
      sr = nodeHash(sr, c);
    }
    fn >>= 1;
    sn >>= 1;
  }
  return sn === 0 && fr.equals(firstRoot) && sr.equals(secondRoot);
}

/** Every leaf of the log the client can see, in ledger_seq order: every row of every ledger. */
async function leaves(c: pg.Client): Promise<Buffer[]> {
  const columns = (
    await c.query(
      "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = 'public' AND column_name IN ('ledger_seq', 'session_id')",
    )
  ).rows as Array<{ table_name: string; column_name: string }>;
  const ledgers = [...new Set(columns.filter((r) => r.column_name === 'ledger_seq').map((r) => r.table_name))];
  const keyed = new Set(columns.filter((r) => r.column_name === 'session_id').map((r) => r.table_name));
  const rows: Array<{ seq: bigint; leaf: Buffer }> = [];
  for (const table of ledgers) {
    const key = keyed.has(table) ? 'session_id' : "''";
    const r = await c.query(`SELECT ledger_seq, ${key} AS k, current_hash FROM ${table}`);
    for (const row of r.rows) rows.push({ seq: BigInt(row.ledger_seq), leaf: leafHash(table, row.k ?? '', row.current_hash) });
  }
  rows.sort((a, b) => (a.seq < b.seq ? -1 : 1));
  rows.forEach((r, i) => {
    if (r.seq !== BigInt(i + 1)) throw new Error(`ledger_seq ${r.seq} at position ${i + 1}`);
  });
  return rows.map((r) => r.leaf);
}

interface Checkpoint {
  checkpoint: string;
  origin: string;
  tree_size: string;
  root_hash: string;
}

/** Appends steps until a checkpoint covers `seq`, and returns it. */
async function checkpointCovering(c: pg.Client, seq: bigint): Promise<Checkpoint> {
  for (let i = 0; i < MAX_LEAVES; i++) await c.query("INSERT INTO _cot_steps (session_id, step_type) VALUES ('filler', 'Action')");
  await expect
    .poll(async () => BigInt((await c.query('SELECT tree_size FROM cot_checkpoint()')).rows[0]?.tree_size ?? 0) >= seq, { timeout: 15_000 })
    .toBe(true);
  return (await c.query('SELECT * FROM cot_checkpoint()')).rows[0] as Checkpoint;
}

const b64 = (s: string): Buffer => Buffer.from(s, 'base64');
const append = async (c: pg.Client, session: string): Promise<{ trace_id: string; ledger_seq: string; current_hash: string }> =>
  (
    await c.query("INSERT INTO _cot_steps (session_id, step_type, content) VALUES ($1, 'Observation', 'x') RETURNING trace_id, ledger_seq, current_hash", [
      session,
    ])
  ).rows[0];

const firstRoot: { size: number; root: Buffer } = { size: 0, root: Buffer.alloc(0) };

describe('proofs before a checkpoint', () => {
  it('give a step its place in the log, and no proof until a checkpoint covers it', async () => {
    const c = await s.as();
    const step = await append(c, 'early');
    const r = await c.query('SELECT * FROM cot_prove($1)', [step.trace_id]);
    expect(r.rows).toHaveLength(1);
    expect(r.rows[0]).toMatchObject({
      trace_id: step.trace_id,
      session_id: 'early',
      ledger_seq: step.ledger_seq,
      leaf_index: String(BigInt(step.ledger_seq) - 1n),
    });
    expect(r.rows[0]).toMatchObject({ tree_size: null, inclusion_proof: null, checkpoint: null });
  });
});

describe('signed checkpoints', () => {
  it('are issued after maxLeaves new leaves, as a C2SP signed note of origin, size and root', async () => {
    const c = await s.as();
    const cp = await checkpointCovering(c, 1n);
    const [origin, size, root, blank, signature] = cp.checkpoint.split('\n');
    expect({ origin, size, root, blank }).toEqual({ origin: cp.origin, size: cp.tree_size, root: cp.root_hash, blank: '' });
    expect(cp.root_hash).toMatch(/^[A-Za-z0-9+/]{43}=$/);
    expect(signature).toMatch(new RegExp(`^\u2014 ${cp.origin.replace(/[.]/g, '\\.')} [A-Za-z0-9+/]+=*$`));
    expect(Number(cp.tree_size)).toBeGreaterThanOrEqual(MAX_LEAVES);
    firstRoot.size = Number(cp.tree_size);
    firstRoot.root = b64(cp.root_hash);
  });

  it('sign the root of the tree over every ledger row, as a client computes it from the rows', async () => {
    const c = await s.as();
    const cp = (await c.query('SELECT * FROM cot_checkpoint()')).rows[0] as Checkpoint;
    const all = await leaves(c);
    const size = Number(cp.tree_size);
    expect(all.length).toBeGreaterThanOrEqual(size);
    expect(rootOf(all.slice(0, size)).toString('base64')).toBe(cp.root_hash);
    // cot_log_root answers the root of any size up to the log's.
    for (const n of [1, 2, 3, size]) {
      expect((await c.query('SELECT cot_log_root($1) AS r', [n])).rows[0].r, `size ${n}`).toBe(rootOf(all.slice(0, n)).toString('base64'));
    }
  });

  it('are chained in _cot_checkpoints, which clients read and may not write', async () => {
    const c = await s.as();
    const latest = (await c.query('SELECT * FROM cot_checkpoint()')).rows[0] as Checkpoint;
    const stored = (await c.query('SELECT tree_size, root_hash, checkpoint FROM _cot_checkpoints ORDER BY ledger_seq DESC LIMIT 1')).rows[0];
    expect(stored).toEqual({ tree_size: latest.tree_size, root_hash: latest.root_hash, checkpoint: latest.checkpoint });
    expect((await c.query('SELECT bool_and(valid) AS ok FROM cot_verify_checkpoints_all()')).rows).toEqual([{ ok: true }]);
    expect(await sqlstate(c.query('DELETE FROM _cot_checkpoints'))).toBe('42501');
    expect(await sqlstate(c.query("UPDATE _cot_checkpoints SET root_hash = 'x'"))).toBe('42501');
  });
});

describe('inclusion proofs', () => {
  it('take a step’s leaf to the checkpoint’s root (cot_prove)', async () => {
    const c = await s.as();
    const step = await append(c, 'proven');
    await checkpointCovering(c, BigInt(step.ledger_seq));
    const r = (await c.query('SELECT * FROM cot_prove($1)', [step.trace_id])).rows[0];
    expect(r).toMatchObject({ ledger_seq: step.ledger_seq, leaf_index: String(BigInt(step.ledger_seq) - 1n), checkpoint: expect.any(String) });
    const size = Number(r.tree_size);
    expect(size).toBeGreaterThanOrEqual(Number(step.ledger_seq));
    expect(r.checkpoint.split('\n')[1]).toBe(String(size));
    const root = b64(r.root_hash);
    const leaf = leafHash('_cot_steps', 'proven', step.current_hash);
    const proof = (r.inclusion_proof as string[]).map(b64);
    expect(verifyInclusion(Number(r.leaf_index), size, leaf, proof, root)).toBe(true);
    // The proof is for this leaf only: another leaf, or another position, does not verify.
    expect(verifyInclusion(Number(r.leaf_index), size, leafHash('_cot_steps', 'proven', '0'.repeat(64)), proof, root)).toBe(false);
    // Signed: no bigger than the latest checkpoint, read after the proof (the fillers may have brought another since).
    const latest = (await c.query('SELECT * FROM cot_checkpoint()')).rows[0] as Checkpoint;
    expect(Number(latest.tree_size)).toBeGreaterThanOrEqual(size);
  });

  it('answer for any leaf and size up to the log’s (cot_inclusion_proof), and agree with the tree the client computes', async () => {
    const c = await s.as();
    const all = await leaves(c);
    const size = all.length;
    const root = rootOf(all);
    for (const index of [0, 1, Math.floor(size / 2), size - 1]) {
      const text = (await c.query('SELECT cot_inclusion_proof($1, $2) AS p', [index, size])).rows[0].p as string;
      const proof = text === '' ? [] : text.split(' ').map(b64);
      expect(verifyInclusion(index, size, all[index] as Buffer, proof, root), `leaf ${index} of ${size}`).toBe(true);
    }
  });
});

describe('consistency proofs', () => {
  it('show an earlier checkpoint’s tree is a prefix of a later one’s (cot_consistency)', async () => {
    const c = await s.as();
    expect(firstRoot.size).toBeGreaterThan(0);
    const step = await append(c, 'later');
    const later = await checkpointCovering(c, BigInt(step.ledger_seq));
    const r = (await c.query(`SELECT * FROM cot_consistency(${firstRoot.size}, ${Number(later.tree_size)})`)).rows[0];
    expect(r).toMatchObject({
      old_size: String(firstRoot.size),
      new_size: later.tree_size,
      old_root: firstRoot.root.toString('base64'),
      new_root: later.root_hash,
    });
    const proof = (r.consistency_proof as string[]).map(b64);
    expect(verifyConsistency(firstRoot.size, Number(later.tree_size), firstRoot.root, b64(later.root_hash), proof)).toBe(true);
    // Against a root that was never signed it fails.
    expect(verifyConsistency(firstRoot.size, Number(later.tree_size), sha256(Buffer.from('forged')), b64(later.root_hash), proof)).toBe(false);
    const text = (await c.query('SELECT cot_consistency_proof($1, $2) AS p', [firstRoot.size, Number(later.tree_size)])).rows[0].p as string;
    expect(text.split(' ')).toEqual(r.consistency_proof);
  });

  it('take their sizes as parameters, as drivers send them', async () => {
    const c = await s.as();
    const literal = (await c.query('SELECT * FROM cot_consistency(1, 3)')).rows;
    expect((await c.query('SELECT * FROM cot_consistency($1, $2)', [1, 3])).rows).toEqual(literal);
    expect((await c.query('SELECT * FROM cot_consistency(1, $1)', [3])).rows).toEqual(literal);
  });

  it('refuse sizes out of order or past the log with 22023', async () => {
    const c = await s.as();
    expect(await sqlstate(c.query('SELECT * FROM cot_consistency(9, 3)'))).toBe('22023');
    expect(await sqlstate(c.query('SELECT * FROM cot_consistency(1, 1000000000)'))).toBe('22023');
    expect((await c.query('SELECT cot_log_root(1000000000) AS r')).rows).toEqual([{ r: null }]);
  });
});
