import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { usePgEngine } from '../fixtures/pg-engine.js';
import { until } from '../fixtures/poll.js';
import { spawnServer } from '../fixtures/server.js';

/**
 * Rows removed from a PostgreSQL engine behind the servers (by someone who
 * owns the database): the chain heads the servers keep in the engine say
 * where each chain ended, so an append onto a cut chain is refused instead
 * of linking to the last row left, until `cotwire accept-loss --url`
 * records the loss.
 */
const ctx = usePgEngine();
const dir = mkdtempSync(join(tmpdir(), 'cotwire-pg-cut-'));
const CLI = join(import.meta.dirname, '../../dist/cli.js');
const config = join(dir, 'cotwire.yaml');
// An audit round at every start: the interval is what decides whether the round is an instance's.
writeFileSync(config, `checkpoint:\n  sinks: ["${join(dir, 'checkpoints')}/"]\nledger:\n  verifyIntervalSeconds: 1\n`);
const children: Array<{ kill(signal: NodeJS.Signals): unknown }> = [];
afterAll(() => {
  for (const c of children) c.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

async function instance(): Promise<{ client: pg.Client; out: () => string; stop(): Promise<void> }> {
  const started = await spawnServer(['--config', config, '--engine-url', ctx.engine.url, '--db', join(dir, 'unused.duckdb')]);
  children.push(started.child);
  const client = new pg.Client({ host: '127.0.0.1', port: started.port, user: 'cotwire', database: 'cotwire' });
  await client.connect();
  return {
    client,
    out: started.out,
    async stop() {
      await client.end();
      const exited = new Promise((r) => started.child.once('exit', r));
      started.child.kill('SIGTERM');
      await exited;
    },
  };
}

const append = (c: pg.Client, session: string) =>
  c.query("INSERT INTO _cot_steps (session_id, step_type, content) VALUES ($1, 'Reasoning', 'after the cut')", [session]).then(
    () => 'appended',
    (e: { code: string; message: string }) => `${e.code} ${e.message}`,
  );

describe('a chain cut behind the servers on a PostgreSQL engine', () => {
  it('refuses appends onto it, and only onto it, until accept-loss --url records the loss; then it goes on from its rows', async () => {
    const first = await instance();
    for (const session of ['cut', 'gone', 'kept']) {
      for (let i = 0; i < 5; i++) {
        await first.client.query("INSERT INTO _cot_steps (session_id, step_type, content) VALUES ($1, 'Reasoning', $2)", [session, `${session} ${i}`]);
      }
    }
    await first.stop();
    const admin = await ctx.engine.admin();
    await admin.run('ALTER TABLE public._cot_steps DISABLE TRIGGER cotwire_append_only');
    await admin.run(
      "DELETE FROM public._cot_steps WHERE (session_id = 'cut' AND step_index >= 3) OR session_id = 'gone' OR (session_id = 'kept' AND step_index = 1)",
    );
    await admin.run('ALTER TABLE public._cot_steps ENABLE TRIGGER cotwire_append_only');

    const cut = await instance();
    try {
      expect(await append(cut.client, 'cut')).toBe(
        'XX001 chain "cut" of ledger "main._cot_steps" ends at step_index 2, but the server made step_index 4 durable: the steps after 2 are gone from the database (removed behind the server, or lost with its journal); appends to it are refused',
      );
      expect(await append(cut.client, 'gone')).toMatch(
        /^XX001 chain "gone" of ledger "main._cot_steps" holds no row, but the server made step_index 4 durable/,
      );
      expect(await append(cut.client, 'kept')).toBe('appended');
      expect(await append(cut.client, 'new')).toBe('appended');
      expect(await append(cut.client, 'cut')).toMatch(/^XX001 /);
    } finally {
      await cut.stop();
    }

    // Without a reason there is no record.
    expect(spawnSync(process.execPath, [CLI, 'accept-loss', '--url', ctx.engine.url, '--reason', ' '], { encoding: 'utf8' }).status).toBe(2);
    const accepted = spawnSync(
      process.execPath,
      [CLI, 'accept-loss', '--config', config, '--url', ctx.engine.url, '--reason', 'a migration script deleted them'],
      {
        encoding: 'utf8',
      },
    );
    // pg warns once that the writer pipelines its statements on one client; nothing else is said.
    expect(accepted.stderr.split('\n').filter((l) => l !== '' && !/DeprecationWarning: Calling client.query\(\)|--trace-deprecation/.test(l))).toEqual([]);
    expect(accepted.status).toBe(0);
    expect(accepted.stdout).toMatch(/^recorded the loss of ledger_seq \S+ and the cut ends of 2 chains in the log/);

    const after = await instance();
    try {
      expect(await append(after.client, 'cut')).toBe('appended');
      expect(await append(after.client, 'gone')).toBe('appended');
      expect(
        (await after.client.query("SELECT session_id, step_index FROM _cot_steps WHERE content = 'after the cut' AND session_id IN ('cut', 'gone') ORDER BY 1"))
          .rows,
      ).toEqual([
        { session_id: 'cut', step_index: 3 },
        { session_id: 'gone', step_index: 0 },
      ]);
      await until(
        'an audit that lists the gap',
        async () => (await after.client.query("SELECT count(*)::INT AS n FROM cot_audit() WHERE kind = 'gap'")).rows[0].n > 0,
      );
      const findings = (await after.client.query('SELECT kind, row_count::INT AS n, detail FROM cot_audit()')).rows as Array<{
        kind: string;
        n: number;
        detail: string;
      }>;
      expect(findings.map((f) => [f.kind, f.n])).toEqual([['gap', 8]]);
      expect(findings[0]?.detail).toContain('a migration script deleted them');
      expect((await after.client.query('SELECT count(*)::INT AS n FROM cot_verify_all() WHERE NOT valid')).rows[0].n).toBe(0);
      // The step lost from the middle of a chain is a gap there, by the SQL function and by the server's own check alike.
      const gap = [{ chain_key: 'kept', valid: true, break_kind: 'gap', first_broken_index: 1 }];
      expect(
        (await after.client.query('SELECT chain_key, valid, break_kind, first_broken_index FROM cot_verify_all() WHERE break_kind IS NOT NULL')).rows,
      ).toEqual(gap);
      expect((await after.client.query('SELECT chain_key, valid, break_kind, first_broken_index FROM cot_verify($1)', ['kept'])).rows).toEqual(gap);
    } finally {
      await after.stop();
    }
    expect(spawnSync(process.execPath, [CLI, 'accept-loss', '--url', ctx.engine.url, '--reason', 'twice'], { encoding: 'utf8' }).stderr).toContain(
      'has no loss to accept',
    );
  }, 180_000);

  it('takes a ledger dropped behind the servers and created again through one as new: its old chains are not held against it', async () => {
    const first = await instance();
    await first.client.query('CREATE TABLE _cot_tools (session_id VARCHAR, tool VARCHAR)');
    await first.client.query("INSERT INTO _cot_tools (session_id, tool) VALUES ('a', 'search'), ('a', 'fetch')");
    await first.stop();
    const admin = await ctx.engine.admin();
    await admin.run('DROP TABLE public._cot_tools');
    const again = await instance();
    try {
      await again.client.query('CREATE TABLE _cot_tools (session_id VARCHAR, tool VARCHAR)');
      await again.client.query("INSERT INTO _cot_tools (session_id, tool) VALUES ('a', 'again')");
      expect((await again.client.query("SELECT step_index, tool FROM _cot_tools WHERE session_id = 'a'")).rows).toEqual([{ step_index: 0, tool: 'again' }]);
    } finally {
      await again.stop();
    }
  });
});
