import { describe, expect, it } from 'vitest';
import { intervalText, pgTextOf } from '../../../src/engine/pg-text.js';

// Each left side is DuckDB's text of the value (a cast to VARCHAR), each right side PostgreSQL 15's text of the same value.
describe('PostgreSQL text of DuckDB values', () => {
  it('prints a list as an array, quoted as array_out quotes', () => {
    expect(pgTextOf("['a,b', c, NULL, '', 'NULL', x y, ' lead', 'q\"t', 'ap\\'s', b\\s, '[x]', '{y}']", 'VARCHAR[]')).toBe(
      '{"a,b",c,NULL,"","NULL","x y"," lead","q\\"t",ap\'s,"b\\\\s",[x],"{y}"}',
    );
    expect(pgTextOf('[1.0, 2.5, NULL]', 'DOUBLE[]')).toBe('{1,2.5,NULL}');
    expect(pgTextOf('[[1, 2], [3, 4]]', 'INTEGER[][]')).toBe('{{1,2},{3,4}}');
    expect(pgTextOf('[1.500000000]', 'DECIMAL(38,9)[]')).toBe('{1.5}');
    expect(pgTextOf("['2024-01-01 10:00:00']", 'TIMESTAMP[]')).toBe('{"2024-01-01 10:00:00"}');
    expect(pgTextOf('[true, false]', 'BOOLEAN[]')).toBe('{t,f}');
    expect(pgTextOf('[]', 'INTEGER[]')).toBe('{}');
    expect(pgTextOf('[{"a": 1, "b": [1,2]}, null]', 'JSON[]')).toBe('{"{\\"a\\": 1, \\"b\\": [1,2]}","null"}');
  });

  it('prints an interval in IntervalStyle postgres', () => {
    expect(intervalText('1 year 2 months')).toBe('1 year 2 mons');
    expect(intervalText('1 month -1 day')).toBe('1 mon -1 days');
    expect(intervalText('-3 days 00:00:01.5')).toBe('-3 days +00:00:01.5');
    expect(intervalText('-01:00:00')).toBe('-01:00:00');
    expect(intervalText('00:00:00')).toBe('00:00:00');
    expect(intervalText('-1 year -2 months')).toBe('-1 years -2 mons');
    expect(pgTextOf('[1 year 2 months, 1 month -1 day, -01:00:00]', 'INTERVAL[]')).toBe('{"1 year 2 mons","1 mon -1 days",-01:00:00}');
  });
});
