import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Config } from '../../src/config/schema.js';
import { buildReceipt } from '../../src/engines/duckdb/log/receipt.js';
import { Journal } from '../../src/engines/duckdb/ledger/journal.js';
import { writeKeyFile } from '../../src/ledger/log/signing-key.js';
import { makeScramVerifier } from '../../src/session/scram.js';
import { sqlstate } from '../fixtures/errors.js';
import { until } from '../fixtures/poll.js';
import { offline } from '../fixtures/stoppable.js';
import { serveSigned, type SignedServer } from '../fixtures/signed-server.js';

/**
 * Redaction of one field of one step (cotwire/v2): the value is replaced by
 * a marker, its digest is recorded in a chained ledger, and the row, its
 * chain, the global log and receipts all still verify; the value's bytes
 * leave the journal and the WAL at once and the database file at the stop.
 */
const CLI = join(import.meta.dirname, '../../dist/cli.js');
const root = mkdtempSync(join(tmpdir(), 'cotwire-redact-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const keyFile = join(root, 'signing.key');
let verifierKey = '';
beforeAll(() => {
  verifierKey = writeKeyFile(keyFile, 'audit.example/redaction');
});

const password = makeScramVerifier('pw');
const users = [
  { name: 'bi', password, role: 'reader', agentId: null, orgId: null },
  { name: 'agent', password, role: 'writer', agentId: null, orgId: null },
  { name: 'dpo', password, role: 'admin', agentId: null, orgId: null },
];

type Server = SignedServer;
// The v2 redaction (an unsalted digest stands in for the value); v3's commitments: redaction-v3.test.ts.
const serve = (db: string): Promise<Server> => serveSigned(db, keyFile, users as Config['users'], 0, { hashVersion: 'cotwire/v2' });

/** The files beside the database that hold `planted`, by name. */
function holding(dir: string, planted: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => join(e.parentPath, e.name))
    .filter((f) => readFileSync(f).includes(Buffer.from(planted)))
    .map((f) => f.slice(dir.length + 1));
}

const STEP = "INSERT INTO _cot_steps (session_id, step_type, content, metadata) VALUES ($1, 'Reasoning', $2, $3) RETURNING trace_id::text AS t";

describe('redaction', () => {
  const dir = join(root, 'main');
  const db = join(dir, 'ledger.duckdb');
  const planted = `card 4111-1111-${Date.now()}-PLANTED`;
  let server: Server;
  let admin: pg.Client;
  let agent: pg.Client;
  let reader: pg.Client;
  const traces: string[] = [];

  beforeAll(async () => {
    server = await serve(db);
    [admin, agent, reader] = await Promise.all([server.as('dpo'), server.as('agent'), server.as('bi')]);
    for (let i = 0; i < 5; i++) {
      const content = i === 2 ? `the customer's ${planted}` : `thought ${i}`;
      traces.push((await agent.query(STEP, ['s', content, JSON.stringify({ i })])).rows[0].t);
      traces.push((await agent.query(STEP, ['other', `other ${i}`, null])).rows[0].t);
    }
    await server.running.writer.visible();
  });
  afterAll(async () => {
    await server?.stop().catch(() => undefined);
  });

  it('refuses readers and writers, and records every attempt', async () => {
    const call = (c: pg.Client) => c.query('SELECT cot_redact($1, $2, $3)', [traces[4], 'content', 'GDPR erasure request #17']);
    expect(await sqlstate(call(reader))).toBe('42501');
    expect(await sqlstate(call(agent))).toBe('42501');
    // A client cannot forge or remove a redaction record.
    expect(await sqlstate(admin.query("INSERT INTO _cot_redactions (ledger, column_name) VALUES ('main._cot_steps', 'content')"))).toBe('42501');
    expect(await sqlstate(admin.query('DELETE FROM _cot_redactions'))).toBe('42501');
    await server.running.securityLog.flushed();
    const events = await admin.query("SELECT user_name, operation, sqlstate FROM _cot_security_events WHERE operation LIKE 'REDACT%' ORDER BY ledger_seq");
    expect(events.rows).toEqual([
      { user_name: 'bi', operation: `REDACT main._cot_steps ${traces[4]}`, sqlstate: '42501' },
      { user_name: 'agent', operation: `REDACT main._cot_steps ${traces[4]}`, sqlstate: '42501' },
    ]);
  });

  it('answers each wrong call with its SQLSTATE, and changes nothing', async () => {
    const redact = (args: unknown[]) => sqlstate(admin.query('SELECT cot_redact($1, $2, $3)', args));
    expect(await redact([traces[4], 'no_such_column', 'r'])).toBe('42703');
    expect(await redact([traces[4], 'current_hash', 'r'])).toBe('0A000');
    expect(await redact([traces[4], 'session_id', 'r'])).toBe('0A000');
    expect(await redact(['00000000-0000-4000-8000-000000000000', 'content', 'r'])).toBe('P0002');
    expect(await redact(['not-a-uuid', 'content', 'r'])).toBe('22P02');
    expect(await redact([traces[4], 'content', '  '])).toBe('22023');
    expect(await redact([traces[4], 'model', 'r'])).toBe('22023');
    expect(await sqlstate(admin.query("SELECT cot_redact('x', 'content', 'r'), 1"))).toBe('0A000');
    expect(await sqlstate(admin.query("SELECT upper(cot_redact('x', 'content', 'r'))"))).toBe('0A000');
    await admin.query('BEGIN');
    expect(await sqlstate(admin.query('SELECT cot_redact($1, $2, $3)', [traces[4], 'content', 'r']))).toBe('25001');
    await admin.query('ROLLBACK');
    expect((await admin.query('SELECT count(*)::int AS n FROM _cot_redactions')).rows).toEqual([{ n: 0 }]);
  });

  it('redacts content in the middle of a chain; the chain, the log and receipts still verify', async () => {
    const target = traces[4] as string;
    // Positive control: the value is somewhere in the files before.
    expect(holding(dir, planted).length).toBeGreaterThan(0);
    await server.running.checkpoints.issue();
    await server.running.writer.visible();
    const conn = await server.running.engine.connect();
    try {
      const receipt = await buildReceipt(conn, await server.running.ledgers.all(), target, server.running.merkle);
      writeFileSync(join(root, 'before.json'), JSON.stringify(receipt));
    } finally {
      conn.close();
    }

    const result = await admin.query('SELECT * FROM cot_redact($1, $2, $3)', [target, 'content', 'GDPR erasure request #17']);
    expect(result.rows).toEqual([
      expect.objectContaining({
        ledger: 'main._cot_steps',
        chain_key: 's',
        step_index: '2',
        trace_id: target,
        column_name: 'content',
        reason: 'GDPR erasure request #17',
        redacted_by: 'dpo (admin)',
        applied: 'true',
      }),
    ]);
    const record = result.rows[0];
    expect(record.value_digest).toMatch(/^[0-9a-f]{64}$/);
    // Asked again, it answers with the same record and adds none.
    expect((await admin.query('SELECT cot_redact($1, $2, $3) AS id', [target, 'content', 'again'])).rows).toEqual([{ id: record.redaction_id }]);

    const replay = await reader.query("SELECT step_index, content FROM cot_replay('s') ORDER BY step_index");
    expect(replay.rows.map((r) => r.content)).toEqual(['thought 0', 'thought 1', '[redacted]', 'thought 3', 'thought 4']);
    expect((await reader.query("SELECT valid, step_count FROM cot_verify('s')")).rows).toEqual([{ valid: true, step_count: '5' }]);
    expect((await reader.query('SELECT count(*)::int AS n FROM cot_verify_all() WHERE NOT valid')).rows).toEqual([{ n: 0 }]);
    expect((await reader.query('SELECT valid FROM cot_verify_redactions_all()')).rows).toEqual([{ valid: true }]);
    // The record is chained, in the global log, and covered by the next checkpoint.
    const issued = await server.running.checkpoints.issue();
    expect(issued?.size).toBeGreaterThanOrEqual(Number(record.record_seq));
    const audit = await server.running.auditor.audit();
    expect(audit.findings).toEqual([]);
    // Every attempt by the admin is in the security ledger too.
    await server.running.securityLog.flushed();
    expect(
      (await admin.query("SELECT sqlstate, reason FROM _cot_security_events WHERE user_name = 'dpo' AND operation LIKE 'REDACT%' AND sqlstate = '00000'")).rows,
    ).toEqual([
      { sqlstate: '00000', reason: 'redacted' },
      { sqlstate: '00000', reason: 'already redacted' },
    ]);

    // The value is gone from the journal and the WAL at once...
    const journal = Journal.pathFor(db);
    expect(existsSync(journal) ? readFileSync(journal).includes(Buffer.from(planted)) : false).toBe(false);
    expect(existsSync(`${db}.wal`) ? readFileSync(`${db}.wal`).includes(Buffer.from(planted)) : false).toBe(false);

    // ... and from every file once the server stops and rewrites the database file.
    await server.stop();
    expect(holding(dir, planted)).toEqual([]);
    expect(existsSync(`${db}.erased`)).toBe(false);

    const verified = spawnSync(process.execPath, [CLI, 'verify', '--db', db, '--json'], { encoding: 'utf8' });
    expect(verified.status, verified.stdout + verified.stderr).toBe(0);
    // A receipt issued before the redaction still checks; one issued after stands the digest in for the value.
    const check = (file: string) => spawnSync(process.execPath, [CLI, 'check-receipt', file, '--key', verifierKey], { encoding: 'utf8' });
    expect(check(join(root, 'before.json')).status).toBe(0);
    const after = spawnSync(process.execPath, [CLI, 'prove', '--db', db, '--trace', target, '--out', join(root, 'after.json')], { encoding: 'utf8' });
    expect(after.status, after.stderr).toBe(0);
    const receipt = JSON.parse(readFileSync(join(root, 'after.json'), 'utf8')) as { redacted: Record<string, string> };
    expect(receipt.redacted).toEqual({ content: record.value_digest });
    expect(check(join(root, 'after.json')).status).toBe(0);
    const python = spawnSync('python3', [join(import.meta.dirname, '../../tools/check_receipt.py'), join(root, 'after.json'), verifierKey], {
      encoding: 'utf8',
    });
    expect(python.stdout).toMatch(/^OK leaf/);

    // An export of the database holds no trace of it either.
    const exported = join(root, 'export.jsonl');
    const ex = spawnSync(process.execPath, [CLI, 'export', '--db', db, '--format', 'jsonl', '--out', exported], { encoding: 'utf8' });
    expect(ex.status, ex.stderr).toBe(0);
    expect(readFileSync(exported, 'utf8')).toContain('[redacted]');
    expect(readFileSync(exported).includes(Buffer.from(planted))).toBe(false);
    expect(statSync(db).size).toBeGreaterThan(0);
  });

  it('still finds a redacted value replaced behind the server', async () => {
    const target = traces[4] as string;
    await offline(db, `UPDATE _cot_steps SET content = 'a different thought' WHERE trace_id = '${target}'`);
    const edited = spawnSync(process.execPath, [CLI, 'verify', '--db', db, '--json'], { encoding: 'utf8' });
    expect(edited.status).toBe(1);
    expect(JSON.parse(edited.stdout).broken).toEqual([expect.objectContaining({ chainKey: 's', firstBrokenIndex: 2, breakKind: 'edited' })]);
  });
});

describe('a redaction cut short after the engine replaced the value', () => {
  it('has already marked the database file for its rewrite, so that a crash there leaves no copy of the value behind', async () => {
    const dir = join(root, 'interrupted');
    const db = join(dir, 'ledger.duckdb');
    const planted = `iban DE89-${Date.now()}-PLANTED`;
    const s = await serve(db);
    const writer = s.running.writer;
    const scrub = writer.scrubJournal.bind(writer);
    let release: () => void = () => undefined;
    const held = new Promise<void>((r) => (release = r));
    try {
      const [admin, agent] = await Promise.all([s.as('dpo'), s.as('agent')]);
      const target = (await agent.query(STEP, ['cut', `the customer's ${planted}`, null])).rows[0].t as string;
      await writer.visible();
      // The steps after the engine's change are held here, where a kill -9 once left the file unmarked.
      writer.scrubJournal = async () => {
        await held;
        await scrub();
      };
      const redacting = admin.query('SELECT cot_redact($1, $2, $3)', [target, 'content', 'interrupted']);
      // Awaited below; if the test fails before, the stop ends it and nobody else waits for it.
      redacting.catch(() => undefined);
      const conn = await s.running.engine.connect();
      try {
        await until('the engine holds the marker', async () => {
          const rows = (await conn.query("SELECT content FROM _cot_steps WHERE session_id = 'cut'")) as unknown[][];
          return rows[0]?.[0] === '[redacted]';
        });
      } finally {
        conn.close();
      }
      expect(existsSync(`${db}.erased`)).toBe(true);
      release();
      await redacting;
    } finally {
      release();
      writer.scrubJournal = scrub;
      await s.stop();
    }
    expect(holding(dir, planted)).toEqual([]);
  });
});
