import { LedgerCatalog } from '../../../ledger/chain/catalog.js';
import type { ProtectedNames } from '../../../guard/names.js';
import { PgError } from '../../../errors/pg-error.js';
import { SqlState } from '../../../errors/sqlstate.js';
import type { DisposeStack } from '../../../server/dispose-stack.js';
import { PostgresConnection } from '../adapter/connection.js';
import type { EngineHealth } from '../adapter/health.js';
import { ledgerFunctions } from '../../../ledger/dialect.js';
import { postgresDialect } from '../dialect/dialect.js';
import { readPostgresTables } from '../ledger/catalog.js';
import { pgLedgerDdl } from '../ledger/ledger-create.js';
import type { PgRoles } from '../ledger/names.js';

/**
 * CREATE TABLE of a ledger, carried out by the server on a connection of
 * its own, as the owner, one at a time: the table, its wall and its
 * functions in one transaction.
 */
export async function ledgerDdl(
  url: string,
  prefix: string,
  roles: PgRoles,
  names: ProtectedNames,
  ledgers: LedgerCatalog,
  stack: DisposeStack,
  health: EngineHealth,
): Promise<(create: Record<string, unknown>) => Promise<void>> {
  const owner = stack.use(await PostgresConnection.open(url, 'cotwire owner', { health }), (c) => c.close());
  let ddl: Promise<void> = Promise.resolve();
  return (create) => {
    const run = ddl.then(async () => {
      const made = pgLedgerDdl(create, roles);
      const [[exists]] = (await owner.query(`SELECT to_regclass($1) IS NOT NULL`, [`public."${made.name.replaceAll('"', '""')}"`])) as [[boolean]];
      if (exists) {
        if (made.ifNotExists) return;
        throw new PgError(SqlState.DuplicateTable, `relation "${made.name}" already exists`);
      }
      await owner.run('BEGIN');
      try {
        await owner.run(`SET LOCAL ROLE ${roles.owner}`);
        for (const sql of made.statements) await owner.run(sql);
        // Read in this transaction, which alone sees the new table yet.
        const table = await new LedgerCatalog(owner, (n) => names.isProtected(n), null, readPostgresTables(prefix)).find(['main', made.name]);
        if (table !== null) for (const sql of ledgerFunctions(postgresDialect(roles), table)) await owner.run(sql);
        await owner.run('COMMIT');
      } catch (err) {
        await owner.run('ROLLBACK').catch(() => undefined);
        throw err;
      }
      ledgers.created(made.name);
    });
    ddl = run.catch(() => undefined);
    return run;
  };
}
