import { execFileSync } from 'node:child_process';
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
import { crashBeforeApply } from '../fixtures/crash.js';
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

async function start(db: string): Promise<Started> {
  const config = loadConfig({ argv: { port: '0', db, 'log-level': 'info' }, env: {} });
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
      expect(s.log()).toMatch(/ends with a damaged record: the record at offset \d+ claims \d+ bytes, but the file ends/);
      const report = await s.running.auditor.audit();
      expect(report.findings.filter((f) => f.kind === 'missing').reduce((n, f) => n + f.rows, 0)).toBe(3);
      // It goes on serving and appending.
      await s.client.query("INSERT INTO _cot_steps (session_id, step_type, content) VALUES ('s', 'Summary', 'after')");
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

  it('applies the records after a bit-flipped one, and names the acknowledged rows that are lost', async () => {
    const { db, journal, records } = await crashed('flipped');
    const file = readFileSync(journal);
    const at = (records[0]?.at ?? 0) + 60;
    file[at] = (file[at] as number) ^ 0x20;
    writeFileSync(journal, file);
    const s = await start(db);
    try {
      // The first record (thoughts 2 and 3) is lost; the second, written after it, is applied.
      expect(await contents(s.client)).toEqual(['thought 0', 'thought 1', 'thought 4', 'thought 5', 'untouched']);
      expect(s.log()).toMatch(
        /"level":50.*the ledger journal .* is damaged: the record at offset 0 .* does not match its SHA-256.*2 acknowledged appends between ledger_seq 0 and 5/,
      );
      const report = await s.running.auditor.audit();
      expect(report.findings.filter((f) => f.kind === 'missing').reduce((n, f) => n + f.rows, 0)).toBe(2);
    } finally {
      await s.stop();
    }
  });
});

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
        const s = await start(db);
        const filler = join(dir, 'filler');
        try {
          const acknowledged: string[] = [];
          const append = async (content: string): Promise<string | null> => {
            try {
              await s.client.query("INSERT INTO _cot_steps (session_id, step_type, content) VALUES ('disk', 'Observation', $1)", [content]);
              acknowledged.push(content);
              return null;
            } catch (err) {
              return (err as { code?: string }).code ?? 'no code';
            }
          };
          for (let i = 0; i < 5; i++) expect(await append(`before ${i}`)).toBeNull();
          await s.running.writer.visible();
          // Fill the disk.
          const fd = openSync(filler, 'w');
          try {
            for (const chunk = Buffer.alloc(1 << 20, 1); ; ) writeSync(fd, chunk);
          } catch (err) {
            expect((err as NodeJS.ErrnoException).code).toBe('ENOSPC');
          } finally {
            closeSync(fd);
          }
          // Appends may still be acknowledged from the preallocated journal until the database's own write fails; then 53100.
          let refused: string | null = null;
          for (let i = 0; i < 100 && refused === null; i++) {
            refused = await append(`during ${i}`);
            if (refused === null) await new Promise((r) => setTimeout(r, 50));
          }
          expect(refused).toBe('53100');
          // Reads go on, with what the database holds (journaled rows it cannot take yet arrive once space is freed).
          const during = (await s.client.query("SELECT count(*)::INT AS n FROM _cot_steps WHERE session_id = 'disk'")).rows[0].n;
          expect(during).toBeGreaterThanOrEqual(5);
          expect(during).toBeLessThanOrEqual(acknowledged.length);
          unlinkSync(filler);
          // It recovers by itself once space is freed.
          let recovered = false;
          for (let i = 0; i < 100 && !recovered; i++) {
            recovered = (await append(`after ${i}`)) === null;
            if (!recovered) await new Promise((r) => setTimeout(r, 100));
          }
          expect(recovered).toBe(true);
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
