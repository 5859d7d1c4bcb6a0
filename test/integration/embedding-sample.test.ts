import { describe, expect, it } from 'vitest';
import { DEFAULTS } from '../../src/config/schema.js';
import { samplePoint } from '../../src/ledger/chain/embedding-sample.js';
import { STEP_TYPES } from '../../src/ledger/chain/schema.js';
import { startTestServer } from '../fixtures/server.js';

describe('has_embedding, chosen by the writer', () => {
  it('refuses to start with a step type that does not exist in the list of those always embedded', async () => {
    await expect(startTestServer({ ledger: { ...DEFAULTS.ledger, embeddingAlwaysTypes: ['Decision', 'Decisoin'] } })).rejects.toThrow(
      'invalid configuration: ledger.embeddingAlwaysTypes = ["Decision","Decisoin"]; expected step types, each one of Observation, Hypothesis',
    );
  });

  it('follows the configured rule on every appended step, is part of the chain, and can be audited in SQL', async () => {
    await using server = await startTestServer({
      ledger: { ...DEFAULTS.ledger, embeddingSampleRate: 0.25, embeddingAlwaysTypes: ['Error', 'Observation'] },
    });
    const c = await server.client();
    for (let i = 0; i < 300; i++) {
      await c.query('INSERT INTO _cot_steps (session_id, step_type, content) VALUES ($1, $2, $3)', [
        `s${i % 3}`,
        STEP_TYPES[i % STEP_TYPES.length],
        `step ${i}`,
      ]);
    }
    const rows = (await c.query('SELECT trace_id::text AS id, step_type, has_embedding FROM _cot_steps')).rows as Array<{
      id: string;
      step_type: string;
      has_embedding: boolean;
    }>;
    expect(rows).toHaveLength(300);
    for (const r of rows) {
      const always = r.step_type === 'Error' || r.step_type === 'Observation';
      expect(r.has_embedding).toBe(always || samplePoint(r.id) < 0.25);
    }
    // A Decision is no longer critical here; some are sampled, some not.
    const decisions = rows.filter((r) => r.step_type === 'Decision');
    expect(decisions.some((r) => !r.has_embedding)).toBe(true);
    // The auditor's check, in SQL over the stored rows: every choice is the rule's.
    const broken = await c.query(
      `SELECT count(*)::int AS n FROM _cot_steps
       WHERE has_embedding <> (step_type IN ('Error', 'Observation')
         OR ('0x' || left(sha256('cotwire/embedding-sample/v1:' || lower(trace_id::VARCHAR)), 12))::UBIGINT::DOUBLE / 2.0 ^ 48 < 0.25)`,
    );
    expect(broken.rows[0].n).toBe(0);
    // The choice is hashed: the chains verify as written.
    const verdicts = await c.query("SELECT chain_key, valid, step_count FROM cot_verify_all() WHERE chain_key IN ('s0', 's1', 's2')");
    expect(verdicts.rows.map((v) => [v.chain_key, Number(v.step_count)]).sort()).toEqual([
      ['s0', 100],
      ['s1', 100],
      ['s2', 100],
    ]);
    expect(verdicts.rows.every((v) => v.valid === true)).toBe(true);
  });
});
