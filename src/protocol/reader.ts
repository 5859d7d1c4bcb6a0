import { protocolViolation } from '../errors/pg-error.js';

/**
 * A cursor over one message body. Every read checks the bytes that remain, so
 * a lying length or a missing terminator becomes a protocol violation, never
 * an out-of-bounds read or an endless scan (unlike client-side readers, which
 * trust their server).
 */
export class MessageReader {
  private offset: number;

  constructor(
    private readonly buf: Buffer,
    start = 0,
    private readonly end = buf.length,
  ) {
    this.offset = start;
  }

  get remaining(): number {
    return this.end - this.offset;
  }

  private need(n: number, what: string): void {
    if (n < 0 || this.offset + n > this.end) {
      throw protocolViolation(`invalid message format: ${what} runs past the end of the message`);
    }
  }

  byte(): number {
    this.need(1, 'byte');
    return this.buf[this.offset++] as number;
  }

  int16(): number {
    this.need(2, 'int16');
    const v = this.buf.readInt16BE(this.offset);
    this.offset += 2;
    return v;
  }

  uint16(): number {
    this.need(2, 'int16');
    const v = this.buf.readUInt16BE(this.offset);
    this.offset += 2;
    return v;
  }

  int32(): number {
    this.need(4, 'int32');
    const v = this.buf.readInt32BE(this.offset);
    this.offset += 4;
    return v;
  }

  uint32(): number {
    this.need(4, 'int32');
    const v = this.buf.readUInt32BE(this.offset);
    this.offset += 4;
    return v;
  }

  /** A NUL-terminated UTF-8 string; the terminator must lie inside the message. */
  cstring(): string {
    const nul = this.buf.indexOf(0, this.offset);
    if (nul < 0 || nul >= this.end) {
      throw protocolViolation('invalid message format: string is not terminated');
    }
    const s = this.buf.toString('utf8', this.offset, nul);
    this.offset = nul + 1;
    return s;
  }

  bytes(n: number): Buffer {
    this.need(n, 'value');
    const b = this.buf.subarray(this.offset, this.offset + n);
    this.offset += n;
    return b;
  }

  rest(): Buffer {
    return this.bytes(this.remaining);
  }

  /**
   * A count read from the wire, checked against the bytes left before anyone
   * allocates for it: each element needs at least `minElementSize` bytes.
   */
  count16(minElementSize: number, what: string): number {
    const n = this.int16();
    if (n < 0 || n * minElementSize > this.remaining) {
      throw protocolViolation(`invalid message format: ${what} count ${n} does not fit the message`);
    }
    return n;
  }

  expectEnd(what: string): void {
    if (this.offset !== this.end) {
      throw protocolViolation(`invalid message format: ${this.end - this.offset} unexpected bytes at the end of ${what}`);
    }
  }
}
