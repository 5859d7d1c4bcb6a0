import { describe, expect, it } from 'vitest';
import type { EngineConnection } from '../../../src/engine/port.js';
import { PgError } from '../../../src/errors/pg-error.js';
import type { LedgerWriter } from '../../../src/engines/duckdb/ledger/writer.js';
import type { AppendJob } from '../../../src/ledger/chain/append.js';
import type { ResultSink } from '../../../src/session/handler-port.js';
import { SessionSettings } from '../../../src/engines/duckdb/handler/settings.js';
import { TransactionState } from '../../../src/engines/duckdb/handler/transaction.js';

// The transaction object on its own, against an engine and a writer that
// record what they are asked: what reaches DuckDB, and what reaches the
// writer, for each way a transaction can go.

interface Harness {
  readonly tx: TransactionState;
  readonly settings: SessionSettings;
  readonly engineCalls: string[];
  readonly appended: AppendJob[][];
  readonly ends: boolean[];
  readonly notices: string[];
  readonly sink: ResultSink;
  failWriter: boolean;
  failEngine: RegExp | null;
}

function harness(role: 'reader' | 'writer' = 'writer'): Harness {
  const h = { engineCalls: [], appended: [], ends: [], notices: [], failWriter: false, failEngine: null } as unknown as Harness & {
    failWriter: boolean;
    failEngine: RegExp | null;
  };
  const engine = {
    run: async (sql: string) => {
      h.engineCalls.push(sql);
      if (h.failEngine?.test(sql) === true) throw new PgError('XX000', 'engine says no');
    },
  } as unknown as EngineConnection;
  const writer = {
    append: async (jobs: readonly AppendJob[]) => {
      if (h.failWriter) throw new PgError('40001', 'the writer refused the batch');
      h.appended.push([...jobs]);
      return [];
    },
  } as unknown as LedgerWriter;
  const settings = new SessionSettings(new Map());
  const sink = { notice: (n: PgError) => h.notices.push(`${n.code} ${n.message}`) } as unknown as ResultSink;
  Object.assign(h, { settings, sink, tx: new TransactionState(engine, writer, settings, role === 'reader', (changed) => h.ends.push(changed)) });
  return h;
}

const job = (n: number): AppendJob => ({ table: { name: `_cot_${n}` }, rows: [[String(n)]] }) as unknown as AppendJob;

describe('TransactionState', () => {
  it('sends an autocommit append to the writer at once, and a block’s at COMMIT as one unit', async () => {
    const h = harness();
    await h.tx.append(job(1));
    expect(h.appended).toEqual([[job(1)]]);
    await h.tx.begin(null, h.sink);
    await h.tx.append(job(2));
    await h.tx.append(job(3));
    expect(h.appended).toHaveLength(1);
    expect(await h.tx.commit(h.sink)).toBe('COMMIT');
    expect(h.appended).toEqual([[job(1)], [job(2), job(3)]]);
    expect(h.engineCalls).toEqual(['BEGIN TRANSACTION', 'COMMIT']);
    expect(h.tx.status).toBe('I');
    expect(h.ends).toEqual([false]);
  });

  it('drops a block’s appends at ROLLBACK, in the failed state, and when a string fails', async () => {
    const h = harness();
    await h.tx.begin(null, h.sink);
    await h.tx.append(job(1));
    await h.tx.rollback(h.sink);
    await h.tx.begin(null, h.sink);
    await h.tx.append(job(2));
    h.tx.fail();
    expect(() => h.tx.checkNotFailed()).toThrow(/current transaction is aborted/);
    expect(await h.tx.commit(h.sink)).toBe('ROLLBACK');
    await h.tx.beginImplicit();
    await h.tx.append(job(3));
    await h.tx.endImplicit(false);
    expect(h.appended).toEqual([]);
    expect(h.engineCalls).toEqual(['BEGIN TRANSACTION', 'ROLLBACK', 'BEGIN TRANSACTION', 'ROLLBACK', 'BEGIN TRANSACTION', 'ROLLBACK']);
  });

  it('ends the whole transaction when the writer refuses its appends at COMMIT: rolled back, settings and cursors with it', async () => {
    const h = harness();
    await h.tx.begin(null, h.sink);
    h.settings.set('TimeZone', 'Asia/Tokyo', true);
    h.tx.savepoint('a');
    await h.tx.append(job(1));
    h.failWriter = true;
    await expect(h.tx.commit(h.sink)).rejects.toThrow('the writer refused the batch');
    expect(h.tx.status).toBe('I');
    expect(h.engineCalls).toEqual(['BEGIN TRANSACTION', 'ROLLBACK']);
    // SET LOCAL ends with its transaction, the cursors close, and no savepoint survives.
    expect(h.settings.get('TimeZone')).not.toBe('Asia/Tokyo');
    expect(h.ends).toEqual([false]);
    expect(() => h.tx.release('a')).toThrow(/can only be used in transaction blocks/);
    h.failWriter = false;
    await h.tx.begin(null, h.sink);
    await h.tx.append(job(2));
    expect(await h.tx.commit(h.sink)).toBe('COMMIT');
    expect(h.appended).toEqual([[job(2)]]);
  });

  it('says so when a refused flush ends a multi-statement string', async () => {
    const h = harness();
    await h.tx.beginImplicit();
    await h.tx.append(job(1));
    h.failWriter = true;
    await expect(h.tx.endImplicit(true)).rejects.toThrow('the writer refused the batch');
    expect(h.tx.status).toBe('I');
    expect(h.tx.autocommit).toBe(true);
    expect(h.engineCalls).toEqual(['BEGIN TRANSACTION', 'ROLLBACK']);
    expect(h.ends).toEqual([false]);
  });

  it('emulates ROLLBACK TO only where it is exact', async () => {
    const h = harness();
    await h.tx.begin(null, h.sink);
    h.tx.savepoint('clean');
    h.tx.wrote();
    await h.tx.append(job(1));
    // Nothing was written before the savepoint: the engine transaction restarts, and the append is gone.
    await h.tx.rollbackTo('clean');
    expect(h.engineCalls).toEqual(['BEGIN TRANSACTION', 'ROLLBACK', 'BEGIN TRANSACTION']);
    h.tx.wrote();
    h.tx.savepoint('after');
    h.tx.fail();
    // Nothing was written since this one: only the failed state clears.
    await h.tx.rollbackTo('after');
    expect(h.tx.status).toBe('T');
    h.tx.wrote();
    await expect(h.tx.rollbackTo('clean')).resolves.toBeUndefined();
    h.tx.wrote();
    h.tx.savepoint('middle');
    h.tx.wrote();
    await expect(h.tx.rollbackTo('middle')).rejects.toMatchObject({ code: '0A000' });
    expect(h.tx.status).toBe('E');
    expect(await h.tx.commit(h.sink)).toBe('ROLLBACK');
    expect(h.appended).toEqual([]);
  });

  it('begins every transaction of a reader, and every read-only one, read-only in DuckDB too', async () => {
    const reader = harness('reader');
    await reader.tx.begin(null, reader.sink);
    await reader.tx.rollback(reader.sink);
    await reader.tx.beginImplicit();
    await reader.tx.endImplicit(true);
    expect(reader.engineCalls).toEqual(['BEGIN TRANSACTION READ ONLY', 'ROLLBACK', 'BEGIN TRANSACTION READ ONLY', 'COMMIT']);
    const writer = harness();
    await writer.tx.begin(true, writer.sink);
    expect(writer.tx.readOnly()).toBe(true);
    await writer.tx.setReadOnly(false, writer.sink);
    expect(writer.tx.readOnly()).toBe(false);
    expect(writer.engineCalls).toEqual(['BEGIN TRANSACTION READ ONLY', 'ROLLBACK', 'BEGIN TRANSACTION']);
    writer.tx.queried();
    await writer.tx.setReadOnly(true, writer.sink);
    await expect(writer.tx.setReadOnly(false, writer.sink)).rejects.toMatchObject({ code: '25001' });
  });

  it('gives a reader’s autocommit statement a read-only engine transaction that lasts as long as its portal', async () => {
    const reader = harness('reader');
    const first = {};
    const second = {};
    await reader.tx.beginStatement(first);
    // The same portal's next Execute stays in its transaction.
    await reader.tx.beginStatement(first);
    expect(reader.tx.status).toBe('I');
    // Another statement ends it first (DuckDB reads the rest of the first portal's rows then).
    await reader.tx.beginStatement(second);
    await reader.tx.endStatement(second, false);
    await reader.tx.beginStatement(first);
    reader.tx.statementClosed(first);
    reader.tx.statementClosed(first);
    await reader.tx.begin(null, reader.sink);
    await reader.tx.beginStatement(second);
    await reader.tx.rollback(reader.sink);
    expect(reader.engineCalls).toEqual([
      'BEGIN TRANSACTION READ ONLY',
      'COMMIT',
      'BEGIN TRANSACTION READ ONLY',
      'ROLLBACK',
      'BEGIN TRANSACTION READ ONLY',
      'COMMIT',
      'BEGIN TRANSACTION READ ONLY',
      'ROLLBACK',
    ]);
    const writer = harness();
    await writer.tx.beginStatement(first);
    await writer.tx.endStatement(first, true);
    expect(writer.engineCalls).toEqual([]);
    writer.settings.set('default_transaction_read_only', 'on');
    await writer.tx.beginStatement(first);
    await writer.tx.atomically(async () => undefined);
    expect(writer.engineCalls).toEqual(['BEGIN TRANSACTION READ ONLY', 'COMMIT', 'BEGIN TRANSACTION', 'COMMIT']);
  });

  it('runs atomic work in its own engine transaction only when none is open, and rolls it back on failure', async () => {
    const h = harness();
    expect(await h.tx.atomically(async () => 7)).toBe(7);
    await expect(
      h.tx.atomically(async () => {
        throw new Error('half-way');
      }),
    ).rejects.toThrow('half-way');
    await h.tx.begin(null, h.sink);
    await h.tx.atomically(async () => undefined);
    expect(h.engineCalls).toEqual(['BEGIN TRANSACTION', 'COMMIT', 'BEGIN TRANSACTION', 'ROLLBACK', 'BEGIN TRANSACTION']);
  });

  it('reports a ledger created in the transaction when it ends, and warns as PostgreSQL does', async () => {
    const h = harness();
    await h.tx.begin(null, h.sink);
    h.tx.ledgerCreated('_cot_New');
    expect(h.tx.createdHere('_COT_NEW')).toBe(true);
    await h.tx.begin(null, h.sink);
    await h.tx.rollback(h.sink);
    await h.tx.rollback(h.sink);
    await h.tx.setReadOnly(true, h.sink);
    expect(h.ends).toEqual([true]);
    expect(h.notices).toEqual([
      '25001 there is already a transaction in progress',
      '25P01 there is no transaction in progress',
      '25P01 SET TRANSACTION can only be used in transaction blocks',
    ]);
  });
});
