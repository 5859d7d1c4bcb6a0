import type pg from 'pg';
import { beforeAll, describe, expect, it } from 'vitest';
import { countOf, sqlstate, useConformanceServer, user } from '../fixtures/conformance.js';

/**
 * The guard: nothing arriving over the wire changes or removes what a
 * ledger holds. Each change is refused with 42501 in every way a client can
 * send it, for every role, and the ledgers are the same afterwards.
 */
const s = useConformanceServer({ users: [user('bi', 'reader'), user('agent', 'writer'), user('boss', 'admin')] });

beforeAll(async () => {
  const boss = await s.as('boss');
  await boss.query('CREATE TABLE notes (id INTEGER, body VARCHAR)');
  await boss.query("INSERT INTO notes VALUES (1, 'one')");
  await boss.query('CREATE TABLE _cot_guarded (session_id VARCHAR, note VARCHAR)');
  await boss.query("INSERT INTO _cot_guarded VALUES ('g', 'a'), ('g', 'b'), ('h', 'c')");
  await boss.query(
    "INSERT INTO _cot_steps (session_id, step_type, content) VALUES ('s1', 'Observation', 'kept'), ('s1', 'Decision', 'kept too'), ('s2', 'Action', 'other')",
  );
});

/** What must not change: every row of the two ledgers, and their verdicts. */
async function ledgerState(c: pg.Client): Promise<unknown> {
  const rows = async (table: string) =>
    (
      await c.query({
        text: `SELECT * FROM ${table} ORDER BY ledger_seq`,
        rowMode: 'array',
        types: { getTypeParser: () => (v: string) => v },
      } as pg.QueryConfig)
    ).rows;
  const verdicts = async (fn: string) => (await c.query(`SELECT chain_key, valid, step_count FROM ${fn}() ORDER BY chain_key`)).rows;
  return {
    steps: await rows('_cot_steps'),
    guarded: await rows('_cot_guarded'),
    v1: await verdicts('cot_verify_all'),
    v2: await verdicts('cot_verify_guarded_all'),
  };
}

const CHANGES: ReadonlyArray<readonly [string, string]> = [
  ['update', "UPDATE _cot_steps SET content = 'forged'"],
  ['update with a key', "UPDATE _cot_steps SET content = 'forged' WHERE session_id = 's1' AND step_index = 1"],
  ['update of nothing', "UPDATE _cot_guarded SET note = 'x' WHERE false"],
  ['delete', 'DELETE FROM _cot_steps'],
  ['delete of a session', "DELETE FROM _cot_guarded WHERE session_id = 'h'"],
  ['truncate', 'TRUNCATE _cot_steps'],
  ['drop', 'DROP TABLE _cot_guarded'],
  ['drop if exists', 'DROP TABLE IF EXISTS _cot_steps'],
  ['drop beside an ordinary table', 'DROP TABLE notes, _cot_steps'],
  ['drop in public', 'DROP TABLE public._cot_guarded'],
  ['alter: add a column', 'ALTER TABLE _cot_steps ADD COLUMN x INTEGER'],
  ['alter: drop a column', 'ALTER TABLE _cot_guarded DROP COLUMN note'],
  ['alter: rename', 'ALTER TABLE _cot_guarded RENAME TO old_guarded'],
  ['merge', 'MERGE INTO _cot_steps t USING notes n ON t.step_index = n.id WHEN MATCHED THEN UPDATE SET content = n.body'],
  ['upsert', "INSERT INTO _cot_steps (session_id, step_type) VALUES ('u', 'Action') ON CONFLICT DO NOTHING"],
  ['index', 'CREATE INDEX steps_content ON _cot_steps (content)'],
  ['comment', "COMMENT ON TABLE _cot_steps IS 'x'"],
  ['a delete inside a CTE', 'WITH d AS (DELETE FROM _cot_steps RETURNING *) SELECT count(*) FROM d'],
  ['a ledger filled from a query', 'CREATE TABLE _cot_copy AS SELECT * FROM _cot_steps'],
  ['a table renamed into a ledger name', 'ALTER TABLE notes RENAME TO _cot_notes'],
  ['a view under a ledger name', 'CREATE VIEW _cot_view AS SELECT 1 AS x'],
  ['a change to a server ledger', 'DELETE FROM _cot_security_events'],
  ['a change to the checkpoints', "UPDATE _cot_checkpoints SET root_hash = 'x'"],
];

describe('a change to a ledger', () => {
  it.each(CHANGES)('is refused with 42501 (%s), in the simple and the extended protocol, and nothing changes', async (_, sql) => {
    const boss = await s.as('boss');
    const before = await ledgerState(boss);
    const err = (await boss.query(sql).catch((e: unknown) => e)) as { code?: string; message?: string };
    expect(err.code, sql).toBe('42501');
    // The message names what was refused.
    expect(err.message).toMatch(/_cot_|ledger/);
    expect(await sqlstate(boss.query({ text: sql, values: [] })), `extended: ${sql}`).toBe('42501');
    expect(await ledgerState(boss)).toEqual(before);
  });

  it('is refused to every role, the reader’s and the writer’s too', async () => {
    for (const name of ['bi', 'agent', 'boss']) {
      const c = await s.as(name);
      for (const sql of ["UPDATE _cot_steps SET content = 'x'", 'DELETE FROM _cot_steps', 'TRUNCATE _cot_steps', 'DROP TABLE _cot_steps']) {
        expect(await sqlstate(c.query(sql)), `${name}: ${sql}`).toBe('42501');
      }
    }
    expect(await countOf(await s.as('boss'), 'SELECT count(*) FROM _cot_steps')).toBe(3);
  });

  it('with parameters is refused before any of them is used', async () => {
    const boss = await s.as('boss');
    expect(await sqlstate(boss.query('UPDATE _cot_steps SET content = $1 WHERE session_id = $2', ['forged', 's1']))).toBe('42501');
    expect(await sqlstate(boss.query('DELETE FROM _cot_steps WHERE session_id = $1', ['s1']))).toBe('42501');
    expect((await boss.query("SELECT content FROM _cot_steps WHERE session_id = 's1' ORDER BY step_index")).rows).toEqual([
      { content: 'kept' },
      { content: 'kept too' },
    ]);
  });

  it('inside a multi-statement string refuses the whole string: nothing before or after it runs', async () => {
    const boss = await s.as('boss');
    const before = await ledgerState(boss);
    expect(await sqlstate(boss.query("INSERT INTO notes VALUES (2, 'two'); DELETE FROM _cot_steps; INSERT INTO notes VALUES (3, 'three')"))).toBe('42501');
    expect(await countOf(boss, 'SELECT count(*) FROM notes')).toBe(1);
    expect(await ledgerState(boss)).toEqual(before);
  });

  it('inside a transaction block is refused, and the block’s other work does not reach the ledger', async () => {
    const c = await s.fresh('boss');
    const before = await ledgerState(c);
    await c.query('BEGIN');
    try {
      expect(await sqlstate(c.query('DELETE FROM _cot_steps'))).toBe('42501');
    } finally {
      await c.query('ROLLBACK');
    }
    expect(await ledgerState(c)).toEqual(before);
  });

  it('inside a transaction block fails the block, as any error does: the next statement gets 25P02', async () => {
    const c = await s.fresh('boss');
    await c.query('BEGIN');
    try {
      expect(await sqlstate(c.query('DELETE FROM _cot_steps'))).toBe('42501');
      expect(await sqlstate(c.query('SELECT 1'))).toBe('25P02');
    } finally {
      await c.query('ROLLBACK');
    }
  });

  it('that would shadow a ledger with a TEMP table is refused with 42501', async () => {
    const boss = await s.as('boss');
    expect(await sqlstate(boss.query('CREATE TEMP TABLE _cot_steps (x INTEGER)'))).toBe('42501');
  });

  it('is recorded in _cot_security_events with the user, the table and the reason', async () => {
    const agent = await s.as('agent');
    expect(await sqlstate(agent.query("DELETE FROM _cot_guarded WHERE session_id = 'g'"))).toBe('42501');
    const boss = await s.as('boss');
    await expect
      .poll(
        async () =>
          (await boss.query("SELECT target, reason, sqlstate FROM _cot_security_events WHERE user_name = 'agent' ORDER BY ledger_seq DESC LIMIT 1")).rows,
        { timeout: 10_000 },
      )
      .toEqual([{ target: '_cot_guarded', reason: 'ledger', sqlstate: '42501' }]);
  });
});

describe('the server’s own ledgers', () => {
  for (const [table, columns, values] of [
    ['_cot_checkpoints', 'origin, tree_size, root_hash, checkpoint', "'forged', 1, 'AAAA', 'forged\n1\nAAAA\n'"],
    ['_cot_security_events', 'user_name', "'forged'"],
    ['_cot_redactions', 'ledger, column_name', "'main._cot_steps', 'content'"],
    ['_cot_retention', 'ledger', "'main._cot_steps'"],
  ] as const) {
    it(`take no client appends to ${table}: 42501, and nothing is written`, async () => {
      const boss = await s.as('boss');
      const before = await countOf(boss, `SELECT count(*) FROM ${table} WHERE ${columns.split(',')[0]} = ${values.split(',')[0]}`);
      const err = (await boss.query(`INSERT INTO ${table} (${columns}) VALUES (${values})`).catch((e: unknown) => e)) as { code?: string; message?: string };
      expect(err.code).toBe('42501');
      expect(err.message).toContain('only the server appends to it');
      expect(await countOf(boss, `SELECT count(*) FROM ${table} WHERE ${columns.split(',')[0]} = ${values.split(',')[0]}`)).toBe(before);
    });
  }
});

describe('ordinary tables', () => {
  it('stay fully usable, including writes that read a ledger', async () => {
    const boss = await s.as('boss');
    await boss.query("INSERT INTO notes SELECT 10 + count(*)::integer, 'from the ledger' FROM _cot_steps");
    await boss.query("UPDATE notes SET body = 'changed' WHERE id = 1");
    await boss.query('DELETE FROM notes WHERE id = 13');
    expect((await boss.query('SELECT id, body FROM notes ORDER BY id')).rows).toEqual([{ id: 1, body: 'changed' }]);
  });

  it('can be built, and views made, from queries over a ledger', async () => {
    const boss = await s.as('boss');
    await boss.query('CREATE VIEW steps_per_session AS SELECT session_id, count(*)::integer AS n FROM _cot_steps GROUP BY session_id');
    await boss.query('CREATE TABLE summary AS SELECT session_id, count(*)::integer AS n FROM _cot_steps GROUP BY session_id');
    for (const from of ['summary', 'steps_per_session']) {
      expect((await boss.query(`SELECT session_id, n FROM ${from} ORDER BY 1`)).rows, from).toEqual([
        { session_id: 's1', n: 2 },
        { session_id: 's2', n: 1 },
      ]);
    }
  });
});
