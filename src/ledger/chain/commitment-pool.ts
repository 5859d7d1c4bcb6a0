import { Worker } from 'node:worker_threads';
import { randomFromPool, rowLayout } from './append.js';
import { KEYS_DOMAIN, NATIVE_FROM, type Precommitted, SALT_BYTES } from './commitments.js';
import { committedOf } from './row-hash.js';
import type { LedgerTable } from './schema.js';
import { sha256Source } from './sha256-js.js';

/**
 * A cotwire/v3 row costs about 24 short hashes more than a v1 row (a block
 * of keys per two committed columns, a commitment per column), and a batch's
 * rows are chained one by one on the server's thread. Their commitments
 * depend only on each row's salt and the client's values, not on the chain:
 * a worker thread hashes them while this thread chains the rows before
 * them, so that on a machine with a spare core a v3 batch appends at v1's
 * speed (docs/benchmarks.md). Single rows, and any row the worker cannot
 * take, are hashed in the chain as before; if the worker stops answering it
 * is dropped and every row is.
 *
 * The two threads share memory and counters. This thread writes each row
 * (its salt, then per committed column 16 bytes of room for the key and
 * lp(text)) and counts it ready; the worker writes the key into the room,
 * hashes in place, writes the row's commitments and counts it done.
 */

/** Fewer rows are not worth the hand-over. */
const MIN_ROWS = 16;
const MAX_ROWS = 8192;
const INPUT_BYTES = 4 * 1024 * 1024;
const OUTPUT_BYTES = 4 * 1024 * 1024;
/** Rows counted ready at a time: each count may wake the worker. */
const PUBLISH_EVERY = 8;
/** Past this, the worker is taken for stopped (it answers in microseconds). */
const STALL_MS = 5000;

// Counters in the control array (the worker's copy of these places is written out in commitLoop).
const READY = 0;
const DONE = 1;
const BASE = 2;
const PER_ROW = 3;

interface SharedBuffers {
  readonly ctl: SharedArrayBuffer;
  readonly input: SharedArrayBuffer;
  readonly output: SharedArrayBuffer;
  readonly starts: SharedArrayBuffer;
}

type Sha256Into = (data: Uint8Array, start: number, length: number, out: Uint8Array, outAt: number) => void;

/**
 * The worker's loop. Self-contained but for its arguments: the worker is
 * built from its source text.
 */
function commitLoop(shared: SharedBuffers, sha256Into: Sha256Into, nativeInto: Sha256Into, domain: Uint8Array, nativeFrom: number): void {
  const ctl = new Int32Array(shared.ctl);
  const input = new Uint8Array(shared.input);
  const output = new Uint8Array(shared.output);
  const starts = new Int32Array(shared.starts);
  const block = new Uint8Array(domain.length + 16 + 4);
  block.set(domain, 0);
  const keys = new Uint8Array(32);
  for (;;) {
    const ready = Atomics.load(ctl, 0);
    const done = Atomics.load(ctl, 1);
    if (((ready - done) | 0) <= 0) {
      Atomics.wait(ctl, 0, ready);
      continue;
    }
    const slot = (done - Atomics.load(ctl, 2)) | 0;
    const perRow = Atomics.load(ctl, 3);
    let at = starts[slot] as number;
    for (let i = 0; i < 16; i++) block[domain.length + i] = input[at + i] as number;
    at += 16;
    for (let m = 0; m < perRow; m++) {
      if (m % 2 === 0) {
        const b = m / 2;
        const p = domain.length + 16;
        block[p] = b >>> 24;
        block[p + 1] = (b >>> 16) & 0xff;
        block[p + 2] = (b >>> 8) & 0xff;
        block[p + 3] = b & 0xff;
        sha256Into(block, 0, block.length, keys, 0);
      }
      for (let i = 0; i < 16; i++) input[at + i] = keys[(m % 2) * 16 + i] as number;
      // lp(text)'s length (texts stay far below 4 GiB: its first bytes are 0), or the NULL mark's eight 0xff bytes.
      const n =
        input[at + 16] === 0xff
          ? 0
          : ((input[at + 20] as number) << 24) | ((input[at + 21] as number) << 16) | ((input[at + 22] as number) << 8) | (input[at + 23] as number);
      const length = 24 + n;
      const outAt = (slot * perRow + m) * 32;
      if (length < nativeFrom) sha256Into(input, at, length, output, outAt);
      else nativeInto(input, at, length, output, outAt);
      at += length;
    }
    Atomics.store(ctl, 1, (done + 1) | 0);
    Atomics.notify(ctl, 1);
  }
}

function workerSource(): string {
  return [
    "'use strict';",
    "const { workerData } = require('node:worker_threads');",
    "const { hash } = require('node:crypto');",
    sha256Source(),
    'function nativeInto(data, start, length, out, outAt) {',
    "  out.set(hash('sha256', Buffer.from(data.buffer, data.byteOffset + start, length), 'buffer'), outAt);",
    '}',
    `(${commitLoop.toString()})(workerData.shared, sha256Into, nativeInto, new Uint8Array(workerData.domain), workerData.nativeFrom);`,
  ].join('\n');
}

/** The worker and the memory it shares with this thread. */
class CommitmentPool {
  private readonly ctl: Int32Array;
  private readonly input: Buffer;
  private readonly output: Buffer;
  private readonly starts: Int32Array;
  private broken = false;

  constructor(
    private readonly worker: Worker,
    shared: SharedBuffers,
  ) {
    this.ctl = new Int32Array(shared.ctl);
    this.input = Buffer.from(shared.input);
    this.output = Buffer.from(shared.output);
    this.starts = new Int32Array(shared.starts);
    worker.on('error', () => this.stop());
    worker.on('exit', () => {
      this.broken = true;
    });
  }

  static start(): CommitmentPool | null {
    const shared: SharedBuffers = {
      ctl: new SharedArrayBuffer(4 * 4),
      input: new SharedArrayBuffer(INPUT_BYTES),
      output: new SharedArrayBuffer(OUTPUT_BYTES),
      starts: new SharedArrayBuffer(MAX_ROWS * 4),
    };
    try {
      const worker = new Worker(workerSource(), {
        eval: true,
        workerData: { shared, domain: Uint8Array.from(KEYS_DOMAIN), nativeFrom: NATIVE_FROM },
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

  /** Waits until the worker has done the row counted `target`; false if it stalls (it is then stopped). */
  waitDone(target: number): boolean {
    const deadline = performance.now() + STALL_MS;
    for (;;) {
      const done = Atomics.load(this.ctl, DONE);
      if (((done - target) | 0) >= 0) return true;
      const left = deadline - performance.now();
      if (this.broken || left <= 0) {
        this.stop();
        return false;
      }
      Atomics.wait(this.ctl, DONE, done, left);
    }
  }

  /**
   * Hands the rows' committed values to the worker: `values(r, m)` is row
   * r's text of committed column m. Rows that do not fit are left out.
   */
  begin(rows: number, perRow: number, values: (row: number, m: number) => string | null): CommitmentsAhead | null {
    // The last batch's rows may still be hashing (its chain stopped at an error): their memory is about to be reused.
    if (!this.waitDone(Atomics.load(this.ctl, READY))) return null;
    const base = Atomics.load(this.ctl, READY);
    Atomics.store(this.ctl, BASE, base);
    Atomics.store(this.ctl, PER_ROW, perRow);
    const capacity = Math.min(rows, MAX_ROWS, Math.floor(OUTPUT_BYTES / (perRow * 32)));
    const salts: Buffer[] = [];
    let at = 0;
    let r = 0;
    for (; r < capacity; r++) {
      const start = at;
      if (at + SALT_BYTES > INPUT_BYTES) break;
      const salt = randomFromPool(SALT_BYTES);
      at += salt.copy(this.input, at);
      let fits = true;
      for (let m = 0; m < perRow && fits; m++) {
        const text = values(r, m);
        // A UTF-8 encoding takes at most three bytes per UTF-16 unit.
        if (at + 24 + (text === null ? 0 : text.length * 3) > INPUT_BYTES) fits = false;
        else if (text === null) {
          this.input.fill(0xff, at + 16, at + 24);
          at += 24;
        } else {
          const n = this.input.write(text, at + 24, 'utf8');
          this.input.writeUInt32BE(0, at + 16);
          this.input.writeUInt32BE(n, at + 20);
          at += 24 + n;
        }
      }
      if (!fits) {
        at = start;
        break;
      }
      this.starts[r] = start;
      salts.push(salt);
      if ((r + 1) % PUBLISH_EVERY === 0) this.publish(base, r + 1);
    }
    this.publish(base, r);
    return r === 0 ? null : new CommitmentsAhead(this, this.output, base, perRow, salts);
  }

  private publish(base: number, rows: number): void {
    Atomics.store(this.ctl, READY, (base + rows) | 0);
    Atomics.notify(this.ctl, READY);
  }
}

/** One batch's rows as the worker hashes them. */
export class CommitmentsAhead {
  constructor(
    private readonly pool: CommitmentPool,
    private readonly output: Buffer,
    private readonly base: number,
    private readonly perRow: number,
    private readonly salts: readonly Buffer[],
  ) {}

  /** Row r's salt and commitments, once hashed; null for a row the worker did not take (the chain hashes it). */
  row(r: number): Precommitted | null {
    const salt = this.salts[r];
    if (salt === undefined || !this.pool.usable || !this.pool.waitDone((this.base + r + 1) | 0)) return null;
    return { salt, commitments: this.output, at: r * this.perRow * 32 };
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
