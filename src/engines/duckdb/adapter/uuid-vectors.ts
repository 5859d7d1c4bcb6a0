import { DuckDBUUIDVector } from '@duckdb/node-api';

/**
 * A UUID vector's items as PostgreSQL's text, read from the vector's bytes.
 *
 * The client library makes each item a 128-bit BigInt, then a value object,
 * then its text through BigInt arithmetic: about 1.3 µs a UUID, as much as
 * the rest of a streamed step's cells together. DuckDB holds a UUID as a
 * little-endian HUGEINT whose top bit is flipped (so that numeric order is
 * text order); its text is those 16 bytes from the top, in hex.
 */

/** The fields of DuckDBUUIDVector that its getItem() reads. */
interface UuidInternals {
  readonly dataView: DataView;
  readonly validity: { itemValid(index: number): boolean };
}

const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));

/** A reader of a UUID vector's first `rows` items as text, or null when the vector is not the shape this relies on. */
export function uuidColumn(vector: unknown, rows: number): ((row: number) => string | null) | null {
  if (!(vector instanceof DuckDBUUIDVector)) return null;
  const { dataView, validity } = vector as unknown as Partial<UuidInternals>;
  if (!(dataView instanceof DataView) || typeof validity?.itemValid !== 'function' || dataView.byteLength < rows * 16) return null;
  return (row) => {
    if (!validity.itemValid(row)) return null;
    const at = row * 16;
    const b = (i: number): string => HEX[dataView.getUint8(at + i)] as string;
    return `${HEX[dataView.getUint8(at + 15) ^ 0x80]}${b(14)}${b(13)}${b(12)}-${b(11)}${b(10)}-${b(9)}${b(8)}-${b(7)}${b(6)}-${b(5)}${b(4)}${b(3)}${b(2)}${b(1)}${b(0)}`;
  };
}
