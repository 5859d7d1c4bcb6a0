import type { EventEmitter } from 'node:events';
import { BackendCode } from '../../../protocol/codes.js';

/** A message's type byte and length word. */
const HEADER = 5;

/**
 * Frames a backend's bytes ahead of node-postgres' parser, so that a
 * relayed result's DataRow messages can be taken whole, as the bytes
 * PostgreSQL sent: a client that asked for text gets exactly those bytes,
 * and no cell is decoded into a string and encoded back. Every other
 * message, and every DataRow while nobody takes them, goes on to
 * node-postgres unchanged and in order.
 */
export class RowTap {
  /** Takes DataRow frames while set (decided at each message's header). */
  take: ((frame: Buffer) => void) | null = null;
  /** `take` takes every message, not DataRows alone: an exchange node-postgres never sees. */
  takeAll = false;
  /** Called after each piece of the backend's bytes that `take` took frames from. */
  took: (() => void) | null = null;
  /** Bytes of a message going on to node-postgres that have not come yet. */
  private passing = 0;
  /** A DataRow being taken, as it comes, and how many of its bytes are still to come. */
  private taking: Buffer[] | null = null;
  private takingLeft = 0;
  /** The start of a message whose header is not whole yet. */
  private head: Buffer | null = null;

  private constructor(private readonly pass: (chunk: Buffer) => void) {}

  /**
   * Puts itself between `stream` and node-postgres' parser, its one `data`
   * listener once connected. Answers null (nothing changed) if the stream
   * is not as expected: results are then parsed as before.
   */
  static install(stream: EventEmitter): RowTap | null {
    const listeners = stream.listeners('data');
    const parser = listeners[0];
    if (listeners.length !== 1 || parser === undefined) return null;
    const tap = new RowTap((chunk) => parser.call(stream, chunk));
    stream.removeListener('data', parser as (...args: unknown[]) => void);
    stream.on('data', (chunk: Buffer) => tap.push(chunk));
    return tap;
  }

  push(input: Buffer): void {
    this.pushed(input);
    this.took?.();
  }

  private pushed(input: Buffer): void {
    const chunk = this.head === null ? input : Buffer.concat([this.head, input]);
    this.head = null;
    let pos = 0;
    /** Where the bytes not yet handed to node-postgres begin. */
    let run = 0;
    while (pos < chunk.length) {
      if (this.passing > 0) {
        const n = Math.min(this.passing, chunk.length - pos);
        this.passing -= n;
        pos += n;
        continue;
      }
      if (this.taking !== null) {
        const n = Math.min(this.takingLeft, chunk.length - pos);
        this.taking.push(chunk.subarray(pos, pos + n));
        this.takingLeft -= n;
        pos += n;
        run = pos;
        if (this.takingLeft === 0) {
          const frame = Buffer.concat(this.taking);
          this.taking = null;
          this.deliver(frame);
        }
        continue;
      }
      if (chunk.length - pos < HEADER) {
        if (pos > run) this.pass(chunk.subarray(run, pos));
        this.head = Buffer.from(chunk.subarray(pos));
        return;
      }
      const total = 1 + chunk.readInt32BE(pos + 1);
      if ((chunk[pos] !== BackendCode.DataRow && !this.takeAll) || this.take === null || total < HEADER) {
        this.passing = total;
        continue;
      }
      if (pos > run) this.pass(chunk.subarray(run, pos));
      if (chunk.length - pos >= total) {
        this.deliver(chunk.subarray(pos, pos + total));
        pos += total;
      } else {
        this.taking = [chunk.subarray(pos)];
        this.takingLeft = total - (chunk.length - pos);
        pos = chunk.length;
      }
      run = pos;
    }
    if (pos > run) this.pass(chunk.subarray(run, pos));
  }

  /** A whole DataRow, to whoever takes them now; to node-postgres if nobody does any more. */
  private deliver(frame: Buffer): void {
    if (this.take !== null) this.take(frame);
    else this.pass(frame);
  }
}
