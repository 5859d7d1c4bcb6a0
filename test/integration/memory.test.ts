import { readFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { spawnServer } from '../fixtures/server.js';

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
