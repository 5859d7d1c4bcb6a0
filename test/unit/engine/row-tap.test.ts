import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { RowTap } from '../../../src/engines/postgres/adapter/row-tap.js';
import { dataRowCells } from '../../../src/protocol/encode.js';
import { rng } from '../../fixtures/rng.js';

function message(type: string, body: Buffer): Buffer {
  const head = Buffer.alloc(5);
  head.write(type, 0, 'latin1');
  head.writeInt32BE(4 + body.length, 1);
  return Buffer.concat([head, body]);
}

function dataRow(cells: Array<string | null>): Buffer {
  const parts = [Buffer.from([cells.length >> 8, cells.length & 0xff])];
  for (const c of cells) {
    const len = Buffer.alloc(4);
    if (c === null) len.writeInt32BE(-1);
    else len.writeInt32BE(Buffer.byteLength(c));
    parts.push(len);
    if (c !== null) parts.push(Buffer.from(c));
  }
  return message('D', Buffer.concat(parts));
}

/** Frames bytes into messages as they come, as node-postgres' parser does: a message may come in pieces. */
function framer(): (chunk: Buffer) => Buffer[] {
  let rest = Buffer.alloc(0);
  return (chunk) => {
    rest = Buffer.concat([rest, chunk]);
    const out: Buffer[] = [];
    while (rest.length >= 5 && rest.length >= 1 + rest.readInt32BE(1)) {
      const end = 1 + rest.readInt32BE(1);
      out.push(rest.subarray(0, end));
      rest = rest.subarray(end);
    }
    return out;
  };
}

describe('RowTap', () => {
  it('takes every DataRow whole and passes everything else on, in order, however the bytes are cut', () => {
    for (let seed = 1; seed <= 300; seed++) {
      const r = rng(seed);
      const messages: Buffer[] = [];
      for (let i = 0; i < 1 + Math.floor(r() * 40); i++) {
        if (r() < 0.6) {
          // From empty cells to one of 300 KB, which comes in many chunks.
          const size = r() < 0.05 ? 300_000 : Math.floor(r() * 200);
          messages.push(dataRow([r() < 0.2 ? null : 'é'.repeat(size), String(i)]));
        } else messages.push(message(r() < 0.5 ? 'C' : 'N', Buffer.from(`other ${i}\0`)));
      }
      const stream = Buffer.concat(messages);
      // Whether a DataRow is taken is decided by its place: taken from the start, or not, and switched off from
      // inside a take (a fetch whose batch is full) and on again from a message passed on.
      const mode = seed % 3;
      const order: Array<['take' | 'pass', Buffer]> = [];
      const socket = new EventEmitter();
      const frames = framer();
      socket.on('data', (chunk: Buffer) => {
        for (const f of frames(chunk)) order.push(['pass', f]);
        if (mode === 2 && tap.take === null) tap.take = take;
      });
      const tap = RowTap.install(socket) as RowTap;
      let taken = 0;
      const take = (frame: Buffer): void => {
        order.push(['take', Buffer.from(frame)]);
        if (mode === 2 && ++taken % 3 === 0) tap.take = null;
      };
      tap.take = mode === 1 ? null : take;
      for (let o = 0; o < stream.length; ) {
        const n = r() < 0.3 ? 1 + Math.floor(r() * 6) : 1 + Math.floor(r() * 70_000);
        socket.emit('data', stream.subarray(o, o + n));
        o += n;
      }
      // Every message once, in order, whole.
      expect(
        order.map(([, f]) => f.toString('hex')),
        `seed ${seed}`,
      ).toEqual(messages.map((m) => m.toString('hex')));
      // Nothing but DataRows taken; with a taker from the start and never switched off, all of them.
      expect(order.filter(([how, f]) => how === 'take' && f[0] !== 0x44)).toEqual([]);
      if (mode === 0) expect(order.filter(([how, f]) => how === 'pass' && f[0] === 0x44)).toEqual([]);
      if (mode === 1) expect(order.filter(([how]) => how === 'take')).toEqual([]);
    }
  });

  it("replaces node-postgres' one data listener, and leaves a stream it does not expect alone", () => {
    const stream = new EventEmitter();
    const parsed: Buffer[] = [];
    stream.on('data', (chunk: Buffer) => parsed.push(chunk));
    const tap = RowTap.install(stream);
    expect(tap).not.toBeNull();
    const taken: Buffer[] = [];
    (tap as RowTap).take = (f) => taken.push(f);
    const row = dataRow(['a', null]);
    stream.emit('data', Buffer.concat([message('T', Buffer.from('x')), row, message('C', Buffer.from('SELECT 1\0'))]));
    expect(taken.map((f) => dataRowCells(f))).toEqual([['a', null]]);
    expect(Buffer.concat(parsed).toString('latin1')).not.toContain('D');
    const two = new EventEmitter();
    two.on('data', () => undefined);
    two.on('data', () => undefined);
    expect(RowTap.install(two)).toBeNull();
    expect(two.listenerCount('data')).toBe(2);
  });
});
