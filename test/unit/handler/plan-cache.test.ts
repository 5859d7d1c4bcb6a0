import { describe, expect, it } from 'vitest';
import type { EngineStatement } from '../../../src/engine/port.js';
import { PlanCache, type PlanState, Statement } from '../../../src/engines/duckdb/handler/plan.js';

interface MovableState {
  services: { catalogSnapshot: { generation: number }; ledgers: { version: number } };
  settings: { version: number };
  tx: { status: string };
  tempFunctions: Map<string, unknown>;
}

/** A connection's state as the cache reads it; each field can be moved on by a test. */
function state(): MovableState & PlanState {
  return {
    services: { catalogSnapshot: { generation: 0 }, ledgers: { version: 0 } },
    settings: { version: 0 },
    tx: { status: 'I' },
    tempFunctions: new Map<string, unknown>(),
  };
}

/** A plan of the engine's, of `kind`, whose close is counted. */
function enginePlan(kind = 'SELECT'): { statement: Statement; closed: () => number } {
  let closes = 0;
  const engine = { kind, paramTypes: [], columns: [], close: () => closes++ } as unknown as EngineStatement;
  const statement = new Statement({ kind: 'engine', statement: engine, tokens: [], declares: [] } as never, [], null);
  return { statement, closed: () => closes };
}

describe('the plans kept of unnamed statements', () => {
  it('hands a plan out again for the same text, and never for another text, parameter types or offset', () => {
    const discarded: Statement[] = [];
    const cache = new PlanCache(state(), (s) => discarded.push(s));
    const { statement } = enginePlan();
    const found = cache.find('SELECT 1', []);
    expect(found.kept).toBeUndefined();
    cache.keep(found.key, statement);
    expect(cache.find('SELECT 1', []).kept).toBe(statement);
    expect(cache.find('SELECT 2', []).kept).toBeUndefined();
    expect(cache.find('SELECT 1', [23]).kept).toBeUndefined();
    expect(cache.find({ text: 'SELECT 1', offset: 9 }, []).kept).toBeUndefined();
    expect(discarded).toEqual([]);
  });

  it('keys a plan by everything planning read: the catalog, the ledgers, the settings and the transaction', () => {
    const s = state();
    const cache = new PlanCache(s, () => undefined);
    const { statement } = enginePlan();
    cache.keep(cache.find('SELECT * FROM t', []).key, statement);
    const moves: Array<() => void> = [
      () => (s.services.catalogSnapshot.generation += 1),
      () => (s.services.ledgers.version += 1),
      () => (s.settings.version += 1),
      () => (s.tx.status = 'T'),
    ];
    for (const move of moves) {
      move();
      expect(cache.find('SELECT * FROM t', []).kept).toBeUndefined();
    }
  });

  it('keeps nothing on a connection that made a temporary function, nor a plan that is not an append or a query', () => {
    const s = state();
    const cache = new PlanCache(s, () => undefined);
    const ddl = enginePlan('CREATE');
    cache.keep(cache.find('CREATE TABLE t (a int)', []).key, ddl.statement);
    expect(cache.find('CREATE TABLE t (a int)', []).kept).toBeUndefined();
    s.tempFunctions.set('f', {});
    expect(cache.find('SELECT f()', []).key).toBeNull();
  });

  it('closes a plan only when the cache let go of it and no statement holds it', () => {
    const discarded: Statement[] = [];
    const cache = new PlanCache(state(), (s) => discarded.push(s));
    const first = enginePlan();
    cache.keep(cache.find('SELECT 0', []).key, first.statement);
    // The session's unnamed statement is replaced by a Parse of the same text: held twice, then once.
    expect(cache.find('SELECT 0', []).kept).toBe(first.statement);
    expect(cache.released(first.statement)).toBe(false);
    // Thirty-two other texts push it out while a statement still holds it: it stays open.
    for (let i = 1; i <= 32; i++) cache.keep(cache.find(`SELECT ${i}`, []).key, enginePlan().statement);
    expect(discarded).toEqual([]);
    expect(cache.find('SELECT 0', []).kept).toBeUndefined();
    // Its last holder lets go: now it closes.
    expect(cache.released(first.statement)).toBe(true);
    // A plan nobody holds closes as soon as it is pushed out.
    const second = cache.find('SELECT 1', []).kept as Statement;
    expect(cache.released(second)).toBe(false);
    expect(cache.released(second)).toBe(false);
    for (let i = 100; i < 132; i++) cache.keep(cache.find(`SELECT ${i}`, []).key, enginePlan().statement);
    expect(discarded).toContain(second);
  });
});
