import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEFAULTS } from '../../src/config/schema.js';
import { usePgServer } from '../fixtures/pg-server.js';

/**
 * Redaction and retention on a PostgreSQL engine, proven by what is left
 * on disk: an erased value is first found in the ledger's heap or TOAST
 * files, then is in neither after cot_redact() or retention, and the chains
 * still verify and go on.
 */

// Sessions seconds old are retained here, far short of the default floor (ledger.retentionFloorDays), which is off.
const ctx = usePgServer({ ledger: { ...DEFAULTS.ledger, retentionFloorDays: 0 } });

/** Every file of the relations that hold `_cot_steps`: its heap, its TOAST, each segment. */
async function ledgerFiles(): Promise<string[]> {
  const admin = await ctx.engine.admin();
  await admin.run('CHECKPOINT');
  const rows = (await admin.query(
    `SELECT pg_catalog.pg_relation_filepath(c.oid) FROM pg_catalog.pg_class c
     WHERE c.oid = 'public._cot_steps'::regclass OR c.oid = (SELECT reltoastrelid FROM pg_catalog.pg_class WHERE oid = 'public._cot_steps'::regclass)`,
  )) as Array<[string]>;
  const files: string[] = [];
  for (const [path] of rows) {
    const base = join(ctx.engine.pg.data, path);
    for (let segment = 0; existsSync(segment === 0 ? base : `${base}.${segment}`); segment++) files.push(segment === 0 ? base : `${base}.${segment}`);
  }
  expect(files.length).toBeGreaterThanOrEqual(2);
  return files;
}

async function onDisk(needle: string): Promise<boolean> {
  const files = await ledgerFiles();
  return files.some((f) => readFileSync(f).includes(Buffer.from(needle, 'utf8')));
}

const STEP = "INSERT INTO _cot_steps (session_id, step_type, content) VALUES ($1, 'Reasoning', $2) RETURNING trace_id::text AS t, current_hash";

describe('erasure on a PostgreSQL engine', () => {
  it('cot_redact() takes a value out of the table and its TOAST, keeps the chain whole, and records it', async () => {
    const c = ctx.client;
    const small = `card 4111-${randomBytes(6).toString('hex')}`;
    // Random hex does not compress: stored out of line, in the TOAST table, as written.
    const big = `dossier ${randomBytes(4096).toString('hex')}`;
    const a = (await c.query(STEP, ['to-erase', small])).rows[0] as { t: string };
    const b = (await c.query(STEP, ['to-erase', big])).rows[0] as { t: string };
    await c.query(STEP, ['to-erase', 'kept']);
    expect(await onDisk(small)).toBe(true);
    expect(await onDisk(big.slice(0, 200))).toBe(true);

    for (const t of [a.t, b.t]) {
      const r = await c.query('SELECT * FROM cot_redact($1, $2, $3)', [t, 'content', 'the data subject asked']);
      expect(r.rows[0]).toMatchObject({ ledger: 'main._cot_steps', column_name: 'content', applied: 'true' });
    }
    expect(await onDisk(small)).toBe(false);
    expect(await onDisk(big.slice(0, 200))).toBe(false);
    expect(await onDisk(big.slice(-200))).toBe(false);
    expect((await c.query("SELECT content FROM _cot_steps WHERE session_id = 'to-erase' ORDER BY step_index")).rows.map((r) => r.content)).toEqual([
      '[redacted]',
      '[redacted]',
      'kept',
    ]);
    expect((await c.query("SELECT valid, step_count FROM cot_verify('to-erase')")).rows).toEqual([{ valid: true, step_count: '3' }]);
    expect((await c.query("SELECT count(*)::int AS n FROM _cot_redactions WHERE target_chain_key = 'to-erase'")).rows).toEqual([{ n: 2 }]);
    // The chain goes on from its head, as before.
    expect((await c.query(STEP, ['to-erase', 'after'])).rowCount).toBe(1);
    expect((await c.query("SELECT valid, step_count FROM cot_verify('to-erase')")).rows).toEqual([{ valid: true, step_count: '4' }]);
  });

  it('retention removes whole old sessions from the table and its TOAST, records each first, and their chains go on from the record', async () => {
    const c = ctx.client;
    const secret = `old secret ${randomBytes(2048).toString('hex')}`;
    const heads = new Map<string, string>();
    for (const session of ['old-a', 'old-b']) {
      for (let i = 0; i < 3; i++) {
        const r = (await c.query(STEP, [session, session === 'old-a' && i === 1 ? secret : `${session} ${i}`])).rows[0] as { current_hash: string };
        heads.set(session, r.current_hash);
      }
    }
    // Steps are stamped by the writer's clock, this process's: the cutoff is read from it too.
    const cutoff = Date.now();
    expect(await onDisk(secret.slice(0, 200))).toBe(true);

    // The age of the cutoff, at each call: retention counts back from its own clock, and a busy machine may
    // take longer between two calls than between the old sessions and the young one.
    const days = (): number => (Date.now() - cutoff) / 86_400_000;
    // A session with a step just now is newer than any cutoff in the past.
    await c.query(STEP, ['young', 'new']);
    const dry = await ctx.server.running.retain(days(), true, 'test');
    expect(dry.map((r) => r.chainKey).sort()).toEqual(expect.arrayContaining(['old-a', 'old-b']));
    expect(dry.map((r) => r.chainKey)).not.toContain('young');
    await c.query(STEP, ['young', 'newer']);
    const removed = await ctx.server.running.retain(days(), false, 'test');
    expect(removed.filter((r) => r.chainKey.startsWith('old-')).map((r) => [r.chainKey, r.stepCount, r.finalHash])).toEqual([
      ['old-a', 3, heads.get('old-a')],
      ['old-b', 3, heads.get('old-b')],
    ]);
    expect(await onDisk(secret.slice(0, 200))).toBe(false);
    expect((await c.query("SELECT count(*)::int AS n FROM _cot_steps WHERE session_id LIKE 'old-%'")).rows).toEqual([{ n: 0 }]);
    expect((await c.query("SELECT count(*)::int AS n FROM _cot_steps WHERE session_id = 'young'")).rows).toEqual([{ n: 2 }]);
    expect(
      (await c.query("SELECT chain_key, step_count::int AS n, final_hash FROM _cot_retention WHERE chain_key LIKE 'old-%' ORDER BY chain_key")).rows,
    ).toEqual([
      { chain_key: 'old-a', n: 3, final_hash: heads.get('old-a') },
      { chain_key: 'old-b', n: 3, final_hash: heads.get('old-b') },
    ]);
    const next = await c.query("INSERT INTO _cot_steps (session_id, step_type) VALUES ('old-a', 'Summary') RETURNING step_index, prev_hash");
    expect(next.rows).toEqual([{ step_index: 3, prev_hash: heads.get('old-a') }]);
    expect((await c.query("SELECT valid FROM cot_verify('old-a')")).rows).toEqual([{ valid: true }]);
    expect((await c.query('SELECT bool_and(valid) AS ok FROM cot_verify_all()')).rows).toEqual([{ ok: true }]);
  });
});
