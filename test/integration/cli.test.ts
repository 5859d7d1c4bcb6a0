import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { spawnServer } from '../fixtures/server.js';

/** The built CLI, as `npm start` and the `cotwire` bin run it (npm test builds first). */
const CLI = join(import.meta.dirname, '../../dist/cli.js');
const dir = mkdtempSync(join(tmpdir(), 'cotwire-cli-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function runCli(args: string[], env: Record<string, string> = {}): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [CLI, ...args], { env: { ...process.env, ...env }, encoding: 'utf8', timeout: 30_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('cotwire serve', () => {
  it('says in one line that the port is taken, and exits non-zero', async () => {
    const blocker = net.createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    const port = (blocker.address() as net.AddressInfo).port;
    try {
      const r = runCli(['serve', '--port', String(port), '--http-port', '0', '--db', ':memory:']);
      expect(r.status).toBe(1);
      expect(r.stderr.trim()).toBe(`cotwire: port ${port} on 127.0.0.1 is already in use; stop the other server or choose another port with --port`);
    } finally {
      blocker.close();
    }
  });

  it('says in one line that the database file cannot be opened', () => {
    const notADir = join(dir, 'file');
    writeFileSync(notADir, 'x');
    const r = runCli(['serve', '--port', '0', '--http-port', '0', '--db', join(notADir, 'db.duckdb')]);
    expect(r.status).toBe(1);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(/^cotwire: cannot create the directory for the database file/);
  });

  it('reports an invalid configuration value with its key and what is allowed', () => {
    const config = join(dir, 'bad.yaml');
    writeFileSync(config, 'listen:\n  port: 99999\n');
    const r = runCli(['serve', '--config', config]);
    expect(r.status).toBe(1);
    expect(r.stderr.trim()).toBe('cotwire: invalid configuration: listen.port = 99999; expected an integer from 0 to 65535');
    const env = runCli(['serve', '--db', ':memory:'], { COTWIRE_PORT: 'abc' });
    expect(env.stderr.trim()).toBe('cotwire: invalid configuration: listen.port = "abc"; expected an integer from 0 to 65535');
  });

  it('serves, shuts down cleanly on SIGTERM with exit code 0, and keeps the data', async () => {
    const db = join(dir, 'data', 'kept.duckdb');
    const start = async (): Promise<Awaited<ReturnType<typeof spawnServer>>> => {
      const server = await spawnServer(['--db', db]);
      expect(server.out()).toMatch(/listening on 127\.0\.0\.1:\d+; connect with: psql -h 127\.0\.0\.1 -p \d+ -U cotwire cotwire/);
      return server;
    };
    const first = await start();
    const c = new pg.Client({ host: '127.0.0.1', port: first.port, user: 'cotwire', database: 'cotwire' });
    await c.connect();
    await c.query('CREATE TABLE kept (x INTEGER)');
    await c.query('INSERT INTO kept VALUES (1), (2)');
    c.on('error', () => undefined);
    const exited = new Promise<number | null>((resolve) => first.child.once('exit', (code) => resolve(code)));
    first.child.kill('SIGTERM');
    expect(await exited).toBe(0);
    expect(first.out()).toContain('shut down cleanly');
    expect(first.out()).not.toMatch(/\n\s+at /);

    const second = await start();
    const c2 = new pg.Client({ host: '127.0.0.1', port: second.port, user: 'cotwire', database: 'cotwire' });
    await c2.connect();
    expect((await c2.query('SELECT sum(x)::INTEGER AS s FROM kept')).rows).toEqual([{ s: 3 }]);
    await c2.end();
    const exited2 = new Promise<number | null>((resolve) => second.child.once('exit', (code) => resolve(code)));
    second.child.kill('SIGINT');
    expect(await exited2).toBe(0);
  });
});

describe('cotwire passwd', () => {
  it('prints a SCRAM verifier entry and never the password', () => {
    const r = spawnSync(process.execPath, [CLI, 'passwd', 'alice'], { input: 'hunter2\n', encoding: 'utf8' });
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/^users:\n {2}- name: "alice"\n {4}password: SCRAM-SHA-256\$4096:[A-Za-z0-9+/=]+\$[A-Za-z0-9+/=]+:[A-Za-z0-9+/=]+\n$/);
    expect(r.stdout + r.stderr).not.toContain('hunter2');
  });
});

describe('the ledger commands', () => {
  it('list sessions, export steps, and answer --help with exit 0 and usage errors with exit 2', async () => {
    const db = join(dir, 'ledger', 'cli.duckdb');
    const { loadConfig } = await import('../../src/config/load.js');
    const { createLogger } = await import('../../src/log/logger.js');
    const { startServer } = await import('../../src/engines/duckdb/start.js');
    const running = await startServer(loadConfig({ argv: { port: '0', 'http-port': '0', db, 'log-level': 'silent' }, env: {} }), createLogger('silent', false));
    const c = new pg.Client({ host: '127.0.0.1', port: running.address.port, user: 'cotwire', database: 'cotwire' });
    await c.connect();
    await c.query(
      "INSERT INTO _cot_steps (session_id, agent_id, step_type, content) VALUES ('cli-1', 'a', 'Observation', 'x'), ('cli-1', 'a', 'Decision', 'y'), ('cli-2', 'b', 'Action', 'z')",
    );
    await c.end();
    await running.close();

    const sessions = runCli(['sessions', '--db', db, '--json']);
    expect(sessions.status).toBe(0);
    expect(JSON.parse(sessions.stdout)).toMatchObject([
      { session_id: 'cli-1', agent_id: 'a', step_count: 2, chain_valid: true },
      { session_id: 'cli-2', agent_id: 'b', step_count: 1, chain_valid: true },
    ]);
    expect(JSON.parse(runCli(['sessions', '--db', db, '--agent', 'b', '--json']).stdout)).toHaveLength(1);

    const out = join(dir, 'ledger', 'steps.csv');
    const exported = runCli(['export', '--db', db, '--format', 'csv', '--out', out, '--session', 'cli-1']);
    expect(exported.status).toBe(0);
    expect(exported.stdout.trim()).toBe(`exported 2 steps to ${out}`);
    const { readFileSync } = await import('node:fs');
    const lines = readFileSync(out, 'utf8').trim().split('\n');
    expect(lines[0]).toMatch(/^trace_id,org_id,agent_id,session_id,step_index,step_type,content/);
    expect(lines).toHaveLength(3);

    const replay = runCli(['replay', '--db', db, '--session', 'cli-1']);
    expect(replay.status).toBe(0);
    expect(replay.stdout).toMatch(/^#0 Observation .* agent=a /m);

    expect(runCli(['--help']).status).toBe(0);
    expect(runCli(['export', '--help']).status).toBe(0);
    expect(runCli(['export', '--db', db, '--format', 'xml', '--out', out]).status).toBe(2);
    expect(runCli(['sessions']).status).toBe(2);
    expect(runCli(['nonsense']).status).toBe(2);
    expect(runCli(['--version']).stdout.trim()).toMatch(/^\d+\.\d+\.\d+$/);
  });
});

describe('cotwire evidence', () => {
  it('saves a session bundle from the HTTP listener, which tools/check_evidence.py verifies', async () => {
    const { execFile } = await import('node:child_process');
    const { promisify } = await import('node:util');
    const run = promisify(execFile);
    const db = join(dir, 'evidence', 'ev.duckdb');
    const { loadConfig } = await import('../../src/config/load.js');
    const { createLogger } = await import('../../src/log/logger.js');
    const { startServer } = await import('../../src/engines/duckdb/start.js');
    const config = loadConfig({ argv: { port: '0', 'http-port': '0', db, 'log-level': 'silent' }, env: {} });
    const running = await startServer({ ...config, checkpoint: { ...config.checkpoint, intervalSeconds: 1 } }, createLogger('silent', false));
    try {
      const c = new pg.Client({ host: '127.0.0.1', port: running.address.port, user: 'cotwire', database: 'cotwire' });
      await c.connect();
      await c.query("INSERT INTO _cot_steps (session_id, step_type, content) VALUES ('cli-ev', 'Observation', 'seen'), ('cli-ev', 'Decision', 'done')");
      await c.end();
      const url = `http://127.0.0.1:${running.httpAddress?.port}`;
      const out = join(dir, 'evidence', 'bundle.json');
      // The next checkpoint covers the steps within a second; until then the server says to ask again.
      let saved = '';
      for (let tries = 0; tries < 100 && saved === ''; tries++) {
        const r = await run(process.execPath, [CLI, 'evidence', '--session', 'cli-ev', '--url', url, '--out', out]).catch((e: { stderr: string }) => e);
        if ('stdout' in r && typeof r.stdout === 'string') saved = r.stdout;
        else expect((r as { stderr: string }).stderr).toMatch(/^cotwire: 503 .*no checkpoint covers this session yet/);
        if (saved === '') await new Promise((resolve) => setTimeout(resolve, 200));
      }
      expect(saved).toMatch(
        /^wrote the evidence of session cli-ev to .*: 2 steps against the checkpoint of \d+ leaves; check it with tools\/check_evidence.py/,
      );
      const { readFileSync } = await import('node:fs');
      const key = (JSON.parse(readFileSync(out, 'utf8')) as { verifier_key: string }).verifier_key;
      const check = await run('python3', [join(import.meta.dirname, '../../tools/check_evidence.py'), out, key]);
      expect(check.stdout).toMatch(/^OK session cli-ev: 2 steps/);
      const missing = await run(process.execPath, [CLI, 'evidence', '--session', 'nobody', '--url', url]).catch((e: { code: number; stderr: string }) => e);
      expect(missing).toMatchObject({ code: 1, stderr: expect.stringMatching(/^cotwire: 404 /) });
    } finally {
      await running.close();
    }
  });
});
