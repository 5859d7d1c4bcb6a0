import {
  CHAIN_COLUMNS,
  canonicalTextSql,
  HASH_VERSION,
  HASH_VERSION_V3,
  isCommitted,
  quoteIdent,
  quoteLiteral,
  type LedgerColumn,
  type LedgerTable,
} from '../chain/schema.js';

/**
 * Redaction under `cotwire/v2`: a column's value is replaced by a marker,
 * and the digest that stood for it in the row's pre-image, SHA-256(lp(text)),
 * is kept in a chained, server-only ledger. Verification takes the recorded
 * digest for a redacted column that holds its marker, so the row, its chain
 * and its leaf in the global log verify as before, and every other column
 * is still checked in full.
 */

export const REDACTIONS_TABLE = '_cot_redactions';

export const REDACTIONS_DDL = `CREATE TABLE IF NOT EXISTS main.${REDACTIONS_TABLE} (
  redaction_id UUID NOT NULL,
  ledger VARCHAR NOT NULL,
  target_seq BIGINT NOT NULL,
  target_chain_key VARCHAR NOT NULL,
  target_step_index INTEGER NOT NULL,
  target_trace_id UUID,
  column_name VARCHAR NOT NULL,
  value_digest VARCHAR NOT NULL,
  reason VARCHAR NOT NULL,
  redacted_by VARCHAR NOT NULL,
  ${CHAIN_COLUMNS.map((c) => `${c.name} ${c.type} NOT NULL`).join(',\n  ')}
)`;

/** One chain's redactions are read with its verification. */
export const REDACTIONS_INDEX_DDL = `CREATE INDEX IF NOT EXISTS ${REDACTIONS_TABLE}_chain ON main.${REDACTIONS_TABLE} (target_chain_key)`;

/** What a redacted text column holds. */
export const REDACTED_TEXT = '[redacted]';

/**
 * The value a redacted column holds, as SQL and as its canonical text:
 * the marker text in a text column, a JSON string in a JSON column, and
 * NULL in any other nullable column. A NOT NULL column of another type
 * has no marker and cannot be redacted.
 */
export function markerOf(column: Pick<LedgerColumn, 'type' | 'notNull'>): { readonly sql: string; readonly text: string | null } | null {
  const type = column.type.toUpperCase();
  if (type === 'VARCHAR') return { sql: quoteLiteral(REDACTED_TEXT), text: REDACTED_TEXT };
  if (type === 'JSON') return { sql: `CAST(${quoteLiteral(JSON.stringify(REDACTED_TEXT))} AS JSON)`, text: JSON.stringify(REDACTED_TEXT) };
  return column.notNull ? null : { sql: 'NULL', text: null };
}

/** The ledgers whose rows are never redacted: the records that account for redaction and retention, and signed checkpoints. */
const UNREDACTABLE = new Set(['_cot_redactions', '_cot_retention', '_cot_checkpoints', '_cot_log_events']);

/** Why a column of a ledger cannot be redacted, or null when it can. */
export function unredactable(table: LedgerTable, column: string): string | null {
  if (UNREDACTABLE.has(table.name)) return `${table.schema}.${table.name} accounts for the ledgers' history and is never redacted`;
  if (table.hashVersion === HASH_VERSION) {
    return `${table.schema}.${table.name} is chained with ${table.hashVersion}, whose hashes cover each value's text; only cotwire/v2 and v3 ledgers can be redacted`;
  }
  const c = table.columns.find((x) => x.name === column);
  if (c === undefined) return `${table.schema}.${table.name} has no column "${column}"`;
  if (CHAIN_COLUMNS.some((x) => x.name === column) || table.serverColumns.has(column) || table.chainKey === column) {
    return `column "${column}" is part of the chain itself (the server computes it, or it names the chain)`;
  }
  if (table.hashVersion === HASH_VERSION_V3 && !isCommitted(column)) return `column "${column}" is not committed to under cotwire/v3: its hash covers its text`;
  if (markerOf(c) === null) return `column "${column}" is ${c.type} NOT NULL, which has no redaction marker`;
  return null;
}

/** The columns of a ledger that can be redacted, in table order. */
export function redactableColumns(table: LedgerTable): LedgerColumn[] {
  return table.columns.filter((c) => unredactable(table, c.name) === null);
}

/** The column of the verification's per-row join that holds a redacted column's recorded digest. */
export function digestColumn(column: string): string {
  return quoteIdent(`cot_redacted_${column}`);
}

/** The join key of the per-row redactions (the target's ledger_seq). */
const SEQ = quoteIdent('cot_redacted_seq');

/**
 * A subquery with one row per redacted row of the ledger: its ledger_seq
 * and, per redactable column, the digest recorded for it (NULL when that
 * column is not redacted). Null when the ledger cannot have redactions.
 */
export function redactedDigestsSql(table: LedgerTable, chain: string | null = null): string | null {
  if (table.redactions === null) return null;
  const columns = redactableColumns(table);
  if (columns.length === 0) return null;
  const ledger = quoteLiteral(`${table.schema}.${table.name}`);
  const digests = columns.map((c) => `system.main.max(value_digest) FILTER (WHERE column_name = ${quoteLiteral(c.name)}) AS ${digestColumn(c.name)}`);
  // One chain's records are found through the index on target_chain_key.
  const one = chain === null ? '' : ` AND target_chain_key = CAST(${chain} AS VARCHAR)`;
  return `(SELECT target_seq AS ${SEQ}, ${digests.join(', ')} FROM ${table.redactions} WHERE ledger = ${ledger}${one} GROUP BY target_seq)`;
}

/** `FROM ledger` with the redacted digests joined on, for SQL that hashes its rows; `chain` narrows them to one chain. */
export function withRedactedDigests(table: LedgerTable, from: string, chain: string | null = null): string {
  const red = redactedDigestsSql(table, chain);
  return red === null ? from : `${from} LEFT JOIN ${red} ON ${SEQ} = ${quoteIdent('ledger_seq')}`;
}

/**
 * A v2 column's digest as SQL, over a row joined withRedactedDigests: the
 * recorded digest when the column is redacted and holds its marker,
 * otherwise the digest of what it holds. A redacted column whose marker was
 * replaced by anything but the original value no longer hashes to the row.
 */
export function columnDigestSql(table: LedgerTable, column: LedgerColumn, ofText: (text: string) => string): string {
  const computed = ofText(canonicalTextSql(column.name, column.type));
  if (table.redactions === null || unredactable(table, column.name) !== null) return computed;
  const marker = markerOf(column);
  const holdsMarker =
    marker?.text === null || marker === null
      ? `${quoteIdent(column.name)} IS NULL`
      : `${canonicalTextSql(column.name, column.type)} IS NOT DISTINCT FROM ${quoteLiteral(marker.text)}`;
  return `CASE WHEN ${digestColumn(column.name)} IS NOT NULL AND ${holdsMarker} THEN ${digestColumn(column.name)} ELSE ${computed} END`;
}
