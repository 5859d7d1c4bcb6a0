import type { SqlDialect } from '../../../ledger/dialect.js';
import type { PgRoles } from '../ledger/names.js';
import { pgProofFunctions } from './proof-sql.js';
import { pgReceiptFunctions } from './receipt-sql.js';
import { pgStepsFunctions, pgVerifyFunctions } from './verify-sql.js';

/** PostgreSQL's: functions in `public`, created once with the ledger (or at init), executable by cotwire's roles. */
export function postgresDialect(roles: PgRoles): SqlDialect {
  return {
    verifyFunctions: (table) => pgVerifyFunctions(table, roles),
    stepsFunctions: (steps) => pgStepsFunctions(steps, roles),
    proofFunctions: () => pgProofFunctions(roles),
    receiptFunctions: (steps) => pgReceiptFunctions(steps, roles),
  };
}
