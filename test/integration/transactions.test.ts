import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { sqlstate } from '../fixtures/errors.js';
import { onPostgres, psql, useTestServer } from '../fixtures/server.js';

// How a transaction's parts travel together: ledger appends wait for COMMIT,
// COPY and CREATE of a ledger join the block they run in, and a failure
// anywhere leaves nothing behind. These pin the behaviour the statement
// pipeline keeps while its stages move between modules.
const ctx = useTestServer();

const count = async (table: string, where = 'true'): Promise<number> =>
  (await ctx.client.query(`SELECT count(*)::INTEGER AS n FROM ${table} WHERE ${where}`)).rows[0].n as number;

describe('a transaction and the ledger writer', () => {
  it('appends a block’s ledger rows at COMMIT, and none of them at ROLLBACK', async () => {
    const c = await ctx.server.client();
    await c.query('BEGIN');
    await c.query("INSERT INTO _cot_steps (session_id, step_type, content) VALUES ('tx-commit', 'Observation', 'a')");
    await c.query("INSERT INTO _cot_steps (session_id, step_type, content) VALUES ('tx-commit', 'Decision', 'b')");
    // Not yet: the writer receives the block's rows when it commits.
    expect(await count('_cot_steps', "session_id = 'tx-commit'")).toBe(0);
    expect((await c.query('COMMIT')).command).toBe('COMMIT');
    const rows = (await ctx.client.query("SELECT step_index, content FROM _cot_steps WHERE session_id = 'tx-commit' ORDER BY step_index")).rows;
    expect(rows).toEqual([
      { step_index: 0, content: 'a' },
      { step_index: 1, content: 'b' },
    ]);

    await c.query('BEGIN');
    await c.query("INSERT INTO _cot_steps (session_id, step_type) VALUES ('tx-rollback', 'Observation')");
    await c.query('ROLLBACK');
    expect(await count('_cot_steps', "session_id = 'tx-rollback'")).toBe(0);
  });

  it('drops a failed block’s appends, even after COMMIT is sent', async () => {
    const c = await ctx.server.client();
    await c.query('BEGIN');
    await c.query("INSERT INTO _cot_steps (session_id, step_type) VALUES ('tx-failed', 'Observation')");
    expect(await sqlstate(c.query('SELECT * FROM no_such_table'))).toBe('42P01');
    expect((await c.query('COMMIT')).command).toBe('ROLLBACK');
    expect(await count('_cot_steps', "session_id = 'tx-failed'")).toBe(0);
  });

  it('runs a multi-statement string as one transaction: an error drops the appends before it', async () => {
    expect(
      await sqlstate(ctx.client.query("INSERT INTO _cot_steps (session_id, step_type) VALUES ('tx-string', 'Observation'); SELECT * FROM no_such_table")),
    ).toBe('42P01');
    expect(await count('_cot_steps', "session_id = 'tx-string'")).toBe(0);
    await ctx.client.query(
      "INSERT INTO _cot_steps (session_id, step_type) VALUES ('tx-string', 'Observation'); INSERT INTO _cot_steps (session_id, step_type) VALUES ('tx-string', 'Decision')",
    );
    expect(await count('_cot_steps', "session_id = 'tx-string'")).toBe(2);
  });
});

describe('COPY and CREATE inside a block', () => {
  it('rolls back COPY with its block (ordinary table and ledger alike), and commits it with its block', async () => {
    await ctx.client.query('CREATE TABLE tx_copy (x INTEGER)');
    const rows = join(ctx.server.dir, 'tx-rows.txt');
    writeFileSync(rows, '1\n2\n');
    const steps = join(ctx.server.dir, 'tx-steps.csv');
    writeFileSync(steps, 'tx-copy,Observation\ntx-copy,Decision\n');
    const block = (end: string) =>
      psql(ctx.server.port, 'BEGIN', `\\copy tx_copy from '${rows}'`, `\\copy _cot_steps (session_id, step_type) from '${steps}' with (format csv)`, end);
    await block('ROLLBACK');
    expect(await count('tx_copy')).toBe(0);
    expect(await count('_cot_steps', "session_id = 'tx-copy'")).toBe(0);
    await block('COMMIT');
    expect(await count('tx_copy')).toBe(2);
    expect(await count('_cot_steps', "session_id = 'tx-copy'")).toBe(2);
  });

  // Over PostgreSQL the server creates a ledger as its owner, outside the client's transaction: in a block it is refused (25001), as
  // test/postgres/basics.test.ts shows.
  it.skipIf(onPostgres)('creates a ledger inside a block: its chain columns commit with it, and ROLLBACK leaves no ledger', async () => {
    const c = await ctx.server.client();
    await c.query('BEGIN');
    await c.query('CREATE TABLE _cot_tx_rolled (session_id VARCHAR, note VARCHAR)');
    await c.query('ROLLBACK');
    expect(await sqlstate(ctx.client.query('SELECT * FROM _cot_tx_rolled'))).toBe('42P01');

    await c.query('BEGIN');
    await c.query('CREATE TABLE _cot_tx_kept (session_id VARCHAR, note VARCHAR)');
    // The writer sees the new ledger once it commits, and the client is told so.
    const early = (await c.query("INSERT INTO _cot_tx_kept (session_id, note) VALUES ('k', 'early')").catch((e: unknown) => e)) as {
      code: string;
      message: string;
    };
    expect(early.code).toBe('55000');
    expect(early.message).toBe('ledger table "_cot_tx_kept" was created in this transaction: it takes appends once the transaction commits');
    expect((await c.query('COMMIT')).command).toBe('ROLLBACK');
    await c.query('BEGIN');
    await c.query('CREATE TABLE _cot_tx_kept (session_id VARCHAR, note VARCHAR)');
    await c.query('COMMIT');
    const columns = (
      await ctx.client.query("SELECT column_name FROM information_schema.columns WHERE table_name = '_cot_tx_kept' ORDER BY ordinal_position")
    ).rows.map((r) => r.column_name as string);
    expect(columns).toEqual(expect.arrayContaining(['session_id', 'note', 'step_index', 'prev_hash', 'current_hash', 'ledger_seq']));
    await c.query("INSERT INTO _cot_tx_kept (session_id, note) VALUES ('k', 'one')");
    expect((await ctx.client.query('SELECT step_index, length(current_hash)::INTEGER AS h FROM _cot_tx_kept')).rows).toEqual([{ step_index: 0, h: 64 }]);
    expect(await sqlstate(ctx.client.query('DELETE FROM _cot_tx_kept'))).toBe('42501');
  });

  it('refuses a ledger that declares a chain column, and leaves no table behind', async () => {
    expect(await sqlstate(ctx.client.query('CREATE TABLE _cot_tx_bad (session_id VARCHAR, current_hash VARCHAR)'))).toBe('42701');
    expect(await sqlstate(ctx.client.query('SELECT * FROM _cot_tx_bad'))).toBe('42P01');
  });
});

describe('the block’s access mode', () => {
  it('restarts a block that turns read-only before its first query, and keeps its reads working', async () => {
    const c = await ctx.server.client();
    await c.query('BEGIN');
    await c.query('SET TRANSACTION READ ONLY');
    expect(await sqlstate(c.query('CREATE TABLE tx_ro (x INTEGER)'))).toBe('25006');
    await c.query('ROLLBACK');
    await c.query('BEGIN READ ONLY');
    await c.query('SELECT 1');
    expect(await sqlstate(c.query('SET TRANSACTION READ WRITE'))).toBe('25001');
    await c.query('ROLLBACK');
  });

  it('closes a cursor with its block, and a statement timeout names itself', async () => {
    const c = await ctx.server.client();
    await c.query('BEGIN');
    await c.query('DECLARE tx_cur CURSOR FOR SELECT * FROM generate_series(1, 10)');
    expect((await c.query('FETCH 3 FROM tx_cur')).rowCount).toBe(3);
    await c.query('COMMIT');
    expect(await sqlstate(c.query('FETCH 1 FROM tx_cur'))).toBe('34000');
    await c.query("SET statement_timeout = '50ms'");
    const err = await c.query('SELECT count(*) FROM generate_series(1, 100000000000) a').then(
      () => null,
      (e: { code?: string; message: string }) => e,
    );
    expect(err?.code).toBe('57014');
    expect(err?.message).toBe('canceling statement due to statement timeout');
    await c.query('SET statement_timeout = 0');
    expect((await c.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
  });
});
