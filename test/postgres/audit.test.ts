import { describe, expect, it } from 'vitest';
import { DEFAULTS } from '../../src/config/schema.js';
import { until } from '../fixtures/poll.js';
import { startPgTestServer, usePgServer } from '../fixtures/pg-server.js';

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

describe('the watch on a PostgreSQL engine', () => {
  it('finds rows deleted behind the servers between rounds, and at the start of an instance, without waiting for the next round', async () => {
    // Rounds an hour apart (the default), a look every second.
    const ledger = { ...DEFAULTS.ledger, watchIntervalSeconds: 1 };
    const watcher = await startPgTestServer(ctx.engine, { ledger });
    let before = 0;
    try {
      const c = await watcher.client();
      for (let i = 0; i < 4; i++) await c.query("INSERT INTO _cot_steps (session_id, step_type, content) VALUES ('watched', 'Action', $1)", [`step ${i}`]);
      await ctx.server.running.auditor.audit(true);
      const missing = async (): Promise<number> =>
        (await c.query("SELECT coalesce(sum(row_count), 0)::int AS n FROM cot_audit() WHERE kind = 'missing' AND ledger IS NULL")).rows[0].n as number;
      before = await missing();
      const admin = await ctx.engine.admin();
      await admin.run('ALTER TABLE public._cot_steps DISABLE TRIGGER cotwire_append_only');
      await admin.run("DELETE FROM public._cot_steps WHERE session_id = 'watched' AND step_index = 1");
      await admin.run('ALTER TABLE public._cot_steps ENABLE TRIGGER cotwire_append_only');
      await until('the deletion in cot_audit()', async () => (await missing()) === before + 1, 30_000);
      expect((await c.query("SELECT kind FROM cot_audit() WHERE chain_key = 'watched'")).rows).toEqual([{ kind: 'deleted' }]);
    } finally {
      await watcher.close();
    }
    // And a cut tail, while no instance ran.
    const admin = await ctx.engine.admin();
    await admin.run('ALTER TABLE public._cot_steps DISABLE TRIGGER cotwire_append_only');
    await admin.run("DELETE FROM public._cot_steps WHERE session_id = 'watched' AND step_index = 3");
    await admin.run('ALTER TABLE public._cot_steps ENABLE TRIGGER cotwire_append_only');
    const started = await startPgTestServer(ctx.engine, { ledger });
    try {
      const c = await started.client();
      await until(
        'the deletion made while stopped in cot_audit()',
        async () => (await c.query("SELECT row_count::int AS n FROM cot_audit() WHERE kind = 'missing' AND ledger IS NULL")).rows[0]?.n === before + 2,
        30_000,
      );
    } finally {
      await started.close();
    }
  }, 120_000);
});
