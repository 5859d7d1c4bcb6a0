import type { TableRows } from '../ledger/applier.js';
import type { LedgerTable } from '../../../ledger/chain/schema.js';
import { dataRowCell, dataRowFrames } from '../../../protocol/encode.js';

/**
 * Recently read sessions of `_cot_steps`, as the engine rendered their rows
 * for the client (text format, one time zone), so that replaying a session
 * again, or reading one of its steps by trace_id, costs no engine call.
 *
 * Why a cache is safe here: a ledger row never changes once written (the
 * guard refuses every statement that would change one), so a row read from
 * the engine stays right for as long as the server runs. What can change is
 * which rows a session has: the writer reports each durable append
 * (`appended`), and a session is served only when the rows held, plus the
 * appends not yet visible in the engine, are exactly the rows the writer
 * has acknowledged for it. Rows appended since the session was read come
 * from the writer as the canonical texts it hashed, and are rendered by the
 * engine's own codecs (EngineStatement.renderCanonical): the hash chain
 * holds those texts to be the stored values' texts, so they print exactly
 * as the stored rows would. Verification never reads from here: it reads
 * the stored rows, and so finds a row changed behind the server.
 *
 * Rows are kept as the DataRow messages that carry them (text format), not
 * as cells: a replay from here is a copy of bytes, where encoding 20 rows'
 * cells again was a third of the server's time for it.
 */

export type Cells = ReadonlyArray<string | Uint8Array | null>;

/** A row as the cache keeps it: its DataRow message in text format, and its trace_id. */
export interface CachedRow {
  readonly traceId: string;
  readonly frame: Buffer;
}

/** An append to a held session that the cache has not rendered yet: the writer's canonical texts of its columns. */
interface Pending {
  readonly traceId: string;
  readonly seq: number;
  readonly texts: ReadonlyArray<string | null>;
}

export interface CachedSession {
  readonly key: string;
  /** The time zone the rows' timestamps were rendered in ('' until a session born here is first read). */
  zone: string;
  /** The result columns the rows were rendered for (names and types), '' likewise. */
  layout: string;
  /** In step order. */
  readonly rows: CachedRow[];
  readonly pending: Pending[];
  bytes: number;
  /**
   * Renders appends' texts as the session's last reader's statement does (its zone and columns), so
   * that the cache renders them as they arrive, after their append is answered, not when the session
   * is next read. Set by the reader; null until one has read the session.
   */
  render: ((texts: ReadonlyArray<ReadonlyArray<string | null>>) => Cells[] | null) | null;
}

/** A session being read from the engine: the appends reported meanwhile. */
interface Loading {
  readonly pending: Pending[];
}

/** Bookkeeping per held row (beyond its message's bytes), per pending append and per cell of one, and per session. */
const ROW_OVERHEAD = 96;
const CELL_OVERHEAD = 16;
const PENDING_BYTES = 96;
const SESSION_BYTES = 256;

export class SessionCache {
  /** Reads answered from the cache, sessions read into it, appends rendered into it, sessions dropped as incomplete. */
  readonly stats = { hits: 0, fills: 0, appendsRead: 0, dropped: 0 };
  /** In least-recently-used order. */
  private readonly sessions = new Map<string, CachedSession>();
  private readonly loading = new Map<string, Loading>();
  private readonly traces = new Map<string, { readonly session: CachedSession; readonly row: number }>();
  private readonly column: { readonly session: number; readonly traceId: number; readonly seq: number; readonly stepIndex: number };
  private total = 0;
  /** Held sessions with appends to render once the current callbacks (the append's answer among them) are done. */
  private readonly unrendered = new Set<CachedSession>();

  constructor(
    /** `_cot_steps`, whose appends the cache follows. */
    readonly steps: LedgerTable,
    private readonly budgetBytes: number,
  ) {
    const names = steps.columns.map((c) => c.name);
    this.column = {
      session: names.indexOf('session_id'),
      traceId: names.indexOf('trace_id'),
      seq: names.indexOf('ledger_seq'),
      stepIndex: names.indexOf('step_index'),
    };
  }

  /** How many sessions and bytes the cache holds, for the tests. */
  get size(): { readonly sessions: number; readonly bytes: number } {
    return { sessions: this.sessions.size, bytes: this.total };
  }

  /**
   * The writer's durable appends: sessions held or being read learn that
   * they grew, and a session's first step makes it a held session with no
   * rows read yet, so that an agent replaying the session it is writing
   * never waits for a whole read of it.
   */
  appended(tables: readonly TableRows[]): void {
    for (const { table, rows } of tables) {
      if (table.name !== this.steps.name || table.schema !== this.steps.schema) continue;
      for (const row of rows) {
        const key = row[this.column.session] ?? '';
        const pending = { traceId: String(row[this.column.traceId]), seq: Number(row[this.column.seq] ?? 0), texts: row };
        const loading = this.loading.get(key);
        if (loading !== undefined) loading.pending.push(pending);
        let session = this.sessions.get(key);
        if (session === undefined && loading === undefined && row[this.column.stepIndex] === '0') {
          session = { key, zone: '', layout: '', rows: [], pending: [], bytes: SESSION_BYTES, render: null };
          this.sessions.set(key, session);
          this.total += session.bytes;
        }
        if (session === undefined) continue;
        session.pending.push(pending);
        const bytes = pendingBytes(pending);
        session.bytes += bytes;
        this.total += bytes;
        if (session.render !== null) this.renderSoon(session);
      }
    }
    this.evict();
  }

  /**
   * An agent replays the session it appends to: its appends are rendered in the moment between their
   * answer and its next read (rendering and encoding one step took 25-30 µs of the read's 100).
   */
  private renderSoon(session: CachedSession): void {
    if (this.unrendered.size === 0) setImmediate(() => this.renderPending());
    this.unrendered.add(session);
  }

  private renderPending(): void {
    const sessions = [...this.unrendered];
    this.unrendered.clear();
    for (const session of sessions) {
      // Evicted, or read (and its appends rendered by its reader) meanwhile.
      if (this.sessions.get(session.key) !== session || session.pending.length === 0 || session.render === null) continue;
      try {
        const cells = session.render(session.pending.map((p) => p.texts));
        if (cells !== null) this.extend(session, this.cachedRows(cells));
      } catch {
        // Nobody waits on this: the session's next reader renders its appends, and meets the error itself.
        session.render = null;
      }
    }
  }

  /** The session, if held, marked as just used. */
  session(key: string): CachedSession | undefined {
    const s = this.sessions.get(key);
    if (s !== undefined) {
      this.sessions.delete(key);
      this.sessions.set(key, s);
    }
    return s;
  }

  /** A step of a held session, by its trace_id as text. */
  step(traceId: string): { readonly session: CachedSession; readonly row: CachedRow } | undefined {
    const at = this.traces.get(traceId);
    const row = at?.session.rows[at.row];
    return at === undefined || row === undefined ? undefined : { session: at.session, row };
  }

  /** Rows as the cache keeps them, from the cells `SELECT *` renders (in the table's column order). */
  cachedRows(rows: readonly Cells[]): CachedRow[] {
    const frames = dataRowFrames(rows);
    return rows.map((cells, i) => ({ traceId: text(cells[this.column.traceId] ?? null), frame: frames[i] as Buffer }));
  }

  /** Rows as the cache keeps them, from their DataRow messages (in the table's column order). */
  framedRows(frames: readonly Buffer[]): CachedRow[] {
    return frames.map((frame) => ({ traceId: dataRowCell(frame, this.column.traceId) ?? '', frame }));
  }

  /** A read of the whole session from the engine begins: appends from now on are kept for it. */
  startLoad(key: string): void {
    this.loading.set(key, { pending: [] });
  }

  abortLoad(key: string): void {
    this.loading.delete(key);
  }

  /** The read finished with these rows. */
  finishLoad(key: string, zone: string, layout: string, rows: readonly CachedRow[]): void {
    const loading = this.loading.get(key);
    this.loading.delete(key);
    if (loading === undefined || this.budgetBytes <= 0) return;
    this.drop(key);
    const read = new Set(rows.map((r) => r.traceId));
    const pending = loading.pending.filter((p) => !read.has(p.traceId));
    const session: CachedSession = {
      key,
      zone,
      layout,
      rows: [],
      pending,
      bytes: SESSION_BYTES + pending.reduce((n, p) => n + pendingBytes(p), 0),
      render: null,
    };
    this.sessions.set(key, session);
    this.total += session.bytes;
    this.add(session, rows);
    // A session larger than an eighth of the budget would push out many others for one reader.
    if (session.bytes > this.budgetBytes / 8) {
      this.drop(key);
      return;
    }
    this.stats.fills++;
    this.evict();
  }

  /** The rows of appends that were pending, rendered as the engine renders them, in step order. */
  extend(session: CachedSession, rows: readonly CachedRow[]): void {
    const read = new Set(rows.map((r) => r.traceId));
    const rest = session.pending.filter((p) => !read.has(p.traceId));
    const freed = session.pending.filter((p) => read.has(p.traceId)).reduce((n, p) => n + pendingBytes(p), 0);
    session.pending.splice(0, session.pending.length, ...rest);
    session.bytes -= freed;
    if (this.sessions.get(session.key) === session) this.total -= freed;
    this.add(session, rows);
    this.stats.appendsRead += rows.length;
    this.evict();
  }

  /** The session's stored rows changed (a redaction, retention): what is held, or being read now, is stale. */
  invalidate(key: string): void {
    this.loading.delete(key);
    this.drop(key);
  }

  drop(key: string): void {
    const s = this.sessions.get(key);
    if (s === undefined) return;
    this.sessions.delete(key);
    this.total -= s.bytes;
    for (const r of s.rows) {
      if (this.traces.get(r.traceId)?.session === s) this.traces.delete(r.traceId);
    }
  }

  private add(session: CachedSession, rows: readonly CachedRow[]): void {
    const held = this.sessions.get(session.key) === session;
    for (const r of rows) {
      const bytes = ROW_OVERHEAD + r.frame.byteLength + r.traceId.length * 2;
      session.bytes += bytes;
      if (held) this.total += bytes;
      this.traces.set(r.traceId, { session, row: session.rows.length });
      session.rows.push(r);
    }
  }

  /** The least recently used sessions go until the rest fit the budget. */
  private evict(): void {
    for (const key of this.sessions.keys()) {
      if (this.total <= this.budgetBytes) break;
      this.drop(key);
    }
  }
}

function pendingBytes(p: Pending): number {
  let bytes = PENDING_BYTES;
  for (const t of p.texts) bytes += CELL_OVERHEAD + (t === null ? 0 : t.length * 2);
  return bytes;
}

function text(cell: string | Uint8Array | null): string {
  return cell === null ? '' : typeof cell === 'string' ? cell : Buffer.from(cell).toString('utf8');
}
