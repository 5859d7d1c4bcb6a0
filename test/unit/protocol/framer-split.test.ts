import { serialize } from 'pg-protocol';
import { describe, expect, it } from 'vitest';
import { PgError } from '../../../src/errors/pg-error.js';
import { StartupCode } from '../../../src/protocol/codes.js';
import { decodeFrontendMessage, decodeStartupPacket } from '../../../src/protocol/decode.js';
import { type Frame, Framer, STARTUP_FRAME } from '../../../src/protocol/framer.js';

/** A startup-phase request packet with no parameters (GSSENCRequest has no serializer in pg-protocol). */
function request(code: number): Buffer {
  const b = Buffer.alloc(8);
  b.writeInt32BE(8, 0);
  b.writeInt32BE(code, 4);
  return b;
}

/** A binary parameter whose bytes look like message headers, so a framer that rescans bodies would go wrong. */
const HEADER_LOOKALIKE = Buffer.from([0x51, 0, 0, 0, 5, 0x53, 0, 0, 0, 4, 0, 0xff]);

/**
 * The stream, message by message: the startup phase (SSLRequest and
 * GSSENCRequest keep the framer in it; StartupMessage ends it), then typed
 * messages of every shape, including bodies of length zero.
 */
const PARTS: ReadonlyArray<readonly [string, Buffer]> = [
  ['SSLRequest', serialize.requestSsl()],
  ['GSSENCRequest', request(StartupCode.GSSENCRequest)],
  ['StartupMessage', serialize.startup({ user: 'alice', database: 'ledger', application_name: 'split' })],
  ['Password', serialize.password('pencil')],
  ['Query', serialize.query("SELECT 'é', 1")],
  ['Query', serialize.query('')],
  ['Parse', serialize.parse({ name: 'ins', text: 'INSERT INTO t VALUES ($1, $2, $3)', types: [25, 17, 23] })],
  ['Bind', serialize.bind({ portal: 'p', statement: 'ins', values: ['text', HEADER_LOOKALIKE, null] })],
  ['Describe', serialize.describe({ type: 'P', name: 'p' })],
  ['Execute', serialize.execute({ portal: 'p', rows: 5 })],
  ['Flush', serialize.flush()],
  ['Sync', serialize.sync()],
  ['CopyData', serialize.copyData(Buffer.concat([Buffer.from('1\tα\n'), HEADER_LOOKALIKE]))],
  ['CopyData', serialize.copyData(Buffer.alloc(0))],
  ['CopyDone', serialize.copyDone()],
  ['CopyFail', serialize.copyFail('client gave up')],
  ['Close', serialize.close({ type: 'S', name: 'ins' })],
  ['Sync', serialize.sync()],
  ['Terminate', serialize.end()],
];
const STREAM = Buffer.concat(PARTS.map(([, b]) => b));

interface Seen {
  readonly code: number;
  readonly body: string;
}

/** Frames as plain values, so runs can be compared after every chunk has been pushed. */
function seen(frames: readonly Frame[]): Seen[] {
  return frames.map((f) => ({ code: f.code, body: f.body.toString('hex') }));
}

function kindOf(f: Frame): string {
  return f.code === STARTUP_FRAME ? decodeStartupPacket(f.body).kind : decodeFrontendMessage(f.code, f.body).kind;
}

/** Feeds `chunks` to a fresh framer and checks it ends on a frame boundary, out of the startup phase. */
function feed(chunks: readonly Buffer[]): Seen[] {
  const framer = new Framer(1 << 20);
  const frames: Frame[] = [];
  for (const chunk of chunks) frames.push(...framer.push(chunk));
  expect(framer.hasPartial).toBe(false);
  expect(framer.inStartup).toBe(false);
  return seen(frames);
}

/** A small deterministic generator (mulberry32), so a failing split can be reproduced. */
function random(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

describe('Framer on a stream split anywhere', () => {
  const whole = (() => {
    const framer = new Framer(1 << 20);
    return framer.push(STREAM);
  })();
  const reference = seen(whole);

  it('cuts the whole stream into the messages it was built from', () => {
    // The reference must itself be right, or every comparison below would prove nothing.
    expect(whole.map(kindOf)).toEqual(PARTS.map(([kind]) => (kind === 'Password' ? 'PasswordData' : kind)));
    expect(whole.map((f) => f.body.length)).toEqual(PARTS.map(([, b], i) => b.length - (i < 3 ? 4 : 5)));
    const bind = whole.find((f) => f.code === 0x42) as Frame;
    const decoded = decodeFrontendMessage(bind.code, bind.body);
    expect(decoded).toMatchObject({ kind: 'Bind', portal: 'p', statement: 'ins', parameterFormats: [0, 1, 0] });
    if (decoded.kind !== 'Bind') throw new Error('not a Bind');
    expect(decoded.parameters.map((p) => p?.toString('hex') ?? null)).toEqual([Buffer.from('text').toString('hex'), HEADER_LOOKALIKE.toString('hex'), null]);
    const empties = whole.filter((f) => f.body.length === 0).map(kindOf);
    expect(empties).toEqual(['Flush', 'Sync', 'CopyData', 'CopyDone', 'Sync', 'Terminate']);
  });

  it('gives the same frames for two chunks cut at every offset, empty chunks included', () => {
    for (let k = 0; k <= STREAM.length; k++) {
      const got = feed([STREAM.subarray(0, k), STREAM.subarray(k)]);
      if (JSON.stringify(got) !== JSON.stringify(reference)) expect({ k, got }).toEqual({ k, got: reference });
    }
  });

  it('gives the same frames when fed one byte at a time', () => {
    const bytes = [...STREAM].map((b) => Buffer.from([b]));
    expect(feed(bytes)).toEqual(reference);
  });

  it('gives the same frames for random multi-chunk splits', () => {
    for (let seed = 1; seed <= 200; seed++) {
      const next = random(seed);
      const chunks: Buffer[] = [];
      for (let at = 0; at < STREAM.length; ) {
        const size = Math.floor(next() * 24);
        chunks.push(STREAM.subarray(at, at + size));
        at += size;
      }
      const got = feed(chunks);
      if (JSON.stringify(got) !== JSON.stringify(reference)) expect({ seed, got }).toEqual({ seed, got: reference });
    }
  });

  it('keeps frames assembled across chunks intact when the chunks are reused afterwards', () => {
    // A socket may hand out a buffer it later refills; a frame split across chunks must own its bytes.
    const framer = new Framer(1 << 20);
    const scratch = Buffer.alloc(7);
    const frames: Array<{ frame: Frame; view: boolean }> = [];
    for (let at = 0; at < STREAM.length; at += scratch.length) {
      const n = STREAM.copy(scratch, 0, at, at + scratch.length);
      for (const frame of framer.push(scratch.subarray(0, n))) frames.push({ frame, view: frame.body.buffer === scratch.buffer });
      scratch.fill(0xaa);
    }
    expect(frames).toHaveLength(reference.length);
    // Frames wholly inside one chunk are views of it by design (the server never reuses a chunk); the assembled ones are checked.
    const assembled = frames.flatMap(({ frame, view }, i) => (view ? [] : [[seen([frame])[0], reference[i]]]));
    expect(assembled.length).toBeGreaterThan(reference.length / 2);
    for (const [got, want] of assembled) expect(got).toEqual(want);
  });
});

function violation(fn: () => unknown): PgError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(PgError);
    const e = err as PgError;
    expect(e.code).toBe('08P01');
    expect(e.severity).toBe('FATAL');
    return e;
  }
  throw new Error('expected a protocol violation');
}

function typed(maxMessageSize: number): Framer {
  const f = new Framer(maxMessageSize);
  f.push(serialize.startup({ user: 'alice' }));
  return f;
}

function header(code: string, length: number): Buffer {
  const b = Buffer.alloc(5);
  b.write(code, 0, 'latin1');
  b.writeInt32BE(length, 1);
  return b;
}

describe('Framer length checks', () => {
  it.each([
    ['the most negative length', -2147483648],
    ['-1', -1],
    ['0', 0],
  ])('rejects a message length of %s', (_, length) => {
    expect(violation(() => typed(1024).push(header('Q', length))).message).toContain(`invalid message length ${length}`);
  });

  it('accepts a body of exactly the limit and rejects one byte more', () => {
    const limit = 1024;
    const atLimit = serialize.copyData(Buffer.alloc(limit, 1));
    const [frame] = typed(limit).push(atLimit);
    expect(frame?.body.length).toBe(limit);
    expect(violation(() => typed(limit).push(serialize.copyData(Buffer.alloc(limit + 1, 1)))).message).toMatch(/exceeds the limit of 1024 bytes/);
  });

  it('rejects an oversized length as soon as the header is complete, wherever the header is split', () => {
    const h = header('d', 1 << 30);
    for (let k = 1; k < h.length; k++) {
      const framer = typed(1024);
      expect(framer.push(h.subarray(0, k))).toEqual([]);
      expect(framer.hasPartial).toBe(true);
      violation(() => framer.push(h.subarray(k)));
    }
  });

  it('bounds messages that carry no payload more tightly than the configured limit', () => {
    const length = 64 * 1024 + 5;
    expect(violation(() => typed(1 << 20).push(header('E', length))).message).toMatch(/exceeds the limit of 65536 bytes/);
    // The same length is fine for a Query under a 1 MiB limit: the framer waits for its body.
    const framer = typed(1 << 20);
    expect(framer.push(header('Q', length))).toEqual([]);
    expect(framer.hasPartial).toBe(true);
  });

  it('rejects a startup packet too short to hold a protocol version', () => {
    const b = Buffer.alloc(4);
    b.writeInt32BE(7, 0);
    expect(violation(() => new Framer(1 << 20).push(b)).message).toContain('invalid length of startup packet: 7');
  });

  it('rejects a negative startup packet length', () => {
    const b = Buffer.alloc(4);
    b.writeInt32BE(-8, 0);
    violation(() => new Framer(1 << 20).push(b));
  });
});
