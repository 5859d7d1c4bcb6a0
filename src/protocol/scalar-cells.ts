import { TypeOid } from './type-oids.js';

/** A value the server computes itself for a result row: text, a boolean or an integer. */
export type ScalarCell = string | boolean | bigint | number | null;

/** A computed value as a DataRow cell, in text or in PostgreSQL's binary format for bool, int8 and int4 (text for any other type). */
export function scalarCell(v: ScalarCell, type: number, binary: boolean): string | Uint8Array | null {
  if (v === null) return null;
  if (!binary) return typeof v === 'boolean' ? (v ? 't' : 'f') : String(v);
  switch (type) {
    case TypeOid.bool:
      return Uint8Array.of(v === true ? 1 : 0);
    case TypeOid.int8: {
      const b = Buffer.alloc(8);
      b.writeBigInt64BE(BigInt(v));
      return b;
    }
    case TypeOid.int4: {
      const b = Buffer.alloc(4);
      b.writeInt32BE(Number(v));
      return b;
    }
    default:
      return Buffer.from(String(v), 'utf8');
  }
}
