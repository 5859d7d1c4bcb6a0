import { CHECKPOINTS_TABLE } from '../../../ledger/log/checkpoint-schema.js';
import { functionGrantees, PG_SCHEMA, type PgRoles } from '../ledger/names.js';
import { quoteIdent, STEPS_TABLE } from '../../../ledger/chain/schema.js';

/**
 * The global log's proofs in PostgreSQL: the RFC 6962 recursions of
 * merkle.ts, in PL/pgSQL over `cotwire.log_nodes`, where every complete
 * subtree is one row found by its position (merkle-log.ts, positionOf). So
 * a client asks any instance, or PostgreSQL directly, and gets the same
 * proofs: cot_log_root(n), cot_inclusion_proof(index, n),
 * cot_consistency_proof(old, new) (base64 hashes, space-separated), and
 * the tables cot_checkpoint(), cot_prove(trace) and cot_consistency(old, new).
 */

const S = PG_SCHEMA;

const FUNCTIONS: ReadonlyArray<{ readonly signature: string; readonly sql: string }> = [
  {
    signature: `${S}.log_node(int, bigint)`,
    sql: `CREATE OR REPLACE FUNCTION ${S}.log_node(level int, idx bigint) RETURNS bytea LANGUAGE sql STABLE STRICT SET search_path = pg_catalog, pg_temp AS $$
  SELECT hash FROM ${S}.log_nodes WHERE position = (
    SELECT 2 * m - pg_catalog.bit_count(m::bit(64)) + level FROM (SELECT (idx + 1) * (1::bigint << level) - 1 AS m) AS x)
$$`,
  },
  {
    signature: `${S}.log_range(bigint, bigint)`,
    sql: `CREATE OR REPLACE FUNCTION ${S}.log_range(start bigint, stop bigint) RETURNS bytea LANGUAGE plpgsql STABLE STRICT SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  n bigint := stop - start;
  k bigint := 1;
BEGIN
  IF n & (n - 1) = 0 AND start % n = 0 THEN
    RETURN ${S}.log_node((pg_catalog.log(2, n::numeric))::int, start / n);
  END IF;
  WHILE k * 2 < n LOOP k := k * 2; END LOOP;
  RETURN pg_catalog.sha256('\\x01'::bytea || ${S}.log_range(start, start + k) || ${S}.log_range(start + k, stop));
END
$$`,
  },
  {
    signature: `${S}.log_size()`,
    sql: `CREATE OR REPLACE FUNCTION ${S}.log_size() RETURNS bigint LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$ SELECT size FROM ${S}.log_head $$`,
  },
  {
    signature: 'public.cot_log_root(bigint)',
    sql: `CREATE OR REPLACE FUNCTION public.cot_log_root(n bigint) RETURNS text LANGUAGE sql STABLE STRICT SET search_path = pg_catalog, pg_temp AS $$
  SELECT CASE WHEN n < 0 OR n > ${S}.log_size() THEN NULL
              WHEN n = 0 THEN pg_catalog.encode(pg_catalog.sha256(''::bytea), 'base64')
              ELSE pg_catalog.encode(${S}.log_range(0, n), 'base64') END
$$`,
  },
  {
    signature: 'public.cot_inclusion_proof(bigint, bigint)',
    sql: `CREATE OR REPLACE FUNCTION public.cot_inclusion_proof(idx bigint, n bigint) RETURNS text LANGUAGE plpgsql STABLE STRICT SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  path text[] := '{}';
  m bigint := idx;
  start bigint := 0;
  stop bigint := n;
  k bigint;
BEGIN
  IF idx < 0 OR idx >= n OR n > ${S}.log_size() THEN RETURN NULL; END IF;
  -- From the root down; each sibling goes before those found above it (the path runs from the leaf up).
  WHILE stop - start > 1 LOOP
    k := 1;
    WHILE k * 2 < stop - start LOOP k := k * 2; END LOOP;
    IF m < k THEN
      path := pg_catalog.encode(${S}.log_range(start + k, stop), 'base64') || path;
      stop := start + k;
    ELSE
      path := pg_catalog.encode(${S}.log_range(start, start + k), 'base64') || path;
      m := m - k;
      start := start + k;
    END IF;
  END LOOP;
  RETURN pg_catalog.array_to_string(path, ' ');
END
$$`,
  },
  {
    signature: 'public.cot_consistency_proof(bigint, bigint)',
    sql: `CREATE OR REPLACE FUNCTION public.cot_consistency_proof(older bigint, newer bigint) RETURNS text LANGUAGE plpgsql STABLE STRICT SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  proof text[] := '{}';
  m bigint := older;
  start bigint := 0;
  stop bigint := newer;
  complete boolean := true;
  k bigint;
BEGIN
  IF older <= 0 OR older > newer OR newer > ${S}.log_size() THEN RETURN NULL; END IF;
  LOOP
    IF m = stop - start THEN
      IF NOT complete THEN proof := pg_catalog.encode(${S}.log_range(start, stop), 'base64') || proof; END IF;
      EXIT;
    END IF;
    k := 1;
    WHILE k * 2 < stop - start LOOP k := k * 2; END LOOP;
    IF m <= k THEN
      proof := pg_catalog.encode(${S}.log_range(start + k, stop), 'base64') || proof;
      stop := start + k;
    ELSE
      proof := pg_catalog.encode(${S}.log_range(start, start + k), 'base64') || proof;
      m := m - k;
      start := start + k;
      complete := false;
    END IF;
  END LOOP;
  RETURN pg_catalog.array_to_string(proof, ' ');
END
$$`,
  },
];

const hashes = (expr: string): string => `CASE WHEN (${expr}) = '' THEN '{}'::text[] ELSE pg_catalog.string_to_array(${expr}, ' ') END`;
const LATEST = `SELECT origin, tree_size, root_hash, checkpoint, created_at FROM public.${quoteIdent(CHECKPOINTS_TABLE)} ORDER BY ledger_seq DESC LIMIT 1`;

const TABLES: ReadonlyArray<{ readonly signature: string; readonly sql: string }> = [
  {
    signature: 'public.cot_checkpoint()',
    sql: `CREATE OR REPLACE FUNCTION public.cot_checkpoint() RETURNS TABLE (checkpoint text, origin text, tree_size bigint, root_hash text, issued_at timestamptz)
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$ SELECT checkpoint, origin, tree_size, root_hash, created_at FROM (${LATEST}) AS c $$`,
  },
  {
    signature: 'public.cot_prove(text)',
    sql: `CREATE OR REPLACE FUNCTION public.cot_prove(trace text) RETURNS TABLE (trace_id uuid, session_id text, step_index integer, ledger_seq bigint, leaf_index bigint, tree_size bigint, inclusion_proof text[], root_hash text, checkpoint text)
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
  SELECT s.trace_id, s.session_id, s.step_index, s.ledger_seq, s.ledger_seq - 1, c.tree_size,
    CASE WHEN s.ledger_seq <= c.tree_size THEN ${hashes('public.cot_inclusion_proof(s.ledger_seq - 1, c.tree_size)')} END,
    c.root_hash, c.checkpoint
  FROM public.${quoteIdent(STEPS_TABLE)} s LEFT JOIN (${LATEST}) c ON true
  WHERE s.trace_id = $1::uuid
$$`,
  },
  {
    signature: 'public.cot_consistency(bigint, bigint)',
    sql: `CREATE OR REPLACE FUNCTION public.cot_consistency(older bigint, newer bigint) RETURNS TABLE (old_size bigint, new_size bigint, old_root text, new_root text, consistency_proof text[])
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  p text := public.cot_consistency_proof($1, $2);
BEGIN
  IF p IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = '22023',
      MESSAGE = format('no consistency proof from %s to %s leaves: sizes must satisfy 0 <= old_size <= new_size <= the log''s size', $1, $2);
  END IF;
  RETURN QUERY SELECT $1, $2, public.cot_log_root($1), public.cot_log_root($2), ${hashes('p')};
END
$$`,
  },
];

/** The statements that (re)create the proof functions, run as the owner, with EXECUTE for the client and writer roles. */
export function pgProofFunctions(roles: PgRoles): string[] {
  const out: string[] = [];
  for (const f of [...FUNCTIONS, ...TABLES]) {
    out.push(f.sql, `REVOKE ALL ON FUNCTION ${f.signature} FROM PUBLIC`, `GRANT EXECUTE ON FUNCTION ${f.signature} TO ${functionGrantees(roles)}`);
  }
  return out;
}
