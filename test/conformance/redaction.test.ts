import { createHash } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { countOf, ledgerConfig, sqlstate, useConformanceServer, user } from '../fixtures/conformance.js';

/**
 * Redaction of one value (cot_redact) in a cotwire/v2 ledger: recorded first
 * in a chained ledger, then replaced by a marker, and the chain still
 * verifies because the recorded digest stands in for the value. Only admins
 * may redact. (v3's salted commitments: commitments.test.ts.)
 */
const s = useConformanceServer({
  users: [user('bi', 'reader'), user('agent', 'writer'), user('dpo', 'admin')],
  ledger: ledgerConfig({ hashVersion: 'cotwire/v2' }),
});

/** The README's value digest: hex(SHA-256(lp(text))). */
function digest(text: string): string {
  const bytes = Buffer.from(text, 'utf8');
  const len = Buffer.alloc(8);
  len.writeBigUInt64BE(BigInt(bytes.length));
  return createHash('sha256')
    .update(Buffer.concat([len, bytes]))
    .digest('hex');
}

const SECRET = 'the customer’s card is 4111-1111-1111-1111';
const traces: string[] = [];

beforeAll(async () => {
  const agent = await s.as('agent');
  for (let i = 0; i < 4; i++) {
    const r = await agent.query(
      "INSERT INTO _cot_steps (session_id, step_type, content, metadata) VALUES ('r', 'Reasoning', $1, $2) RETURNING trace_id::text AS t",
      [i === 2 ? SECRET : `thought ${i}`, JSON.stringify({ i })],
    );
    traces.push(r.rows[0].t as string);
  }
});

const redactionEvents = async (): Promise<Array<{ user_name: string; sqlstate: string }>> =>
  (await (await s.as('dpo')).query("SELECT user_name, sqlstate FROM _cot_security_events WHERE operation LIKE 'REDACT%' ORDER BY ledger_seq")).rows;

describe('who may redact', () => {
  it('refuses readers and writers with 42501, records each attempt, and redacts nothing', async () => {
    for (const name of ['bi', 'agent']) {
      const c = await s.as(name);
      expect(await sqlstate(c.query('SELECT cot_redact($1, $2, $3)', [traces[1], 'content', 'not mine to erase'])), name).toBe('42501');
    }
    await expect.poll(redactionEvents, { timeout: 10_000 }).toEqual([
      { user_name: 'bi', sqlstate: '42501' },
      { user_name: 'agent', sqlstate: '42501' },
    ]);
    expect(await countOf(await s.as('dpo'), 'SELECT count(*) FROM _cot_redactions')).toBe(0);
  });

  it('leaves the records of redaction to the server: clients may not change or remove them', async () => {
    const dpo = await s.as('dpo');
    for (const sql of ['DELETE FROM _cot_redactions', "UPDATE _cot_redactions SET reason = 'x'", 'TRUNCATE _cot_redactions', 'DROP TABLE _cot_redactions']) {
      expect(await sqlstate(dpo.query(sql)), sql).toBe('42501');
    }
  });
});

describe('a wrong redaction', () => {
  it('is answered with its SQLSTATE, and changes nothing', async () => {
    const dpo = await s.fresh('dpo');
    const redact = (args: unknown[]): Promise<string> => sqlstate(dpo.query('SELECT cot_redact($1, $2, $3)', args));
    expect(await redact([traces[1], 'no_such_column', 'r'])).toBe('42703');
    expect(await redact([traces[1], 'current_hash', 'r'])).toBe('0A000');
    expect(await redact([traces[1], 'session_id', 'r'])).toBe('0A000');
    expect(await redact(['00000000-0000-4000-8000-000000000000', 'content', 'r'])).toBe('P0002');
    expect(await redact(['not-a-uuid', 'content', 'r'])).toBe('22P02');
    expect(await redact([traces[1], 'content', '  '])).toBe('22023');
    // A NULL value has nothing to erase.
    expect(await redact([traces[1], 'model', 'r'])).toBe('22023');
    expect(await sqlstate(dpo.query("SELECT cot_redact('x', 'content', 'r'), 1"))).toBe('0A000');
    await dpo.query('BEGIN');
    expect(await redact([traces[1], 'content', 'r'])).toBe('25001');
    await dpo.query('ROLLBACK');
    expect(await countOf(dpo, 'SELECT count(*) FROM _cot_redactions')).toBe(0);
    expect((await dpo.query('SELECT content FROM _cot_steps WHERE trace_id = $1', [traces[1]])).rows).toEqual([{ content: 'thought 1' }]);
  });
});

describe('a redaction', () => {
  it('records who, why and the value’s digest, replaces the value by its marker, logs the attempt, and the chain still verifies', async () => {
    const dpo = await s.as('dpo');
    const target = traces[2] as string;
    const r = await dpo.query('SELECT * FROM cot_redact($1, $2, $3)', [target, 'content', 'GDPR erasure request #17']);
    expect(r.rows).toEqual([
      expect.objectContaining({
        ledger: 'main._cot_steps',
        chain_key: 'r',
        step_index: '2',
        trace_id: target,
        column_name: 'content',
        reason: 'GDPR erasure request #17',
        redacted_by: 'dpo (admin)',
        value_digest: digest(SECRET),
      }),
    ]);
    const record = r.rows[0];
    // Asked again, it answers with the same record and adds none.
    expect((await dpo.query('SELECT cot_redact($1, $2, $3) AS id', [target, 'content', 'again'])).rows).toEqual([{ id: record.redaction_id }]);
    expect(await countOf(dpo, 'SELECT count(*) FROM _cot_redactions')).toBe(1);
    const bi = await s.as('bi');
    expect((await bi.query("SELECT content FROM cot_replay('r')")).rows.map((x) => x.content)).toEqual(['thought 0', 'thought 1', '[redacted]', 'thought 3']);
    expect(await countOf(bi, 'SELECT count(*) FROM _cot_steps WHERE content = $1', [SECRET])).toBe(0);
    expect((await bi.query("SELECT valid, step_count FROM cot_verify('r')")).rows).toEqual([{ valid: true, step_count: '4' }]);
    expect((await bi.query('SELECT bool_and(valid) AS ok FROM cot_verify_redactions_all()')).rows).toEqual([{ ok: true }]);
    const stored = (await bi.query('SELECT target_seq, value_digest, redacted_by FROM _cot_redactions')).rows;
    const seq = (await bi.query('SELECT ledger_seq FROM _cot_steps WHERE trace_id = $1', [target])).rows[0].ledger_seq;
    expect(stored).toEqual([{ target_seq: seq, value_digest: digest(SECRET), redacted_by: 'dpo (admin)' }]);
    // Both calls are in the security ledger as carried out.
    await expect.poll(async () => (await redactionEvents()).filter((e) => e.user_name === 'dpo' && e.sqlstate === '00000').length, { timeout: 10_000 }).toBe(2);
  });

  it('of a JSON value leaves the JSON string "[redacted]", and the chain still verifies', async () => {
    const dpo = await s.as('dpo');
    await dpo.query('SELECT cot_redact($1, $2, $3)', [traces[3], 'metadata', 'not needed']);
    const raw = await dpo.query('SELECT metadata::text AS m FROM _cot_steps WHERE trace_id = $1', [traces[3]]);
    expect(raw.rows).toEqual([{ m: '"[redacted]"' }]);
    expect((await dpo.query("SELECT valid FROM cot_verify('r')")).rows).toEqual([{ valid: true }]);
  });
});

describe('retention without ledger.retentionDays', () => {
  it('is refused with 55000: sessions are kept forever', async () => {
    const dpo = await s.as('dpo');
    expect(await sqlstate(dpo.query('SELECT * FROM cot_retain(true)'))).toBe('55000');
    expect(await sqlstate(dpo.query('SELECT cot_retain()'))).toBe('55000');
  });
});
