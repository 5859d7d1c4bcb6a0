import { randomBytes } from 'node:crypto';
import { Worker } from 'node:worker_threads';
import { rowLayout } from './append.js';
import { KEYS_DOMAIN, NATIVE_FROM, type Precommitted, SALT_BYTES, writeText } from './commitments.js';
import { committedOf } from './row-hash.js';
import type { LedgerTable } from './schema.js';
import { sha256Source } from './sha256-js.js';

/**
 * A cotwire/v3 row costs about 24 short hashes more than a v1 row (a block
 * of keys per two committed columns, a commitment per column), and a batch's
 * rows are chained one by one on the server's thread. Their commitments
 * depend only on each row's salt and the client's values, not on the chain:
 * a worker thread hashes them while this thread chains, so that on a
 * machine with a spare core a v3 batch appends at about v1's speed
 * (docs/benchmarks.md). Single rows, and any row the worker does not take,
 * are hashed in the chain as before; if the worker stops answering it is
 * dropped and every row is.
 *
 * The two threads share memory. This thread writes the rows from the last
 * to the first (each row's salt, then per committed column 16 bytes of room
 * for the key and lp(text)); the worker takes them from the last down, as
 * they are written, writes each key into its room, hashes in place and
 * marks the row done, while the chain hashes rows from the first up. Each
 * row is claimed by one compare-and-swap, so they meet in the middle and
 * neither waits for more than the row the other is on. Between batches the
 * worker draws salts ahead and derives their first blocks of keys (RING):
 * a row given one of them costs 12 hashes instead of 18, on either side.
 */

/** Fewer rows are not worth the hand-over. */
const MIN_ROWS = 16;
const MAX_ROWS = 8192;
const INPUT_BYTES = 4 * 1024 * 1024;
const OUTPUT_BYTES = 4 * 1024 * 1024;
/** Rows written at a time before the worker is told: each telling may wake it. */
const PUBLISH_EVERY = 4;
/** Past this, the worker is taken for stopped (it answers in microseconds). */
const STALL_MS = 5000;

// Places in the control array; commitLoop spells the same numbers out.
/** The batch's token (never 0); the worker starts a batch when it changes. */
const JOB = 0;
/** The batch's rows. */
const ROWS = 1;
const PER_ROW = 2;
/** The lowest row written so far: the worker takes no row below it. */
const LOW = 3;
/** 1 once every row that will be written is: the worker then takes none below LOW. */
const WRITTEN = 4;
/** The batch the worker is to give up (its chain stopped at an error). */
const STOP = 5;
/** The last batch the worker has finished with. */
const IDLE = 6;
/** Entries of the ring of salts the worker has derived, and entries the chain is done with (absolute counts; they wrap). */
const FILLED = 7;
const RELEASED = 8;

/**
 * The ring of salts whose first blocks of keys the worker derives while it
 * waits for a batch: 6 of a `_cot_steps` row's 18 hashes are then done
 * before the batch arrives.
 */
const RING = 4096;
const RING_BLOCKS = 6;
const RING_ENTRY = 16 + RING_BLOCKS * 32;

interface SharedBuffers {
  readonly ctl: SharedArrayBuffer;
  readonly input: SharedArrayBuffer;
  readonly output: SharedArrayBuffer;
  readonly starts: SharedArrayBuffer;
  /** Per row: who claimed it in which batch (2 * job for the chain, 2 * job + 1 for the worker). */
  readonly claims: SharedArrayBuffer;
  /** Per row: the batch whose row the worker has done. */
  readonly status: SharedArrayBuffer;
  /** Per row: its entry in the ring (its salt and first blocks of keys), or -1. */
  readonly entries: SharedArrayBuffer;
  readonly ring: SharedArrayBuffer;
}

type Sha256Into = (data: Uint8Array, start: number, length: number, out: Uint8Array, outAt: number) => void;

/**
 * The worker's loop. Self-contained but for its arguments: the worker is
 * built from its source text.
 */
function commitLoop(
  shared: SharedBuffers,
  sha256Into: Sha256Into,
  nativeInto: Sha256Into,
  randomFill: (b: Uint8Array) => void,
  domain: Uint8Array,
  nativeFrom: number,
  ring: { readonly size: number; readonly blocks: number; readonly entry: number },
): void {
  const ctl = new Int32Array(shared.ctl);
  const entries = new Int32Array(shared.entries);
  const derived = new Uint8Array(shared.ring);
  const random = new Uint8Array(16 * 256);
  let randomAt = random.length;
  const input = new Uint8Array(shared.input);
  const output = new Uint8Array(shared.output);
  const starts = new Int32Array(shared.starts);
  const claims = new Int32Array(shared.claims);
  const status = new Int32Array(shared.status);
  const block = new Uint8Array(domain.length + 16 + 4);
  block.set(domain, 0);
  const keys = new Uint8Array(32);
  /** Block b of the keys of the salt in `block`, to out[outAt, outAt + 32). */
  const deriveBlock = (b: number, out: Uint8Array, outAt: number): void => {
    const p = domain.length + 16;
    block[p] = b >>> 24;
    block[p + 1] = (b >>> 16) & 0xff;
    block[p + 2] = (b >>> 8) & 0xff;
    block[p + 3] = b & 0xff;
    sha256Into(block, 0, block.length, out, outAt);
  };
  let last = 0;
  for (;;) {
    const job = Atomics.load(ctl, 0);
    if (job === last) {
      // Between batches: derive the next salt's blocks of keys, while the ring has room.
      const filled = Atomics.load(ctl, 7);
      if (((filled - Atomics.load(ctl, 8)) | 0) >= ring.size) {
        Atomics.wait(ctl, 0, job);
        continue;
      }
      if (randomAt === random.length) {
        randomFill(random);
        randomAt = 0;
      }
      const at = ((filled >>> 0) % ring.size) * ring.entry;
      for (let i = 0; i < 16; i++) {
        derived[at + i] = random[randomAt + i] as number;
        block[domain.length + i] = random[randomAt + i] as number;
      }
      randomAt += 16;
      for (let b = 0; b < ring.blocks; b++) deriveBlock(b, derived, at + 16 + b * 32);
      Atomics.store(ctl, 7, (filled + 1) | 0);
      continue;
    }
    const perRow = Atomics.load(ctl, 2);
    const mine = (job * 2 + 1) | 0;
    const theirs = (job * 2) | 0;
    for (let r = Atomics.load(ctl, 1) - 1; r >= 0; r--) {
      // Until this row is written, or the batch says no more will be.
      let low = Atomics.load(ctl, 3);
      while (low > r && Atomics.load(ctl, 4) === 0 && Atomics.load(ctl, 5) !== job) {
        Atomics.wait(ctl, 3, low, 1);
        low = Atomics.load(ctl, 3);
      }
      if (low > r || Atomics.load(ctl, 5) === job) break;
      const claim = Atomics.load(claims, r);
      if (claim === theirs || Atomics.compareExchange(claims, r, claim, mine) !== claim) break;
      let at = starts[r] as number;
      for (let i = 0; i < 16; i++) block[domain.length + i] = input[at + i] as number;
      at += 16;
      const entry = entries[r] as number;
      for (let m = 0; m < perRow; m++) {
        if (m % 2 === 0 && entry >= 0 && m / 2 < ring.blocks) {
          const from = entry * ring.entry + 16 + (m / 2) * 32;
          for (let i = 0; i < 32; i++) keys[i] = derived[from + i] as number;
        } else if (m % 2 === 0) deriveBlock(m / 2, keys, 0);
        for (let i = 0; i < 16; i++) input[at + i] = keys[(m % 2) * 16 + i] as number;
        // lp(text)'s length (texts stay far below 4 GiB: its first bytes are 0), or the NULL mark's eight 0xff bytes.
        const n =
          input[at + 16] === 0xff
            ? 0
            : ((input[at + 20] as number) << 24) | ((input[at + 21] as number) << 16) | ((input[at + 22] as number) << 8) | (input[at + 23] as number);
        const length = 24 + n;
        const outAt = (r * perRow + m) * 32;
        if (length < nativeFrom) sha256Into(input, at, length, output, outAt);
        else nativeInto(input, at, length, output, outAt);
        at += length;
      }
      Atomics.store(status, r, job);
      Atomics.notify(status, r);
    }
    last = job;
    Atomics.store(ctl, 6, job);
    Atomics.notify(ctl, 6);
  }
}

function workerSource(): string {
  return [
    "'use strict';",
    "const { workerData } = require('node:worker_threads');",
    "const { hash, randomFillSync } = require('node:crypto');",
    sha256Source(),
    'function nativeInto(data, start, length, out, outAt) {',
    "  out.set(hash('sha256', Buffer.from(data.buffer, data.byteOffset + start, length), 'buffer'), outAt);",
    '}',
    `(${commitLoop.toString()})(workerData.shared, sha256Into, nativeInto, randomFillSync, new Uint8Array(workerData.domain), workerData.nativeFrom, workerData.ring);`,
  ].join('\n');
}

/** The worker and the memory it shares with this thread. */
class CommitmentPool {
  private readonly ctl: Int32Array;
  private readonly input: Buffer;
  private readonly output: Buffer;
  private readonly starts: Int32Array;
  private readonly claims: Int32Array;
  private readonly status: Int32Array;
  private readonly entries: Int32Array;
  readonly ring: Buffer;
  /** Entries of the ring taken so far (absolute; wraps). */
  private taken = 0;
  private job = 0;
  private broken = false;

  constructor(
    private readonly worker: Worker,
    shared: SharedBuffers,
  ) {
    this.ctl = new Int32Array(shared.ctl);
    this.input = Buffer.from(shared.input);
    this.output = Buffer.from(shared.output);
    this.starts = new Int32Array(shared.starts);
    this.claims = new Int32Array(shared.claims);
    this.status = new Int32Array(shared.status);
    this.entries = new Int32Array(shared.entries);
    this.ring = Buffer.from(shared.ring);
    worker.on('error', () => this.stop());
    worker.on('exit', () => {
      this.broken = true;
    });
  }

  static start(): CommitmentPool | null {
    const shared: SharedBuffers = {
      ctl: new SharedArrayBuffer(16 * 4),
      input: new SharedArrayBuffer(INPUT_BYTES),
      output: new SharedArrayBuffer(OUTPUT_BYTES),
      starts: new SharedArrayBuffer(MAX_ROWS * 4),
      claims: new SharedArrayBuffer(MAX_ROWS * 4),
      status: new SharedArrayBuffer(MAX_ROWS * 4),
      entries: new SharedArrayBuffer(MAX_ROWS * 4),
      ring: new SharedArrayBuffer(RING * RING_ENTRY),
    };
    try {
      const worker = new Worker(workerSource(), {
        eval: true,
        workerData: { shared, domain: Uint8Array.from(KEYS_DOMAIN), nativeFrom: NATIVE_FROM, ring: { size: RING, blocks: RING_BLOCKS, entry: RING_ENTRY } },
        name: 'cotwire-commitments',
      });
      // It only ever waits for rows: it must not keep the process alive.
      worker.unref();
      return new CommitmentPool(worker, shared);
    } catch {
      return null;
    }
  }

  get usable(): boolean {
    return !this.broken;
  }

  stop(): void {
    this.broken = true;
    void this.worker.terminate();
  }

  /** Waits on `at` of `array` while `busy()`; false if the worker stalls (it is then stopped). */
  private waitWhile(array: Int32Array, at: number, busy: () => boolean): boolean {
    const deadline = performance.now() + STALL_MS;
    while (busy()) {
      const left = deadline - performance.now();
      if (this.broken || left <= 0) {
        this.stop();
        return false;
      }
      Atomics.wait(array, at, Atomics.load(array, at), Math.min(left, 1));
    }
    return true;
  }

  /** Row `row` of batch `job`: true once the worker has done it; false when the chain claimed it (or the worker stalled) and hashes it. */
  take(job: number, row: number): boolean {
    if (Atomics.load(this.status, row) === job) return true;
    const chain = (job * 2) | 0;
    const claim = Atomics.load(this.claims, row);
    if (claim !== ((job * 2 + 1) | 0) && Atomics.compareExchange(this.claims, row, claim, chain) === claim) return false;
    // The worker is on it.
    return this.waitWhile(this.status, row, () => Atomics.load(this.status, row) !== job);
  }

  /** Waits until the worker has finished with batch `job`. */
  settle(job: number): boolean {
    return this.waitWhile(this.ctl, IDLE, () => Atomics.load(this.ctl, IDLE) !== job);
  }

  /**
   * Hands the rows' committed values to the worker: `values(r, m)` is row
   * r's text of committed column m. Rows that do not fit are left to the chain.
   */
  begin(rows: number, perRow: number, values: (row: number, m: number) => string | null): CommitmentsAhead | null {
    const ctl = this.ctl;
    // The last batch may have stopped part way (an error): the worker gives it up, and its memory is reused.
    const previous = this.job;
    if (previous !== 0) {
      Atomics.store(ctl, STOP, previous);
      Atomics.notify(ctl, LOW);
      if (!this.settle(previous)) return null;
    }
    // The last batch is over: the ring's entries it took may be derived again.
    Atomics.store(ctl, RELEASED, this.taken);
    const job = (previous + 1) | 0 || 1;
    const capacity = Math.min(rows, MAX_ROWS, Math.floor(OUTPUT_BYTES / Math.max(1, perRow * 32)));
    Atomics.store(ctl, ROWS, capacity);
    Atomics.store(ctl, PER_ROW, perRow);
    Atomics.store(ctl, LOW, capacity);
    Atomics.store(ctl, WRITTEN, 0);
    this.job = job;
    Atomics.store(ctl, JOB, job);
    Atomics.notify(ctl, JOB);
    // One draw for the batch's salts: a call per row costs more than its 16 bytes.
    const salts = randomBytes(capacity * SALT_BYTES);
    const input = this.input;
    const filled = Atomics.load(ctl, FILLED);
    let at = 0;
    let r = capacity - 1;
    for (; r >= 0; r--) {
      const start = at;
      if (at + SALT_BYTES > INPUT_BYTES) break;
      if (((filled - this.taken) | 0) > 0) {
        // A salt whose first blocks of keys the worker has derived.
        const entry = (this.taken >>> 0) % RING;
        this.ring.copy(salts, r * SALT_BYTES, entry * RING_ENTRY, entry * RING_ENTRY + SALT_BYTES);
        this.entries[r] = entry;
        this.taken = (this.taken + 1) | 0;
      } else this.entries[r] = -1;
      for (let i = 0; i < SALT_BYTES; i++) input[at + i] = salts[r * SALT_BYTES + i] as number;
      at += SALT_BYTES;
      let fits = true;
      for (let m = 0; m < perRow && fits; m++) {
        const text = values(r, m);
        // A UTF-8 encoding takes at most three bytes per UTF-16 unit.
        if (at + 24 + (text === null ? 0 : text.length * 3) > INPUT_BYTES) fits = false;
        else if (text === null) {
          for (let i = 16; i < 24; i++) input[at + i] = 0xff;
          at += 24;
        } else {
          const n = writeText(input, at + 24, text);
          // lp's eight bytes of length: texts stay far below 4 GiB.
          for (let i = 16; i < 20; i++) input[at + i] = 0;
          input[at + 20] = n >>> 24;
          input[at + 21] = (n >>> 16) & 0xff;
          input[at + 22] = (n >>> 8) & 0xff;
          input[at + 23] = n & 0xff;
          at += 24 + n;
        }
      }
      if (!fits) break;
      this.starts[r] = start;
      if (r % PUBLISH_EVERY === 0) this.publish(r);
    }
    this.publish(r + 1);
    Atomics.store(ctl, WRITTEN, 1);
    Atomics.notify(ctl, LOW);
    return r + 1 >= capacity ? null : new CommitmentsAhead(this, this.output, job, perRow, salts, r + 1, this.entries);
  }

  private publish(low: number): void {
    Atomics.store(this.ctl, LOW, low);
    Atomics.notify(this.ctl, LOW);
  }
}

/** One batch's rows as the worker hashes them. */
export class CommitmentsAhead {
  constructor(
    private readonly pool: CommitmentPool,
    private readonly output: Buffer,
    private readonly job: number,
    private readonly perRow: number,
    /** Row r's salt at r * SALT_BYTES. */
    private readonly salts: Buffer,
    /** The first row written: those before it are the chain's. */
    private readonly first: number,
    private readonly entries: Int32Array,
  ) {}

  /** Waits until the worker has taken every row it will (tests; nothing else needs to). */
  settle(): boolean {
    return this.pool.settle(this.job);
  }

  /** Row r's salt and commitments; null for a row the chain is to hash (the worker did not take it). Asked in order. */
  row(r: number): Precommitted | null {
    if (r < this.first || r * SALT_BYTES >= this.salts.length || !this.pool.usable) return null;
    const salt = this.salts.subarray(r * SALT_BYTES, (r + 1) * SALT_BYTES);
    if (this.pool.take(this.job, r)) return { salt, commitments: this.output, at: r * this.perRow * 32, blocks: null };
    // The chain hashes this row, from the blocks of keys the worker derived ahead for its salt if it did.
    const entry = this.entries[r] as number;
    return entry < 0 ? null : { salt, commitments: null, at: 0, blocks: { buffer: this.pool.ring, at: entry * RING_ENTRY + 16, count: RING_BLOCKS } };
  }
}

let shared: CommitmentPool | null | undefined;

/**
 * The commitments of a job's rows, hashed ahead on the worker; null when
 * the chain should hash them itself (not a v3 ledger, too few rows, no
 * worker). Call row(i) in order as each row is chained, before any other
 * batch begins.
 */
export function commitmentsAhead(table: LedgerTable, rows: ReadonlyArray<ReadonlyArray<string | null>>): CommitmentsAhead | null {
  const layout = rowLayout(table);
  if (layout.salt < 0 || rows.length < MIN_ROWS) return null;
  const committed = committedOf(layout.names);
  // The client's place of each committed column: all of them are the client's, or the chain hashes the rows.
  const from: number[] = [];
  for (let p = 0; p < committed.length; p++) if (committed[p] === true) from.push(layout.client.indexOf(p));
  if (from.some((j) => j < 0)) return null;
  if (shared === undefined) shared = CommitmentPool.start();
  if (shared === null || !shared.usable) return null;
  return shared.begin(rows.length, from.length, (r, m) => rows[r]?.[from[m] as number] ?? null);
}
