import { describe, expect, it } from 'vitest';
import { SessionCache, type Cells } from '../../../src/engines/duckdb/handler/session-cache.js';
import type { LedgerTable } from '../../../src/ledger/chain/schema.js';
import { dataRowCells } from '../../../src/protocol/encode.js';

const columns = ['trace_id', 'session_id', 'step_index', 'content', 'ledger_seq'];
const steps = {
  catalog: 'db',
  schema: 'main',
  name: '_cot_steps',
  columns: columns.map((name) => ({ name, type: 'VARCHAR', defaultSql: null, notNull: false })),
  chainKey: 'session_id',
  serverColumns: new Set<string>(),
  isSteps: true,
  journaled: true,
  hashVersion: 'cotwire/v1',
  redactions: null,
  retention: null,
} satisfies LedgerTable;

const row = (session: string, i: number, content = 'x'.repeat(100)): Cells => [`t-${session}-${i}`, session, String(i), content, String(i + 1)];

const cellsOf = (frame: Buffer | undefined): Array<string | null> | undefined => (frame === undefined ? undefined : dataRowCells(frame));

function load(cache: SessionCache, session: string, n: number): void {
  cache.startLoad(session);
  cache.finishLoad(session, 'UTC', 'layout', cache.cachedRows(Array.from({ length: n }, (_, i) => row(session, i))));
}

describe('SessionCache', () => {
  it('keeps sessions within its budget, dropping the least recently used', () => {
    const cache = new SessionCache(steps, 64 * 1024);
    for (let s = 0; s < 100; s++) load(cache, `s${s}`, 10);
    const { sessions, bytes } = cache.size;
    expect(bytes).toBeLessThanOrEqual(64 * 1024);
    expect(sessions).toBeGreaterThan(5);
    expect(sessions).toBeLessThan(100);
    expect(cache.session('s99')).toBeDefined();
    expect(cache.session('s0')).toBeUndefined();
    // A step of a dropped session is gone with it.
    expect(cache.step('t-s0-0')).toBeUndefined();
    expect(cellsOf(cache.step('t-s99-3')?.row.frame)).toEqual(row('s99', 3));
  });

  it('does not keep a session larger than an eighth of its budget', () => {
    const cache = new SessionCache(steps, 64 * 1024);
    load(cache, 'big', 200);
    expect(cache.session('big')).toBeUndefined();
    expect(cache.size.bytes).toBe(0);
  });

  it('keeps the appends reported while a session is read that the read did not see, and only those', () => {
    const cache = new SessionCache(steps, 1024 * 1024);
    cache.startLoad('s');
    cache.appended([
      {
        table: steps,
        rows: [
          ['t-s-2', 's', '2', 'c', '3'],
          ['t-s-3', 's', '3', 'c', '4'],
          ['t-o-0', 'other', '0', 'c', '5'],
        ],
      },
    ]);
    cache.finishLoad('s', 'UTC', 'layout', cache.cachedRows([row('s', 0), row('s', 1), row('s', 2)]));
    expect(cache.session('s')?.pending).toEqual([{ traceId: 't-s-3', seq: 4, texts: ['t-s-3', 's', '3', 'c', '4'] }]);
    cache.appended([{ table: steps, rows: [['t-s-4', 's', '4', 'c', '6']] }]);
    expect(cache.session('s')?.pending.map((p) => p.traceId)).toEqual(['t-s-3', 't-s-4']);
    cache.extend(cache.session('s') as NonNullable<ReturnType<SessionCache['session']>>, cache.cachedRows([row('s', 3)]));
    expect(cache.session('s')?.pending.map((p) => p.traceId)).toEqual(['t-s-4']);
    expect(cache.session('s')?.rows).toHaveLength(4);
    expect(cellsOf(cache.step('t-s-3')?.row.frame)).toEqual(row('s', 3));
    // Appends to other ledgers are not the session's.
    cache.appended([{ table: { ...steps, name: '_cot_other' }, rows: [['t-s-9', 's', '9', 'c', '9']] }]);
    expect(cache.session('s')?.pending).toHaveLength(1);
  });

  it('holds a session from its first step, and keeps sessions nobody reads within the budget', () => {
    const cache = new SessionCache(steps, 64 * 1024);
    cache.appended([
      {
        table: steps,
        rows: [
          ['t-n-0', 'new', '0', 'c', '1'],
          ['t-n-1', 'new', '1', 'c', '2'],
          ['t-m-5', 'middle', '5', 'c', '3'],
        ],
      },
    ]);
    expect(cache.session('new')).toMatchObject({ rows: [], zone: '', pending: [{ traceId: 't-n-0' }, { traceId: 't-n-1' }] });
    // A session first seen in the middle is not held: its earlier steps are not known.
    expect(cache.session('middle')).toBeUndefined();
    for (let s = 0; s < 10_000; s++) cache.appended([{ table: steps, rows: [[`t-${s}`, `s${s}`, '0', 'c', String(s)]] }]);
    expect(cache.size.bytes).toBeLessThanOrEqual(64 * 1024);
    expect(cache.session('s9999')?.pending).toHaveLength(1);
    expect(cache.session('new')).toBeUndefined();
  });

  it('forgets a read that was abandoned', () => {
    const cache = new SessionCache(steps, 1024 * 1024);
    cache.startLoad('s');
    cache.abortLoad('s');
    cache.finishLoad('s', 'UTC', 'layout', cache.cachedRows([row('s', 0)]));
    expect(cache.session('s')).toBeUndefined();
  });

  it("renders a read session's appends once the current callbacks are done, and survives a renderer that throws", async () => {
    const cache = new SessionCache(steps, 1024 * 1024);
    load(cache, 'read', 2);
    load(cache, 'broken', 2);
    const read = cache.session('read');
    const broken = cache.session('broken');
    if (read === undefined || broken === undefined) throw new Error('both sessions are held');
    read.render = (texts) => texts.map((t) => [...t]);
    broken.render = () => {
      throw new Error('cannot render');
    };
    const texts = (session: string): Array<string | null> => row(session, 2).map((c) => (typeof c === 'string' ? c : null));
    cache.appended([{ table: steps, rows: [texts('read'), texts('broken')] }]);
    // Not before the append's answer is written...
    expect(read.pending).toHaveLength(1);
    await new Promise((resolve) => setImmediate(resolve));
    // ...but before the next read: rendered and held, ready to be sent.
    expect(read.pending).toHaveLength(0);
    expect(cellsOf(read.rows[2]?.frame)).toEqual(row('read', 2));
    expect(cache.stats.appendsRead).toBe(1);
    // The failing one waits for its next reader, who renders it (and meets the error) as before.
    expect(broken.pending).toHaveLength(1);
    expect(broken.render).toBeNull();
  });
});
