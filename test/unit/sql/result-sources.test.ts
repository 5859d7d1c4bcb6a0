import { loadModule } from 'libpg-query';
import { beforeAll, describe, expect, it } from 'vitest';
import { selectSources, tablesOf } from '../../../src/sql/result-sources.js';

beforeAll(async () => {
  await loadModule();
});

describe('where result columns come from', () => {
  it('names the table and column of each plain column reference, through aliases and joins', () => {
    const s = selectSources('SELECT r.name, meta, id + 1, s.*, x::jsonb FROM public.rs1 r JOIN rs2 s ON s.rs1_id = r.id');
    expect(s?.opaque).toBe(false);
    expect(s?.from).toEqual([
      { kind: 'table', key: 'r', schema: 'public', name: 'rs1' },
      { kind: 'table', key: 's', schema: null, name: 'rs2' },
    ]);
    expect(s?.targets).toEqual([
      { kind: 'column', qualifier: 'r', column: 'name' },
      { kind: 'column', qualifier: null, column: 'meta' },
      { kind: 'other' },
      { kind: 'star', qualifier: 's' },
      { kind: 'jsonb' },
    ]);
  });

  it('reads through a subquery in FROM, by the names of its columns', () => {
    const s = selectSources('SELECT n FROM (SELECT name AS n, id FROM t) q');
    expect(s?.from[0]).toMatchObject({ kind: 'subquery', key: 'q', names: ['n', 'id'] });
    expect(tablesOf(s ?? { from: [], opaque: false, merged: new Map(), plainStar: true, targets: [] })).toEqual([
      { kind: 'table', key: 't', schema: null, name: 't' },
    ]);
  });

  it('reads a column JOIN ... USING merged from the side PostgreSQL takes it from', () => {
    expect(selectSources('SELECT id FROM a JOIN b USING (id)')?.merged).toEqual(new Map([['id', ['a']]]));
    expect(selectSources('SELECT id FROM a RIGHT JOIN b USING (id)')?.merged).toEqual(new Map([['id', ['b']]]));
    expect(selectSources('SELECT id FROM a FULL JOIN b USING (id)')?.merged).toEqual(new Map([['id', []]]));
    expect(selectSources('SELECT * FROM a JOIN b USING (id)')?.plainStar).toBe(false);
  });

  it('marks what it cannot follow: functions and CTEs in FROM, NATURAL joins, renamed columns', () => {
    for (const sql of [
      'SELECT * FROM generate_series(1, 3)',
      'WITH t AS (SELECT 1 AS a) SELECT a FROM t',
      'SELECT id FROM a NATURAL JOIN b',
      'SELECT x FROM t AS u(x)',
    ]) {
      expect(selectSources(sql)?.opaque, sql).toBe(true);
    }
    expect(selectSources('SELECT 1 UNION SELECT 2')).toBeNull();
    expect(selectSources('INSERT INTO t VALUES (1)')).toBeNull();
  });
});
