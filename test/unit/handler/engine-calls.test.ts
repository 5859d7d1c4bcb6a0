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
