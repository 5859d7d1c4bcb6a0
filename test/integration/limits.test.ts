import net from 'node:net';
import pg from 'pg';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULTS } from '../../src/config/schema.js';
import { until } from '../fixtures/poll.js';
import { startTestServer, type TestServer } from '../fixtures/server.js';

/**
 * What a client can cost the server stays under the client's limits:
 * statement_timeout and CancelRequest cover preparing (DuckDB folds
 * constants there) and a ledger INSERT's evaluation as well as execution,
 * a heavy client does not starve the others, and the door has its own
 * limits (startup, idle in transaction, prepared statements, portals).
 */
let server: TestServer;

/** Folded into a constant while DuckDB prepares: seconds of one uninterruptible function call. */
const HEAVY_PREPARE = "SELECT levenshtein(repeat('a', 60000), repeat('b', 60000)) AS d";
/** A ledger INSERT whose source would take hours to evaluate. */
const HEAVY_APPEND =
  "INSERT INTO _cot_steps (session_id, step_type, content) SELECT 'h', 'Reasoning', CAST(i AS VARCHAR) FROM range(20000000000) t(i) WHERE i < 0";

beforeAll(async () => {
  server = await startTestServer({
    limits: { ...DEFAULTS.limits, maxPreparedStatements: 3, maxPortals: 2, maxAppendBytes: 64 * 1024 },
  });
});
afterAll(async () => {
  await server[Symbol.asyncDispose]();
});

async function failure(p: Promise<unknown>): Promise<{ code?: string; message?: string } | 'succeeded'> {
  return p.then(
    () => 'succeeded' as const,
    (e: { code?: string; message?: string }) => ({ code: e.code, message: e.message }),
  );
}

/**
 * A running postgres.js query canceled, and how it failed. Its connection is open first, so that the
 * statement is sent at once; a cancel that comes before it starts does nothing (as in PostgreSQL), so it
 * is sent again until the statement ends, however busy the machine.
 */
async function canceled(q: postgres.PendingQuery<postgres.Row[]>): Promise<Awaited<ReturnType<typeof failure>>> {
  let settled = false;
  const outcome = failure(q).finally(() => {
    settled = true;
  });
  await until('the statement to be canceled', async () => {
    if (!settled) await q.cancel();
    return settled;
  });
  return outcome;
}

describe('statement_timeout and cancel cover every phase', () => {
  it('stops a statement whose preparing runs past statement_timeout', async () => {
    const c = await server.client();
    await c.query("SET statement_timeout = '300ms'");
    expect(await failure(c.query(HEAVY_PREPARE))).toEqual({ code: '57014', message: 'canceling statement due to statement timeout' });
    // Answered at the deadline, not when the engine lets go (the folding alone takes seconds): the connection's next
    // statement still finds the engine holding the call, and waits for it under its own timeout.
    expect(await failure(c.query('SELECT 1 AS one'))).toMatchObject({ code: '57014' });
    await c.query('SET statement_timeout = 0');
    expect((await c.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
  });

  it('cancels a statement while it is being prepared', async () => {
    const sql = postgres({ host: '127.0.0.1', port: server.port, user: 'cotwire', database: 'cotwire', max: 1, onnotice: () => undefined });
    try {
      await sql`SELECT 1`;
      expect(await canceled(sql.unsafe(HEAVY_PREPARE))).toMatchObject({ code: '57014', message: 'canceling statement due to user request' });
      expect(await sql`SELECT 2 AS two`).toEqual([{ two: 2 }]);
    } finally {
      await sql.end();
    }
  });

  it('stops a ledger INSERT ... SELECT by statement_timeout, and appends nothing', async () => {
    const c = await server.client();
    await c.query("SET statement_timeout = '500ms'");
    expect(await failure(c.query(HEAVY_APPEND))).toEqual({ code: '57014', message: 'canceling statement due to statement timeout' });
    await c.query('SET statement_timeout = 0');
    expect((await c.query("SELECT count(*)::INT AS n FROM _cot_steps WHERE session_id = 'h'")).rows).toEqual([{ n: 0 }]);
  });

  it('cancels a ledger INSERT ... SELECT', async () => {
    const sql = postgres({ host: '127.0.0.1', port: server.port, user: 'cotwire', database: 'cotwire', max: 1, onnotice: () => undefined });
    try {
      await sql`SELECT 1`;
      expect(await canceled(sql.unsafe(HEAVY_APPEND))).toMatchObject({ code: '57014', message: 'canceling statement due to user request' });
    } finally {
      await sql.end();
    }
  });

  it('refuses a ledger statement whose rows outgrow limits.maxAppendBytes, with 53200', async () => {
    const c = await server.client();
    const r = await failure(c.query("INSERT INTO _cot_steps (session_id, step_type, content) SELECT 'big', 'Reasoning', repeat('x', 1000) FROM range(10000)"));
    expect(r).toMatchObject({ code: '53200', message: expect.stringContaining('limits.maxAppendBytes') });
    expect((await c.query("SELECT count(*)::INT AS n FROM _cot_steps WHERE session_id = 'big'")).rows).toEqual([{ n: 0 }]);
  });
});

describe('a heavy client does not starve the others', () => {
  it('answers SELECT 1 on another connection while four heavy statements run, none of them waited for', async () => {
    const probe = await server.client();
    const heavy = await Promise.all([0, 1, 2, 3].map(() => server.client()));
    let settled = 0;
    const running = heavy.map((c, i) =>
      failure(c.query(i % 2 === 0 ? HEAVY_PREPARE : 'SELECT count(*) FROM range(3000000000) a')).finally(() => {
        settled++;
      }),
    );
    // A starved probe would be answered only once a heavy statement ended; each takes seconds of both cores.
    for (let i = 0; i < 30; i++) {
      expect((await probe.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
      expect(settled, `SELECT 1 number ${i + 1} waited for a heavy statement`).toBe(0);
    }
    // Closing a connection stops its statement.
    await Promise.all(heavy.map((c) => c.end().catch(() => undefined)));
    await Promise.allSettled(running);
  });
});

describe('limits at the door', () => {
  it('drops a connection that sends half a StartupMessage', async () => {
    // A server of its own: a start-up limit this short would close real clients on a busy machine.
    const door = await startTestServer({ limits: { ...DEFAULTS.limits, startupTimeoutMs: 500 } });
    try {
      const socket = net.connect(door.port, '127.0.0.1');
      await new Promise((resolve) => socket.once('connect', resolve));
      // A length of 40 bytes, then only the protocol version.
      socket.write(Buffer.from([0, 0, 0, 40, 0, 3, 0, 0]));
      // Closed by the server at startupTimeoutMs (500 ms here); without that limit it would wait for the rest forever.
      await new Promise((resolve) => socket.once('close', resolve));
    } finally {
      await door[Symbol.asyncDispose]();
    }
  });

  /** A client in a transaction block, idle past a timeout of `ms`: resolves with the error the server ends it with. */
  async function idleInBlock(ms: number): Promise<{ code?: string }> {
    const c = new pg.Client(server.connectionOptions());
    const ended = new Promise<{ code?: string }>((resolve) => c.on('error', (err: Error & { code?: string }) => resolve(err)));
    await c.connect();
    await c.query(`SET idle_in_transaction_session_timeout = '${ms}ms'`);
    await c.query('BEGIN');
    const err = await ended;
    await c.end().catch(() => undefined);
    return err;
  }

  it('terminates a session idle in a transaction past idle_in_transaction_session_timeout, with 25P03', async () => {
    expect(await idleInBlock(200)).toMatchObject({ code: '25P03' });
  });

  it('does not time out a session idle outside a transaction', async () => {
    const c = await server.client();
    await c.query("SET idle_in_transaction_session_timeout = '100ms'");
    // Another session with the same timeout, set later, idles past it inside a block and is ended: this one has idled longer.
    expect(await idleInBlock(100)).toMatchObject({ code: '25P03' });
    expect((await c.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
  });

  it('bounds named prepared statements per connection with 53400', async () => {
    const c = await server.client();
    for (let i = 0; i < 3; i++) await c.query({ name: `s${i}`, text: `SELECT ${i}` });
    expect(await failure(c.query({ name: 's3', text: 'SELECT 3' }))).toMatchObject({
      code: '53400',
      message: expect.stringContaining('too many prepared statements'),
    });
    // The unnamed statement is not counted, and the connection goes on.
    expect((await c.query('SELECT 4 AS four')).rows).toEqual([{ four: 4 }]);
  });
});
