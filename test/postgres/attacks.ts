/**
 * Attacks on the append-only promise for a PostgreSQL engine, by technique.
 * Each base attack really changes a ledger (or what guards it) on a bare
 * PostgreSQL, where the test checks it before anything else; `variants`
 * then spells it in every way PostgreSQL's grammar allows: case, quoting,
 * qualification, comments and whitespace, a statement before it, and every
 * Unicode separator (which PostgreSQL, unlike DuckDB, does not take for
 * whitespace: such a variant must be refused or fail, never change a row).
 */

export interface PgAttack {
  readonly technique: string;
  readonly sql: string;
  readonly params?: readonly unknown[];
  /** Run as the ledgers' owner on the bare database (DDL that needs ownership), not as a mere writer. */
  readonly needsOwner?: boolean;
}

const a = (technique: string, sql: string, extra: Partial<PgAttack> = {}): PgAttack => ({ technique, sql, ...extra });

export const PG_ATTACKS: readonly PgAttack[] = [
  a('update', "UPDATE _cot_steps SET content = 'forged'"),
  a('update', "UPDATE _cot_steps SET content = 'forged' WHERE step_index = 1"),
  a('update', 'UPDATE _cot_steps s SET content = n.body FROM notes n WHERE s.step_index = n.id'),
  a('update', 'UPDATE _cot_steps SET content = $1 WHERE session_id = $2', { params: ['forged', 's1'] }),
  a('update', "UPDATE _cot_events SET kind = 'forged' RETURNING *"),
  a('delete', 'DELETE FROM _cot_steps'),
  a('delete', "DELETE FROM _cot_steps WHERE session_id = 's1'"),
  a('delete', 'DELETE FROM _cot_steps USING notes WHERE _cot_steps.step_index = notes.id'),
  a('delete', 'DELETE FROM ONLY _cot_events'),
  a('truncate', 'TRUNCATE _cot_steps'),
  a('truncate', 'TRUNCATE TABLE notes, _cot_events CASCADE'),
  a('cte', 'WITH d AS (DELETE FROM _cot_steps RETURNING *) SELECT count(*) FROM d'),
  a('cte', "WITH u AS (UPDATE _cot_steps SET content = 'forged' RETURNING 1) SELECT * FROM u"),
  a(
    'cte',
    "WITH i AS (INSERT INTO _cot_steps (trace_id, session_id, step_index, step_type, prev_hash, current_hash, has_embedding, created_at, ledger_seq, row_salt) VALUES (gen_random_uuid(), 's1', 99, 'Action', '', 'f', false, now(), 999, md5('f')) RETURNING 1) SELECT * FROM i",
  ),
  a(
    'insert',
    "INSERT INTO _cot_steps (trace_id, session_id, step_index, step_type, prev_hash, current_hash, has_embedding, created_at, ledger_seq, row_salt) VALUES (gen_random_uuid(), 's1', 99, 'Action', '', 'forged', false, now(), 999, md5('f'))",
  ),
  a(
    'upsert',
    "INSERT INTO _cot_events (session_id, kind, step_index, prev_hash, current_hash, created_at, ledger_seq) VALUES ('e', 'x', 5, '', 'h', now(), 50) ON CONFLICT DO NOTHING",
  ),
  // A table made from a query may read a ledger; one whose query writes it may not (PostgreSQL itself refuses that in a view).
  a('cte', 'CREATE TABLE copied AS WITH d AS (DELETE FROM _cot_steps RETURNING *) SELECT * FROM d'),
  a('merge', 'MERGE INTO _cot_steps t USING notes n ON t.step_index = n.id WHEN MATCHED THEN UPDATE SET content = n.body'),
  a(
    'merge',
    "MERGE INTO _cot_events t USING notes n ON false WHEN NOT MATCHED THEN INSERT (session_id, kind, step_index, prev_hash, current_hash, created_at, ledger_seq) VALUES ('e', 'm', 9, '', 'h', now(), 99)",
  ),
  a('drop', 'DROP TABLE _cot_steps CASCADE'),
  a('drop', 'DROP TABLE IF EXISTS _cot_events CASCADE'),
  a('drop', 'DROP INDEX _cot_steps_chain'),
  a('drop', 'DROP TRIGGER cotwire_append_only ON _cot_steps'),
  a('drop', 'DROP FUNCTION cot_verify(text)'),
  a('alter', 'ALTER TABLE _cot_steps RENAME TO old_steps'),
  a('alter', 'ALTER TABLE _cot_steps DISABLE TRIGGER cotwire_append_only'),
  a('alter', 'ALTER TABLE _cot_steps DROP COLUMN content'),
  a('alter', 'ALTER TABLE _cot_steps ALTER COLUMN content TYPE varchar(3)'),
  a('alter', 'ALTER TABLE _cot_steps RENAME COLUMN content TO body'),
  a('alter', 'ALTER TABLE _cot_events ADD COLUMN forged text'),
  a('alter', 'ALTER TABLE _cot_steps SET SCHEMA cotwire'),
  a('alter', 'ALTER TABLE _cot_steps OWNER TO CURRENT_USER'),
  // Row-level security is the second wall between organisations: lifting it is an attack.
  a('alter', 'ALTER TABLE _cot_steps DISABLE ROW LEVEL SECURITY'),
  a('alter', "COMMENT ON TABLE _cot_steps IS 'cotwire/v1'"),
  a('alter', "COMMENT ON COLUMN _cot_steps.content IS 'x'"),
  a('alter', 'ALTER INDEX _cot_steps_chain RENAME TO x'),
  a('alter', 'ALTER FUNCTION cot_verify(text) RENAME TO cot_verify_old'),
  a('rule', 'CREATE RULE forge AS ON INSERT TO _cot_events DO ALSO DELETE FROM _cot_steps'),
  a('trigger', 'CREATE TRIGGER t BEFORE INSERT ON _cot_steps FOR EACH ROW EXECUTE FUNCTION suppress_redundant_updates_trigger()'),
  a('policy', 'CREATE POLICY p ON _cot_steps USING (false)'),
  a('grant', 'GRANT ALL ON _cot_steps TO PUBLIC'),
  a('index', 'CREATE INDEX forged ON _cot_steps (content)'),
  a('select-into', 'SELECT * INTO _cot_forged FROM notes'),
  a('ctas', 'CREATE TABLE _cot_copy AS SELECT * FROM notes'),
  a('shadow', 'CREATE VIEW _cot_view AS SELECT 1 AS x'),
  a('shadow', "CREATE FUNCTION cot_verify(chain varchar) RETURNS TABLE (valid boolean) LANGUAGE sql AS 'SELECT true'"),
  a('shadow', 'CREATE TABLE child () INHERITS (_cot_steps)'),
  a('prepare', 'PREPARE p AS DELETE FROM _cot_steps; EXECUTE p'),
  a('prepare', "PREPARE q AS UPDATE _cot_steps SET content = 'forged'; EXECUTE q"),
  a('explain', 'EXPLAIN ANALYZE DELETE FROM _cot_steps'),
  a('dynamic', "DO $$ BEGIN EXECUTE 'DELETE FROM _c' || 'ot_steps'; END $$"),
  a('dynamic', "DO $$ BEGIN EXECUTE format('UPDATE %I SET content = %L', '_cot_' || 'steps', 'forged'); END $$"),
  a('dynamic', "DO $$ BEGIN EXECUTE 'TRUNCATE ' || quote_ident('_cot_events'); END $$"),
  a('function', "CREATE FUNCTION wipe() RETURNS void LANGUAGE sql AS 'DELETE FROM _cot_steps'; SELECT wipe()"),
  a('function', 'CREATE FUNCTION wipe2() RETURNS int LANGUAGE plpgsql AS $$ BEGIN DELETE FROM _cot_events; RETURN 1; END $$; SELECT wipe2()'),
  a('procedure', "CREATE PROCEDURE wipe3() LANGUAGE sql AS 'DELETE FROM _cot_steps'; CALL wipe3()"),
  a('multi', 'SELECT 1; DELETE FROM _cot_steps'),
  a('multi', 'BEGIN; DELETE FROM _cot_steps; COMMIT'),
  a('copy', String.raw`COPY _cot_events FROM PROGRAM 'echo e,x,0,\"\",h,2024-01-01,77' WITH (FORMAT csv)`),
  a('host-file', "COPY notes TO '/tmp/cotwire-attack-out'"),
  a('log', 'DELETE FROM cotwire.log_nodes'),
  a('log', 'UPDATE cotwire.log_head SET size = 12345'),
  a('log', "UPDATE cotwire.chain_heads SET current_hash = 'forged'"),
  a('log', "UPDATE cotwire.signer SET holder = 'me'"),
  a('role', 'SET ROLE postgres; DELETE FROM _cot_steps'),
  a('role', 'SET SESSION AUTHORIZATION postgres; DELETE FROM _cot_steps'),
];

/**
 * Statements that change no row but hold or rewrite a ledger (locks that
 * stall the writer, rewrites under an exclusive lock): refused too, by
 * cotwire and by PostgreSQL.
 */
export const PG_DENIALS: readonly PgAttack[] = [
  a('lock', 'LOCK TABLE _cot_steps IN ACCESS EXCLUSIVE MODE'),
  a('lock', 'LOCK TABLE cotwire.log_head'),
  a('lock', 'SELECT * FROM _cot_steps FOR UPDATE'),
  a('lock', 'SELECT * FROM cotwire.chain_heads FOR UPDATE'),
  a('maintenance', 'CLUSTER _cot_steps USING _cot_steps_chain'),
  a('maintenance', 'REINDEX TABLE _cot_steps'),
];

/** Every character Unicode counts as a space or a separator, and the zero-width ones. */
export const SEPARATORS: readonly string[] = [
  '\u00a0',
  '\u1680',
  '\u2000',
  '\u2001',
  '\u2002',
  '\u2003',
  '\u2004',
  '\u2005',
  '\u2006',
  '\u2007',
  '\u2008',
  '\u2009',
  '\u200a',
  '\u2028',
  '\u2029',
  '\u202f',
  '\u205f',
  '\u3000',
  '\u200b',
  '\u2060',
  '\ufeff',
  '\u0085',
  '\u000b',
  '\u000c',
];

/** The spellings of one attack: the statement's words recased, quoted, qualified, commented, separated. */
export function variants(attack: PgAttack): PgAttack[] {
  const out: PgAttack[] = [attack];
  const with_ = (sql: string): void => {
    if (sql !== attack.sql) out.push({ ...attack, sql });
  };
  with_(attack.sql.toLowerCase().replace(/'[^']*'/g, (m) => m));
  with_(attack.sql.replace(/\b(UPDATE|DELETE|TRUNCATE|DROP|ALTER|INSERT|MERGE|CREATE|FROM|SET|TABLE)\b/g, (w) => w[0] + w.slice(1).toLowerCase()));
  with_(attack.sql.replace(/\b_cot_(steps|events)\b/g, '"_cot_$1"'));
  with_(attack.sql.replace(/(?<![."\w])_cot_(steps|events)\b/g, 'public._cot_$1'));
  with_(attack.sql.replace(/(?<![."\w])_cot_(steps|events)\b/g, 'postgres.public._cot_$1'));
  with_(attack.sql.replace(/ /g, '/* x */ '));
  with_(attack.sql.replace(/ /g, '\n--\n'));
  with_(attack.sql.replace(/ /g, '\t'));
  with_(`/* lead */ ${attack.sql}`);
  with_(`SELECT 1; ${attack.sql}`);
  with_(attack.sql.replace(/\b_cot_(steps|events)\b/g, 'U&"\\005fcot_$1"'));
  for (const sep of SEPARATORS) {
    const i = attack.sql.indexOf(' ');
    if (i > 0) with_(`${attack.sql.slice(0, i)}${sep}${attack.sql.slice(i + 1)}`);
  }
  return out;
}
