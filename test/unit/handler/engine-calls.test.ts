import { describe, expect, it } from 'vitest';
import type { EngineConnection } from '../../../src/engine/port.js';
import { EngineCalls, EngineSlots } from '../../../src/engines/duckdb/handler/engine-calls.js';

/**
 * A connection's engine calls when it closes. DuckDB's disconnect of a
 * connection whose call still runs blocks the whole process until the call
 * ends: seconds, for a constant folded while preparing, during which no
 * client was answered. stop() is what the close waits for.
 */

/** An engine whose call ignores interrupts, as one function call inside DuckDB does. */
const deaf = { interrupt: () => undefined } as unknown as EngineConnection;

describe('EngineCalls.stop', () => {
  it('resolves only after a call that ignores its interrupt has let go, though the client was answered before', async () => {
    const events: string[] = [];
    const calls = new EngineCalls(deaf, new EngineSlots(2), () => 0);
    let letGo: () => void = () => undefined;
    const entered = new Promise<void>((inside) => {
      void calls
        .run(
          () =>
            new Promise<void>((resolve) => {
              letGo = () => {
                events.push('the engine let go');
                resolve();
              };
              inside();
            }),
        )
        .catch((err: { code?: string }) => events.push(`the client was answered ${err.code}`));
    });
    await entered;
    const stopped = calls.stop().then(() => events.push('stopped'));
    // The interrupt is ignored: the client has its 57014 after the grace, and the engine still holds the call.
    await expect.poll(() => events, { timeout: 30_000 }).toEqual(['the client was answered 57014']);
    letGo();
    await stopped;
    expect(events).toEqual(['the client was answered 57014', 'the engine let go', 'stopped']);
  });

  it('resolves at once when no call is in the engine', async () => {
    const calls = new EngineCalls(deaf, new EngineSlots(2), () => 0);
    await calls.run(async () => 1);
    await expect(calls.stop()).resolves.toBeUndefined();
  });
});

describe('EngineSlots', () => {
  it("gives one user at most its share, and lets another user's call past the ones that wait", async () => {
    const slots = new EngineSlots(4, 2);
    const granted: string[] = [];
    const take = (user: string, tag: string): Promise<void> => slots.acquire(user).then(() => void granted.push(tag));
    await take('heavy', 'h1');
    await take('heavy', 'h2');
    const h3 = take('heavy', 'h3');
    const h4 = take('heavy', 'h4');
    await take('other', 'o1');
    await Promise.resolve();
    // The heavy user's third and fourth wait for its own to end; the other user's call did not wait behind them.
    expect(granted).toEqual(['h1', 'h2', 'o1']);
    slots.release('other');
    await Promise.resolve();
    expect(granted).toEqual(['h1', 'h2', 'o1']);
    slots.release('heavy');
    await h3;
    expect(granted).toEqual(['h1', 'h2', 'o1', 'h3']);
    slots.release('heavy');
    await h4;
    expect(granted).toEqual(['h1', 'h2', 'o1', 'h3', 'h4']);
  });

  it('holds every call to the total, whoever makes it', async () => {
    const slots = new EngineSlots(2, 2);
    await slots.acquire('a');
    await slots.acquire('b');
    let third = false;
    const waiting = slots.acquire('c').then(() => {
      third = true;
    });
    await Promise.resolve();
    expect(third).toBe(false);
    slots.release('a');
    await waiting;
    expect(third).toBe(true);
  });
});
