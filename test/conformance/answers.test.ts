import { describe, expect, it } from 'vitest';
import { useConformanceServer } from '../fixtures/conformance.js';

/**
 * Answers that must be PostgreSQL's on either engine, where DuckDB's own
 * would differ without an error.
 */
const s = useConformanceServer();

describe('numerics of different scales together keep every digit and the scale PostgreSQL shows', () => {
  it('in CASE, COALESCE, GREATEST and LEAST, where DuckDB gives DECIMAL(38,9) and DECIMAL(38,3) the smaller scale', async () => {
    const c = await s.as();
    await c.query('CREATE TABLE answers_scales (id int, free numeric, money numeric(12,3))');
    await c.query('INSERT INTO answers_scales VALUES (1, 0.000000001, 99.999), (2, 123456789.123456781, 2.5)');
    // DuckDB alone: 123456789.123 and 0.000000100 (the branches rounded to 3 decimals, or to 9).
    const r = await c.query(
      'SELECT COALESCE(sum(free), sum(money)) AS c, greatest(sum(money), sum(free)) AS g, least(sum(free), sum(money)) AS l, CASE WHEN count(*) > 5 THEN sum(money) ELSE sum(free) END AS k FROM answers_scales',
    );
    expect(r.rows).toEqual([{ c: '123456789.123456782', g: '123456789.123456782', l: '102.499', k: '123456789.123456782' }]);
    const product = await c.query('SELECT greatest(free * money, free) AS p FROM answers_scales WHERE id = 1');
    expect(product.rows).toEqual([{ p: '0.000000099999' }]);
    // A literal with a point beside a sum of integers (DECIMAL(38,0) in DuckDB) keeps its decimals: DuckDB alone gave 0.
    expect((await c.query('SELECT (min(id) - 100000) * COALESCE(-0.001, sum(id::numeric)) AS m FROM answers_scales')).rows).toEqual([{ m: '99.999' }]);
    // One column beside literals keeps its own scale, as before: 102.499 and 0.000.
    expect((await c.query('SELECT COALESCE(sum(money), 0) AS s FROM answers_scales WHERE id < 3')).rows).toEqual([{ s: '102.499' }]);
  });

  it('in a remainder, at the larger scale of its operands', async () => {
    const r = await (await s.as()).query(
      "SELECT 7.50 % 2 AS a, to_jsonb(1.50 % 558.188239299897) AS j, (('2.5'::numeric(5,0) * (-7)::numeric) % ((-100.25) + '3.14159'::numeric(6,2)))::text AS t, -12345678901234567890 % 88710.27 AS w",
    );
    expect(r.rows).toEqual([{ a: '1.50', j: 1.5, t: '-21.00', w: '-59076.06' }]);
    const text = await (await s.as()).query('SELECT to_jsonb(1.50 % 558.188239299897)::text AS j');
    expect(text.rows).toEqual([{ j: '1.500000000000' }]);
  });

  it('in round(x, k) and trunc(x, k), which show k decimals', async () => {
    const r = await (await s.as()).query(
      "SELECT round(1.5::numeric, 12) AS a, trunc(2.5::numeric(12,3), 5) AS b, round(3, 2) AS c, jsonb_agg(round(x, 10))::text AS j, trunc(-7.125, 10) AS d FROM (VALUES ('-42.75'::numeric)) v(x)",
    );
    expect(r.rows).toEqual([{ a: '1.500000000000', b: '2.50000', c: '3.00', j: '[-42.7500000000]', d: '-7.1250000000' }]);
  });

  it('types a sum of a cast from jsonb as PostgreSQL does (bigint), and keeps seconds at six decimals beside a numeric', async () => {
    const r = await (await s.as()).query(
      `SELECT sum(('{"b": 2}'::jsonb ->> 'b')::int4) AS s, COALESCE(extract(second FROM '2024-02-29 23:59:59.5'::timestamp), (-608)::numeric)::text AS e`,
    );
    expect(r.fields.map((f) => f.dataTypeID)).toEqual([20, 25]);
    expect(r.rows).toEqual([{ s: '2', e: '59.500000' }]);
  });

  it('keeps an average of a CASE exact', async () => {
    const r = await (await s.as()).query('SELECT avg(CASE WHEN x > 0 THEN x ELSE -x END) AS a FROM (VALUES (9000000000::int8), (-5::int8), (2::int8)) v(x)');
    expect(r.rows).toEqual([{ a: '3000000002.33333333' }]);
  });
});

describe('answers the generated comparison found different', () => {
  it('of arrays, jsonb and text beside a double', async () => {
    const c = await s.as();
    await c.query('CREATE TABLE answers_found (id int, a int[], j jsonb)');
    await c.query(`INSERT INTO answers_found VALUES (1, NULL, '{"n": 1.10}')`);
    const r = await c.query(
      `SELECT array_cat(a, a) IS NULL AS cat, (j #> '{n}')::text AS path,
         ('{"b": 2, "a": 1}'::jsonb || '{"a": 1, "b": [1, 2, {"c": "x"}]}'::jsonb) #> '{b,2,c}' AS merged,
         ('{"b": 2}'::jsonb || '{"b": 3.50}'::jsonb) -> 'b' AS right_wins,
         '' || 'Infinity'::float8 AS inf, 'x' || 8::float8 AS eight,
         greatest(((9::int8 * 30) + 1.23456789012345678901), round('-0.25'::numeric, 12)) AS g
       FROM answers_found`,
    );
    // DuckDB alone: [], 1.1, NULL, 2, inf, x8.0 and 271.2345678901235 (greatest of a parenthesised branch as a double).
    expect(r.rows).toEqual([{ cat: true, path: '1.10', merged: 'x', right_wins: 3.5, inf: 'Infinity', eight: 'x8', g: '271.23456789012345678901' }]);
    expect((await c.query(`SELECT (('{"b": 2}'::jsonb || '{"b": 3.50}'::jsonb) -> 'b')::text AS t`)).rows).toEqual([{ t: '3.50' }]);
  });

  it('of to_char past its pattern, which keeps the sign', async () => {
    const c = await s.as();
    // DuckDB alone: ' ###.##' and '###.###', the minus lost.
    const r = await c.query("SELECT to_char((-2610.45)::float8, '999.99') AS a, to_char(-175::int8, 'FM999.999') AS b, to_char(2610.4, '999.99') AS c");
    expect(r.rows).toEqual([{ a: '-###.##', b: '-175.', c: ' ###.##' }]);
    expect((await c.query("SELECT to_char(-1750::int8, 'FM999.999') AS b")).rows).toEqual([{ b: '-###.###' }]);
  });

  it('of to_char of a double, rounded as its binary value and signed as itself, and of a numeric', async () => {
    const c = await s.as();
    // DuckDB alone: 2.68, 3 and 0 for the doubles (rounded as decimals, the sign taken after rounding).
    const r = await c.query(
      "SELECT to_char(2.675::float8, 'FM999.00') AS a, to_char(2.675::numeric, 'FM999.00') AS b, to_char(2.5::float8, '9') AS c, to_char(-0.1::float8, '9') AS d, to_char(-0.1::numeric, '9') AS e",
    );
    expect(r.rows).toEqual([{ a: '2.67', b: '2.68', c: ' 2', d: '-0', e: ' 0' }]);
  });

  it('of a text column beside a numeric or a double column', async () => {
    const c = await s.as();
    await c.query('CREATE TABLE answers_labels (s text, n numeric, f float8, i int)');
    await c.query("INSERT INTO answers_labels VALUES ('x', 1.5, 2.0, 3)");
    // DuckDB alone: x1.500000000 and 2.0x.
    const r = await c.query('SELECT s || n AS a, f || s AS b, s || i AS c, max(s) || sum(n) AS d FROM answers_labels GROUP BY s, n, f, i');
    expect(r.rows).toEqual([{ a: 'x1.5', b: '2x', c: 'x3', d: 'x1.5' }]);
    // A text function's result is text by its witness: DuckDB alone wrote x2.0 and X1.500000000.
    const calls = await c.query("SELECT replace(s, ' ', '') || date_part('day', '2024-05-02'::date) AS e, upper(s) || n AS f FROM answers_labels");
    expect(calls.rows).toEqual([{ e: 'x2', f: 'X1.5' }]);
  });

  it('of text || jsonb, which is text beside a text column and jsonb beside jsonb', async () => {
    const c = await s.as();
    await c.query('CREATE TABLE answers_docs (s text, j jsonb)');
    await c.query(`INSERT INTO answers_docs VALUES ('tag:', '{"b": 2.50, "a": [1]}')`);
    // Before: DuckDB's JSON || took both for jsonb and refused 'tag:' (Malformed JSON).
    const r = await c.query('SELECT s || j AS a, j || s AS b, upper(s) || j AS c, s || j || s AS d, j || j AS e, j || \'{"z": 1}\' AS f FROM answers_docs');
    expect(r.rows).toEqual([
      {
        a: 'tag:{"a": [1], "b": 2.50}',
        b: '{"a": [1], "b": 2.50}tag:',
        c: 'TAG:{"a": [1], "b": 2.50}',
        d: 'tag:{"a": [1], "b": 2.50}tag:',
        e: { a: [1], b: 2.5 },
        f: { a: [1], b: 2.5, z: 1 },
      },
    ]);
    const types = await c.query("SELECT pg_typeof(s || j)::text AS t, pg_typeof(j || j)::text AS u, pg_typeof(j || '[]')::text AS v FROM answers_docs");
    expect(types.rows).toEqual([{ t: 'text', u: 'jsonb', v: 'jsonb' }]);
    // An untyped literal is jsonb's operand, as in PostgreSQL: not JSON, refused.
    await expect(c.query("SELECT 'tag:' || j FROM answers_docs")).rejects.toMatchObject({ code: '22P02' });
  });
});

describe('INSERT without a column list', () => {
  it('fills the first columns from fewer values and gives the rest their defaults, in and out of a transaction', async () => {
    const c = await s.as();
    await c.query("CREATE TABLE answers_short (a int, b text DEFAULT 'x', c int)");
    // DuckDB alone: table answers_short has 3 columns but 1 values were supplied.
    await c.query('INSERT INTO answers_short VALUES (1)');
    await c.query("INSERT INTO answers_short AS s VALUES (2, 'y'), (3, 'z')");
    await c.query('INSERT INTO answers_short SELECT 4');
    await c.query('BEGIN');
    await c.query('INSERT INTO answers_short VALUES ($1)', [5]);
    await c.query('COMMIT');
    expect((await c.query('SELECT a, b, c FROM answers_short ORDER BY a')).rows).toEqual([
      { a: 1, b: 'x', c: null },
      { a: 2, b: 'y', c: null },
      { a: 3, b: 'z', c: null },
      { a: 4, b: 'x', c: null },
      { a: 5, b: 'x', c: null },
    ]);
    // More values than columns is PostgreSQL's syntax error.
    await expect(c.query('INSERT INTO answers_short VALUES (6, 6, 6, 6)')).rejects.toMatchObject({ code: '42601' });
  });
});
