import { randomBytes } from 'node:crypto';
import type { EngineFunction } from '../../../engine/port.js';

/**
 * PostgreSQL's advisory locks (pg_advisory_lock and its kin), held by the
 * server for its sessions: Kysely's Migrator, job queues and schedulers
 * serialise on them. A lock is exclusive or shared, held at session level
 * (until unlocked, as many times as taken) or for the transaction. The SQL
 * functions are per-connection macros over one engine function,
 * cot_advisory(op, session, key), which cannot wait: a statement that locks
 * constant keys waits for them before it runs (`waitFor`), and a lock on a
 * computed key that another session holds is refused with 55P03.
 */

type Mode = 'exclusive' | 'shared';

interface Hold {
  readonly session: number;
  readonly mode: Mode;
  /** Session-level holds (pg_advisory_lock), and transaction-level ones (pg_advisory_xact_lock). */
  count: number;
  xact: number;
}

const POLL_MS = 10;

export class AdvisoryLocks {
  private readonly held = new Map<string, Hold[]>();
  /**
   * Each session's secret, which its own macros pass: a client that calls
   * cot_advisory itself cannot act for another session, whose secret it
   * never sees (a connection's macros are its own).
   */
  private readonly secrets = new Map<number, string>();

  /** A new session's secret, for its macros (engines/duckdb/catalog/compat.ts). */
  register(session: number): string {
    const secret = randomBytes(16).toString('hex');
    this.secrets.set(session, secret);
    return secret;
  }
  /** A session that waited for a key and is about to take it: no other session may take it first. */
  private readonly reserved = new Map<string, number>();

  private available(session: number, key: string, mode: Mode): boolean {
    const reservedBy = this.reserved.get(key);
    if (reservedBy !== undefined && reservedBy !== session) return false;
    const holds = this.held.get(key) ?? [];
    return holds.every((h) => h.session === session || (mode === 'shared' && h.mode === 'shared'));
  }

  /** Takes the lock if no other session's hold conflicts with it; a session's own holds stack. */
  acquire(session: number, key: string, mode: Mode, xact: boolean): boolean {
    if (!this.available(session, key, mode)) return false;
    const holds = this.held.get(key) ?? [];
    let hold = holds.find((h) => h.session === session && h.mode === mode);
    if (hold === undefined) {
      hold = { session, mode, count: 0, xact: 0 };
      holds.push(hold);
      this.held.set(key, holds);
    }
    if (xact) hold.xact++;
    else hold.count++;
    if (this.reserved.get(key) === session) this.reserved.delete(key);
    return true;
  }

  /** pg_advisory_unlock: one session-level hold fewer; false when the session held none. */
  release(session: number, key: string, mode: Mode): boolean {
    const holds = this.held.get(key);
    const hold = holds?.find((h) => h.session === session && h.mode === mode);
    if (holds === undefined || hold === undefined || hold.count === 0) return false;
    hold.count--;
    this.prune(key, holds);
    return true;
  }

  /**
   * Row locks of SELECT ... FOR UPDATE | FOR SHARE SKIP LOCKED, by table and
   * rowid (`schema.table/rowid`), held until the transaction ends. Apart
   * from the advisory locks: pg_advisory_unlock_all leaves them.
   */
  private readonly rows = new Map<string, Array<{ readonly session: number; readonly mode: Mode }>>();
  private readonly rowsBySession = new Map<number, Set<string>>();

  private rowFree(session: number, key: string, mode: Mode): boolean {
    return (this.rows.get(key) ?? []).every((h) => h.session === session || (mode === 'shared' && h.mode === 'shared'));
  }

  private rowTake(session: number, key: string, mode: Mode): boolean {
    if (!this.rowFree(session, key, mode)) return false;
    const holds = this.rows.get(key) ?? [];
    if (!holds.some((h) => h.session === session && h.mode === mode)) holds.push({ session, mode });
    this.rows.set(key, holds);
    let mine = this.rowsBySession.get(session);
    if (mine === undefined) {
      mine = new Set();
      this.rowsBySession.set(session, mine);
    }
    mine.add(key);
    return true;
  }

  private releaseRows(session: number): void {
    const mine = this.rowsBySession.get(session);
    if (mine === undefined) return;
    this.rowsBySession.delete(session);
    for (const key of mine) {
      const left = (this.rows.get(key) ?? []).filter((h) => h.session !== session);
      if (left.length === 0) this.rows.delete(key);
      else this.rows.set(key, left);
    }
  }

  /** At the end of a transaction: its holds go, and its row locks. */
  releaseTransaction(session: number): void {
    this.releaseRows(session);
    for (const [key, holds] of this.held) {
      for (const h of holds) if (h.session === session) h.xact = 0;
      this.prune(key, holds);
    }
    this.unreserve(session);
  }

  /** The end of the session: every hold goes, and its secret. */
  endSession(session: number): void {
    this.releaseSession(session);
    this.releaseRows(session);
    this.secrets.delete(session);
  }

  /** pg_advisory_unlock_all: every hold goes. */
  releaseSession(session: number): void {
    for (const [key, holds] of this.held) {
      for (const h of holds) {
        if (h.session === session) {
          h.count = 0;
          h.xact = 0;
        }
      }
      this.prune(key, holds);
    }
    this.unreserve(session);
  }

  unreserve(session: number): void {
    for (const [key, s] of this.reserved) if (s === session) this.reserved.delete(key);
  }

  /**
   * Waits until the session could take the key, then reserves it for the
   * session's statement. False when `deadline` (a Date.now() value) passes
   * or `stop()` answers true first.
   */
  async waitFor(session: number, key: string, mode: Mode, deadline: number, stop: () => boolean): Promise<boolean> {
    while (!this.available(session, key, mode)) {
      if (Date.now() >= deadline || stop()) return false;
      await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    }
    this.reserved.set(key, session);
    return true;
  }

  private prune(key: string, holds: Hold[]): void {
    const left = holds.filter((h) => h.count > 0 || h.xact > 0);
    if (left.length === 0) this.held.delete(key);
    else this.held.set(key, left);
  }

  /** The engine function the per-connection macros call. */
  engineFunction(): EngineFunction {
    return {
      name: 'cot_advisory',
      parameters: ['VARCHAR', 'BIGINT', 'VARCHAR', 'VARCHAR'],
      volatile: true,
      call: ([op, session, secret, key]) => {
        const s = Number(session);
        // Not this session's macros: nothing happens (the macro answers an error or null).
        if (this.secrets.get(s) !== String(secret)) return null;
        const k = String(key);
        const mode: Mode = String(op).endsWith('_shared') ? 'shared' : 'exclusive';
        switch (String(op).replace(/_shared$/, '')) {
          case 'lock':
            return this.acquire(s, k, mode, false) ? 't' : 'busy';
          case 'xact_lock':
            return this.acquire(s, k, mode, true) ? 't' : 'busy';
          case 'try':
            return this.acquire(s, k, mode, false) ? 't' : 'f';
          case 'xact_try':
            return this.acquire(s, k, mode, true) ? 't' : 'f';
          case 'unlock':
            return this.release(s, k, mode) ? 't' : 'f';
          case 'unlock_all':
            this.releaseSession(s);
            return 't';
          case 'row_free':
            return this.rowFree(s, k, mode) ? 't' : 'f';
          case 'row_take':
            return this.rowTake(s, k, mode) ? 't' : 'f';
          default:
            return null;
        }
      },
    };
  }
}

/** The key of pg_advisory_lock(bigint) and of pg_advisory_lock(int, int): two spaces, as in PostgreSQL. */
export const ADVISORY_KEY_ONE = (k: string): string => `b:${k}`;
export const ADVISORY_KEY_TWO = (a: string, b: string): string => `i:${a}:${b}`;
