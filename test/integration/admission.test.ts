import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { serialize } from 'pg-protocol';
import { afterAll, describe, expect, it } from 'vitest';
import { DEFAULTS } from '../../src/config/schema.js';
import { countLogged, logLines } from '../fixtures/log-lines.js';
import { until } from '../fixtures/poll.js';
import { spawnServer, startTestServer } from '../fixtures/server.js';
import { errorFields, WireClient } from '../fixtures/wire.js';

const root = mkdtempSync(join(tmpdir(), 'cotwire-admission-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** The server's own stall threshold: a client in startup this long may be closed to make room. */
const STALL_MS = 1000;

/** psql with its default sslmode (prefer): what it prints when it cannot connect. */
async function psqlError(port: number): Promise<string> {
  try {
    await promisify(execFile)('psql', ['-X', '-w', '-h', '127.0.0.1', '-p', String(port), '-U', 'cotwire', '-c', 'SELECT 1', 'cotwire'], {
      env: { ...process.env, PGSSLMODE: 'prefer', PGCONNECT_TIMEOUT: '10' },
    });
    return '';
  } catch (err) {
    return (err as { stderr: string }).stderr;
  }
}

/** A socket that sends the first bytes of a startup packet and no more, and never closes on its own. */
async function halfOpen(port: number): Promise<net.Socket> {
  const socket = net.connect({ port, host: '127.0.0.1', allowHalfOpen: true });
  socket.on('error', () => undefined);
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  socket.write(Buffer.from([0, 0, 0, 80]));
  return socket;
}

describe('admission', () => {
  it('answers the SSLRequest before 53300, so that psql prints "too many clients"', async () => {
    await using server = await startTestServer({ limits: { ...DEFAULTS.limits, maxConnections: 1, shutdownGraceMs: 1000 } });
    await server.client();
    expect(await psqlError(server.port)).toContain('sorry, too many clients already');
    // The same at the byte level: 'N' to the SSLRequest, then the FATAL 53300 after the StartupMessage.
    const socket = net.connect(server.port, '127.0.0.1');
    let received = Buffer.alloc(0);
    socket.on('data', (b: Buffer) => {
      received = Buffer.concat([received, b]);
    });
    socket.write(serialize.requestSsl());
    await until('the answer to the SSLRequest', () => received.length > 0, 10_000);
    expect(received.toString('latin1')).toBe('N');
    socket.write(serialize.startup({ user: 'cotwire', database: 'cotwire' }));
    await until('the refusal', () => received.length > 6 && received.length >= 2 + received.readInt32BE(2), 10_000);
    expect(received.toString('latin1', 1, 2)).toBe('E');
    expect(errorFields(received.subarray(6, 2 + received.readInt32BE(2))).C).toBe('53300');
    socket.destroy();
  });

  it('keeps a CancelRequest working while every slot is taken', async () => {
    await using server = await startTestServer({ limits: { ...DEFAULTS.limits, maxConnections: 1, shutdownGraceMs: 1000 } });
    const busy = await server.client();
    const running = busy.query('SELECT count(*) FROM range(100000000000) t(x) WHERE x % 7 = 3').catch((e: { code?: string }) => e.code);
    // node-postgres's BackendKeyData, sent as a CancelRequest from a new socket while the only slot is taken.
    const { processID, secretKey } = busy as unknown as { processID: number; secretKey: number };
    const cancel = await WireClient.connect(server.port);
    cancel.write(serialize.cancel(processID, secretKey));
    expect(await running).toBe('57014');
  });

  it('lets a real client in past 150 half-open sockets, none of which holds an authenticated slot', async () => {
    const lines: string[] = [];
    await using server = await startTestServer({ limits: { ...DEFAULTS.limits, maxConnections: 2, shutdownGraceMs: 1000 } }, logLines(lines));
    const sockets = await Promise.all(Array.from({ length: 150 }, () => halfOpen(server.port)));
    const told = new Set<net.Socket>();
    for (const s of sockets) s.on('data', () => told.add(s));
    try {
      // Past the per-address startup places (16), each new one is told at once; those admitted stay.
      await until('the startup places to fill', () => told.size === 150 - 16, 20_000);
      // A flood is one log line, not one per socket.
      expect(countLogged(lines, 'connection refused: too many clients in startup')).toBe(1);
      // The 16 left must have stalled before they can be closed for a client that makes progress.
      await new Promise((r) => setTimeout(r, STALL_MS));
      const a = await server.client();
      const b = await server.client();
      expect((await a.query('SELECT 1 AS one')).rows[0].one).toBe(1);
      expect((await b.query('SELECT 1 AS one')).rows[0].one).toBe(1);
      // Two authenticated clients fill maxConnections: the third is refused for that, not for the half-open ones.
      const err = await server.client().catch((e: { code?: string }) => e.code);
      expect(err).toBe('53300');
      expect(countLogged(lines, 'connection refused: too many clients')).toBe(1);
    } finally {
      for (const s of sockets) s.destroy();
    }
  }, 60_000);

  it('closes a client that stalls in startup after limits.startupTimeoutMs', async () => {
    await using server = await startTestServer({ limits: { ...DEFAULTS.limits, startupTimeoutMs: 200, shutdownGraceMs: 1000 } });
    const s = await halfOpen(server.port);
    // The server closes its side without a word, as PostgreSQL does with a client that never finishes its startup packet.
    const ended = new Promise<void>((resolve) => s.once('end', () => resolve()));
    s.resume();
    await ended;
    s.destroy();
    expect(server.running.server.connectionCount).toBe(0);
  });
});

describe('shutdown', () => {
  it('exits 0 on SIGTERM after a 53300, with a refused client that never closes its socket', async () => {
    const config = join(root, 'limit3.json');
    writeFileSync(config, JSON.stringify({ limits: { maxConnections: 3, shutdownGraceMs: 1000 } }));
    const { child, port, out } = await spawnServer(['--db', join(root, 'limit3.duckdb'), '--config', config]);
    const clients = await Promise.all([0, 1, 2].map(() => WireClient.startup(port)));
    // The fourth: its startup is refused, and it neither reads to the end nor closes.
    const refused = await WireClient.connect(port);
    refused.write(serialize.startup({ user: 'cotwire', database: 'cotwire' }));
    const [e] = await refused.until('E');
    expect(errorFields(e?.body as Buffer).C).toBe('53300');
    for (const c of clients) c.end();
    // And one that never finished its startup.
    const stalled = await halfOpen(port);
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    expect(out()).toContain('shut down cleanly');
    stalled.destroy();
    refused.socket.destroy();
  }, 60_000);

  it('logs and obeys a second SIGTERM', async () => {
    const { child, port, out } = await spawnServer(['--db', join(root, 'second.duckdb')]);
    // A statement that runs for a long time keeps the first SIGTERM's drain waiting (grace 10 s by default).
    const c = await WireClient.startup(port);
    c.write(serialize.query('SELECT count(*) FROM range(100000000000) t(x) WHERE x % 7 = 3'));
    // 'close', not 'exit': the child's output is read to its end.
    const exited = new Promise<NodeJS.Signals | null>((resolve) => child.once('close', (_code, signal) => resolve(signal)));
    child.kill('SIGTERM');
    await until('the first signal to be logged', () => out().includes('shutting down: draining connections'), 20_000);
    // A copy of the same signal (npm forwards the terminal's Ctrl-C) is not a second one.
    child.kill('SIGTERM');
    // A second signal is one sent a second or more after the first: this is a lower bound, not a wait for an event.
    await new Promise((r) => setTimeout(r, 1100));
    expect(out()).not.toContain('second signal');
    child.kill('SIGTERM');
    // It ends as a process ends on SIGTERM when it does not catch it.
    expect(await exited).toBe('SIGTERM');
    expect(
      out()
        .split('\n')
        .map((l) => /"msg":"([^"]*)"/.exec(l)?.[1]),
    ).toContain('second signal: exiting without waiting');
    c.socket.destroy();
  }, 60_000);
});
