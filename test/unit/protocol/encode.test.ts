import { describe, expect, it } from 'vitest';
import { Parser } from 'pg-protocol/dist/parser.js';
import { BackendWriter, dataRowCells, dataRowFrames } from '../../../src/protocol/encode.js';

/** The DataRow messages in `bytes`, as node-postgres's parser (a decoder independent of ours) reads them. */
function parsedRows(bytes: Buffer): Array<Array<string | null>> {
  const rows: Array<Array<string | null>> = [];
  new Parser().parse(bytes, (msg) => {
    if (msg.name === 'dataRow') rows.push((msg as unknown as { fields: Array<string | null> }).fields);
  });
  return rows;
}

/** Cells of every length around the short-cell path's bound, in ASCII and not. */
function generatedCells(seed: number): Array<string | null> {
  let x = seed;
  const next = (n: number): number => {
    x = (x * 1103515245 + 12345) % 2 ** 31;
    return x % n;
  };
  const alphabet = ['a', '0', ' ', '~', '\x7f', 'é', '€', '😀', '\u2028', 'ﬀ', '\0'];
  const cells: Array<string | null> = [];
  for (let i = 0; i < 40; i++) {
    if (next(10) === 0) {
      cells.push(null);
      continue;
    }
    const length = [0, 1, 63, 64, 65, 300][next(6)] as number;
    const ascii = next(2) === 0;
    let s = '';
    while (s.length < length) s += ascii ? String.fromCharCode(32 + next(95)) : (alphabet[next(alphabet.length)] as string);
    cells.push(s);
  }
  return cells;
}

describe('DataRow encoding', () => {
  it('writes every cell as node-postgres reads it, whatever its length and characters', () => {
    const writer = new BackendWriter();
    const rows = Array.from({ length: 200 }, (_, i) => generatedCells(i + 1));
    for (const row of rows) writer.dataRow(row);
    expect(parsedRows(writer.take())).toEqual(rows);
  });

  it('keeps each row as one message whose cells read back as they were given, across the copies rows are shared in', () => {
    const rows = Array.from({ length: 400 }, (_, i) => generatedCells(1000 + i));
    const frames = dataRowFrames(rows);
    expect(frames).toHaveLength(rows.length);
    expect(frames.map(dataRowCells)).toEqual(rows);
    expect(parsedRows(Buffer.concat(frames))).toEqual(rows);
    // More than one copy was made: the rows outgrew a copy's 64 KiB.
    expect(new Set(frames.map((f) => f.buffer)).size).toBeGreaterThan(1);
  });

  it('writes the same messages cell by cell, text or bytes from a range of a larger array, growing its buffer within a row', () => {
    const rows = Array.from({ length: 300 }, (_, i) => generatedCells(5000 + i));
    const whole = new BackendWriter();
    const byCell = new BackendWriter();
    for (const [i, row] of rows.entries()) {
      whole.dataRow(row);
      byCell.beginDataRow(row.length);
      for (const [c, cell] of row.entries()) {
        if (cell === null) byCell.nullCell();
        else if ((i + c) % 2 === 0) byCell.textCell(cell);
        else {
          // The cell's bytes inside a larger array, as an engine's copy of many strings holds them.
          const bytes = Buffer.from(cell, 'utf8');
          const around = Buffer.concat([Buffer.from('<<<'), bytes, Buffer.from('>>>')]);
          byCell.bytesCell(new Uint8Array(around.buffer, around.byteOffset, around.length), 3, 3 + bytes.length);
        }
      }
      byCell.endDataRow();
    }
    byCell.beginDataRow(1);
    byCell.textCell('x'.repeat(100_000));
    byCell.endDataRow();
    whole.dataRow(['x'.repeat(100_000)]);
    const written = byCell.take();
    expect(written.equals(whole.take())).toBe(true);
    expect(parsedRows(written)).toEqual([...rows, ['x'.repeat(100_000)]]);
    expect(() => byCell.beginDataRow(0x8000)).toThrow(RangeError);
  });

  it('takes back a row begun and not ended, and only such a row', () => {
    const w = new BackendWriter();
    w.beginDataRow(1);
    w.textCell('kept');
    w.endDataRow();
    w.abandonDataRow();
    w.beginDataRow(2);
    w.textCell('half');
    w.abandonDataRow();
    w.dataRow(['after']);
    expect(parsedRows(w.take())).toEqual([['kept'], ['after']]);
  });

  it('refuses a row of more columns than the message counts in its int16', () => {
    expect(() => new BackendWriter().dataRow(new Array<string>(0x8000).fill('x'))).toThrow(RangeError);
    expect(parsedRows(new BackendWriter().dataRow(new Array<string>(0x7fff).fill('x')).take())[0]).toHaveLength(0x7fff);
  });

  it('hands out copies, not the writer buffer the rows were built in', () => {
    const [first] = dataRowFrames([['a'.repeat(5000)]]);
    dataRowFrames([['b'.repeat(5000)], ['c'.repeat(2_000_000)]]);
    expect(dataRowCells(first as Buffer)).toEqual(['a'.repeat(5000)]);
  });
});
