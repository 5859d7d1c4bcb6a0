import { PgError, protocolViolation } from '../errors/pg-error.js';
import { SqlState } from '../errors/sqlstate.js';
import { FrontendCode, StartupCode } from './codes.js';

/** Startup-phase packets have no type byte; they are handed out with this code. */
export const STARTUP_FRAME = -1;

export interface Frame {
  /** The message type byte, or STARTUP_FRAME for a packet of the startup phase. */
  readonly code: number;
  /** The body after the length word. It is never overwritten later, so it may be kept. */
  readonly body: Buffer;
}

/** PostgreSQL's own bound on a startup packet (MAX_STARTUP_PACKET_LENGTH). */
const MAX_STARTUP_LENGTH = 10_000;

/** Messages that carry no body at all, or only a few names: bound them tightly. */
const SMALL_MESSAGE_LIMIT = 64 * 1024;
const smallMessages = new Set<number>([
  FrontendCode.Sync,
  FrontendCode.Flush,
  FrontendCode.Terminate,
  FrontendCode.Describe,
  FrontendCode.Close,
  FrontendCode.Execute,
  FrontendCode.CopyDone,
]);

/** From this size, a message being received holds memory the server counts (MessageMemory). */
export const COUNTED_MESSAGE_BYTES = 1024 * 1024;

/** The memory every connection's messages being received share (server/message-memory.ts). */
export interface MessageMemory {
  /** Takes `bytes` for a message being received; false when they are not there. */
  take(bytes: number): boolean;
  give(bytes: number): void;
  /** What they all may hold, in bytes, for the refusal's words. */
  readonly capacity: number;
}

/**
 * Cuts a byte stream into frames. A frame that arrives whole inside one chunk
 * is handed out as a view of that chunk (no copy); a frame split across
 * chunks is assembled into one buffer allocated once its length is known, so
 * a large message in many small chunks costs one copy, not a quadratic
 * series of concatenations. Lengths are checked before anything is
 * allocated.
 */
export class Framer {
  private expectStartup = true;
  private readonly header = Buffer.alloc(5);
  private headerFilled = 0;
  private body: Buffer | null = null;
  private bodyFilled = 0;
  private bodyCode = 0;
  /** What the message being received holds of `memory`. */
  private held = 0;

  constructor(
    private readonly maxMessageSize: number,
    private readonly memory: MessageMemory | null = null,
  ) {}

  /** Gives back what a message cut short by the connection's end held. */
  release(): void {
    this.memory?.give(this.held);
    this.held = 0;
  }

  /** Whether the next frame is still a startup-phase packet. */
  get inStartup(): boolean {
    return this.expectStartup;
  }

  /** Whether bytes of an incomplete frame are buffered. */
  get hasPartial(): boolean {
    return this.body !== null || this.headerFilled > 0;
  }

  /** Returns the complete frames in `chunk`; throws a FATAL 08P01 PgError on a bad length. */
  push(chunk: Buffer): Frame[] {
    const frames: Frame[] = [];
    let offset = 0;
    while (offset < chunk.length) {
      if (this.body !== null) {
        const n = Math.min(this.body.length - this.bodyFilled, chunk.length - offset);
        chunk.copy(this.body, this.bodyFilled, offset, offset + n);
        this.bodyFilled += n;
        offset += n;
        if (this.bodyFilled === this.body.length) {
          frames.push(this.emit(this.bodyCode, this.body));
          this.body = null;
          this.release();
        }
        continue;
      }
      const headerLength = this.expectStartup ? 4 : 5;
      let header: Buffer;
      let headerStart: number;
      if (this.headerFilled === 0 && chunk.length - offset >= headerLength) {
        header = chunk;
        headerStart = offset;
        offset += headerLength;
      } else {
        const n = Math.min(headerLength - this.headerFilled, chunk.length - offset);
        chunk.copy(this.header, this.headerFilled, offset, offset + n);
        this.headerFilled += n;
        offset += n;
        if (this.headerFilled < headerLength) break;
        this.headerFilled = 0;
        header = this.header;
        headerStart = 0;
      }
      const code = this.expectStartup ? STARTUP_FRAME : (header[headerStart] as number);
      const length = header.readInt32BE(headerStart + headerLength - 4);
      const bodyLength = this.checkLength(code, length) - 4;
      if (chunk.length - offset >= bodyLength) {
        frames.push(this.emit(code, chunk.subarray(offset, offset + bodyLength)));
        offset += bodyLength;
      } else {
        this.hold(code, bodyLength);
        this.body = Buffer.allocUnsafe(bodyLength);
        this.bodyFilled = 0;
        this.bodyCode = code;
      }
    }
    return frames;
  }

  /**
   * A large message that arrives in pieces is buffered until whole: its size
   * is taken from what all connections share before anything is allocated, so
   * that many clients announcing large messages and sending them slowly cannot
   * hold more than that together.
   */
  private hold(code: number, bodyLength: number): void {
    if (this.memory === null || bodyLength < COUNTED_MESSAGE_BYTES) return;
    if (!this.memory.take(bodyLength)) {
      throw new PgError(
        SqlState.OutOfMemory,
        'out of memory',
        {
          detail: `A message of type "${String.fromCharCode(code)}" of ${bodyLength} bytes does not fit in what the server keeps for messages being received (${this.memory.capacity} bytes, a quarter of limits.memoryMB), which other connections hold.`,
          hint: 'Send smaller messages, or try again when the others are received.',
        },
        'FATAL',
      );
    }
    this.held = bodyLength;
  }

  private checkLength(code: number, length: number): number {
    if (code === STARTUP_FRAME) {
      if (length < 8 || length > MAX_STARTUP_LENGTH) {
        throw protocolViolation(`invalid length of startup packet: ${length}`);
      }
      return length;
    }
    if (length < 4) {
      throw protocolViolation(`invalid message length ${length} for message type "${String.fromCharCode(code)}"`);
    }
    const limit = smallMessages.has(code) ? SMALL_MESSAGE_LIMIT : this.maxMessageSize;
    if (length - 4 > limit) {
      throw protocolViolation(`message type "${String.fromCharCode(code)}" of ${length} bytes exceeds the limit of ${limit} bytes`);
    }
    return length;
  }

  private emit(code: number, body: Buffer): Frame {
    if (code === STARTUP_FRAME && body.length >= 4) {
      const version = body.readInt32BE(0);
      // SSLRequest and GSSENCRequest are followed by another startup packet;
      // everything else ends the startup phase.
      if (version !== StartupCode.SSLRequest && version !== StartupCode.GSSENCRequest) {
        this.expectStartup = false;
      }
    }
    return { code, body };
  }
}
