import { readFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { DEFAULTS } from '../../src/config/schema.js';
import { until } from '../fixtures/poll.js';
import { spawnServer, startTestServer } from '../fixtures/server.js';
import { dataRowCells, errorFields, WireClient } from '../fixtures/wire.js';

const dir = mkdtempSync(join(tmpdir(), 'cotwire-memory-'));
const children: Array<{ kill(signal: NodeJS.Signals): unknown }> = [];
afterAll(() => {
  for (const c of children) c.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

function rssMB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m?.[1] ?? 0) / 1024;
}

describe('limits.memoryMB', () => {
  it('answers 53200 to a statement that needs more than the engine may hold, keeps serving the others, and its memory stays under the ceiling', async () => {
    const config = join(dir, 'small.json');
    writeFileSync(config, JSON.stringify({ limits: { memoryMB: 256, spillMB: 64 } }));
    const { child, port } = await spawnServer(['--db', join(dir, 'small.duckdb'), '--config', config]);
    children.push(child);
    const pid = child.pid as number;
    const connect = async (): Promise<pg.Client> => {
      const c = new pg.Client({ host: '127.0.0.1', port, user: 'cotwire', database: 'cotwire' });
      await c.connect();
      return c;
    };
    const [heavy, other] = await Promise.all([connect(), connect()]);
    const idle = rssMB(pid);
    let peak = idle;
    const sampler = setInterval(() => {
      peak = Math.max(peak, rssMB(pid));
    }, 20);
    try {
      // About 3 GB of one string: far past 256 MiB, and an aggregate's state cannot spill.
      const failed = heavy.query("SELECT length(string_agg(repeat('x', 1000) || i::VARCHAR, ',')) AS n FROM range(3000000) t(i)").then(
        () => null,
        (e: pg.DatabaseError) => e,
      );
      // Another connection is served meanwhile.
      expect((await other.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
      const err = await failed;
      expect(err?.code).toBe('53200');
      expect(err?.hint).toContain('limits.memoryMB');
      expect((await other.query('SELECT 2 AS two')).rows).toEqual([{ two: 2 }]);
      // And the failed connection goes on.
      expect((await heavy.query('SELECT 3 AS three')).rows).toEqual([{ three: 3 }]);
    } finally {
      clearInterval(sampler);
      await heavy.end();
      await other.end();
      child.kill('SIGTERM');
    }
    // What the process held past its idle self: the engine's ceiling, with room for DuckDB's own bookkeeping.
    expect(peak - idle).toBeLessThan(256 + 64);
  }, 60_000);
});

describe("the server's own share of limits.memoryMB", () => {
  /** A Query message of `size` bytes of body, `SELECT 1 AS one` padded with spaces. */
  function largeQuery(size: number): Buffer {
    const message = Buffer.alloc(5 + size, 0x20);
    message.write('Q', 0);
    message.writeInt32BE(size + 4, 1);
    message.write('SELECT 1 AS one', 5);
    message[4 + size] = 0;
    return message;
  }

  it('bounds what large messages being received hold together: one past it gets FATAL 53200, the others are served, and a message that fits is answered', async () => {
    // A quarter of 64 MiB is the server's: two messages of 10 MiB cannot be received at once.
    const server = await startTestServer({ limits: { ...DEFAULTS.limits, memoryMB: 64 } });
    try {
      const size = 10 * 1024 * 1024;
      const first = await WireClient.startup(server.port);
      const firstMessage = largeQuery(size);
      // Announced whole, sent in part: the server holds its buffer until the rest comes.
      first.write(firstMessage.subarray(0, 1000));
      const second = await WireClient.startup(server.port);
      second.write(largeQuery(size).subarray(0, 1000));
      const refused = (await second.until('E')).at(-1);
      const fields = errorFields(refused?.body ?? Buffer.alloc(0));
      expect([fields.V, fields.C, fields.M]).toEqual(['FATAL', '53200', 'out of memory']);
      expect(fields.D).toContain('limits.memoryMB');
      await second.waitClosed();
      // Anyone else is served meanwhile.
      const other = await server.client();
      expect((await other.query('SELECT 2 AS two')).rows).toEqual([{ two: 2 }]);
      // The first message, completed, is answered, and gives its share back for the next one.
      first.write(firstMessage.subarray(1000));
      expect(dataRowCells((await first.until('D')).at(-1)?.body ?? Buffer.alloc(0))).toEqual([Buffer.from('1')]);
      await first.until('Z');
      const third = await WireClient.startup(server.port);
      third.write(largeQuery(size));
      expect(dataRowCells((await third.until('D')).at(-1)?.body ?? Buffer.alloc(0))).toEqual([Buffer.from('1')]);
      // A client that leaves halfway gives its share back too.
      const leaving = await WireClient.startup(server.port);
      leaving.write(largeQuery(size).subarray(0, 1000));
      await third.until('Z');
      leaving.end();
      await until('the share to come back', async () => {
        const next = await WireClient.startup(server.port);
        next.write(largeQuery(size));
        const got = await next.until('Z').then(
          (m) => m.some((x) => x.type === 'D'),
          () => false,
        );
        next.end();
        return got;
      });
      for (const c of [first, third]) c.end();
    } finally {
      await server[Symbol.asyncDispose]();
    }
  }, 60_000);
});
