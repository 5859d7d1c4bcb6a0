import { DEFAULTS } from '../../src/config/schema.js';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type pg from 'pg';
import { makeScramVerifier } from '../../src/session/scram.js';
import { sqlstate } from '../fixtures/errors.js';
import { onPostgres, startTestServer, type TestServer } from '../fixtures/server.js';

const run = promisify(execFile);
const verifier = makeScramVerifier('pw');
const users = [
  { name: 'bi', password: verifier, role: 'reader', agentId: null, orgId: null },
  { name: 'agent', password: verifier, role: 'writer', agentId: 'agent-7', orgId: 'acme' },
  { name: 'bot', password: verifier, role: 'writer', agentId: null, orgId: null },
  { name: 'boss', password: verifier, role: 'admin', agentId: null, orgId: null },
];

let server: TestServer;
let reader: pg.Client;
let writer: pg.Client;
let anonymousWriter: pg.Client;
let admin: pg.Client;

beforeAll(async () => {
  server = await startTestServer({ users });
  const as = (user: string) => server.client({ user, password: 'pw' });
  [reader, writer, anonymousWriter, admin] = await Promise.all([as('bi'), as('agent'), as('bot'), as('boss')]);
  await admin.query('CREATE TABLE notes (id INTEGER, body VARCHAR)');
  await admin.query("INSERT INTO notes VALUES (1, 'x')");
});
afterAll(async () => {
  await server[Symbol.asyncDispose]();
});

describe('roles', () => {
  it('lets a reader read and nothing else, naming the role and the operation', async () => {
    expect((await reader.query('SELECT count(*)::INTEGER AS n FROM notes')).rows).toEqual([{ n: 1 }]);
    // cotwire reports 15.0 over DuckDB; over PostgreSQL, PostgreSQL's own version.
    expect((await reader.query('SHOW server_version')).rows[0].server_version).toMatch(onPostgres ? /^\d+\.\d+/ : /^15\.0$/);
    await reader.query("SET application_name = 'grafana'");
    const err = (await reader.query("INSERT INTO _cot_steps (session_id, step_type) VALUES ('r', 'Action')").catch((e: unknown) => e)) as pg.DatabaseError;
    expect(err.code).toBe('42501');
    expect(err.message).toBe('permission denied: role "reader" of user "bi" may not INSERT INTO _cot_steps');
    expect(await sqlstate(reader.query("UPDATE notes SET body = 'y'"))).toBe('42501');
    expect(await sqlstate(reader.query('CREATE TABLE mine (x INTEGER)'))).toBe('42501');
    expect(await sqlstate(reader.query('DROP TABLE notes'))).toBe('42501');
    expect(await sqlstate(reader.query('EXPLAIN ANALYZE SELECT 1'))).toBe('42501');
  });

  it('lets a writer read and append to ledgers, and nothing else', async () => {
    const r = await anonymousWriter.query("INSERT INTO _cot_steps (session_id, step_type, agent_id) VALUES ('w', 'Action', 'free') RETURNING agent_id");
    expect(r.rows).toEqual([{ agent_id: 'free' }]);
    expect(await sqlstate(anonymousWriter.query("INSERT INTO notes VALUES (2, 'z')"))).toBe('42501');
    expect(await sqlstate(anonymousWriter.query('DELETE FROM notes'))).toBe('42501');
    expect(await sqlstate(anonymousWriter.query('CREATE TABLE _cot_mine (x INTEGER)'))).toBe('42501');
    const file = join(server.dir, 'steps.csv');
    writeFileSync(file, 'w2,Observation\n');
    const { stdout } = await run(
      'psql',
      [
        '-X',
        '-h',
        '127.0.0.1',
        '-p',
        String(server.port),
        '-U',
        'bot',
        'cotwire',
        '-c',
        `\\copy _cot_steps (session_id, step_type) from '${file}' with (format csv)`,
      ],
      {
        env: { ...process.env, PGPASSWORD: 'pw' },
      },
    );
    expect(stdout.trim()).toBe('COPY 1');
  });

  it('lets an admin run what the guard allows', async () => {
    await admin.query("UPDATE notes SET body = 'admin'");
    await admin.query('CREATE TABLE admin_only (x INTEGER)');
    await admin.query('DROP TABLE admin_only');
    expect(await sqlstate(admin.query("UPDATE _cot_steps SET content = 'x'"))).toBe('42501');
  });
});

describe('configured defaults', () => {
  it('starts every connection with limits.statementTimeoutMs', async () => {
    await using s = await startTestServer({
      limits: { ...DEFAULTS.limits, maxMessageSize: 1 << 20, maxConnections: 10, shutdownGraceMs: 1000, statementTimeoutMs: 5000 },
    });
    const c = await s.client();
    expect((await c.query('SHOW statement_timeout')).rows).toEqual([{ statement_timeout: '5s' }]);
  });
});

describe('agent identity', () => {
  it('stamps agent_id and org_id from the authenticated user', async () => {
    const r = await writer.query("INSERT INTO _cot_steps (session_id, step_type, content) VALUES ('id-1', 'Decision', 'mine') RETURNING agent_id, org_id");
    expect(r.rows).toEqual([{ agent_id: 'agent-7', org_id: 'acme' }]);
    const same = await writer.query("INSERT INTO _cot_steps (session_id, step_type, agent_id) VALUES ('id-1', 'Action', 'agent-7') RETURNING agent_id");
    expect(same.rows).toEqual([{ agent_id: 'agent-7' }]);
  });

  it("refuses steps in another agent's name, and writes nothing", async () => {
    const err = (await writer
      .query("INSERT INTO _cot_steps (session_id, step_type, agent_id) VALUES ('id-2', 'Action', 'agent-8')")
      .catch((e: unknown) => e)) as pg.DatabaseError;
    expect(err.code).toBe('42501');
    expect(err.message).toBe('user "agent" may append only as agent_id "agent-7", not "agent-8"');
    expect(await sqlstate(writer.query("INSERT INTO _cot_steps (session_id, step_type, org_id) VALUES ('id-2', 'Action', 'other-org')"))).toBe('42501');
    expect((await admin.query("SELECT count(*)::INTEGER AS n FROM _cot_steps WHERE session_id = 'id-2'")).rows).toEqual([{ n: 0 }]);
  });

  it('stamps identity columns whatever their case, as DuckDB matches names', async () => {
    await admin.query('CREATE TABLE _cot_agent_log ("AGENT_ID" VARCHAR, "Org_Id" VARCHAR, note VARCHAR)');
    const err = (await writer
      .query("INSERT INTO _cot_agent_log (\"AGENT_ID\", note) VALUES ('other-agent', 'n')")
      .catch((e: unknown) => e)) as pg.DatabaseError;
    expect(err.code).toBe('42501');
    expect(err.message).toBe('user "agent" may append only as agent_id "agent-7", not "other-agent"');
    expect(await sqlstate(writer.query("INSERT INTO _cot_agent_log VALUES (NULL, 'other-org', 'n')"))).toBe('42501');
    // Refused like any other statement: recorded with the user and the column.
    await server.running.securityLog.flushed();
    expect((await admin.query('SELECT user_name, operation, target, reason FROM _cot_security_events ORDER BY ledger_seq DESC LIMIT 1')).rows).toEqual([
      { user_name: 'agent', operation: 'INSERT', target: 'org_id', reason: 'role' },
    ]);
    await writer.query("INSERT INTO _cot_agent_log (note) VALUES ('mine')");
    expect((await admin.query('SELECT "AGENT_ID" AS a, "Org_Id" AS o, note FROM _cot_agent_log')).rows).toEqual([{ a: 'agent-7', o: 'acme', note: 'mine' }]);
  });

  it('keeps the stamped values in the hash: the chain verifies', async () => {
    expect((await reader.query("SELECT valid FROM cot_verify('id-1')")).rows).toEqual([{ valid: true }]);
  });
});
