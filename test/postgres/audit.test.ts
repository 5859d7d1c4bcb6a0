import { describe, expect, it } from 'vitest';
import { usePgServer } from '../fixtures/pg-server.js';

/**
 * The background audit on a PostgreSQL engine finds what was done behind
 * the server: a row deleted by someone who owns the database (the trigger
 * disabled) shows as a broken chain and as rows missing from the global
 * log, and cot_audit() lists both.
 */
const ctx = usePgServer();

describe('the audit on a PostgreSQL engine', () => {
  it('finds a row deleted behind the server, and cot_audit() lists it; an intact engine has no findings', async () => {
    const c = ctx.client;
    for (let i = 0; i < 3; i++) await c.query("INSERT INTO _cot_steps (session_id, step_type, content) VALUES ('audited', 'Action', $1)", [`step ${i}`]);
    expect(await ctx.server.running.auditor.audit(true)).toEqual([]);
    expect((await c.query('SELECT * FROM cot_audit()')).rows).toEqual([]);

    const admin = await ctx.engine.admin();
    await admin.run('ALTER TABLE public._cot_steps DISABLE TRIGGER cotwire_append_only');
    await admin.run("DELETE FROM public._cot_steps WHERE session_id = 'audited' AND step_index = 1");
    await admin.run('ALTER TABLE public._cot_steps ENABLE TRIGGER cotwire_append_only');
    const findings = await ctx.server.running.auditor.audit(true);
    expect(findings?.map((f) => [f.kind, f.chainKey])).toEqual(
      expect.arrayContaining([
        ['deleted', 'audited'],
        ['missing', null],
      ]),
    );
    const listed = (await c.query('SELECT kind, ledger, chain_key, row_count::int AS n FROM cot_audit() ORDER BY kind')).rows;
    expect(listed).toEqual([
      { kind: 'deleted', ledger: 'main._cot_steps', chain_key: 'audited', n: 1 },
      { kind: 'missing', ledger: null, chain_key: null, n: 1 },
    ]);
  });
});
