import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import { startServer } from '../../src/engines/duckdb/start.js';
import { createLogger } from '../../src/log/logger.js';
import { tamper } from '../fixtures/crash.js';
import { until } from '../fixtures/poll.js';

const root = mkdtempSync(join(tmpdir(), 'cotwire-detection-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const STEPS = 200_000;
const SESSIONS = 2_000;

async function serve(db: string, sink?: NodeJS.WritableStream) {
  const config = loadConfig({ argv: { port: '0', 'http-port': '0', db, 'log-level': 'info' }, env: {} });
  const running = await startServer(config, createLogger('info', false, sink ?? new PassThrough()));
  const client = new pg.Client({ host: '127.0.0.1', port: running.address.port, user: 'cotwire', database: 'cotwire' });
  await client.connect();
  return { running, client, config };
}

describe('rows deleted while the server was stopped', () => {
  it('are reported by cot_audit(), the log and the metrics within one watch interval of the start, before the full audit ends', async () => {
    const db = join(root, 'big.duckdb');
    const first = await serve(db);
    for (let from = 0; from < STEPS; from += 10_000) {
      await first.client.query(
        `INSERT INTO _cot_steps (session_id, step_type, content) SELECT 's' || (i % ${SESSIONS}), 'Observation', 'thought ' || i FROM range(${from}, ${from + 10_000}) t(i)`,
      );
    }
    await first.client.end();
    await first.running.close();
    // A whole session, and the last three steps of another.
    await tamper(db, async (c) => {
      await c.run("DELETE FROM _cot_steps WHERE session_id = 's7'");
      await c.run("DELETE FROM _cot_steps WHERE session_id = 's9' AND step_index >= (SELECT max(step_index) - 2 FROM _cot_steps WHERE session_id = 's9')");
    });
    const lines: string[] = [];
    const sink = new PassThrough();
    sink.on('data', (b: Buffer) =>
      lines.push(
        ...b
          .toString()
          .split('\n')
          .filter((l) => l !== ''),
      ),
    );
    const second = await serve(db, sink);
    const listening = performance.now();
    try {
      const missing = async (): Promise<number> =>
        (await second.client.query("SELECT coalesce(sum(row_count), 0)::INT AS n FROM cot_audit() WHERE kind = 'missing'")).rows[0].n as number;
      await until('the deletions in cot_audit()', async () => (await missing()) > 0, 60_000);
      const within = performance.now() - listening;
      expect(await missing()).toBe(STEPS / SESSIONS + 3);
      // The watch interval is 10 s by default; the full audit of these rows, paced, takes longer than the first look.
      expect(within).toBeLessThan(second.config.ledger.watchIntervalSeconds * 1000);
      expect(lines.some((l) => l.includes('"ledger audit: missing'))).toBe(true);
    } finally {
      await second.client.end();
      await second.running.close();
    }
  }, 180_000);
});
