import { loadModule } from 'libpg-query';
import { beforeAll, describe, expect, it } from 'vitest';
import { answerable, CatalogAnswers } from '../../../src/engines/duckdb/handler/catalog-mode.js';
import { tokenize } from '../../../src/sql/lexer.js';
import { ParsedStatement } from '../../../src/sql/parsed.js';

const catalog = (name: string, schema: string | undefined): boolean =>
  schema === 'information_schema' || ((schema === undefined || schema === 'pg_catalog') && name.startsWith('pg_'));
const kept = (sql: string): boolean => {
  const parsed = new ParsedStatement(sql, tokenize(sql));
  return answerable(parsed.tokens, parsed.tree, catalog, new Set(['count_orders']));
};

beforeAll(async () => {
  await loadModule();
});

describe('which catalog reads may be answered from memory', () => {
  it('keeps queries of the catalog alone, with their CTEs and parameters', () => {
    expect(kept('SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1')).toBe(true);
    expect(kept('WITH t AS (SELECT oid FROM pg_catalog.pg_type) SELECT * FROM t, information_schema.columns')).toBe(true);
  });

  it('never keeps what changes without DDL: user tables, the clock, settings, sizes, statistics, backends, the ledgers', () => {
    for (const sql of [
      'SELECT count(*) FROM pg_class, orders',
      'SELECT relname FROM pg_class WHERE relname IN (SELECT name FROM public.names)',
      'SELECT now(), relname FROM pg_class',
      "SELECT 'now'::timestamptz, relname FROM pg_class",
      "SELECT current_setting('search_path') FROM pg_namespace",
      'SELECT pg_total_relation_size(oid) FROM pg_class',
      'SELECT * FROM pg_stat_user_tables',
      'SELECT * FROM pg_locks',
      'SELECT pg_backend_pid() FROM pg_class',
      'SELECT * FROM pg_sequences',
      'SELECT * FROM cot_verify()',
      "SELECT nextval('s') FROM pg_class",
      'INSERT INTO t SELECT oid FROM pg_class',
      // A function a client made (a DuckDB macro) may read a table.
      'SELECT count_orders() FROM pg_class',
      'SELECT public.f(oid) FROM pg_class',
    ]) {
      expect(kept(sql), sql).toBe(false);
    }
  });
});

describe('answers kept per generation of the catalog', () => {
  it('drops every answer and description when the generation moves on', () => {
    const answers = new CatalogAnswers().at(1);
    answers.keep('q', [['a']]);
    answers.describe('q', { kind: 'SELECT', paramTypes: [], columns: null });
    expect(answers.answer('q')).toEqual([['a']]);
    expect(answers.at(1).answer('q')).toEqual([['a']]);
    expect(answers.at(2).answer('q')).toBeUndefined();
    expect(answers.description('q')).toBeUndefined();
  });
});
