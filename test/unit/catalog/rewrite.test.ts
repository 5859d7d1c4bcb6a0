import { loadModule } from 'libpg-query';
import { beforeAll, describe, expect, it } from 'vitest';
import { CompatRewriter, mayNeedRewrite, partialPattern, pgArrayToList, pgBoolean } from '../../../src/engines/duckdb/catalog/rewrite.js';
import { tokenize } from '../../../src/sql/lexer.js';
import { ParsedStatement } from '../../../src/sql/parsed.js';

const P = 'cotwire_pg.pg';
const rewriter = new CompatRewriter();
const rw = (sql: string): string => rewriter.rewrite(sql, tokenize(sql));

beforeAll(async () => {
  await loadModule();
});

describe('catalog rewrites', () => {
  it('leaves statements without PostgreSQL-only syntax untouched, without parsing them', () => {
    const sql = "INSERT INTO _cot_steps (session_id, step_type, content) VALUES ('s', 'Observation', 'pg_class is a word here')";
    expect(mayNeedRewrite(tokenize(sql))).toBe(false);
    expect(rw(sql)).toBe(sql);
    expect(rw('SELECT 1')).toBe('SELECT 1');
  });

  it('points pg_catalog relations, qualified or not, at the catalog views', () => {
    expect(rw('SELECT relname FROM pg_catalog.pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace')).toBe(
      `SELECT relname FROM ${P}.pg_class c JOIN ${P}.pg_namespace n ON n.oid = c.relnamespace`,
    );
    expect(rw('SELECT * FROM information_schema.tables')).toBe('SELECT * FROM cotwire_pg.information.tables');
  });

  it('leaves a WITH query that shadows a catalog name, and statement targets, alone', () => {
    expect(rw('WITH pg_class AS (SELECT 1 AS oid) SELECT * FROM pg_class')).toBe('WITH pg_class AS (SELECT 1 AS oid) SELECT * FROM pg_class');
    expect(rw('CREATE TABLE pg_roles (x int)')).toBe('CREATE TABLE pg_roles (x int)');
    expect(rw('INSERT INTO pg_user SELECT * FROM pg_user')).toBe(`INSERT INTO pg_user SELECT * FROM ${P}.pg_user`);
  });

  it('presents main as public in qualified names, targets included', () => {
    expect(rw('INSERT INTO public._cot_steps (content) SELECT content FROM public.notes')).toBe(
      'INSERT INTO main._cot_steps (content) SELECT content FROM main.notes',
    );
  });

  it('sends catalog functions to cotwire and strips pg_catalog. from the engine’s own', () => {
    expect(rw('SELECT pg_catalog.format_type(a.atttypid, NULL), pg_catalog.lower(x), pg_get_userbyid(1)')).toBe(
      `SELECT ${P}.format_type(a.atttypid, NULL), lower(x), ${P}.pg_get_userbyid(1)`,
    );
    expect(rw('SELECT pg_catalog.version()')).toBe('SELECT version()');
    expect(rw('SELECT current_schema, current_catalog')).toBe(`SELECT ${P}.current_schema(), current_database()`);
  });

  it('turns OPERATOR(pg_catalog.~) into the operator and drops COLLATE pg_catalog.default', () => {
    expect(rw("SELECT 1 FROM t WHERE c.relname OPERATOR(pg_catalog.~) '^(agents)$' COLLATE pg_catalog.default")).toBe(
      `SELECT 1 FROM t WHERE c.relname  ~  '${partialPattern('^(agents)$', false)}' `,
    );
  });

  it("makes PostgreSQL's ~ family a match anywhere in the string", () => {
    expect(rw("SELECT n !~ '^pg_'")).toBe(`SELECT n !~ '${partialPattern('^pg_', false)}'`);
    expect(rw("SELECT n ~* 'it''s'")).toBe(`SELECT n ~ '${partialPattern("it''s", true)}'`);
    expect(rw('SELECT n ~ $1')).toBe(`SELECT n ~ ('(?s:.*)(?:' || $1 || ')(?s:.*)')`);
    expect(rw('SELECT n !~* t.pattern FROM t')).toBe(`SELECT n !~ ('(?s:.*)(?i:' || t.pattern || ')(?s:.*)') FROM t`);
  });

  it('turns reg* casts into catalog lookups: names to OIDs, OIDs to names', () => {
    expect(rw("SELECT 'pg_catalog.pg_extension'::pg_catalog.regclass")).toBe(`SELECT ${P}.cot_regclass_out(${P}.cot_regclass_in('pg_catalog.pg_extension'))`);
    expect(rw("SELECT 1 FROM t WHERE c = 'pg_catalog.pg_extension'::pg_catalog.regclass")).toBe(
      `SELECT 1 FROM t WHERE c = ${P}.cot_regclass_in('pg_catalog.pg_extension')`,
    );
    expect(rw(`SELECT ('"' || s || '"')::"regtype"::text FROM t`)).toBe(`SELECT ${P}.cot_regtype_out(${P}.cot_regtype_in(('"' || s || '"')))::text FROM t`);
    expect(rw('SELECT c.oid::pg_catalog.regclass::pg_catalog.text FROM pg_class c')).toBe(`SELECT ${P}.cot_regclass_out(c.oid)::text FROM ${P}.pg_class c`);
    expect(rw('SELECT CAST($1 AS regtype)')).toBe(`SELECT ${P}.cot_regtype_in($1)`);
    expect(rw('SELECT (a + 1)::regproc')).toBe(`SELECT ${P}.cot_regproc_out((a + 1))`);
  });

  it("maps PostgreSQL's own type names and strips their pg_catalog qualifier", () => {
    expect(rw('SELECT x::name, y::pg_catalog.int2[], z::pg_catalog.text, w::"char"')).toBe(`SELECT x::VARCHAR, y::int2[], ${P}.cot_text(z)::text, w::VARCHAR`);
    expect(rw('SELECT x::integer, y::double precision')).toBe(
      `SELECT ${P}.cot_integer_text(x, 'integer')::integer, ${P}.cot_float_of(y, 'double precision')::double precision`,
    );
  });

  it('names the column of a scalar set function in FROM after its alias', () => {
    expect(rw('SELECT s FROM pg_catalog.generate_series(0, n) s')).toBe('SELECT s FROM generate_series(0, n) s(s)');
    expect(rw('SELECT x FROM unnest(a) AS x')).toBe('SELECT x FROM unnest(a) AS x(x)');
    expect(rw('SELECT * FROM generate_series(0, n) s(n)')).toBe('SELECT * FROM generate_series(0, n) s(n)');
  });

  it('turns = ANY(list) into list_contains, unless the list itself needs a rewrite', () => {
    expect(rw('SELECT rolname FROM pg_roles WHERE oid = any (pol.polroles)')).toBe(
      `SELECT rolname FROM ${P}.pg_roles WHERE ${P}.cot_any_eq(pol.polroles, oid)`,
    );
    expect(rw('SELECT 1 WHERE x <> ALL (ARRAY[1, 2]) AND pg_catalog.pg_table_is_visible(1)')).toBe(
      `SELECT 1 WHERE NOT ${P}.cot_any_eq(ARRAY[1, 2], x) AND ${P}.pg_table_is_visible(1)`,
    );
    expect(rw('SELECT 1 WHERE x = ANY(SELECT oid FROM pg_class)')).toBe(`SELECT 1 WHERE x = ANY(SELECT oid FROM ${P}.pg_class)`);
  });

  it('finds nodes by character, not byte, offset in text with multi-byte characters', () => {
    expect(rw("SELECT 'héllo → ✓' AS s, relname FROM pg_class WHERE relname ~ 'é'")).toBe(
      `SELECT 'héllo → ✓' AS s, relname FROM ${P}.pg_class WHERE relname ~ '${partialPattern('é', false)}'`,
    );
  });

  it('leaves DuckDB-only syntax, which PostgreSQL cannot parse, as written', () => {
    const sql = 'FROM pg_class SELECT relname';
    expect(rw(sql)).toBe(sql);
  });
});

describe('PostgreSQL array literals', () => {
  it('become DuckDB lists', () => {
    expect(pgArrayToList('{}')).toBe('[]');
    expect(pgArrayToList('{a,"b c","q\\"uote",NULL, d }')).toBe(`['a', 'b c', 'q"uote', NULL, 'd']`);
    expect(pgArrayToList('{{1,2},{3}}')).toBe("[['1', '2'], ['3']]");
    expect(pgArrayToList("{it's}")).toBe("['it''s']");
    expect(pgArrayToList('{"k": 1}')).toBeNull();
    expect(pgArrayToList('{a,b')).toBeNull();
    expect(pgArrayToList('[1,2]')).toBeNull();
  });

  it('are rewritten where a cast or the target column says the value is an array', () => {
    expect(rw("SELECT '{a,b}'::text[], '{}'::int[], '{x}'::text")).toBe("SELECT ['a', 'b']::text[], []::int[], '{x}'::text");
    const sql = "INSERT INTO t (tags, doc) VALUES ('{}', '{}'), ('{a}', '{\"k\": 1}')";
    const target = [
      { name: 'doc', list: false },
      { name: 'tags', list: true },
    ];
    expect(rewriter.rewrite(sql, tokenize(sql), target)).toBe("INSERT INTO t (tags, doc) VALUES ([], '{}'), (['a'], '{\"k\": 1}')");
    expect(rewriter.insertTarget(new ParsedStatement(sql, tokenize(sql)))).toEqual({ schema: null, table: 't' });
    const json = `INSERT INTO _cot_steps (metadata) VALUES ('{"k": 1}')`;
    expect(rewriter.insertTarget(new ParsedStatement(json, tokenize(json)))).toBeNull();
  });

  it("check text written into an integer or float column as PostgreSQL's input reads it", () => {
    const sql = "INSERT INTO t (n, f, s) VALUES ('1.5', '1e400', '2.5'), (' 42 ', 'NaN', 'x')";
    const target = [
      { name: 'n', list: false, numberInput: 'integer' as const },
      { name: 'f', list: false, numberInput: 'double precision' as const },
      { name: 's', list: false },
    ];
    expect(rewriter.rewrite(sql, tokenize(sql), target)).toBe(
      `INSERT INTO t (n, f, s) VALUES (${P}.cot_integer_text('1.5', 'integer'), ${P}.cot_float_of('1e400', 'double precision'), '2.5'), (${P}.cot_integer_text(' 42 ', 'integer'), ${P}.cot_float_of('NaN', 'double precision'), 'x')`,
    );
    const update = "UPDATE t SET n = '0x10', s = '1.5' WHERE n = 1";
    expect(rewriter.rewrite(update, tokenize(update), target)).toBe(`UPDATE t SET n = ${P}.cot_integer_text('0x10', 'integer'), s = '1.5' WHERE n = 1`);
    // The columns are looked up only for a statement with text that DuckDB could read as a number PostgreSQL would not.
    for (const [text, looked] of [
      ["INSERT INTO t VALUES ('1.5')", true],
      ["INSERT INTO t VALUES ('1_000')", true],
      ["UPDATE t SET n = '1e5'", true],
      ["INSERT INTO t VALUES ('42', 'abc')", false],
    ] as const) {
      expect(rewriter.insertTarget(new ParsedStatement(text, tokenize(text))) !== null, text).toBe(looked);
    }
  });
});

describe('renamed functions and vector columns', () => {
  it('reads a text pattern of substring as a regular expression, and a SQL one with its escape', () => {
    expect(rw("SELECT substring(s from '[0-9]+') FROM t")).toBe(`SELECT ${P}.cot_substring_match(s , '[0-9]+') FROM t`);
    expect(rw("SELECT substring(s, 'a(b)c')")).toBe(`SELECT ${P}.cot_substring_group(s, 'a(b)c')`);
    expect(rw(`SELECT substring('Thomas' from '%#"o_a#"_' for '#')`)).toBe(`SELECT ${P}.cot_substring_group('Thomas' , '^(?:.*){1,1}?(o.a){1,1}(?:.)$')`);
    expect(rw('SELECT substring(s from 2 for 3), substring(s from $1) FROM t')).toBe('SELECT substring(s from 2 for 3), substring(s from $1) FROM t');
  });

  it('reads timestamps as PostgreSQL does: an offset after a space, no seconds, a text column cast', () => {
    expect(rw("SELECT '2024-07-01 00:00:00.000 +00:00'::timestamptz, timestamptz '2024-01-02 00:00+00'")).toBe(
      "SELECT '2024-07-01 00:00:00.000+00:00'::timestamptz, timestamptz '2024-01-02 00:00:00+00'",
    );
    expect(rw("SELECT timestamp '2024-01-02 10:00:00 Z', '2024-01-02 10:00:00'::timestamp")).toBe(
      "SELECT timestamp '2024-01-02 10:00:00+00', '2024-01-02 10:00:00'::timestamp",
    );
    expect(rw('SELECT s::timestamptz, CAST(s AS timestamp), s::timestamp with time zone, $1::timestamptz FROM t')).toBe(
      `SELECT ${P}.cot_timestamptz(s), ${P}.cot_timestamp(s ), ${P}.cot_timestamptz(s), $1::timestamptz FROM t`,
    );
  });

  it("makes jsonb's set-returning functions in FROM a lateral query over json_each, rewriting inside their argument", () => {
    // jsonb's text first: its keys in jsonb's order, nested objects and arrays with its spacing.
    expect(rw(`SELECT * FROM jsonb_each_text('{"a":1}'::jsonb)`)).toBe(
      `SELECT * FROM LATERAL (SELECT key, CASE WHEN type = 'NULL' THEN NULL WHEN type IN ('OBJECT', 'ARRAY') THEN cot_jsonb_text(value) ELSE json_extract_string(value, '$') END AS value FROM json_each(cot_jsonb_text(CAST(('{"a":1}'::JSON) AS VARCHAR)))) AS jsonb_each_text`,
    );
    expect(rw('SELECT k FROM t, jsonb_object_keys(t.meta) k')).toMatch(
      /^SELECT k FROM t, LATERAL \(SELECT CASE WHEN fullkey LIKE .* AS "k" FROM json_each\(cot_jsonb_text\(CAST\(\(t\.meta\) AS VARCHAR\)\)\)\) k$/,
    );
    expect(rw('SELECT * FROM t, pg_catalog.jsonb_array_elements(t.meta) AS e(v)')).toMatch(
      /FROM json_each\(cot_jsonb_text\(CAST\(\(t\.meta\) AS VARCHAR\)\)\)\) AS e\(v\)$/,
    );
    // json's as written.
    expect(rw(`SELECT * FROM json_each('{"b":1,"a":2}')`)).toBe(
      `SELECT * FROM LATERAL (SELECT key, CAST(value AS JSON) AS value FROM json_each('{"b":1,"a":2}')) AS json_each`,
    );
  });

  it('orders a DISTINCT ON query by its keys, as PostgreSQL returns it, when it names no order of its own', () => {
    expect(rw('SELECT DISTINCT ON (a, b) a, b, c FROM t WHERE c > 0;')).toBe('SELECT DISTINCT ON (a, b) a, b, c FROM t WHERE c > 0 ORDER BY a, b;');
    expect(rw('SELECT DISTINCT ON (a) a, b FROM t ORDER BY a, b DESC')).toBe('SELECT DISTINCT ON (a) a, b FROM t ORDER BY a, b DESC');
    expect(rw('SELECT DISTINCT ON (a) a FROM t LIMIT 3')).toBe('SELECT DISTINCT ON (a) a FROM t LIMIT 3');
    expect(rw('SELECT DISTINCT a FROM t')).toBe('SELECT DISTINCT a FROM t');
    // An expression as a key is left alone: the rewrite may change it where it stands.
    expect(rw('SELECT DISTINCT ON (a || b) a FROM t')).not.toContain('ORDER BY');
  });

  it('builds JSON as text from each value, so that DuckDB never reads a number as a double', () => {
    expect(rw("SELECT json_build_object('a', 1), pg_catalog.jsonb_agg(x ORDER BY y) FILTER (WHERE y > 0) FROM t")).toBe(
      `SELECT CAST(concat('{', '"a"', ' : ',  coalesce(${P}.cot_json_text(1), 'null'), '}') AS JSON), CAST(('[' || string_agg(coalesce(${P}.cot_json_text(x), 'null'), ', ' ORDER BY y) FILTER (WHERE y > 0) || ']') AS JSON) FROM t`,
    );
  });

  it('writes keys once where they are constants, checks the others, and keeps DISTINCT on the values', () => {
    expect(rw('SELECT jsonb_build_object(k, n), to_jsonb(n), jsonb_object_agg(k, v), jsonb_agg(DISTINCT x) FROM t')).toBe(
      `SELECT CAST(concat('{', ${P}.cot_json_key(k, 'argument 1: key must not be null'), ': ',  coalesce(${P}.cot_json_text(n), 'null'), '}') AS JSON), CAST(${P}.cot_json_text(n) AS JSON), CAST(('{' || string_agg(concat(${P}.cot_json_key(k, 'field name must not be null'), ': ',  coalesce(${P}.cot_json_text(v), 'null')), ', ') || '}') AS JSON), CAST(('[' || array_to_string(list_transform(list(DISTINCT x ORDER BY x), cot_e -> coalesce(${P}.cot_json_text(cot_e), 'null')), ', ') || ']') AS JSON) FROM t`,
    );
  });

  it('gives the arguments PostgreSQL defaults, and array_to_string its NULL text', () => {
    expect(rw("SELECT lpad(s, 5), rpad(s, 5, 'x'), array_to_string(a, ','), array_to_string(a, ',', '*') FROM t")).toBe(
      `SELECT lpad(s, 5, ' '), rpad(s, 5, 'x'), ${P}.cot_array_to_string(a, ',', NULL), ${P}.cot_array_to_string(a, ',', '*') FROM t`,
    );
  });

  it('reads an ISO 8601 duration as DuckDB reads an interval', () => {
    expect(rw("SELECT 'P1DT2H'::interval, interval 'PT1.5S', '1 day'::interval")).toBe(
      "SELECT '0 months 1 days 7200000000 microseconds'::interval, interval '0 months 0 days 1500000 microseconds', '1 day'::interval",
    );
  });

  it('reads a string beside an array as an array literal, as PostgreSQL does', () => {
    expect(rw("SELECT ARRAY[1] || '{2,NULL}', '{a}' || ARRAY['b'], ARRAY['c'] || 'x'")).toBe(
      `SELECT ${P}.cot_array_cat_literal(ARRAY[1] , ['2', NULL]), ${P}.cot_literal_cat_array(['a'] , ARRAY['b']), ${P}.cot_array_cat(ARRAY['c'] , error('malformed array literal: "x"'))`,
    );
    // Beside @> and <@ an array literal makes a column an array (tags @> '{a}'); a JSON text stays jsonb's.
    expect(rw(`SELECT tags @> '{a}', '{1}' <@ ids, meta @> '{"a": 1}' FROM t`)).toBe(
      `SELECT ${P}.cot_array_contains_literal(tags , ['a']), ${P}.cot_literal_contained_array(['1'] , ids), ${P}.cot_jsonb_contains(meta , '{"a": 1}') FROM t`,
    );
  });

  it('concatenates arrays as PostgreSQL does where an operand is an array by its text', () => {
    expect(rw("SELECT ta || ARRAY['x'], COALESCE(a, ARRAY[1]) || b, s || t FROM t")).toBe(
      `SELECT ${P}.cot_array_cat_or_prepend(ta , ARRAY['x']), ${P}.cot_array_cat_or_append(COALESCE(a, ARRAY[1]) , b), ${P}.cot_concat_pair(s , t, "s", "t") FROM t`,
    );
  });

  it('prints int2vector columns space-separated when cast to text', () => {
    expect(rw('SELECT ix.indkey::varchar, ix.indoption::text, ix.indisunique::text FROM pg_index ix')).toBe(
      `SELECT array_to_string(ix.indkey, ' '), array_to_string(ix.indoption, ' '), ix.indisunique::text FROM ${P}.pg_index ix`,
    );
  });
});

describe('division', () => {
  it('casts a numeric zero to a double without its sign, as a numeric has none', () => {
    expect(rw('SELECT (-0.0)::float8, (-1.5)::float8')).toBe("SELECT ('0.0')::float8, ('-1.5')::float8");
  });

  it('widens the branches beside a quotient, so that a CASE or COALESCE does not round it to their scale', () => {
    expect(rw('SELECT CASE WHEN k THEN n ELSE avg(n) END, COALESCE(n, 1) FROM t')).toBe(
      `SELECT CASE WHEN k THEN ${P}.cot_widen(n, "n") ELSE ${P}.cot_widen(${P}.cot_avg_as(sum(n), count(n), avg(n), "n"), ${P}.cot_avg_witness("n")) END, COALESCE(n, 1) FROM t`,
    );
  });

  it('gives numeric branches their largest scale through a zero of their sum, an aggregate witnessed in any_value', () => {
    const shared = `${P}.cot_scale_of(any_value(${P}.cot_sum_witness("n")), ${P}.cot_sum_witness("n")) + ${P}.cot_scale_of(any_value(${P}.cot_sum_witness("m")), ${P}.cot_sum_witness("m"))`;
    expect(rw('SELECT greatest(sum(n), sum(m)) FROM t')).toBe(
      `SELECT greatest(${P}.cot_scaled(${P}.cot_sum_as(${P}.cot_sum(n), "n"), ${shared}, ${P}.cot_sum_witness("n")), ${P}.cot_scaled(${P}.cot_sum_as(${P}.cot_sum(m), "m"), ${shared}, ${P}.cot_sum_witness("m"))) FROM t`,
    );
    // A subquery or a window function would be copied into the sum; one branch beside literals cannot be narrowed.
    for (const sql of [
      'SELECT COALESCE(n, (SELECT 1)) FROM t',
      'SELECT COALESCE(n, lag(m) OVER ()) FROM t',
      "SELECT COALESCE(n, 0), CASE WHEN k THEN n ELSE 'x' END FROM t",
    ]) {
      expect(rw(sql)).toBe(sql);
    }
  });

  it('checks each divisor, finding where it ends by parsing it again', () => {
    expect(rw('SELECT a / f(x), a % (b - 1), a / $1 * c, a / g(x, y) + 1 FROM t')).toBe(
      `SELECT a / ${P}.cot_divisor(f(x)), ${P}.cot_mod(a , (${P}.cot_minus(b , 1, "b", 1)), "a", ${P}.cot_minus("b", 1, "b", 1)), a / ${P}.cot_divisor($1) * c, a / ${P}.cot_divisor(g(x, y)) + 1 FROM t`,
    );
    expect(rw('SELECT x / CASE WHEN y > 0 THEN f(y) ELSE 1 END FROM t')).toBe(`SELECT x / ${P}.cot_divisor(CASE WHEN y > 0 THEN f(y) ELSE 1 END) FROM t`);
    expect(rw('SELECT a % f(x) FROM t')).toBe(`SELECT a % ${P}.cot_divisor(f(x)) FROM t`);
  });

  it('types a division whose operands have certain types by their witnesses, so that numeric division stays numeric', () => {
    expect(rw('SELECT a / b, a / b::int * c, 7.0 / 2 FROM t')).toBe(
      `SELECT ${P}.cot_div(a , b, "a", "b"), ${P}.cot_div(a , ${P}.cot_integer_text(b, 'integer')::int, "a", CAST("b" AS INTEGER)) * c, ${P}.cot_div(7.0 , 2, 7.0, 2) FROM t`,
    );
    // An aggregate's witness is the type it returns, without aggregating.
    expect(rw('SELECT sum(x) / count(*) FROM t')).toBe(
      `SELECT ${P}.cot_div(${P}.cot_sum_as(${P}.cot_sum(x), "x") , count(*), ${P}.cot_sum_witness("x"), CAST(1 AS BIGINT)) FROM t`,
    );
    expect(rw('SELECT (a + b) / c::numeric FROM t')).toBe(
      `SELECT ${P}.cot_div((a + b) , ${P}.cot_numeric_cast(c, "c"), ("a" + "b"), ${P}.cot_numeric_cast("c", "c")) FROM t`,
    );
  });

  it('types sum() and avg() by their argument’s witness, keeping DISTINCT, FILTER and OVER', () => {
    expect(rw('SELECT sum(DISTINCT x), avg(y) FILTER (WHERE z) OVER w, avg(x) OVER (PARTITION BY k) FROM t')).toBe(
      `SELECT ${P}.cot_sum_as(sum(DISTINCT x), "x"), ${P}.cot_avg_as(sum(y) FILTER (WHERE z) OVER w, count(y) FILTER (WHERE z) OVER w, avg(y) FILTER (WHERE z) OVER w, "y"), ${P}.cot_avg_as(sum(x) OVER (PARTITION BY k), count(x) OVER (PARTITION BY k), avg(x) OVER (PARTITION BY k), "x") FROM t`,
    );
    // A plain sum goes through cot_sum, which sums an interval (DuckDB's sum has none); one a macro cannot stand for does not.
    expect(rw('SELECT sum(x), sum(x) OVER () FROM t')).toBe(`SELECT ${P}.cot_sum_as(${P}.cot_sum(x), "x"), ${P}.cot_sum_as(sum(x) OVER (), "x") FROM t`);
    // With a rewrite inside the call, the copies beside it would not be the same expression: the double average.
    expect(rw('SELECT avg(extract(second FROM ts)) FROM t')).not.toContain('count(');
    // An argument whose type is not certain keeps DuckDB's.
    expect(rw('SELECT sum(f(x)) FROM t')).toBe('SELECT sum(f(x)) FROM t');
  });

  it('types date - date as integer days', () => {
    expect(rw("SELECT d - date '2024-01-01' FROM t")).toBe(`SELECT ${P}.cot_minus(d , date '2024-01-01', "d", CAST('2024-01-01' AS DATE)) FROM t`);
    // A negative literal is no subtraction.
    expect(mayNeedRewrite(tokenize('INSERT INTO t VALUES (-1, 2)'))).toBe(false);
  });

  it('leaves system columns the rewrite replaces out of witnesses', () => {
    expect(rw('SELECT c.tableoid / 2 FROM pg_class c')).toBe(`SELECT CAST(1259 AS BIGINT) / ${P}.cot_divisor(2) FROM ${P}.pg_class c`);
  });

  it('leaves definitions that are stored (views, tables) as written', () => {
    expect(rw('CREATE VIEW v AS SELECT a / b FROM t')).toBe('CREATE VIEW v AS SELECT a / b FROM t');
  });
});

describe('PostgreSQL’s result types', () => {
  it('extract is numeric and keeps the fraction of a second; date_part is double precision', () => {
    expect(rw("SELECT extract(second FROM ts), extract(year FROM ts), date_part('ms', ts) FROM t")).toBe(
      "SELECT (CAST(extract(microseconds FROM ts) AS DECIMAL(38,0)) * 0.000001), CAST(extract(year FROM ts) AS DECIMAL(38,9)), (CAST(date_part('microseconds', ts) AS DOUBLE) / 1000) FROM t",
    );
  });

  it('ntile is integer, percentile_cont double precision, with their window and ordering', () => {
    expect(rw('SELECT ntile(2) OVER (ORDER BY x), percentile_cont(0.5) WITHIN GROUP (ORDER BY x) FROM t')).toBe(
      'SELECT CAST(ntile(2) OVER (ORDER BY x) AS INTEGER), CAST(percentile_cont(0.5) WITHIN GROUP (ORDER BY CAST(x AS DOUBLE)) AS DOUBLE) FROM t',
    );
  });

  it('round(x) of a double rounds half to even, chosen by x’s witness', () => {
    expect(rw('SELECT round(x), pg_catalog.round(2.5::float8), round(x, 2) FROM t')).toBe(
      `SELECT ${P}.cot_round(x, "x"), ${P}.cot_round('2.5'::float8, CAST(2.5 AS DOUBLE)), CAST(${P}.cot_round_to(x, 2, "x") AS DECIMAL(38,2)) FROM t`,
    );
    // round(x, n) of an integer is numeric, as PostgreSQL rounds only numerics to n places; n places shown, trailing zeros too.
    expect(rw('SELECT round(1, 2), trunc(x, 12), round(x, y) FROM t')).toBe(
      `SELECT CAST(${P}.cot_round_to(1, 2, 1) AS DECIMAL(38,2)), CAST(trunc(x, 12) AS DECIMAL(37,12)), ${P}.cot_round_to(x, y, "x") FROM t`,
    );
  });

  it('gives LIKE PostgreSQL’s backslash escape after the whole pattern, and leaves an explicit ESCAPE alone', () => {
    expect(rw("SELECT 1 WHERE n NOT LIKE $1::VARCHAR || '%' ESCAPE '/'")).toBe("SELECT 1 WHERE n NOT LIKE $1::VARCHAR || '%' ESCAPE '/'");
    expect(rw("SELECT 1 WHERE n LIKE $1::VARCHAR || '%'")).toBe("SELECT 1 WHERE n LIKE $1::VARCHAR || '%' ESCAPE '\\'");
    expect(rw("SELECT 'a' ILIKE 'a\\_b', 'a' LIKE 'ab'")).toBe("SELECT 'a' ILIKE 'a\\_b' ESCAPE '\\', 'a' LIKE 'ab'");
  });

  it('reads a boolean literal as PostgreSQL’s boolin does', () => {
    expect(rw("SELECT 'off'::boolean, CAST('Y' AS bool), 'maybe'::boolean")).toBe("SELECT 'false'::boolean, CAST('true' AS bool), 'maybe'::boolean");
    expect(['t', 'TRUE', 'ye', 'on', '1', ' yes '].map(pgBoolean)).toEqual(['true', 'true', 'true', 'true', 'true', 'true']);
    expect(['f', 'no', 'of', 'off', '0'].map(pgBoolean)).toEqual(['false', 'false', 'false', 'false', 'false']);
    expect(['o', '', 'tr ue', '2'].map(pgBoolean)).toEqual([null, null, null, null]);
  });

  it('generate_series of integers gives integers, in FROM and in the select list', () => {
    expect(rw('SELECT i FROM generate_series(1, 4) AS g(i)')).toBe(
      'SELECT i FROM (SELECT CAST(generate_series AS INTEGER) AS generate_series FROM generate_series(1, 4)) AS g(i)',
    );
    expect(rw('SELECT * FROM generate_series(1, 3)')).toBe(
      'SELECT * FROM (SELECT CAST(generate_series AS INTEGER) AS generate_series FROM generate_series(1, 3)) AS generate_series',
    );
    expect(rw('SELECT generate_series(1, 3)')).toBe('SELECT unnest(CAST(generate_series(1, 3) AS INTEGER[]))');
    expect(rw('SELECT generate_series(1, 3000000000)')).toBe('SELECT unnest(generate_series(1, 3000000000))');
  });
});

describe('PostgreSQL’s answers where DuckDB’s differ', () => {
  it('gives an array subscript only when it is 1 or more, as a subscript below the first element is NULL', () => {
    expect(rw('SELECT a[-1], a[i + 1], a[(-1)], a[2] FROM t')).toBe(
      `SELECT a[${P}.cot_subscript(-1)], a[${P}.cot_subscript(i + 1)], a[${P}.cot_subscript((-1))], a[2] FROM t`,
    );
    // Slices are left as written.
    expect(rw('SELECT a[1:2] FROM t')).toBe('SELECT a[1:2] FROM t');
  });

  it('names the type of an untyped literal unknown, through a NULL', () => {
    expect(rw("SELECT pg_typeof('abc'), pg_typeof('abc'::text)")).toBe(`SELECT ${P}.pg_typeof(NULL), ${P}.pg_typeof('abc'::text)`);
  });

  it('holds a numeric literal at its own digits, and reads one DuckDB would read as a double from its text', () => {
    expect(rw("SELECT 1.23456789012345678901::numeric, '1e-20'::numeric, 1e-20, 1e300::float8")).toBe(
      "SELECT '1.23456789012345678901'::DECIMAL(21,20), '0.00000000000000000001'::DECIMAL(20,20), CAST('0.00000000000000000001' AS DECIMAL(20,20)), '1e300'::float8",
    );
  });
});

describe('positions', () => {
  it('maps a position in the rewritten text back to the client’s', () => {
    const sql = 'SELECT a / b FROM t WHERE zz';
    const out = rewriter.rewriteMapped(new ParsedStatement(sql, tokenize(sql)));
    const at = (text: string, word: string): number => text.indexOf(word) + 1;
    expect(out.clientPosition(at(out.text, 'zz'))).toBe(at(sql, 'zz'));
    expect(out.clientPosition(at(out.text, 'cot_div'))).toBe(at(sql, 'a'));
    expect(out.clientPosition(1)).toBe(1);
  });
});

describe('jsonb columns, as their tables declare them', () => {
  const jsonb = new Map([
    ['t', new Set(['j'])],
    ['o', new Set(['meta'])],
  ]);
  const rwj = (sql: string): string => rewriter.rewriteMapped(new ParsedStatement(sql, tokenize(sql)), null, jsonb).text;

  it('merge with || and read with -> and #> as jsonb, qualified or not', () => {
    expect(rwj('SELECT j || j FROM t')).toBe(`SELECT ${P}.cot_jsonb_concat(j , j) FROM t`);
    // Beside a column of a type the rewrite does not know, text's || or jsonb's, chosen by its witness.
    expect(rwj('SELECT o.meta || x FROM orders o')).toBe(`SELECT ${P}.cot_jsonb_concat_before(o.meta , x, "x") FROM orders o`);
    expect(rwj("SELECT j -> 'n', j ->> 'n' FROM t")).toBe(`SELECT ${P}.cot_jsonb_arrow(j , 'n'), ${P}.cot_jsonb_arrow_text(j , 'n') FROM t`);
    expect(rwj("SELECT j #>> '{a,0}' FROM t")).toBe(`SELECT ${P}.cot_jsonb_path_text(j , '$."a"[0]', '["a","0"]') FROM t`);
    expect(rwj("SELECT (j -> 'a') || (j -> 'b') FROM t")).toContain('cot_jsonb_concat(');
  });

  it('leave a column of another table, and text, to text concatenation', () => {
    // Which of two columns is text only the engine knows: the pair is chosen by both witnesses (rewrite/casts.ts).
    expect(rwj('SELECT x.j || j2 FROM other x')).toBe(`SELECT ${P}.cot_concat_pair(x.j , j2, "x"."j", "j2") FROM other x`);
    // Text's || (a double beside text printed as PostgreSQL prints it, rewrite/casts.ts), not jsonb's.
    expect(rwj("SELECT name || 'x' FROM t")).toBe(`SELECT ${P}.cot_concat_operand(name, "name") || 'x' FROM t`);
  });
});

describe('jsonb text read as a binary number', () => {
  const jsonb = new Map([['t', new Set(['j'])]]);
  const rwj = (sql: string): string => rewriter.rewriteMapped(new ParsedStatement(sql, tokenize(sql)), null, jsonb).text;

  it("stays DuckDB's ->>, whose double is the same value, and only there", () => {
    const cast = rwj("SELECT sum((j ->> 'n')::float8), (j ->> 'c')::int FROM t");
    expect(cast).not.toContain('cot_jsonb_arrow_text');
    expect(cast).toContain("((j ->> 'n'))");
    expect(cast).toContain("((j ->> 'c'))");
    expect(rwj("SELECT (j ->> 'n')::numeric FROM t")).toContain('cot_jsonb_arrow_text(');
    expect(rwj("SELECT (j #>> '{a,b}')::float8 FROM t")).toContain('json_extract_string(j , \'$."a"."b"\')');
  });
});

describe('SKIP LOCKED', () => {
  it('leaves out rows other sessions lock before the LIMIT, and locks what is returned after it', () => {
    expect(rw("SELECT id FROM public.job WHERE state = 'created' ORDER BY id LIMIT 2 FOR UPDATE SKIP LOCKED")).toBe(
      "SELECT * EXCLUDE (cot_rowid) FROM (SELECT id , \"job\".cot_rowid FROM (SELECT *, rowid AS cot_rowid FROM main.job WHERE cot_row_free('public.job', rowid, 'exclusive')) AS \"job\" WHERE state = 'created' ORDER BY id LIMIT 2 ) AS cot_locked WHERE cot_row_take('public.job', cot_rowid, 'exclusive')",
    );
    // Inside a subquery, with an alias and a star: the star brings the row's id already.
    expect(rw('DELETE FROM job WHERE id = (SELECT j.* FROM main.job AS j LIMIT 1 FOR SHARE OF j SKIP LOCKED)')).toBe(
      "DELETE FROM job WHERE id = (SELECT * EXCLUDE (cot_rowid) FROM (SELECT j.* FROM (SELECT *, rowid AS cot_rowid FROM main.job WHERE cot_row_free('public.job', rowid, 'shared')) AS j LIMIT 1 ) AS cot_locked WHERE cot_row_take('public.job', cot_rowid, 'shared'))",
    );
  });
});

describe('NULL constants as operands', () => {
  it('wraps a NULL cast or a constant jsonb path that an operator or a function takes, inside any macro around it', () => {
    expect(rw('SELECT right(NULL::text, 2), (NULL::int4[])[1], length(s || NULL::text) FROM t')).toBe(
      'SELECT right((SELECT NULL::text), 2), ((SELECT NULL::int4[]))[1], CAST(length(s || (SELECT NULL::text)) AS INTEGER) FROM t',
    );
    expect(rw('SELECT NULL::numeric - 1.5')).toBe(`SELECT ${P}.cot_minus((SELECT NULL::DECIMAL(38,9)) , 1.5, CAST(NULL AS DECIMAL(38,9)), 1.5)`);
    expect(rw(`SELECT 'x' || ('{}'::jsonb ->> 'k')`)).toBe(`SELECT 'x' || ((SELECT ${P}.cot_jsonb_arrow_text('{}'::JSON , 'k')))`);
  });

  it('leaves a NULL that nothing operates on, a path over a column and DDL as they are', () => {
    expect(rw('SELECT NULL::text AS a, length(s) FROM t')).toBe('SELECT NULL::text AS a, CAST(length(s) AS INTEGER) FROM t');
    expect(rw("CREATE TABLE n (a text DEFAULT NULL::text || 'x')")).not.toContain('SELECT');
  });
});
