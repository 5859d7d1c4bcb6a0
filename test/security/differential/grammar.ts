/**
 * Statements generated from a grammar of DuckDB and PostgreSQL forms over
 * the security fixture's ledgers and ordinary tables, then mutated: every
 * separator-like Unicode character in the gaps, comments ended by CR, LF
 * and CRLF, case. The differential suite runs each on bare DuckDB to see
 * what it really does, and requires cotwire to refuse whatever changed a
 * ledger, a macro, the catalog database or a setting there.
 */

export { rng } from '../../fixtures/rng.js';
import { rng } from '../../fixtures/rng.js';

type Pick = <T>(xs: readonly T[]) => T;

interface Table {
  /** Ways to name it, DuckDB's string-literal names among them. */
  readonly refs: readonly string[];
  readonly text: string;
  readonly key: string;
  /** A plain row of its client columns. */
  readonly row: string;
  /** Its client columns and the chain columns, with a row that sets the chain. */
  readonly forgedColumns: string;
  readonly forgedRow: string;
}

const CHAIN = 'step_index, prev_hash, current_hash, created_at, ledger_seq';
const CHAIN_VALUES = "0, '', 'f0rged', TIMESTAMPTZ '2020-01-01 00:00:00+00', 999";

const LEDGERS: readonly Table[] = [
  {
    refs: [
      '_cot_steps',
      '"_cot_steps"',
      '_COT_STEPS',
      'main._cot_steps',
      'test.main._cot_steps',
      '"main"."_Cot_Steps"',
      "'_cot_steps'",
      "E'_cot_steps'",
      "E'\\x5fcot_steps'",
      '$$_cot_steps$$',
      "'_cot_'\n'steps'",
    ],
    text: 'content',
    key: 'id',
    row: "(9, 's9', 'forged', 1.0)",
    forgedColumns: `(id, session_id, content, confidence, ${CHAIN})`,
    forgedRow: `(9, 's9', 'forged', 1.0, ${CHAIN_VALUES})`,
  },
  {
    refs: ['"_COT_Events"', '"_cot_events"', '_cot_events', "'_COT_Events'"],
    text: 'kind',
    key: 'id',
    row: "(9, 'forged')",
    forgedColumns: `(id, kind, ${CHAIN})`,
    forgedRow: `(9, 'forged', ${CHAIN_VALUES})`,
  },
  {
    refs: ['audit._cot_x', '"audit"."_COT_X"', 'test.audit._cot_x'],
    text: 'note',
    key: 'id',
    row: "(9, 'forged')",
    forgedColumns: `(id, note, ${CHAIN})`,
    forgedRow: `(9, 'forged', ${CHAIN_VALUES})`,
  },
];

const ORDINARY: readonly Table[] = [
  { refs: ['notes', '"notes"', "'notes'"], text: 'body', key: 'id', row: "(9, 'x')", forgedColumns: '(id, body)', forgedRow: "(9, 'x')" },
  { refs: ['scratch', 'main.scratch'], text: 'v', key: 'id', row: "(9, 'x')", forgedColumns: '(id, v)', forgedRow: "(9, 'x')" },
];

const TABLE_TEMPLATES: readonly string[] = [
  'UPDATE {T} SET {C} = {S}',
  'UPDATE {T} SET {K} = {K} + 100',
  'DELETE FROM {T} WHERE {K} = 1',
  'DELETE FROM {T}',
  'DELETE FROM {T} USING notes WHERE notes.id = 1',
  'TRUNCATE {T}',
  'TRUNCATE TABLE {T}',
  'DROP TABLE {T}',
  'DROP TABLE IF EXISTS {T} CASCADE',
  'ALTER TABLE {T} ADD COLUMN z INTEGER',
  'ALTER TABLE {T} RENAME TO renamed_t',
  'ALTER TABLE {T} RENAME COLUMN {C} TO c2',
  'ALTER TABLE {T} ALTER COLUMN {C} SET DEFAULT {S}',
  'COMMENT ON TABLE {T} IS {S}',
  'MERGE INTO {T} AS m USING notes ON (m.{K} = notes.id) WHEN MATCHED THEN DELETE',
  'MERGE INTO {T} AS m USING notes ON (m.{K} = notes.id) WHEN MATCHED THEN UPDATE SET {C} = notes.body',
  'INSERT OR REPLACE INTO {T} SELECT * FROM {T}',
  'INSERT INTO {T} VALUES {R}',
  'INSERT INTO {T} {FC} VALUES {FR}',
  'INSERT INTO {T} SELECT * FROM {T}',
  'INSERT INTO {T} VALUES {R} ON CONFLICT DO NOTHING',
  'INSERT INTO {T} BY NAME SELECT 9 AS {K}',
  'CREATE OR REPLACE TABLE {T} AS SELECT 1 AS id',
  'CREATE TEMP TABLE {T} AS SELECT 1 AS id',
  'CREATE TABLE {T} AS SELECT 1 AS id',
  'CREATE VIEW {T} AS SELECT 1 AS id',
  'CREATE INDEX fz ON {T} ({K})',
  'ALTER TABLE scratch RENAME TO {T}',
  'SELECT * FROM {T}',
  'SELECT {C} FROM {T} WHERE {K} = 1',
  'SELECT count(*) FROM {T}',
  // Statements cotwire carries out itself or translates (engines/duckdb/handler/table-create.ts, engines/duckdb/catalog/serial.ts, rewrite.ts).
  'ALTER TABLE {T} ADD CONSTRAINT fz FOREIGN KEY ({K}) REFERENCES notes (id)',
  'ALTER TABLE ONLY {T} ADD FOREIGN KEY ({K}) REFERENCES notes (id) ON DELETE CASCADE',
  'ALTER TABLE {T} ADD CONSTRAINT fz_u UNIQUE ({C})',
  'ALTER TABLE {T} DROP COLUMN {C}',
  'ALTER TABLE {T} ALTER COLUMN {C} TYPE VARCHAR',
  'CREATE TABLE {T} (id serial PRIMARY KEY, v text)',
  'CREATE TABLE IF NOT EXISTS {T} (id integer GENERATED ALWAYS AS IDENTITY, v jsonb)',
  'LOCK TABLE {T} IN ACCESS SHARE MODE',
  'SELECT * FROM {T} FOR UPDATE',
  'DELETE FROM {T} WHERE {K} IN (SELECT {K} FROM {T} FOR UPDATE)',
  'UPDATE {T} SET {C} = {S} WHERE {K} = ANY(ARRAY[1, 2])',
  // Rewrites that type results (engines/duckdb/catalog/type-witness.ts, result-types.ts) and read literals, around writes.
  'UPDATE {T} SET {K} = {K} - 1',
  'DELETE FROM {T} WHERE {K} / 2 = 0',
  'UPDATE {T} SET {C} = {S} WHERE {K} = (SELECT sum({K}) - avg({K}) FROM {T})',
  'DELETE FROM {T} WHERE round({K}::double) = 1 AND extract(year FROM now()) > 0',
  "DELETE FROM {T} WHERE {C} LIKE 'a\\_%' OR 'off'::boolean",
  'UPDATE {T} SET {C} = \'{"b": 1, "a": 2}\'::jsonb::text',
  'DELETE FROM {T} t1 WHERE EXISTS (SELECT 1 FROM {T} t2 WHERE t2.{K} = t1.{K} LIMIT 1)',
  'ALTER TABLE {T} ADD COLUMN z varchar(5)',
  'ALTER TABLE {T} ADD COLUMN z char(3)',
  'ALTER TABLE {T} ALTER COLUMN {C} TYPE varchar(8)',
  'SELECT sum({K}) / count(*), {K} - 1 FROM {T} GROUP BY {K}',
];

const MACROS: readonly string[] = ['lower', 'sha256', '"SHA256"', "'lower'", "'md5'", 'main.md5', 'upper', 'cot_verify', '_cot_m', 'my_macro'];
const MACRO_TEMPLATES: readonly string[] = [
  'CREATE MACRO {M}(x) AS x',
  'CREATE OR REPLACE MACRO {M}(x) AS x',
  'CREATE TEMP MACRO {M}(x) AS x',
  'CREATE MACRO {M}() AS TABLE SELECT 1 AS x',
  'CREATE FUNCTION {M}(x) AS x',
];

const OTHER_TEMPLATES: readonly string[] = [
  'CREATE OR REPLACE VIEW cotwire_pg.pg.pg_class AS SELECT 2 AS oid',
  'DROP VIEW cotwire_pg.pg.pg_class',
  'CREATE TABLE cotwire_pg.pg.extra (x INTEGER)',
  'DETACH cotwire_pg',
  'SET threads = 1',
  "SET default_order = 'DESC'",
  'SET GLOBAL threads = 1',
  'PRAGMA threads = 1',
  "SET default_collation = 'nocase'",
  'DROP SCHEMA audit CASCADE',
  'ALTER SCHEMA audit RENAME TO audit2',
  "SELECT 'a;b', $$c;d$$",
  'SELECT 1',
];

const STRINGS: readonly string[] = ["'forged'", '$$forged$$', "E'forged'", "'a;b'", "'--'"];

/** Ways to wrap a statement: EXPLAIN in every option spelling, PREPARE, a CTE, a transaction, a string of several. */
const WRAPS: ReadonlyArray<readonly [string, string]> = [
  ['', ''],
  ['', ''],
  ['', ''],
  ['EXPLAIN ', ''],
  ['EXPLAIN ANALYZE ', ''],
  ['EXPLAIN ANALYSE ', ''],
  ['EXPLAIN (ANALYZE) ', ''],
  ['EXPLAIN (ANALYSE) ', ''],
  ['EXPLAIN ("analyze") ', ''],
  ['EXPLAIN ("ANALYZE") ', ''],
  ['EXPLAIN (ANALYZE false) ', ''],
  ['EXPLAIN (FORMAT json, ANALYZE) ', ''],
  ['EXPLAIN (FORMAT json) ', ''],
  ['PREPARE p AS ', '; EXECUTE p'],
  ['WITH c AS (SELECT 1) ', ''],
  ['BEGIN; ', '; COMMIT'],
  ['SELECT 1; ', ''],
  ['', '; SELECT 1'],
  ['', ' RETURNING *'],
  ['/* lead */ ', ' -- tail'],
];

/** Every character of Zs, Zl, Zp, Cc and Cf, with U+FEFF and U+0085 (NUL cannot reach a statement). */
export function separatorLike(): number[] {
  const out: number[] = [];
  const classes = /[\p{Zs}\p{Zl}\p{Zp}\p{Cc}\p{Cf}\u{FEFF}\u{85}]/u;
  for (let c = 1; c <= 0x10ffff; c++) {
    if (c >= 0xd800 && c <= 0xdfff) continue;
    if (classes.test(String.fromCodePoint(c))) out.push(c);
  }
  return out;
}

/** The spaces DuckDB's parser replaces before it scans, written out here rather than imported from the code under test. */
const DUCKDB_SPACES = [
  0xa0, 0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200a, 0x200b, 0x202f, 0x205f, 0x2060, 0x3000, 0xfeff,
];

/** Replaces gaps (spaces outside quotes) with `gap(i)`; returns the text and how many gaps it had. */
export function fillGaps(sql: string, gap: (index: number) => string): string {
  let out = '';
  let quote: string | null = null;
  let dollar = false;
  let n = 0;
  for (let i = 0; i < sql.length; i++) {
    const ch = sql[i] as string;
    if (quote !== null) {
      out += ch;
      if (ch === quote) quote = null;
    } else if (dollar) {
      out += ch;
      if (ch === '$' && sql[i + 1] === '$') {
        out += '$';
        i++;
        dollar = false;
      }
    } else if (ch === "'" || ch === '"') {
      quote = ch;
      out += ch;
    } else if (ch === '$' && sql[i + 1] === '$') {
      dollar = true;
      out += '$$';
      i++;
    } else if (ch === ' ') {
      out += gap(n++);
    } else {
      out += ch;
    }
  }
  return out;
}

function recase(sql: string, up: boolean): string {
  return sql
    .split(/('[^']*'|"[^"]*"|\$\$[^$]*\$\$)/)
    .map((part, i) => (i % 2 === 1 ? part : up ? part.toUpperCase() : part.toLowerCase()))
    .join('');
}

export class StatementGrammar {
  private readonly random: () => number;
  private readonly pick: Pick;
  private readonly chars: readonly number[];

  constructor(seed: number) {
    this.random = rng(seed);
    this.pick = <T>(xs: readonly T[]): T => xs[Math.floor(this.random() * xs.length)] as T;
    this.chars = separatorLike();
  }

  /** One statement: a template over a table or macro, wrapped, then mutated. */
  next(): string {
    const r = this.random();
    let body: string;
    if (r < 0.75) {
      const table = this.random() < 0.8 ? this.pick(LEDGERS) : this.pick(ORDINARY);
      body = this.pick(TABLE_TEMPLATES)
        .replaceAll('{T}', this.pick(table.refs))
        .replaceAll('{C}', table.text)
        .replaceAll('{K}', table.key)
        .replaceAll('{S}', this.pick(STRINGS))
        .replaceAll('{R}', table.row)
        .replaceAll('{FC}', table.forgedColumns)
        .replaceAll('{FR}', table.forgedRow);
    } else if (r < 0.88) {
      body = this.pick(MACRO_TEMPLATES).replaceAll('{M}', this.pick(MACROS));
    } else {
      body = this.pick(OTHER_TEMPLATES);
    }
    const [before, after] = this.pick(WRAPS);
    return this.mutate(`${before}${body}${after}`);
  }

  private mutate(sql: string): string {
    const m = this.random();
    let out = sql;
    if (m < 0.25) {
      // One separator-like character in every gap.
      const c = String.fromCodePoint(this.random() < 0.5 ? this.pick(DUCKDB_SPACES) : this.pick(this.chars));
      out = fillGaps(sql, () => c);
    } else if (m < 0.4) {
      // One in a single gap.
      const c = String.fromCodePoint(this.random() < 0.5 ? this.pick(DUCKDB_SPACES) : this.pick(this.chars));
      const gaps = fillGaps(sql, () => ' ').split(' ').length - 1;
      const at = Math.floor(this.random() * Math.max(gaps, 1));
      out = fillGaps(sql, (i) => (i === at ? c : ' '));
    } else if (m < 0.55) {
      const comment = this.pick(['--c\r', '--c\n', '--c\r\n', '/*c*/', ' /* a /* nested */ c */ ', "--it's\r"]);
      const at = Math.floor(this.random() * 6);
      out = fillGaps(sql, (i) => (i === at ? comment : ' '));
    }
    const c = this.random();
    if (c < 0.15) out = recase(out, true);
    else if (c < 0.3) out = recase(out, false);
    return out;
  }
}

/** Core attacks for the Unicode sweep: every separator-like character in their gaps. */
export const SWEEP_ATTACKS: readonly string[] = [
  'DROP TABLE _cot_steps',
  'DELETE FROM _cot_steps',
  'CREATE MACRO lower(x) AS x',
  'UPDATE "_COT_Events" SET kind = \'forged\'',
  `INSERT INTO _cot_steps (id, session_id, content, confidence, ${CHAIN}) VALUES (9, 's9', 'forged', 1.0, ${CHAIN_VALUES})`,
  'EXPLAIN ANALYSE DELETE FROM audit._cot_x',
];
