import { checkpointText, signNote, verifierKeyOf, type NoteSigner } from './note.js';
import type { LedgerTable } from '../chain/schema.js';
import type { LedgerAppender } from '../chain/append.js';

/** The global log as the issuer signs it: its size, its root at a size, and the durability of its nodes. */
export interface SignedLog {
  size(): number | Promise<number>;
  root(size: number): Buffer | Promise<Buffer>;
  /** Makes the nodes behind a root durable before a signature vouches for them. */
  sync(): void;
}

/** Where signed checkpoints go besides the database: a file, a directory, a webhook. */
export interface CheckpointSink {
  readonly name: string;
  /** Resolves once delivered; rejects to be retried. */
  deliver(note: string, size: number): Promise<void>;
}

export interface IssuerOptions {
  readonly intervalMs: number;
  readonly maxLeaves: number;
  /** First retry delay of a failed delivery; it doubles up to a minute. */
  readonly retryMs?: number;
  readonly onSinkError: (sink: string, err: unknown, attempt: number) => void;
  readonly onIssueError: (err: unknown) => void;
  /**
   * Where several instances share the log (a PostgreSQL engine): whether
   * this one signs now, and if so the last checkpoint any of them issued
   * (its size and its own record's ledger_seq); null when another signs.
   */
  readonly lead?: () => Promise<{ readonly size: number; readonly record: number } | null>;
}

/** What reports an issuer's failures: the server's logger, or anything shaped like it. */
export interface IssuerLog {
  warn(fields: object, message: string): void;
  error(fields: object, message: string): void;
}

/** The schedule and the failure reports of an issuer, as either engine's server configures them. */
export function issuerSchedule(
  checkpoint: { readonly intervalSeconds: number; readonly maxLeaves: number },
  log: IssuerLog,
): Pick<IssuerOptions, 'intervalMs' | 'maxLeaves' | 'onSinkError' | 'onIssueError'> {
  return {
    intervalMs: checkpoint.intervalSeconds * 1000,
    maxLeaves: checkpoint.maxLeaves,
    onSinkError: (sink, err, attempt) => log.warn({ err, sink, attempt }, 'writing a checkpoint to a sink failed; retrying'),
    onIssueError: (err) => log.error({ err }, 'issuing a checkpoint failed'),
  };
}

export interface IssuedCheckpoint {
  readonly size: number;
  readonly root: Buffer;
  readonly note: string;
}

/** Notes waiting per sink: the oldest are dropped past this, as the newest checkpoint implies them. */
const MAX_PENDING = 1000;

/**
 * Signs a checkpoint of the global log every interval and every
 * `maxLeaves` new leaves, when there are any besides its own last record,
 * and at close. Each is appended to the `_cot_checkpoints` ledger through
 * the writer (so it is itself a leaf of the next checkpoint), then handed
 * to the sinks, which deliver in the background and retry: appends never
 * wait for a sink.
 */
export class CheckpointIssuer {
  private timer: NodeJS.Timeout | null = null;
  private issuing: Promise<IssuedCheckpoint | null> | null = null;
  private again = false;
  /** The log size covered by the last checkpoint, and the ledger_seq of its own record. */
  private lastSize = 0;
  private lastRecord = 0;
  private readonly deliveries: SinkQueue[];
  private closed = false;

  constructor(
    private readonly writer: LedgerAppender,
    private readonly log: SignedLog,
    /** Null while the checkpoint ledger is damaged: checkpoints still go to the sinks. */
    private readonly table: LedgerTable | null,
    private readonly signer: NoteSigner,
    sinks: readonly CheckpointSink[],
    private readonly options: IssuerOptions,
    last: { size: number; record: number } | null,
  ) {
    this.deliveries = sinks.map((s) => new SinkQueue(s, options.retryMs ?? 1000, options.onSinkError));
    if (last !== null) {
      this.lastSize = last.size;
      this.lastRecord = last.record;
    }
  }

  get origin(): string {
    return this.signer.name;
  }

  /** The verifier key of the key that signs now: what an evidence bundle names, for its reader to compare with the one it holds. */
  get verifierKey(): string {
    return verifierKeyOf(this.signer);
  }

  start(): void {
    this.writer.onIntegrated = (size) => {
      if (size - this.lastSize >= this.options.maxLeaves) this.soon();
    };
    this.timer = setInterval(() => this.soon(), this.options.intervalMs);
    this.timer.unref();
    this.soon();
  }

  /** Issues one now if there are new leaves; resolves to it, or null when there was nothing new. */
  issue(): Promise<IssuedCheckpoint | null> {
    if (this.issuing !== null) {
      // One at a time; a request during one is served by one more round after it.
      this.again = true;
      return this.issuing;
    }
    this.issuing = this.round().finally(() => {
      this.issuing = null;
      if (this.again && !this.closed) {
        this.again = false;
        this.soon();
      }
    });
    return this.issuing;
  }

  /** The last checkpoint, then every sink's deliveries (bounded by `graceMs`). */
  async close(graceMs: number): Promise<void> {
    if (this.timer !== null) clearInterval(this.timer);
    this.writer.onIntegrated = () => undefined;
    await this.issuing?.catch(() => null);
    this.closed = true;
    try {
      await this.round();
    } catch (err) {
      this.options.onIssueError(err);
    }
    await Promise.race([Promise.all(this.deliveries.map((d) => d.drained())), new Promise((r) => setTimeout(r, graceMs).unref())]);
    for (const d of this.deliveries) d.stop();
  }

  private soon(): void {
    if (this.closed) return;
    this.issue().catch((err: unknown) => this.options.onIssueError(err));
  }

  private async round(): Promise<IssuedCheckpoint | null> {
    if (this.options.lead !== undefined) {
      const last = await this.options.lead();
      if (last === null) return null;
      this.lastSize = last.size;
      this.lastRecord = last.record;
    }
    const size = await this.log.size();
    // Its own last record is the only new leaf: nothing happened since.
    if (size === 0 || size <= this.lastRecord || size <= this.lastSize) return null;
    // The nodes behind the root reach the disk before a signature vouches for them.
    this.log.sync();
    const root = await this.log.root(size);
    const note = signNote(checkpointText({ origin: this.signer.name, size, root }), this.signer);
    if (this.table === null) {
      this.lastSize = size;
      this.lastRecord = size;
    } else {
      const [result] = await this.writer.append([{ table: this.table, rows: [[this.signer.name, String(size), root.toString('base64'), note]] }]);
      this.lastSize = size;
      this.lastRecord = Number(result?.lastSeq ?? 0);
    }
    for (const d of this.deliveries) d.push(note, size);
    return { size, root, note };
  }
}

/** One sink's deliveries, in order, each retried with a doubling delay until it succeeds. */
class SinkQueue {
  private readonly pending: Array<{ note: string; size: number }> = [];
  private running: Promise<void> | null = null;
  private stopped = false;
  private wake: (() => void) | null = null;

  constructor(
    private readonly sink: CheckpointSink,
    private readonly retryMs: number,
    private readonly onError: (sink: string, err: unknown, attempt: number) => void,
  ) {}

  push(note: string, size: number): void {
    this.pending.push({ note, size });
    if (this.pending.length > MAX_PENDING) this.pending.shift();
    this.deliverAll();
  }

  /** A note pushed after run() saw none left, but before it ended, is delivered when it ends. */
  private deliverAll(): void {
    this.running ??= this.run().finally(() => {
      this.running = null;
      if (this.pending.length > 0 && !this.stopped) this.deliverAll();
    });
  }

  drained(): Promise<void> {
    return this.running ?? Promise.resolve();
  }

  stop(): void {
    this.stopped = true;
    this.wake?.();
  }

  private async run(): Promise<void> {
    let attempt = 0;
    while (!this.stopped) {
      const next = this.pending[0];
      if (next === undefined) return;
      try {
        await this.sink.deliver(next.note, next.size);
        this.pending.shift();
        attempt = 0;
      } catch (err) {
        attempt++;
        this.onError(this.sink.name, err, attempt);
        await new Promise<void>((resolve) => {
          this.wake = resolve;
          setTimeout(resolve, Math.min(60_000, this.retryMs * 2 ** (attempt - 1))).unref();
        });
        this.wake = null;
      }
    }
  }
}
