import { describe, expect, it } from 'vitest';
import { sqlstate, useConformanceServer } from '../fixtures/conformance.js';

/**
 * A ledger's values are chained as text and stored from it: a column whose
 * values would not come back from their text is refused when the ledger is
 * made (0A000), on both engines, and nothing of the table is left. On
 * DuckDB one acknowledged append to such a ledger once stopped the server
 * for good (test/integration/ledger-column-types.test.ts has DuckDB's own
 * types: STRUCT, UNION, generated columns).
 */
const s = useConformanceServer();

describe('a ledger column whose values would not come back from their text', () => {
  it.each([
    ['an interval', 'CREATE TABLE _cot_lc_took (session_id text, took interval)'],
    ['a fixed-size array of strings', 'CREATE TABLE _cot_lc_pair (session_id text, v varchar[2])'],
    ['an array of arrays of strings', 'CREATE TABLE _cot_lc_tags (session_id text, tags text[][])'],
    ['an array of json', 'CREATE TABLE _cot_lc_docs (session_id text, docs json[])'],
  ])('is refused: %s', async (_what, ddl) => {
    const c = await s.as();
    expect(await sqlstate(c.query(ddl))).toBe('0A000');
    expect((await c.query("SELECT count(*)::int AS n FROM information_schema.tables WHERE table_name LIKE '\\_cot\\_lc\\_%'")).rows).toEqual([{ n: 0 }]);
    expect((await c.query('SELECT count(*)::int AS n FROM _cot_steps')).rows).toEqual([{ n: expect.any(Number) }]);
  });
});
