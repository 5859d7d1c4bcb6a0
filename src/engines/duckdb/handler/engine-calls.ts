import type { EngineConnection } from '../../../engine/port.js';
import { PgError } from '../../../errors/pg-error.js';
import { SqlState } from '../../../errors/sqlstate.js';

export type CancelReason = 'user' | 'timeout';

/**
 * The engine's threads that clients' calls may hold at once, shared by every
 * connection. DuckDB runs each call on one of libuv's threads, which the
 * writer's journal and the applier also need: clients get all of them but a
 * reserve, and a call beyond waits here, in JavaScript, holding nothing. One
 * user holds at most a quarter of them (`perUser`), abandoned calls the
 * engine still runs included: a user who starts work the engine cannot
 * interrupt (a constant folded while preparing) on many connections waits
 * for its own, while the others' calls go through.
 */
export class EngineSlots {
  private inUse = 0;
  private readonly byUser = new Map<string, number>();
  private readonly waiting: Array<{ readonly user: string; readonly grant: () => void }> = [];
  readonly perUser: number;

  constructor(
    readonly size: number,
    perUser?: number,
  ) {
    this.perUser = perUser ?? Math.max(1, Math.floor(size / 4));
  }

  acquire(user = ''): Promise<void> {
    if (this.free(user)) {
      this.take(user);
      return Promise.resolve();
    }
    return new Promise((resolve) => this.waiting.push({ user, grant: resolve }));
  }

  release(user = ''): void {
    this.inUse--;
    const held = (this.byUser.get(user) ?? 1) - 1;
    if (held === 0) this.byUser.delete(user);
    else this.byUser.set(user, held);
    // The first waiter that may go now, in the order they came: another user's call is not held behind this one's.
    const at = this.waiting.findIndex((w) => this.free(w.user));
    if (at < 0) return;
    const [next] = this.waiting.splice(at, 1);
    if (next === undefined) return;
    this.take(next.user);
    next.grant();
  }

  private free(user: string): boolean {
    return this.inUse < this.size && (this.byUser.get(user) ?? 0) < this.perUser;
  }

  private take(user: string): void {
    this.inUse++;
    this.byUser.set(user, (this.byUser.get(user) ?? 0) + 1);
  }
}

/**
 * How long an interrupted engine call may take to stop before the client is
 * answered without it. DuckDB checks for an interrupt between operators and
 * chunks, not inside one function call: a constant folded while preparing
 * (levenshtein over long strings) runs to its end whatever is asked.
 */
const STOP_GRACE_MS = 250;

/**
 * Every engine call a client's statement makes (preparing, a ledger
 * INSERT's evaluation, execution, fetching) runs through here, one at a
 * time: under the session's statement_timeout, and interruptible by
 * CancelRequest. A call that does not stop when interrupted is abandoned:
 * the client gets 57014 at its deadline, and the connection's next call
 * waits (under its own timeout) until the engine lets go. So a connection
 * never holds more than one of the engine's threads.
 */
export class EngineCalls {
  private current: { reason: CancelReason | null; abort: (reason: CancelReason) => void } | null = null;
  /** A call the client was answered for while the engine still runs it. */
  private abandoned: Promise<unknown> | null = null;
  /** The call in progress, settled either way: closing a DuckDB connection whose call still runs blocks the process until it ends. */
  private inFlight: Promise<void> | null = null;

  constructor(
    private readonly engine: EngineConnection,
    private readonly slots: EngineSlots,
    private readonly timeoutMs: () => number,
    /** Whose calls these are, for the slots' share per user. */
    private readonly user = '',
  ) {}

  /** Runs one engine call; an interrupted one fails with 57014 and the reason. */
  async run<T>(work: () => Promise<T>): Promise<T> {
    // A call made inside another (a ledger's CREATE inside its execution) is covered by the outer one.
    if (this.current !== null) return work();
    const before = this.abandoned;
    let inEngine = false;
    const state: { reason: CancelReason | null; abort: (reason: CancelReason) => void } = { reason: null, abort: () => undefined };
    const call = (async () => {
      if (before !== null) await before;
      await this.slots.acquire(this.user);
      try {
        // Stopped while it waited: it never reaches the engine.
        if (state.reason !== null) throw canceled(state.reason);
        inEngine = true;
        return await work();
      } finally {
        this.slots.release(this.user);
      }
    })();
    const inFlight = call.then(
      () => undefined,
      () => undefined,
    );
    this.inFlight = inFlight;
    void inFlight.then(() => {
      if (this.inFlight === inFlight) this.inFlight = null;
    });
    const stopped = new Promise<never>((_, reject) => {
      let grace: NodeJS.Timeout | null = null;
      state.abort = (reason) => {
        if (state.reason !== null) return;
        state.reason = reason;
        // Only a call inside the engine is interrupted: an interrupt with nothing running would stop the next statement.
        if (inEngine) this.engine.interrupt();
        grace = setTimeout(() => reject(canceled(reason)), STOP_GRACE_MS);
      };
      const settled = (): void => {
        if (grace !== null) clearTimeout(grace);
      };
      call.then(settled, settled);
    });
    this.current = state;
    const ms = this.timeoutMs();
    const timer = ms > 0 ? setTimeout(() => state.abort('timeout'), ms) : null;
    try {
      const result = await Promise.race([call, stopped]);
      // An interrupted stream ends early without an error: its result is not the statement's.
      if (state.reason !== null) throw canceled(state.reason);
      return result;
    } catch (err) {
      if (state.reason !== null) {
        // The engine still holds the call: the connection's next one waits for it.
        this.abandoned = inFlight;
        void inFlight.then(() => {
          if (this.abandoned === inFlight) this.abandoned = null;
        });
        throw canceledFrom(err, state.reason);
      }
      throw err;
    } finally {
      if (timer !== null) clearTimeout(timer);
      this.current = null;
    }
  }

  /**
   * A wait that holds none of the engine's threads (for the append order,
   * which another session holds until its transaction ends), under
   * statement_timeout and CancelRequest like a call: they fire `signal`,
   * and the wait fails with 57014.
   */
  async wait<T>(work: (signal: AbortSignal) => Promise<T>): Promise<T> {
    const controller = new AbortController();
    if (this.current !== null) return work(controller.signal);
    const state: { reason: CancelReason | null; abort: (reason: CancelReason) => void } = {
      reason: null,
      abort: (reason) => {
        if (state.reason !== null) return;
        state.reason = reason;
        controller.abort(canceled(reason));
      },
    };
    this.current = state;
    const ms = this.timeoutMs();
    const timer = ms > 0 ? setTimeout(() => state.abort('timeout'), ms) : null;
    try {
      return await work(controller.signal);
    } catch (err) {
      throw state.reason === null ? err : canceledFrom(err, state.reason);
    } finally {
      if (timer !== null) clearTimeout(timer);
      this.current = null;
    }
  }

  /** CancelRequest: stops the call in progress, if any. */
  cancel(): void {
    this.current?.abort('user');
  }

  /** Stops the call in progress and waits until the engine has let go of the connection. */
  async stop(): Promise<void> {
    this.current?.abort('user');
    await Promise.all([this.inFlight, this.abandoned]);
  }
}

function canceled(reason: CancelReason): PgError {
  return new PgError(SqlState.QueryCanceled, `canceling statement due to ${reason === 'timeout' ? 'statement timeout' : 'user request'}`);
}

/** An error that ends an interrupted call is reported as the cancel, whatever the engine said. */
function canceledFrom(err: unknown, reason: CancelReason): unknown {
  if (err instanceof PgError && err.code !== SqlState.QueryCanceled) return err;
  return canceled(reason);
}
