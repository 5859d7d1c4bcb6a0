import { describe, expect, it } from 'vitest';
import { countOf, sqlstate, useConformanceServer, user } from '../fixtures/conformance.js';

/**
 * Configured users and their roles (reader, writer, admin), and the
 * identity a writer's appends are stamped with.
 */
const s = useConformanceServer({
  users: [user('bi', 'reader'), user('agent', 'writer', { agentId: 'agent-7', orgId: 'acme' }), user('bot', 'writer'), user('boss', 'admin')],
});

const refusal = async (p: Promise<unknown>): Promise<{ code?: string; message?: string }> =>
  (await p.then(
    () => ({ code: 'succeeded' }),
    (e: unknown) => e,
  )) as { code?: string; message?: string };

describe('logging in', () => {
  it('takes a configured user’s password over SCRAM, and refuses a wrong one or an unknown user with 28P01', async () => {
    const boss = await s.as('boss');
    expect((await boss.query('SELECT current_user IS NOT NULL AS ok')).rows).toEqual([{ ok: true }]);
    for (const [name, password] of [
      ['boss', 'wrong'],
      ['nobody', 'pw'],
    ] as const) {
      const err = await refusal(s.server.client({ user: name, password }));
      expect(err.code, name).toBe('28P01');
    }
  });
});

describe('a reader', () => {
  it('reads ledgers and calls the verification functions', async () => {
    const boss = await s.as('boss');
    await boss.query("INSERT INTO _cot_steps (session_id, step_type, content) VALUES ('read-me', 'Observation', 'x')");
    const bi = await s.as('bi');
    expect(await countOf(bi, "SELECT count(*) FROM _cot_steps WHERE session_id = 'read-me'")).toBe(1);
    expect((await bi.query("SELECT valid FROM cot_verify('read-me')")).rows).toEqual([{ valid: true }]);
  });

  it('may not append, naming its role and the operation in the 42501, and nothing is written', async () => {
    const bi = await s.as('bi');
    const err = await refusal(bi.query("INSERT INTO _cot_steps (session_id, step_type) VALUES ('by-reader', 'Action')"));
    expect(err.code).toBe('42501');
    expect(err.message).toBe('permission denied: role "reader" of user "bi" may not INSERT INTO _cot_steps');
    expect(await countOf(bi, "SELECT count(*) FROM _cot_steps WHERE session_id = 'by-reader'")).toBe(0);
  });

  it('may not create, change or drop anything, ordinary tables included', async () => {
    const boss = await s.as('boss');
    await boss.query('CREATE TABLE reader_notes (id INTEGER, body VARCHAR)');
    await boss.query("INSERT INTO reader_notes VALUES (1, 'x')");
    const bi = await s.as('bi');
    for (const sql of ["UPDATE reader_notes SET body = 'y'", 'DELETE FROM reader_notes', 'CREATE TABLE mine (x INTEGER)', 'DROP TABLE reader_notes']) {
      expect(await sqlstate(bi.query(sql)), sql).toBe('42501');
    }
    expect((await bi.query('SELECT id, body FROM reader_notes')).rows).toEqual([{ id: 1, body: 'x' }]);
  });
});

describe('a writer', () => {
  it('appends to ledgers, under any agent_id when it has no identity of its own', async () => {
    const bot = await s.as('bot');
    const r = await bot.query("INSERT INTO _cot_steps (session_id, step_type, agent_id) VALUES ('free', 'Action', 'whoever') RETURNING agent_id, org_id");
    expect(r.rows).toEqual([{ agent_id: 'whoever', org_id: null }]);
  });

  it('may not write ordinary tables or create tables, ledgers included', async () => {
    const boss = await s.as('boss');
    await boss.query('CREATE TABLE writer_notes (id INTEGER)');
    const bot = await s.as('bot');
    for (const sql of [
      'INSERT INTO writer_notes VALUES (2)',
      'DELETE FROM writer_notes',
      'CREATE TABLE _cot_mine (x INTEGER)',
      'CREATE TABLE plain (x INTEGER)',
    ]) {
      expect(await sqlstate(bot.query(sql)), sql).toBe('42501');
    }
    expect(await countOf(boss, 'SELECT count(*) FROM writer_notes')).toBe(0);
  });
});

describe('a writer’s identity', () => {
  it('is stamped on its appends as agent_id and org_id', async () => {
    const agent = await s.as('agent');
    const r = await agent.query("INSERT INTO _cot_steps (session_id, step_type, content) VALUES ('id-1', 'Decision', 'mine') RETURNING agent_id, org_id");
    expect(r.rows).toEqual([{ agent_id: 'agent-7', org_id: 'acme' }]);
    // Naming itself is allowed.
    const same = await agent.query(
      "INSERT INTO _cot_steps (session_id, step_type, agent_id, org_id) VALUES ('id-1', 'Action', 'agent-7', 'acme') RETURNING agent_id",
    );
    expect(same.rows).toEqual([{ agent_id: 'agent-7' }]);
    const boss = await s.as('boss');
    expect((await boss.query("SELECT agent_id, org_id FROM _cot_steps WHERE session_id = 'id-1' ORDER BY step_index")).rows).toEqual([
      { agent_id: 'agent-7', org_id: 'acme' },
      { agent_id: 'agent-7', org_id: 'acme' },
    ]);
  });

  it('cannot be exchanged for another: a different agent_id or org_id is refused with 42501, and nothing is written', async () => {
    const agent = await s.as('agent');
    const err = await refusal(agent.query("INSERT INTO _cot_steps (session_id, step_type, agent_id) VALUES ('id-2', 'Action', 'agent-8')"));
    expect(err.code).toBe('42501');
    expect(err.message).toBe('user "agent" may append only as agent_id "agent-7", not "agent-8"');
    expect(await sqlstate(agent.query("INSERT INTO _cot_steps (session_id, step_type, org_id) VALUES ('id-2', 'Action', 'other-org')"))).toBe('42501');
    // A multi-row statement with one row in another's name is refused whole.
    expect(
      await sqlstate(
        agent.query("INSERT INTO _cot_steps (session_id, step_type, agent_id) VALUES ('id-2', 'Action', 'agent-7'), ('id-2', 'Action', 'agent-8')"),
      ),
    ).toBe('42501');
    expect(await countOf(await s.as('boss'), "SELECT count(*) FROM _cot_steps WHERE session_id = 'id-2'")).toBe(0);
  });

  it('is stamped on a ledger a client created with agent_id and org_id columns too', async () => {
    const boss = await s.as('boss');
    await boss.query('CREATE TABLE _cot_agent_log (session_id VARCHAR, agent_id VARCHAR, org_id VARCHAR, note VARCHAR)');
    const agent = await s.as('agent');
    await agent.query("INSERT INTO _cot_agent_log (session_id, note) VALUES ('log', 'mine')");
    expect(await sqlstate(agent.query("INSERT INTO _cot_agent_log (session_id, agent_id, note) VALUES ('log', 'someone', 'theirs')"))).toBe('42501');
    expect((await boss.query('SELECT agent_id, org_id, note FROM _cot_agent_log')).rows).toEqual([{ agent_id: 'agent-7', org_id: 'acme', note: 'mine' }]);
  });

  it('is part of the hashed record: the stamped chain verifies', async () => {
    const bi = await s.as('bi');
    expect((await bi.query("SELECT valid, step_count FROM cot_verify('id-1')")).rows).toEqual([{ valid: true, step_count: '2' }]);
  });

  it('is what cot_agent_id() answers on the writer’s connection (NULL for a user without one)', async () => {
    expect((await (await s.as('agent')).query('SELECT cot_agent_id() AS a')).rows).toEqual([{ a: 'agent-7' }]);
    expect((await (await s.as('bi')).query('SELECT cot_agent_id() AS a')).rows).toEqual([{ a: null }]);
  });
});

describe('an admin', () => {
  it('runs DDL and DML on ordinary tables, but may not change a ledger either', async () => {
    const boss = await s.as('boss');
    await boss.query('CREATE TABLE admin_only (x INTEGER)');
    await boss.query('INSERT INTO admin_only VALUES (1)');
    await boss.query('UPDATE admin_only SET x = 2');
    expect((await boss.query('SELECT x FROM admin_only')).rows).toEqual([{ x: 2 }]);
    await boss.query('DROP TABLE admin_only');
    expect(await sqlstate(boss.query("UPDATE _cot_steps SET content = 'x'"))).toBe('42501');
    expect(await sqlstate(boss.query('DELETE FROM _cot_steps'))).toBe('42501');
  });
});

describe('refusals of a role', () => {
  it('are recorded in _cot_security_events with the user, the operation and the reason', async () => {
    const bi = await s.as('bi');
    await refusal(bi.query("INSERT INTO _cot_steps (session_id, step_type) VALUES ('recorded', 'Action')"));
    const boss = await s.as('boss');
    // The server appends its records beside the clients' work: wait for this one.
    await expect
      .poll(
        async () =>
          (
            await boss.query(
              "SELECT operation, reason, sqlstate FROM _cot_security_events WHERE user_name = 'bi' AND operation LIKE 'INSERT%' ORDER BY ledger_seq DESC LIMIT 1",
            )
          ).rows,
        { timeout: 10_000 },
      )
      .toEqual([{ operation: 'INSERT INTO _cot_steps', reason: 'role', sqlstate: '42501' }]);
    const identity = await boss.query(
      "SELECT target, reason FROM _cot_security_events WHERE user_name = 'agent' AND target IN ('agent_id', 'org_id') ORDER BY ledger_seq",
    );
    expect(identity.rows.length).toBeGreaterThanOrEqual(2);
    expect(identity.rows.every((r) => r.reason === 'role')).toBe(true);
  });
});
