import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { afterAll, describe, expect, it } from 'vitest';
import type pg from 'pg';
import { useTestServer } from '../fixtures/server.js';

/**
 * DESIGN invariant 6: the server never reads or writes files, or loads
 * extensions, on a client's behalf. Each attack is first shown to work
 * against bare DuckDB, then shown to be refused by cotwire.
 */
const dir = mkdtempSync(join(tmpdir(), 'cotwire-lockdown-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const secret = join(dir, 'secret.csv');
writeFileSync(secret, 'token\nhunter2\n');

const ATTACKS: Array<[string, string, () => boolean]> = [
  ['reading a server file', `SELECT * FROM read_csv('${secret}')`, () => true],
  ['writing a server file with COPY', `COPY (SELECT 42) TO '${join(dir, 'copied.csv')}'`, () => existsSync(join(dir, 'copied.csv'))],
  ['attaching another database file', `ATTACH '${join(dir, 'other.duckdb')}' AS other`, () => existsSync(join(dir, 'other.duckdb'))],
  ['changing the engine configuration for everyone', 'SET GLOBAL threads = 1', () => true],
];

const ctx = useTestServer();

describe('engine lockdown', () => {
  it.each(ATTACKS)('bare DuckDB allows %s', async (_, sql, effect) => {
    const bare = await DuckDBInstance.create(':memory:');
    const conn = await bare.connect();
    try {
      await conn.run(sql);
      expect(effect()).toBe(true);
    } finally {
      conn.closeSync();
      bare.closeSync();
    }
  });

  it.each(ATTACKS)('cotwire refuses %s with 42501', async (_, sql) => {
    const err = (await ctx.client
      .query(sql.replace('copied.csv', 'copied2.csv').replace('other.duckdb', 'other2.duckdb'))
      .catch((e: unknown) => e)) as pg.DatabaseError;
    expect(err.code).toBe('42501');
    expect(existsSync(join(dir, 'copied2.csv'))).toBe(false);
    expect(existsSync(join(dir, 'other2.duckdb'))).toBe(false);
  });

  it('cotwire refuses to install or load extensions', async () => {
    for (const sql of ['INSTALL httpfs', 'LOAD httpfs']) {
      const err = (await ctx.client.query(sql).catch((e: unknown) => e)) as pg.DatabaseError;
      expect(err.code).toBe('42501');
    }
  });
});
