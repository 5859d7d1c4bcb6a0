/** Where cotwire's objects live in a PostgreSQL engine, and the roles it creates there (engines/postgres/ledger/install.ts). */

/** The schema that holds cotwire's own objects on a PostgreSQL engine. */
export const PG_SCHEMA = 'cotwire';
/** The schema ledgers live in: PostgreSQL's default, where clients look. */
export const PG_LEDGER_SCHEMA = 'public';

export interface PgRoles {
  readonly owner: string;
  readonly writer: string;
  readonly client: string;
}

export function pgRoles(prefix: string): PgRoles {
  return { owner: `${prefix}_owner`, writer: `${prefix}_writer`, client: `${prefix}_client` };
}
