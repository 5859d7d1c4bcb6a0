import { DuckDBTimestampTZValue, DuckDBTypeId, type DuckDBType, type DuckDBValue } from '@duckdb/node-api';

/**
 * A ledger row's canonical texts (the hash pre-image's: CAST(value AS
 * VARCHAR), a timestamp with time zone as microseconds since the epoch)
 * as the engine would print the stored values, so that the writer's rows of
 * a session can be served exactly as the engine would serve them once
 * stored. Verification proves these texts are the stored values' texts, row
 * by row.
 *
 * Per column: 'same' where the canonical text is the printed text (strings,
 * UUIDs, which DuckDB prints in lower case as PostgreSQL does, and integers,
 * whose canonical text is their decimal digits); else the value a result
 * chunk would hold, for the column's codec to print; null for a type whose
 * value this does not rebuild.
 */
export type CanonicalRenderer = 'same' | ((text: string) => DuckDBValue);

export function canonicalRenderer(type: DuckDBType): CanonicalRenderer | null {
  switch (type.typeId) {
    case DuckDBTypeId.VARCHAR:
    case DuckDBTypeId.UUID:
    case DuckDBTypeId.TINYINT:
    case DuckDBTypeId.SMALLINT:
    case DuckDBTypeId.INTEGER:
    case DuckDBTypeId.BIGINT:
      return 'same';
    case DuckDBTypeId.BOOLEAN:
      return (t) => t === 'true';
    case DuckDBTypeId.DOUBLE:
      return double;
    case DuckDBTypeId.TIMESTAMP_TZ:
      return (t) => new DuckDBTimestampTZValue(BigInt(t));
    default:
      return null;
  }
}

/** DuckDB prints a double as the shortest text that reads back to it, and its infinities and NaN by name. */
function double(t: string): number {
  switch (t.toLowerCase()) {
    case 'inf':
    case 'infinity':
      return Number.POSITIVE_INFINITY;
    case '-inf':
    case '-infinity':
      return Number.NEGATIVE_INFINITY;
    case 'nan':
    case '-nan':
      return Number.NaN;
    default:
      return Number(t);
  }
}
