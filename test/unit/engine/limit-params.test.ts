import { describe, expect, it } from 'vitest';
import { limitParams } from '../../../src/engines/duckdb/adapter/limit-params.js';

describe('LIMIT and OFFSET parameters written in as literals', () => {
  it('finds them, writes the values in and renumbers the other parameters', () => {
    const sql = 'select x from t left join lateral (select * from u where u.id = t.id limit $1) v on true where t.id = $2 limit $3 offset $4';
    const shape = limitParams(sql);
    expect(shape?.limits).toEqual([1, 3, 4]);
    expect(shape?.rest).toEqual([2]);
    expect(
      shape?.text(
        new Map([
          [1, '1'],
          [3, '10'],
          [4, 'NULL'],
        ]),
      ),
    ).toBe('select x from t left join lateral (select * from u where u.id = t.id limit 1) v on true where t.id = $1 limit 10 offset NULL');
  });

  it('leaves a parameter that only looks like one inside a string or a comment', () => {
    expect(limitParams("select 'limit $1' -- limit $2\n")).toBeNull();
  });
});
