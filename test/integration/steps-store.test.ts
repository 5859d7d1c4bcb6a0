import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, truncateSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { open } from 'lmdb';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import type { Config } from '../../src/config/schema.js';
import { startServer, type RunningServer } from '../../src/engines/duckdb/start.js';
import { STEP_STORE_ENCODING, type StepStore } from '../../src/engines/duckdb/steps-store/store.js';
import { storedFrame } from '../../src/engines/duckdb/steps-store/stored-row.js';
import { dataRowCells, dataRowFrames } from '../../src/protocol/encode.js';
import { createLogger } from '../../src/log/logger.js';
import { sqlstate } from '../fixtures/errors.js';
import { spawnServer } from '../fixtures/server.js';
import { logLines } from '../fixtures/log-lines.js';
import { until } from '../fixtures/poll.js';
import { offline } from '../fixtures/stoppable.js';

/**
 * The row store of `_cot_steps` (steps-store/store.ts), beside the database
 * file: cold replays and step reads answered from it are the bytes the
 * engine answers; it is filled from the ledger at start, rebuilt when it
 * does not match the ledger or its files are gone, and a redaction or a
 * retention reaches it in the same operation. Verification never reads it.
 */

const root = mkdtempSync(join(tmpdir(), 'cotwire-steps-store-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** Every value as the server sent it, unparsed. */
const raw = { getTypeParser: () => (v: unknown) => v } as unknown as pg.CustomTypesConfig;

const FILLED = 'the row store of _cot_steps holds the ledger up to ledger_seq';
const MISMATCH = 'does not match the ledger';

interface Booted {
  readonly running: RunningServer;
  /** The server's row store (it is on for a file-backed database). */
  readonly store: StepStore;
  /** The server's JSON log lines, at info level. */
  readonly lines: string[];
  client(): Promise<pg.Client>;
  stop(): Promise<void>;
}

/** A server on the database file `db`, which the test keeps between starts. */
async function boot(db: string, ledger: Partial<Config['ledger']> = {}): Promise<Booted> {
  const base = loadConfig({ argv: { port: '0', 'http-port': '0', db, 'log-level': 'info' }, env: {} });
  const config = { ...base, ledger: { ...base.ledger, ...ledger } } as Config;
  const lines: string[] = [];
  const running = await startServer(config, createLogger('info', false, logLines(lines)));
  const clients: pg.Client[] = [];
  return {
    running,
    get store(): StepStore {
      if (running.stepStore === null) throw new Error('the server has no row store of _cot_steps');
      return running.stepStore;
    },
    lines,
    async client() {
      const c = new pg.Client({ host: '127.0.0.1', port: running.address.port, user: 'cotwire', database: 'cotwire', types: raw });
      c.on('error', () => undefined);
      await c.connect();
      clients.push(c);
      return c;
    },
    async stop() {
      await Promise.all(clients.map((c) => c.end().catch(() => undefined)));
      await running.close();
    },
  };
}

/** A fresh directory and the database file in it. */
function database(name: string): string {
  const dir = join(root, name);
  mkdirSync(dir);
  return join(dir, 'ledger.duckdb');
}

const logged = (s: Booted, fragment: string): boolean => s.lines.some((l) => l.includes(fragment));

const REPLAY = 'SELECT * FROM cot_replay($1)';
const TRACE = 'SELECT * FROM cot_trace($1)';
const POINT = 'SELECT * FROM _cot_steps WHERE trace_id = $1';
/** A session's rows read from the table, as an agent or an ORM writes it. */
const SESSION_READS = [
  'SELECT * FROM _cot_steps WHERE session_id = $1 ORDER BY step_index',
  'SELECT * FROM _cot_steps WHERE session_id = $1 ORDER BY ledger_seq ASC',
];

interface Answer {
  readonly rows: unknown[][];
  /** The row description: name, type, modifier, size and format of each column. */
  readonly fields: unknown[][];
}

async function ask(c: pg.Client, text: string, arg: string): Promise<Answer> {
  const r = await c.query({ text, values: [arg], rowMode: 'array' });
  return { rows: r.rows as unknown[][], fields: r.fields.map((f) => [f.name, f.dataTypeID, f.dataTypeModifier, f.dataTypeSize, f.format]) };
}

/** The same statement inside a transaction block, which the engine answers. */
async function askEngine(c: pg.Client, text: string, arg: string): Promise<Answer> {
  await c.query('BEGIN');
  try {
    return await ask(c, text, arg);
  } finally {
    await c.query('COMMIT');
  }
}

/** The statement outside a block (served when the store can) and inside one (the engine), which must agree. */
async function bothWays(c: pg.Client, text: string, arg: string): Promise<Answer> {
  const served = await ask(c, text, arg);
  const engine = await askEngine(c, text, arg);
  expect(served.rows, `${text} ${arg.slice(0, 40)}`).toEqual(engine.rows);
  expect(served.fields, `${text} ${arg.slice(0, 40)}`).toEqual(engine.fields);
  return served;
}

const STEP = 'INSERT INTO _cot_steps (session_id, step_type, content) VALUES ($1, $2, $3) RETURNING CAST(trace_id AS VARCHAR) AS t';

async function append(c: pg.Client, session: string, content: string | null, type = 'Reasoning'): Promise<string> {
  return String((await c.query(STEP, [session, type, content])).rows[0].t);
}

/** Steps with varied values (unicode, NULLs, JSON, confidence, a parent); their trace ids in step order. */
async function varied(c: pg.Client, session: string): Promise<string[]> {
  const root = await append(c, session, `root of ${session} ✓`, 'Observation');
  const values: unknown[][] = [
    [0.1, 3, 2 ** 40, 'model-a', '{"a": 1, "b": [1.0, 1e5, -0, "é\\n\\"q\\""], "c": {"z": null, "a": true}}', null, '{"k":"v"}', root],
    [1 / 3, null, 0, null, '[]', '"just a string"', null, null],
    [1e-7, 2147483647, -5, 'ünïcödé ✓ 🚀', '{"deep": {"er": {"est": [[[]]]}}}', '12.50', '{"b":1,"a":2}', null],
    [0, 0, null, '', 'null', 'true', '{}', root],
    [null, -1, 9007199254740991, 'tab\there\nnewline', '{"num": 123456789012345678901234567890}', '-0.0', '[1, 2, 3]', null],
  ];
  const ids = [root];
  for (const [i, v] of values.entries()) {
    const r = await c.query(
      `INSERT INTO _cot_steps (session_id, step_type, content, confidence, token_count, duration_ms, model, input_data, output_data, metadata, parent_trace_id)
       VALUES ($1, 'Reasoning', $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING CAST(trace_id AS VARCHAR) AS t`,
      [session, i === 1 ? null : `content ${i} 'quoted' \\ back ✓ 🚀`, ...v],
    );
    ids.push(String(r.rows[0].t));
  }
  return ids;
}

/** The files in `dir` whose bytes hold `planted`, by name. */
function holding(dir: string, planted: string): string[] {
  return readdirSync(dir, { withFileTypes: true })
    .filter((e) => e.isFile() && readFileSync(join(dir, e.name)).includes(Buffer.from(planted)))
    .map((e) => e.name);
}

describe('the row store of _cot_steps', () => {
  it('answers cold replays and step reads after a restart with the bytes and types the engine answers, in any time zone', async () => {
    const db = database('cold');
    const sessions = new Map<string, string[]>();
    const first = await boot(db);
    try {
      const c = await first.client();
      for (const session of ['alpha', 'beta ü ✓', `long ${'ü'.repeat(700)}`]) sessions.set(session, await varied(c, session));
      // A last step each, after the other sessions' steps: a session's rows are not one run of ledger_seq.
      for (const session of sessions.keys()) sessions.get(session)?.push(await append(c, session, `last of ${session}`));
    } finally {
      await first.stop();
    }

    // The session cache is off: whatever is not the engine's answer is the store's.
    const s = await boot(db, { sessionCacheMB: 0 });
    try {
      expect(s.running.sessionCache).toBeNull();
      await until('the row store to be ready', () => s.store.ready);
      const c = await s.client();
      const before = { ...s.store.stats };
      for (const zone of ['UTC', 'Asia/Kolkata']) {
        await c.query(`SET TimeZone = '${zone}'`);
        for (const [session, ids] of sessions) {
          const replay = await bothWays(c, REPLAY, session);
          expect(replay.rows).toHaveLength(ids.length);
          expect(replay.rows.map((r) => r[0])).toEqual(ids);
          const createdAt = replay.fields.findIndex((f) => f[0] === 'created_at');
          expect(String(replay.rows[0]?.[createdAt])).toMatch(zone === 'UTC' ? /\+00$/ : /\+05:30$/);
          for (const read of SESSION_READS) expect(await bothWays(c, read, session)).toEqual(replay);
          for (const id of ids) {
            expect((await bothWays(c, TRACE, id)).rows.map((r) => r[0])).toEqual([id]);
            expect((await bothWays(c, POINT, id)).rows.map((r) => r[0])).toEqual([id]);
          }
        }
      }
      // A replay in the simple query protocol, with the session as a literal, is served too.
      const simple = await c.query({ text: "SELECT * FROM cot_replay('alpha')", rowMode: 'array' });
      expect(simple.rows).toEqual((await askEngine(c, REPLAY, 'alpha')).rows);
      const steps = [...sessions.values()].reduce((n, ids) => n + ids.length, 0);
      // Every read outside a block was the store's: one session read per replay, one step per step read.
      expect(s.store.stats.steps - before.steps).toBe(2 * 2 * steps);
      expect(s.store.stats.sessions - before.sessions).toBe(2 * sessions.size * (1 + SESSION_READS.length) + 1);
      // Any other order is the engine's to answer.
      const unordered = s.store.stats.sessions;
      await ask(c, 'SELECT * FROM _cot_steps WHERE session_id = $1 ORDER BY step_index DESC', 'alpha');
      await ask(c, 'SELECT * FROM _cot_steps WHERE session_id = $1 ORDER BY created_at', 'alpha');
      expect(s.store.stats.sessions).toBe(unordered);
    } finally {
      await s.stop();
    }
  });

  it('answers a trace_id the ledger does not hold with no rows, and a malformed one with the engine error', async () => {
    const db = database('absent');
    const s = await boot(db, { sessionCacheMB: 0 });
    try {
      const c = await s.client();
      const id = await append(c, 'present', 'a step');
      await until('the row store to be ready', () => s.store.ready);
      const absent = '00000000-0000-4000-8000-000000000000';
      for (const text of [TRACE, POINT]) {
        expect((await bothWays(c, text, absent)).rows).toEqual([]);
        // An upper-case spelling of a held trace_id is the same step.
        expect((await bothWays(c, text, id.toUpperCase())).rows.map((r) => r[0])).toEqual([id]);
        for (const malformed of ['not-a-uuid', '', `${id}0`]) {
          await c.query('BEGIN');
          const engine = await sqlstate(c.query({ text, values: [malformed] }));
          await c.query('ROLLBACK');
          expect(engine, `${text} ${malformed}`).not.toBe('succeeded');
          expect(await sqlstate(c.query({ text, values: [malformed] })), `${text} ${malformed}`).toBe(engine);
        }
      }
      expect(await sqlstate(c.query({ text: TRACE, values: ['not-a-uuid'] }))).toBe('22P02');
      // The store holds every step, so the engine is not asked: a step planted behind the server, which the
      // engine would show, is not seen outside a block.
      const planted = '11111111-1111-4111-8111-111111111111';
      await s.running.writer.visible();
      const bypass = await s.running.engine.connect();
      try {
        await bypass.run(`INSERT INTO _cot_steps SELECT * REPLACE (CAST('${planted}' AS UUID) AS trace_id) FROM _cot_steps WHERE trace_id = '${id}'`);
      } finally {
        bypass.close();
      }
      expect((await askEngine(c, TRACE, planted)).rows).toHaveLength(1);
      expect((await ask(c, TRACE, planted)).rows).toEqual([]);
    } finally {
      await s.stop();
    }
  });

  it('never answers verification from the store: a forged stored row is served but the chain verifies, and a forged ledger row fails while the store shows the original', async () => {
    const db = database('forged');
    const storeForged: string[] = [];
    const ledgerForged: string[] = [];
    const first = await boot(db);
    try {
      const c = await first.client();
      for (let i = 0; i < 4; i++) {
        storeForged.push(await append(c, 'store-forged', `true thought ${i}`));
        ledgerForged.push(await append(c, 'ledger-forged', `kept thought ${i}`));
      }
      // The store's last step (meta 'last') is this one, which no forgery touches.
      await append(c, 'tail', 'the last step');
    } finally {
      await first.stop();
    }

    // Rewrite one stored row's content, in the store's own format, as someone with the files could.
    const env = open({ path: `${db}.steps`, noSubdir: true, mapSize: 2 ** 40, maxDbs: 8, ...STEP_STORE_ENCODING });
    try {
      const rows = env.openDB<Buffer, [number, string, number]>({ name: 'rows', encoding: 'binary' });
      const key: [number, string, number] = [0, 'store-forged', 1];
      const stored = rows.get(key) as Buffer;
      const frame = storedFrame(stored);
      const cells = dataRowCells(frame);
      expect(cells[0]).toBe(storeForged[1]);
      expect(cells[6]).toBe('true thought 1');
      cells[6] = 'forged in the store';
      await rows.put(key, Buffer.concat([dataRowFrames([cells])[0] as Buffer, stored.subarray(frame.length)]));
    } finally {
      await env.close();
    }
    // And one ledger row's content behind the server, the store keeping what was written.
    await offline(db, "UPDATE _cot_steps SET content = 'forged in the ledger' WHERE session_id = 'ledger-forged' AND step_index = 1");

    const s = await boot(db, { sessionCacheMB: 0 });
    try {
      await until('the row store to be ready', () => s.store.ready);
      expect(logged(s, MISMATCH)).toBe(false);
      const c = await s.client();
      const sessions = s.store.stats.sessions;
      const content = (a: Answer) => a.rows.map((r) => r[6]);
      // The store is what step reads and replays read...
      expect(content(await ask(c, TRACE, storeForged[1] as string))).toEqual(['forged in the store']);
      expect(content(await ask(c, TRACE, ledgerForged[1] as string))).toEqual(['kept thought 1']);
      expect(content(await askEngine(c, TRACE, ledgerForged[1] as string))).toEqual(['forged in the ledger']);
      expect(content(await ask(c, REPLAY, 'store-forged'))).toEqual(['true thought 0', 'forged in the store', 'true thought 2', 'true thought 3']);
      expect(content(await askEngine(c, REPLAY, 'store-forged'))).toEqual(['true thought 0', 'true thought 1', 'true thought 2', 'true thought 3']);
      expect(content(await ask(c, REPLAY, 'ledger-forged'))).toEqual(['kept thought 0', 'kept thought 1', 'kept thought 2', 'kept thought 3']);
      expect(content(await askEngine(c, REPLAY, 'ledger-forged'))).toEqual(['kept thought 0', 'forged in the ledger', 'kept thought 2', 'kept thought 3']);
      expect(s.store.stats.sessions - sessions).toBe(2);
      // ...and verification reads the ledger: the store's forgery changes nothing, the ledger's is found.
      const verdict = async (session: string) =>
        (await c.query({ text: 'SELECT valid, break_kind, first_broken_index FROM cot_verify($1)', values: [session] })).rows;
      expect(await verdict('store-forged')).toEqual([{ valid: 't', break_kind: null, first_broken_index: null }]);
      expect(await verdict('ledger-forged')).toEqual([{ valid: 'f', break_kind: 'edited', first_broken_index: '1' }]);
      const all = await c.query('SELECT chain_key, valid FROM cot_verify_all() ORDER BY chain_key');
      expect(all.rows).toEqual([
        { chain_key: 'ledger-forged', valid: 'f' },
        { chain_key: 'store-forged', valid: 't' },
        { chain_key: 'tail', valid: 't' },
      ]);
    } finally {
      await s.stop();
    }
  });

  it('forgets a redacted session in the same operation, and leaves no erased byte in its files after the stop', async () => {
    const db = database('redacted');
    const dir = join(root, 'redacted');
    const secret = `card 4111-1111-${Date.now()}-PLANTED`;
    const s = await boot(db, { sessionCacheMB: 0 });
    let target = '';
    try {
      const c = await s.client();
      for (let i = 0; i < 4; i++) {
        const id = await append(c, 'private', i === 2 ? `the customer ${secret}` : `thought ${i}`);
        if (i === 2) target = id;
        await append(c, 'public', `public ${i}`);
      }
      await until('the row store to be ready', () => s.store.ready);
      const stats = s.store.stats;
      const before = { ...stats };
      expect((await bothWays(c, REPLAY, 'private')).rows.map((r) => r[6])).toEqual(['thought 0', 'thought 1', `the customer ${secret}`, 'thought 3']);
      expect(stats.sessions - before.sessions).toBe(1);
      // Positive control: the store's file holds the value (once LMDB's write thread has committed it).
      await until('the value to reach the store file', () => holding(dir, secret).includes('ledger.duckdb.steps'));

      await c.query('SELECT cot_redact($1, $2, $3)', [target, 'content', 'GDPR erasure request #17']);
      expect(stats.forgotten - before.forgotten).toBe(1);
      const redacted = await bothWays(c, REPLAY, 'private');
      expect(redacted.rows.map((r) => r[6])).toEqual(['thought 0', 'thought 1', '[redacted]', 'thought 3']);
      expect((await bothWays(c, TRACE, target)).rows.map((r) => r[6])).toEqual(['[redacted]']);
      expect((await bothWays(c, POINT, target)).rows.map((r) => r[6])).toEqual(['[redacted]']);
      // The session is the engine's now; another session is still the store's.
      expect(stats.sessions - before.sessions).toBe(1);
      expect((await bothWays(c, REPLAY, 'public')).rows).toHaveLength(4);
      expect(stats.sessions - before.sessions).toBe(2);
      expect((await c.query("SELECT valid FROM cot_verify('private')")).rows).toEqual([{ valid: 't' }]);
    } finally {
      await s.stop();
    }
    // The stop rewrote the database file and removed the store: no file holds the value.
    expect(holding(dir, secret)).toEqual([]);

    const again = await boot(db, { sessionCacheMB: 0 });
    try {
      await until('the rebuilt row store to be ready', () => again.store.ready);
      expect(existsSync(`${db}.steps`)).toBe(true);
      expect(holding(dir, secret)).toEqual([]);
      const c = await again.client();
      const sessions = again.store.stats.sessions;
      expect((await bothWays(c, REPLAY, 'private')).rows.map((r) => r[6])).toEqual(['thought 0', 'thought 1', '[redacted]', 'thought 3']);
      expect((await bothWays(c, TRACE, target)).rows.map((r) => r[6])).toEqual(['[redacted]']);
      // Rebuilt from the rewritten ledger, the store answers for the session again.
      expect(again.store.stats.sessions - sessions).toBe(1);
      await again.running.writer.visible();
      expect(holding(dir, secret)).toEqual([]);
    } finally {
      await again.stop();
    }
  });

  it('forgets a retained session: it reads as empty both ways and its trace ids answer no rows', async () => {
    const db = database('retained');
    const s = await boot(db, { sessionCacheMB: 0, retentionFloorDays: 0 });
    try {
      const c = await s.client();
      const old = [await append(c, 'old', 'old 0'), await append(c, 'old', 'old 1'), await append(c, 'old', 'old 2')];
      // Every step of 'old' was made before this instant; the cutoff is a little after it, and 'kept' begins after that.
      const cutoff = Date.now() + 20;
      await until('the clock to pass the cutoff', () => Date.now() > cutoff + 20);
      const kept = [await append(c, 'kept', 'kept 0'), await append(c, 'kept', 'kept 1')];
      await until('the row store to be ready', () => s.store.ready);
      const stats = s.store.stats;
      const before = { ...stats };
      expect((await bothWays(c, REPLAY, 'old')).rows).toHaveLength(3);
      expect(stats.sessions - before.sessions).toBe(1);

      const removed = await s.running.retain((Date.now() - cutoff) / 86_400_000, false, 'the test');
      expect(removed.map((r) => r.chainKey)).toEqual(['old']);
      expect(stats.forgotten - before.forgotten).toBe(1);
      expect(s.store.session('old')).toBeNull();
      expect((await bothWays(c, REPLAY, 'old')).rows).toEqual([]);
      for (const id of old) {
        expect(s.store.step(id)).toBeNull();
        expect((await bothWays(c, TRACE, id)).rows).toEqual([]);
        expect((await bothWays(c, POINT, id)).rows).toEqual([]);
      }
      // The kept session is still the store's.
      const sessions = stats.sessions;
      expect((await bothWays(c, REPLAY, 'kept')).rows.map((r) => r[0])).toEqual(kept);
      expect(stats.sessions - sessions).toBe(1);
      // A retained session the agent carries on is read from the engine, with its new step only.
      await append(c, 'old', 'old 3');
      expect((await bothWays(c, REPLAY, 'old')).rows.map((r) => [r[4], r[6]])).toEqual([['3', 'old 3']]);
    } finally {
      await s.stop();
    }
  });

  it('rebuilds a store copied from another database, whose steps go further than the ledger', async () => {
    await copiedStore('copied-longer', 6, 2);
  });

  it('rebuilds a store copied from another database, whose steps fall within the ledger', async () => {
    await copiedStore('copied-shorter', 2, 6);
  });

  it('refills a store whose files were deleted while the server was stopped', async () => {
    const db = database('refilled');
    const ids: string[] = [];
    const first = await boot(db);
    try {
      const c = await first.client();
      for (let i = 0; i < 5; i++) ids.push(await append(c, 'refilled', `thought ${i} ✓`));
    } finally {
      await first.stop();
    }
    expect(existsSync(`${db}.steps`)).toBe(true);
    rmSync(`${db}.steps`);
    rmSync(`${db}.steps-lock`, { force: true });

    const s = await boot(db, { sessionCacheMB: 0 });
    try {
      await until('the fill from the ledger', () => logged(s, FILLED));
      expect(s.store.ready).toBe(true);
      expect(existsSync(`${db}.steps`)).toBe(true);
      const c = await s.client();
      const before = { ...s.store.stats };
      expect((await bothWays(c, REPLAY, 'refilled')).rows.map((r) => r[0])).toEqual(ids);
      for (const id of ids) expect((await bothWays(c, TRACE, id)).rows.map((r) => r[0])).toEqual([id]);
      expect(s.store.stats.steps - before.steps).toBe(ids.length);
      expect(s.store.stats.sessions - before.sessions).toBe(1);
    } finally {
      await s.stop();
    }
  });
  it('rebuilds a store whose file was cut short while the server was stopped, where LMDB would die of SIGBUS at every start', async () => {
    const db = database('cut-short');
    const ids: string[] = [];
    const first = await boot(db);
    try {
      const c = await first.client();
      for (let i = 0; i < 40; i++) ids.push(await append(c, 'cut', `thought ${i} ${'x'.repeat(2000)}`));
    } finally {
      await first.stop();
    }
    expect(statSync(`${db}.steps`).size).toBeGreaterThan(8192);
    truncateSync(`${db}.steps`, 8192);

    const s = await boot(db, { sessionCacheMB: 0 });
    try {
      await until('the fill from the ledger', () => logged(s, FILLED));
      const c = await s.client();
      expect((await bothWays(c, REPLAY, 'cut')).rows.map((r) => r[0])).toEqual(ids);
      expect((await bothWays(c, TRACE, ids[7] as string)).rows.map((r) => r[0])).toEqual([ids[7]]);
    } finally {
      await s.stop();
    }
  });

  it('stops cleanly when its file was deleted while the server ran, and refills it at the next start', async () => {
    const db = database('deleted-running');
    const ids: string[] = [];
    const first = await boot(db);
    const c = await first.client();
    for (let i = 0; i < 5; i++) ids.push(await append(c, 'gone', `thought ${i}`));
    rmSync(`${db}.steps`);
    ids.push(await append(c, 'gone', 'after the file went'));
    expect((await bothWays(c, REPLAY, 'gone')).rows.map((r) => r[0])).toEqual(ids);
    await first.stop();

    const s = await boot(db, { sessionCacheMB: 0 });
    try {
      await until('the fill from the ledger', () => logged(s, FILLED));
      expect((await bothWays(await s.client(), REPLAY, 'gone')).rows.map((r) => r[0])).toEqual(ids);
    } finally {
      await s.stop();
    }
  });

  it('loses no acknowledged step when the server is killed before the store wrote its last appends', async () => {
    const db = database('killed');
    const server = await spawnServer(['--db', db]);
    const ids: string[] = [];
    try {
      const c = new pg.Client({ host: '127.0.0.1', port: server.port, user: 'cotwire', database: 'cotwire' });
      c.on('error', () => undefined);
      await c.connect();
      // Appended one by one and killed at once after the last acknowledgement: the store writes what
      // arrived in the last few milliseconds together, so the last steps are in memory only.
      for (let i = 0; i < 40; i++) ids.push(await append(c, 'killed', `thought ${i}`));
      server.child.kill('SIGKILL');
      await new Promise((resolve) => server.child.once('exit', resolve));
    } finally {
      server.child.kill('SIGKILL');
    }
    expect(existsSync(`${db}.steps`)).toBe(true);
    const s = await boot(db, { sessionCacheMB: 0 });
    try {
      await until('the fill from the ledger', () => logged(s, FILLED));
      expect(logged(s, MISMATCH)).toBe(false);
      const c = await s.client();
      const before = { ...s.store.stats };
      expect((await bothWays(c, REPLAY, 'killed')).rows.map((r) => r[0])).toEqual(ids);
      for (const id of ids.slice(-5)) expect((await bothWays(c, TRACE, id)).rows.map((r) => r[0])).toEqual([id]);
      expect(s.store.stats.sessions - before.sessions).toBe(1);
      expect(s.store.stats.steps - before.steps).toBe(5);
    } finally {
      await s.stop();
    }
  });
});

/**
 * Two databases with `stepsA` and `stepsB` steps; A's store copied over B's: B's start finds that it does
 * not match its ledger, rebuilds it, and serves B's rows and none of A's.
 */
async function copiedStore(name: string, stepsA: number, stepsB: number): Promise<void> {
  const dbA = database(`${name}-a`);
  const dbB = database(`${name}-b`);
  const idsA: string[] = [];
  const idsB: string[] = [];
  for (const [db, ids, count, who] of [
    [dbA, idsA, stepsA, 'a'],
    [dbB, idsB, stepsB, 'b'],
  ] as const) {
    const s = await boot(db);
    try {
      const c = await s.client();
      for (let i = 0; i < count; i++) ids.push(await append(c, 'shared', `${who} ${i}`));
      await append(c, `only ${who}`, `${who} alone`);
    } finally {
      await s.stop();
    }
  }
  copyFileSync(`${dbA}.steps`, `${dbB}.steps`);
  rmSync(`${dbB}.steps-lock`, { force: true });

  const s = await boot(dbB, { sessionCacheMB: 0 });
  try {
    await until('the warning that the store does not match', () => logged(s, MISMATCH));
    const warning = JSON.parse(s.lines.find((l) => l.includes(MISMATCH)) as string) as { level: number };
    expect(warning.level).toBe(40);
    await until('the rebuilt row store to be ready', () => s.store.ready);
    const c = await s.client();
    const before = { ...s.store.stats };
    const replay = await bothWays(c, REPLAY, 'shared');
    expect(replay.rows.map((r) => r[0])).toEqual(idsB);
    expect(replay.rows.map((r) => r[6])).toEqual(idsB.map((_, i) => `b ${i}`));
    expect((await bothWays(c, REPLAY, 'only b')).rows.map((r) => r[6])).toEqual(['b alone']);
    expect((await bothWays(c, REPLAY, 'only a')).rows).toEqual([]);
    for (const id of idsA) expect((await bothWays(c, TRACE, id)).rows).toEqual([]);
    for (const id of idsB) expect((await bothWays(c, TRACE, id)).rows.map((r) => r[6])).toHaveLength(1);
    expect(s.store.stats.steps - before.steps).toBe(idsB.length);
    // Three replays, 'only a' among them (a session B's ledger does not have, which the store answers with no rows).
    expect(s.store.stats.sessions - before.sessions).toBe(3);
  } finally {
    await s.stop();
  }
}

describe('the derived files beside the database', () => {
  it('rebuilds a deleted node file of the global log from the rows, and says so', async () => {
    const db = database('merkle-gone');
    const first = await boot(db);
    try {
      const c = await first.client();
      for (let i = 0; i < 3; i++) await append(c, 'm', `thought ${i}`);
    } finally {
      await first.stop();
    }
    rmSync(`${db}.merkle`);
    const s = await boot(db);
    try {
      expect(s.lines.some((l) => l.includes('"level":40') && /was missing: the tree was rebuilt from the ledgers' rows \(\d+ leaves\)/.test(l))).toBe(true);
      const c = await s.client();
      expect((await c.query('SELECT count(*)::int AS n FROM _cot_steps')).rows).toEqual([{ n: '3' }]);
    } finally {
      await s.stop();
    }
  });
});
