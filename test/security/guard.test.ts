import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rmSync } from 'node:fs';
import type pg from 'pg';
import type { EngineConnection } from '../../src/engine/port.js';
import type { TestServer } from '../fixtures/server.js';
import { sqlstate } from '../fixtures/errors.js';
import { ATTACKS, type Attack } from './attacks.js';
import { BareDuckDB, hostState, protectedState, startFixtureServer, tempRoot, writeHostFiles } from './fixture.js';
import { variantsOf } from './variants.js';

const root = tempRoot();
let server: TestServer;
let internal: EngineConnection;
let client: pg.Client;
let baseline: string;

const fill = (sql: string, dir: string): string => sql.replaceAll('{dir}', dir);

async function cotwireState(): Promise<string> {
  return `${await protectedState((sql) => internal.query(sql))}|${hostState(server.dir, false)}`;
}

beforeAll(async () => {
  ({ server, internal } = await startFixtureServer());
  writeHostFiles(server.dir);
  client = await server.client();
  baseline = await cotwireState();
});

afterAll(async () => {
  internal.close();
  await server[Symbol.asyncDispose]();
  rmSync(root, { recursive: true, force: true });
});

const isMulti = (sql: string): boolean => sql.split(';').filter((s) => s.trim() !== '').length > 1;

/** Runs the attack on bare DuckDB and returns whether it changed protected state or touched the host. */
async function worksOnBareDuckDB(attack: Attack): Promise<{ changed: boolean; error?: string }> {
  const bare = await BareDuckDB.create(root);
  try {
    const before = await bare.state();
    const sql = fill(attack.sql, bare.dir);
    let rows: unknown[][] = [];
    try {
      if (attack.params !== undefined) {
        const prepared = await bare.conn.prepare(sql);
        prepared.bind(attack.params.map((p) => (typeof p === 'number' && Number.isInteger(p) ? p : p)) as never);
        rows = (await prepared.runAndReadAll()).getRowsJS() as unknown[][];
      } else {
        rows = (await bare.conn.runAndReadAll(sql)).getRowsJS() as unknown[][];
      }
    } catch (err) {
      return { changed: false, error: (err as Error).message.split('\n')[0] };
    }
    const after = await bare.state();
    // Host reads change nothing on disk: succeeding with the file's content is the effect.
    const readHost = attack.technique === 'host' && rows.length > 0;
    return { changed: before !== after || readHost };
  } finally {
    bare.close();
  }
}

/** Runs the attack through cotwire in every way a client could, expecting 42501 each time. */
async function refusedByCotwire(attack: Attack): Promise<void> {
  const sql = fill(attack.sql, server.dir);
  const multi = isMulti(sql);
  // Alone, with the simple protocol. (An attack that opens its own
  // transaction block leaves it failed, as PostgreSQL would: roll it back.)
  expect(await sqlstate(client.query(sql)), `simple: ${sql}`).toBe('42501');
  await client.query('ROLLBACK');
  // Alone, with the extended protocol (one statement per Parse).
  if (!multi) {
    const config = { text: sql, values: (attack.params ?? []) as unknown[], queryMode: 'extended' } as pg.QueryConfig;
    expect(await sqlstate(client.query(config)), `extended: ${sql}`).toBe('42501');
  }
  // Inside a transaction block: refused, and the block fails.
  await client.query('BEGIN');
  expect(await sqlstate(client.query(sql)), `in a transaction: ${sql}`).toBe('42501');
  expect(await sqlstate(client.query('SELECT 1'))).toBe('25P02');
  await client.query('ROLLBACK');
  await client.query('ROLLBACK');
  // Inside a multi-statement string: refused, nothing after it runs.
  if (attack.params === undefined) {
    expect(await sqlstate(client.query(`SELECT 1; ${sql}; SELECT 2`)), `in a string: ${sql}`).toBe('42501');
    await client.query('ROLLBACK');
  }
  expect(await cotwireState(), `protected state after: ${sql}`).toBe(baseline);
}

describe('attacks on the ledgers', () => {
  it('has at least 150 attacks over every technique', () => {
    expect(ATTACKS.length).toBeGreaterThanOrEqual(150);
    const techniques = new Set(ATTACKS.map((a) => a.technique));
    for (const t of [
      'update',
      'delete',
      'truncate',
      'merge',
      'drop',
      'alter',
      'upsert',
      'replace',
      'swap',
      'schema',
      'prepare',
      'explain',
      'macro',
      'shadow',
      'index',
      'attach',
      'use',
      'copy',
      'export',
      'host',
      'setting',
      'checkpoint',
      'transaction',
      'multi',
      'comment',
      'quoting',
      'dollar',
    ]) {
      expect(techniques.has(t), t).toBe(true);
    }
  });

  it.each(ATTACKS.map((a) => [`${a.technique}: ${a.sql}`, a] as const))('%s', async (_, attack) => {
    const bare = await worksOnBareDuckDB(attack);
    expect(bare.error, 'the attack must run on bare DuckDB').toBeUndefined();
    expect(bare.changed, 'the attack must change protected state or touch the host on bare DuckDB').toBe(true);
    await refusedByCotwire(attack);
  });
});

describe('generated variants', () => {
  const variants = ATTACKS.filter((a) => a.variants === true).flatMap((a) => variantsOf(a.sql).map((sql) => ({ ...a, sql })));

  it('generates variants of every kind', () => {
    expect(variants.length).toBeGreaterThanOrEqual(200);
  });

  it.each(variants.map((a) => [a.sql, a] as const))('%s', async (_, attack) => {
    const bare = await worksOnBareDuckDB(attack);
    expect(bare.error).toBeUndefined();
    expect(bare.changed).toBe(true);
    const sql = attack.sql;
    expect(await sqlstate(client.query(sql)), sql).toBe('42501');
    expect(await sqlstate(client.query({ text: sql, values: [], queryMode: 'extended' } as pg.QueryConfig)), sql).toBe('42501');
    expect(await cotwireState()).toBe(baseline);
  });
});

describe('refusals are recorded', () => {
  it('appends each refusal to _cot_security_events, outside the refused transaction', async () => {
    await server.running.securityLog.flushed();
    const before = Number((await internal.query('SELECT count(*) FROM _cot_security_events'))[0]?.[0]);
    await client.query('BEGIN');
    await client.query("UPDATE _cot_steps SET content = 'recorded'").catch(() => undefined);
    await client.query('ROLLBACK');
    await server.running.securityLog.flushed();
    const rows = await internal.query(
      'SELECT user_name, remote_address, operation, target, sqlstate, reason, length(statement_fingerprint) FROM _cot_security_events ORDER BY ledger_seq DESC LIMIT 1',
    );
    expect(Number((await internal.query('SELECT count(*) FROM _cot_security_events'))[0]?.[0])).toBe(before + 1);
    expect(rows[0]).toEqual(['cotwire', '127.0.0.1', 'UPDATE', '_cot_steps', '42501', 'ledger', 64n]);
  });

  it('refuses changes to the security ledger itself, appends included', async () => {
    expect(await sqlstate(client.query('DELETE FROM _cot_security_events'))).toBe('42501');
    expect(await sqlstate(client.query('DROP TABLE _cot_security_events'))).toBe('42501');
    expect(await sqlstate(client.query("INSERT INTO _cot_security_events (user_name) VALUES ('forged')"))).toBe('42501');
  });

  it('names the table and the operation, with a hint', async () => {
    const err = (await client.query('UPDATE _cot_steps SET content = 1').catch((e: unknown) => e)) as pg.DatabaseError;
    expect(err.message).toBe('cannot UPDATE ledger table "_cot_steps": ledger tables are append-only');
    expect(err.hint).toMatch(/SELECT and INSERT only/);
    const host = (await client.query(fill("SELECT * FROM read_csv('{dir}/secret.csv')", server.dir)).catch((e: unknown) => e)) as pg.DatabaseError;
    expect(host.message).toBe('cannot call read_csv(): the server does not access files or extensions for clients');
  });
});
