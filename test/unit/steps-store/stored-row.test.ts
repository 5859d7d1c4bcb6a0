import { describe, expect, it } from 'vitest';
import { printFingerprint, storedFrame, storedMicros, storedRow, zonedColumns } from '../../../src/engines/duckdb/steps-store/stored-row.js';
import { dataRowCell, dataRowCells, dataRowFrames } from '../../../src/protocol/encode.js';

describe('a step as the row store keeps it', () => {
  it("holds the DataRow message, then each timestamp with time zone's microseconds, NULL as 0", () => {
    const texts = ['a', null, '-62135596800000000', '1764567367123456', 'ü ✓'];
    const frame = dataRowFrames([['a', null, 'x', 'y', 'ü ✓']])[0] as Buffer;
    const stored = storedRow(frame, texts, [1, 2, 3]);
    expect(storedFrame(stored).equals(frame)).toBe(true);
    expect([0, 1, 2].map((k) => storedMicros(stored, k))).toEqual([0n, -62135596800000000n, 1764567367123456n]);
    // Without such columns it is the message alone.
    expect(storedRow(frame, texts, [])).toBe(frame);
  });

  it('finds the timestamps with time zone among the columns, however the type is spelled', () => {
    const columns = [
      { name: 'trace_id', type: 'UUID', defaultSql: null, notNull: true },
      { name: 'created_at', type: 'TIMESTAMP WITH TIME ZONE', defaultSql: null, notNull: true },
      { name: 'seen', type: 'TIMESTAMP', defaultSql: null, notNull: false },
      { name: 'at', type: 'timestamp with time zone', defaultSql: null, notNull: false },
    ];
    expect(zonedColumns({ columns })).toEqual([1, 3]);
  });

  it('reads one cell of a DataRow message as its decoding reads it', () => {
    const cells = ['trace', null, '', 'ü ✓ 🚀', 'x'.repeat(300)];
    const frame = dataRowFrames([cells])[0] as Buffer;
    expect(cells.map((_, i) => dataRowCell(frame, i))).toEqual(dataRowCells(frame));
    expect(dataRowCell(frame, cells.length)).toBeNull();
  });

  it('fingerprints how the server prints: a codec that prints one sample otherwise gives another store layout', () => {
    const columns = [
      { name: 'confidence', type: 'DOUBLE', defaultSql: null, notNull: false },
      { name: 'created_at', type: 'TIMESTAMP WITH TIME ZONE', defaultSql: null, notNull: true },
    ];
    const seen: Array<ReadonlyArray<string | null>> = [];
    const print = (rows: ReadonlyArray<ReadonlyArray<string | null>>) => {
      seen.push(...rows);
      return dataRowFrames(rows.map((r) => r.map((t) => (t === null ? null : `printed ${t}`))));
    };
    const fingerprint = printFingerprint({ columns }, print);
    // Every sample of each column went through the printer.
    expect(new Set(seen.map((r) => r[0])).size).toBe(6);
    expect(new Set(seen.map((r) => r[1])).size).toBe(6);
    expect(printFingerprint({ columns }, print)).toBe(fingerprint);
    const otherwise = (rows: ReadonlyArray<ReadonlyArray<string | null>>) =>
      dataRowFrames(rows.map((r) => r.map((t) => (t === '1e-07' ? '1e-7' : t === null ? null : `printed ${t}`))));
    expect(printFingerprint({ columns }, otherwise)).not.toBe(fingerprint);
    expect(printFingerprint({ columns }, () => null)).toBe('unprintable');
  });
});
