import { Duplex } from 'node:stream';

/**
 * One end of an in-process connection: a duplex whose writes are the other end's reads. The
 * HTTP listener's requests reach the wire through these, as a client would, so that every
 * rule of the wire (roles, identity stamping, the guard, tenants) applies to them unchanged.
 */
export class InProcessEnd extends Duplex {
  peer: InProcessEnd | null = null;
  /** What `remoteAddress` says of the client, as a socket's would. */
  constructor(readonly remoteAddress: string) {
    super({ allowHalfOpen: false });
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    const peer = this.peer;
    if (peer === null || peer.destroyed) {
      callback(new Error('the other end of the in-process connection is closed'));
      return;
    }
    // Copied: the writer may reuse its buffer once the callback has run.
    if (peer.push(Buffer.from(chunk))) callback();
    else peer.waiting = callback;
  }

  override _final(callback: (error?: Error | null) => void): void {
    this.peer?.push(null);
    callback();
  }

  /** The peer's write waiting for this end to be read. */
  private waiting: ((error?: Error | null) => void) | null = null;

  override _read(): void {
    const waiting = this.waiting;
    this.waiting = null;
    waiting?.();
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    const peer = this.peer;
    this.peer = null;
    const waiting = this.waiting;
    this.waiting = null;
    waiting?.(new Error('the in-process connection is closed'));
    if (peer !== null && !peer.destroyed) peer.destroy();
    callback(error);
  }

  // What node-postgres asks of the stream it is given: there is nothing to dial or tune.
  connect(): this {
    queueMicrotask(() => this.emit('connect'));
    return this;
  }
  setNoDelay(): this {
    return this;
  }
  setKeepAlive(): this {
    return this;
  }
  ref(): this {
    return this;
  }
  unref(): this {
    return this;
  }
}

/** Two ends, each reading what the other writes. */
export function inProcessPair(clientAddress: string): { client: InProcessEnd; server: InProcessEnd } {
  const client = new InProcessEnd('in-process');
  const server = new InProcessEnd(clientAddress);
  client.peer = server;
  server.peer = client;
  return { client, server };
}
