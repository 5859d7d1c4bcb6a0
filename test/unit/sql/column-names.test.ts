import { loadModule } from 'libpg-query';
import { beforeAll, describe, expect, it } from 'vitest';
import { hasComputedNames, nameArrayColumns, postgresColumnNames } from '../../../src/sql/column-names.js';

describe('result-column names, as PostgreSQL 15 names them', () => {
  beforeAll(async () => {
    await loadModule();
  });

  it('names every kind of expression as PostgreSQL does (the names were read from PostgreSQL 15)', () => {
    const sql =
      "SELECT 1, 'a'::text, '1.5'::numeric, 1e3::numeric, NULL::int IS NULL, 1 IS DISTINCT FROM NULL, x.a, x.a + 1, -x.a, x.a AS Total, x.a AS \"Total\", count(*), pg_catalog.upper('a'), trim(' a '), substring('abc' from 1 for 2), extract(year from now()), position('a' in 'abc'), coalesce(1, 2), nullif(1, 2), greatest(1, 2), least(1, 2), CASE WHEN true THEN 1 END, CASE WHEN true THEN 1 END::text, ARRAY[1], ARRAY(SELECT 1), EXISTS (SELECT 1), (SELECT max(b) FROM (VALUES (1)) v(b)), (SELECT 1), ROW(1, 2), current_date, current_user, session_user, current_schema, (ARRAY[1,2])[1], x.arr[1], ('{\"a\":1}'::jsonb)->'a', 1::int4::text, 1::int::varchar(3), 'x' COLLATE \"C\", '2024-01-01'::timestamp with time zone, 1 = ANY(ARRAY[1]), 1 IN (1), x.a BETWEEN 1 AND 2, grouping(x.a), (1, 2) = (1, 2), date '2024-01-01', interval '1 day', true, NOT true, 'a' || 'b', 'a' LIKE 'b' FROM (VALUES (1, ARRAY[1])) x(a, arr) GROUP BY x.a, x.arr";
    const expected = [
      '?column?',
      'text',
      'numeric',
      'numeric',
      '?column?',
      '?column?',
      'a',
      '?column?',
      '?column?',
      'total',
      'Total',
      'count',
      'upper',
      'btrim',
      'substring',
      'extract',
      'position',
      'coalesce',
      'nullif',
      'greatest',
      'least',
      'case',
      'text',
      'array',
      'array',
      'exists',
      'max',
      '?column?',
      'row',
      'current_date',
      'current_user',
      'session_user',
      'current_schema',
      'array',
      'arr',
      '?column?',
      'text',
      'varchar',
      '?column?',
      'timestamptz',
      '?column?',
      '?column?',
      '?column?',
      'grouping',
      '?column?',
      'date',
      'interval',
      '?column?',
      '?column?',
      '?column?',
      '?column?',
    ];
    expect(postgresColumnNames(sql, expected.length)).toEqual(expected);
  });

  it('names RETURNING lists, set operations and VALUES', () => {
    expect(postgresColumnNames('UPDATE t SET a = a + $1 RETURNING a, a * 2, now()', 3)).toEqual(['a', '?column?', 'now']);
    expect(postgresColumnNames('INSERT INTO t VALUES (1) RETURNING id AS "Id"', 1)).toEqual(['Id']);
    expect(postgresColumnNames('SELECT 1 AS x UNION SELECT 2', 1)).toEqual(['x']);
    expect(postgresColumnNames('VALUES (1, 2)', 2)).toEqual(['column1', 'column2']);
    expect(postgresColumnNames('WITH w AS (SELECT 1 AS a) SELECT a + 1 FROM w', 1)).toEqual(['?column?']);
    expect(postgresColumnNames('SELECT i FROM generate_series(1, 4) AS g(i)', 1)).toEqual(['i']);
  });

  it('leaves the engine’s names where it cannot tell them: a star, another column count, DuckDB-only syntax', () => {
    expect(postgresColumnNames('SELECT *, 1 FROM t', 3)).toBeNull();
    expect(postgresColumnNames('SELECT a, b FROM t', 3)).toBeNull();
    expect(postgresColumnNames('SELECT a FROM t QUALIFY row_number() OVER () = 1', 1)).toBeNull();
    expect(postgresColumnNames('CREATE TABLE t (a int)', 0)).toBeNull();
  });

  it('asks for names where DuckDB’s may differ: expressions, and capitals an unquoted alias keeps', () => {
    expect(hasComputedNames(['a', 'count_star()'])).toBe(true);
    expect(hasComputedNames(['Total'])).toBe(true);
    expect(hasComputedNames(['a', 'b_2'])).toBe(false);
  });

  it('finds array_agg of a catalog name column (name[] in PostgreSQL)', () => {
    expect([...nameArrayColumns('SELECT i.relname, array_agg(a.attname) FROM pg_class i JOIN pg_attribute a ON true GROUP BY 1')]).toEqual([1]);
    expect([...nameArrayColumns('SELECT array_agg(x) FROM pg_class')]).toEqual([]);
  });
});
