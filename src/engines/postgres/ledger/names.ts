import { quoteIdent } from '../../../ledger/chain/schema.js';

/** Where cotwire's objects live in a PostgreSQL engine, and the roles it creates there (engines/postgres/ledger/install.ts). */

/** The schema that holds cotwire's own objects on a PostgreSQL engine. */
export const PG_SCHEMA = 'cotwire';
/** The schema ledgers live in: PostgreSQL's default, where clients look. No client may create anything in it. */
export const PG_LEDGER_SCHEMA = 'public';
/** Where an admin's own tables, views and functions go: off the verification search path (pg_catalog, public). */
export const PG_WORKSPACE_SCHEMA = 'workspace';

/**
 * The PostgreSQL roles of one cotwire database: the owner of the ledgers
 * (no login), the server's own (which appends), and one per cotwire role,
 * which that role's clients' backends run as.
 */
export interface PgRoles {
  readonly owner: string;
  readonly server: string;
  readonly reader: string;
  readonly writer: string;
  readonly admin: string;
}

export function pgRoles(prefix: string): PgRoles {
  return { owner: `${prefix}_owner`, server: `${prefix}_server`, reader: `${prefix}_reader`, writer: `${prefix}_writer`, admin: `${prefix}_admin` };
}

/** The roles with a login, whose passwords init keeps: the server's and the clients'. */
export function loginRoles(roles: PgRoles): readonly string[] {
  return [roles.server, roles.reader, roles.writer, roles.admin];
}

/** The roles client statements run as, one per cotwire role. */
export function clientRoles(roles: PgRoles): readonly string[] {
  return [roles.reader, roles.writer, roles.admin];
}

/** Who may call cotwire's SQL functions: every client role and the server's own, quoted for a GRANT. */
export function functionGrantees(roles: PgRoles): string {
  return [...clientRoles(roles), roles.server].map(quoteIdent).join(', ');
}

/** The role a client's backend runs as, from its cotwire role. */
export function backendRole(roles: PgRoles, role: string): string {
  return role === 'admin' ? roles.admin : role === 'writer' ? roles.writer : roles.reader;
}

/** The backend setting cot_agent_id() reads: the authenticated user's agent_id, given at the backend's start. */
export const AGENT_ID_SETTING = 'cotwire.agent_id';

/** The backend setting the ledgers' row-level security reads: the authenticated user's org_id ('' for a user without one), given at the backend's start. */
export const ORG_ID_SETTING = 'cotwire.org_id';
