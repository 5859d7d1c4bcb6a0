import { loadModule } from 'libpg-query';
import { beforeAll, describe, expect, it } from 'vitest';
import { classify, explainExecutes, type Decision } from '../../../src/engines/duckdb/guard/classify.js';
import { ProtectedNames } from '../../../src/guard/names.js';
import type { StatementKind } from '../../../src/engine/port.js';
import { lexStatement } from '../../../src/sql/lexer.js';

const policy = { names: new ProtectedNames(), reservedFunctions: new Set(['lower', 'sha256']) };
const decide = (sql: string, kind: StatementKind): Decision => classify({ ...lexStatement(sql), kind }, policy);
const executes = (sql: string): boolean => explainExecutes(lexStatement(sql).tokens);

// The guard decides on PostgreSQL's parse tree; the server loads the parser before it serves.
beforeAll(async () => {
  await loadModule();
});

describe('whether an EXPLAIN runs its statement', () => {
  it('answers from every spelling DuckDB accepts, and fails closed on an open option list', () => {
    for (const sql of [
      'EXPLAIN ANALYZE SELECT 1',
      'EXPLAIN ANALYSE SELECT 1',
      'explain analyse verbose select 1',
      'EXPLAIN (ANALYSE) SELECT 1',
      'EXPLAIN ("analyze") SELECT 1',
      'EXPLAIN ("ANALYZE") SELECT 1',
      'EXPLAIN (ANALYZE false) SELECT 1',
      'EXPLAIN (FORMAT json, ANALYZE) SELECT 1',
      'EXPLAIN (ANALYZE',
    ]) {
      expect(executes(sql), sql).toBe(true);
    }
    for (const sql of ['EXPLAIN SELECT 1', 'EXPLAIN VERBOSE SELECT 1', 'EXPLAIN (FORMAT json) SELECT 1', "EXPLAIN SELECT 'analyze'", 'SELECT 1']) {
      expect(executes(sql), sql).toBe(false);
    }
  });

  it('decides what EXPLAIN ANALYZE and PREPARE run as if it came alone', () => {
    expect(decide('EXPLAIN ANALYZE (SELECT 1)', 'EXPLAIN').allow).toBe(true);
    expect(decide('EXPLAIN (ANALYZE, FORMAT json) DELETE FROM notes', 'EXPLAIN').allow).toBe(true);
    expect(decide('EXPLAIN ANALYZE VERBOSE DELETE FROM _cot_x', 'EXPLAIN').allow).toBe(false);
    expect(decide("EXPLAIN (ANALYZE) CREATE MACRO 'lower'(x) AS x", 'EXPLAIN').allow).toBe(false);
    expect(decide('EXPLAIN (ANALYSE) DROP SCHEMA audit CASCADE', 'EXPLAIN')).toMatchObject({
      allow: true,
      checks: [{ kind: 'schema-holds-ledger', schema: 'audit' }],
    });
    expect(decide("PREPARE p AS CREATE MACRO sha256(x) AS 'f'", 'PREPARE').allow).toBe(false);
    expect(decide('PREPARE p AS INSERT INTO _cot_x VALUES (1)', 'PREPARE')).toMatchObject({ allow: true, appendsTo: '_cot_x' });
    expect(decide('EXPLAIN (ANALYZE', 'EXPLAIN').allow).toBe(false);
  });

  it('reserves cot_ names for cotwire functions', () => {
    expect(decide('CREATE MACRO cot_verify(x) AS x', 'CREATE_FUNC').allow).toBe(false);
    expect(decide('CREATE MACRO my_verify(x) AS x', 'CREATE_FUNC').allow).toBe(true);
  });
});
