import { CHECKPOINTS_TABLE } from '../../../ledger/log/checkpoint-schema.js';
import { AUDIT_MACROS } from '../dialect/audit-sql.js';
import { duckdbDialect } from '../dialect/dialect.js';
import { damagedVerifyMacros } from '../dialect/verify-sql.js';
import type { ConnectionServices } from './context.js';

/**
 * The SQL verification and reading macros for the ledgers that exist now, in
 * groups that stand alone: one group per ledger, and the steps ledger's
 * readers. Every client connection defines them, and so does the catalog
 * snapshot's, whose pg_proc must list what a client's would.
 */
export async function ledgerMacroGroups(services: Pick<ConnectionServices, 'ledgers' | 'search'>): Promise<string[][]> {
  const ledgers = await services.ledgers.all();
  const groups: string[][] = [[...AUDIT_MACROS]];
  for (const t of ledgers) groups.push(duckdbDialect.verifyFunctions(t));
  for (const d of await services.ledgers.damaged()) groups.push(damagedVerifyMacros(d, d.reason));
  const steps = ledgers.find((t) => t.isSteps);
  if (steps !== undefined) groups.push(duckdbDialect.stepsFunctions(steps));
  if (steps !== undefined) groups.push([...services.search.macros]);
  if (steps !== undefined && ledgers.some((t) => t.schema === 'main' && t.name === CHECKPOINTS_TABLE)) groups.push(duckdbDialect.proofFunctions());
  return groups;
}
