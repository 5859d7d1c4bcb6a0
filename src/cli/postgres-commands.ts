import { PgError } from '../errors/pg-error.js';
import { PostgresConnection } from '../engine/postgres/connection.js';
import { pgRoles } from '../ledger/pg-names.js';
import { installPostgres } from '../ledger/postgres-schema.js';
import { redactUrl } from '../config/load.js';

/**
 * `cotwire init-postgres`: creates cotwire's roles, ledgers, triggers and
 * functions in a PostgreSQL database, and says what it did. Running it again
 * does nothing and says so; every start of a server does the same.
 */
export async function initPostgresCommand(opts: { readonly url: string; readonly rolePrefix: string }, out: (text: string) => void): Promise<number> {
  let conn: PostgresConnection;
  try {
    conn = await PostgresConnection.open(opts.url, 'cotwire init-postgres');
  } catch (err) {
    process.stderr.write(`cotwire: cannot connect to ${redactUrl(opts.url)}: ${(err as Error).message}\n`);
    return 1;
  }
  try {
    const report = await installPostgres(conn, opts.rolePrefix);
    out(`PostgreSQL ${report.serverVersion} at ${redactUrl(opts.url)}\n`);
    if (report.actions.length === 0) out('everything was in place; nothing to do\n');
    for (const a of report.actions) out(`- ${a}\n`);
    const roles = pgRoles(opts.rolePrefix);
    out(`clients' statements run as ${roles.client}, ledger appends as ${roles.writer}; ${roles.owner} owns the ledgers\n`);
    return 0;
  } catch (err) {
    const e = err as Error;
    process.stderr.write(`cotwire: init-postgres failed: ${e.message}${err instanceof PgError && err.hint !== undefined ? `\nhint: ${err.hint}` : ''}\n`);
    return 1;
  } finally {
    conn.close();
  }
}
