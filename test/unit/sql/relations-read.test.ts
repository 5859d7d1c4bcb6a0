import { loadModule } from 'libpg-query';
import { beforeAll, describe, expect, it } from 'vitest';
import { tokenize } from '../../../src/sql/lexer.js';
import { parseOne } from '../../../src/sql/pg-tree.js';
import { readsNoLedger, type SchemaKinds } from '../../../src/sql/relations-read.js';

/** A schema with two plain tables (main.orders, audit.notes), a view over the ledger, and a macro a client made. */
const kinds: SchemaKinds = {
  isPlainTable: (name, schema) =>
    (name === 'orders' && (schema === undefined || schema === 'main')) || (name === 'notes' && (schema === undefined || schema === 'audit')),
  isFunctionMade: (name) => name === 'steps_of',
};

beforeAll(async () => {
  await loadModule();
});

const free = (sql: string): boolean => readsNoLedger(parseOne(sql), tokenize(sql), kinds);

describe('readsNoLedger: whether a query can read no ledger row', () => {
  it.each([
    'SELECT $1::varchar',
    'SELECT 1',
    'SELECT now(), version(), current_setting($1)',
    'SELECT pg_catalog.now()',
    'SELECT * FROM orders WHERE id = $1',
    'SELECT o.id, n.body FROM main.orders o JOIN audit.notes n ON n.id = o.id',
    'WITH recent AS (SELECT * FROM orders ORDER BY id DESC LIMIT 5) SELECT * FROM recent',
    'SELECT id FROM orders WHERE id IN (SELECT id FROM audit.notes)',
  ])('%s reads none', (sql) => {
    expect(free(sql)).toBe(true);
  });

  it.each([
    ['a ledger', 'SELECT * FROM _cot_steps WHERE trace_id = $1'],
    ['a ledger, quoted in capitals', 'SELECT * FROM "_COT_STEPS"'],
    ['a ledger spelled with a Unicode escape', 'SELECT * FROM U&"\\005fcot_steps"'],
    ['a ledger in a scalar subquery', 'SELECT (SELECT count(*) FROM _cot_steps)'],
    ['a ledger in a predicate', 'SELECT * FROM orders WHERE id IN (SELECT step_index FROM _cot_steps)'],
    ['a ledger by its name as a string', "SELECT pg_relation_size('_cot_steps')"],
    ['a view', 'SELECT * FROM step_view'],
    ['a table of another schema than the one it is in', 'SELECT * FROM audit.orders'],
    ['a table named with its catalog', 'SELECT * FROM memory.main.orders'],
    ['a table function', 'SELECT * FROM read_parquet($1)'],
    ['a table function in a CTE', "WITH r AS (SELECT * FROM query_table('orders')) SELECT * FROM r"],
    ['a macro a client made', "SELECT steps_of('s1')"],
    ['a function of cotwire', 'SELECT cot_status()'],
    ['a function of another schema', 'SELECT main.anything()'],
    ['a statement other than SELECT', 'INSERT INTO orders VALUES (1)'],
    ['a text PostgreSQL cannot parse', "SELECT * FROM 'orders.csv'"],
  ])('a query that reads %s may read the ledgers', (_what, sql) => {
    expect(free(sql)).toBe(false);
  });
});
