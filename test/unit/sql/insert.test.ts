import { describe, expect, it } from 'vitest';
import { hoistInsertWith, parseInsert, returnsAnyOf } from '../../../src/sql/insert.js';
import { tokenize } from '../../../src/sql/lexer.js';

const hoist = (sql: string) => hoistInsertWith(sql, tokenize(sql));

describe('a WITH before INSERT', () => {
  it('moves the WITH clause in front of the source, after the column list', () => {
    const sql = "WITH n AS (SELECT 1 AS i), m AS (SELECT 2) INSERT INTO _cot_steps (session_id, step_type) SELECT 's', 'Action' FROM n RETURNING step_index";
    const h = hoist(sql);
    expect(h?.text).toBe(
      "INSERT INTO _cot_steps (session_id, step_type) WITH n AS (SELECT 1 AS i), m AS (SELECT 2) SELECT 's', 'Action' FROM n RETURNING step_index",
    );
    const parts = parseInsert(h?.text ?? '', tokenize(h?.text ?? ''));
    expect(parts?.target).toEqual(['_cot_steps']);
    expect(parts?.source).toBe("WITH n AS (SELECT 1 AS i), m AS (SELECT 2) SELECT 's', 'Action' FROM n");
    expect(parts?.returning).toBe('step_index');
  });

  it('maps every position of the moved text back to the same character of the client’s', () => {
    const sql = 'WITH RECURSIVE r(k) AS (SELECT 1 UNION ALL SELECT k + 1 FROM r WHERE k < 3) INSERT INTO t (a) SELECT k FROM r';
    const h = hoist(sql);
    if (h === null) throw new Error('not hoisted');
    for (let p = 1; p <= h.text.length; p++) {
      const from = h.position(p);
      if (h.text[p - 1] !== ' ') expect(sql[from - 1], `position ${p}`).toBe(h.text[p - 1]);
    }
  });

  it('finds the INSERT after the last CTE, even when a CTE is named insert', () => {
    expect(hoist('WITH insert AS (SELECT 1) INSERT INTO t SELECT * FROM insert')?.text).toBe('INSERT INTO t WITH insert AS (SELECT 1) SELECT * FROM insert');
    expect(hoist('WITH x AS (SELECT (SELECT 1)) INSERT INTO t VALUES (1)')?.text).toBe('INSERT INTO t WITH x AS (SELECT (SELECT 1)) VALUES (1)');
  });

  it('leaves what is not a WITH before an INSERT of that shape', () => {
    expect(hoist('WITH x AS (SELECT 1) SELECT * FROM x')).toBeNull();
    expect(hoist('WITH x AS (SELECT 1) DELETE FROM t')).toBeNull();
    expect(hoist('WITH x AS (SELECT 1) INSERT INTO t DEFAULT VALUES')).toBeNull();
    expect(hoist('INSERT INTO t VALUES (1)')).toBeNull();
    expect(hoist('WITH x AS (SELECT 1) INSERT INTO t VALUES (1))')).toBeNull();
  });
});

describe('returnsAnyOf', () => {
  const chain = new Set(['step_index', 'current_hash']);
  it('names the first of the names a RETURNING list asks for, quoted or not, and * for every one', () => {
    expect(returnsAnyOf('trace_id, content', chain)).toBeNull();
    expect(returnsAnyOf('content, STEP_INDEX', chain)).toBe('step_index');
    expect(returnsAnyOf('"current_hash" AS h', chain)).toBe('current_hash');
    expect(returnsAnyOf('*', chain)).toBe('*');
    expect(returnsAnyOf('t.*', chain)).toBe('*');
  });

  it('does not take a multiplication for a star, nor a string for a name', () => {
    expect(returnsAnyOf('confidence * 2', chain)).toBeNull();
    expect(returnsAnyOf("'step_index'", chain)).toBeNull();
  });
});
