import { describe, expect, it } from 'vitest';
import { decodeSeqs, encodeSeqs, RetainedSeqs } from '../../../src/ledger/erasure/retention-sql.js';
import { checkRetentionFloor, RetentionJob } from '../../../src/ledger/erasure/retention.js';

describe('the record of removed ledger_seq values', () => {
  it('encodes runs as ranges and reads them back', () => {
    expect(encodeSeqs([9n, 1n, 2n, 3n, 5n, 10n, 11n, 12n])).toBe('1..3,5,9..12');
    expect(encodeSeqs([7n])).toBe('7');
    expect(decodeSeqs('1..3,5,9..12')).toEqual([
      [1, 3],
      [5, 5],
      [9, 12],
    ]);
    // Malformed parts account for nothing.
    expect(decodeSeqs('x,3..1,4..,,6')).toEqual([[6, 6]]);
  });

  it('answers membership over merged ranges', () => {
    const seqs = new RetainedSeqs([
      [10, 12],
      [1, 3],
      [4, 5],
      [20, 20],
    ]);
    expect([0, 1, 3, 4, 5, 6, 9, 10, 12, 13, 19, 20, 21].map((n) => seqs.has(n))).toEqual([
      false,
      true,
      true,
      true,
      true,
      false,
      false,
      true,
      true,
      false,
      false,
      true,
      false,
    ]);
    expect(seqs.size).toBe(9);
    expect(new RetainedSeqs([]).has(1)).toBe(false);
  });
});

describe('the retention job', () => {
  it('runs shortly after the start, then at each interval, reports failures, and stops after the run in progress', async () => {
    const runs: number[] = [];
    const errors: unknown[] = [];
    let release: () => void = () => undefined;
    const job = new RetentionJob(
      async () => {
        runs.push(Date.now());
        if (runs.length === 2) throw new Error('engine busy');
        if (runs.length === 3) await new Promise<void>((r) => (release = r));
      },
      (err) => errors.push(err),
      20,
      5,
    );
    job.start();
    while (runs.length < 3) await new Promise((r) => setTimeout(r, 5));
    expect(errors).toHaveLength(1);
    let stopped = false;
    const stopping = job.stop().then(() => (stopped = true));
    await new Promise((r) => setTimeout(r, 30));
    expect(stopped).toBe(false);
    release();
    await stopping;
    await new Promise((r) => setTimeout(r, 50));
    expect(runs).toHaveLength(3);
  });
});

describe('the retention floor', () => {
  it('refuses a period shorter than the floor with 22023, and none at or above it, nor any when the floor is 0', () => {
    expect(() => checkRetentionFloor(182.9, 183)).toThrow(
      expect.objectContaining({ code: '22023', message: 'a retention period of 182.9 days is shorter than ledger.retentionFloorDays (183)' }),
    );
    expect(() => checkRetentionFloor(0.5, 183)).toThrow(expect.objectContaining({ hint: expect.stringMatching(/retentionFloorDays: 0/) }));
    expect(() => checkRetentionFloor(183, 183)).not.toThrow();
    expect(() => checkRetentionFloor(3650, 183)).not.toThrow();
    expect(() => checkRetentionFloor(0.001, 0)).not.toThrow();
  });
});
