import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Config } from '../../src/config/schema.js';
import { buildReceipt } from '../../src/engines/duckdb/log/receipt.js';
import { writeKeyFile } from '../../src/ledger/log/signing-key.js';
import { makeScramVerifier } from '../../src/session/scram.js';
import { sqlstate } from '../fixtures/errors.js';
import { offline } from '../fixtures/stoppable.js';
import { serveSigned, type SignedServer } from '../fixtures/signed-server.js';

/**
 * Retention by whole sessions: what goes is recorded first (chained, in the
 * global log), the chains, the audit and the offline check against signed
 * checkpoints account for it, and a row removed any other way is still
 * found. Sessions with a step after the cutoff are kept whole.
 */
const CLI = join(import.meta.dirname, '../../dist/cli.js');
const root = mkdtempSync(join(tmpdir(), 'cotwire-retain-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const keyFile = join(root, 'signing.key');
let verifierKey = '';
beforeAll(() => {
  verifierKey = writeKeyFile(keyFile, 'audit.example/retention');
});

const password = makeScramVerifier('pw');
const users = [
  { name: 'agent', password, role: 'writer', agentId: null, orgId: null },
  { name: 'ops', password, role: 'admin', agentId: null, orgId: null },
];

type Server = SignedServer;
/** Sessions seconds old are removed here, far short of the default floor, which these tests turn off. */
const serve = (db: string, retentionDays = 0): Promise<Server> => serveSigned(db, keyFile, users as Config['users'], retentionDays, { retentionFloorDays: 0 });

const STEP = "INSERT INTO _cot_steps (session_id, step_type, content) VALUES ($1, 'Reasoning', $2) RETURNING trace_id::text AS t, current_hash AS h";
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function verifyCli(db: string): {
  status: number | null;
  report: { valid: boolean; broken: unknown[]; log?: { breaks: Array<{ kind: string }>; retained: number } };
} {
  const r = spawnSync(process.execPath, [CLI, 'verify', '--db', db, '--json', '--checkpoint', `${db}-checkpoints`, '--key', verifierKey], { encoding: 'utf8' });
  return { status: r.status, report: JSON.parse(r.stdout || '{}') };
}

describe('retention', () => {
  const dir = join(root, 'main');
  const db = join(dir, 'ledger.duckdb');
  const planted = `old secret ${Date.now()}-PLANTED`;
  const heads = new Map<string, string>();
  let receiptTrace = '';

  it('removes whole sessions older than the cutoff, records each first, and keeps a session that straddles it', async () => {
    const s = await serve(db);
    try {
      const [agent, ops] = await Promise.all([s.as('agent'), s.as('ops')]);
      for (let i = 0; i < 3; i++) {
        for (const session of ['old-a', 'old-b', 'straddle']) {
          const r = (await agent.query(STEP, [session, session === 'old-a' && i === 1 ? planted : `${session} ${i}`])).rows[0];
          heads.set(session, r.h);
          if (session === 'old-a' && i === 0) receiptTrace = r.t;
        }
      }
      await s.running.checkpoints.issue();
      await s.running.writer.visible();
      // Positive control: the value is in the files now.
      const found = readdirSync(dir, { withFileTypes: true }).filter((e) => e.isFile() && readFileSync(join(dir, e.name)).includes(Buffer.from(planted)));
      expect(found.length).toBeGreaterThan(0);
      const conn = await s.running.engine.connect();
      try {
        writeFileSync(join(root, 'receipt.json'), JSON.stringify(await buildReceipt(conn, await s.running.ledgers.all(), receiptTrace, s.running.merkle)));
      } finally {
        conn.close();
      }
      await sleep(1100);
      const cutoff = Date.now();
      await sleep(50);
      await agent.query(STEP, ['straddle', 'after the cutoff']);
      await agent.query(STEP, ['new', 'a new session']);
      // The cutoff, as an age at the moment of the call.
      const days = (): number => (Date.now() - cutoff) / 86_400_000;

      // Over SQL: admins only, and only with ledger.retentionDays set.
      expect(await sqlstate(agent.query('SELECT * FROM cot_retain(true)'))).toBe('42501');
      expect(await sqlstate(ops.query('SELECT * FROM cot_retain(true)'))).toBe('55000');

      const dry = await s.running.retain(days(), true, 'test');
      expect(dry.map((r) => r.chainKey).sort()).toEqual(['old-a', 'old-b']);
      expect((await ops.query("SELECT count(*)::int AS n FROM _cot_steps WHERE session_id LIKE 'old-%'")).rows).toEqual([{ n: 6 }]);

      const removed = await s.running.retain(days(), false, 'test');
      expect(removed.map((r) => [r.chainKey, r.stepCount, r.finalHash]).sort()).toEqual([
        ['old-a', 3, heads.get('old-a')],
        ['old-b', 3, heads.get('old-b')],
      ]);
      expect((await ops.query('SELECT session_id, count(*)::int AS n FROM _cot_steps GROUP BY 1 ORDER BY 1')).rows).toEqual([
        { session_id: 'new', n: 1 },
        { session_id: 'straddle', n: 4 },
      ]);
      const records = await ops.query(
        'SELECT ledger, chain_key, step_count::int AS n, first_step_index, last_step_index, final_hash, retained_by FROM _cot_retention ORDER BY chain_key',
      );
      expect(records.rows).toEqual([
        { ledger: 'main._cot_steps', chain_key: 'old-a', n: 3, first_step_index: 0, last_step_index: 2, final_hash: heads.get('old-a'), retained_by: 'test' },
        { ledger: 'main._cot_steps', chain_key: 'old-b', n: 3, first_step_index: 0, last_step_index: 2, final_hash: heads.get('old-b'), retained_by: 'test' },
      ]);
      // Every chain verifies, the records' own chain too, and the audit finds nothing missing.
      expect((await ops.query('SELECT chain_key, valid FROM cot_verify_all() ORDER BY 1')).rows).toEqual([
        { chain_key: 'new', valid: true },
        { chain_key: 'straddle', valid: true },
      ]);
      expect((await ops.query('SELECT valid FROM cot_verify_retention_all()')).rows).toEqual([{ valid: true }]);
      expect((await s.running.auditor.audit()).findings).toEqual([]);
      // A removed session the agent carries on goes on from its last step.
      const next = await agent.query("INSERT INTO _cot_steps (session_id, step_type) VALUES ('old-a', 'Summary') RETURNING step_index, prev_hash");
      expect(next.rows).toEqual([{ step_index: 3, prev_hash: heads.get('old-a') }]);
      expect((await ops.query("SELECT valid, step_count FROM cot_verify('old-a')")).rows).toEqual([{ valid: true, step_count: '1' }]);
      await s.running.checkpoints.issue();
    } finally {
      await s.stop();
    }
  });

  it('leaves no byte of a removed session in any file, and the offline check against checkpoints passes', async () => {
    const files = readdirSync(dir, { recursive: true, withFileTypes: true })
      .filter((e) => e.isFile())
      .map((e) => join(e.parentPath, e.name));
    expect(files.filter((f) => readFileSync(f).includes(Buffer.from(planted)))).toEqual([]);
    const { status, report } = verifyCli(db);
    expect(report.log?.breaks).toEqual([]);
    expect(report.log?.retained).toBe(6);
    expect(status).toBe(0);
    // A receipt for a removed step still checks against its checkpoint.
    const check = spawnSync(process.execPath, [CLI, 'check-receipt', join(root, 'receipt.json'), '--key', verifierKey], { encoding: 'utf8' });
    expect(check.status, check.stdout + check.stderr).toBe(0);
  });

  it('goes on from a removed session after a restart, and still finds a row deleted by hand', async () => {
    const s = await serve(db);
    try {
      const agent = await s.as('agent');
      const next = await agent.query("INSERT INTO _cot_steps (session_id, step_type) VALUES ('old-b', 'Summary') RETURNING step_index, prev_hash");
      expect(next.rows).toEqual([{ step_index: 3, prev_hash: heads.get('old-b') }]);
      expect((await agent.query("SELECT valid FROM cot_verify('old-b')")).rows).toEqual([{ valid: true }]);
      await s.running.checkpoints.issue();
    } finally {
      await s.stop();
    }
    expect(verifyCli(db).status).toBe(0);
    await offline(db, "DELETE FROM _cot_steps WHERE session_id = 'straddle' AND step_index = 1");
    const { status, report } = verifyCli(db);
    expect(status).toBe(1);
    expect(report.log?.breaks.map((b) => b.kind)).toContain('missing');
    const s2 = await serve(db);
    try {
      const audit = await s2.running.auditor.audit();
      expect(audit.findings.map((f) => [f.kind, f.chainKey])).toContainEqual(['missing', 'straddle']);
    } finally {
      await s2.stop();
    }
  });

  it('runs from the command line, dry or not', async () => {
    const other = join(root, 'cli.duckdb');
    const s = await serve(other);
    try {
      const agent = await s.as('agent');
      await agent.query(STEP, ['cli-old', 'x']);
    } finally {
      await s.stop();
    }
    await offline(other, "UPDATE _cot_steps SET created_at = created_at - INTERVAL 10 DAY WHERE session_id = 'cli-old'");
    // The key that signed the log signs on: without it, the command would refuse, as the server does.
    const config = join(root, 'cli-retain.json');
    writeFileSync(config, JSON.stringify({ checkpoint: { keyFile }, ledger: { retentionFloorDays: 0 } }));
    const run = (...args: string[]) => spawnSync(process.execPath, [CLI, 'retain', '--db', other, '--config', config, '--json', ...args], { encoding: 'utf8' });
    expect(run().status).toBe(2);
    const dry = run('--days', '5', '--dry-run');
    expect(dry.status, dry.stderr).toBe(0);
    expect(JSON.parse(dry.stdout)).toMatchObject({ dryRun: true, sessions: 1, steps: 1 });
    expect(await offline(other, 'SELECT count(*) FROM _cot_steps')).toEqual([[1n]]);
    const real = run('--days', '5');
    expect(real.status, real.stderr).toBe(0);
    expect(JSON.parse(real.stdout)).toMatchObject({ dryRun: false, sessions: 1, steps: 1 });
    expect(await offline(other, 'SELECT count(*) FROM _cot_steps')).toEqual([[0n]]);
    expect(await offline(other, 'SELECT chain_key, step_count, retained_by LIKE $$cotwire retain%$$ FROM _cot_retention')).toEqual([['cli-old', 1n, true]]);
  });

  it('refuses, from the command line, --days shorter than ledger.retentionFloorDays without writing, and runs it with the floor off', async () => {
    const dir = join(root, 'floor');
    mkdirSync(dir);
    const floored = join(dir, 'floor.duckdb');
    const s = await serve(floored);
    try {
      await (await s.as('agent')).query(STEP, ['floor-old', 'x']);
    } finally {
      await s.stop();
    }
    await offline(floored, "UPDATE _cot_steps SET created_at = created_at - INTERVAL 40 DAY WHERE session_id = 'floor-old'");
    const files = (): Record<string, string> =>
      Object.fromEntries(
        readdirSync(dir, { recursive: true, withFileTypes: true })
          .filter((e) => e.isFile())
          .map((e) => [
            join(e.parentPath, e.name),
            createHash('sha256')
              .update(readFileSync(join(e.parentPath, e.name)))
              .digest('hex'),
          ]),
      );
    const before = files();
    const run = (config: object, ...args: string[]) => {
      const file = join(root, 'floor-config.json');
      writeFileSync(file, JSON.stringify({ checkpoint: { keyFile }, ...config }));
      return spawnSync(process.execPath, [CLI, 'retain', '--db', floored, '--config', file, '--json', ...args], { encoding: 'utf8' });
    };
    for (const args of [
      ['--days', '30'],
      ['--days', '30', '--dry-run'],
    ]) {
      const refused = run({}, ...args);
      expect(refused.status, refused.stderr).toBe(2);
      expect(refused.stdout).toBe('');
      expect(refused.stderr).toMatch(/^cotwire: --days 30 is shorter than ledger\.retentionFloorDays = 183 .*Articles 19\(1\) and 26\(6\).*\n$/);
      expect(refused.stderr.split('\n')).toHaveLength(2);
    }
    // A configured period below the floor stops the command as it stops the server.
    const configured = run({ ledger: { retentionDays: 30 } });
    expect(configured.status).toBe(1);
    expect(configured.stderr).toMatch(/^cotwire: invalid configuration: ledger\.retentionDays = 30; shorter than ledger\.retentionFloorDays = 183/);
    expect(files()).toEqual(before);
    expect(await offline(floored, 'SELECT count(*) FROM _cot_steps')).toEqual([[1n]]);

    const allowed = run({ ledger: { retentionFloorDays: 0 } }, '--days', '30');
    expect(allowed.status, allowed.stderr).toBe(0);
    expect(JSON.parse(allowed.stdout)).toMatchObject({ dryRun: false, days: 30, sessions: 1, steps: 1 });
    expect(await offline(floored, 'SELECT count(*) FROM _cot_steps')).toEqual([[0n]]);
  });

  it('refuses a period shorter than ledger.retentionFloorDays given any other way (22023), and records the refusal', async () => {
    // retentionDays 30 under the default floor: a configuration loadConfig refuses, built here by hand.
    const s = await serveSigned(join(root, 'floor-sql.duckdb'), keyFile, users as Config['users'], 30);
    try {
      const [agent, ops] = await Promise.all([s.as('agent'), s.as('ops')]);
      await agent.query(STEP, ['recent', 'kept']);
      const err = (await ops.query('SELECT * FROM cot_retain(true)').catch((e: unknown) => e)) as { code?: string; message?: string; hint?: string };
      expect(err).toMatchObject({ code: '22023', message: 'a retention period of 30 days is shorter than ledger.retentionFloorDays (183)' });
      expect(err.hint).toMatch(/set ledger\.retentionFloorDays: 0 if the system is not a high-risk AI system under the Act/);
      expect(await sqlstate(ops.query('SELECT cot_retain()'))).toBe('22023');
      await expect(s.running.retain(182, true, 'test')).rejects.toMatchObject({ code: '22023' });
      expect(await s.running.retain(183, true, 'test')).toEqual([]);
      expect((await ops.query("SELECT count(*)::int AS n FROM _cot_steps WHERE session_id = 'recent'")).rows).toEqual([{ n: 1 }]);
      await s.running.securityLog.flushed();
      const events = await ops.query("SELECT sqlstate FROM _cot_security_events WHERE operation = 'RETAIN' ORDER BY ledger_seq");
      expect(events.rows).toEqual([{ sqlstate: '22023' }, { sqlstate: '22023' }]);
    } finally {
      await s.stop();
    }
  });

  it('runs over SQL for an admin when ledger.retentionDays is set, and records the attempt', async () => {
    const s = await serve(join(root, 'sql.duckdb'), 30);
    try {
      const [agent, ops] = await Promise.all([s.as('agent'), s.as('ops')]);
      await agent.query(STEP, ['recent', 'kept']);
      expect((await ops.query('SELECT * FROM cot_retain(true)')).rows).toEqual([]);
      expect((await ops.query('SELECT cot_retain()')).rows).toEqual([{ cot_retain: '0' }]);
      expect(await sqlstate(ops.query("SELECT cot_retain('maybe')"))).toBe('22P02');
      await s.running.securityLog.flushed();
      const events = await ops.query(
        "SELECT user_name, operation, sqlstate, reason FROM _cot_security_events WHERE operation LIKE 'RETAIN%' ORDER BY ledger_seq",
      );
      expect(events.rows).toEqual([
        { user_name: 'ops', operation: 'RETAIN', sqlstate: '00000', reason: 'would remove 0 sessions' },
        { user_name: 'ops', operation: 'RETAIN', sqlstate: '00000', reason: 'removed 0 sessions' },
        { user_name: 'ops', operation: 'RETAIN', sqlstate: '22P02', reason: 'erasure failed' },
      ]);
    } finally {
      await s.stop();
    }
  });
});
