import { createRequire } from 'node:module';
import { DuckDBVarCharVector } from '@duckdb/node-api';
import type { DataRowWriter } from '../../../protocol/encode.js';

/**
 * The bytes of a string vector's items, read a few native calls per chunk
 * instead of one per string.
 *
 * A DuckDB string is 16 bytes in the vector: its length, then either the
 * bytes themselves (up to 12) or a pointer to them. The client library
 * copies each pointed-to string with its own native call, which is most of
 * what a long read of text costs (about 1 µs a string, ten times DuckDB's
 * own work for the read). The strings of one chunk point into a few
 * storage blocks, so this copies each run of nearby strings at once and
 * hands out views of the copy.
 *
 * A run only ever joins strings less than a page apart: every byte copied
 * then lies on a page that also holds bytes of a string DuckDB handed out,
 * so it is readable. A chunk whose strings scatter over more runs than
 * MAX_RUNS is read string by string, as the library does.
 */

interface Bindings {
  get_data_from_pointer(buffer: ArrayBuffer, pointerOffset: number, byteCount: number): Uint8Array;
}

// The copy of the native bindings the client library itself loaded.
const bindings = createRequire(createRequire(import.meta.url).resolve('@duckdb/node-api'))('@duckdb/node-bindings') as Bindings;

/** The fields of DuckDBVarCharVector that its getItem() reads. */
interface VarCharInternals {
  readonly dataView: DataView;
  readonly validity: { itemValid(index: number): boolean };
}

const PAGE = 4096;
const MAX_RUNS = 16;
const TWO_32 = 4294967296;

/** Where the pointer of a copy lives: get_data_from_pointer reads the address from a buffer. */
const address = new DataView(new ArrayBuffer(8));

/** A string vector's items, read as bytes. */
export interface StringColumn {
  /** Item `row`'s UTF-8 bytes (a view of a copy, which outlives the chunk), or null. */
  bytes(row: number): Uint8Array | null;
  /** Item `row` as a DataRow cell, copied once, from the copy into the row. */
  write(row: number, out: DataRowWriter): void;
}

/**
 * A reader of a string vector's first `rows` items, or null when the vector
 * is not the shape this relies on, and the caller uses getItem() instead.
 */
export function stringColumn(vector: unknown, rows: number): StringColumn | null {
  if (!(vector instanceof DuckDBVarCharVector)) return null;
  const raw = vector as unknown as Partial<VarCharInternals>;
  const { dataView, validity } = raw;
  if (!(dataView instanceof DataView) || typeof validity?.itemValid !== 'function' || dataView.byteLength < rows * 16) return null;
  const runStart: number[] = [];
  const runEnd: number[] = [];
  const runOf = new Int8Array(rows).fill(-1);
  /** Where each item's bytes begin: in its run's copy, or (inlined, runOf -1) in the vector. */
  const offsets = new Float64Array(rows);
  /** Each item's byte length, or -1 for NULL. */
  const lengths = new Int32Array(rows);
  let scattered = false;
  for (let r = 0; r < rows && !scattered; r++) {
    const length = validity.itemValid(r) ? dataView.getUint32(r * 16, true) : -1;
    lengths[r] = length;
    if (length <= 12) {
      offsets[r] = r * 16 + 4;
      continue;
    }
    const start = dataView.getUint32(r * 16 + 8, true) + dataView.getUint32(r * 16 + 12, true) * TWO_32;
    const end = start + length;
    offsets[r] = start;
    let run = -1;
    for (let k = 0; k < runStart.length; k++) {
      if (start < (runEnd[k] as number) + PAGE && end > (runStart[k] as number) - PAGE) {
        run = k;
        break;
      }
    }
    if (run === -1) {
      if (runStart.length === MAX_RUNS) scattered = true;
      else {
        runStart.push(start);
        runEnd.push(end);
        run = runStart.length - 1;
      }
    } else {
      runStart[run] = Math.min(runStart[run] as number, start);
      runEnd[run] = Math.max(runEnd[run] as number, end);
    }
    runOf[r] = run;
  }
  if (scattered) return null;
  const copies = runStart.map((start, k) => {
    address.setUint32(0, start % TWO_32, true);
    address.setUint32(4, Math.floor(start / TWO_32), true);
    return bindings.get_data_from_pointer(address.buffer as ArrayBuffer, 0, (runEnd[k] as number) - start);
  });
  for (let r = 0; r < rows; r++) {
    const run = runOf[r] as number;
    if (run !== -1) offsets[r] = (offsets[r] as number) - (runStart[run] as number);
  }
  return new CopiedStrings(new Uint8Array(dataView.buffer, dataView.byteOffset, rows * 16), copies, runOf, offsets, lengths);
}

class CopiedStrings implements StringColumn {
  constructor(
    /** The vector's own 16-byte items, where strings of up to 12 bytes lie inlined. */
    private readonly inline: Uint8Array,
    private readonly copies: readonly Uint8Array[],
    private readonly runOf: Int8Array,
    private readonly offsets: Float64Array,
    private readonly lengths: Int32Array,
  ) {}

  private source(row: number): Uint8Array {
    const run = this.runOf[row] as number;
    return run === -1 ? this.inline : (this.copies[run] as Uint8Array);
  }

  bytes(row: number): Uint8Array | null {
    const length = this.lengths[row] as number;
    if (length < 0) return null;
    const from = this.offsets[row] as number;
    return this.source(row).subarray(from, from + length);
  }

  write(row: number, out: DataRowWriter): void {
    const length = this.lengths[row] as number;
    if (length < 0) out.nullCell();
    else {
      const from = this.offsets[row] as number;
      out.bytesCell(this.source(row), from, from + length);
    }
  }
}
