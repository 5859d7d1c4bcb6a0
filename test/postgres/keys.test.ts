import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { parseSigner, verifierKeyOf } from '../../src/ledger/log/note.js';
import { usePgEngine } from '../fixtures/pg-engine.js';
import { spawnServer } from '../fixtures/server.js';

const ctx = usePgEngine();
const dir = mkdtempSync(join(tmpdir(), 'cotwire-pg-keys-'));
const CLI = join(import.meta.dirname, '../../dist/cli.js');
const sinks = join(dir, 'checkpoints');
const config = join(dir, 'cotwire.yaml');
writeFileSync(config, `checkpoint:\n  sinks: ["${sinks}/"]\n`);
const children: Array<{ kill(signal: NodeJS.Signals): unknown }> = [];
afterAll(() => {
  for (const c of children) c.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

/** One instance on the engine: a step appended through it, then a clean stop (which signs a checkpoint). */
async function appendThroughInstance(content: string): Promise<void> {
  const instance = await spawnServer(['--config', config, '--engine-url', ctx.engine.url, '--db', join(dir, 'unused.duckdb')]);
  children.push(instance.child);
  const c = new pg.Client({ host: '127.0.0.1', port: instance.port, user: 'cotwire', database: 'cotwire' });
  await c.connect();
  await c.query("INSERT INTO _cot_steps (session_id, step_type, content) VALUES ('s', 'Reasoning', $1)", [content]);
  await c.end();
  const exited = new Promise((r) => instance.child.once('exit', r));
  instance.child.kill('SIGTERM');
  await exited;
}

async function sharedVerifier(): Promise<string> {
  const admin = await ctx.engine.admin();
  const [[key]] = (await admin.query("SELECT value FROM cotwire.secrets WHERE name = 'checkpoint_key'")) as [[string]];
  return verifierKeyOf(parseSigner(key));
}

function cli(...args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8' });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

function verify(keys: readonly string[]): {
  status: number | null;
  report: { log: { keyEvents: Array<{ kind: string; followed: boolean }>; breaks: unknown[] } };
} {
  const r = cli('verify', '--url', ctx.engine.url, '--checkpoint', sinks, ...keys.flatMap((k) => ['--key', k]), '--json');
  return { status: r.status, report: JSON.parse(r.stdout) };
}

describe('the checkpoint key on a PostgreSQL engine', () => {
  it('rotates under the signer lease, refuses a deleted shared key, and records a lost one', async () => {
    await appendThroughInstance('first');
    const original = await sharedVerifier();

    // The key the instances share signed the last checkpoint: it signs the rotation, and the new key goes where it was.
    const rotated = cli('keygen', '--rotate', '--url', ctx.engine.url, '--config', config, '--out', join(dir, 'second.key'));
    expect(rotated.stderr).toContain('recorded "key rotated"');
    expect(rotated.status).toBe(0);
    const second = rotated.stdout.trim();
    expect(await sharedVerifier()).toBe(second);
    await appendThroughInstance('after the rotation');
    const followed = verify([original]);
    expect(followed.report.log.keyEvents).toMatchObject([{ kind: 'key rotated', followed: true }]);
    expect(followed.report.log.breaks).toEqual([]);
    expect(followed.status).toBe(0);

    // The shared key deleted behind the instances: none starts with a new one in silence.
    const admin = await ctx.engine.admin();
    await admin.query("DELETE FROM cotwire.secrets WHERE name = 'checkpoint_key'");
    const refused = await spawnServer(['--config', config, '--engine-url', ctx.engine.url, '--db', join(dir, 'unused.duckdb')]).then(
      (s) => {
        children.push(s.child);
        return 'started';
      },
      (e: Error) => e.message,
    );
    expect(refused).toContain('the checkpoint signing key the instances share (cotwire.secrets) is missing');
    expect(refused).toContain('cotwire keygen --rotate --url');

    // Lost: recorded with its reason, signed by the new key alone.
    const lost = cli('keygen', '--rotate', '--url', ctx.engine.url, '--config', config, '--out', join(dir, 'third.key'), '--reason', 'deleted by mistake');
    expect(lost.stderr).toContain('recorded "key lost"');
    expect(lost.status).toBe(0);
    const third = lost.stdout.trim();
    await appendThroughInstance('after the loss');
    const oldOnly = verify([original]);
    expect(oldOnly.report.log.keyEvents).toMatchObject([
      { kind: 'key rotated', followed: true },
      { kind: 'key lost', followed: false },
    ]);
    expect(oldOnly.status).toBe(1);
    expect(verify([original, third]).status).toBe(0);
  }, 120_000);
});
