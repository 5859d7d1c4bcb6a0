import { describe, expect, it } from 'vitest';
import { serialize } from 'pg-protocol';
import { decodeFrontendMessage, decodeStartupPacket } from '../../../src/protocol/decode.js';
import { Framer, STARTUP_FRAME, type Frame } from '../../../src/protocol/framer.js';
import type { FrontendMessage, StartupPacket } from '../../../src/protocol/messages.js';
import { PgError } from '../../../src/errors/pg-error.js';

/** Frames built by node-postgres's serializer, an encoder independent of ours. */
const STARTUP = serialize.startup({ user: 'alice', database: 'db', application_name: 'tests' });
const TYPED: Array<[string, Buffer, Partial<FrontendMessage>]> = [
  ['Query', serialize.query("SELECT 1; SELECT 'é'"), { kind: 'Query', sql: "SELECT 1; SELECT 'é'" }],
  [
    'Parse',
    serialize.parse({ name: 's1', text: 'SELECT $1, $2', types: [23, 25] }),
    { kind: 'Parse', name: 's1', sql: 'SELECT $1, $2', parameterTypes: [23, 25] },
  ],
  [
    'Bind',
    serialize.bind({ portal: 'p', statement: 's1', values: ['x', null, Buffer.from([1, 2])], binary: true }),
    { kind: 'Bind', portal: 'p', statement: 's1' },
  ],
  ['Describe', serialize.describe({ type: 'S', name: 's1' }), { kind: 'Describe', target: 'S', name: 's1' }],
  ['Execute', serialize.execute({ portal: 'p', rows: 10 }), { kind: 'Execute', portal: 'p', maxRows: 10 }],
  ['Close', serialize.close({ type: 'P', name: 'p' }), { kind: 'Close', target: 'P', name: 'p' }],
  ['Sync', serialize.sync(), { kind: 'Sync' }],
  ['Flush', serialize.flush(), { kind: 'Flush' }],
  ['Terminate', serialize.end(), { kind: 'Terminate' }],
  ['Password', serialize.password('secret'), { kind: 'PasswordData' }],
];

function decode(frames: Frame[]): Array<FrontendMessage | StartupPacket> {
  return frames.map((f) => (f.code === STARTUP_FRAME ? decodeStartupPacket(f.body) : decodeFrontendMessage(f.code, f.body)));
}

describe('framer and decoder', () => {
  it('decodes a StartupMessage', () => {
    const [msg] = decode(new Framer(1 << 20).push(STARTUP));
    expect(msg).toEqual({
      kind: 'StartupMessage',
      protocolVersion: 196608,
      parameters: new Map([
        ['user', 'alice'],
        ['database', 'db'],
        ['application_name', 'tests'],
        ['client_encoding', 'UTF8'],
      ]),
    });
  });

  it.each(TYPED)('decodes %s', (_, frame, expected) => {
    const framer = new Framer(1 << 20);
    framer.push(STARTUP);
    const [msg] = decode(framer.push(frame));
    expect(msg).toMatchObject(expected);
  });

  it('decodes Bind parameters and formats exactly', () => {
    const framer = new Framer(1 << 20);
    framer.push(STARTUP);
    const [msg] = decode(framer.push(serialize.bind({ values: ['x', null, Buffer.from([1, 2])] })));
    expect(msg).toMatchObject({ parameterFormats: [0, 0, 1], resultFormats: [0] });
    const params = (msg as unknown as { parameters: (Buffer | null)[] }).parameters;
    expect(params.map((p) => p?.toString('hex') ?? null)).toEqual(['78', null, '0102']);
  });

  it('reassembles every frame when the stream is split at every byte offset', () => {
    const stream = Buffer.concat([serialize.requestSsl(), STARTUP, ...TYPED.map(([, b]) => b)]);
    const whole = decode(
      (() => {
        const f = new Framer(1 << 20);
        return f.push(stream);
      })(),
    );
    expect(whole).toHaveLength(TYPED.length + 2);
    for (let cut = 1; cut < stream.length; cut++) {
      const framer = new Framer(1 << 20);
      const frames = [...framer.push(stream.subarray(0, cut)), ...framer.push(stream.subarray(cut))];
      expect(decode(frames)).toEqual(whole);
    }
  });

  it('reassembles a stream fed one byte at a time', () => {
    const stream = Buffer.concat([STARTUP, ...TYPED.map(([, b]) => b)]);
    const framer = new Framer(1 << 20);
    const frames: Frame[] = [];
    for (const byte of stream) frames.push(...framer.push(Buffer.from([byte])));
    expect(frames).toHaveLength(TYPED.length + 1);
    expect(framer.hasPartial).toBe(false);
  });

  it('hands out frames that later input cannot overwrite', () => {
    const framer = new Framer(1 << 20);
    framer.push(STARTUP);
    const q = serialize.query('SELECT 42');
    const [first] = framer.push(q.subarray(0, 8)).concat(framer.push(q.subarray(8)));
    framer.push(serialize.query('SELECT 99'));
    expect(decode([first as Frame])[0]).toEqual({ kind: 'Query', sql: 'SELECT 42' });
  });
});

function fatal(fn: () => unknown): PgError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(PgError);
    return err as PgError;
  }
  throw new Error('expected a protocol violation');
}

describe('malformed and oversized input', () => {
  const ready = (): Framer => {
    const f = new Framer(1024);
    f.push(STARTUP);
    return f;
  };

  it('rejects a message larger than the limit before buffering it', () => {
    const header = Buffer.from([0x51, 0x7f, 0xff, 0xff, 0xff]);
    const err = fatal(() => ready().push(header));
    expect(err.code).toBe('08P01');
    expect(err.severity).toBe('FATAL');
  });

  it('rejects a length below 4', () => {
    expect(fatal(() => ready().push(Buffer.from([0x51, 0, 0, 0, 2]))).code).toBe('08P01');
  });

  it('rejects an oversized startup packet', () => {
    const b = Buffer.alloc(8);
    b.writeInt32BE(20_000, 0);
    expect(fatal(() => new Framer(1 << 20).push(b)).code).toBe('08P01');
  });

  it('rejects a Sync with a body', () => {
    const f = ready();
    const [frame] = f.push(Buffer.from([0x53, 0, 0, 0, 5, 0]));
    expect(fatal(() => decodeFrontendMessage((frame as NonNullable<typeof frame>).code, (frame as NonNullable<typeof frame>).body)).code).toBe('08P01');
  });

  it('rejects a string without its terminator', () => {
    const [frame] = ready().push(Buffer.from([0x51, 0, 0, 0, 7, 0x61, 0x62, 0x63]));
    expect(fatal(() => decodeFrontendMessage((frame as NonNullable<typeof frame>).code, (frame as NonNullable<typeof frame>).body)).message).toMatch(
      /not terminated/,
    );
  });

  it('rejects a Bind whose parameter length runs past the message', () => {
    const body = Buffer.from([0, 0, 0, 0, 0, 1, 0, 0, 0x10, 0, 0, 0]);
    expect(fatal(() => decodeFrontendMessage(0x42, body)).code).toBe('08P01');
  });

  it('rejects a Parse that claims more parameter types than it carries', () => {
    const body = Buffer.concat([Buffer.from('\0SELECT 1\0'), Buffer.from([0x7f, 0xff])]);
    expect(fatal(() => decodeFrontendMessage(0x50, body)).message).toMatch(/does not fit/);
  });

  it('rejects an unknown message type', () => {
    expect(fatal(() => decodeFrontendMessage(0x21, Buffer.alloc(0))).code).toBe('08P01');
  });

  it('rejects protocol version 2', () => {
    const b = Buffer.alloc(4);
    b.writeInt32BE(0x20000);
    expect(fatal(() => decodeStartupPacket(b)).message).toMatch(/unsupported frontend protocol 2\.0/);
  });
});
