import { loadModule } from 'libpg-query';
import { beforeAll, describe, expect, it } from 'vitest';
import { catalogStatistics, scopeSizeCalls } from '../../../src/guard/catalog-statistics.js';
import { scopeLedgerReads } from '../../../src/guard/tenant-scope.js';
import { ParsedStatement } from '../../../src/sql/parsed.js';

beforeAll(async () => {
  await loadModule();
});

const columns = new Map([
  [
    'pg_class',
    [
      { name: 'oid', type: 'oid' },
      { name: 'relname', type: 'name' },
      { name: 'relpages', type: 'int4' },
      { name: 'reltuples', type: 'float4' },
    ],
  ],
  [
    'pg_stat_user_tables',
    [
      { name: 'relid', type: 'oid' },
      { name: 'relname', type: 'name' },
      { name: 'n_live_tup', type: 'int8' },
      { name: 'last_analyze', type: 'timestamptz' },
    ],
  ],
]);
const stats = catalogStatistics(['_cot'], columns);
const rewritten = (sql: string): string => {
  const r = scopeLedgerReads(new ParsedStatement(sql), stats.names, stats.predicate, stats.select);
  return 'text' in r ? r.text : `refused: ${r.refusal.message}`;
};
const sized = (sql: string): string => {
  const r = scopeSizeCalls(new ParsedStatement(sql), ['_cot']);
  return 'text' in r ? r.text : `refused: ${r.refusal.message}`;
};
const isLedger = (c: string): string => `(starts_with(${c}::text, '_cot'))`;

describe('the catalog’s counts of ledger rows, for a user with an org_id (PostgreSQL)', () => {
  it('reads pg_class with the ledgers’ row and page counts hidden, every other column and row as they are', () => {
    expect(rewritten('SELECT reltuples FROM pg_class WHERE relname = $1')).toBe(
      `SELECT reltuples FROM (SELECT "oid", "relname", CASE WHEN ${isLedger('relname')} THEN 0 ELSE "relpages" END AS "relpages", CASE WHEN ${isLedger('relname')} THEN -1::real ELSE "reltuples" END AS "reltuples" FROM pg_class WHERE true) AS pg_class WHERE relname = $1`,
    );
    // Qualified and aliased, as drivers and psql write it.
    expect(rewritten('SELECT c.relpages FROM pg_catalog.pg_class c')).toContain('FROM pg_catalog.pg_class WHERE true) c');
  });

  it('reads the activity views with the ledgers’ counters at 0, and the value statistics without the ledgers’ rows', () => {
    expect(rewritten('SELECT n_live_tup FROM pg_stat_user_tables')).toBe(
      `SELECT n_live_tup FROM (SELECT "relid", "relname", CASE WHEN ${isLedger('relname')} THEN 0 ELSE "n_live_tup" END AS "n_live_tup", "last_analyze" FROM pg_stat_user_tables WHERE true) AS pg_stat_user_tables`,
    );
    expect(rewritten('SELECT * FROM pg_stats')).toBe(`SELECT * FROM (SELECT * FROM pg_stats WHERE NOT ${isLedger('tablename')}) AS pg_stats`);
  });

  it('leaves relations of other schemas, and statements that read none of these, as they are', () => {
    expect(rewritten('SELECT * FROM public.pg_class')).toBe('SELECT * FROM public.pg_class');
    expect(rewritten('SELECT 1')).toBe('SELECT 1');
  });

  it('answers 0 for the size of a ledger and its indexes, and PostgreSQL’s size for any other relation', () => {
    expect(sized("SELECT pg_total_relation_size('_cot_steps')")).toBe(
      `SELECT (CASE WHEN (SELECT ${isLedger('c.relname')} FROM pg_catalog.pg_class c WHERE c.oid = ('_cot_steps')::regclass) THEN 0::bigint ELSE pg_total_relation_size('_cot_steps') END)`,
    );
    // The fork argument stays with the call; the relation is the first argument.
    expect(sized("SELECT pg_catalog.pg_relation_size(c.oid, 'main') FROM pg_class c")).toContain(
      "c.oid = (c.oid)::regclass) THEN 0::bigint ELSE pg_catalog.pg_relation_size(c.oid, 'main') END)",
    );
    expect(sized('SELECT pg_size_pretty(pg_table_size(x.oid)) FROM t x')).toContain('SELECT pg_size_pretty((CASE WHEN');
    expect(sized('SELECT length(x) FROM t')).toBe('SELECT length(x) FROM t');
  });
});
