import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import { DEFAULTS } from '../../src/config/schema.js';
import { usePgServer } from '../fixtures/pg-server.js';

/**
 * `SELECT * FROM cot_verify($1)` is answered by the server on PostgreSQL
 * too (handler/chain-verify.ts): the chain's rows read by the client's own
 * backend, their hashes recomputed in the server. Any other shape of the
 * statement is PostgreSQL's own function. For chains intact, edited behind
 * the server, cut, reordered, forged, redacted and shortened by retention,
 * both answer the same, in text and in binary, with the chain as a
 * parameter or as a literal in a simple query.
 */

// Sessions seconds old are retained here, far short of the default floor (ledger.retentionFloorDays), which is off.
const ctx = usePgServer({ ledger: { ...DEFAULTS.ledger, retentionFloorDays: 0 } });

const STEP =
  "INSERT INTO _cot_steps (session_id, step_type, content, confidence, metadata) VALUES ($1, 'Reasoning', $2, 0.5, $3) RETURNING trace_id::text AS t";

async function chain(session: string, steps = 6): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < steps; i++) ids.push(((await ctx.client.query(STEP, [session, `thought ${i}`, JSON.stringify({ i })])).rows[0] as { t: string }).t);
  return ids;
}

/** Edits the ledger as its database's superuser can, with the append-only wall lowered for the while. */
async function behindTheServer(...statements: string[]): Promise<void> {
  const admin = await ctx.engine.admin();
  try {
    await admin.run('ALTER TABLE public._cot_steps DISABLE TRIGGER cotwire_append_only');
    for (const sql of statements) await admin.run(sql);
  } finally {
    await admin.run('ALTER TABLE public._cot_steps ENABLE TRIGGER cotwire_append_only');
    admin.close();
  }
}

/** The served answer and PostgreSQL's function's, in both formats, for `columns` of one chain. */
async function bothAnswers(session: string | null, columns = '*'): Promise<void> {
  for (const binary of [false, true]) {
    const q = (text: string) => ctx.client.query({ text, values: [session], binary } as pg.QueryConfig);
    const served = await q(`SELECT ${columns} FROM cot_verify($1)`);
    // Not the shape the server answers: PostgreSQL runs cot_verify itself.
    const own = await q(`SELECT ${columns} FROM cot_verify($1) ORDER BY 1`);
    expect(served.rows, `${session} ${columns} binary=${binary}`).toEqual(own.rows);
    expect(served.fields.map((f) => [f.name, f.dataTypeID, f.format])).toEqual(own.fields.map((f) => [f.name, f.dataTypeID, f.format]));
    expect(served.command).toBe('SELECT');
    expect(served.rowCount).toBe(own.rowCount);
  }
  // A simple query with the chain as a literal, as psql sends it.
  const literal = session === null ? 'NULL' : `'${session}'`;
  const served = await ctx.client.query(`SELECT ${columns} FROM cot_verify(${literal})`);
  const own = await ctx.client.query(`SELECT ${columns} FROM cot_verify(${literal}) ORDER BY 1`);
  expect(served.rows, `${session} ${columns} simple`).toEqual(own.rows);
  expect(served.fields.map((f) => [f.name, f.dataTypeID])).toEqual(own.fields.map((f) => [f.name, f.dataTypeID]));
}

describe('cot_verify answered by the server on PostgreSQL', () => {
  it('agrees with PostgreSQL on intact chains, unknown ones, NULL, and any choice of columns', async () => {
    await chain('intact');
    await bothAnswers('intact');
    await bothAnswers('no-such-session');
    await bothAnswers(null);
    await bothAnswers('intact', 'valid, step_count');
    await bothAnswers('intact', 'break_kind, chain_key, first_broken_index');
    // The server's parse of the chain read goes with the client's own statements: read again after it.
    await ctx.client.query('DEALLOCATE ALL');
    await bothAnswers('intact');
    await ctx.client.query('DISCARD ALL');
    await bothAnswers('intact');
  });

  it('agrees with PostgreSQL on every kind of break made behind the server', async () => {
    const tampers: Array<[string, (s: string) => string[]]> = [
      ['edited content', (s) => [`UPDATE public._cot_steps SET content = 'forged' WHERE session_id = '${s}' AND step_index = 2`]],
      ['edited confidence', (s) => [`UPDATE public._cot_steps SET confidence = 0.99 WHERE session_id = '${s}' AND step_index = 3`]],
      ['edited metadata', (s) => [`UPDATE public._cot_steps SET metadata = '{"i": 99}' WHERE session_id = '${s}' AND step_index = 4`]],
      ['a deleted middle step', (s) => [`DELETE FROM public._cot_steps WHERE session_id = '${s}' AND step_index = 2`]],
      ['a deleted first step', (s) => [`DELETE FROM public._cot_steps WHERE session_id = '${s}' AND step_index = 0`]],
      ['a deleted last step', (s) => [`DELETE FROM public._cot_steps WHERE session_id = '${s}' AND step_index = 5`]],
      [
        'two swapped steps',
        (s) => [
          `UPDATE public._cot_steps SET step_index = -1 WHERE session_id = '${s}' AND step_index = 2`,
          `UPDATE public._cot_steps SET step_index = 2 WHERE session_id = '${s}' AND step_index = 3`,
          `UPDATE public._cot_steps SET step_index = 3 WHERE session_id = '${s}' AND step_index = -1`,
        ],
      ],
      [
        'a forged step at the end',
        (s) => [
          // A copy of the last step, its hashes kept, as the next one.
          `INSERT INTO public._cot_steps SELECT (pg_catalog.jsonb_populate_record(r, pg_catalog.jsonb_build_object(
             'trace_id', gen_random_uuid(), 'step_index', 6, 'content', 'forged', 'ledger_seq', r.ledger_seq + 1000000))).*
           FROM public._cot_steps r WHERE session_id = '${s}' AND step_index = 5`,
        ],
      ],
      ['a hash rewritten', (s) => [`UPDATE public._cot_steps SET current_hash = repeat('0', 64) WHERE session_id = '${s}' AND step_index = 1`]],
      ['a link rewritten', (s) => [`UPDATE public._cot_steps SET prev_hash = repeat('0', 64) WHERE session_id = '${s}' AND step_index = 4`]],
    ];
    for (const [i, [what, edits]] of tampers.entries()) {
      const session = `tampered-${i}`;
      await chain(session);
      await behindTheServer(...edits(session));
      const [verdict] = (await ctx.client.query('SELECT valid FROM cot_verify($1) ORDER BY 1', [session])).rows as Array<{ valid: boolean }>;
      // A chain cut at its end still links: the global log and the audit find that, not the chain.
      expect(verdict?.valid, what).toBe(what === 'a deleted last step');
      await bothAnswers(session);
    }
  });

  it('agrees with PostgreSQL on a chain with redacted values, and on one that retention shortened', async () => {
    const ids = await chain('redacted');
    for (const t of [ids[1], ids[4]]) await ctx.client.query('SELECT * FROM cot_redact($1, $2, $3)', [t, 'content', 'asked']);
    await bothAnswers('redacted');
    // Redacted, then edited behind the server: the marker no longer stands for the recorded digest.
    await behindTheServer("UPDATE public._cot_steps SET content = 'back' WHERE session_id = 'redacted' AND step_index = 4");
    await bothAnswers('redacted');

    await chain('retained', 3);
    const cutoff = Date.now();
    await chain('kept-young', 1);
    await ctx.server.running.retain((Date.now() - cutoff) / 86_400_000, false, 'test');
    expect((await ctx.client.query("SELECT count(*)::int AS n FROM _cot_steps WHERE session_id = 'retained'")).rows).toEqual([{ n: 0 }]);
    await bothAnswers('retained');
    // The chain goes on from the retention record: its first remaining step is 3, linked to the last removed.
    await chain('retained', 2);
    await bothAnswers('retained');
    await behindTheServer("UPDATE public._cot_steps SET prev_hash = repeat('0', 64) WHERE session_id = 'retained' AND step_index = 3");
    await bothAnswers('retained');
  });
});
