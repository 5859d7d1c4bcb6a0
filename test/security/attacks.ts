/**
 * Attacks on the append-only promise, grouped by technique. `{dir}` stands
 * for a directory next to the database (with secret.csv, forged.csv and
 * out/). `params` makes the attack use bind parameters instead of literals.
 * Every entry must really change protected state, or really touch the host,
 * on bare DuckDB: the suite checks that before it checks cotwire.
 */
export interface Attack {
  readonly technique: string;
  readonly sql: string;
  readonly params?: readonly unknown[];
  /** Generate spelling and formatting variants of this attack. */
  readonly variants?: boolean;
}

/** The characters DuckDB's parser replaces with spaces before it scans (kept literal here: tests never import the code under test for their inputs). */
const DUCKDB_SPACES = ['\u00a0', '\u2000', '\u2001', '\u2002', '\u2003', '\u2004', '\u2005', '\u2006', '\u2007', '\u2008', '\u2009', '\u200a', '\u200b', '\u202f', '\u205f', '\u2060', '\u3000', '\ufeff'];

const t = (technique: string, sql: string, extra: Partial<Attack> = {}): Attack => ({ technique, sql, ...extra });
const v = (technique: string, sql: string): Attack => ({ technique, sql, variants: true });

export const ATTACKS: readonly Attack[] = [
  // UPDATE
  v('update', "UPDATE _cot_steps SET content = 'forged'"),
  v('update', "UPDATE _cot_steps SET confidence = 1.0 WHERE id = 2"),
  v('update', 'UPDATE _cot_steps SET id = id + 100'),
  v('update', "UPDATE _cot_steps AS s SET content = n.body FROM notes n WHERE s.id = n.id"),
  v('update', "WITH src AS (SELECT 'forged' AS c) UPDATE _cot_steps SET content = (SELECT c FROM src)"),
  v('update', "UPDATE _cot_steps SET content = 'forged' RETURNING *"),
  t('update', "UPDATE \"_COT_Events\" SET kind = 'forged'"),
  t('update', "UPDATE audit._cot_x SET note = 'forged'"),
  t('update', "UPDATE \"audit\".\"_COT_X\" SET note = 'forged' WHERE id = 1"),
  t('update', 'UPDATE _cot_steps SET content = $1 WHERE id = $2', { params: ['forged', 1] }),
  t('update', 'UPDATE _cot_steps SET confidence = $1', { params: [0] }),
  // DELETE and TRUNCATE
  v('delete', 'DELETE FROM _cot_steps'),
  v('delete', 'DELETE FROM _cot_steps WHERE id = 2'),
  v('delete', 'DELETE FROM _cot_steps WHERE id IN (SELECT id FROM notes)'),
  v('delete', 'DELETE FROM _cot_steps USING notes WHERE _cot_steps.id = notes.id'),
  v('delete', 'DELETE FROM _cot_steps RETURNING id'),
  t('delete', 'DELETE FROM "_COT_Events" WHERE id = 1'),
  t('delete', 'DELETE FROM audit._cot_x'),
  t('delete', 'DELETE FROM _cot_steps WHERE session_id = $1', { params: ['s1'] }),
  v('truncate', 'TRUNCATE _cot_steps'),
  v('truncate', 'TRUNCATE TABLE _cot_steps'),
  t('truncate', 'TRUNCATE "_COT_Events"'),
  t('truncate', 'TRUNCATE TABLE audit._cot_x'),
  // MERGE
  v('merge', 'MERGE INTO _cot_steps USING notes ON (_cot_steps.id = notes.id) WHEN MATCHED THEN DELETE'),
  v('merge', "MERGE INTO _cot_steps USING notes ON (_cot_steps.id = notes.id) WHEN MATCHED THEN UPDATE SET content = notes.body"),
  t('merge', "MERGE INTO audit._cot_x t USING notes n ON t.id = n.id WHEN MATCHED THEN UPDATE SET note = n.body"),
  // DROP
  v('drop', 'DROP TABLE _cot_steps'),
  v('drop', 'DROP TABLE IF EXISTS _cot_steps'),
  v('drop', 'DROP TABLE _cot_steps CASCADE'),
  t('drop', 'DROP TABLE "_COT_Events"'),
  t('drop', 'DROP TABLE audit._cot_x'),
  t('drop', 'DROP VIEW IF EXISTS nothing_here; DROP TABLE _cot_steps'),
  t('drop', 'DROP TABLE IF EXISTS "audit"."_cot_x"'),
  // ALTER
  v('alter', 'ALTER TABLE _cot_steps ADD COLUMN forged INTEGER'),
  v('alter', 'ALTER TABLE _cot_steps DROP COLUMN confidence'),
  v('alter', 'ALTER TABLE _cot_steps RENAME COLUMN content TO thought'),
  v('alter', 'ALTER TABLE _cot_steps ALTER COLUMN confidence TYPE VARCHAR'),
  v('alter', "ALTER TABLE _cot_steps ALTER COLUMN content SET DEFAULT 'forged'"),
  v('alter', 'ALTER TABLE _cot_steps ALTER COLUMN content SET NOT NULL'),
  v('alter', 'ALTER TABLE _cot_steps RENAME TO steps_old'),
  t('alter', 'ALTER TABLE "_COT_Events" ADD COLUMN x INTEGER'),
  t('alter', 'ALTER TABLE audit._cot_x RENAME TO x_old'),
  t('alter', 'ALTER TABLE IF EXISTS audit._cot_x DROP COLUMN note'),
  v('alter', "COMMENT ON TABLE _cot_steps IS 'forged'"),
  v('alter', "COMMENT ON COLUMN _cot_steps.content IS 'forged'"),
  // Upserts
  v('upsert', "INSERT OR REPLACE INTO _cot_steps VALUES (1, 's1', 'forged', 1.0)"),
  v('upsert', "INSERT OR REPLACE INTO _cot_steps (id, session_id, content, confidence) VALUES (2, 's1', 'forged', 0.0)"),
  v('upsert', "INSERT INTO _cot_steps VALUES (1, 's1', 'forged', 1.0) ON CONFLICT (id) DO UPDATE SET content = excluded.content"),
  v('upsert', "INSERT INTO _cot_steps VALUES (1, 's1', 'forged', 1.0) ON CONFLICT DO UPDATE SET content = 'forged'"),
  t('upsert', "INSERT OR REPLACE INTO \"_COT_Events\" VALUES (1, 'forged')"),
  t('upsert', "INSERT INTO \"_COT_Events\" VALUES (1, 'forged') ON CONFLICT (id) DO UPDATE SET kind = excluded.kind"),
  t('upsert', 'INSERT INTO _cot_steps VALUES ($1, $2, $3, $4) ON CONFLICT (id) DO UPDATE SET content = excluded.content', { params: [1, 's1', 'forged', 1] }),
  t('upsert', "INSERT OR REPLACE INTO _cot_steps SELECT id, 's1', body, 1.0 FROM notes"),
  // CREATE OR REPLACE and swaps
  v('replace', 'CREATE OR REPLACE TABLE _cot_steps (id INTEGER)'),
  v('replace', 'CREATE OR REPLACE TABLE _cot_steps AS SELECT * FROM notes'),
  t('replace', 'CREATE OR REPLACE TABLE audit._cot_x (id INTEGER)'),
  t('replace', 'CREATE OR REPLACE TABLE "_COT_Events" AS SELECT 1 AS id'),
  t('swap', 'ALTER TABLE notes RENAME TO _cot_forged'),
  t('swap', 'ALTER TABLE scratch RENAME TO "_COT_Swapped"'),
  t('swap', 'DROP TABLE _cot_steps; ALTER TABLE notes RENAME TO _cot_steps'),
  t('swap', 'ALTER TABLE _cot_steps RENAME TO old_steps; ALTER TABLE notes RENAME TO _cot_steps'),
  t('swap', 'CREATE TABLE _cot_forged AS SELECT * FROM _cot_steps'),
  t('swap', "CREATE TABLE _cot_forged AS SELECT 1 AS id, 'x' AS content"),
  // Schemas
  t('schema', 'DROP SCHEMA audit CASCADE'),
  t('schema', 'DROP SCHEMA IF EXISTS audit CASCADE'),
  t('schema', 'DROP SCHEMA "AUDIT" CASCADE'),
  t('schema', 'CREATE SCHEMA evil; CREATE TABLE evil._cot_steps (id INTEGER)'),
  // SQL-level PREPARE / EXECUTE
  t('prepare', 'PREPARE p AS DELETE FROM _cot_steps; EXECUTE p'),
  t('prepare', "PREPARE p AS UPDATE _cot_steps SET content = $1; EXECUTE p('forged')"),
  t('prepare', 'PREPARE p AS TRUNCATE _cot_steps; EXECUTE p'),
  t('prepare', 'PREPARE p AS DELETE FROM _cot_steps WHERE id = $1; EXECUTE p(1)'),
  t('prepare', "PREPARE p AS INSERT OR REPLACE INTO _cot_steps VALUES (1, 's1', 'forged', 1.0); EXECUTE p"),
  t('prepare', 'PREPARE p AS DELETE FROM "_COT_Events"; EXECUTE p;'),
  // EXPLAIN ANALYZE runs what it explains
  t('explain', 'EXPLAIN ANALYZE DELETE FROM _cot_steps'),
  t('explain', "EXPLAIN ANALYZE UPDATE _cot_steps SET content = 'forged'"),
  t('explain', 'EXPLAIN ANALYZE DELETE FROM audit._cot_x'),
  // Functions and macros that other connections (and verification) rely on
  t('macro', "CREATE MACRO sha256(x) AS 'forged'"),
  t('macro', "CREATE OR REPLACE MACRO md5(x) AS 'forged'"),
  t('macro', 'CREATE MACRO lower(x) AS x'),
  t('macro', 'CREATE MACRO upper(x) AS x'),
  t('macro', 'CREATE MACRO length(x) AS 0'),
  t('macro', "CREATE FUNCTION now() AS TIMESTAMPTZ '2000-01-01'"),
  t('macro', "CREATE MACRO gen_random_uuid() AS NULL"),
  t('macro', "CREATE MACRO main.sha256(x) AS 'forged'"),
  t('macro', "CREATE TEMP MACRO sha256(x) AS 'forged'"),
  t('macro', "CREATE MACRO \"SHA256\"(x) AS 'forged'"),
  t('macro', 'CREATE MACRO _cot_steps() AS TABLE SELECT 1 AS id'),
  t('macro', 'CREATE MACRO _cot_fn(x) AS x'),
  // Objects that would shadow a ledger name
  t('shadow', 'CREATE TEMP TABLE _cot_steps AS SELECT 99 AS id'),
  t('shadow', 'CREATE TEMPORARY TABLE "_COT_Events" (id INTEGER)'),
  t('shadow', 'CREATE TEMP VIEW _cot_steps AS SELECT 99 AS id'),
  t('shadow', 'CREATE VIEW _cot_fake AS SELECT 1 AS id'),
  t('shadow', 'CREATE OR REPLACE VIEW "_COT_View" AS SELECT * FROM notes'),
  t('shadow', 'CREATE SEQUENCE _cot_seq'),
  t('shadow', "CREATE TYPE _cot_type AS ENUM ('a', 'b')"),
  // Indexes on ledgers
  t('index', 'CREATE UNIQUE INDEX forged_unique ON _cot_steps (content)'),
  t('index', 'CREATE INDEX forged_idx ON _cot_steps (session_id)'),
  t('index', 'CREATE INDEX forged_idx ON audit._cot_x (note)'),
  t('index', 'CREATE INDEX IF NOT EXISTS forged_idx ON "_COT_Events" (kind)'),
  // Attached catalogs and USE
  t('attach', "ATTACH ':memory:' AS m2"),
  t('attach', "ATTACH '{dir}/out/other.duckdb' AS other"),
  t('attach', "ATTACH '{dir}/out/other.duckdb' AS other; CREATE TABLE other._cot_steps AS SELECT 1 AS id"),
  t('use', 'USE audit'),
  // COPY, EXPORT, IMPORT
  t('copy', "COPY _cot_steps TO '{dir}/out/steps.csv'"),
  t('copy', "COPY _cot_steps FROM '{dir}/forged.csv'"),
  t('copy', "COPY (SELECT * FROM _cot_steps) TO '{dir}/out/steps.parquet' (FORMAT parquet)"),
  t('copy', "COPY notes TO '{dir}/out/notes.csv' (HEADER)"),
  t('copy', "COPY audit._cot_x FROM '{dir}/forged2.csv'"),
  t('export', "EXPORT DATABASE '{dir}/out/export'"),
  t('export', "EXPORT DATABASE '{dir}/out/export' (FORMAT parquet)"),
  // Host access through functions
  t('host', "SELECT * FROM read_csv('{dir}/secret.csv')"),
  t('host', "SELECT * FROM read_csv_auto('{dir}/secret.csv')"),
  t('host', "SELECT content FROM read_text('{dir}/secret.csv')"),
  t('host', "SELECT * FROM read_blob('{dir}/secret.csv')"),
  t('host', "SELECT * FROM '{dir}/secret.csv'"),
  t('host', "SELECT * FROM glob('{dir}/*')"),
  t('host', "SELECT * FROM sniff_csv('{dir}/secret.csv')"),
  t('host', "FROM read_csv('{dir}/secret.csv')"),
  t('host', "SELECT * FROM notes JOIN '{dir}/secret.csv' ON true"),
  t('host', "CREATE TABLE stolen AS SELECT * FROM read_csv('{dir}/secret.csv')"),
  t('host', "INSERT INTO scratch SELECT 1, content FROM read_text('{dir}/secret.csv')"),
  t('host', "INSERT INTO _cot_steps SELECT 9, 's9', content, 1.0 FROM read_text('{dir}/secret.csv')"),
  t('host', 'SELECT * FROM duckdb_settings()'),
  t('host', 'SELECT * FROM duckdb_databases()'),
  t('host', 'SELECT path FROM duckdb_databases()'),
  t('host', 'PRAGMA database_list'),
  // Global settings
  t('setting', 'SET GLOBAL threads = 1'),
  t('setting', 'SET threads = 1'),
  t('setting', "SET memory_limit = '123MB'"),
  t('setting', "SET GLOBAL memory_limit = '123MB'"),
  t('setting', "SET default_order = 'DESC'"),
  t('setting', "SET default_null_order = 'nulls_first'"),
  t('setting', "SET default_collation = 'nocase'"),
  t('setting', 'SET preserve_insertion_order = false'),
  t('setting', "SET errors_as_json = true"),
  t('setting', 'PRAGMA threads = 1'),
  t('setting', "PRAGMA memory_limit = '123MB'"),
  t('setting', "PRAGMA default_order = 'DESC'"),
  t('setting', 'PRAGMA enable_progress_bar'),
  t('setting', "SET search_path = 'audit'; DROP TABLE _cot_x"),
  // CHECKPOINT and CALL
  t('checkpoint', 'CHECKPOINT'),
  t('checkpoint', 'FORCE CHECKPOINT'),
  t('checkpoint', 'CALL checkpoint()'),
  // Transactions and multi-statement strings around a write
  t('transaction', 'BEGIN; DELETE FROM _cot_steps; COMMIT'),
  t('transaction', "BEGIN TRANSACTION; UPDATE _cot_steps SET content = 'forged'; COMMIT;"),
  t('transaction', 'START TRANSACTION; TRUNCATE _cot_steps; END'),
  t('multi', 'SELECT 1; DELETE FROM _cot_steps'),
  t('multi', 'SELECT 1;DELETE FROM _cot_steps;SELECT 2'),
  t('multi', "INSERT INTO notes VALUES (10, 'x'); UPDATE _cot_steps SET content = 'forged'"),
  // Comments, quoting, case, dollar quotes
  t('comment', 'DELETE/**/FROM/**/_cot_steps'),
  t('comment', 'DELETE -- hidden\nFROM _cot_steps'),
  t('comment', '/* leading */ DELETE FROM _cot_steps /* trailing */'),
  t('comment', '/* a /* nested */ comment */ DELETE FROM _cot_steps'),
  t('comment', "UPDATE _cot_steps SET content = 'a;b' /* ; DROP */ -- ;\n WHERE id = 1"),
  t('quoting', 'DELETE FROM "_cot_steps"'),
  t('quoting', 'DELETE FROM "_COT_STEPS"'),
  t('quoting', 'DeLeTe FrOm _CoT_sTePs'),
  t('quoting', 'DELETE FROM "main"."_cot_steps"'),
  t('quoting', 'DELETE FROM test.main._cot_steps'),
  t('quoting', 'DELETE FROM "test"."main"."_Cot_Steps"'),
  t('dollar', 'UPDATE _cot_steps SET content = $$forged$$'),
  t('dollar', 'UPDATE _cot_steps SET content = $tag$forged; DROP TABLE notes$tag$'),
  t('dollar', 'PREPARE p AS UPDATE _cot_steps SET content = $x$forged$x$; EXECUTE p'),
  // A string literal where a name goes: DuckDB reads it as the name
  t('literal', "UPDATE '_cot_steps' SET content = 'forged'"),
  t('literal', "UPDATE E'_cot_steps' SET content = 'forged'"),
  t('literal', "UPDATE E'\\x5fcot_steps' SET content = 'forged'"),
  t('literal', "UPDATE $$_cot_steps$$ SET content = 'forged'"),
  t('literal', "UPDATE '_cot_'\n'steps' SET content = 'forged'"),
  t('literal', "DELETE FROM '_cot_steps'"),
  t('literal', "TRUNCATE '_cot_steps'"),
  t('literal', "MERGE INTO '_cot_steps' USING notes ON (notes.id = 1) WHEN MATCHED THEN DELETE"),
  t('literal', "ALTER TABLE '_cot_steps' ADD COLUMN z INTEGER"),
  t('literal', "ALTER TABLE '_cot_steps' RENAME TO renamed"),
  t('literal', "ALTER TABLE notes RENAME TO '_cot_forged'"),
  t('literal', "CREATE OR REPLACE TABLE '_cot_steps' (id INTEGER)"),
  t('literal', "CREATE INDEX fz ON '_cot_steps' (id)"),
  t('literal', "COMMENT ON TABLE '_cot_steps' IS 'forged'"),
  t('literal', "CREATE TEMP TABLE '_cot_steps' AS SELECT 99 AS id"),
  t('literal', "CREATE VIEW '_cot_view' AS SELECT 1 AS id"),
  t('literal', "CREATE MACRO 'lower'(x) AS x"),
  t('literal', "CREATE MACRO 'sha256'(x) AS 'forged'"),
  // What EXPLAIN ANALYZE and PREPARE run is decided as if it came alone
  t('explain', "EXPLAIN (ANALYZE) CREATE MACRO 'lower'(x) AS x"),
  t('explain', 'EXPLAIN (ANALYSE) DROP SCHEMA audit CASCADE'),
  t('explain', 'EXPLAIN ANALYZE CREATE OR REPLACE MACRO sha256(x) AS x'),
  // cot_ names belong to cotwire's SQL functions
  t('macro', 'CREATE MACRO cot_verify(x) AS x'),
  t('macro', 'CREATE OR REPLACE TEMP MACRO cot_replay(s) AS TABLE SELECT 1 AS forged'),
  // A -- comment ends at a bare carriage return, for DuckDB as for PostgreSQL
  t('comment', "UPDATE --\r_cot_steps\n SET content = 'forged'"),
  t('comment', "CREATE MACRO --\rlower\n(x) AS x"),
  // EXPLAIN ANALYZE in every spelling runs what it explains
  t('explain', 'EXPLAIN ANALYSE DELETE FROM _cot_steps'),
  t('explain', 'EXPLAIN (ANALYSE) DELETE FROM _cot_steps'),
  t('explain', 'EXPLAIN ("analyze") DELETE FROM _cot_steps'),
  t('explain', 'EXPLAIN ("ANALYZE") DELETE FROM _cot_steps'),
  t('explain', 'EXPLAIN (ANALYZE false) DELETE FROM _cot_steps'),
  t('explain', 'EXPLAIN (FORMAT json, ANALYZE) DELETE FROM _cot_steps'),
  // DuckDB drops a trailing run of non-ASCII characters from a statement it cannot parse
  t('trailing', 'TRUNCATE TABLE _cot_steps \u00e9'),
  t('trailing', 'DROP TABLE _cot_steps\u00e9 \u00e9'),
  t('trailing', "DELETE FROM _cot_steps WHERE id = 1 OR true \u4e2d"),
  // Unicode spaces that DuckDB reads as spaces, in every gap
  ...DUCKDB_SPACES.flatMap((c) => [
    t('separator', `DROP${c}TABLE${c}_cot_steps`),
    t('separator', `DELETE${c}FROM${c}_cot_steps`),
    t('separator', `CREATE${c}MACRO${c}lower(x)${c}AS${c}x`),
    t('separator', `UPDATE${c}"_COT_Events"${c}SET${c}kind${c}=${c}'forged'`),
  ]),
];
