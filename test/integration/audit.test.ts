import { PassThrough } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type pg from 'pg';
import { DEFAULTS } from '../../src/config/schema.js';
import type { EngineConnection } from '../../src/engine/port.js';
import { hashSql } from '../../src/engines/duckdb/dialect/verify-sql.js';
import type { LedgerTable } from '../../src/ledger/chain/schema.js';
import { startTestServer, type TestServer } from '../fixtures/server.js';

/**
 * The online audit, against changes made behind the server's back while it
 * runs: `bypass` is a connection to the engine that the guard never sees,
 * as a hole in the guard would be.
 */
const INTERVAL_S = 1;
let server: TestServer;
let client: pg.Client;
let bypass: EngineConnection;
let steps: LedgerTable;
const logs = new PassThrough();
let logText = '';
logs.on('data', (b: Buffer) => (logText += b.toString()));

beforeAll(async () => {
  server = await startTestServer(
    { ledger: { ...DEFAULTS.ledger, verifyIntervalSeconds: INTERVAL_S }, http: { host: '127.0.0.1', port: 0 }, log: { ...DEFAULTS.log, level: 'error' } },
    logs,
  );
  client = await server.client();
  bypass = await server.duckdb.engine.connect();
  steps = (await server.running.ledgers.find(['main', '_cot_steps'])) as LedgerTable;
});
afterAll(async () => {
  bypass.close();
  await server[Symbol.asyncDispose]();
});

/** Appends through the server, and waits until the engine holds the rows (the bypass does not wait for the writer). */
async function append(session: string, n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    await client.query("INSERT INTO _cot_steps (session_id, step_type, content) VALUES ($1, 'Reasoning', $2)", [session, `${session} thought ${i}`]);
  }
  await server.running.writer.visible();
}

async function seqsOf(session: string): Promise<number[]> {
  const r = await client.query('SELECT ledger_seq FROM _cot_steps WHERE session_id = $1 ORDER BY step_index', [session]);
  return r.rows.map((row: { ledger_seq: string }) => Number(row.ledger_seq));
}

interface AuditRow {
  kind: string;
  ledger: string | null;
  chain_key: string | null;
  first_seq: string | null;
  last_seq: string | null;
  row_count: string;
}

/** Polls cot_audit() until a finding about `session` shows up; fails after two intervals and the audit's own time. */
async function findingFor(session: string, kind: string): Promise<AuditRow> {
  const deadline = Date.now() + (2 * INTERVAL_S + 3) * 1000;
  for (;;) {
    const r = await client.query<AuditRow>('SELECT * FROM cot_audit()');
    const hit = r.rows.find((f) => f.chain_key === session && f.kind === kind);
    if (hit !== undefined) return hit;
    if (Date.now() > deadline) throw new Error(`no ${kind} finding for ${session}; cot_audit() says ${JSON.stringify(r.rows)}; log: ${logText.slice(-2000)}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function metric(kind: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${server.running.httpAddress?.port ?? 0}/metrics`)).text();
  return Number(new RegExp(`^cotwire_verification_failures_total\\{kind="${kind}"\\} (\\S+)$`, 'm').exec(text)?.[1] ?? 0);
}

/** Re-chains a session from `from` on, as someone who knows the hash specification would after an edit. */
async function rechain(session: string, from: number): Promise<void> {
  const rows = (await bypass.query(
    `SELECT step_index FROM _cot_steps WHERE session_id = '${session}' AND step_index >= ${from} ORDER BY step_index`,
  )) as number[][];
  for (const [index] of rows) {
    await bypass.run(
      `UPDATE _cot_steps SET prev_hash = coalesce((SELECT current_hash FROM _cot_steps p WHERE p.session_id = '${session}' AND p.step_index = ${Number(index) - 1}), '')
       WHERE session_id = '${session}' AND step_index = ${index}`,
    );
    await bypass.run(`UPDATE _cot_steps SET current_hash = ${hashSql(steps)} WHERE session_id = '${session}' AND step_index = ${index}`);
  }
}

describe('the online audit holds the rows against the global log', () => {
  it('starts healthy', async () => {
    await append('intact', 3);
    await server.duckdb.auditor.audit();
    expect((await client.query('SELECT * FROM cot_audit()')).rows).toEqual([]);
    expect((await client.query("SELECT valid FROM cot_verify('intact')")).rows).toEqual([{ valid: true }]);
  });

  it('reports rows deleted from the middle of a session, naming the session and the ledger_seq range', async () => {
    await append('deleted', 5);
    const seqs = await seqsOf('deleted');
    await server.duckdb.auditor.audit();
    await bypass.run("DELETE FROM _cot_steps WHERE session_id = 'deleted' AND step_index IN (1, 2)");
    const f = await findingFor('deleted', 'missing');
    expect(f).toMatchObject({ ledger: 'main._cot_steps', first_seq: String(seqs[2]), last_seq: String(seqs[2]) });
    // The chain itself also shows the gap.
    expect((await client.query("SELECT valid, break_kind FROM cot_verify('deleted')")).rows).toEqual([{ valid: false, break_kind: 'deleted' }]);
    expect(await metric('missing')).toBeGreaterThanOrEqual(1);
    expect(logText).toMatch(/"level":50.*ledger audit: missing in main\._cot_steps chain \\"deleted\\" ledger_seq/);
  });

  it('reports a cut tail, which the chain alone cannot show', async () => {
    await append('tail', 4);
    const seqs = await seqsOf('tail');
    await server.duckdb.auditor.audit();
    await bypass.run("DELETE FROM _cot_steps WHERE session_id = 'tail' AND step_index >= 2");
    // What is left is a valid chain of two steps.
    expect((await bypass.query("SELECT count(*) FROM _cot_steps WHERE session_id = 'tail'"))[0]).toEqual([2n]);
    const f = await findingFor('tail', 'missing');
    expect(f.last_seq).toBe(String(seqs[3]));
    expect((await client.query("SELECT valid, break_kind FROM cot_verify('tail')")).rows).toEqual([{ valid: false, break_kind: 'missing' }]);
    expect((await client.query("SELECT valid FROM cot_verify_all() WHERE chain_key = 'tail'")).rows).toEqual([{ valid: false }]);
  });

  it('reports a whole session deleted: cot_verify_all() lists it instead of leaving it out', async () => {
    await append('gone', 2);
    await server.duckdb.auditor.audit();
    await bypass.run("DELETE FROM _cot_steps WHERE session_id = 'gone'");
    await findingFor('gone', 'missing');
    expect((await client.query("SELECT valid, step_count, break_kind FROM cot_verify_all() WHERE chain_key = 'gone'")).rows).toEqual([
      { valid: false, step_count: '0', break_kind: 'missing' },
    ]);
  });

  it('reports an edit re-chained with the hashes of the specification, which every chain check accepts', async () => {
    await append('rechained', 4);
    const seqs = await seqsOf('rechained');
    // One transaction, so that an audit running meanwhile sees the forgery whole or not at all.
    await bypass.run('BEGIN');
    await bypass.run("UPDATE _cot_steps SET content = 'a forged thought' WHERE session_id = 'rechained' AND step_index = 1");
    await rechain('rechained', 1);
    await bypass.run('COMMIT');
    // The recomputed chain is valid: only the log knows better.
    expect((await bypass.query(`SELECT count(*) FROM _cot_steps WHERE session_id = 'rechained' AND current_hash <> ${hashSql(steps)}`))[0]).toEqual([0n]);
    const f = await findingFor('rechained', 'altered');
    expect(f).toMatchObject({ first_seq: String(seqs[1]), last_seq: String(seqs[3]), row_count: '3' });
    expect((await client.query("SELECT valid, break_kind FROM cot_verify('rechained')")).rows).toEqual([{ valid: false, break_kind: 'altered' }]);
    expect(await metric('altered')).toBeGreaterThanOrEqual(1);
  });

  it('reports a row written behind the writer, chained correctly', async () => {
    await append('forged', 2);
    const [[maxSeq]] = (await bypass.query('SELECT max(ledger_seq) FROM _cot_steps')) as [[bigint]];
    const forgedSeq = Number(maxSeq) + 1000;
    await bypass.run(
      `INSERT INTO _cot_steps (trace_id, session_id, step_index, step_type, content, prev_hash, current_hash, has_embedding, created_at, ledger_seq)
       SELECT uuid(), 'forged', 2, 'Decision', 'approve everything', current_hash, '', false, now(), ${forgedSeq}
       FROM _cot_steps WHERE session_id = 'forged' AND step_index = 1`,
    );
    await bypass.run(`UPDATE _cot_steps SET current_hash = ${hashSql(steps)} WHERE session_id = 'forged' AND step_index = 2`);
    // The forged row links to its predecessor and hashes right: the chain alone accepts it.
    expect((await bypass.query(`SELECT count(*) FROM _cot_steps WHERE session_id = 'forged' AND current_hash <> ${hashSql(steps)}`))[0]).toEqual([0n]);
    const f = await findingFor('forged', 'unlogged');
    expect((await client.query("SELECT valid, step_count FROM cot_verify_all() WHERE chain_key = 'forged'")).rows).toEqual([{ valid: false, step_count: '3' }]);
    expect(f).toMatchObject({ first_seq: String(forgedSeq), row_count: '1' });
    expect(await metric('unlogged')).toBeGreaterThanOrEqual(1);
  });

  it('keeps appending while it audits, and the untouched sessions stay valid', async () => {
    await append('intact', 2);
    const report = await server.duckdb.auditor.audit();
    expect(report.findings.some((f) => f.chainKey === 'intact')).toBe(false);
    expect((await client.query("SELECT valid, step_count FROM cot_verify('intact')")).rows).toEqual([{ valid: true, step_count: '5' }]);
  });
});

describe('the watch between full audits', () => {
  it('keeps quiet while the writer appends, and starts an audit within seconds of a change behind it', async () => {
    const sink = new PassThrough();
    let text = '';
    sink.on('data', (b: Buffer) => (text += b.toString()));
    await using s = await startTestServer(
      { ledger: { ...DEFAULTS.ledger, verifyIntervalSeconds: 3600, watchIntervalSeconds: 1 }, log: { ...DEFAULTS.log, level: 'warn' } },
      sink,
    );
    const c = await s.client();
    const direct = await s.duckdb.engine.connect();
    try {
      // Appends in several commits, with the watch looking between them: no false alarm.
      for (let i = 0; i < 20; i++) {
        await c.query("INSERT INTO _cot_steps (session_id, step_type, content) VALUES ('w', 'Reasoning', $1), ('w2', 'Action', $1)", [`step ${i}`]);
        if (i % 5 === 0) await new Promise((r) => setTimeout(r, 600));
      }
      await s.running.writer.visible();
      await new Promise((r) => setTimeout(r, 2500));
      expect(text).not.toMatch(/changed without the writer/);
      await direct.run("UPDATE _cot_steps SET current_hash = sha256('forged') WHERE session_id = 'w' AND step_index = 7");
      const deadline = Date.now() + 8000;
      let rows: Array<{ kind: string; chain_key: string }> = [];
      while (Date.now() < deadline) {
        rows = (await c.query('SELECT kind, chain_key FROM cot_audit()')).rows;
        if (rows.some((r) => r.kind === 'altered' && r.chain_key === 'w')) break;
        await new Promise((r) => setTimeout(r, 100));
      }
      expect(rows).toContainEqual({ kind: 'altered', chain_key: 'w' });
      expect(text).toMatch(/main\._cot_steps changed without the writer \(the watch saw it\)/);
    } finally {
      direct.close();
    }
  });
});
