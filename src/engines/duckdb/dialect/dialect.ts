import type { SqlDialect } from '../../../ledger/dialect.js';
import { searchMacros } from '../search/search-sql.js';
import { ANALYTICS_MACROS } from './analytics-sql.js';
import { PROOF_MACROS } from './proof-sql.js';
import { receiptMacros } from './receipt-sql.js';
import { stepsReadMacros, verifyMacros } from './verify-sql.js';

/** DuckDB's: temporary macros, defined on each client connection over the ledgers it can see. */
export const duckdbDialect: SqlDialect = {
  verifyFunctions: (table) => verifyMacros(table),
  stepsFunctions: (steps) => [...stepsReadMacros(steps), ...ANALYTICS_MACROS],
  proofFunctions: () => [...PROOF_MACROS],
  receiptFunctions: (steps) => receiptMacros(steps),
  searchFunctions: (dimensions) => searchMacros(dimensions),
};
