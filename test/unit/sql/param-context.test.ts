import { loadModule } from 'libpg-query';
import { beforeAll, describe, expect, it } from 'vitest';
import { paramContext } from '../../../src/sql/param-context.js';

beforeAll(async () => {
  await loadModule();
});

describe('paramContext', () => {
  it("types the parameters of cotwire's sized functions as their signatures do (bigint)", () => {
    expect([...paramContext('SELECT * FROM cot_consistency($1, $2)').hints]).toEqual([
      [1, { kind: 'type', type: 'BIGINT' }],
      [2, { kind: 'type', type: 'BIGINT' }],
    ]);
    expect([...paramContext('SELECT cot_log_root($1) AS r').hints]).toEqual([[1, { kind: 'type', type: 'BIGINT' }]]);
    expect([...paramContext('SELECT cot_inclusion_proof(0, $1)').hints]).toEqual([[1, { kind: 'type', type: 'BIGINT' }]]);
  });

  it('leaves the parameters of other functions to their other contexts', () => {
    expect([...paramContext('SELECT * FROM my_macro($1, $2)').hints]).toEqual([]);
    expect([...paramContext('SELECT lower($1)').hints]).toEqual([]);
  });

  it('types an unknown bound of generate_series as the other bound, and its step beside timestamps as an interval', () => {
    expect([...paramContext('SELECT * FROM generate_series(1, $1) AS g(i)').hints]).toEqual([[1, { kind: 'type', type: 'INTEGER' }]]);
    expect([...paramContext("SELECT * FROM generate_series('2024-01-01'::timestamp, $1, $2)").hints]).toEqual([
      [1, { kind: 'type', type: 'TIMESTAMP' }],
      [2, { kind: 'type', type: 'INTERVAL' }],
    ]);
    expect([...paramContext('SELECT * FROM generate_series($1, $2)').hints]).toEqual([]);
  });

  it('still types an operand beside a literal', () => {
    expect([...paramContext('SELECT 1 + $1').hints]).toEqual([[1, { kind: 'type', type: 'INTEGER' }]]);
  });
});
