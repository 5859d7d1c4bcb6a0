import { HASH_VERSION, HASH_VERSION_V2, HASH_VERSION_V3, qualifiedName, quoteLiteral, type HashVersion, type LedgerTable } from './schema.js';

/**
 * A ledger records the hash specification of its rows as its table comment,
 * which travels with the database file and its exports. Clients cannot set
 * it (the guard refuses COMMENT ON a ledger), and a comment changed behind
 * the server changes every recomputed hash, so such a ledger fails closed
 * rather than verifying under a weaker rule. Ledgers from before versions
 * were recorded have no comment: they are v1.
 */

/** What new ledgers are chained with. */
export const NEW_LEDGER_HASH_VERSION: HashVersion = HASH_VERSION_V3;

/** The version a table comment names; undefined for a comment that names none this server knows. */
export function hashVersionOf(comment: string | null | undefined): HashVersion | undefined {
  if (comment === null || comment === undefined || comment === '' || comment === HASH_VERSION) return HASH_VERSION;
  if (comment === HASH_VERSION_V2) return HASH_VERSION_V2;
  if (comment === HASH_VERSION_V3) return HASH_VERSION_V3;
  return undefined;
}

/** The statement that records a new ledger's version; run in the transaction that creates it. */
export function recordHashVersionSql(
  table: Pick<LedgerTable, 'catalog' | 'schema' | 'name' | 'relation'>,
  version: HashVersion = NEW_LEDGER_HASH_VERSION,
): string {
  return `COMMENT ON TABLE ${qualifiedName(table)} IS ${quoteLiteral(version)}`;
}
