import { createHash } from 'node:crypto';
import type { LedgerTable } from '../../../ledger/chain/schema.js';

/**
 * How the row store keeps a step: its DataRow message in text format, as
 * the engine prints the row in UTC, followed by the value of each timestamp
 * with time zone column (microseconds since the epoch, 8 bytes, 0 for
 * NULL). A cold read in UTC sends the message as it lies in the file; one
 * in another time zone prints those columns again.
 *
 * Rendering once, when the step is written, is what makes a cold replay
 * cheaper than PostgreSQL's: decoding 50 rows' texts, rendering them and
 * encoding their messages was two thirds of the server's time for it
 * (docs/benchmarks.md).
 */

/** The store's layout name for this format: a store kept otherwise is rebuilt. */
export const STORED_ROW_FORMAT = 'datarow-utc/1';

/** Prints steps' canonical texts as DataRow messages, the way the engine prints the stored rows in UTC. */
export interface StepPrinter {
  /** The result columns the messages are printed for: names and types, as a served read compares them. */
  readonly layout: string;
  /**
   * How this server prints (a digest of sample rows printed): a store printed otherwise, by a server
   * whose codecs have changed since, is rebuilt rather than served.
   */
  readonly fingerprint: string;
  /** Null when the engine cannot print one of the columns from its canonical text. */
  print(rows: ReadonlyArray<ReadonlyArray<string | null>>): Buffer[] | null;
}

/** The columns of `_cot_steps` that are timestamps with time zone, by position. */
export function zonedColumns(steps: Pick<LedgerTable, 'columns'>): number[] {
  const at: number[] = [];
  steps.columns.forEach((c, i) => {
    if (c.type.toUpperCase() === 'TIMESTAMP WITH TIME ZONE') at.push(i);
  });
  return at;
}

/** A step as the store keeps it, from its DataRow message (UTC) and its canonical texts. */
export function storedRow(frame: Buffer, texts: ReadonlyArray<string | null>, zoned: readonly number[]): Buffer {
  if (zoned.length === 0) return frame;
  const out = Buffer.allocUnsafe(frame.length + zoned.length * 8);
  frame.copy(out, 0);
  zoned.forEach((column, k) => {
    const text = texts[column];
    // A timestamp with time zone's canonical text is its microseconds since the epoch.
    out.writeBigInt64BE(text === null || text === undefined ? 0n : BigInt(text), frame.length + k * 8);
  });
  return out;
}

/** The DataRow message of a stored step (a view of it). */
export function storedFrame(stored: Buffer): Buffer {
  // The message's length, after its type byte, counts itself but not the type.
  return stored.subarray(0, 1 + stored.readInt32BE(1));
}

/** The microseconds of the k-th timestamp with time zone column of a stored step. */
export function storedMicros(stored: Buffer, k: number): bigint {
  return stored.readBigInt64BE(1 + stored.readInt32BE(1) + k * 8);
}

/** Canonical texts of each type that print in ways a codec could change: fractions, exponents, zones, eras. */
const SAMPLES: Readonly<Record<string, readonly string[]>> = {
  DOUBLE: ['0.1', '1e-07', '-0.0', '123456789012345680000', 'inf', 'nan'],
  BOOLEAN: ['true', 'false', 'true', 'false', 'true', 'false'],
  'TIMESTAMP WITH TIME ZONE': ['1764567367123456', '0', '-62135596800000001', '1764567367000000', '253402300799999999', '-1'],
};

/** A digest of sample rows as `print` prints them (the columns of other types print their text as it is). */
export function printFingerprint(steps: Pick<LedgerTable, 'columns'>, print: StepPrinter['print']): string {
  const rows = [0, 1, 2, 3, 4, 5].map((i) => steps.columns.map((c) => SAMPLES[c.type.toUpperCase()]?.[i] ?? null));
  const printed = print(rows);
  if (printed === null) return 'unprintable';
  const digest = createHash('sha256');
  for (const frame of printed) digest.update(frame);
  return digest.digest('hex').slice(0, 16);
}
