import { DuckDBTimestampTZValue, DuckDBTypeId, type DuckDBType, type DuckDBValue } from '@duckdb/node-api';

/**
 * A ledger row's canonical texts (the hash pre-image's: CAST(value AS
 * VARCHAR), a timestamp with time zone as microseconds since the epoch)
 * turned back into the values a result chunk would hold, so that the same
 * codecs render them: the writer's rows of a session can then be served
 * exactly as the engine would serve them once stored. Verification proves
 * these texts are the stored values' texts, row by row. Null for a type
 * whose value this does not rebuild.
 */
export function canonicalReader(type: DuckDBType): ((text: string) => DuckDBValue) | null {
  switch (type.typeId) {
    case DuckDBTypeId.BOOLEAN:
      return (t) => t === 'true';
    case DuckDBTypeId.TINYINT:
    case DuckDBTypeId.SMALLINT:
    case DuckDBTypeId.INTEGER:
      return (t) => Number(t);
    case DuckDBTypeId.BIGINT:
      return (t) => BigInt(t);
    case DuckDBTypeId.DOUBLE:
      return double;
    case DuckDBTypeId.VARCHAR:
    case DuckDBTypeId.UUID:
      return (t) => t;
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
