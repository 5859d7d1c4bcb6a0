import { randomBytes } from 'node:crypto';
import type { SqlConnection } from '../../../engine/port.js';
import { PgError } from '../../../errors/pg-error.js';
import { SqlState } from '../../../errors/sqlstate.js';
import { CHECKPOINTS_DDL, CHECKPOINTS_TABLE } from '../../../ledger/log/checkpoint-schema.js';
import { AGENT_ID_SETTING, ORG_ID_SETTING, clientRoles, loginRoles, PG_LEDGER_SCHEMA, PG_SCHEMA, PG_WORKSPACE_SCHEMA, pgRoles, type PgRoles } from './names.js';
import { LedgerCatalog } from '../../../ledger/chain/catalog.js';
import { readPostgresTables } from './catalog.js';
import { DOUBLE_TEXT_FUNCTION, WRITABLE_FUNCTION } from '../dialect/verify-sql.js';
import { pgSearchTables } from '../search/search-sql.js';
import { EMBEDDINGS_TABLE } from '../../../ledger/embeddings.js';
import { ledgerFunctions } from '../../../ledger/dialect.js';
import { postgresDialect } from '../dialect/dialect.js';
import { verifyMacroName } from '../../../ledger/chain/verdict-sql.js';
import { NEW_LEDGER_HASH_VERSION } from '../../../ledger/chain/hash-version.js';
import { REDACTIONS_DDL, REDACTIONS_TABLE } from '../../../ledger/erasure/redactions.js';
import { RETENTION_DDL, RETENTION_TABLE } from '../../../ledger/erasure/retention-sql.js';
import { LOG_EVENTS_DDL, LOG_EVENTS_TABLE } from '../../../ledger/log/log-events.js';
import { HASH_VERSION_V3, type HashVersion, quoteIdent, quoteLiteral, SALT_COLUMN, STEPS_DDL, STEPS_TABLE } from '../../../ledger/chain/schema.js';
import { SECURITY_EVENTS_DDL, SECURITY_EVENTS_TABLE } from '../../../ledger/security-events.js';

/**
 * What cotwire keeps in a PostgreSQL engine, and the walls PostgreSQL itself
 * puts around the ledgers (docs/scaling.md):
 *
 * - three roles: `<prefix>_owner` (no login) owns the ledgers and cotwire's
 *   own schema; `<prefix>_writer` may INSERT into ledgers and nothing else
 *   of them; `<prefix>_client`, which every client statement runs as, may
 *   SELECT them and create tables of its own in `public`;
 * - a statement-level trigger on every ledger that refuses UPDATE, DELETE
 *   and TRUNCATE, whoever runs them;
 * - unique indexes on each chain's (key, step_index) and on ledger_seq, so
 *   that a fork or a reused sequence number cannot commit at all;
 * - `cotwire.log_head`, the one row whose lock orders every append of every
 *   instance into the global sequence, and `cotwire.log_nodes`, the global
 *   Merkle log's complete subtrees.
 *
 * Every step is idempotent: it checks whether its object exists and creates
 * it only if not, so init runs at every start and reports what it did.
 */

/** The oldest PostgreSQL whose extract(epoch) is exact (numeric) and that has sha256(). */
export const PG_MIN_VERSION = 140000;

/** The DuckDB DDL of a server ledger, in PostgreSQL's dialect and schema. */
export function postgresLedgerDdl(duckDdl: string): string {
  return duckDdl.replace(/\bmain\./, `${PG_LEDGER_SCHEMA}.`).replace(/\bDOUBLE\b/g, 'DOUBLE PRECISION');
}

/** The server's own ledgers, created by init in every PostgreSQL engine. */
export const PG_SERVER_LEDGERS: ReadonlyArray<{ readonly name: string; readonly ddl: string; readonly chainKey: string | null }> = [
  { name: STEPS_TABLE, ddl: STEPS_DDL, chainKey: 'session_id' },
  { name: CHECKPOINTS_TABLE, ddl: CHECKPOINTS_DDL, chainKey: null },
  { name: SECURITY_EVENTS_TABLE, ddl: SECURITY_EVENTS_DDL, chainKey: null },
  { name: REDACTIONS_TABLE, ddl: REDACTIONS_DDL, chainKey: null },
  { name: RETENTION_TABLE, ddl: RETENTION_DDL, chainKey: null },
  { name: LOG_EVENTS_TABLE, ddl: LOG_EVENTS_DDL, chainKey: null },
];

const qualified = (name: string): string => `${PG_LEDGER_SCHEMA}.${quoteIdent(name)}`;

/** The append-only wall PostgreSQL keeps around a ledger: its trigger, its unique indexes, its grants. */
export function ledgerWallSql(name: string, chainKey: string | null, roles: PgRoles, orgColumn = false): string[] {
  const table = qualified(name);
  const chain = chainKey === null ? 'step_index' : `${quoteIdent(chainKey)}, step_index`;
  return [
    ...(orgColumn ? organisationPolicySql(table) : []),
    `ALTER TABLE ${table} OWNER TO ${quoteIdent(roles.owner)}`,
    `CREATE OR REPLACE TRIGGER cotwire_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON ${table} FOR EACH STATEMENT EXECUTE FUNCTION ${PG_SCHEMA}.refuse_change()`,
    `CREATE UNIQUE INDEX IF NOT EXISTS ${quoteIdent(`${name}_chain`)} ON ${table} (${chain})`,
    `CREATE UNIQUE INDEX IF NOT EXISTS ${quoteIdent(`${name}_seq`)} ON ${table} (ledger_seq)`,
    ...ledgerGrantsSql(name, roles),
  ];
}

/**
 * The second wall between organisations, behind the server's own filter on
 * every ledger a scoped user reads: row-level security that shows a backend
 * started for a user with an org_id (ORG_ID_SETTING) only its organisation's
 * rows, through views and functions too. A backend without one (admins,
 * users without an org_id, the server) sees every row. The owner, which
 * redacts, is not subject to it.
 */
export function organisationPolicySql(table: string): string[] {
  const org = `pg_catalog.current_setting(${quoteLiteral(ORG_ID_SETTING)}, true)`;
  return [
    `ALTER TABLE ${table} ENABLE ROW LEVEL SECURITY`,
    `DROP POLICY IF EXISTS cotwire_organisation ON ${table}`,
    `CREATE POLICY cotwire_organisation ON ${table} USING (coalesce(${org}, '') = '' OR org_id = ${org})`,
  ];
}

/** Who may do what with a ledger: the clients' roles read it, only the server's appends to it. Run for every ledger at every start. */
export function ledgerGrantsSql(name: string, roles: PgRoles): string[] {
  const table = qualified(name);
  const clients = clientRoles(roles).map(quoteIdent).join(', ');
  return [
    `REVOKE ALL ON ${table} FROM PUBLIC, ${clients}, ${quoteIdent(roles.server)}`,
    `GRANT SELECT ON ${table} TO ${clients}`,
    `GRANT SELECT, INSERT ON ${table} TO ${quoteIdent(roles.server)}`,
  ];
}

interface Step {
  /** What it does, for the report. */
  readonly does: string;
  /** The role it creates, if any. */
  readonly role?: string;
  /** A query answering whether it is done already; absent for steps that always run and report nothing. */
  readonly done?: string;
  readonly sql: readonly string[];
}

/**
 * The ledgers' wall: UPDATE, DELETE and TRUNCATE refused, whoever runs them,
 * except UPDATE and DELETE by the owner role itself, which only the server
 * takes (SET LOCAL ROLE, for one redaction or retention transaction) and no
 * client can: clients are not its members.
 */
function refuseChange(roles: PgRoles): string {
  return `CREATE OR REPLACE FUNCTION ${PG_SCHEMA}.refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP IN ('UPDATE', 'DELETE') AND current_user = ${quoteLiteral(roles.owner)} THEN
    RETURN NULL;
  END IF;
  RAISE EXCEPTION USING
    ERRCODE = '42501',
    MESSAGE = format('cannot %s ledger table "%s": ledger tables are append-only', lower(TG_OP), TG_TABLE_NAME),
    HINT = 'Ledger tables accept SELECT and INSERT only: rows are appended and chained by the server, and are never changed or removed.';
END
$$`;
}

const roleExists = (role: string): string => `SELECT count(*) > 0 FROM pg_catalog.pg_roles WHERE rolname = ${quoteLiteral(role)}`;
const tableExists = (schema: string, name: string): string =>
  `SELECT count(*) > 0 FROM pg_catalog.pg_tables WHERE schemaname = ${quoteLiteral(schema)} AND tablename = ${quoteLiteral(name)}`;

function steps(roles: PgRoles, database: string, hashVersion: HashVersion): Step[] {
  const o = quoteIdent(roles.owner);
  const srv = quoteIdent(roles.server);
  const r = quoteIdent(roles.reader);
  const w = quoteIdent(roles.writer);
  const a = quoteIdent(roles.admin);
  const clients = `${r}, ${w}, ${a}`;
  const db = quoteIdent(database);
  const login = (role: string, what: string): Step => ({
    does: `created role ${role} (${what})`,
    role,
    done: roleExists(role),
    sql: [`CREATE ROLE ${quoteIdent(role)} LOGIN`],
  });
  const list: Step[] = [
    { does: `created role ${roles.owner} (owns the ledgers; no login)`, done: roleExists(roles.owner), sql: [`CREATE ROLE ${o} NOLOGIN`] },
    login(roles.server, 'the server: appends to ledgers, and nothing else of them'),
    login(roles.reader, "readers' statements: SELECT, in read-only transactions"),
    login(roles.writer, "writers' statements: SELECT; their appends go through the server"),
    login(roles.admin, `admins' statements: SELECT, and tables of their own in schema ${PG_WORKSPACE_SCHEMA}`),
    {
      does: `made the current user a member of ${roles.owner} and ${roles.admin}`,
      done: `SELECT pg_catalog.pg_has_role(current_user, ${quoteLiteral(roles.owner)}, 'MEMBER') AND pg_catalog.pg_has_role(current_user, ${quoteLiteral(roles.admin)}, 'MEMBER')`,
      sql: [`GRANT ${o} TO CURRENT_USER`, `GRANT ${a} TO CURRENT_USER`],
    },
    {
      done: `SELECT count(*) > 0 FROM pg_catalog.pg_namespace WHERE nspname = ${quoteLiteral(PG_WORKSPACE_SCHEMA)}`,
      does: `created schema ${PG_WORKSPACE_SCHEMA} (admins' own tables, views and functions)`,
      sql: [`CREATE SCHEMA ${PG_WORKSPACE_SCHEMA} AUTHORIZATION ${o}`],
    },
    {
      // Run at every start: it also takes back what an earlier layout granted (a client role that created in public).
      does: `the walls of database ${database}: nobody but ${roles.owner} creates in ${PG_LEDGER_SCHEMA}, only ${roles.admin} creates in ${PG_WORKSPACE_SCHEMA} or temporary tables`,
      sql: [
        `REVOKE CREATE, TEMPORARY ON DATABASE ${db} FROM PUBLIC, ${clients}, ${srv}`,
        `GRANT CONNECT ON DATABASE ${db} TO ${clients}, ${srv}`,
        `GRANT TEMPORARY ON DATABASE ${db} TO ${a}`,
        `GRANT CREATE ON DATABASE ${db} TO ${o}`,
        `REVOKE CREATE ON SCHEMA ${PG_LEDGER_SCHEMA} FROM PUBLIC, ${clients}, ${srv}`,
        `GRANT USAGE ON SCHEMA ${PG_LEDGER_SCHEMA} TO ${clients}, ${srv}`,
        `GRANT USAGE, CREATE ON SCHEMA ${PG_LEDGER_SCHEMA} TO ${o}`,
        `REVOKE ALL ON SCHEMA ${PG_WORKSPACE_SCHEMA} FROM PUBLIC, ${r}, ${w}, ${srv}`,
        `GRANT USAGE ON SCHEMA ${PG_WORKSPACE_SCHEMA} TO ${clients}`,
        `GRANT USAGE, CREATE ON SCHEMA ${PG_WORKSPACE_SCHEMA} TO ${a}`,
        // What an admin makes, every client reads, as on the embedded engine.
        `ALTER DEFAULT PRIVILEGES FOR ROLE ${a} IN SCHEMA ${PG_WORKSPACE_SCHEMA} GRANT SELECT ON TABLES TO ${r}, ${w}`,
        `ALTER ROLE ${r} IN DATABASE ${db} SET default_transaction_read_only = on`,
        `ALTER ROLE ${r} IN DATABASE ${db} SET search_path = ${PG_LEDGER_SCHEMA}, ${PG_WORKSPACE_SCHEMA}`,
        `ALTER ROLE ${w} IN DATABASE ${db} SET search_path = ${PG_LEDGER_SCHEMA}, ${PG_WORKSPACE_SCHEMA}`,
        `ALTER ROLE ${a} IN DATABASE ${db} SET search_path = ${PG_WORKSPACE_SCHEMA}, ${PG_LEDGER_SCHEMA}`,
      ],
    },
  ];
  return [...list, ...schemaSteps(roles, hashVersion)];
}

/** As the owner: cotwire's own schema (the append-only trigger's function, the log, the chain heads, the lease, the audit, the secrets, their grants) and the server's ledgers. */
function schemaSteps(roles: PgRoles, hashVersion: HashVersion): Step[] {
  const o = quoteIdent(roles.owner);
  const srv = quoteIdent(roles.server);
  const clients = clientRoles(roles).map(quoteIdent).join(', ');
  const list: Step[] = [
    {
      does: `created schema ${PG_SCHEMA}`,
      done: `SELECT count(*) > 0 FROM pg_catalog.pg_namespace WHERE nspname = ${quoteLiteral(PG_SCHEMA)}`,
      sql: [`CREATE SCHEMA ${PG_SCHEMA} AUTHORIZATION ${o}`],
    },
    {
      does: 'the append-only trigger function',
      sql: [`SET ROLE ${o}`, refuseChange(roles), `REVOKE ALL ON SCHEMA ${PG_SCHEMA} FROM PUBLIC`, `GRANT USAGE ON SCHEMA ${PG_SCHEMA} TO ${clients}, ${srv}`],
    },
    {
      done: tableExists(PG_SCHEMA, 'log_head'),
      does: `created ${PG_SCHEMA}.log_head (orders every instance's appends into the global sequence)`,
      sql: [
        `CREATE TABLE ${PG_SCHEMA}.log_head (one boolean PRIMARY KEY DEFAULT true CHECK (one), size bigint NOT NULL CHECK (size >= 0))`,
        `INSERT INTO ${PG_SCHEMA}.log_head (size) VALUES (0)`,
        `CREATE OR REPLACE TRIGGER cotwire_one_row BEFORE DELETE OR TRUNCATE ON ${PG_SCHEMA}.log_head FOR EACH STATEMENT EXECUTE FUNCTION ${PG_SCHEMA}.refuse_change()`,
      ],
    },
    {
      done: tableExists(PG_SCHEMA, 'log_nodes'),
      does: `created ${PG_SCHEMA}.log_nodes (the global Merkle log's complete subtrees)`,
      sql: [
        `CREATE TABLE ${PG_SCHEMA}.log_nodes (position bigint PRIMARY KEY, hash bytea NOT NULL CHECK (octet_length(hash) = 32))`,
        `CREATE OR REPLACE TRIGGER cotwire_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON ${PG_SCHEMA}.log_nodes FOR EACH STATEMENT EXECUTE FUNCTION ${PG_SCHEMA}.refuse_change()`,
      ],
    },
    {
      done: tableExists(PG_SCHEMA, 'chain_heads'),
      does: `created ${PG_SCHEMA}.chain_heads (each chain's last step; its row lock orders the appends to the chain)`,
      sql: [
        `CREATE TABLE ${PG_SCHEMA}.chain_heads (ledger text NOT NULL, chain_key text NOT NULL, step_index integer NOT NULL, current_hash text NOT NULL, PRIMARY KEY (ledger, chain_key))`,
      ],
    },
    {
      does: 'the canonical text of a double',
      sql: [DOUBLE_TEXT_FUNCTION, `GRANT EXECUTE ON FUNCTION ${PG_SCHEMA}.double_text(float8) TO ${clients}, ${srv}`],
    },
    {
      does: 'the check that a ledger INSERT runs in a transaction that may write',
      sql: [WRITABLE_FUNCTION, `GRANT EXECUTE ON FUNCTION ${PG_SCHEMA}.writable() TO ${clients}, ${srv}`],
    },
    {
      does: "cot_agent_id(): the caller's agent_id, as the server gave it to the backend",
      sql: [
        `CREATE OR REPLACE FUNCTION public.cot_agent_id() RETURNS text LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$ SELECT nullif(current_setting(${quoteLiteral(AGENT_ID_SETTING)}, true), '') $$`,
        'REVOKE ALL ON FUNCTION public.cot_agent_id() FROM PUBLIC',
        `GRANT EXECUTE ON FUNCTION public.cot_agent_id() TO ${clients}, ${srv}`,
      ],
    },
    {
      done: tableExists(PG_SCHEMA, 'signer'),
      does: `created ${PG_SCHEMA}.signer (the lease of the one instance that signs checkpoints)`,
      sql: [
        `CREATE TABLE ${PG_SCHEMA}.signer (one boolean PRIMARY KEY DEFAULT true CHECK (one), holder text, expires_at timestamptz NOT NULL)`,
        `INSERT INTO ${PG_SCHEMA}.signer (holder, expires_at) VALUES (NULL, '-infinity')`,
      ],
    },
    {
      done: tableExists(PG_SCHEMA, 'embedder'),
      does: `created ${PG_SCHEMA}.embedder (the lease of the one instance that embeds new steps)`,
      sql: [
        `CREATE TABLE ${PG_SCHEMA}.embedder (one boolean PRIMARY KEY DEFAULT true CHECK (one), holder text, expires_at timestamptz NOT NULL)`,
        `INSERT INTO ${PG_SCHEMA}.embedder (holder, expires_at) VALUES (NULL, '-infinity')`,
      ],
    },
    {
      done: tableExists(PG_SCHEMA, 'audit'),
      does: `created ${PG_SCHEMA}.audit and ${PG_SCHEMA}.audit_state (the latest background audit's findings, and whose round it is)`,
      sql: [
        `CREATE TABLE ${PG_SCHEMA}.audit (kind text NOT NULL, ledger text, chain_key text, first_seq bigint, last_seq bigint, row_count bigint NOT NULL, detail text NOT NULL, audited_at timestamptz NOT NULL)`,
        `CREATE TABLE ${PG_SCHEMA}.audit_state (one boolean PRIMARY KEY DEFAULT true CHECK (one), claimed_by text, claimed_at timestamptz NOT NULL, completed_by text, completed_at timestamptz)`,
        `INSERT INTO ${PG_SCHEMA}.audit_state (claimed_at) VALUES ('-infinity')`,
      ],
    },
    {
      does: "cot_audit(): the latest background audit's findings",
      sql: [
        `CREATE OR REPLACE FUNCTION public.cot_audit() RETURNS TABLE (kind text, ledger text, chain_key text, first_seq bigint, last_seq bigint, row_count bigint, detail text, audited_at timestamptz)
         LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
           SELECT a.kind, a.ledger, a.chain_key, a.first_seq, a.last_seq, a.row_count, a.detail, a.audited_at FROM ${PG_SCHEMA}.audit a
           WHERE (SELECT completed_at FROM ${PG_SCHEMA}.audit_state) IS NOT NULL
           UNION ALL
           SELECT 'pending', NULL, NULL, NULL, NULL, 0, 'no audit has completed yet; the first one runs at start-up', NULL
           WHERE (SELECT completed_at FROM ${PG_SCHEMA}.audit_state) IS NULL
         $$`,
        'REVOKE ALL ON FUNCTION public.cot_audit() FROM PUBLIC',
        `GRANT EXECUTE ON FUNCTION public.cot_audit() TO ${clients}, ${srv}`,
      ],
    },
    {
      does: `the steps' vectors (${EMBEDDINGS_TABLE}) and search texts' vectors (${PG_SCHEMA}.query_vectors)`,
      sql: pgSearchTables(roles),
    },
    {
      done: tableExists(PG_SCHEMA, 'secrets'),
      does: `created ${PG_SCHEMA}.secrets (the login roles' passwords; readable by ${roles.owner} only)`,
      sql: [`CREATE TABLE ${PG_SCHEMA}.secrets (name text PRIMARY KEY, value text NOT NULL)`],
    },
    {
      // At every start, from nothing: a role of an earlier layout keeps no grant it should not have.
      does: `the grants on ${PG_SCHEMA}'s tables`,
      sql: [
        `REVOKE ALL ON ${PG_SCHEMA}.log_head, ${PG_SCHEMA}.log_nodes, ${PG_SCHEMA}.chain_heads, ${PG_SCHEMA}.signer, ${PG_SCHEMA}.embedder, ${PG_SCHEMA}.secrets, ${PG_SCHEMA}.audit, ${PG_SCHEMA}.audit_state FROM PUBLIC, ${clients}, ${srv}`,
        `GRANT SELECT, UPDATE ON ${PG_SCHEMA}.log_head, ${PG_SCHEMA}.signer, ${PG_SCHEMA}.embedder TO ${srv}`,
        `GRANT SELECT, INSERT ON ${PG_SCHEMA}.log_nodes TO ${srv}`,
        `GRANT SELECT, INSERT, UPDATE ON ${PG_SCHEMA}.chain_heads TO ${srv}`,
        `GRANT SELECT ON ${PG_SCHEMA}.log_head, ${PG_SCHEMA}.log_nodes, ${PG_SCHEMA}.signer, ${PG_SCHEMA}.embedder, ${PG_SCHEMA}.audit, ${PG_SCHEMA}.audit_state TO ${clients}`,
      ],
    },
  ];
  for (const ledger of PG_SERVER_LEDGERS) {
    list.push({
      does: `created ledger ${PG_LEDGER_SCHEMA}.${ledger.name} (${hashVersion})`,
      done: tableExists(PG_LEDGER_SCHEMA, ledger.name),
      sql: [
        postgresLedgerDdl(ledger.ddl),
        ...(hashVersion === HASH_VERSION_V3 ? [`ALTER TABLE ${qualified(ledger.name)} ADD COLUMN ${SALT_COLUMN} text NOT NULL`] : []),
        `COMMENT ON TABLE ${qualified(ledger.name)} IS ${quoteLiteral(hashVersion)}`,
      ],
    });
    list.push({ does: `the append-only wall of ${ledger.name}`, sql: ledgerWallSql(ledger.name, ledger.chainKey, roles, ledger.name === STEPS_TABLE) });
  }
  list.push({ does: 'steps are read by trace', sql: [`CREATE INDEX IF NOT EXISTS ${STEPS_TABLE}_trace_id ON ${qualified(STEPS_TABLE)} (trace_id)`] });
  list.push({ does: 'back to the current user', sql: ['RESET ROLE'] });
  return list;
}

/** What init did, step by step; empty when everything was in place. */
export interface PgInstallReport {
  readonly actions: readonly string[];
  readonly serverVersion: string;
}

/**
 * Creates whatever of cotwire's objects the database lacks, in one
 * transaction under an advisory lock, so that instances starting together
 * do not race. The connection's role must be able to create roles (the
 * first time) or be a member of the owner role.
 */
export async function installPostgres(
  conn: SqlConnection,
  prefix: string,
  isProtected: (name: string) => boolean = (n) => n.toLowerCase().startsWith('_cot'),
  /** What the server's ledgers are chained with, where this creates them. */
  hashVersion: HashVersion = NEW_LEDGER_HASH_VERSION,
): Promise<PgInstallReport> {
  const [[versionNum, version, encoding, database]] = (await conn.query(
    "SELECT current_setting('server_version_num')::int, current_setting('server_version'), pg_catalog.pg_encoding_to_char(encoding), current_database() FROM pg_catalog.pg_database WHERE datname = current_database()",
  )) as [[number, string, string, string]];
  if (versionNum < PG_MIN_VERSION) {
    throw new PgError(SqlState.FeatureNotSupported, `cotwire needs PostgreSQL 14 or later as its engine; this server is ${version}`);
  }
  if (encoding !== 'UTF8') {
    throw new PgError(SqlState.FeatureNotSupported, `cotwire needs a UTF8 database as its engine (hashes are over UTF-8 bytes); ${database} is ${encoding}`, {
      hint: `CREATE DATABASE ... ENCODING 'UTF8' TEMPLATE template0`,
    });
  }
  const roles = pgRoles(prefix);
  const actions: string[] = [];
  const created = new Set<string>();
  await conn.run('BEGIN');
  try {
    // Two instances starting at once would both find a role missing; the second waits here and then finds it.
    await conn.query('SELECT pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext($1))', [`cotwire init ${prefix}`]);
    for (const step of steps(roles, database, hashVersion)) {
      if (step.done !== undefined) {
        const [[done]] = (await conn.query(step.done)) as [[boolean]];
        if (done) continue;
      }
      for (const sql of step.sql) await conn.run(sql);
      if (step.done !== undefined) actions.push(step.does);
      if (step.role !== undefined) created.add(step.role);
    }
    // The verification functions follow the ledgers' columns: written afresh at every start.
    await conn.run(`SET ROLE ${quoteIdent(roles.owner)}`);
    const tables = await new LedgerCatalog(conn, isProtected, null, readPostgresTables(prefix)).all();
    const stepsLedger = tables.find((t) => t.isSteps);
    for (const table of tables) {
      const name = verifyMacroName(table);
      const [[existed]] = (await conn.query(`SELECT to_regprocedure($1) IS NOT NULL`, [`public.${name}(text)`])) as [[boolean]];
      for (const sql of ledgerFunctions(postgresDialect(roles), table)) await conn.run(sql);
      for (const sql of ledgerGrantsSql(table.name, roles)) await conn.run(sql);
      if (!existed)
        actions.push(
          `created ${name}() and ${name}_all()${table.isSteps ? ', cot_replay(), cot_trace() and cot_sessions()' : ''}, which verify ${table.name} in PostgreSQL`,
        );
    }
    await conn.run('RESET ROLE');
    actions.push(...(await superuserWalls(conn, prefix, roles)));
    await conn.run(`SET ROLE ${quoteIdent(roles.owner)}`);
    const [[proofs]] = (await conn.query(`SELECT to_regprocedure('public.cot_prove(text)') IS NOT NULL`)) as [[boolean]];
    for (const sql of postgresDialect(roles).proofFunctions()) await conn.run(sql);
    if (stepsLedger !== undefined) for (const sql of postgresDialect(roles).receiptFunctions(stepsLedger)) await conn.run(sql);
    if (!proofs)
      actions.push(
        "created cot_log_root(), cot_inclusion_proof(), cot_consistency_proof(), cot_checkpoint(), cot_prove() and cot_consistency(), the global log's proofs",
      );
    await conn.run('RESET ROLE');
    actions.push(...(await setPasswords(conn, roles, created)));
    actions.push(...(await retireSharedClientRole(conn, prefix, roles)));
    await conn.run('COMMIT');
  } catch (err) {
    await conn.run('ROLLBACK').catch(() => undefined);
    throw err;
  }
  return { actions, serverVersion: version };
}

/** The passwords init set for the login roles, by role. */
export async function rolePasswords(conn: SqlConnection, prefix: string): Promise<Readonly<Record<'server' | 'reader' | 'writer' | 'admin', string>>> {
  const roles = pgRoles(prefix);
  const rows = (await conn.query(`SELECT name, value FROM ${PG_SCHEMA}.secrets WHERE name = ANY($1::text[])`, [`{${loginRoles(roles).join(',')}}`])) as Array<
    [string, string]
  >;
  const get = (role: string): string => {
    const row = rows.find((r) => r[0] === role);
    if (row === undefined)
      throw new PgError(SqlState.ObjectNotInPrerequisiteState, `the PostgreSQL engine has no password for ${role}: run \`cotwire init-postgres\``);
    return row[1];
  };
  return { server: get(roles.server), reader: get(roles.reader), writer: get(roles.writer), admin: get(roles.admin) };
}

/** A password for each login role that has none, kept where only the owner's members read it. */
async function setPasswords(conn: SqlConnection, roles: PgRoles, created: ReadonlySet<string>): Promise<string[]> {
  const actions: string[] = [];
  for (const role of loginRoles(roles)) {
    const [row] = (await conn.query(`SELECT value FROM ${PG_SCHEMA}.secrets WHERE name = $1`, [role])) as Array<[string]>;
    if (row !== undefined) continue;
    if (!created.has(role)) {
      // Roles belong to the cluster: resetting the password would lock out the database whose role it is.
      throw new PgError(
        SqlState.DuplicateObject,
        `role ${role} exists, but this database holds no password for it: another cotwire database in this cluster uses it`,
        {
          hint: 'Give each cotwire database in a cluster its own engine.rolePrefix.',
        },
      );
    }
    const password = randomBytes(24).toString('base64url');
    await conn.run(`ALTER ROLE ${quoteIdent(role)} PASSWORD ${quoteLiteral(password)}`);
    await conn.query(`INSERT INTO ${PG_SCHEMA}.secrets (name, value) VALUES ($1, $2)`, [role, password]);
    actions.push(`set a password for ${role} (kept in ${PG_SCHEMA}.secrets)`);
  }
  return actions;
}

/**
 * An engine initialised before each cotwire role had a PostgreSQL role of
 * its own ran every client as `<prefix>_client`: what that role made goes to
 * the admins' role, and it loses its grants and its login.
 */
async function retireSharedClientRole(conn: SqlConnection, prefix: string, roles: PgRoles): Promise<string[]> {
  const legacy = `${prefix}_client`;
  const [[active]] = (await conn.query(`SELECT count(*) > 0 FROM pg_catalog.pg_roles WHERE rolname = $1 AND rolcanlogin`, [legacy])) as [[boolean]];
  if (!active) return [];
  await conn.run(`REASSIGN OWNED BY ${quoteIdent(legacy)} TO ${quoteIdent(roles.admin)}`);
  await conn.run(`DROP OWNED BY ${quoteIdent(legacy)}`);
  await conn.run(`ALTER ROLE ${quoteIdent(legacy)} NOLOGIN`);
  await conn.query(`DELETE FROM ${PG_SCHEMA}.secrets WHERE name = $1`, [legacy]);
  return [`retired role ${legacy}: what it owned is ${roles.admin}'s, and it can no longer log in (each cotwire role has a PostgreSQL role now)`];
}

/**
 * Walls only a superuser can raise, raised where init runs as one, and
 * said to be missing where not (the guard still refuses what they would):
 * an event trigger that refuses any other role an object with a ledger's or
 * a cotwire function's name (a client's overload of cot_verify would shadow
 * it), and the large-object functions that create, change or remove one,
 * which PostgreSQL grants to every role, taken from PUBLIC.
 */
async function superuserWalls(conn: SqlConnection, prefix: string, roles: PgRoles): Promise<string[]> {
  const [[superuser, hasTrigger, loGranted]] = (await conn.query(
    `SELECT rolsuper, EXISTS (SELECT 1 FROM pg_catalog.pg_event_trigger WHERE evtname = $1),
            pg_catalog.has_function_privilege('public', 'pg_catalog.lo_from_bytea(oid, bytea)', 'EXECUTE')
     FROM pg_catalog.pg_roles WHERE rolname = current_user`,
    [`${prefix}_names`],
  )) as [[boolean, boolean, boolean]];
  const actions: string[] = [];
  if (superuser) {
    for (const sql of namesEventTriggerSql(prefix, roles)) await conn.run(sql);
    if (!hasTrigger) actions.push(`created event trigger ${prefix}_names: no role but ${roles.owner} may create objects named _cot* or cot_*`);
    for (const fn of LARGE_OBJECT_WRITERS) await conn.run(`REVOKE EXECUTE ON FUNCTION pg_catalog.${fn} FROM PUBLIC`);
    if (loGranted) actions.push(`revoked the large-object functions that create, change or remove one from PUBLIC (${LARGE_OBJECT_WRITERS.length} functions)`);
  } else {
    if (!hasTrigger) actions.push(`skipped the event trigger that reserves cotwire's names: it needs a superuser (the guard still refuses such DDL)`);
    if (loGranted)
      actions.push(`skipped revoking the large-object functions from PUBLIC: it needs a superuser (the guard still refuses clients' calls of them)`);
  }
  return actions;
}

/** The large-object functions that create, change or remove one (PostgreSQL 14 to 17), by signature; reading stays (lo_get, lo_open, loread). */
const LARGE_OBJECT_WRITERS = [
  'lo_creat(integer)',
  'lo_create(oid)',
  'lo_from_bytea(oid, bytea)',
  'lo_put(oid, bigint, bytea)',
  'lo_unlink(oid)',
  'lo_import(text)',
  'lo_import(text, oid)',
  'lo_export(oid, text)',
  'lowrite(integer, bytea)',
  'lo_truncate(integer, integer)',
  'lo_truncate64(integer, bigint)',
];

/**
 * The checkpoint signing key every instance shares when none is configured:
 * made by the first instance to ask, kept in cotwire.secrets (readable by
 * the owner role's members only). Without `make` (checkpoints exist, so a
 * key made now would not be theirs), null when there is none.
 */
export async function sharedSignerKey(conn: SqlConnection, make: (() => string) | null): Promise<string | null> {
  if (make !== null) await conn.query(`INSERT INTO ${PG_SCHEMA}.secrets (name, value) VALUES ('checkpoint_key', $1) ON CONFLICT (name) DO NOTHING`, [make()]);
  const [row] = (await conn.query(`SELECT value FROM ${PG_SCHEMA}.secrets WHERE name = 'checkpoint_key'`)) as Array<[string]>;
  return row?.[0] ?? null;
}

/** A job one instance does at a time: signing checkpoints, embedding new steps. Each has a one-row table of its name. */
export type Lease = 'signer' | 'embedder';

/**
 * A lease: taken when free or expired, renewed by its holder, decided by
 * PostgreSQL's clock. Answers whether `holder` holds it now.
 */
export async function takeLease(conn: SqlConnection, lease: Lease, holder: string, leaseMs: number): Promise<boolean> {
  const rows = await conn.query(
    `UPDATE ${PG_SCHEMA}.${lease} SET holder = $1, expires_at = pg_catalog.now() + $2::interval
     WHERE holder = $1 OR expires_at < pg_catalog.clock_timestamp() RETURNING 1`,
    [holder, `${leaseMs} milliseconds`],
  );
  return rows.length > 0;
}

/** Gives a lease up at a clean stop, so another instance takes it at once. */
export async function releaseLease(conn: SqlConnection, lease: Lease, holder: string): Promise<void> {
  await conn.query(`UPDATE ${PG_SCHEMA}.${lease} SET expires_at = '-infinity' WHERE holder = $1`, [holder]);
}

/** The event trigger that refuses objects named like ledgers or cotwire's functions to every role but the owner. */
function namesEventTriggerSql(prefix: string, roles: PgRoles): string[] {
  const fn = `${PG_SCHEMA}.refuse_names_${prefix}`;
  return [
    `CREATE OR REPLACE FUNCTION ${fn}() RETURNS event_trigger LANGUAGE plpgsql AS $$
DECLARE
  obj record;
  name text;
BEGIN
  IF pg_catalog.pg_has_role(current_user, ${quoteLiteral(roles.owner)}, 'MEMBER') THEN RETURN; END IF;
  FOR obj IN SELECT * FROM pg_catalog.pg_event_trigger_ddl_commands() LOOP
    name := lower(pg_catalog.regexp_replace(pg_catalog.regexp_replace(obj.object_identity, '\\(.*$', ''), '^.*\\.', ''));
    name := pg_catalog.btrim(name, '"');
    IF name LIKE '\\_cot%' OR name LIKE 'cot\\_%' THEN
      RAISE EXCEPTION USING ERRCODE = '42501',
        MESSAGE = format('cannot create or change %s %s: the name is reserved for cotwire''s ledgers and functions', obj.object_type, obj.object_identity);
    END IF;
  END LOOP;
END
$$`,
    `DROP EVENT TRIGGER IF EXISTS ${quoteIdent(`${prefix}_names`)}`,
    `CREATE EVENT TRIGGER ${quoteIdent(`${prefix}_names`)} ON ddl_command_end EXECUTE FUNCTION ${fn}()`,
  ];
}
