import { closeSync, mkdtempSync, openSync, readFileSync, rmSync, statSync, truncateSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Journal, type JournalRecord } from '../../../src/engines/duckdb/ledger/journal.js';

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

  it('reports a record whose bytes do not match its hash, and reads the records written after it', async () => {
    const path = fresh();
    await written(path, [record(1), record(2)]);
    const fd = openSync(path, 'r+');
    writeSync(fd, Buffer.from('X'), 0, 1, 60);
    closeSync(fd);
    const { journal, records, tail } = Journal.open(path);
    journal.close(false);
    expect(records).toEqual([record(2)]);
    expect(tail).toMatchObject({ kind: 'corrupt', offset: 0, lost: { afterSeq: 0n, beforeSeq: record(2).firstSeq } });
    expect(tail.detail).toMatch(/does not match its SHA-256/);
  });

  it('tells a clean end from a torn record and from bytes that are no record', async () => {
    const path = fresh();
    await written(path, [record(1), record(2)]);
    const clean = Journal.open(path);
    clean.journal.close(false);
    expect(clean.tail).toMatchObject({ kind: 'clean', lost: null });
    const size = readFileSync(path).indexOf(Buffer.alloc(64));
    truncateSync(path, size - 5);
    const torn = Journal.open(path);
    torn.journal.close(false);
    expect(torn.records).toEqual([record(1)]);
    expect(torn.tail).toMatchObject({ kind: 'torn', lost: null });
    const fd = openSync(path, 'r+');
    writeSync(fd, Buffer.from('garbage'.repeat(10)), 0, 70, torn.tail.offset);
    closeSync(fd);
    const garbage = Journal.open(path);
    garbage.journal.close(false);
    expect(garbage.records).toEqual([record(1)]);
    expect(garbage.tail).toMatchObject({ kind: 'unrecognized', lost: null });
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
