import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rmSync } from 'node:fs';
import type pg from 'pg';
import type { EngineConnection } from '../../src/engine/port.js';
import { makeScramVerifier } from '../../src/session/scram.js';
import type { TestServer } from '../fixtures/server.js';
import { sqlstate } from '../fixtures/errors.js';
import { BareDuckDB, protectedState, startFixtureServer, tempRoot } from './fixture.js';

/**
 * Rows that would land in a ledger outside the writer, and statements that
 * execute a write while looking like something else, tried as every role
 * over both protocols. Each is first shown to change a ledger on bare
 * DuckDB, whose tables here carry the same chain columns cotwire adds.
 */

const CHAIN = 'step_index, prev_hash, current_hash, created_at, ledger_seq';
const ROW = "9, 's9', 'forged', 1.0, 0, '', 'f0rged', TIMESTAMPTZ '2020-01-01 00:00:00+00', 999";
const ALL = `(id, session_id, content, confidence, ${CHAIN})`;

const FORGERIES: readonly string[] = [
  `INSERT INTO --\r_cot_steps\n ${ALL} VALUES (${ROW})`,
  `WITH n AS (SELECT 1) INSERT INTO _cot_steps ${ALL} VALUES (${ROW})`,
  `PREPARE p AS INSERT INTO _cot_steps ${ALL} VALUES (${ROW}); EXECUTE p`,
  `EXPLAIN ANALYZE INSERT INTO _cot_steps ${ALL} VALUES (${ROW})`,
  `EXPLAIN ANALYSE INSERT INTO _cot_steps ${ALL} VALUES (${ROW})`,
  `INSERT INTO '_cot_steps' ${ALL} VALUES (${ROW})`,
  `INSERT INTO E'_cot_steps' ${ALL} VALUES (${ROW})`,
  `INSERT INTO $$_cot_steps$$ VALUES (${ROW})`,
  `INSERT INTO _cot_steps ${ALL} VALUES (${ROW})`,
  `INSERT\u00a0INTO\u00a0_cot_steps\u00a0${ALL} VALUES (${ROW})`,
  `INSERT INTO _cot_steps VALUES (${ROW})`,
  `INSERT INTO "audit"."_cot_x" (id, note, ${CHAIN}) VALUES (9, 'forged', 0, '', 'f0rged', now(), 999)`,
];

/** Statements that run a write inside something that reads, or as a role that may not write. */
const DISGUISED: readonly string[] = [
  'EXPLAIN ANALYSE DELETE FROM _cot_steps',
  'EXPLAIN (ANALYSE) DELETE FROM _cot_steps',
  'EXPLAIN ("analyze") DELETE FROM _cot_steps',
  "EXPLAIN (analyze false) UPDATE _cot_steps SET content = 'forged'",
  'EXPLAIN ANALYSE UPDATE "_COT_Events" SET kind = \'forged\'',
];

const verifier = makeScramVerifier('pw');
const users = [
  { name: 'cotwire', password: verifier, role: 'admin', agentId: null, orgId: null },
  { name: 'bi', password: verifier, role: 'reader', agentId: null, orgId: null },
  { name: 'planner', password: verifier, role: 'writer', agentId: 'planner', orgId: 'acme' },
];

const root = tempRoot();
let server: TestServer;
let internal: EngineConnection;
const clients: Record<string, pg.Client> = {};
let baseline: string;

async function state(): Promise<string> {
  await server.running.writer.visible();
  return protectedState((sql) => internal.query(sql));
}

/** Bare DuckDB with the fixture, and the chain columns cotwire's ledgers have. */
async function bareWithChains(): Promise<BareDuckDB> {
  const bare = await BareDuckDB.create(root);
  for (const table of ['_cot_steps', 'audit._cot_x', '"_COT_Events"']) {
    await bare.conn.run(`ALTER TABLE ${table} ADD COLUMN step_index INTEGER; ALTER TABLE ${table} ADD COLUMN prev_hash VARCHAR;
      ALTER TABLE ${table} ADD COLUMN current_hash VARCHAR; ALTER TABLE ${table} ADD COLUMN created_at TIMESTAMPTZ; ALTER TABLE ${table} ADD COLUMN ledger_seq BIGINT`);
  }
  return bare;
}

async function changesBareDuckDB(sql: string): Promise<void> {
  const bare = await bareWithChains();
  try {
    const before = await bare.state();
    await bare.conn.run(sql);
    expect(await bare.state(), `on bare DuckDB: ${sql}`).not.toBe(before);
  } finally {
    bare.close();
  }
}

beforeAll(async () => {
  ({ server, internal } = await startFixtureServer({ users }, { password: 'pw' }));
  clients['admin'] = await server.client({ password: 'pw' });
  clients['writer'] = await server.client({ user: 'planner', password: 'pw' });
  clients['reader'] = await server.client({ user: 'bi', password: 'pw' });
  await internal.run('CREATE SEQUENCE s1');
  baseline = await state();
});

afterAll(async () => {
  internal.close();
  await server[Symbol.asyncDispose]();
  rmSync(root, { recursive: true, force: true });
});

// 42501 the guard or the roles, 428C9 a chain column given to the writer, 25006 a read-only
// transaction, 42601 more VALUES than the ledger has client columns (the writer's positional check).
const REFUSED = ['42501', '428C9', '25006', '42601'];

async function refusedEverywhere(sql: string): Promise<void> {
  for (const [role, client] of Object.entries(clients)) {
    expect(REFUSED, `${role}, simple: ${sql}`).toContain(await sqlstate(client.query(sql)));
    await client.query('ROLLBACK');
    if (!sql.includes('; EXECUTE')) {
      expect(REFUSED, `${role}, extended: ${sql}`).toContain(await sqlstate(client.query({ text: sql, values: [] } as pg.QueryConfig)));
    }
    await client.query('BEGIN READ ONLY');
    expect(REFUSED, `${role}, read-only block: ${sql}`).toContain(await sqlstate(client.query(sql)));
    await client.query('ROLLBACK');
    await client.query('DEALLOCATE ALL').catch(() => undefined);
    expect(await state(), `${role}: ${sql}`).toBe(baseline);
  }
}

describe('rows forged outside the writer', () => {
  it.each(FORGERIES.map((s) => [s]))('%j', async (sql) => {
    await changesBareDuckDB(sql);
    await refusedEverywhere(sql);
    const forged = await internal.query("SELECT count(*) FROM _cot_steps WHERE current_hash = 'f0rged' OR ledger_seq = 999 OR content = 'unchained'");
    expect(forged[0]?.[0]).toBe(0n);
  });
});

describe('a WITH before INSERT, as PostgreSQL allows it', () => {
  const hoisted = (id: number) =>
    `WITH n AS (SELECT 's-with' AS s, ${id} AS i) INSERT INTO _cot_steps (id, session_id, content, confidence) SELECT i, s, 'hoisted', 0.5 FROM n`;

  it('is appended by the writer, chained, for the roles that may append, over both protocols', async () => {
    // On bare DuckDB the same statement writes the row directly, chain columns and all left to the client.
    await changesBareDuckDB(hoisted(10));
    expect((await clients['admin']?.query(hoisted(10)))?.command).toBe('INSERT');
    expect((await clients['writer']?.query({ text: hoisted(11), values: [] } as pg.QueryConfig))?.rowCount).toBe(1);
    const rows = await internal.query(
      "SELECT id, step_index, length(current_hash), ledger_seq IS NOT NULL FROM _cot_steps WHERE session_id = 's-with' ORDER BY id",
    );
    expect(rows).toEqual([
      [10, 0, 2n * 32n, true],
      [11, 1, 2n * 32n, true],
    ]);
    expect((await clients['admin']?.query('SELECT bool_and(valid) AS ok FROM cot_verify_all()'))?.rows).toEqual([{ ok: true }]);
    expect(await sqlstate(clients['reader']?.query(hoisted(12)) ?? Promise.resolve())).toBe('42501');
    await clients['writer']?.query('BEGIN READ ONLY');
    expect(await sqlstate(clients['writer']?.query(hoisted(12)) ?? Promise.resolve())).toBe('25006');
    await clients['writer']?.query('ROLLBACK');
    expect((await internal.query("SELECT count(*) FROM _cot_steps WHERE session_id = 's-with'"))[0]?.[0]).toBe(2n);
    // The attacks below compare against the state with these two appends.
    baseline = await state();
  });

  it('points an error at the client’s text, and still refuses chain columns', async () => {
    const err = (await clients['admin']
      ?.query("WITH n AS (SELECT 1 AS i) INSERT INTO _cot_steps (id, session_id, content, confidence) SELECT i, nope, 'x', 0.5 FROM n")
      .catch((e: unknown) => e)) as pg.DatabaseError;
    expect(err.code).toBe('42703');
    expect(Number(err.position)).toBe(
      "WITH n AS (SELECT 1 AS i) INSERT INTO _cot_steps (id, session_id, content, confidence) SELECT i, nope, 'x', 0.5 FROM n".indexOf('nope') + 1,
    );
    expect(await sqlstate(clients['admin']?.query(`WITH n AS (SELECT 1) INSERT INTO _cot_steps ${ALL} VALUES (${ROW})`) ?? Promise.resolve())).toBe('428C9');
    expect(await state()).toBe(baseline);
  });
});

describe('writes disguised as reads', () => {
  it.each(DISGUISED.map((s) => [s]))('%j', async (sql) => {
    await changesBareDuckDB(sql);
    await refusedEverywhere(sql);
  });

  it('refuses nextval in a read-only transaction, and leaves the sequence where it was', async () => {
    const reader = clients['reader'] as pg.Client;
    const admin = clients['admin'] as pg.Client;
    for (const client of [reader, admin]) {
      await client.query('BEGIN READ ONLY');
      expect(await sqlstate(client.query("SELECT nextval('s1')"))).toBe('25006');
      await client.query('ROLLBACK');
    }
    await admin.query('BEGIN');
    await admin.query('SET TRANSACTION READ ONLY');
    expect(await sqlstate(admin.query("SELECT nextval('s1')"))).toBe('25006');
    await admin.query('ROLLBACK');
    expect((await admin.query("SELECT nextval('s1') AS n")).rows[0].n).toBe('1');
  });

  it('refuses nextval to a reader, and to a read-only session, in autocommit too, over both protocols', async () => {
    const reader = clients['reader'] as pg.Client;
    const admin = clients['admin'] as pg.Client;
    const next = "SELECT nextval('s1') AS n";
    // On bare DuckDB an autocommit SELECT moves the sequence.
    const bare = await BareDuckDB.create(root);
    try {
      await bare.conn.run('CREATE SEQUENCE s1');
      await bare.conn.run(next);
      expect((await bare.conn.runAndReadAll("SELECT currval('s1')")).getRows()).toEqual([[1n]]);
    } finally {
      bare.close();
    }
    expect(await sqlstate(reader.query(next))).toBe('25006');
    expect(await sqlstate(reader.query({ text: next, values: [] } as pg.QueryConfig))).toBe('25006');
    expect((await reader.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
    await admin.query('SET default_transaction_read_only = on');
    expect(await sqlstate(admin.query(next))).toBe('25006');
    await admin.query('SET default_transaction_read_only = off');
    expect((await admin.query(next)).rows[0].n).toBe('2');
    // Reads still stream in batches through a portal that stays open across Execute messages.
    await reader.query('SELECT count(*) FROM range(10)');
    expect((await admin.query("SELECT currval('s1') AS n")).rows[0].n).toBe('2');
  });
});
