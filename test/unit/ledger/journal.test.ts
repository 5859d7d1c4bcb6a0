import { closeSync, mkdtempSync, openSync, rmSync, statSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Journal, type JournalRecord } from '../../../src/ledger/journal.js';

const dir = mkdtempSync(join(tmpdir(), 'cotwire-journal-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;
const fresh = (): string => join(dir, `j${n++}`);

function record(seq: number, rows = 1, content = 'a step'): JournalRecord {
  return {
    firstSeq: BigInt(seq),
    lastSeq: BigInt(seq + rows - 1),
    tables: [{ schema: 'main', name: '_cot_steps', rows: Array.from({ length: rows }, (_, i) => ['s', String(seq + i), content, null]) }],
  };
}

async function written(path: string, records: readonly JournalRecord[]): Promise<void> {
  const { journal } = Journal.open(path);
  for (const r of records) await journal.append(r);
  journal.close(false);
}

describe('the append journal', () => {
  it('gives back every record it made durable, in order, NULLs and unicode intact', async () => {
    const path = fresh();
    const records = [record(1), record(2, 3, 'héllo\nwörld 😀'), record(5)];
    await written(path, records);
    const { journal, records: read } = Journal.open(path);
    journal.close(false);
    expect(read).toEqual(records);
  });

  it('is preallocated, so that a synchronous write does not grow the file', async () => {
    const path = fresh();
    await written(path, [record(1)]);
    expect(statSync(path).size).toBeGreaterThanOrEqual(16 * 2 ** 20);
  });

  it('stops at a torn record: a crash mid-write loses only the unacknowledged record', async () => {
    const path = fresh();
    await written(path, [record(1), record(2)]);
    const { journal, records } = Journal.open(path);
    journal.close(false);
    expect(records).toHaveLength(2);
    // Overwrite the second record's tail with zeros, as a write cut short leaves it.
    const fd = openSync(path, 'r+');
    const firstLength = 40 + Buffer.byteLength(JSON.stringify({ first: '1', last: '1', tables: record(1).tables }));
    writeSync(fd, Buffer.alloc(20), 0, 20, firstLength + 50);
    closeSync(fd);
    const reopened = Journal.open(path);
    expect(reopened.records).toEqual([record(1)]);
    // The next record goes where the torn one was, and is read back after the first.
    await reopened.journal.append(record(2));
    reopened.journal.close(false);
    expect(Journal.open(path).records).toEqual([record(1), record(2)]);
  });

  it('stops at a record whose bytes do not match its hash', async () => {
    const path = fresh();
    await written(path, [record(1), record(2)]);
    const fd = openSync(path, 'r+');
    writeSync(fd, Buffer.from('X'), 0, 1, 60);
    closeSync(fd);
    const { journal, records } = Journal.open(path);
    journal.close(false);
    expect(records).toEqual([]);
  });

  it('is reused from its start once large, and never reads the older records left behind', async () => {
    const path = fresh();
    const big = record(2, 1, 'x'.repeat(9 * 2 ** 20));
    const { journal } = Journal.open(path);
    await journal.append(record(1));
    await journal.append(big);
    journal.reuseIfLarge();
    // The same length as record 1, so the old big record starts right after it, intact.
    await journal.append(record(3));
    journal.close(false);
    expect(Journal.open(path).records).toEqual([record(3)]);
  });

  it('reports a failed write as an I/O error that names the journal', async () => {
    const path = fresh();
    const { journal } = Journal.open(path);
    journal.close(false);
    const err = (await journal.append(record(1)).catch((e: unknown) => e)) as { code?: string; message?: string };
    expect(err.code).toBe('58030');
    expect(err.message).toContain(path);
  });

  it('is removed on close when asked, and created again on open', async () => {
    const path = fresh();
    const { journal } = Journal.open(path);
    await journal.append(record(1));
    journal.close(true);
    expect(() => statSync(path)).toThrow();
    const again = Journal.open(path);
    again.journal.close(false);
    expect(again.records).toEqual([]);
  });
});
