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
import { PG_SCHEMA } from '../ledger/names.js';
import { pgLedgerDdl } from '../ledger/ledger-create.js';
import type { PgRoles } from '../ledger/names.js';
import type { HashVersion } from '../../../ledger/chain/schema.js';

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
  /** What a ledger made by a client's CREATE TABLE is chained with. */
  hashVersion: HashVersion,
): Promise<LedgerDdl> {
  const owner = stack.use(await PostgresConnection.open(url, 'cotwire owner', { health }), (c) => c.close());
  let ddl: Promise<void> = Promise.resolve();
  /** The ledger a statement makes: its name, and whether it exists already (an error, unless IF NOT EXISTS). */
  const check = async (create: Record<string, unknown>): Promise<{ readonly name: string; readonly exists: boolean }> => {
    const made = pgLedgerDdl(create, roles, hashVersion);
    const [[exists]] = (await owner.query(`SELECT to_regclass($1) IS NOT NULL`, [`public."${made.name.replaceAll('"', '""')}"`])) as [[boolean]];
    if (exists && !made.ifNotExists) throw new PgError(SqlState.DuplicateTable, `relation "${made.name}" already exists`);
    return { name: made.name, exists };
  };
  const create = (statement: Record<string, unknown>): Promise<void> => {
    const run = ddl.then(async () => {
      const made = pgLedgerDdl(statement, roles, hashVersion);
      if ((await check(statement)).exists) return;
      await owner.run('BEGIN');
      try {
        // A ledger of this name dropped behind the servers left its chains' heads: the new one starts every chain
        // afresh (the rows stay, so that no instance finds a chain it knew without its head row).
        await owner.query(`UPDATE ${PG_SCHEMA}.chain_heads SET step_index = -1, current_hash = '' WHERE ledger = $1`, [`main.${made.name}`]);
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
  return { create, check };
}

/** CREATE TABLE of a ledger as the server carries it out, and its check beforehand (inside a block, until COMMIT). */
export interface LedgerDdl {
  create(statement: Record<string, unknown>): Promise<void>;
  check(statement: Record<string, unknown>): Promise<{ readonly name: string; readonly exists: boolean }>;
}
