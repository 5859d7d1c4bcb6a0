import type { ColumnInfo, EngineCursor, EngineStatement, RenderSettings, RowSink, WireParam } from '../../../engine/port.js';
import type { LedgerWriter } from '../ledger/writer.js';
import type { Token } from '../../../sql/lexer.js';
import { argumentText } from './ledger-reads.js';
import { readArg, type ReadArg } from '../../../sql/verify-call.js';
import type { Cells, SessionCache } from './session-cache.js';
import { dataRowCells, dataRowFrames } from '../../../protocol/encode.js';
import type { LedgerTable } from '../../../ledger/chain/schema.js';
import { isUtc } from '../../../engine/pg-format.js';
import type { StepStore, StoredStep, StepTexts } from '../steps-store/store.js';
import { storedFrame, storedMicros } from '../steps-store/stored-row.js';

const UUID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;

/**
 * An agent's reads of its own history, answered from the session cache
 * (session-cache.ts) or the row store of steps (steps-store/store.ts) when
 * either holds what the engine would answer:
 *
 *   SELECT * FROM cot_replay(session)
 *   SELECT * FROM cot_trace(trace_id)
 *   SELECT * FROM _cot_steps WHERE trace_id = $1
 *   SELECT * FROM _cot_steps WHERE session_id = $1 [ORDER BY step_index]
 *
 * A replay the cache cannot answer runs in the engine, and its rows fill
 * the cache on the way to the client. Only statements outside a transaction
 * block, with every column in text format, are served: inside a block the
 * engine's snapshot decides what is visible, and binary rows are not kept.
 */

export interface StepsRead {
  readonly kind: 'replay' | 'trace';
  readonly arg: ReadArg;
}

/** The statement shapes served, or null. */
export function recognizeStepsRead(tokens: readonly Token[]): StepsRead | null {
  const t = tokens.length > 0 && tokens[tokens.length - 1]?.kind === 'semicolon' ? tokens.slice(0, -1) : tokens;
  const word = (i: number): string | null => (t[i]?.kind === 'word' ? (t[i] as Token).text.toLowerCase() : null);
  if (word(0) !== 'select' || t[1]?.text !== '*' || word(2) !== 'from') return null;
  const name = word(3);
  if ((name === 'cot_replay' || name === 'cot_trace') && t[4]?.text === '(' && t[6]?.text === ')' && t.length === 7) {
    const arg = readArg(t[5]);
    return arg === null ? null : { kind: name === 'cot_replay' ? 'replay' : 'trace', arg };
  }
  if (name !== '_cot_steps' || word(4) !== 'where' || t[6]?.text !== '=') return null;
  const arg = readArg(t[7]);
  if (arg === null) return null;
  if (word(5) === 'trace_id') return t.length === 8 ? { kind: 'trace', arg } : null;
  // A session's rows in any order but step order are the engine's to answer; without ORDER BY, step order is one the engine may give.
  if (word(5) === 'session_id' && (t.length === 8 || inStepOrder(t.slice(8)))) return { kind: 'replay', arg };
  return null;
}

/** `ORDER BY step_index [ASC]` or `ORDER BY ledger_seq [ASC]`: within one session, both are step order. */
function inStepOrder(t: readonly Token[]): boolean {
  const word = (i: number): string | null => (t[i]?.kind === 'word' ? (t[i] as Token).text.toLowerCase() : null);
  if (word(0) !== 'order' || word(1) !== 'by' || (word(2) !== 'step_index' && word(2) !== 'ledger_seq')) return false;
  return t.length === 3 || (t.length === 4 && word(3) === 'asc');
}

export interface StepsReadSources {
  readonly cache: SessionCache | null;
  /** `_cot_steps` as a row store: what the cache does not hold, read without the engine. */
  readonly store: StepStore | null;
  readonly writer: Pick<LedgerWriter, 'chainLength'>;
  /** `_cot_steps`, whose rows both keep. */
  readonly steps: LedgerTable;
  /** Waits until the engine holds every acknowledged append: before any read of the engine. */
  readonly appendsVisible: () => Promise<void>;
  /** No transaction block is open: the statement sees every committed row. */
  readonly autocommit: () => boolean;
}

/** The result columns' names and types, which cached and stored rows must have been rendered for. */
export function layoutOf(columns: readonly ColumnInfo[] | null): string {
  return (columns ?? []).map((c) => `${c.name}:${c.typeOid}:${c.typeModifier}`).join(',');
}

/** The engine statement of one of those reads; the engine still answers whatever the cache cannot. */
export class ServedStepsRead implements EngineStatement {
  readonly kind = 'SELECT';
  /** The cache answers with every acknowledged append (the writer reports each before it is acknowledged); the engine only once it holds them. */
  readonly waitsForAppends = true;
  private params: readonly WireParam[] = [];
  /** The argument as text, read at Bind (argumentText: undefined when it cannot be read). */
  private key: string | null | undefined;
  /** The parameters the engine's statement was last bound to. */
  private innerParams: readonly WireParam[] | null = null;
  private readonly layout: string;
  /** The store, when its rows are printed for this statement's columns (else the table changed since its start, and the engine answers). */
  private readonly store: StepStore | null;

  constructor(
    private readonly inner: EngineStatement,
    private readonly read: StepsRead,
    private readonly sources: StepsReadSources,
  ) {
    this.layout = layoutOf(inner.columns);
    this.store = sources.store?.layout === this.layout ? sources.store : null;
    // A literal argument is known before any Bind.
    this.key = argumentText(read.arg, [], inner.paramTypes);
  }

  /** The statement returns `_cot_steps`'s columns in table order, as the cache and the store keep rows. */
  static applies(inner: EngineStatement, steps: LedgerTable): boolean {
    const columns = inner.columns;
    return inner.kind === 'SELECT' && columns !== null && columns.map((c) => c.name).join(',') === steps.columns.map((c) => c.name).join(',');
  }

  get paramTypes(): readonly number[] {
    return this.inner.paramTypes;
  }

  get columns(): EngineStatement['columns'] {
    return this.inner.columns;
  }

  /**
   * The engine's statement is bound when the engine will answer: binding costs DuckDB a call (16 µs)
   * that a served read does not need. An argument no cache or store can answer for is bound at once,
   * so that a value the engine refuses (not a uuid) fails the Bind, as in PostgreSQL.
   */
  bind(params: readonly WireParam[]): void {
    this.params = params;
    this.key = argumentText(this.read.arg, params, this.inner.paramTypes);
    if (this.key === null || this.key === undefined || (this.read.kind === 'trace' && !UUID.test(this.key))) this.bindInner();
  }

  private bindInner(): void {
    if (this.innerParams === this.params) return;
    this.inner.bind(this.params);
    this.innerParams = this.params;
  }

  async execute(options?: { readonly materialize?: boolean }): Promise<EngineCursor> {
    const key = this.key;
    if (key === null || key === undefined || !this.sources.autocommit()) {
      await this.sources.appendsVisible();
      this.bindInner();
      return this.inner.execute(options);
    }
    return new StepsCursor(this, key);
  }

  close(): void {
    this.inner.close();
  }

  /** The rows the engine would answer (DataRow messages in text format), from the cache or the store, or null when neither can tell. */
  async cached(key: string, zone: string): Promise<Buffer[] | null> {
    const { cache } = this.sources;
    if (this.read.kind === 'trace') {
      const hit = cache?.step(key);
      if (hit !== undefined && hit.session.zone === zone && hit.session.layout === this.layout) {
        (cache as SessionCache).stats.hits++;
        return [hit.row.frame];
      }
      return this.storedStep(key, zone);
    }
    const session = cache?.session(key);
    if (session === undefined) return this.storedSession(key, zone);
    if (session.rows.length === 0 && session.zone === '') {
      // Born in the cache at its first step: its first reader decides how its rows are rendered.
      session.zone = zone;
      session.layout = this.layout;
    }
    if (session.zone !== zone || session.layout !== this.layout) return null;
    const acknowledged = this.sources.writer.chainLength(this.sources.steps, key);
    if (acknowledged !== null && session.rows.length + session.pending.length !== acknowledged) {
      // An append the cache did not hear of: it reads the session afresh next time.
      (cache as SessionCache).drop(key);
      (cache as SessionCache).stats.dropped++;
      return this.storedSession(key, zone);
    }
    // This reader's statement renders the session's next appends as they arrive (SessionCache.renderSoon).
    session.render ??= (texts) => this.render(texts, zone);
    // Every acknowledged append, rendered from the writer's texts by the engine's own codecs: it need
    // not have reached the engine yet.
    if (session.pending.length > 0) {
      const cells = this.render(
        session.pending.map((p) => p.texts),
        zone,
      );
      if (cells === null) return null;
      (cache as SessionCache).extend(session, (cache as SessionCache).cachedRows(cells));
    }
    (cache as SessionCache).stats.hits++;
    // A copy: a portal read in parts must not see rows added to the session after it started.
    return session.rows.map((r) => r.frame);
  }

  /** A step from the store: none when the store holds every step and not this one. */
  private storedStep(key: string, zone: string): Buffer[] | null {
    const store = this.store;
    if (store === null || !store.ready || !UUID.test(key)) return null;
    const found = store.step(key.toLowerCase());
    if (found === 'absent') return [];
    if (found === null) return null;
    return this.framesOf([found], zone);
  }

  /** A session from the store, when it holds exactly the steps the writer acknowledged; the cache keeps it. */
  private storedSession(key: string, zone: string): Buffer[] | null {
    const { cache, writer, steps } = this.sources;
    const store = this.store;
    if (store === null || !store.ready) return null;
    // Null: nothing was appended to `_cot_steps` since the start, so the complete store holds every step.
    const acknowledged = writer.chainLength(steps, key);
    const stored = store.session(key);
    if (stored === null || (acknowledged !== null && stored.length !== acknowledged)) return null;
    const frames = this.framesOf(stored, zone);
    if (frames === null) return null;
    if (cache !== null) {
      // The cache takes the rows once this answer is on its way: its bookkeeping (a tenth of a cold
      // replay's time in the server) is not the reader's wait. Appends meanwhile are kept for it.
      cache.startLoad(key);
      setImmediate(() => cache.finishLoad(key, zone, this.layout, cache.framedRows(frames)));
    }
    return frames;
  }

  /**
   * Steps from the store as DataRow messages in `zone`: as stored in UTC (stored-row.ts), with their
   * timestamps printed again in another zone; steps not yet written, from their canonical texts.
   */
  private framesOf(stored: readonly StoredStep[], zone: string): Buffer[] | null {
    const utc = isUtc(zone);
    const out: Buffer[] = [];
    const texts: StepTexts[] = [];
    for (const step of stored) {
      if (Array.isArray(step)) {
        texts.push(step as StepTexts);
        continue;
      }
      if (texts.length > 0) return null;
      // LMDB hands out copies, as Buffers; a plain Uint8Array is read the same way.
      const bytes = step as Uint8Array;
      const row = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
      const frame = utc ? storedFrame(row) : this.rezoned(row, zone);
      if (frame === null) return null;
      out.push(frame);
    }
    if (texts.length === 0) return out;
    // The store holds its unwritten steps after the written ones.
    const cells = this.render(texts, zone);
    return cells === null ? null : out.concat(dataRowFrames(cells));
  }

  /** A stored step's message with its timestamps with time zone printed in `zone`. */
  private rezoned(stored: Buffer, zone: string): Buffer | null {
    const cells: Cells[number][] = dataRowCells(storedFrame(stored));
    const texts: (string | null)[] = cells.map(() => null);
    const zoned = (this.store as StepStore).zoned;
    zoned.forEach((column, k) => {
      if (cells[column] !== null) texts[column] = String(storedMicros(stored, k));
    });
    const [printed] = this.render([texts], zone) ?? [];
    if (printed === undefined) return null;
    for (const column of zoned) cells[column] = printed[column] ?? null;
    return dataRowFrames([cells])[0] ?? null;
  }

  private render(texts: ReadonlyArray<ReadonlyArray<string | null>>, zone: string): Cells[] | null {
    return this.inner.renderCanonical?.(texts, { timeZone: zone }) ?? null;
  }

  /** A replay the engine runs; its rows fill the cache when the client reads them all in text. */
  async fromEngine(key: string): Promise<{ readonly cursor: EngineCursor; readonly fill: boolean }> {
    await this.sources.appendsVisible();
    const cache = this.sources.cache;
    const fill = this.read.kind === 'replay' && cache !== null;
    if (fill) cache.startLoad(key);
    try {
      this.bindInner();
      return { cursor: await this.inner.execute(), fill };
    } catch (err) {
      if (fill) cache.abortLoad(key);
      throw err;
    }
  }

  finishFill(key: string, zone: string, rows: Cells[] | null): void {
    const cache = this.sources.cache;
    if (rows === null) cache?.abortLoad(key);
    else cache?.finishLoad(key, zone, this.layout, cache.cachedRows(rows));
  }
}

/** A sink that keeps a copy of every row (the engine's cells may be views of memory it reuses), and passes it on. */
function keeping(rows: Cells[], next: RowSink | null): RowSink {
  return {
    row(cells) {
      rows.push(cells.map((c) => (c instanceof Uint8Array ? Buffer.from(c) : c)));
      next?.row(cells);
    },
    flushIfFull: () => next?.flushIfFull() ?? Promise.resolve(),
  };
}

/** Decides at the first fetch, when the formats and the time zone are known, where the rows come from. */
class StepsCursor implements EngineCursor {
  readonly rowsChanged = 0;
  readonly returnsRows = true;
  /** Served rows, as DataRow messages in text format. */
  private rows: Buffer[] | null = null;
  private next = 0;
  private engine: EngineCursor | null = null;
  /** The rows of an engine replay that fill the cache, with the zone they were rendered in. */
  private filling: { readonly rows: Cells[]; readonly zone: string } | null = null;

  constructor(
    private readonly statement: ServedStepsRead,
    private readonly key: string,
  ) {}

  async fetch(maxRows: number, formats: readonly (0 | 1)[], sink: RowSink, settings: RenderSettings): Promise<{ rows: number; done: boolean }> {
    const text = !formats.includes(1);
    if (this.rows === null && this.engine === null) {
      this.rows = text ? await this.statement.cached(this.key, settings.timeZone) : null;
      if (this.rows === null) {
        const { cursor, fill } = await this.statement.fromEngine(this.key);
        this.engine = cursor;
        if (fill && text && maxRows === 0) this.filling = { rows: [], zone: settings.timeZone };
        else if (fill) this.statement.finishFill(this.key, settings.timeZone, null);
      }
    }
    if (this.engine !== null) {
      const filling = this.filling;
      const result = await this.engine.fetch(maxRows, formats, filling === null ? sink : keeping(filling.rows, sink), settings);
      if (filling !== null && result.done) {
        this.filling = null;
        this.statement.finishFill(this.key, filling.zone, filling.rows);
      }
      return result;
    }
    const rows = this.rows as Buffer[];
    const end = maxRows === 0 ? rows.length : Math.min(rows.length, this.next + maxRows);
    const start = this.next;
    for (; this.next < end; this.next++) {
      const frame = rows[this.next] as Buffer;
      if (sink.rowFrame === undefined) sink.row(dataRowCells(frame));
      else sink.rowFrame(frame);
    }
    await sink.flushIfFull();
    return { rows: end - start, done: this.next >= rows.length };
  }

  close(): void {
    if (this.filling !== null) this.statement.finishFill(this.key, this.filling.zone, null);
    this.filling = null;
    this.engine?.close();
    this.next = this.rows?.length ?? 0;
  }
}
