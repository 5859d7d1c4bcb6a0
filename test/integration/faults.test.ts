import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, truncateSync, unlinkSync, writeFileSync, writeSync, closeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import { Journal } from '../../src/engines/duckdb/ledger/journal.js';
import { createLogger } from '../../src/log/logger.js';
import { startServer, type RunningServer } from '../../src/engines/duckdb/start.js';
import { crashBeforeApply, tamper } from '../fixtures/crash.js';
import { appendUnderLoad, spawnServer } from '../fixtures/server.js';

/** Faults of the machine: a damaged journal after a crash, a full disk, a stopped and a terminated process. */
const root = mkdtempSync(join(tmpdir(), 'cotwire-faults-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

interface Started {
  readonly running: RunningServer;
  readonly log: () => string;
  readonly client: pg.Client;
  stop(): Promise<void>;
}

async function start(db: string, stepStore = true): Promise<Started> {
  const loaded = loadConfig({ argv: { port: '0', 'http-port': '0', db, 'log-level': 'info' }, env: {} });
  const config = { ...loaded, ledger: { ...loaded.ledger, stepStore } };
  const sink = new PassThrough();
  let text = '';
  sink.on('data', (b: Buffer) => (text += b.toString()));
  const running = await startServer(config, createLogger('info', false, sink));
  const client = new pg.Client({ host: '127.0.0.1', port: running.address.port, user: 'cotwire', database: 'cotwire' });
  client.on('error', () => undefined);
  await client.connect();
  return {
    running,
    client,
    log: () => text,
    async stop() {
      await client.end().catch(() => undefined);
      await running.close();
    },
  };
}

/** Six steps of session 's' and one of 'other', through the server; then a crash leaves the last five only in the journal. */
async function crashed(name: string): Promise<{ db: string; journal: string; records: Array<{ at: number; end: number }> }> {
  const db = join(root, `${name}.duckdb`);
  const s = await start(db);
  for (let i = 0; i < 6; i++) await s.client.query("INSERT INTO _cot_steps (session_id, step_type, content) VALUES ('s', 'Reasoning', $1)", [`thought ${i}`]);
  await s.client.query("INSERT INTO _cot_steps (session_id, step_type, content) VALUES ('other', 'Action', 'untouched')");
  await s.stop();
  await crashBeforeApply(db, 5);
  const journal = Journal.pathFor(db);
  const file = readFileSync(journal);
  const records: Array<{ at: number; end: number }> = [];
  for (let at = file.indexOf('COTJ'); at >= 0 && records.length < 2; at = file.indexOf('COTJ', at + 1)) {
    records.push({ at, end: at + 40 + file.readUInt32BE(at + 4) });
  }
  expect(records).toHaveLength(2);
  return { db, journal, records };
}

const CLI = join(import.meta.dirname, '../../dist/cli.js');

/** `cotwire accept-loss` on a stopped server's file. */
function acceptLoss(db: string, reason: string): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [CLI, 'accept-loss', '--db', db, '--reason', reason], { encoding: 'utf8' });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

async function contents(c: pg.Client): Promise<string[]> {
  return (await c.query('SELECT content FROM _cot_steps ORDER BY ledger_seq')).rows.map((r: { content: string }) => r.content);
}

describe('a journal damaged after a crash (kill -9 before the rows reached the database)', () => {
  it('applies the whole records of a truncated journal, says the last one was torn, and the audit reports the rows it held', async () => {
    const { db, journal, records } = await crashed('truncated');
    truncateSync(journal, (records[1]?.at ?? 0) + 50);
    const s = await start(db);
    try {
      expect(await contents(s.client)).toEqual(['thought 0', 'thought 1', 'thought 2', 'thought 3']);
      expect(s.log()).toMatch(/ends with a record cut short \(the record at offset \d+ claims \d+ bytes, but the file ends/);
      const report = await s.running.auditor.audit();
      expect(report.findings.filter((f) => f.kind === 'missing').reduce((n, f) => n + f.rows, 0)).toBe(3);
      // It goes on serving and appending, except onto the chain that lost its last steps.
      await s.client.query("INSERT INTO _cot_steps (session_id, step_type, content) VALUES ('fresh', 'Summary', 'after')");
      await expect(s.client.query("INSERT INTO _cot_steps (session_id, step_type, content) VALUES ('s', 'Summary', 'after')")).rejects.toMatchObject({
        code: 'XX001',
        message: expect.stringContaining('chain "s" of ledger "main._cot_steps" ends at step_index 3, but the server made step_index 5 durable'),
      });
    } finally {
      await s.stop();
    }
  });

  it('applies every record of a journal extended with garbage', async () => {
    const { db, journal, records } = await crashed('garbage');
    const fd = openSync(journal, 'r+');
    writeSync(fd, Buffer.from('not a record, just bytes that landed here'.repeat(20)), 0, undefined, records[1]?.end);
    closeSync(fd);
    const s = await start(db);
    try {
      expect(await contents(s.client)).toEqual(['thought 0', 'thought 1', 'thought 2', 'thought 3', 'thought 4', 'thought 5', 'untouched']);
      expect(s.log()).toMatch(/the ledger journal ends at offset \d+: the \d+ bytes from offset \d+ are no record/);
      expect((await s.running.auditor.audit()).findings).toEqual([]);
    } finally {
      await s.stop();
    }
  });

  it('refuses to start past a bit-flipped record until the loss is recorded, then shows it as a gap', async () => {
    const { db, journal, records } = await crashed('flipped');
    const file = readFileSync(journal);
    const at = (records[0]?.at ?? 0) + 60;
    file[at] = (file[at] as number) ^ 0x20;
    writeFileSync(journal, file);
    const refusal = await start(db).then(
      async (s) => {
        await s.stop();
        return 'started';
      },
      (e: Error) => e.message,
    );
    expect(refusal).toContain('2 acknowledged appends (ledger_seq 3..4) are gone');
    expect(refusal).toContain(`the ledger journal ${journal} is damaged where they were`);
    expect(refusal).toContain(`cotwire accept-loss --db ${db} --reason`);
    const accepted = acceptLoss(db, 'the journal was damaged on disk');
    expect(accepted.stderr).toMatch(
      /the ledger journal .* holds damaged bytes where a record should be \(the record at offset 0 .* does not match its SHA-256/,
    );
    expect(accepted.status).toBe(0);
    const s = await start(db);
    try {
      // The record after the damaged one, written after it, is applied.
      expect(await contents(s.client)).toEqual(['thought 0', 'thought 1', 'thought 4', 'thought 5', 'untouched']);
      const report = await s.running.auditor.audit();
      expect(report.findings.filter((f) => f.kind === 'missing')).toEqual([]);
      expect(report.findings.filter((f) => f.kind === 'gap').map((f) => [f.firstSeq, f.lastSeq, f.rows])).toEqual([[3, 4, 2]]);
      expect((await s.client.query("SELECT kind, row_count::INT AS n FROM cot_audit() WHERE kind = 'gap'")).rows).toEqual([{ kind: 'gap', n: 2 }]);
      // The lost steps were inside session s: its chain shows the gap where they were, and verifies on either side of it,
      // through the SQL and through the server's own check alike.
      const gap = [{ chain_key: 's', valid: true, break_kind: 'gap', first_broken_index: 2, step_count: '4' }];
      expect(
        (await s.client.query('SELECT chain_key, valid, break_kind, first_broken_index, step_count FROM cot_verify_all() WHERE break_kind IS NOT NULL')).rows,
      ).toEqual(gap);
      expect((await s.client.query("SELECT chain_key, valid, break_kind, first_broken_index, step_count FROM cot_verify('s')")).rows).toEqual(gap);
      expect((await s.client.query('SELECT chain_key, valid, break_kind, first_broken_index, step_count FROM cot_verify($1)', ['s'])).rows).toEqual(gap);
    } finally {
      await s.stop();
    }
  });
});

describe('a lost journal', () => {
  it('refuses to start when acknowledged appends not yet applied are gone with it, until the loss is recorded', async () => {
    const db = join(root, 'lost-journal.duckdb');
    const s = await start(db);
    for (let i = 0; i < 6; i++) await s.client.query("INSERT INTO _cot_steps (session_id, step_type, content) VALUES ('s', 'Reasoning', $1)", [`thought ${i}`]);
    await s.stop();
    // kill -9 with the last appends acknowledged from the journal only (the checkpoint at the stop among them), then the journal deleted.
    await tamper(db, (c) => c.run('DELETE FROM _cot_checkpoints'));
    await crashBeforeApply(db, 4);
    rmSync(Journal.pathFor(db));
    const refusal = await start(db).then(
      async (started) => {
        await started.stop();
        return 'started';
      },
      (e: Error) => e.message,
    );
    expect(refusal).toMatch(/^5 acknowledged appends \(ledger_seq 3\.\.7\) are gone: the ledger journal .* is missing/);
    expect(refusal).toContain('accept-loss');
    // It stays refused: nothing was written meanwhile.
    expect(
      await start(db).then(
        () => 'started',
        (e: Error) => e.message,
      ),
    ).toMatch(/^5 acknowledged appends \(ledger_seq 3\.\.7\) are gone/);
    const unexplained = acceptLoss(db, ' ');
    expect(unexplained.status).toBe(2);
    const accepted = acceptLoss(db, 'the journal was deleted by a cleanup script');
    expect(accepted.stdout).toContain('recorded the loss of ledger_seq 3..7');
    expect(accepted.status).toBe(0);
    const again = await start(db);
    try {
      expect(await contents(again.client)).toEqual(['thought 0', 'thought 1']);
      // The chain goes on from what is left, and the log from after the lost leaves.
      await again.client.query("INSERT INTO _cot_steps (session_id, step_type, content) VALUES ('s', 'Reasoning', 'after the loss')");
      const report = await again.running.auditor.audit();
      expect(report.findings.map((f) => f.kind)).toEqual(['gap']);
      expect(report.findings[0]?.detail).toContain('the journal was deleted by a cleanup script');
      expect((await again.client.query('SELECT count(*)::INT AS n FROM cot_verify_all() WHERE NOT valid')).rows[0].n).toBe(0);
    } finally {
      await again.stop();
    }
    // And the command line's verification shows it.
    const verified = spawnSync(process.execPath, [CLI, 'verify', '--db', db], { encoding: 'utf8' });
    expect(verified.status).toBe(0);
    expect(acceptLoss(db, 'twice').stderr).toContain('has no loss to accept');
  });
});

describe('a chain cut while the server was stopped', () => {
  it('refuses appends onto the cut chains, and only those, until the loss is recorded; then they go on from their rows', async () => {
    const db = join(root, 'cut.duckdb');
    const s = await start(db);
    for (const session of ['cut', 'gone', 'kept']) {
      for (let i = 0; i < 5; i++)
        await s.client.query("INSERT INTO _cot_steps (session_id, step_type, content) VALUES ($1, 'Reasoning', $2)", [session, `${session} ${i}`]);
    }
    await s.stop();
    await tamper(db, async (c) => {
      await c.run("DELETE FROM _cot_steps WHERE session_id = 'cut' AND step_index >= 3");
      await c.run("DELETE FROM _cot_steps WHERE session_id = 'gone'");
    });
    const append = (c: pg.Client, session: string) =>
      c.query("INSERT INTO _cot_steps (session_id, step_type, content) VALUES ($1, 'Reasoning', 'after the cut')", [session]).then(
        () => 'appended',
        (e: { code: string; message: string }) => `${e.code} ${e.message}`,
      );
    const cut = await start(db);
    try {
      expect(await append(cut.client, 'cut')).toBe(
        'XX001 chain "cut" of ledger "main._cot_steps" ends at step_index 2, but the server made step_index 4 durable: the steps after 2 are gone from the database (removed behind the server, or lost with its journal); appends to it are refused',
      );
      expect(await append(cut.client, 'gone')).toMatch(
        /^XX001 chain "gone" of ledger "main._cot_steps" holds no row, but the server made step_index 4 durable/,
      );
      // Other chains, and new ones, are served; so are appends of several chains in one statement without a cut one.
      expect(await append(cut.client, 'kept')).toBe('appended');
      expect(await append(cut.client, 'new')).toBe('appended');
      const said = cut
        .log()
        .split('\n')
        .filter((l) => l.includes('"headRecord"'))
        .map((l) => JSON.parse(l) as { msg: string });
      expect(said.map((l) => l.msg.split(':')[0])).toEqual([
        '2 chains of main._cot_steps end before the heads the server made durable ("cut" at step_index 2 of 4, "gone" at step_index none of 4)',
      ]);
      // It stays refused.
      expect(await append(cut.client, 'cut')).toMatch(/^XX001 /);
    } finally {
      await cut.stop();
    }
    const again = await start(db);
    try {
      // The record survives a restart: the writer does not learn the cut heads from the rows.
      expect(await append(again.client, 'cut')).toMatch(/^XX001 /);
    } finally {
      await again.stop();
    }
    const accepted = acceptLoss(db, 'restored from an older backup');
    expect(accepted.status).toBe(0);
    expect(accepted.stdout).toContain('recorded the loss of ledger_seq 4..10 and the cut ends of 2 chains');
    const after = await start(db);
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
      const report = await after.running.auditor.audit();
      expect(report.findings.filter((f) => f.kind !== 'gap')).toEqual([]);
      expect(report.findings.find((f) => f.kind === 'gap')?.detail).toContain('restored from an older backup');
    } finally {
      await after.stop();
    }
  });

  it('starts without a record of the heads (written by an older server, or deleted), says so, and records from then on', async () => {
    const db = join(root, 'no-record.duckdb');
    const s = await start(db);
    await s.client.query("INSERT INTO _cot_steps (session_id, step_type, content) VALUES ('s', 'Reasoning', 'one')");
    await s.stop();
    rmSync(`${db}.heads`);
    const again = await start(db);
    try {
      expect(again.log()).toContain(`there is no record of the chains' heads (${db}.heads)`);
      await again.client.query("INSERT INTO _cot_steps (session_id, step_type, content) VALUES ('s', 'Reasoning', 'two')");
    } finally {
      await again.stop();
    }
    expect(readFileSync(`${db}.heads`, 'utf8')).toContain('["main._cot_steps","s",1,');
  });
});

/** An append of a step to the session 'disk': null once acknowledged (its content then kept in `acknowledged`), else its SQLSTATE. */
function diskAppends(client: pg.Client, acknowledged: string[]): (content: string) => Promise<string | null> {
  return async (content) => {
    try {
      const r = await client.query("INSERT INTO _cot_steps (session_id, step_type, content) VALUES ('disk', 'Observation', $1) RETURNING content, ledger_seq", [
        content,
      ]);
      // An acknowledged append answers its RETURNING row, even when the database cannot take it yet.
      if (r.rows.length !== 1 || r.rows[0]?.content !== content) return `acknowledged with ${r.rows.length} RETURNING rows`;
      acknowledged.push(content);
      return null;
    } catch (err) {
      return (err as { code?: string }).code ?? 'no code';
    }
  };
}

/** Appends until one is refused: its SQLSTATE, or null when all `tries` were acknowledged. */
async function appendUntilRefused(
  append: (content: string) => Promise<string | null>,
  content: (i: number) => string,
  tries: number,
  pauseMs: number,
): Promise<string | null> {
  for (let i = 0; i < tries; i++) {
    const refused = await append(content(i));
    if (refused !== null) return refused;
    await new Promise((r) => setTimeout(r, pauseMs));
  }
  return null;
}

/** Once space is freed: appends until one is acknowledged, at most 100 tries 100 ms apart. */
async function appendUntilAcknowledged(append: (content: string) => Promise<string | null>): Promise<boolean> {
  for (let i = 0; i < 100; i++) {
    if ((await append(`after ${i}`)) === null) return true;
    await new Promise((r) => setTimeout(r, 100));
  }
  return false;
}

/** Writes `filler` until its disk is full. */
function fillDisk(filler: string): void {
  const fd = openSync(filler, 'w');
  try {
    for (const chunk = Buffer.alloc(1 << 20, 1); ; ) writeSync(fd, chunk);
  } catch (err) {
    expect((err as NodeJS.ErrnoException).code).toBe('ENOSPC');
  } finally {
    closeSync(fd);
  }
}

describe('a full disk', () => {
  // A small disk of its own, which needs root (and, in a container, the right to mount).
  const why =
    process.getuid?.() !== 0
      ? 'mounting a small tmpfs needs root'
      : (() => {
          const probe = mkdtempSync(join(tmpdir(), 'cotwire-mount-'));
          try {
            execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', probe], { stdio: 'ignore' });
            execFileSync('umount', [probe], { stdio: 'ignore' });
            return null;
          } catch {
            return 'this machine does not let the tests mount a tmpfs';
          } finally {
            rmSync(probe, { recursive: true, force: true });
          }
        })();
  it.skipIf(why !== null)(
    `answers appends with 53100, keeps serving reads, loses nothing acknowledged and recovers by itself${why === null ? '' : ` (skipped: ${why})`}`,
    async () => {
      const dir = join(root, 'small');
      mkdirSync(dir);
      execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=48m', 'tmpfs', dir]);
      try {
        const db = join(dir, 'full.duckdb');
        // Without the row store: when its write meets the full disk, lmdb-js also rejects a promise of
        // its own that no caller can reach. The server lets that one pass (steps-store/store.ts), but
        // the test runner counts every unhandled rejection as a failure.
        const s = await start(db, false);
        const filler = join(dir, 'filler');
        try {
          const acknowledged: string[] = [];
          const append = diskAppends(s.client, acknowledged);
          for (let i = 0; i < 5; i++) expect(await append(`before ${i}`)).toBeNull();
          await s.running.writer.visible();
          fillDisk(filler);
          // Appends may still be acknowledged from the preallocated journal until the database's own write fails; then 53100.
          expect(await appendUntilRefused(append, (i) => `during ${i}`, 100, 50)).toBe('53100');
          // Reads go on, with what the database holds (journaled rows it cannot take yet arrive once space is freed).
          const during = (await s.client.query("SELECT count(*)::INT AS n FROM _cot_steps WHERE session_id = 'disk'")).rows[0].n;
          expect(during).toBeGreaterThanOrEqual(5);
          expect(during).toBeLessThanOrEqual(acknowledged.length);
          unlinkSync(filler);
          // It recovers by itself once space is freed.
          expect(await appendUntilAcknowledged(append)).toBe(true);
          expect((await s.client.query("SELECT content FROM _cot_steps WHERE session_id = 'disk' ORDER BY step_index")).rows.map((r) => r.content)).toEqual(
            acknowledged,
          );
          expect((await s.client.query("SELECT valid FROM cot_verify('disk')")).rows).toEqual([{ valid: true }]);
        } finally {
          rmSync(filler, { force: true });
          await s.stop();
        }
      } finally {
        execFileSync('umount', [dir]);
      }
    },
  );

  it.skipIf(why !== null)(
    `with the row store on, stays up when the store's write meets the full disk, and its replays lose nothing${why === null ? '' : ` (skipped: ${why})`}`,
    async () => {
      const dir = join(root, 'small-store');
      mkdirSync(dir);
      execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=64m', 'tmpfs', dir]);
      const filler = join(dir, 'filler');
      const db = join(dir, 'store.duckdb');
      // Its own process, as users run it: a rejection nothing handles would end it.
      const serve = () => spawnServer(['--db', db]);
      let server = await serve();
      const connect = async (port: number): Promise<pg.Client> => {
        const c = new pg.Client({ host: '127.0.0.1', port, user: 'cotwire', database: 'cotwire' });
        await c.connect();
        return c;
      };
      let client = await connect(server.port);
      try {
        const acknowledged: string[] = [];
        const append = diskAppends(client, acknowledged);
        const replayed = async (): Promise<string[]> => (await client.query("SELECT content FROM cot_replay('disk')")).rows.map((r) => r.content as string);
        for (let i = 0; i < 5; i++) expect(await append(`before ${i} ${'x'.repeat(2000)}`)).toBeNull();
        fillDisk(filler);
        // Appends go on from the preallocated journal while the store's writes (every 5 ms) fail, until the database's own write fails.
        expect(await appendUntilRefused(append, (i) => `during ${i} ${'x'.repeat(2000)}`, 200, 20)).toBe('53100');
        expect(server.out()).toContain('writing the row store of _cot_steps failed');
        expect(server.child.exitCode).toBeNull();
        expect((await client.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
        unlinkSync(filler);
        expect(await appendUntilAcknowledged(append)).toBe(true);
        expect(server.child.exitCode).toBeNull();
        expect(await replayed()).toEqual(acknowledged);
        expect((await client.query("SELECT valid FROM cot_verify('disk')")).rows).toEqual([{ valid: true }]);
        // Stopped and started again: the store is rebuilt or filled from the ledger, and replays every acknowledged step.
        await client.end();
        const exited = new Promise<number | null>((resolve) => server.child.once('exit', (code) => resolve(code)));
        server.child.kill('SIGTERM');
        expect(await exited).toBe(0);
        server = await serve();
        client = await connect(server.port);
        expect(await replayed()).toEqual(acknowledged);
      } finally {
        rmSync(filler, { force: true });
        await client.end().catch(() => undefined);
        if (server.child.exitCode === null) {
          const exited = new Promise<void>((resolve) => server.child.once('exit', () => resolve()));
          server.child.kill('SIGTERM');
          await exited;
        }
        execFileSync('umount', [dir]);
      }
    },
  );
});

describe('signals under load', () => {
  it('loses nothing acknowledged through SIGSTOP, SIGCONT and SIGTERM', async () => {
    const db = join(root, 'signals.duckdb');
    const { child, port } = await spawnServer(['--db', db]);
    const load = appendUnderLoad(port, 6, (w) => `sig-${w % 2}`);
    const { acknowledged } = load;
    await new Promise((r) => setTimeout(r, 700));
    child.kill('SIGSTOP');
    await new Promise((r) => setTimeout(r, 700));
    child.kill('SIGCONT');
    await new Promise((r) => setTimeout(r, 700));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    await load.stop();
    expect(acknowledged.length).toBeGreaterThan(20);
    const s = await start(db);
    try {
      const stored = new Set(await contents(s.client));
      expect(acknowledged.filter((a) => !stored.has(a))).toEqual([]);
      expect((await s.client.query('SELECT count(*)::INT AS n FROM cot_verify_all() WHERE NOT valid')).rows[0].n).toBe(0);
      expect((await s.running.auditor.audit()).findings).toEqual([]);
    } finally {
      await s.stop();
    }
  });
});
