import { PgError } from '../../../errors/pg-error.js';
import { SqlState } from '../../../errors/sqlstate.js';
import { functionGrantees, PG_SCHEMA, type PgRoles } from '../ledger/names.js';
import { pgSearchFunctions } from '../search/search-sql.js';
import { REDACTED_TEXT, redactableColumns, unredactable } from '../../../ledger/erasure/redactions.js';
import { retainable } from '../../../ledger/erasure/retention-sql.js';
import {
  HASH_VERSION_V2,
  HASH_VERSION_V3,
  committedPlaces,
  quoteIdent,
  quoteLiteral,
  SALT_COLUMN,
  type LedgerColumn,
  type LedgerTable,
} from '../../../ledger/chain/schema.js';
import { BREAK_CTES, BREAK_ORDER, gapCtes, verdictColumns, verifyMacroName } from '../../../ledger/chain/verdict-sql.js';
import { LOG_EVENTS_TABLE } from '../../../ledger/log/log-events.js';
import { pgAnalyticsFunctions } from './analytics-sql.js';

/**
 * The README's hash specification in PostgreSQL's SQL: each column's
 * canonical text (the text DuckDB's CAST(... AS VARCHAR) gives, which the
 * writer hashes), so that PostgreSQL recomputes every hash with its own
 * sha256() and a chain verifies the same on either engine.
 */

/**
 * A ledger INSERT's rows are evaluated by a SELECT, which a read-only
 * transaction runs: this check, a one-time filter of that SELECT, fails it
 * as PostgreSQL fails the INSERT itself (25006), rows or none.
 */
export const WRITABLE_FUNCTION = `CREATE OR REPLACE FUNCTION ${PG_SCHEMA}.writable() RETURNS boolean
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF pg_catalog.current_setting('transaction_read_only')::boolean THEN
    RAISE EXCEPTION 'cannot execute INSERT in a read-only transaction' USING ERRCODE = '25006';
  END IF;
  RETURN true;
END $$`;

/**
 * A double as Python's repr() writes it (the text DuckDB gives it and the
 * writer hashes): the shortest digits that read back as the same double,
 * placed by repr()'s rule (scientific below 1e-4 and from 1e16, `.0` on
 * whole numbers, at least two exponent digits). PostgreSQL's own shortest
 * text (extra_float_digits = 1, fixed for the function) leaves out a
 * candidate that lies exactly on the rounding boundary, which Python and
 * DuckDB take (1e23 is 9.999999999999999e+22 to PostgreSQL): so one digit
 * fewer is tried, rounded down and up, for as long as it still reads back
 * as the same double.
 */
export const DOUBLE_TEXT_FUNCTION = `CREATE OR REPLACE FUNCTION ${PG_SCHEMA}.double_text(x float8) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT SET extra_float_digits = 1 AS $$
DECLARE
  s text := x::text;
  sign text := '';
  mant text;
  e int := 0;
  ip text;
  fp text;
  digits text;
  point int;
  exp10 int;
  n int;
  down text;
  up text;
  up_point int;
BEGIN
  IF s = 'NaN' THEN RETURN 'nan'; END IF;
  IF s = 'Infinity' THEN RETURN 'inf'; END IF;
  IF s = '-Infinity' THEN RETURN '-inf'; END IF;
  IF left(s, 1) = '-' THEN sign := '-'; s := substr(s, 2); END IF;
  IF position('e' IN s) > 0 THEN
    mant := split_part(s, 'e', 1);
    e := split_part(s, 'e', 2)::int;
  ELSE
    mant := s;
  END IF;
  ip := split_part(mant, '.', 1);
  fp := split_part(mant, '.', 2);
  digits := ip || fp;
  point := length(ip) + e;
  WHILE length(digits) > 1 AND left(digits, 1) = '0' LOOP
    digits := substr(digits, 2);
    point := point - 1;
  END LOOP;
  digits := rtrim(digits, '0');
  IF digits = '' THEN RETURN sign || '0.0'; END IF;
  -- The value is 0.<digits> x 10^point.
  LOOP
    EXIT WHEN length(digits) <= 1;
    n := length(digits) - 1;
    down := left(digits, n);
    up := (down::numeric + 1)::text;
    up_point := point + length(up) - n;
    -- Past the largest double a candidate would not read back at all: only the one below can.
    IF up_point <= 308 AND (sign || '0.' || up || 'e' || up_point)::float8 = x THEN
      digits := rtrim(up, '0');
      point := up_point;
    ELSIF (sign || '0.' || down || 'e' || point)::float8 = x THEN
      digits := rtrim(down, '0');
    ELSE
      EXIT;
    END IF;
  END LOOP;
  exp10 := point - 1;
  IF exp10 < -4 OR exp10 >= 16 THEN
    RETURN sign || left(digits, 1) || CASE WHEN length(digits) > 1 THEN '.' || substr(digits, 2) ELSE '' END
      || 'e' || CASE WHEN exp10 < 0 THEN '-' ELSE '+' END || CASE WHEN abs(exp10) < 10 THEN '0' ELSE '' END || abs(exp10)::text;
  ELSIF point <= 0 THEN
    RETURN sign || '0.' || repeat('0', -point) || digits;
  ELSIF point >= length(digits) THEN
    RETURN sign || digits || repeat('0', point - length(digits)) || '.0';
  ELSE
    RETURN sign || left(digits, point) || '.' || substr(digits, point + 1);
  END IF;
END
$$`;

/** The SQL expression of a column's canonical text (NULL stays NULL), from its DuckDB type name. */
export function canonicalPgTextSql(column: string, type: string, alias = ''): string {
  return canonicalPgExprSql(`${alias}${quoteIdent(column)}`, type);
}

/** PostgreSQL's name of a ledger column type given by its DuckDB name. */
export function pgTypeName(type: string): string {
  const name = PG_TYPE[type];
  if (name === undefined) throw new PgError(SqlState.FeatureNotSupported, `a ledger on PostgreSQL cannot hold a column of type ${type}`);
  return name;
}

const PG_TYPE: Readonly<Record<string, string>> = {
  VARCHAR: 'text',
  JSON: 'json',
  UUID: 'uuid',
  SMALLINT: 'int2',
  INTEGER: 'int4',
  BIGINT: 'int8',
  DOUBLE: 'float8',
  BOOLEAN: 'boolean',
  'TIMESTAMP WITH TIME ZONE': 'timestamptz',
};

/** The canonical text of a value expression of a ledger column's type. */
export function canonicalPgExprSql(ref: string, type: string): string {
  switch (type) {
    case 'VARCHAR':
      return ref;
    case 'JSON':
    case 'UUID':
    case 'SMALLINT':
    case 'INTEGER':
    case 'BIGINT':
      return `${ref}::text`;
    case 'DOUBLE':
      return `${PG_SCHEMA}.double_text(${ref})`;
    case 'BOOLEAN':
      return `CASE WHEN ${ref} THEN 'true' WHEN NOT ${ref} THEN 'false' END`;
    case 'TIMESTAMP WITH TIME ZONE':
      // extract() is exact (numeric) from PostgreSQL 14.
      return `(EXTRACT(epoch FROM ${ref}) * 1000000)::int8::text`;
    default:
      throw new PgError(SqlState.FeatureNotSupported, `a ledger on PostgreSQL cannot hash a column of type ${type}`);
  }
}

/** lp() of a constant, as a bytea literal: its length and bytes are known when the SQL is written. */
function lpConst(s: string): string {
  const bytes = Buffer.from(s, 'utf8');
  const len = Buffer.alloc(8);
  len.writeBigUInt64BE(BigInt(bytes.length));
  return `'\\x${Buffer.concat([len, bytes]).toString('hex')}'::bytea`;
}

/** lp() of a text expression (the NULL mark for NULL). */
function lpSql(text: string): string {
  return `CASE WHEN ${text} IS NULL THEN '\\xffffffffffffffff'::bytea ELSE pg_catalog.int8send(pg_catalog.octet_length(pg_catalog.convert_to(${text}, 'UTF8'))::int8) || pg_catalog.convert_to(${text}, 'UTF8') END`;
}

/** A redacted column's marker as its canonical text (null: the column holds NULL), or undefined where none can be. */
function markerText(column: LedgerColumn): string | null | undefined {
  if (column.type === 'VARCHAR') return REDACTED_TEXT;
  if (column.type === 'JSON') return JSON.stringify(REDACTED_TEXT);
  return column.notNull ? undefined : null;
}

/**
 * The expression that recomputes a row's current_hash, over the ledger's
 * rows aliased `r` and, for v2, its redactions aliased `red` (one row per
 * redacted row, `d_<column>` the recorded digest).
 */
export function pgHashSql(table: LedgerTable): string {
  const v2 = table.hashVersion === HASH_VERSION_V2;
  const v3 = table.hashVersion === HASH_VERSION_V3;
  const parts = [lpConst(table.hashVersion), lpConst(table.name)];
  const places = committedPlaces(table.columns.map((c) => c.name));
  for (const c of table.columns) {
    if (c.name === 'current_hash' || (v3 && c.name === SALT_COLUMN)) continue;
    const text = canonicalPgTextSql(c.name, c.type, 'r.');
    parts.push(lpConst(c.name));
    const m = v3 ? places.get(c.name) : undefined;
    if (!v2 && m === undefined) {
      parts.push(lpSql(text));
      continue;
    }
    const computed = m !== undefined ? `pg_catalog.sha256(${pgKeySql(c.name, m)} || ${lpSql(text)})` : `pg_catalog.sha256(${lpSql(text)})`;
    const marker = unredactable(table, c.name) === null ? markerText(c) : undefined;
    if (marker === undefined) {
      parts.push(computed);
      continue;
    }
    const holds = marker === null ? `r.${quoteIdent(c.name)} IS NULL` : `${text} IS NOT DISTINCT FROM ${quoteLiteral(marker)}`;
    const digest = `red.${quoteIdent(`d_${c.name}`)}`;
    parts.push(`CASE WHEN ${digest} IS NOT NULL AND ${holds} THEN pg_catalog.decode(${digest}, 'hex') ELSE ${computed} END`);
  }
  return `pg_catalog.encode(pg_catalog.sha256(${parts.join(' || ')}), 'hex')`;
}

/**
 * A v3 committed column's 16-byte key (ledger/chain/commitments.ts), from
 * the row's salt, or from the keys its salt column lists after a redaction
 * (JSON written by the server, read here by its one shape); NULL, and so no
 * hash, for a salt column in neither form.
 */
function pgKeySql(column: string, m: number): string {
  const salt = `r.${quoteIdent(SALT_COLUMN)}`;
  const block = `${lpConst('cotwire/v3 keys')} || pg_catalog.decode(${salt}, 'hex') || pg_catalog.int4send(${Math.floor(m / 2)})`;
  const listed = `pg_catalog.substring(${salt}, ${quoteLiteral(`"${column.replace(/[^A-Za-z0-9_]/g, (ch) => `\\${ch}`)}":"([0-9a-f]{32})"`)})`;
  return `(CASE WHEN ${salt} ~ '^[0-9a-f]{32}$' THEN pg_catalog.substr(pg_catalog.sha256(${block}), ${1 + (m % 2) * 16}, 16)
    WHEN ${listed} IS NOT NULL THEN pg_catalog.decode(${listed}, 'hex') END)`;
}

/** The recorded digests of each redacted row of the ledger `r` (aliased `red`, `d_<column>` each), of one chain (`$1`) when `one`. */
function redactionsJoin(table: LedgerTable, one: boolean): string {
  const redactable = redactableColumns(table);
  if (redactable.length === 0) return '';
  const digests = redactable.map((c) => `max(value_digest) FILTER (WHERE column_name = ${quoteLiteral(c.name)}) AS ${quoteIdent(`d_${c.name}`)}`);
  return `LEFT JOIN (SELECT target_seq, ${digests.join(', ')} FROM public._cot_redactions
    WHERE ledger = ${quoteLiteral(`${table.schema}.${table.name}`)}${one ? ' AND target_chain_key = $1' : ''} GROUP BY target_seq) AS red ON red.target_seq = r.ledger_seq`;
}

/**
 * One chain's rows (`$1`, the chain key) for the server's own check
 * (ledger/chain/chain-check.ts): each column's canonical text, the recorded
 * digest of each redactable column, then where retention
 * left the chain's start (its next step_index and the hash to link to, null
 * when it removed nothing), the same on every row.
 */
export function pgChainRowsSql(table: LedgerTable): string {
  if (table.chainKey === null) throw new PgError(SqlState.InternalError, `${table.name} has no chains to read one of`);
  const texts = table.columns.map((c) => canonicalPgTextSql(c.name, c.type, 'r.'));
  const digests = redactableColumns(table).map((c) => `red.${quoteIdent(`d_${c.name}`)}`);
  const start = retainable(table)
    ? `(SELECT (max(last_step_index) + 1)::text AS steps, (array_agg(final_hash ORDER BY last_step_index DESC))[1] AS hash
         FROM public._cot_retention WHERE ledger = ${quoteLiteral(`${table.schema}.${table.name}`)} AND chain_key = $1)`
    : '(SELECT NULL::text AS steps, NULL::text AS hash)';
  const lost = `(SELECT string_agg(seqs, ',') AS seqs FROM public.${LOG_EVENTS_TABLE} WHERE kind = 'appends lost' AND seqs <> '')`;
  return `SELECT ${[...texts, ...digests, 'ret.steps', 'ret.hash', 'lost.seqs'].join(', ')}
    FROM ${table.relation ?? ''} AS r ${redactionsJoin(table, true)} CROSS JOIN ${start} AS ret CROSS JOIN ${lost} AS lost
    WHERE r.${quoteIdent(table.chainKey)}::text = $1`;
}

/**
 * Every chain of a ledger, or one (`$1`, when `one`): whether it verifies,
 * its steps, and where it first breaks. The same columns and the same
 * verdicts as the DuckDB macros (verify-sql.ts), over the same records of
 * redaction and retention, so a ledger moved between engines verifies alike.
 */
export function pgVerifySql(table: LedgerTable, one: boolean, where: string | null = null): string {
  const key = table.chainKey === null ? `''` : `r.${quoteIdent(table.chainKey)}::text`;
  const ledgerName = quoteLiteral(`${table.schema}.${table.name}`);
  const from = `${table.relation ?? ''} AS r`;
  const redactions = redactionsJoin(table, one);
  const retained =
    table.chainKey === null || !retainable(table)
      ? `LEFT JOIN (SELECT NULL::text AS chain_key, NULL::bigint AS steps, NULL::text AS hash) AS ret ON false`
      : `LEFT JOIN (SELECT chain_key, max(last_step_index) + 1 AS steps, (array_agg(final_hash ORDER BY last_step_index DESC))[1] AS hash
           FROM public._cot_retention WHERE ledger = ${ledgerName}${one ? ' AND chain_key = $1' : ''} GROUP BY chain_key) AS ret ON ret.chain_key = ${key}`;
  const first = (expr: string): string => `(array_agg(${expr} ORDER BY ${BREAK_ORDER}) FILTER (WHERE break_kind IS NOT NULL))[1]`;
  return `
WITH raw AS MATERIALIZED (
  SELECT ${key} AS chain_key, r.step_index, r.ledger_seq, r.prev_hash, r.current_hash, ${pgHashSql(table)} AS recomputed,
    lag(r.step_index) OVER w AS prev_step, lag(r.ledger_seq) OVER w AS prev_seq,
    row_number() OVER w - 1 + coalesce(ret.steps, 0) AS position,
    lag(r.current_hash, 1, coalesce(ret.hash, '')) OVER w AS expected_prev,
    coalesce(r.step_index = lag(r.step_index) OVER w, false) OR coalesce(r.step_index = lead(r.step_index) OVER w, false) AS repeated_index
  FROM ${from} ${redactions} ${retained}
  ${one && table.chainKey !== null ? `WHERE ${key} = $1` : where === null ? '' : `WHERE ${where}`}
  WINDOW w AS (PARTITION BY ${key} ORDER BY r.step_index, r.ledger_seq)
),
${gapCtes(`public.${LOG_EVENTS_TABLE}`)},
${BREAK_CTES}
SELECT chain_key,
  ${verdictColumns(first, (expr) => `${expr}::integer`)}
FROM checked
GROUP BY chain_key
ORDER BY chain_key`;
}

const VERIFY_COLUMNS = 'chain_key text, valid boolean, step_count bigint, first_broken_index integer, break_kind text, expected_hash text, actual_hash text';

/** The SQL functions of one ledger in PostgreSQL: cot_verify[_name](chain) and cot_verify[_name]_all(), and for the steps the reads. */
/** A function in `public` that runs as its owner's SQL with a fixed search_path, executable by the client and writer roles. */
function pgFunction(roles: PgRoles, fname: string, args: ReadonlyArray<readonly [string, string]>, returns: string, body: string): string[] {
  const types = `public.${fname}(${args.map(([, t]) => t).join(', ')})`;
  return [
    `CREATE OR REPLACE FUNCTION public.${fname}(${args.map(([a, t]) => `${a} ${t}`).join(', ')}) RETURNS ${returns} LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $cotwire$${body}$cotwire$`,
    `REVOKE ALL ON FUNCTION ${types} FROM PUBLIC`,
    `GRANT EXECUTE ON FUNCTION ${types} TO ${functionGrantees(roles)}`,
  ];
}

/** cot_verify(chain) and cot_verify_all() of a ledger, as PostgreSQL functions. */
export function pgVerifyFunctions(table: LedgerTable, roles: PgRoles): string[] {
  const name = verifyMacroName(table);
  return [
    ...pgFunction(roles, name, [['chain', 'text']], `TABLE (${VERIFY_COLUMNS})`, pgVerifySql(table, true)),
    ...pgFunction(roles, `${name}_all`, [], `TABLE (${VERIFY_COLUMNS})`, pgVerifySql(table, false)),
  ];
}

/** The steps ledger's analytics, cot_replay, cot_trace and cot_sessions, as PostgreSQL functions. */
export function pgStepsFunctions(table: LedgerTable, roles: PgRoles): string[] {
  const steps = table.relation ?? '';
  return [
    ...pgAnalyticsFunctions(table, roles),
    ...pgSearchFunctions(table, roles),
    ...pgFunction(roles, 'cot_replay', [['session', 'text']], `SETOF ${steps}`, `SELECT * FROM ${steps} WHERE session_id = $1 ORDER BY step_index`),
    ...pgFunction(roles, 'cot_trace', [['trace', 'text']], `SETOF ${steps}`, `SELECT * FROM ${steps} WHERE trace_id = $1::uuid`),
    ...pgFunction(
      roles,
      'cot_sessions',
      [['agent', 'text']],
      'TABLE (session_id text, step_count bigint, first_step_at timestamptz, last_step_at timestamptz, chain_valid boolean)',
      // Only the agent's own sessions are verified, not every chain in the ledger.
      `WITH v AS (${pgVerifySql(table, false, `r.session_id IN (SELECT session_id FROM ${steps} WHERE agent_id IS NOT DISTINCT FROM $1)`)})
         SELECT s.session_id, count(*)::bigint, min(s.created_at), max(s.created_at), bool_and(v.valid)
         FROM ${steps} s JOIN v ON v.chain_key = s.session_id
         WHERE s.agent_id IS NOT DISTINCT FROM $1
         GROUP BY s.session_id ORDER BY min(s.created_at)`,
    ),
  ];
}
