import { describe, expect, it } from 'vitest';
import type pg from 'pg';
import { startTestServer } from '../fixtures/server.js';
import { sqlstate } from '../fixtures/errors.js';

/**
 * DuckDB's side of test/conformance/ledger-columns.test.ts, with its own types.
 * A ledger's values are chained and journaled as text, and the applier casts
 * that text back into the table. A column type whose text does not read
 * back (INTERVAL through the appender, strings in fixed-size arrays or in
 * nested containers) or a generated column once made one acknowledged
 * append wedge the applier: every later statement failed, and the server
 * could not start again. Such ledgers are refused.
 */
describe('ledger column types', () => {
  it('refuses a ledger whose values could not be stored as chained, and keeps serving', async () => {
    await using server = await startTestServer();
    const c = await server.client();
    for (const ddl of [
      'CREATE TABLE _cot_tool_calls (session_id VARCHAR, tool VARCHAR, took INTERVAL)',
      'CREATE TABLE _cot_nested (session_id VARCHAR, s STRUCT(a VARCHAR[]))',
      'CREATE TABLE _cot_either (session_id VARCHAR, u UNION(a INTEGER, b VARCHAR))',
      "CREATE TABLE _cot_gen (session_id VARCHAR, a INTEGER, g VARCHAR GENERATED ALWAYS AS ('x'))",
    ]) {
      expect(await sqlstate(c.query(ddl)), ddl).toBe('0A000');
    }
    const refused = await c.query('CREATE TABLE _cot_tool_calls (session_id VARCHAR, took INTERVAL)').catch((e: pg.DatabaseError) => e);
    expect(refused).toMatchObject({ message: 'column "took" of ledger "_cot_tool_calls" cannot be of type INTERVAL' });
    // Nothing of the refused tables is left behind.
    expect(
      (await c.query("SELECT count(*)::int AS n FROM information_schema.tables WHERE table_name IN ('_cot_tool_calls', '_cot_nested', '_cot_gen')")).rows,
    ).toEqual([{ n: 0 }]);
    // What does read back is accepted, and appends to it verify.
    await c.query(
      'CREATE TABLE _cot_calls (session_id VARCHAR, tags VARCHAR[], took_us BIGINT, meta STRUCT(a INTEGER), kv MAP(VARCHAR, VARCHAR), spans INTERVAL[])',
    );
    await c.query(
      "INSERT INTO _cot_calls (session_id, tags, took_us, meta, kv, spans) VALUES ('s', ['NULL', ' padded', 'b]'], 1000, {'a': 1}, MAP {'k': 'v, w'}, [INTERVAL '1 second'])",
    );
    expect((await c.query('SELECT tags[1] IS NULL AS null_tag, length(tags[2]) AS padded FROM _cot_calls')).rows).toEqual([{ null_tag: false, padded: 7 }]);
    expect((await c.query("SELECT valid FROM cot_verify_calls('s')")).rows).toEqual([{ valid: true }]);
    expect((await c.query('SELECT count(*)::int AS n FROM _cot_steps')).rows).toEqual([{ n: 0 }]);
  });
});
