import { ADVISORY_FUNCTIONS, advisoryKeySql } from '../../../sql/advisory.js';
import { COTWIRE_VERSION } from '../../../version.js';
import { catalogSetup } from './pg-catalog.js';
import { snapshotSetup } from './snapshot.js';
import { quoteLiteral as quote } from '../../../sql/identifiers.js';

export { COMPAT_CATALOG } from './pg-catalog.js';
export { CompatRewriter, type Rewritten, type TargetColumns } from './rewrite.js';

/** The PostgreSQL version cotwire presents (ParameterStatus, version(), the catalog). */
export const SERVER_VERSION = '15.0';
export const SERVER_VERSION_NUM = '150000';

/** What version() returns: PostgreSQL's shape, naming cotwire and the engine. */
export function versionString(engineVersion: string): string {
  return `PostgreSQL ${SERVER_VERSION} (cotwire ${COTWIRE_VERSION}, ${engineVersion}) on ${process.arch === 'arm64' ? 'aarch64' : 'x86_64'}-pc-linux-gnu, 64-bit`;
}

/** cotwire's own SQL functions: no client macro may take their names. */
export const COTWIRE_SQL_FUNCTIONS: readonly string[] = [
  'version',
  'current_user',
  'session_user',
  'current_database',
  'cot_role',
  'cot_agent_id',
  'cot_org_id',
];

/**
 * Statements run on each new engine connection to give it PostgreSQL's
 * face. They create TEMP objects, which live in the connection's own
 * catalog, so nothing is written to the database file and no other
 * connection is affected.
 */
export function connectionSetup(
  engineVersion: string,
  user: string,
  database: string,
  role: string,
  agentId: string | null = null,
  /**
   * The session's id and secrets, for its advisory locks and for the functions that reach the session from SQL
   * (engines/duckdb/handler/backends.ts); null on the set-up connection, which has no session.
   */
  session: { readonly id: number; readonly secret: string; readonly backend?: string } | null = null,
  /** The user's org_id (users[].org_id), or null: the catalog then shows no count of a ledger's rows, which are every organisation's. */
  orgId: string | null = null,
): string[] {
  return [
    ...(session === null ? [] : advisoryLockMacros(session.id, session.secret)),
    ...backendMacros(session?.id ?? 0, session?.backend ?? null),
    // The catalog views (pg-catalog.ts) read the connection's role through this macro.
    `CREATE OR REPLACE TEMP MACRO cot_role() AS ${quote(role)}`,
    // The agent_id the server stamps on this user's appends (users[].agent_id), or NULL.
    `CREATE OR REPLACE TEMP MACRO cot_agent_id() AS ${agentId === null ? 'CAST(NULL AS VARCHAR)' : quote(agentId)}`,
    `CREATE OR REPLACE TEMP MACRO cot_org_id() AS ${orgId === null ? 'CAST(NULL AS VARCHAR)' : quote(orgId)}`,
    `CREATE OR REPLACE TEMP MACRO version() AS ${quote(versionString(engineVersion))}`,
    // current_user, session_user and user: the authenticated user, not the engine's.
    `CREATE OR REPLACE TEMP MACRO current_user() AS ${quote(user)}`,
    `CREATE OR REPLACE TEMP MACRO session_user() AS ${quote(user)}`,
    `CREATE OR REPLACE TEMP MACRO current_database() AS ${quote(database)}`,
  ];
}

/**
 * Statements run once when the engine opens: the PostgreSQL catalog
 * (pg-catalog.ts). Its views are bound at creation, so the per-connection
 * macros they use are defined first, on the set-up connection only.
 */
export function engineSetup(): string[] {
  return [...connectionSetup('DuckDB', 'cotwire', 'cotwire', 'admin'), ...CATALOG.statements];
}

const CATALOG = snapshotSetup(catalogSetup());

/** The catalog's views, and the macros that read them: what its copy over the snapshot tables redefines (snapshot.ts). */
export const CATALOG_READERS: ReadonlySet<string> = CATALOG.readers;

/**
 * The session as the catalog's functions reach it (pg_backend_pid, statement_timestamp, set_config in a
 * query, pg_cancel_backend ...): its process ID, and the engine function cot_backend called with its secret.
 * The set-up connection, which has no session, answers NULL.
 */
function backendMacros(pid: number, secret: string | null): string[] {
  const call = secret === null ? 'CAST(NULL AS VARCHAR)' : `system.main.cot_backend(cot_op, ${pid}, ${quote(secret)}, cot_a, cot_b, cot_c)`;
  return [
    `CREATE OR REPLACE TEMP MACRO cot_backend_pid() AS CAST(${pid} AS INTEGER)`,
    `CREATE OR REPLACE TEMP MACRO cot_backend_call(cot_op, cot_a, cot_b, cot_c) AS ${call}`,
  ];
}

/**
 * pg_advisory_lock and its kin for one session: each calls the engine
 * function cot_advisory (the handler's lock table) with the session's id.
 */
function advisoryLockMacros(session: number, secret: string): string[] {
  const macros = Object.entries(ADVISORY_FUNCTIONS).map(([name, fn]) => {
    const overload = (params: string[]): string => {
      const call = `cot_advisory('${fn.op}', ${session}, ${quote(secret)}, ${advisoryKeySql(params)})`;
      const body =
        fn.returns === 'boolean'
          ? `${call} = 't'`
          : `CASE ${call} WHEN 't' THEN '' WHEN 'busy' THEN CAST(error('could not obtain lock on advisory lock: another session holds it') AS VARCHAR)
             ELSE CAST(error('advisory lock function called outside its session') AS VARCHAR) END`;
      return `(${params.join(', ')}) AS ${body}`;
    };
    return `CREATE OR REPLACE TEMP MACRO ${name}${overload(['cot_key'])}, ${overload(['cot_key1', 'cot_key2'])}`;
  });
  macros.push(
    `CREATE OR REPLACE TEMP MACRO pg_advisory_unlock_all() AS CASE cot_advisory('unlock_all', ${session}, ${quote(secret)}, '') WHEN 't' THEN '' END`,
  );
  // SELECT ... SKIP LOCKED's row locks (rewrite/queries.ts): whether no other session holds the row, and taking it.
  for (const op of ['free', 'take']) {
    macros.push(
      `CREATE OR REPLACE TEMP MACRO cot_row_${op}(cot_rel, cot_row, cot_mode) AS cot_advisory(CASE cot_mode WHEN 'shared' THEN 'row_${op}_shared' ELSE 'row_${op}' END, ${session}, ${quote(secret)}, cot_rel || '/' || CAST(cot_row AS VARCHAR)) = 't'`,
    );
  }
  return macros;
}
