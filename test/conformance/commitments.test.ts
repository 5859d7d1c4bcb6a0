import { createHash } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { DEFAULTS } from '../../src/config/schema.js';
import { useConformanceServer, user } from '../fixtures/conformance.js';

/**
 * Ledgers chained with cotwire/v3 (ledger.hashVersion), on either engine:
 * each value a client supplies is committed to under a key of its row's
 * salt, the chain verifies, and a redaction leaves nothing a reader can
 * match a guess against, while its opening proves the value.
 */
const s = useConformanceServer({
  users: [user('bi', 'reader'), user('agent', 'writer'), user('dpo', 'admin')],
  ledger: { ...DEFAULTS.ledger, hashVersion: 'cotwire/v3' },
});

const lp = (text: string): Buffer => {
  const bytes = Buffer.from(text, 'utf8');
  const len = Buffer.alloc(8);
  len.writeBigUInt64BE(BigInt(bytes.length));
  return Buffer.concat([len, bytes]);
};
const sha = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

const SECRET = 'deny the refund';
/** 1,000 guesses of what was decided, the true one among them. */
const GUESSES = Array.from({ length: 999 }, (_, i) => `${['approve', 'deny', 'escalate'][i % 3]} the refund ${i}`).concat(SECRET);
let target = '';

beforeAll(async () => {
  const agent = await s.as('agent');
  const step = "INSERT INTO _cot_steps (session_id, step_type, content, confidence) VALUES ('v3', 'Decision', $1, $2) RETURNING trace_id::text AS t";
  await agent.query(step, ['read the order', 0.5]);
  target = (await agent.query(step, [SECRET, 0.8])).rows[0].t as string;
  await agent.query(step, ['told the customer', 0.9]);
});

describe('cotwire/v3 ledgers', () => {
  it('are recorded as v3, salt each row, and verify', async () => {
    const bi = await s.as('bi');
    expect((await bi.query("SELECT obj_description('_cot_steps'::regclass, 'pg_class') AS v")).rows).toEqual([{ v: 'cotwire/v3' }]);
    const salts = (await bi.query("SELECT row_salt FROM _cot_steps WHERE session_id = 'v3'")).rows.map((r) => r.row_salt as string);
    expect(salts).toHaveLength(3);
    for (const salt of salts) expect(salt).toMatch(/^[0-9a-f]{32}$/);
    expect(new Set(salts).size).toBe(3);
    expect((await bi.query("SELECT valid, step_count FROM cot_verify('v3')")).rows).toEqual([{ valid: true, step_count: '3' }]);
    // A client may not supply the salt.
    const agent = await s.as('agent');
    await expect(
      agent.query("INSERT INTO _cot_steps (session_id, step_type, content, row_salt) VALUES ('v3x', 'Decision', 'x', '000102030405060708090a0b0c0d0e0f')"),
    ).rejects.toMatchObject({ code: expect.stringMatching(/^(42501|428C9|42601|0A000)$/) });
  });

  it('leave a reader nothing to match 1,000 guesses against after a redaction; the opening proves the value', async () => {
    const dpo = await s.as('dpo');
    const record = (await dpo.query('SELECT * FROM cot_redact($1, $2, $3)', [target, 'content', 'erasure request'])).rows[0] as Record<string, string>;
    const bi = await s.as('bi');
    const row = (await bi.query('SELECT content, row_salt FROM _cot_steps WHERE trace_id = $1::uuid', [target])).rows[0] as Record<string, string>;
    expect(row.content).toBe('[redacted]');
    const listed = JSON.parse(row.row_salt ?? '') as Record<string, string>;
    expect(Object.keys(listed)).not.toContain('content');
    const digests = new Set((await bi.query('SELECT value_digest FROM _cot_redactions')).rows.map((r) => r.value_digest as string));
    expect(digests.has(record.value_digest ?? '')).toBe(true);
    const keys = Object.values(listed).map((k) => Buffer.from(k, 'hex'));
    const found = GUESSES.filter((g) => digests.has(sha(lp(g))) || keys.some((k) => digests.has(sha(Buffer.concat([k, lp(g)])))));
    expect(found).toEqual([]);
    expect((await bi.query("SELECT valid, step_count FROM cot_verify('v3')")).rows).toEqual([{ valid: true, step_count: '3' }]);
    expect((await bi.query('SELECT count(*)::int AS n FROM cot_verify_all() WHERE NOT valid')).rows).toEqual([{ n: 0 }]);
    const opening = JSON.parse(record.opening as string) as { text: string; key: string; commitment: string };
    expect(opening.text).toBe(SECRET);
    expect(sha(Buffer.concat([Buffer.from(opening.key, 'hex'), lp(opening.text)]))).toBe(record.value_digest);
  });
});
