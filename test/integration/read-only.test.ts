import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type pg from 'pg';
import { makeScramVerifier } from '../../src/session/scram.js';
import { sqlstate } from '../fixtures/errors.js';
import { startTestServer, type TestServer } from '../fixtures/server.js';

const verifier = makeScramVerifier('pw');
const users = [
  { name: 'agent', password: verifier, role: 'writer', agentId: 'agent-7', orgId: null },
  { name: 'bot', password: verifier, role: 'writer', agentId: null, orgId: null },
];

let server: TestServer;
let admin: pg.Client;

beforeAll(async () => {
  server = await startTestServer({ users: [...users, { name: 'boss', password: verifier, role: 'admin', agentId: null, orgId: null }] });
  admin = await server.client({ user: 'boss', password: 'pw' });
  await admin.query('CREATE TABLE notes (id INTEGER)');
});
afterAll(async () => {
  await server[Symbol.asyncDispose]();
});

async function failure(p: Promise<unknown>): Promise<{ code: string; message: string }> {
  const err = (await p.then(
    () => null,
    (e: unknown) => e,
  )) as pg.DatabaseError | null;
  if (err === null) throw new Error('the statement succeeded');
  return { code: err.code ?? '', message: err.message };
}

describe('read-only transactions, as in PostgreSQL', () => {
  it('BEGIN READ ONLY refuses ledger appends, writes and DDL with 25006, and reads still work', async () => {
    const c = await server.client({ user: 'boss', password: 'pw' });
    await c.query('BEGIN READ ONLY');
    expect((await c.query('SHOW transaction_read_only')).rows).toEqual([{ transaction_read_only: 'on' }]);
    expect((await c.query('SELECT count(*)::INTEGER AS n FROM notes')).rows).toEqual([{ n: 0 }]);
    expect(await failure(c.query("INSERT INTO _cot_steps (session_id, step_type) VALUES ('ro', 'Action')"))).toEqual({
      code: '25006',
      message: 'cannot execute INSERT in a read-only transaction',
    });
    await c.query('ROLLBACK');
    for (const sql of [
      'INSERT INTO notes VALUES (1)',
      'CREATE TABLE other (x INTEGER)',
      'DROP TABLE notes',
      "INSERT INTO _cot_steps (session_id, step_type) VALUES ('ro', 'Action')",
    ]) {
      await c.query('START TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY');
      expect(await sqlstate(c.query(sql))).toBe('25006');
      await c.query('ROLLBACK');
    }
    expect((await c.query("SELECT count(*)::INTEGER AS n FROM _cot_steps WHERE session_id = 'ro'")).rows).toEqual([{ n: 0 }]);
    expect((await c.query('SHOW transaction_read_only')).rows).toEqual([{ transaction_read_only: 'off' }]);
  });

  it('refuses the extended protocol and COPY FROM STDIN alike', async () => {
    const c = await server.client({ user: 'boss', password: 'pw' });
    await c.query('BEGIN READ ONLY');
    expect(await sqlstate(c.query({ text: 'INSERT INTO _cot_steps (session_id, step_type) VALUES ($1, $2)', values: ['ro2', 'Action'] }))).toBe('25006');
    await c.query('ROLLBACK');
    await c.query('BEGIN READ ONLY');
    expect(await sqlstate(c.query('COPY _cot_steps (session_id, step_type) FROM STDIN'))).toBe('25006');
    await c.query('ROLLBACK');
  });

  it('follows default_transaction_read_only for autocommit statements and new blocks; READ WRITE overrides it', async () => {
    const c = await server.client({ user: 'boss', password: 'pw' });
    await c.query('SET default_transaction_read_only = on');
    expect(await sqlstate(c.query('INSERT INTO notes VALUES (2)'))).toBe('25006');
    expect(await sqlstate(c.query('INSERT INTO notes VALUES (2); SELECT 1'))).toBe('25006');
    await c.query('BEGIN');
    expect(await sqlstate(c.query('INSERT INTO notes VALUES (2)'))).toBe('25006');
    await c.query('ROLLBACK');
    await c.query('BEGIN READ WRITE');
    await c.query('INSERT INTO notes VALUES (3)');
    await c.query('COMMIT');
    await c.query('SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE');
    expect((await c.query('SHOW default_transaction_read_only')).rows).toEqual([{ default_transaction_read_only: 'off' }]);
    await c.query('INSERT INTO notes VALUES (4)');
    expect((await c.query('SELECT id FROM notes ORDER BY id')).rows).toEqual([{ id: 3 }, { id: 4 }]);
  });

  it('lets a block turn read-write only before its first query (25001), and read-only at any time', async () => {
    const c = await server.client({ user: 'boss', password: 'pw' });
    await c.query('BEGIN READ ONLY');
    await c.query('SET TRANSACTION READ WRITE');
    await c.query('INSERT INTO notes VALUES (5)');
    await c.query('SET TRANSACTION READ ONLY');
    expect(await sqlstate(c.query('INSERT INTO notes VALUES (6)'))).toBe('25006');
    await c.query('ROLLBACK');
    await c.query('BEGIN READ ONLY');
    await c.query('SELECT 1');
    expect(await failure(c.query('SET transaction_read_only = off'))).toEqual({
      code: '25001',
      message: 'transaction read-write mode must be set before any query',
    });
    await c.query('ROLLBACK');
    expect((await c.query('SELECT count(*)::INTEGER AS n FROM notes WHERE id >= 5')).rows).toEqual([{ n: 0 }]);
  });

  it('warns that SET TRANSACTION outside a block does nothing', async () => {
    const c = await server.client({ user: 'boss', password: 'pw' });
    const notices: string[] = [];
    c.on('notice', (n) => notices.push(`${n.code ?? ''} ${n.message}`));
    await c.query('SET TRANSACTION READ ONLY');
    await c.query('INSERT INTO notes VALUES (7)');
    expect(notices).toEqual(['25P01 SET TRANSACTION can only be used in transaction blocks']);
    await c.query('DELETE FROM notes WHERE id = 7');
  });
});

describe('cot_agent_id()', () => {
  it('is the agent_id the server stamps for the user, or NULL', async () => {
    const agent = await server.client({ user: 'agent', password: 'pw' });
    const bot = await server.client({ user: 'bot', password: 'pw' });
    expect((await agent.query('SELECT cot_agent_id() AS a, current_user AS u')).rows).toEqual([{ a: 'agent-7', u: 'agent' }]);
    expect((await bot.query('SELECT cot_agent_id() AS a')).rows).toEqual([{ a: null }]);
    const stamped = await agent.query("INSERT INTO _cot_steps (session_id, step_type) VALUES ('stamp', 'Action') RETURNING agent_id");
    expect(stamped.rows).toEqual([{ agent_id: 'agent-7' }]);
  });
});
