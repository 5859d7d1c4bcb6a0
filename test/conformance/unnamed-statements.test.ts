import { describe, expect, it } from 'vitest';
import { chainOf, chainProblems, countOf, sqlstate, useConformanceServer } from '../fixtures/conformance.js';

/**
 * Drivers send a query with parameters as an unnamed Parse, Bind, Execute
 * and Sync, the same text again and again. Whatever the server keeps of an
 * earlier Parse, each one answers as if the text were planned afresh: after
 * DDL (its own or another connection's), in a failed transaction, and for
 * appends.
 */
const s = useConformanceServer();

const fieldsOf = (r: { fields: Array<{ name: string }> }): string[] => r.fields.map((f) => f.name);

describe('a repeated unnamed statement', () => {
  it('answers each Bind with its own parameters', async () => {
    const c = await s.fresh();
    await c.query('CREATE TABLE us_params (id int PRIMARY KEY, v text)');
    await c.query("INSERT INTO us_params SELECT i, 'v' || i FROM generate_series(1, 20) AS g(i)");
    for (let i = 1; i <= 20; i++) {
      const r = await c.query('SELECT v FROM us_params WHERE id = $1', [i]);
      expect(r.rows).toEqual([{ v: `v${i}` }]);
    }
    await c.end();
  });

  it('returns the columns a table has after this connection altered it', async () => {
    const c = await s.fresh();
    await c.query('CREATE TABLE us_alter (a int)');
    await c.query('INSERT INTO us_alter VALUES (1)');
    const before = await c.query('SELECT * FROM us_alter WHERE a = $1', [1]);
    expect(fieldsOf(before)).toEqual(['a']);
    await c.query("ALTER TABLE us_alter ADD COLUMN b text DEFAULT 'x'");
    const after = await c.query('SELECT * FROM us_alter WHERE a = $1', [1]);
    expect(fieldsOf(after)).toEqual(['a', 'b']);
    expect(after.rows).toEqual([{ a: 1, b: 'x' }]);
    // The same text without parameters goes as a simple query, and is planned afresh too.
    await c.query('ALTER TABLE us_alter ADD COLUMN c int DEFAULT 7');
    expect(fieldsOf(await c.query('SELECT * FROM us_alter'))).toEqual(['a', 'b', 'c']);
    await c.query('ALTER TABLE us_alter DROP COLUMN b');
    expect(fieldsOf(await c.query('SELECT * FROM us_alter'))).toEqual(['a', 'c']);
    await c.end();
  });

  it('sees another connection drop and recreate the table it reads', async () => {
    const a = await s.fresh();
    const b = await s.fresh();
    await a.query('CREATE TABLE us_other (v text)');
    await a.query("INSERT INTO us_other VALUES ('first')");
    expect((await a.query('SELECT v FROM us_other WHERE $1::int = 1', [1])).rows).toEqual([{ v: 'first' }]);
    await b.query('DROP TABLE us_other');
    expect(await sqlstate(a.query('SELECT v FROM us_other WHERE $1::int = 1', [1]))).toBe('42P01');
    await b.query('CREATE TABLE us_other (v text, w int)');
    await b.query("INSERT INTO us_other VALUES ('second', 2)");
    expect((await a.query('SELECT v FROM us_other WHERE $1::int = 1', [1])).rows).toEqual([{ v: 'second' }]);
    await a.end();
    await b.end();
  });

  it('is refused in a failed transaction with 25P02, and answers again after ROLLBACK', async () => {
    const c = await s.fresh();
    const text = 'SELECT $1::int + 1 AS n';
    expect((await c.query(text, [1])).rows).toEqual([{ n: 2 }]);
    await c.query('BEGIN');
    expect((await c.query(text, [2])).rows).toEqual([{ n: 3 }]);
    expect(await sqlstate(c.query('SELECT 1 / 0'))).toBe('22012');
    expect(await sqlstate(c.query(text, [3]))).toBe('25P02');
    await c.query('ROLLBACK');
    expect((await c.query(text, [4])).rows).toEqual([{ n: 5 }]);
    await c.end();
  });

  it('appends one chained step per execution', async () => {
    const c = await s.fresh();
    for (let i = 0; i < 12; i++) {
      await c.query("INSERT INTO _cot_steps (session_id, step_type, content) VALUES ($1, 'Observation', $2)", ['us-append', `step ${i}`]);
    }
    expect(await countOf(c, 'SELECT count(*) FROM _cot_steps WHERE session_id = $1', ['us-append'])).toBe(12);
    const links = await chainOf(c, 'us-append');
    expect(links.map((l) => l.step_index)).toEqual([...Array(12).keys()]);
    expect(chainProblems(links)).toEqual([]);
    await c.end();
  });

  it('answers right after a hundred other texts went through the same connection', async () => {
    const c = await s.fresh();
    const first = 'SELECT $1::int * 2 AS n';
    expect((await c.query(first, [21])).rows).toEqual([{ n: 42 }]);
    for (let i = 0; i < 100; i++) expect((await c.query(`SELECT $1::int + ${i} AS n`, [1])).rows).toEqual([{ n: 1 + i }]);
    expect((await c.query(first, [5])).rows).toEqual([{ n: 10 }]);
    await c.end();
  });
});
