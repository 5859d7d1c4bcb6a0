import { quoteIdent, quoteLiteral, type LedgerTable } from '../../../ledger/chain/schema.js';
import { EMBEDDINGS_TABLE, MAX_TEXT_CHARS } from '../../../ledger/embeddings.js';
import { pgTypeName } from '../dialect/verify-sql.js';
import { functionGrantees, PG_SCHEMA, type PgRoles } from '../ledger/names.js';

/**
 * Semantic search on a PostgreSQL engine, in SQL: `_cot_embeddings` holds
 * one vector per selected step (real[], unit length, so the cosine is the
 * inner product), written by the server's embedding worker. A query text's
 * vector is computed by the server before the statement runs and kept in
 * cotwire.query_vectors, which only the owner reads: cot_search() reaches
 * it through cotwire.query_vector(), which runs as the owner, so that one
 * client never reads what another searched for.
 */

export const VECTORS = `public.${EMBEDDINGS_TABLE}`;

/** The vector table and the query vectors, created by init. */
export function pgSearchTables(roles: PgRoles): string[] {
  const clients = [roles.reader, roles.writer, roles.admin].map(quoteIdent).join(', ');
  return [
    `CREATE TABLE IF NOT EXISTS ${VECTORS} (
       trace_id uuid PRIMARY KEY, session_id text NOT NULL, agent_id text, step_type text NOT NULL,
       step_created_at timestamptz NOT NULL, model text NOT NULL, dimensions integer NOT NULL, vector real[] NOT NULL, created_at timestamptz NOT NULL)`,
    `ALTER TABLE ${VECTORS} OWNER TO ${quoteIdent(roles.owner)}`,
    `REVOKE ALL ON ${VECTORS} FROM PUBLIC, ${clients}, ${quoteIdent(roles.server)}`,
    `GRANT SELECT ON ${VECTORS} TO ${clients}`,
    `GRANT SELECT, INSERT ON ${VECTORS} TO ${quoteIdent(roles.server)}`,
    `CREATE TABLE IF NOT EXISTS ${PG_SCHEMA}.query_vectors (query text PRIMARY KEY, vector real[] NOT NULL, made_at timestamptz NOT NULL DEFAULT pg_catalog.now())`,
    `ALTER TABLE ${PG_SCHEMA}.query_vectors OWNER TO ${quoteIdent(roles.owner)}`,
    `REVOKE ALL ON ${PG_SCHEMA}.query_vectors FROM PUBLIC, ${clients}, ${quoteIdent(roles.server)}`,
  ];
}

/** cot_search and cot_similar over the steps ledger, and their helpers that read a vector or say why there is none. */
export function pgSearchFunctions(steps: LedgerTable, roles: PgRoles): string[] {
  const relation = steps.relation ?? '';
  // The steps' own column types (a VARCHAR column is varchar in PostgreSQL), then the similarity.
  const columns = steps.columns.map((c) => `${quoteIdent(c.name)} ${c.type === 'VARCHAR' ? 'varchar' : pgTypeName(c.type)}`).join(', ');
  const returns = `TABLE (${columns}, similarity real)`;
  const grant = (signature: string): string[] => [
    `REVOKE ALL ON FUNCTION ${signature} FROM PUBLIC`,
    `GRANT EXECUTE ON FUNCTION ${signature} TO ${functionGrantees(roles)}`,
  ];
  const noQueryVector = quoteLiteral('cot_search: the query text has no vector: pass it as a literal or a parameter');
  const inner = '(SELECT sum(a * b) FROM unnest(e.vector, q.v) AS x(a, b))::real';
  return [
    `CREATE OR REPLACE FUNCTION ${PG_SCHEMA}.query_vector(query text) RETURNS real[] LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
     DECLARE v real[];
     BEGIN
       SELECT q.vector INTO v FROM ${PG_SCHEMA}.query_vectors q WHERE q.query = left(query_vector.query, ${MAX_TEXT_CHARS});
       IF v IS NULL THEN RAISE EXCEPTION USING ERRCODE = '55000', MESSAGE = ${noQueryVector}; END IF;
       RETURN v;
     END $$`,
    ...grant(`${PG_SCHEMA}.query_vector(text)`),
    `CREATE OR REPLACE FUNCTION ${PG_SCHEMA}.step_vector(trace text) RETURNS real[] LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
     DECLARE v real[];
     BEGIN
       SELECT e.vector INTO v FROM ${VECTORS} e WHERE e.trace_id = trace::uuid;
       IF v IS NULL THEN
         RAISE EXCEPTION USING ERRCODE = '22023',
           MESSAGE = format('cot_similar: step %s has no vector: it was not selected for an embedding (has_embedding is false), or is not embedded yet', trace);
       END IF;
       RETURN v;
     END $$`,
    ...grant(`${PG_SCHEMA}.step_vector(text)`),
    `CREATE OR REPLACE FUNCTION public.cot_search(query text, k integer DEFAULT 10, step_types text[] DEFAULT NULL, agent_id text DEFAULT NULL,
       session_id text DEFAULT NULL, since timestamptz DEFAULT NULL, "until" timestamptz DEFAULT NULL, min_similarity double precision DEFAULT NULL)
     RETURNS ${returns} LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $cotwire$
       SELECT s.*, h.similarity FROM (
         SELECT e.trace_id, ${inner} AS similarity
         FROM ${VECTORS} e, (SELECT ${PG_SCHEMA}.query_vector($1) AS v) AS q
         WHERE ($3 IS NULL OR e.step_type = ANY ($3)) AND ($4 IS NULL OR e.agent_id = $4) AND ($5 IS NULL OR e.session_id = $5)
           AND ($6 IS NULL OR e.step_created_at >= $6) AND ($7 IS NULL OR e.step_created_at < $7)
           AND ($8 IS NULL OR ${inner} >= $8)
         ORDER BY similarity DESC, e.trace_id LIMIT $2) AS h
       JOIN ${relation} s ON s.trace_id = h.trace_id
       ORDER BY h.similarity DESC, s.trace_id
     $cotwire$`,
    ...grant('public.cot_search(text, integer, text[], text, text, timestamptz, timestamptz, double precision)'),
    `CREATE OR REPLACE FUNCTION public.cot_similar(trace text, k integer DEFAULT 10) RETURNS ${returns} LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $cotwire$
       SELECT s.*, h.similarity FROM (
         SELECT e.trace_id, ${inner} AS similarity
         FROM ${VECTORS} e, (SELECT ${PG_SCHEMA}.step_vector($1) AS v) AS q
         WHERE e.trace_id <> $1::uuid
         ORDER BY similarity DESC, e.trace_id LIMIT $2) AS h
       JOIN ${relation} s ON s.trace_id = h.trace_id
       ORDER BY h.similarity DESC, s.trace_id
     $cotwire$`,
    ...grant('public.cot_similar(text, integer)'),
  ];
}
