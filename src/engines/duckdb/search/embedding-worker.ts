import { EmbeddingError, type Embedder } from '../../../embedding/provider.js';
import type { EngineConnection } from '../../../engine/port.js';
import type { Observer } from '../../../observe/observer.js';
import type { TableRows } from '../ledger/applier.js';
import { embeddingText, missingVectors, type PendingStep, selectedSteps, storeVectors } from './embeddings.js';

export interface EmbeddingWorkerOptions {
  /** The ledger_seq up to which the engine holds every acknowledged append (the writer's). */
  readonly appliedSeq: () => number;
  /** How long an idle worker waits before looking for new steps, in milliseconds. */
  readonly pollMs?: number;
  /** Selected steps kept in memory at most (MEMORY_QUEUE); beyond, they are read from the ledger. */
  readonly memoryQueue?: number;
  /** The first wait after a failure, doubled up to a minute (FIRST_RETRY_MS). */
  readonly firstRetryMs?: number;
  readonly observer: Observer;
  /** The provider failed, after its own retries; the batch is tried again after `retryInMs`. */
  readonly onUnavailable: (err: EmbeddingError, retryInMs: number) => void;
  /** The provider refused one step's text outright; it is skipped until the next start. */
  readonly onRejected: (step: PendingStep, err: EmbeddingError) => void;
  /** Anything else (the engine): logged, and tried again. */
  readonly onError: (err: unknown) => void;
  /** The provider answers again after failing. */
  readonly onRecovered?: () => void;
}

/**
 * Embeds the steps selected for an embedding in the background, in
 * batches, beside the appends and never on them. The queue is not stored:
 * at start it is recomputed from the steps with has_embedding and no
 * vector. After that the writer hands over each selected step as it makes
 * it durable (its canonical texts, so nothing is read back), and a step's
 * vector is written once the engine holds the step. While more than
 * MEMORY_QUEUE steps wait (a provider that is down), new ones are not
 * kept but read from the ledger later, by ledger_seq, which only grows.
 * The vectors of a batch are written in one transaction, so a crash loses
 * a batch whole, and the next start finds its steps again; none is ever
 * stored twice.
 */
export class EmbeddingWorker {
  /** ledger_seq of steps known to have no vector, at or below `covered`, in order. */
  private backlog: number[] = [];
  private backlogAt = 0;
  /** Selected steps handed over by the writer, in order, not yet embedded. */
  private memory: PendingStep[] = [];
  private memoryAt = 0;
  /** `memory`: the writer's steps are kept; `scan`: they are read from the ledger up to `lastSeen`. */
  private mode: 'memory' | 'scan' = 'scan';
  /** Every selected step up to here has its vector, or is in the backlog or in `memory`. */
  private covered = 0;
  /** The highest ledger_seq the writer has reported durable. */
  private lastSeen = 0;
  private started = false;
  private loaded = false;
  private stopped = false;
  private running: Promise<void> | null = null;
  private wake: (() => void) | null = null;
  private readonly abort = new AbortController();
  private failing = false;
  private embeddedCount = 0;
  /** Selected steps reported by the writer and not yet embedded (those in `memory` included). */
  private pendingTail = 0;

  constructor(
    private readonly conn: EngineConnection,
    private readonly embedder: Embedder,
    private readonly opts: EmbeddingWorkerOptions,
  ) {}

  /** Steps waiting for a vector: the recomputed backlog, and those appended since. */
  get queueDepth(): number {
    return this.backlog.length - this.backlogAt + this.pendingTail;
  }

  /** Steps embedded since the start. */
  get embedded(): number {
    return this.embeddedCount;
  }

  /** The writer made appends durable (rows as canonical texts in table order, in ledger_seq order). */
  appended(tables: readonly TableRows[]): void {
    let count = 0;
    let seen = this.lastSeen;
    for (const { table, rows } of tables) {
      const names = table.columns.map((c) => c.name);
      const seqAt = names.indexOf('ledger_seq');
      const last = rows[rows.length - 1];
      if (last !== undefined) seen = Math.max(seen, Number(last[seqAt] ?? 0));
      if (!table.isSteps) continue;
      const at = (name: string): number => names.indexOf(name);
      const [selected, traceId, session, agent, type, content, input, output, createdAt] = [
        at('has_embedding'),
        at('trace_id'),
        at('session_id'),
        at('agent_id'),
        at('step_type'),
        at('content'),
        at('input_data'),
        at('output_data'),
        at('created_at'),
      ];
      for (const row of rows) {
        if (row[selected] !== 'true') continue;
        count++;
        if (this.mode !== 'memory') continue;
        this.memory.push({
          traceId: row[traceId] ?? '',
          seq: Number(row[seqAt] ?? 0),
          text: embeddingText(row[content] ?? null, row[input] ?? null, row[output] ?? null),
          sessionId: row[session] ?? '',
          agentId: row[agent] ?? null,
          stepType: row[type] ?? '',
          createdAt: row[createdAt] ?? '0',
        });
      }
    }
    this.lastSeen = seen;
    if (this.mode === 'memory') {
      this.covered = Math.max(this.covered, seen);
      // A provider that is down must not make the queue hold the steps' texts without bound.
      if (this.memory.length - this.memoryAt > (this.opts.memoryQueue ?? MEMORY_QUEUE)) this.mode = 'scan';
    }
    if (count === 0) return;
    this.pendingTail += count;
    this.opts.observer.embeddingQueue(this.queueDepth);
  }

  start(): void {
    if (this.started) return;
    this.started = true;
    this.running = this.loop();
  }

  /** Runs until every selected step the engine holds has its vector (the CLI's reembed), calling `progress` after each batch. */
  async drain(progress: () => void = () => undefined): Promise<void> {
    await this.load();
    while (!this.stopped && (await this.step())) progress();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.abort.abort();
    this.wake?.();
    await this.running;
  }

  private async load(): Promise<void> {
    const { missing, scanned } = await missingVectors(this.conn);
    this.backlog = missing;
    this.backlogAt = 0;
    this.covered = scanned;
    this.mode = 'scan';
    this.pendingTail = 0;
    this.loaded = true;
    this.opts.observer.embeddingQueue(this.queueDepth);
  }

  private async loop(): Promise<void> {
    const first = this.opts.firstRetryMs ?? FIRST_RETRY_MS;
    let delay = first;
    while (!this.stopped) {
      try {
        if (!this.loaded) await this.load();
        const worked = await this.step();
        if (this.failing) {
          this.failing = false;
          this.opts.onRecovered?.();
        }
        delay = first;
        if (!worked) await this.sleep(this.opts.pollMs ?? 1000);
      } catch (err) {
        if (this.stopped) break;
        if (err instanceof EmbeddingError) {
          this.failing = true;
          this.opts.observer.embeddingFailed('unavailable');
          this.opts.onUnavailable(err, delay);
        } else {
          this.opts.onError(err);
        }
        await this.sleep(delay);
        delay = Math.min(delay * 2, MAX_RETRY_MS);
      }
    }
  }

  /** Embeds one batch; false when there was nothing to embed. */
  private async step(): Promise<boolean> {
    // Several of the provider's batches per engine transaction: each commit syncs DuckDB's WAL.
    const size = Math.max(this.embedder.batchSize, ROWS_PER_STORE);
    if (this.backlogAt < this.backlog.length) {
      const wanted = this.backlog.slice(this.backlogAt, this.backlogAt + size);
      const rows = await selectedSteps(this.conn, wanted[0] as number, wanted[wanted.length - 1] as number, size, wanted);
      await this.embedAndStore(rows);
      this.backlogAt += wanted.length;
      if (this.backlogAt === this.backlog.length) {
        this.backlog = [];
        this.backlogAt = 0;
      }
      this.opts.observer.embeddingQueue(this.queueDepth);
      return true;
    }
    const upTo = this.opts.appliedSeq();
    if (this.memoryAt < this.memory.length) {
      // A step's vector is written once the engine holds the step, so that a search can join it.
      let end = this.memoryAt;
      while (end < this.memory.length && end - this.memoryAt < size && (this.memory[end] as PendingStep).seq <= upTo) end++;
      if (end === this.memoryAt) return false;
      await this.embedAndStore(this.memory.slice(this.memoryAt, end));
      this.pendingTail = Math.max(0, this.pendingTail - (end - this.memoryAt));
      this.memoryAt = end;
      if (this.memoryAt === this.memory.length) {
        this.memory = [];
        this.memoryAt = 0;
      }
      this.opts.observer.embeddingQueue(this.queueDepth);
      return true;
    }
    if (this.mode === 'memory') return false;
    if (upTo > this.covered) {
      const rows = await selectedSteps(this.conn, this.covered + 1, upTo, size);
      await this.embedAndStore(rows);
      this.pendingTail = Math.max(0, this.pendingTail - rows.length);
      this.covered = rows.length < size ? upTo : (rows[rows.length - 1] as PendingStep).seq;
    }
    // Caught up with everything the writer reported: its next steps are kept again.
    if (this.covered >= this.lastSeen) this.mode = 'memory';
    this.opts.observer.embeddingQueue(this.queueDepth);
    return upTo > this.covered || this.mode === 'memory';
  }

  private async embedAndStore(rows: readonly PendingStep[]): Promise<void> {
    if (rows.length === 0) return;
    const vectors: Array<Float32Array | null> = [];
    for (let at = 0; at < rows.length; at += this.embedder.batchSize) {
      const chunk = rows.slice(at, at + this.embedder.batchSize);
      try {
        vectors.push(
          ...(await this.embedder.embed(
            chunk.map((r) => r.text),
            this.abort.signal,
          )),
        );
      } catch (err) {
        if (!refusedInput(err) || this.stopped) throw err;
        // One text the provider will not take (too long, say) must not hold up the others.
        vectors.push(...(await this.oneByOne(chunk)));
      }
      // An in-process embedder computes on the event loop: the appends' turn comes between batches.
      await new Promise((resolve) => setImmediate(resolve));
    }
    const stored = rows.flatMap((r, i) => {
      const vector = vectors[i];
      return vector === null || vector === undefined ? [] : [{ step: r, vector }];
    });
    await storeVectors(this.conn, this.embedder.model, stored);
    this.embeddedCount += stored.length;
    this.opts.observer.stepsEmbedded(stored.length);
  }

  private async oneByOne(rows: readonly PendingStep[]): Promise<Array<Float32Array | null>> {
    const out: Array<Float32Array | null> = [];
    for (const row of rows) {
      try {
        out.push((await this.embedder.embed([row.text], this.abort.signal))[0] ?? null);
      } catch (err) {
        if (!refusedInput(err) || this.stopped) throw err;
        this.opts.observer.embeddingFailed('rejected');
        this.opts.onRejected(row, err);
        out.push(null);
      }
    }
    return out;
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done(): void {
        clearTimeout(timer);
        resolve();
      }
      this.wake = done;
    });
  }
}

/**
 * The provider refused the texts themselves (400, 413, 422): worth trying
 * one at a time. Anything else that is not retried (a wrong key, an unknown
 * model, vectors of another length) is the configuration's fault, and would
 * refuse every step alike: the queue waits for it to be fixed instead.
 */
function refusedInput(err: unknown): err is EmbeddingError {
  return err instanceof EmbeddingError && !err.retryable && (err.status === 400 || err.status === 413 || err.status === 422);
}

/** Selected steps kept in memory for embedding at most; beyond, they are read from the ledger when their turn comes. */
const MEMORY_QUEUE = 10_000;
const FIRST_RETRY_MS = 1000;
const ROWS_PER_STORE = 512;
const MAX_RETRY_MS = 60_000;
