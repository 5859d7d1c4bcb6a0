import {
  FOREIGN_KEYS_SETUP,
  type ForeignKey,
  type KeyDdl,
  keyFromRow,
  LOAD_KEYS,
  mirrorSql,
  type TableWrite,
  type UpdateParts,
} from '../catalog/foreign-keys.js';
import { PgError } from '../../../errors/pg-error.js';

/**
 * The foreign keys the server keeps, as every connection shares them
 * (catalog/foreign-keys.ts records them, foreign-keys.ts carries them out),
 * and what a statement's plan says about them.
 */

interface Runner {
  run(sql: string): Promise<void>;
  query(sql: string, params?: readonly unknown[]): Promise<unknown[][]>;
}

/** The committed keys, which every connection shares, and the locks that keep them across transactions. */
export class ForeignKeyRegistry {
  private keys: readonly ForeignKey[] = [];
  readonly locks = new KeyLocks();
  /** Sessions whose open transaction changed the keys: their statements read the keys as it sees them. */
  private readonly changedIn = new Set<number>();
  private loading: Promise<void> = Promise.resolve();

  /** `database`: the name of the database the tables are in. */
  constructor(readonly database: string) {}

  /** The registry of a database opened by the server's own connection: its table is created with the database. */
  static async open(conn: Runner): Promise<ForeignKeyRegistry> {
    for (const sql of FOREIGN_KEYS_SETUP) await conn.run(sql);
    const [row] = await conn.query('SELECT current_database()');
    const registry = new ForeignKeyRegistry(String(row?.[0]));
    await registry.load(conn);
    return registry;
  }

  get committed(): readonly ForeignKey[] {
    return this.keys;
  }

  /** Reads the committed keys (at start, and after each transaction that changed them), and copies them for the catalog's views. */
  load(conn: Runner): Promise<void> {
    const next = this.loading.then(async () => {
      this.keys = (await conn.query(LOAD_KEYS)).map(keyFromRow);
      for (const sql of mirrorSql(this.keys, this.database)) await conn.run(sql);
    });
    this.loading = next.catch(() => undefined);
    return next;
  }

  changedBy(session: number): void {
    this.changedIn.add(session);
  }

  changedHere(session: number): boolean {
    return this.changedIn.has(session);
  }

  /** The session's transaction ended: its locks go. */
  transactionEnded(session: number): void {
    this.changedIn.delete(session);
    this.locks.releaseAll(session);
  }
}

/**
 * What a statement's plan says about the keys: the DDL that changes them,
 * the tables it writes, and an UPDATE's parts (what an ON UPDATE CASCADE
 * needs), each read from the statement when first asked.
 */
export interface KeyWork {
  readonly keyDdl: KeyDdl | null;
  writes(): TableWrite | null;
  update(): UpdateParts | null;
}

const once = <T>(read: () => T): (() => T) => {
  let got: { value: T } | null = null;
  return () => {
    got ??= { value: read() };
    return got.value;
  };
};

/** A statement's key work, its writes and parts read once and only when asked. */
export function keyWork(keyDdl: KeyDdl | null, writes: () => TableWrite | null, update: () => UpdateParts | null = () => null): KeyWork {
  return { keyDdl, writes: once(writes), update: once(update) };
}

/**
 * The table locks that keep foreign keys true between transactions, which
 * DuckDB's snapshots alone do not: a transaction that adds a child row
 * checks its parent in its own snapshot, as one that deletes the parent
 * checks for children in its own, and both would commit. So a statement
 * that writes a child key holds its parent table shared, one that removes
 * or changes a referenced key holds the table exclusive, until the end of
 * its transaction. A transaction whose snapshot began before a conflicting
 * one ended cannot see what that one did, and fails with 40001 (as
 * PostgreSQL's REPEATABLE READ does when a key check meets a concurrent
 * change); waiting in a cycle is 40P01.
 */

export type LockMode = 'shared' | 'exclusive';

interface Hold {
  readonly session: number;
  mode: LockMode;
}

const POLL_MS = 5;

export class KeyLocks {
  private readonly held = new Map<string, Hold[]>();
  /** The session each waiting session waits for a key of. */
  private readonly waiting = new Map<number, string>();
  /** When each key was last let go of by a transaction that held it exclusive, and shared (process.hrtime). */
  private readonly released = new Map<string, { exclusive: bigint; shared: bigint }>();

  private conflicts(session: number, key: string, mode: LockMode): Hold[] {
    return (this.held.get(key) ?? []).filter((h) => h.session !== session && (mode === 'exclusive' || h.mode === 'exclusive'));
  }

  /** Whether a wait by `session` on `key` would close a cycle of waits. */
  private cycle(session: number, key: string, mode: LockMode): boolean {
    const seen = new Set<number>();
    const visit = (k: string, m: LockMode): boolean =>
      this.conflicts(session, k, m).some((h) => {
        if (seen.has(h.session)) return false;
        seen.add(h.session);
        const next = this.waiting.get(h.session);
        if (next === undefined) return false;
        if ((this.held.get(next) ?? []).some((x) => x.session === session)) return true;
        return visit(next, 'exclusive');
      });
    return visit(key, mode);
  }

  /**
   * Takes `key` in `mode` for the session's transaction, waiting while
   * another transaction holds it in a conflicting mode, until `deadline`
   * (Date.now()). `began`: when the transaction's snapshot was taken, or
   * null when it is taken after this (a statement outside a block).
   */
  async acquire(session: number, key: string, mode: LockMode, began: bigint | null, deadline: number): Promise<void> {
    const own = (this.held.get(key) ?? []).find((h) => h.session === session);
    if (own !== undefined && (own.mode === 'exclusive' || mode === 'shared')) return;
    try {
      while (this.conflicts(session, key, mode).length > 0) {
        this.waiting.set(session, key);
        if (this.cycle(session, key, mode)) {
          throw new PgError('40P01', 'deadlock detected', {
            detail: `Process ${session} waits for a lock on table ${key}, held by a process that waits for it.`,
            hint: 'See server log for query details.',
          });
        }
        if (Date.now() >= deadline) throw new PgError('55P03', 'canceling statement due to lock timeout');
        await new Promise((resolve) => setTimeout(resolve, POLL_MS));
      }
    } finally {
      this.waiting.delete(session);
    }
    const last = this.released.get(key);
    const ended = last === undefined ? 0n : mode === 'exclusive' ? (last.exclusive > last.shared ? last.exclusive : last.shared) : last.exclusive;
    if (began !== null && ended > began) {
      throw new PgError('40001', 'could not serialize access due to concurrent update', {
        detail: `Another transaction changed rows that a foreign key of table ${key} relates after this transaction's snapshot was taken.`,
        hint: 'Retry the transaction.',
      });
    }
    if (own !== undefined) own.mode = 'exclusive';
    else this.held.set(key, [...(this.held.get(key) ?? []), { session, mode }]);
  }

  /** The end of the session's transaction: its holds go, and their end is recorded for transactions still open. */
  releaseAll(session: number): void {
    const now = process.hrtime.bigint();
    for (const [key, holds] of this.held) {
      const mine = holds.find((h) => h.session === session);
      if (mine === undefined) continue;
      const last = this.released.get(key) ?? { exclusive: 0n, shared: 0n };
      this.released.set(key, mine.mode === 'exclusive' ? { ...last, exclusive: now } : { ...last, shared: now });
      const left = holds.filter((h) => h.session !== session);
      if (left.length === 0) this.held.delete(key);
      else this.held.set(key, left);
    }
  }
}
