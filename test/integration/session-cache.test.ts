import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type pg from 'pg';
import type { EngineConnection } from '../../src/engine/port.js';
import { startTestServer, type TestServer } from '../fixtures/server.js';

/**
 * Replays and step reads answered from the session cache must be the bytes
 * the engine answers, however the session grows meanwhile; transaction
 * blocks, other time zones and binary rows go to the engine; verification
 * never reads the cache.
 */

let server: TestServer;
let client: pg.Client;
let internal: EngineConnection;

/** Every value as the server sent it, unparsed. */
const raw = { getTypeParser: () => (v: unknown) => v } as unknown as pg.CustomTypesConfig;

beforeAll(async () => {
  server = await startTestServer();
  client = await server.client({ types: raw });
  internal = await server.duckdb.engine.connect();
});
afterAll(async () => {
  internal.close();
  await server[Symbol.asyncDispose]();
});

async function append(c: pg.Client, session: string, content: string): Promise<string> {
  const r = await c.query(
    "INSERT INTO _cot_steps (session_id, step_type, content, metadata) VALUES ($1, 'Reasoning', $2, '{\"k\": [1, 2.5]}') RETURNING trace_id",
    [session, content],
  );
  return String(r.rows[0].trace_id);
}

/** The statement the cache answers, and the same read in a shape it does not (the engine's answer). */
async function both(c: pg.Client, session: string, binary = false): Promise<{ cached: unknown[][]; engine: unknown[][] }> {
  const q = (text: string) => c.query({ text, values: [session], rowMode: 'array', binary } as pg.QueryConfig);
  const cached = (await q('SELECT * FROM cot_replay($1)')).rows as unknown[][];
  const engine = (await q('SELECT * FROM cot_replay($1) ORDER BY step_index')).rows as unknown[][];
  return { cached, engine };
}

describe('the session cache', () => {
  it('answers a replay with the engine’s bytes, and follows the session as it grows from its first step', async () => {
    for (let i = 0; i < 3; i++) await append(client, 'grow', `step ${i} é ✓`);
    const stats = server.duckdb.sessionCache?.stats ?? { hits: 0, fills: 0, appendsRead: 0, dropped: 0 };
    const [hits, fills, appendsRead, dropped] = [stats.hits, stats.fills, stats.appendsRead, stats.dropped];
    for (let i = 3; i < 15; i++) {
      const { cached, engine } = await both(client, 'grow');
      expect(cached).toEqual(engine);
      expect(cached).toHaveLength(i);
      await append(client, 'grow', `step ${i}`);
    }
    // The session was held from its first step: every replay was answered from the cache, which read
    // back from the engine only the steps appended since the replay before, and, once the session had a
    // reader, rendered each later step as soon as its append was answered: the last one, read by no replay, too.
    expect(stats.fills - fills).toBe(0);
    expect(stats.hits - hits).toBe(12);
    expect(stats.appendsRead - appendsRead).toBe(15);
    expect(stats.dropped - dropped).toBe(0);
    // A session the cache let go of is read whole from the engine by its next replay, which fills it again.
    server.duckdb.sessionCache?.drop('grow');
    const refill = await both(client, 'grow');
    expect(refill.cached).toEqual(refill.engine);
    expect(stats.fills - fills).toBe(1);
    await append(client, 'grow', 'after the refill');
    const after = await both(client, 'grow');
    expect(after.cached).toEqual(after.engine);
    expect(after.cached).toHaveLength(16);
    expect(stats.hits - hits).toBe(13);
  });

  it('prints the writer’s rows of a new session exactly as the engine prints the stored rows, whatever their values', async () => {
    const stats = server.duckdb.sessionCache?.stats ?? { fills: 0 };
    const fills = stats.fills;
    for (const zone of ['UTC', 'America/St_Johns', 'Asia/Kathmandu']) {
      // A session begun in this zone: its first replay prints every row from the writer's texts.
      await client.query(`SET TimeZone = '${zone}'`);
      const session = `values ${zone}`;
      const parent = await append(client, session, 'root');
      const values: unknown[][] = [
        [0.1, 3, 2 ** 40, 'model-a', '{"a": 1, "b": [1.0, 1e5, -0, "é\\n\\"q\\""], "c": {"z": null, "a": true}}', null, '{"k":"v"}', parent],
        [1 / 3, null, 0, null, '[]', '"just a string"', null, null],
        [1e-7, 2147483647, -5, 'ünïcödé ✓ 🚀', '{"deep": {"er": {"est": [[[]]]}}}', '12.50', '{"b":1,"a":2}', null],
        [0, 0, null, '', 'null', 'true', '{}', parent],
        [1, -1, 9007199254740991, 'tab\there\nnewline', '{"num": 123456789012345678901234567890}', '-0.0', '[1, 2, 3]', null],
      ];
      for (const [i, v] of values.entries()) {
        await client.query(
          `INSERT INTO _cot_steps (session_id, step_type, content, confidence, token_count, duration_ms, model, input_data, output_data, metadata, parent_trace_id)
           VALUES ($1, 'Observation', $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
          [session, `content ${i} 'quoted' \\ back`, ...v],
        );
      }
      const { cached, engine } = await both(client, session);
      expect(cached, zone).toEqual(engine);
      expect(cached, zone).toHaveLength(6);
    }
    await client.query('RESET TimeZone');
    expect(stats.fills - fills).toBe(0);
  });

  it('stays exact while another connection appends to the session it replays', async () => {
    const writer = await server.client();
    await append(writer, 'race', 'first');
    let stop = false;
    const appending = (async () => {
      let n = 0;
      while (!stop && n < 200) await append(writer, 'race', `concurrent ${n++}`);
    })();
    for (let i = 0; i < 40; i++) {
      const before = Number((await client.query("SELECT count(*) FROM _cot_steps WHERE session_id = 'race'")).rows[0].count);
      const cached = (await client.query({ text: 'SELECT * FROM cot_replay($1)', values: ['race'], rowMode: 'array' })).rows as unknown[][];
      const after = Number((await client.query("SELECT count(*) FROM _cot_steps WHERE session_id = 'race'")).rows[0].count);
      // Whatever the engine held when the replay began, and nothing it did not hold when it ended.
      expect(cached.length).toBeGreaterThanOrEqual(before);
      expect(cached.length).toBeLessThanOrEqual(after);
      expect(cached.map((r) => Number(r[4]))).toEqual(cached.map((_, k) => k));
    }
    stop = true;
    await appending;
    const { cached, engine } = await both(client, 'race');
    expect(cached).toEqual(engine);
  });

  it('answers cot_trace and a read by trace_id of a held step as the engine does', async () => {
    const id = await append(client, 'steps', 'one');
    await both(client, 'steps');
    for (const text of ['SELECT * FROM cot_trace($1)', 'SELECT * FROM _cot_steps WHERE trace_id = $1']) {
      const cached = (await client.query({ text, values: [id], rowMode: 'array' })).rows;
      const engine = (await client.query({ text: `${text} ORDER BY 1`, values: [id], rowMode: 'array' })).rows;
      expect(cached, text).toEqual(engine);
      expect(cached, text).toHaveLength(1);
    }
  });

  it('leaves a transaction block’s snapshot to the engine', async () => {
    await append(client, 'snap', 'before');
    await both(client, 'snap');
    const other = await server.client();
    await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
    expect((await client.query("SELECT * FROM cot_replay('snap')")).rows).toHaveLength(1);
    await append(other, 'snap', 'after');
    expect((await client.query("SELECT * FROM cot_replay('snap')")).rows).toHaveLength(1);
    await client.query('COMMIT');
    expect((await client.query("SELECT * FROM cot_replay('snap')")).rows).toHaveLength(2);
  });

  it('renders in the session’s time zone and in binary as the engine does', async () => {
    await append(client, 'zones', 'tz');
    const utc = await both(client, 'zones');
    expect(utc.cached).toEqual(utc.engine);
    await client.query("SET TimeZone = 'Asia/Kolkata'");
    try {
      const kolkata = await both(client, 'zones');
      expect(kolkata.cached).toEqual(kolkata.engine);
      expect(String(kolkata.cached[0]?.[17])).toMatch(/\+05:30$/);
    } finally {
      await client.query('RESET TimeZone');
    }
    const binary = await both(client, 'zones', true);
    expect(binary.cached).toEqual(binary.engine);
  });

  it('never answers verification from it: a row changed behind the server is found while its session is held', async () => {
    await append(client, 'held', 'true thought');
    await append(client, 'held', 'second');
    await both(client, 'held');
    await internal.run("UPDATE _cot_steps SET content = 'forged' WHERE session_id = 'held' AND step_index = 0");
    // The replay still shows what was written (the row cannot change through the server)...
    expect((await client.query({ text: "SELECT * FROM cot_replay('held')", rowMode: 'array' })).rows[0]?.[6]).toBe('true thought');
    // ...and verification reads the stored rows, so it reports the edit.
    expect((await client.query("SELECT valid, break_kind, first_broken_index FROM cot_verify('held')")).rows).toEqual([
      { valid: 'f', break_kind: 'edited', first_broken_index: '0' },
    ]);
  });
});
