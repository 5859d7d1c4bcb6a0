import { loadModule, parseSync } from 'libpg-query';
import { beforeAll, describe, expect, it } from 'vitest';
import { insertPieces, withTargetColumns } from '../../../src/sql/pg-insert.js';

beforeAll(async () => {
  await loadModule();
});

const pieces = (sql: string): ReturnType<typeof insertPieces> =>
  insertPieces(
    sql,
    (parseSync(sql) as { stmts: Array<{ stmt: { InsertStmt: Record<string, unknown> } }> }).stmts[0]?.stmt.InsertStmt as Record<string, unknown>,
  );

describe('an INSERT cut at PostgreSQL tokens', () => {
  it('finds the WITH clause, the columns, the source and RETURNING', () => {
    expect(
      pieces('WITH x AS (SELECT 1 AS a) INSERT INTO public._cot_steps AS t (session_id, "step_type") SELECT \'s\', $1 FROM x RETURNING *, t.trace_id'),
    ).toEqual({
      withText: 'WITH x AS (SELECT 1 AS a)',
      columns: ['session_id', 'step_type'],
      source: "SELECT 's', $1 FROM x",
      returning: '*, t.trace_id',
      alias: 't',
    });
  });

  it('leaves comments out of every piece, so that what cotwire writes after one is not swallowed', () => {
    expect(pieces("WITH x AS (SELECT 1) -- a note\nINSERT INTO _cot_steps (session_id) VALUES ('a') -- trailing\n")).toMatchObject({
      withText: 'WITH x AS (SELECT 1)',
      source: "VALUES ('a')",
    });
    expect(pieces("INSERT INTO _cot_steps VALUES ('a', DEFAULT) RETURNING step_index -- done")).toMatchObject({
      source: "VALUES ('a', NULL)",
      returning: 'step_index',
    });
    expect(pieces('INSERT INTO _cot_steps DEFAULT VALUES;')).toMatchObject({ source: null, columns: null });
  });
});

describe('an INSERT given its first columns', () => {
  const insert = (sql: string): Record<string, unknown> =>
    (parseSync(sql) as { stmts: Array<{ stmt: { InsertStmt: Record<string, unknown> } }> }).stmts[0]?.stmt.InsertStmt as Record<string, unknown>;
  const listed = (sql: string, names: string[]): string | null => withTargetColumns(sql, insert(sql), names);

  it('lists them after the target, its schema and its alias, before VALUES, a query or OVERRIDING', () => {
    expect(listed('INSERT INTO t VALUES (1)', ['a'])).toBe('INSERT INTO t ("a") VALUES (1)');
    expect(listed('insert into s."T" as x values (1, \'é\')', ['a', 'we"ird'])).toBe('insert into s."T" as x ("a", "we""ird") values (1, \'é\')');
    expect(listed('INSERT INTO t SELECT 1, 2 -- two', ['a', 'b'])).toBe('INSERT INTO t ("a", "b") SELECT 1, 2 -- two');
    expect(listed('INSERT INTO t OVERRIDING SYSTEM VALUE VALUES (1)', ['id'])).toBe('INSERT INTO t ("id") OVERRIDING SYSTEM VALUE VALUES (1)');
  });

  it('leaves an INSERT that lists its columns', () => {
    expect(listed('INSERT INTO t (b) VALUES (1)', ['a'])).toBeNull();
  });
});
