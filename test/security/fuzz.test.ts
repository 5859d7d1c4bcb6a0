import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type pg from 'pg';
import type { EngineConnection } from '../../src/engine/port.js';
import type { TestServer } from '../fixtures/server.js';
import { protectedState, startFixtureServer } from './fixture.js';

/** A small deterministic generator (mulberry32), so that a failure can be replayed. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const TARGETS = ['_cot_steps', '"_cot_steps"', '_COT_STEPS', 'main._cot_steps', 'test.main._cot_steps', '"_COT_Events"', 'audit._cot_x', '"audit"."_COT_X"'];
const VALUES = ["'forged'", '$$forged$$', "E'forged'", "'a;b'", "'--'", "'/*'", 'NULL', '1'];
const GAPS = [' ', '\n', '\t', ' /* gap */ ', ' -- gap\n', '/**/'];
const PREFIXES = ['', '/* lead */ ', '-- lead\n', 'EXPLAIN ANALYZE ', 'PREPARE f AS ', 'WITH c AS (SELECT 1) ', 'BEGIN; ', 'SELECT 1; '];
const SUFFIXES = ['', ';', '; SELECT 1', ' -- tail', '; COMMIT', ' RETURNING *', '; EXECUTE f'];
const TEMPLATES = [
  'UPDATE {T} SET content = {V}',
  'UPDATE {T} SET id = id + 1',
  'DELETE FROM {T}',
  'DELETE FROM {T} WHERE id IN (SELECT id FROM notes)',
  'TRUNCATE {T}',
  'DROP TABLE {T}',
  'DROP TABLE IF EXISTS {T} CASCADE',
  'ALTER TABLE {T} ADD COLUMN z INTEGER',
  'ALTER TABLE {T} RENAME TO renamed',
  'ALTER TABLE {T} DROP COLUMN id',
  'COMMENT ON TABLE {T} IS {V}',
  'INSERT OR REPLACE INTO {T} SELECT * FROM {T}',
  'INSERT INTO {T} SELECT * FROM {T} ON CONFLICT DO UPDATE SET id = 0',
  'MERGE INTO {T} USING notes ON (notes.id = 1) WHEN MATCHED THEN DELETE',
  'CREATE OR REPLACE TABLE {T} AS SELECT 1 AS id',
  'CREATE TEMP TABLE {T} AS SELECT 1 AS id',
  'CREATE VIEW {T} AS SELECT 1 AS id',
  'CREATE INDEX fz ON {T} (id)',
  'ALTER TABLE notes RENAME TO {T}',
  'CREATE TABLE {T} AS SELECT 1 AS id',
  "COPY {T} FROM 'x.csv'",
  "COPY {T} TO 'x.csv'",
  'SELECT * FROM {T}',
  'SELECT {V} FROM {T} WHERE id = 1',
];

function generate(random: () => number): string {
  const pick = <T,>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)] as T;
  const template = pick(TEMPLATES);
  const body = template.replaceAll('{T}', pick(TARGETS)).replaceAll('{V}', pick(VALUES));
  const spaced = body.split(' ').join(pick(GAPS));
  const cased = random() < 0.3 ? spaced.toLowerCase() : random() < 0.5 ? spaced : spaced.toUpperCase();
  return `${pick(PREFIXES)}${cased}${pick(SUFFIXES)}`;
}

let server: TestServer;
let internal: EngineConnection;
let client: pg.Client;

beforeAll(async () => {
  ({ server, internal } = await startFixtureServer());
  client = await server.client();
});
afterAll(async () => {
  internal.close();
  await server[Symbol.asyncDispose]();
});

describe('fuzzing the guard', () => {
  it('lets no generated statement change a ledger, and keeps serving', async () => {
    const baseline = await protectedState((sql) => internal.query(sql));
    const random = rng(20261122);
    const outcomes = new Map<string, number>();
    for (let i = 0; i < 3000; i++) {
      const sql = generate(random);
      const code = await client.query(sql).then(
        () => 'ok',
        (e: unknown) => (e as { code?: string }).code ?? 'error',
      );
      outcomes.set(code, (outcomes.get(code) ?? 0) + 1);
      await client.query('ROLLBACK');
      await client.query('DEALLOCATE ALL').catch(() => undefined);
      if (i % 250 === 249) expect(await protectedState((q) => internal.query(q)), `after statement ${i}: ${sql}`).toBe(baseline);
    }
    expect(await protectedState((sql) => internal.query(sql))).toBe(baseline);
    // Most generated statements attack, so most are refused; the server answered every one.
    expect(outcomes.get('42501') ?? 0).toBeGreaterThan(1500);
    expect((await client.query('SELECT count(*)::INTEGER AS n FROM _cot_steps')).rows[0].n).toBe(3);
  });
});
