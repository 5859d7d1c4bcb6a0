import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { offline, start } from '../fixtures/stoppable.js';

/**
 * Ledgers dropped or reshaped behind the server (through a hole in the
 * guard while it runs, or in the file between two starts): the server keeps
 * serving, the damaged ledger fails closed, and the audit says so.
 */
const root = mkdtempSync(join(tmpdir(), 'cotwire-damage-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** How a query failed: its SQLSTATE and message. */
async function sqlstate(p: Promise<unknown>): Promise<{ code?: string; message?: string } | 'succeeded'> {
  return p.then(
    () => 'succeeded' as const,
    (e: { code?: string; message?: string }) => ({ code: e.code, message: e.message }),
  );
}

const step = (c: pg.Client, session: string): Promise<pg.QueryResult> =>
  c.query("INSERT INTO _cot_steps (session_id, step_type, content) VALUES ($1, 'Reasoning', 'x')", [session]);

async function withLedgers(db: string): Promise<void> {
  const s = await start(db);
  try {
    const c = await s.connect();
    await c.query('CREATE TABLE _cot_tools (session_id VARCHAR, tool VARCHAR)');
    await c.query('CREATE TABLE _cot_notes (session_id VARCHAR, note VARCHAR)');
    await c.query("INSERT INTO _cot_tools (session_id, tool) VALUES ('a', 'search'), ('a', 'fetch')");
    await c.query("INSERT INTO _cot_notes (session_id, note) VALUES ('a', 'one')");
    await step(c, 'a');
  } finally {
    await s.stop();
  }
  // The server records the ledgers' shapes beside the file.
  expect(JSON.parse(readFileSync(`${db}.ledgers`, 'utf8')).ledgers.map((l: { name: string }) => l.name)).toEqual(
    expect.arrayContaining(['_cot_steps', '_cot_tools', '_cot_notes', '_cot_checkpoints', '_cot_security_events']),
  );
}

describe('a ledger changed in the file between two starts', () => {
  it('starts, serves the other ledgers, refuses appends to the damaged ones, and reports them', async () => {
    const db = join(root, 'offline.duckdb');
    await withLedgers(db);
    await offline(db, 'DROP TABLE _cot_tools', 'ALTER TABLE _cot_notes ADD COLUMN extra INTEGER');
    const s = await start(db);
    try {
      const c = await s.connect();
      expect((await c.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
      await step(c, 'b');
      expect((await c.query("SELECT valid FROM cot_verify('b')")).rows).toEqual([{ valid: true }]);
      const dropped = await sqlstate(c.query("INSERT INTO _cot_tools (session_id, tool) VALUES ('b', 'x')"));
      expect(dropped).toMatchObject({
        code: 'XX001',
        message: expect.stringMatching(/ledger "main\._cot_tools" is damaged: it was dropped behind the server/),
      });
      const altered = await sqlstate(c.query("INSERT INTO _cot_notes (session_id, note) VALUES ('b', 'x')"));
      expect(altered).toMatchObject({ code: 'XX001', message: expect.stringMatching(/_cot_notes" is damaged: .*column "extra" INTEGER was added/) });
      // Reading what is left still works; verifying it says why it cannot.
      expect((await c.query('SELECT note FROM _cot_notes')).rows).toEqual([{ note: 'one' }]);
      expect(await sqlstate(c.query("SELECT * FROM cot_verify_notes('a')"))).toMatchObject({
        message: expect.stringMatching(/ledger "main\._cot_notes" is damaged: .*column "extra" INTEGER was added.*cot_audit\(\)/),
      });
      const report = await s.running.auditor.audit();
      expect(report.findings.filter((f) => f.kind.startsWith('ledger_')).map((f) => [f.kind, f.ledger])).toEqual(
        expect.arrayContaining([
          ['ledger_missing', 'main._cot_tools'],
          ['ledger_changed', 'main._cot_notes'],
        ]),
      );
      // The dropped ledger's rows are gone from the log's point of view too.
      expect(report.findings.some((f) => f.kind === 'missing' && f.rows >= 2)).toBe(true);
      const listed = await c.query("SELECT kind, ledger FROM cot_audit() WHERE kind LIKE 'ledger_%' ORDER BY ledger");
      expect(listed.rows).toEqual([
        { kind: 'ledger_changed', ledger: 'main._cot_notes' },
        { kind: 'ledger_missing', ledger: 'main._cot_tools' },
      ]);
      expect(s.log()).toMatch(/ledger main\._cot_tools is damaged: it was dropped behind the server/);
    } finally {
      await s.stop();
    }
  });

  it('takes a ledger dropped behind it and created again through it as new: its old chains are not held against it', async () => {
    const db = join(root, 'recreated.duckdb');
    await withLedgers(db);
    await offline(db, 'DROP TABLE _cot_tools');
    const s = await start(db);
    try {
      const c = await s.connect();
      await c.query('CREATE TABLE _cot_tools (session_id VARCHAR, tool VARCHAR)');
      await c.query("INSERT INTO _cot_tools (session_id, tool) VALUES ('a', 'again')");
      expect((await c.query("SELECT step_index, tool FROM _cot_tools WHERE session_id = 'a'")).rows).toEqual([{ step_index: 0, tool: 'again' }]);
    } finally {
      await s.stop();
    }
  });

  it('does not recreate a dropped steps ledger empty: it stays missing and fails closed', async () => {
    const db = join(root, 'steps-dropped.duckdb');
    await withLedgers(db);
    await offline(db, 'DROP TABLE _cot_steps');
    const s = await start(db);
    try {
      const c = await s.connect();
      expect(await sqlstate(step(c, 'c'))).toMatchObject({ code: 'XX001' });
      await c.query("INSERT INTO _cot_notes (session_id, note) VALUES ('c', 'still here')");
      expect((await c.query("SELECT count(*)::INT AS n FROM _cot_notes WHERE session_id = 'c'")).rows).toEqual([{ n: 1 }]);
    } finally {
      await s.stop();
    }
  });
});

describe('a ledger changed behind the running server', () => {
  it('keeps every connection working when a ledger is dropped, and the damaged one fails closed', async () => {
    const db = join(root, 'online-drop.duckdb');
    await withLedgers(db);
    const s = await start(db);
    try {
      const before = await s.connect();
      const bypass = await s.running.engine.connect();
      await bypass.run('DROP TABLE _cot_tools');
      bypass.close();
      // A new connection of any role still opens.
      const after = await s.connect();
      await step(after, 'd');
      await step(before, 'd');
      // Once an audit has looked (the start-up one may have ended before the drop), the dropped ledger fails closed.
      const report = await s.running.auditor.audit();
      expect(report.findings.map((f) => f.kind)).toContain('ledger_missing');
      expect(await sqlstate(after.query("INSERT INTO _cot_tools (session_id, tool) VALUES ('d', 'x')"))).toMatchObject({ code: 'XX001' });
      expect((await after.query("SELECT valid FROM cot_verify('d')")).rows).toEqual([{ valid: true }]);
    } finally {
      await s.stop();
    }
  });

  it('sets aside rows acknowledged into a ledger altered behind it, and every other statement keeps working', async () => {
    const db = join(root, 'online-alter.duckdb');
    await withLedgers(db);
    const s = await start(db);
    try {
      // The start-up audit ends first: one still reading the catalog would find the change before the step below.
      await s.running.auditor.audit();
      const c = await s.connect();
      const other = await s.connect();
      const bypass = await s.running.engine.connect();
      await bypass.run('ALTER TABLE _cot_steps ADD COLUMN extra INTEGER');
      bypass.close();
      // Acknowledged from the journal before the engine refuses it.
      await step(c, 'e');
      // Applying fails, the ledger is found changed, and its row goes to the quarantine.
      await s.running.writer.visible();
      expect((await other.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
      expect((await other.query('SELECT count(*)::INT AS n FROM _cot_notes')).rows).toEqual([{ n: 1 }]);
      await other.query("INSERT INTO _cot_notes (session_id, note) VALUES ('e', 'fine')");
      expect(await sqlstate(step(c, 'e'))).toMatchObject({ code: 'XX001', message: expect.stringMatching(/column "extra" INTEGER was added/) });
      const quarantine = readFileSync(`${db}.quarantine`, 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l));
      expect(quarantine).toHaveLength(1);
      expect(quarantine[0]).toMatchObject({ schema: 'main', name: '_cot_steps' });
      expect(quarantine[0].rows).toHaveLength(1);
      const report = await s.running.auditor.audit();
      expect(report.findings.map((f) => f.kind)).toEqual(expect.arrayContaining(['ledger_changed', 'missing']));
      expect(s.log()).toMatch(/acknowledged rows of main\._cot_steps cannot be applied/);
    } finally {
      await s.stop();
    }
    expect(existsSync(`${db}.journal`)).toBe(false);
  });
});
