import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { parseSigner, verifierKeyOf } from '../../src/ledger/log/note.js';
import { usePgEngine } from '../fixtures/pg-engine.js';
import { expectWholeLedgers } from '../fixtures/pg-integrity.js';
import { spawnServer } from '../fixtures/server.js';

const ctx = usePgEngine();
const dir = mkdtempSync(join(tmpdir(), 'cotwire-instances-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const SESSIONS = ['shared-a', 'shared-b', 'shared-c', 'shared-d'];

async function until(what: string, check: () => Promise<boolean>, ms = 60_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** `count` clients appending to the shared sessions through one instance until stopped or the instance dies. */
function load(port: number, name: string, count: number): { acknowledged: string[]; stop(): Promise<void> } {
  const acknowledged: string[] = [];
  let stopped = false;
  const workers = Array.from({ length: count }, async (_, w) => {
    const c = new pg.Client({ host: '127.0.0.1', port, user: 'cotwire', database: 'cotwire' });
    c.on('error', () => undefined);
    await c.connect();
    for (let i = 0; !stopped; i++) {
      const content = `${name}-w${w}-${i}`;
      try {
        await c.query("INSERT INTO _cot_steps (session_id, step_type, content) VALUES ($1, 'Action', $2)", [SESSIONS[(w + i) % SESSIONS.length], content]);
        acknowledged.push(content);
      } catch {
        break;
      }
    }
    await c.end().catch(() => undefined);
  });
  return {
    acknowledged,
    async stop() {
      stopped = true;
      await Promise.all(workers);
    },
  };
}

describe('three cotwire instances on one PostgreSQL', () => {
  it('keep every acknowledged step, whole chains, one log and one checkpoint history when one is killed mid-load', async () => {
    const config = join(dir, 'cotwire.yaml');
    writeFileSync(config, `checkpoint:\n  intervalSeconds: 1\n  sinks: ["${join(dir, 'checkpoints')}/"]\nlog:\n  level: info\n`);
    const instances = [];
    for (let i = 0; i < 3; i++) instances.push(await spawnServer(['--config', config, '--engine-url', ctx.engine.url, '--db', join(dir, `i${i}.duckdb`)]));
    const loads = instances.map((s, i) => load(s.port, `i${i}`, 16));
    const admin = await ctx.engine.admin();
    // Every instance under load, and a checkpoint signed, before one dies.
    const checkpoints = async (): Promise<number> => ((await admin.query('SELECT count(*)::int FROM public._cot_checkpoints')) as [[number]])[0][0];
    await until('every instance appending, and a checkpoint', async () => loads.every((l) => l.acknowledged.length > 20) && (await checkpoints()) > 0);
    // Kill the instance that signs checkpoints, so that another has to take over.
    const [[holder]] = (await admin.query('SELECT holder FROM cotwire.signer')) as [[string]];
    const victim = instances.findIndex((s) => holder.includes(`:${s.child.pid}:`));
    expect(victim).toBeGreaterThanOrEqual(0);
    const [[sizeAtKill]] = (await admin.query('SELECT size FROM cotwire.log_head')) as [[bigint]];
    instances[victim]?.child.kill('SIGKILL');
    // Another instance takes the lease when it expires and signs past the kill: a history of more than three checkpoints.
    await until('checkpoints signed by a survivor past the kill', async () => {
      const [[lastSize, count, signer]] = (await admin.query(
        'SELECT (SELECT max(tree_size) FROM public._cot_checkpoints), (SELECT count(*)::int FROM public._cot_checkpoints), (SELECT holder FROM cotwire.signer)',
      )) as [[bigint | null, number, string]];
      return signer !== holder && Number(lastSize ?? 0) > Number(sizeAtKill) && count > 3;
    });
    for (const l of loads) await l.stop();
    const survivors = instances.filter((_, i) => i !== victim);
    for (const s of survivors) s.child.kill('SIGTERM');
    await Promise.all(survivors.map((s) => new Promise((r) => (s.child.exitCode !== null ? r(null) : s.child.once('exit', r)))));

    // Every acknowledged step is there, on all three instances' counts.
    const acknowledged = loads.flatMap((l) => l.acknowledged);
    expect(
      loads.map((l) => l.acknowledged.length > 20),
      JSON.stringify({ victim, counts: loads.map((l) => l.acknowledged.length) }),
    ).toEqual([true, true, true]);
    const stored = new Set(((await admin.query('SELECT content FROM public._cot_steps')) as Array<[string]>).map((r) => r[0]));
    expect(acknowledged.filter((c) => !stored.has(c))).toEqual([]);

    // Every chain verifies, the log is the tree of the rows, and the checkpoints are one history across the takeover.
    const { size, checkpointSizes } = await expectWholeLedgers(admin);
    expect(size).toBeGreaterThan(Number(sizeAtKill));
    expect(checkpointSizes.length).toBeGreaterThan(3);
    expect(checkpointSizes.at(-1)).toBeGreaterThan(Number(sizeAtKill));

    // cotwire verify against the PostgreSQL URL, with the checkpoints the instances delivered to their sink.
    const [[key]] = (await admin.query("SELECT value FROM cotwire.secrets WHERE name = 'checkpoint_key'")) as [[string]];
    const verifierKey = verifierKeyOf(parseSigner(key));
    const cli = (...args: string[]): { code: number; out: string } => {
      const r = spawnSync(process.execPath, [join(import.meta.dirname, '../../dist/cli.js'), 'verify', '--url', ctx.engine.url, ...args], { encoding: 'utf8' });
      return { code: r.status ?? -1, out: r.stdout + r.stderr };
    };
    const ok = cli('--checkpoint', join(dir, 'checkpoints'), '--key', verifierKey);
    expect(ok.out).toMatch(/^OK: \d+ chains, \d+ steps, 0 broken; log intact/m);
    expect(ok.code).toBe(0);
    // Someone who owns the database edits a row behind the walls: the chain and the log both find it.
    await admin.run('ALTER TABLE public._cot_steps DISABLE TRIGGER cotwire_append_only');
    await admin.run("UPDATE public._cot_steps SET content = 'forged' WHERE ledger_seq = (SELECT min(ledger_seq) FROM public._cot_steps)");
    await admin.run('ALTER TABLE public._cot_steps ENABLE TRIGGER cotwire_append_only');
    const bad = cli('--checkpoint', join(dir, 'checkpoints'), '--key', verifierKey);
    expect(bad.code).toBe(1);
    expect(bad.out).toMatch(/BROKEN main\._cot_steps chain "shared-\w" : step 0 edited|BROKEN main\._cot_steps chain "shared-\w": step 0 edited/);
  }, 120_000);
});
