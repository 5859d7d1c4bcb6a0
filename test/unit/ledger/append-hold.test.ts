import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DuckDBEngine } from '../../../src/engines/duckdb/adapter/engine.js';
import { duckdbLedgers } from '../../../src/engines/duckdb/ledger/catalog-source.js';
import { LedgerWriter } from '../../../src/engines/duckdb/ledger/writer.js';
import type { EngineConnection } from '../../../src/engine/port.js';
import type { AppendJob } from '../../../src/ledger/chain/append.js';
import { STEPS_DDL, type LedgerTable } from '../../../src/ledger/chain/schema.js';

/**
 * The DuckDB writer's hold of the append order (a block whose INSERT
 * returns chain columns): rows chained at once keep their numbers at
 * commit, everything queued behind waits, a release gives the numbers
 * again, and a waiter that gives up leaves the queue.
 */
let engine: DuckDBEngine;
let conn: EngineConnection;
let table: LedgerTable;
let writer: LedgerWriter;

beforeAll(async () => {
  engine = await DuckDBEngine.open({ path: ':memory:' });
  conn = await engine.connect();
  await conn.run(STEPS_DDL);
  const catalog = duckdbLedgers(conn, (name) => name.startsWith('_cot'));
  table = (await catalog.find(['_cot_steps'])) as LedgerTable;
  writer = await LedgerWriter.open(engine, catalog, { journalPath: null });
});

afterAll(async () => {
  await writer.close();
  conn.close();
  await engine.close();
});

/** One step of `session`, as a client's row (the client columns in table order). */
function job(session: string): AppendJob {
  const client = table.columns.filter((c) => !table.serverColumns.has(c.name)).map((c) => c.name);
  const row = client.map((name) => (name === 'session_id' ? session : name === 'step_type' ? 'Action' : null));
  return { table, rows: [row] };
}

const pending = <T>(p: Promise<T>): Promise<boolean> => Promise.race([p.then(() => false), new Promise<boolean>((r) => setImmediate(() => r(true)))]);

describe('the append order held by a transaction', () => {
  it('keeps the numbers given at once, and makes the appends queued behind it wait for its commit', async () => {
    const [first] = await writer.append([job('h-1')]);
    const hold = await writer.hold(new AbortController().signal);
    const [a] = await hold.add([job('h-1')]);
    const [b] = await hold.add([job('h-1')]);
    expect(a?.firstSeq).toBe((first?.lastSeq ?? 0n) + 1n);
    expect(b?.firstSeq).toBe((a?.lastSeq ?? 0n) + 1n);
    const names = table.columns.map((c) => c.name);
    const at = (r: typeof a, col: string): string | null | undefined => r?.rows?.[0]?.[names.indexOf(col)];
    expect(at(b, 'prev_hash')).toBe(at(a, 'current_hash'));
    const behind = writer.append([job('h-2')]);
    expect(await pending(behind)).toBe(true);
    await hold.commit();
    const [after] = await behind;
    expect(after?.firstSeq).toBe((b?.lastSeq ?? 0n) + 1n);
    const stored = await conn.query(`SELECT step_index, current_hash, ledger_seq FROM _cot_steps WHERE session_id = 'h-1' ORDER BY step_index`);
    expect(stored.map((r) => [Number(r[0]), r[1], BigInt(r[2] as bigint)])).toEqual([
      [0, expect.any(String), first?.firstSeq],
      [1, at(a, 'current_hash'), a?.firstSeq],
      [2, at(b, 'current_hash'), b?.firstSeq],
    ]);
  });

  it('gives a released hold s numbers to the next append', async () => {
    const hold = await writer.hold(new AbortController().signal);
    const [held] = await hold.add([job('h-3')]);
    hold.release();
    const [next] = await writer.append([job('h-3')]);
    expect(next?.firstSeq).toBe(held?.firstSeq);
    expect(await conn.query(`SELECT step_index FROM _cot_steps WHERE session_id = 'h-3'`)).toEqual([[0]]);
  });

  it('lets a waiting hold or append go when its signal fires, and serves the rest', async () => {
    const hold = await writer.hold(new AbortController().signal);
    const gaveUp = new AbortController();
    const waitingHold = writer.hold(gaveUp.signal);
    const waitingAppend = writer.append([job('h-4')], gaveUp.signal);
    const kept = writer.append([job('h-5')]);
    gaveUp.abort(new Error('canceled'));
    await expect(waitingHold).rejects.toThrow('canceled');
    await expect(waitingAppend).rejects.toThrow('canceled');
    expect(await pending(kept)).toBe(true);
    hold.release();
    await kept;
    expect(await conn.query(`SELECT session_id FROM _cot_steps WHERE session_id IN ('h-4', 'h-5')`)).toEqual([['h-5']]);
    // A commit with no rows writes nothing, and refuses more rows after it.
    const empty = await writer.hold(new AbortController().signal);
    await empty.commit();
    await expect(empty.add([job('h-6')])).rejects.toThrow('no longer held');
  });
});
