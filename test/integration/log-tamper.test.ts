import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { loadConfig } from '../../src/config/load.js';
import type { Config } from '../../src/config/schema.js';
import { createLogger } from '../../src/log/logger.js';
import { logLines } from '../fixtures/log-lines.js';
import { tamper } from '../fixtures/crash.js';
import { spawnServer } from '../fixtures/server.js';
import { startServer, type RunningServer } from '../../src/engines/duckdb/start.js';
import { writeKeyFile } from '../../src/ledger/log/signing-key.js';
import { rowHashV3, SaltKeys } from '../../src/ledger/chain/commitments.js';
import { committedOf } from '../../src/ledger/chain/row-hash.js';

const CLI = join(import.meta.dirname, '../../dist/cli.js');
const root = mkdtempSync(join(tmpdir(), 'cotwire-logtamper-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const keyFile = join(root, 'signing.key');
let verifier = '';
beforeAll(() => {
  verifier = writeKeyFile(keyFile, 'audit.example/agents');
});

async function withServer<T>(
  db: string,
  sinkDir: string,
  fn: (client: pg.Client, running: RunningServer) => Promise<T>,
  logTo?: NodeJS.WritableStream,
  key: string | null = keyFile,
): Promise<T> {
  const base = loadConfig({ argv: { port: '0', 'http-port': '0', db, 'log-level': 'silent' }, env: {} });
  const config: Config = { ...base, checkpoint: { keyFile: key, intervalSeconds: 3600, maxLeaves: 1_000_000, sinks: [`${sinkDir}/`] } };
  const running = await startServer(config, createLogger(logTo === undefined ? 'silent' : 'info', false, logTo));
  const client = new pg.Client({ host: '127.0.0.1', port: running.address.port, user: 'cotwire', database: 'cotwire' });
  await client.connect();
  try {
    return await fn(client, running);
  } finally {
    await client.end();
    await running.close();
  }
}

const STEP = "INSERT INTO _cot_steps (session_id, step_type, content) VALUES ($1, 'Reasoning', $2) RETURNING trace_id";

/** Three sessions, interleaved, with a checkpoint in the middle and one at shutdown. */
async function history(name: string): Promise<{ db: string; sinks: string; traces: string[] }> {
  const db = join(root, `${name}.duckdb`);
  const sinks = join(root, `${name}-checkpoints`);
  const traces: string[] = [];
  await withServer(db, sinks, async (c, running) => {
    for (let i = 0; i < 4; i++) {
      for (const s of ['a', 'b', 'c']) traces.push((await c.query(STEP, [s, `${s} thought ${i}`])).rows[0].trace_id);
      if (i === 1) await running.checkpoints.issue();
    }
  });
  return { db, sinks, traces };
}

interface Report {
  valid: boolean;
  broken: Array<{ chainKey: string }>;
  log: {
    keyEvents: Array<{ kind: string; followed: boolean; message: string }>;
    leaves: number;
    checkpoints: number;
    matched: number;
    breaks: Array<{ kind: string; leafIndex: number | null; session: string | null; step: number | null; message: string }>;
  };
}

function verify(db: string, sinks: string, keys: readonly string[] = [verifier]): { status: number | null; report: Report } {
  const r = spawnSync(process.execPath, [CLI, 'verify', '--db', db, '--checkpoint', sinks, ...keys.flatMap((k) => ['--key', k]), '--json'], {
    encoding: 'utf8',
  });
  if (r.stdout === '') throw new Error(`cotwire verify printed nothing: ${r.stderr}`);
  return { status: r.status, report: JSON.parse(r.stdout) as Report };
}

describe('the global log against saved checkpoints', () => {
  it('passes an untouched database, and checks two checkpoints from the sink directory', async () => {
    const { db, sinks } = await history('clean');
    expect(readdirSync(sinks).filter((f) => f.endsWith('.checkpoint'))).toHaveLength(2);
    const { status, report } = verify(db, sinks);
    expect(report.log.breaks).toEqual([]);
    expect(report.log).toMatchObject({ checkpoints: 2, matched: 2 });
    expect(report.valid).toBe(true);
    expect(status).toBe(0);
  });

  it('1. finds a whole session deleted, which every chain alone misses', async () => {
    const { db, sinks } = await history('deleted-session');
    await tamper(db, (c) => c.run("DELETE FROM _cot_steps WHERE session_id = 'b'"));
    const { status, report } = verify(db, sinks);
    // Each remaining chain is intact: the per-session chains cannot see a session that is gone.
    expect(report.broken).toEqual([]);
    expect(status).toBe(1);
    const missing = report.log.breaks.filter((b) => b.kind === 'missing');
    // b's steps were every third append from the second one on; the middle checkpoint's record is leaf 6.
    expect(missing.map((b) => b.leafIndex)).toEqual([1, 4, 8, 11]);
    expect(missing[0]?.message).toMatch(/ledger_seq 2 is missing: rows were deleted \(after main\._cot_steps, session "a", step 0\)/);
    expect(report.log.breaks.some((b) => b.kind === 'rewritten')).toBe(true);
  });

  it("2. finds the last steps cut off a session, and the log's tail cut off", async () => {
    const { db, sinks } = await history('cut-tail');
    await tamper(db, (c) => c.run("DELETE FROM _cot_steps WHERE session_id = 'c' AND step_index >= 2"));
    let { status, report } = verify(db, sinks);
    expect(report.broken).toEqual([]);
    expect(status).toBe(1);
    expect(report.log.breaks.filter((b) => b.kind === 'missing').map((b) => b.leafIndex)).toEqual([9, 12]);
    // Everything after a point, the checkpoint records included.
    await tamper(db, (c) => c.run('DELETE FROM _cot_steps WHERE ledger_seq > 6; DELETE FROM _cot_checkpoints WHERE ledger_seq > 6'));
    ({ status, report } = verify(db, sinks));
    expect(status).toBe(1);
    // The middle checkpoint (6 leaves) still matches; the one from shutdown covers what is gone.
    expect(report.log).toMatchObject({ checkpoints: 2, matched: 1 });
    expect(report.log.breaks.filter((b) => b.kind === 'truncated')).toHaveLength(1);
    expect(report.log.breaks[0]?.message).toMatch(/covers more than the \d+ the database holds/);
  });

  it('3. names the exact row when one is rewritten and its whole chain recomputed', async () => {
    const { db, sinks } = await history('rechained');
    await tamper(db, async (c) => {
      // What an attacker with the file and the README does: edit step 1 of session a, then re-chain a.
      const cols = (
        await c.runAndReadAll("SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = '_cot_steps' ORDER BY column_index")
      ).getRows() as Array<[string, string]>;
      const names = cols.map(([n]) => n);
      const texts = cols.map(([n, t]) => (t === 'TIMESTAMP WITH TIME ZONE' ? `CAST(epoch_us("${n}") AS VARCHAR)` : `CAST("${n}" AS VARCHAR)`));
      const rows = (await c.runAndReadAll(`SELECT ${texts.join(', ')} FROM _cot_steps WHERE session_id = 'a' ORDER BY step_index`)).getRows() as Array<
        Array<string | null>
      >;
      const at = (n: string): number => names.indexOf(n);
      let prev = '';
      for (const row of rows) {
        if (row[at('step_index')] === '1') row[at('content')] = 'a forged thought';
        row[at('prev_hash')] = prev;
        // cotwire/v3, as the README has it: the row's salt, which the file holds, derives every key.
        row[at('current_hash')] = rowHashV3('_cot_steps', names, row, committedOf(names), SaltKeys.of(Buffer.from(row[at('row_salt')] ?? '', 'hex')));
        prev = row[at('current_hash')] as string;
        await c.run(
          `UPDATE _cot_steps SET content = '${String(row[at('content')])}', prev_hash = '${String(row[at('prev_hash')])}', current_hash = '${prev}' WHERE trace_id = '${String(row[at('trace_id')])}'`,
        );
      }
    });
    const { status, report } = verify(db, sinks);
    // The chains verify: the rewrite is invisible to them.
    expect(report.broken).toEqual([]);
    expect(status).toBe(1);
    const [first] = report.log.breaks;
    expect(first).toMatchObject({ kind: 'rewritten', leafIndex: 3, session: 'a', step: 1 });
    expect(first?.message).toMatch(/edited and re-chained/);

    // Without the node file beside the database, the break is still found, within a range.
    rmSync(`${db}.merkle`);
    const again = verify(db, sinks);
    expect(again.status).toBe(1);
    expect(again.report.log.breaks[0]).toMatchObject({ kind: 'rewritten', leafIndex: 0 });
  });

  it('4. finds a database replaced by an older copy of itself', async () => {
    const { db, sinks } = await history('older-copy');
    const old = join(root, 'older-copy.old.duckdb');
    copyFileSync(db, old);
    await withServer(db, sinks, async (c) => {
      for (let i = 0; i < 3; i++) await c.query(STEP, ['d', `d thought ${i}`]);
    });
    expect(verify(db, sinks).status).toBe(0);
    copyFileSync(old, db);
    if (existsSync(`${db}.wal`)) rmSync(`${db}.wal`);
    const { status, report } = verify(db, sinks);
    expect(report.broken).toEqual([]);
    expect(status).toBe(1);
    expect(report.log.breaks).toHaveLength(1);
    expect(report.log.breaks[0]).toMatchObject({ kind: 'truncated' });
    expect(report.log.breaks[0]?.message).toMatch(/older copy/);
  });

  it('refuses checkpoints signed by another key, and edited ones', async () => {
    const { db, sinks } = await history('forged-checkpoint');
    const file = join(sinks, readdirSync(sinks).sort()[0] as string);
    writeFileSync(
      file,
      readFileSync(file, 'utf8').replace(/\n(\d+)\n/, (_, n: string) => `\n${Number(n) + 1}\n`),
    );
    const { status, report } = verify(db, sinks);
    expect(status).toBe(1);
    expect(report.log.breaks[0]).toMatchObject({ kind: 'signature' });
  });
});

describe('a damaged node file', () => {
  it('is moved aside with a warning that names it, and the log is rebuilt from the rows', async () => {
    const { db, sinks } = await history('damaged-node-file');
    const nodeFile = `${db}.merkle`;
    const stored = readFileSync(nodeFile);
    writeFileSync(nodeFile, Buffer.concat([Buffer.from('GARBAGE!'), stored.subarray(8)]));
    const lines: string[] = [];
    await withServer(
      db,
      sinks,
      async (c, running) => {
        // The rebuilt tree reproduces every checkpoint signed before the damage, and goes on.
        const rebuilt = running.merkle.size;
        expect(rebuilt).toBeGreaterThanOrEqual(12);
        await c.query(STEP, ['a', 'after the damage']);
        expect(running.merkle.size).toBe(rebuilt + 1);
      },
      logLines(lines),
    );
    const warning = lines.map((l) => JSON.parse(l) as { msg: string; nodeFile?: string; movedTo?: string }).find((l) => l.nodeFile === nodeFile);
    expect(warning?.msg).toContain('is not a cotwire Merkle node file');
    expect(warning?.msg).toContain('rebuilt from the rows');
    expect(
      readFileSync(warning?.movedTo as string)
        .subarray(0, 8)
        .toString(),
    ).toBe('GARBAGE!');
    const { status, report } = verify(db, sinks);
    expect(report.log.breaks).toEqual([]);
    expect(status).toBe(0);
  });
});

describe('the checkpoint key', () => {
  /** `cotwire keygen --rotate` on a stopped server's file, with the sinks of its configuration. */
  function rotate(db: string, sinks: string, out: string, extra: readonly string[]): { status: number | null; stdout: string; stderr: string } {
    const config = join(root, `${out.replace(/[^a-z0-9]/gi, '_')}.json`);
    writeFileSync(config, JSON.stringify({ checkpoint: { sinks: [`${sinks}/`] } }));
    const r = spawnSync(process.execPath, [CLI, 'keygen', '--rotate', '--db', db, '--config', config, '--out', out, ...extra], { encoding: 'utf8' });
    return { status: r.status, stdout: r.stdout, stderr: r.stderr };
  }

  it('is never replaced in silence: another key file, and a deleted key beside the database, are refused by name', async () => {
    const { db, sinks } = await history('other-key');
    const other = join(root, 'another-signer.key');
    writeKeyFile(other, 'audit.example/agents');
    const refusal = await withServer(db, sinks, async () => 'started', undefined, other).catch((e: Error) => e.message);
    expect(refusal).toContain('the last checkpoint in the log was signed by the key audit.example/agents+');
    expect(refusal).toContain(`checkpoint.keyFile (${other})`);
    expect(refusal).toContain('cotwire keygen --rotate');

    // The default: a key file beside the database, made at the first start.
    const beside = join(root, 'beside.duckdb');
    await withServer(beside, join(root, 'beside-checkpoints'), async (c) => c.query(STEP, ['a', 'one']), undefined, null);
    expect(existsSync(`${beside}.key`)).toBe(true);
    rmSync(`${beside}.key`);
    const missing = await withServer(beside, join(root, 'beside-checkpoints'), async () => 'started', undefined, null).catch((e: Error) => e.message);
    expect(missing).toContain(`the checkpoint signing key ${beside}.key is missing`);
    expect(existsSync(`${beside}.key`)).toBe(false);
  });

  it('rotates explicitly: the rotation is signed by the old key, and a verifier that holds only the old key follows it', async () => {
    const { db, sinks } = await history('rotated');
    const next = join(root, 'rotated-next.key');
    const r = rotate(db, sinks, next, ['--old-key', keyFile]);
    expect(r.stderr).toContain('recorded "key rotated" in the log');
    expect(r.status).toBe(0);
    const newVerifier = r.stdout.trim();
    expect(newVerifier).toMatch(/^audit\.example\/agents\+[0-9a-f]{8}\+/);
    // The old key no longer starts the server; the new one does, and signs on.
    expect(await withServer(db, sinks, async () => 'started').catch((e: Error) => e.message)).toContain('cotwire keygen --rotate');
    await withServer(db, sinks, async (c) => c.query(STEP, ['a', 'after the rotation']), undefined, next);
    const { status, report } = verify(db, sinks);
    expect(report.log.keyEvents).toMatchObject([{ kind: 'key rotated', followed: true }]);
    expect(report.log.breaks).toEqual([]);
    expect(status).toBe(0);
    // A rotation needs the key that signed the last checkpoint.
    const again = rotate(db, sinks, join(root, 'rotated-third.key'), ['--old-key', keyFile]);
    expect(again.status).toBe(2);
    expect(again.stderr).toContain("but the log's last checkpoint was signed by");
  });

  it('records a lost key with its reason; a verifier then needs the new key given', async () => {
    const { db, sinks } = await history('lost-key');
    const next = join(root, 'lost-next.key');
    const unexplained = rotate(db, sinks, next, []);
    expect(unexplained.status).toBe(2);
    expect(unexplained.stderr).toContain('say why with --reason');
    expect(existsSync(next)).toBe(false);
    const r = rotate(db, sinks, next, ['--reason', 'the laptop that held it was stolen']);
    expect(r.status).toBe(0);
    const newVerifier = r.stdout.trim();
    await withServer(db, sinks, async (c) => c.query(STEP, ['a', 'after the loss']), undefined, next);
    const oldOnly = verify(db, sinks);
    expect(oldOnly.report.log.keyEvents).toMatchObject([{ kind: 'key lost', followed: false }]);
    expect(oldOnly.report.log.keyEvents[0]?.message).toContain('give it with --key');
    expect(oldOnly.report.log.breaks.map((b) => b.kind)).toContain('signature');
    expect(oldOnly.status).toBe(1);
    const both = verify(db, sinks, [verifier, newVerifier]);
    expect(both.report.log.breaks).toEqual([]);
    expect(both.status).toBe(0);
  });
});

describe('the log after kill -9', () => {
  it('resumes from what was committed: checkpoints before and after the crash are one history', async () => {
    const db = join(root, 'crash.duckdb');
    const sinks = join(root, 'crash-checkpoints');
    const config = join(root, 'crash.yaml');
    writeFileSync(config, `checkpoint:\n  keyFile: ${keyFile}\n  intervalSeconds: 1\n  sinks: ["${sinks}/"]\n`);
    const { child, port } = await spawnServer(['--db', db, '--config', config]);
    let stop = false;
    const workers = Array.from({ length: 4 }, async (_, w) => {
      const c = new pg.Client({ host: '127.0.0.1', port, user: 'cotwire', database: 'cotwire' });
      c.on('error', () => undefined);
      await c.connect();
      for (let i = 0; !stop; i++) {
        try {
          await c.query(STEP, [`w${w}`, `step ${i}`]);
        } catch {
          break;
        }
      }
    });
    // Long enough for a few checkpoints to reach the sink.
    await expect
      .poll(() => (existsSync(sinks) ? readdirSync(sinks).filter((f) => f.endsWith('.checkpoint')).length : 0), { timeout: 10_000 })
      .toBeGreaterThanOrEqual(2);
    child.kill('SIGKILL');
    stop = true;
    await Promise.all(workers);
    await new Promise<void>((resolve) => (child.exitCode !== null || child.signalCode !== null ? resolve() : child.once('exit', () => resolve())));
    const before = readdirSync(sinks).length;
    await withServer(db, sinks, async (c, running) => {
      await c.query(STEP, ['after', 'the crash']);
      expect(await running.checkpoints.issue()).not.toBeNull();
    });
    expect(readdirSync(sinks).length).toBeGreaterThan(before);
    const { status, report } = verify(db, sinks);
    expect(report.log.breaks).toEqual([]);
    expect(report.log.matched).toBe(report.log.checkpoints);
    expect(status).toBe(0);
  });
});

describe('receipts', () => {
  it('proves a step offline and checks the receipt with no database, here and in Python', async () => {
    const { db, traces } = await history('receipt');
    const receipt = join(root, 'receipt.json');
    const proved = spawnSync(process.execPath, [CLI, 'prove', '--db', db, '--trace', traces[4] as string, '--out', receipt], { encoding: 'utf8' });
    expect(proved.stderr).toBe('');
    expect(proved.status).toBe(0);
    const parsed = JSON.parse(readFileSync(receipt, 'utf8')) as { leaf_index: number; tree_size: number; columns: Array<[string, string | null]> };
    expect(parsed.leaf_index).toBe(4);
    expect(parsed.tree_size).toBeGreaterThan(12);
    const check = (file: string): { status: number | null; stdout: string } => {
      const r = spawnSync(process.execPath, [CLI, 'check-receipt', file, '--key', verifier], { encoding: 'utf8' });
      return { status: r.status, stdout: r.stdout };
    };
    expect(check(receipt)).toMatchObject({
      status: 0,
      stdout: expect.stringMatching(/^OK: leaf 4 is in the tree of \d+ leaves signed by audit\.example\/agents/),
    });
    const python = (file: string): { status: number | null; stdout: string } => {
      const r = spawnSync('python3', [join(import.meta.dirname, '../../tools/check_receipt.py'), file, verifier], { encoding: 'utf8' });
      return { status: r.status, stdout: r.stdout };
    };
    expect(python(receipt)).toMatchObject({ status: 0, stdout: expect.stringMatching(/^OK leaf 4 of \d+ under audit\.example\/agents/) });

    const forged = join(root, 'forged-receipt.json');
    writeFileSync(forged, JSON.stringify({ ...parsed, columns: parsed.columns.map(([n, v]) => [n, n === 'content' ? 'forged' : v]) }));
    expect(check(forged)).toMatchObject({ status: 1, stdout: expect.stringMatching(/^FAILED: the row's hash/) });
    expect(python(forged)).toMatchObject({ status: 1, stdout: expect.stringMatching(/^FAIL: row hash mismatch/) });
    const otherKey = writeKeyFile(join(root, 'other.key'), 'audit.example/agents');
    const r = spawnSync(process.execPath, [CLI, 'check-receipt', receipt, '--key', otherKey], { encoding: 'utf8' });
    expect(r.status).toBe(1);
    expect(r.stdout).toMatch(/not signed by/);
  });
});
