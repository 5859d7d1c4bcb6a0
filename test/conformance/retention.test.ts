import { beforeAll, describe, expect, it } from 'vitest';
import { countOf, ledgerConfig, sqlstate, useConformanceServer, user } from '../fixtures/conformance.js';

/**
 * Retention by whole sessions (cot_retain) with ledger.retentionDays set, and the floor under it.
 * Over the wire a test cannot age a session by days, so this holds what a
 * run does to sessions newer than the cutoff (keeps them whole), who may run
 * it, and what is recorded of each run.
 */
// 30 days is short of the default floor (ledger.retentionFloorDays, 183): this system is taken to be outside the AI Act.
const s = useConformanceServer({
  users: [user('agent', 'writer'), user('ops', 'admin')],
  ledger: ledgerConfig({ retentionDays: 30, retentionFloorDays: 0 }),
});

beforeAll(async () => {
  const agent = await s.as('agent');
  for (const session of ['recent-a', 'recent-b', 'recent-a']) {
    await agent.query("INSERT INTO _cot_steps (session_id, step_type, content) VALUES ($1, 'Reasoning', 'kept')", [session]);
  }
});

const retainEvents = async (): Promise<Array<{ user_name: string; sqlstate: string; reason: string }>> =>
  (await (await s.as('ops')).query("SELECT user_name, sqlstate, reason FROM _cot_security_events WHERE operation = 'RETAIN' ORDER BY ledger_seq")).rows;

describe('cot_retain', () => {
  it('is refused to a writer with 42501, naming the role', async () => {
    const agent = await s.as('agent');
    const err = (await agent.query('SELECT * FROM cot_retain(true)').catch((e: unknown) => e)) as { code?: string; message?: string };
    expect(err.code).toBe('42501');
    expect(err.message).toBe('permission denied: role "writer" of user "agent" may not RETAIN');
  });

  it('lists, as a dry run, no session whose last step is newer than the cutoff', async () => {
    const ops = await s.as('ops');
    const r = await ops.query('SELECT * FROM cot_retain(true)');
    expect(r.rows).toEqual([]);
    expect(await countOf(ops, "SELECT count(*) FROM _cot_steps WHERE session_id LIKE 'recent-%'")).toBe(3);
  });

  it('removes nothing newer than the cutoff, records nothing in _cot_retention, and the chains verify', async () => {
    const ops = await s.as('ops');
    expect((await ops.query('SELECT cot_retain() AS n')).rows).toEqual([{ n: '0' }]);
    expect(await countOf(ops, "SELECT count(*) FROM _cot_steps WHERE session_id LIKE 'recent-%'")).toBe(3);
    expect(await countOf(ops, 'SELECT count(*) FROM _cot_retention')).toBe(0);
    expect((await ops.query("SELECT chain_key, valid FROM cot_verify_all() WHERE chain_key LIKE 'recent-%' ORDER BY 1")).rows).toEqual([
      { chain_key: 'recent-a', valid: true },
      { chain_key: 'recent-b', valid: true },
    ]);
  });

  it('refuses a bad argument (22P02) and a run inside a transaction block (25001)', async () => {
    const ops = await s.fresh('ops');
    expect(await sqlstate(ops.query("SELECT cot_retain('maybe')"))).toBe('22P02');
    await ops.query('BEGIN');
    try {
      expect(await sqlstate(ops.query('SELECT cot_retain()'))).toBe('25001');
    } finally {
      await ops.query('ROLLBACK');
    }
  });

  it('records every run and every refusal in _cot_security_events', async () => {
    await (await s.as('ops')).query('SELECT * FROM cot_retain(true)');
    await expect
      .poll(async () => (await retainEvents()).map((e) => [e.user_name, e.sqlstate]), { timeout: 10_000 })
      .toEqual(
        expect.arrayContaining([
          ['agent', '42501'],
          ['ops', '00000'],
          ['ops', '22P02'],
        ]),
      );
    const reasons = (await retainEvents()).filter((e) => e.user_name === 'ops' && e.sqlstate === '00000').map((e) => e.reason);
    expect(reasons).toEqual(['would remove 0 sessions', 'removed 0 sessions', 'would remove 0 sessions']);
  });
});

describe('the records of retention', () => {
  it('are the server’s: clients may not change or remove them', async () => {
    const ops = await s.as('ops');
    for (const sql of ['DELETE FROM _cot_retention', "UPDATE _cot_retention SET reason = 'x'", 'TRUNCATE _cot_retention', 'DROP TABLE _cot_retention']) {
      expect(await sqlstate(ops.query(sql)), sql).toBe('42501');
    }
    // Their own chains verify (there may be none yet: no session was old enough to go).
    expect((await ops.query('SELECT chain_key FROM cot_verify_retention_all() WHERE NOT valid')).rows).toEqual([]);
  });
});

// A period below the floor, in a configuration built by hand (loadConfig refuses it at start-up).
const floored = useConformanceServer({ users: [user('ops', 'admin')], ledger: ledgerConfig({ retentionDays: 30 }) });

describe('the retention floor', () => {
  it('refuses cot_retain() with 22023 when the period is shorter than ledger.retentionFloorDays, dry or not, and records the refusal', async () => {
    const ops = await floored.as('ops');
    const err = (await ops.query('SELECT * FROM cot_retain(true)').catch((e: unknown) => e)) as { code?: string; message?: string };
    expect(err).toMatchObject({ code: '22023', message: 'a retention period of 30 days is shorter than ledger.retentionFloorDays (183)' });
    expect(await sqlstate(ops.query('SELECT cot_retain()'))).toBe('22023');
    await expect
      .poll(async () => (await ops.query("SELECT sqlstate FROM _cot_security_events WHERE operation = 'RETAIN' ORDER BY ledger_seq")).rows, { timeout: 10_000 })
      .toEqual([{ sqlstate: '22023' }, { sqlstate: '22023' }]);
  });
});
