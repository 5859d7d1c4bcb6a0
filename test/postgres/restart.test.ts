import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { PostgresConnection } from '../../src/engines/postgres/adapter/connection.js';
import { usePgEngine } from '../fixtures/pg-engine.js';
import { countLogged, logLines } from '../fixtures/log-lines.js';
import { expectEveryOutcomeKept, type Outcomes, writers } from '../fixtures/pg-outcomes.js';
import { startPgTestServer, type PgTestServer } from '../fixtures/pg-server.js';
import { errorFields, WireClient } from '../fixtures/wire.js';
import { serialize } from 'pg-protocol';

/**
 * cotwire lives through its PostgreSQL: a crash and restart under load, a
 * database that refuses connections for half a minute, and each of the
 * server's own backends terminated. No cotwire restart in between; every
 * acknowledged step is there once, every step reported failed is absent,
 * and the ledgers are whole.
 */

const ctx = usePgEngine();
const lines: string[] = [];
let server: PgTestServer;
let admin: PostgresConnection;

beforeAll(async () => {
  const log = logLines(lines);
  server = await startPgTestServer(
    ctx.engine,
    { checkpoint: { keyFile: null, intervalSeconds: 1, maxLeaves: 10_000, sinks: [] }, http: { host: '127.0.0.1', port: 0 } },
    { log },
  );
  admin = await ctx.engine.admin();
});
afterAll(async () => {
  await server?.close();
});

/**
 * Every wait of an outage test is bounded on its own (until's deadlines, pg_ctl's 60 s, a writer's 30 s in stop()),
 * and their sum is past vitest's 120 s: a slow machine fails one of them, by name, rather than the whole test by time.
 */
const OUTAGE_TEST_MS = 300_000;

/** What the test did and when, with the server's last log lines, printed if it fails: a CI run shows where it stood. */
const phases: string[] = [];
let started = 0;
const mark = (what: string): void => {
  phases.push(`${((Date.now() - started) / 1000).toFixed(1)} s ${what}`);
};
beforeEach(({ onTestFailed }) => {
  phases.length = 0;
  started = Date.now();
  onTestFailed(() => {
    console.error(`where the test stood:\n${phases.join('\n')}\nthe server's last log lines:\n${lines.slice(-40).join('\n')}`);
  });
});

/** Resolves once `check` holds, asking again every 50 ms; fails after `ms`. */
async function until(what: string, check: () => boolean | Promise<boolean>, ms = 60_000): Promise<void> {
  const deadline = Date.now() + ms;
  mark(`waiting for ${what}`);
  for (;;) {
    if (
      await Promise.resolve()
        .then(check)
        .catch(() => false)
    ) {
      mark(`saw ${what}`);
      return;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);

    await new Promise((r) => setTimeout(r, 50));
  }
}

async function halt(mode: 'immediate' | 'fast'): Promise<void> {
  mark(`stopping PostgreSQL -m ${mode}`);
  await ctx.engine.pg.halt(mode);
  mark('PostgreSQL stopped');
}

async function resume(): Promise<void> {
  mark('starting PostgreSQL');
  await ctx.engine.pg.resume();
  mark('PostgreSQL started');
}

async function healthz(): Promise<number> {
  const res = await fetch(`http://127.0.0.1:${server.running.httpAddress?.port}/healthz`);
  return res.status;
}

const logged = (message: string): number => countLogged(lines, message);

async function checkpointCount(): Promise<number> {
  const [[n]] = (await admin.query('SELECT count(*)::int FROM public._cot_checkpoints')) as [[number]];
  return n;
}

/** Appends go on after the engine is back: the first acknowledged after `since`, within 20 s. */
async function expectAppendsResume(load: Outcomes, since: number): Promise<void> {
  await until('an append after the engine came back', () => load.acked.some((a) => a.at > since), 20_000);
  const first = load.acked.find((a) => a.at > since)?.at as number;
  expect(first - since).toBeLessThan(20_000);
}

describe('cotwire on a PostgreSQL that goes away and comes back', () => {
  it(
    'lives through PostgreSQL stopped with -m immediate under 16 writers and started again',
    async () => {
      const load = writers(server, 16, 'crash', mark);
      try {
        await until('appends under way', () => load.acked.length >= 200);
        const checkpointsBefore = await checkpointCount();
        await halt('immediate');
        await until('/healthz saying 503', async () => (await healthz()) === 503, 20_000);
        await resume();
        const back = Date.now();
        await expectAppendsResume(load, back);
        // A signed checkpoint follows, by whichever lease holder: this one, the only instance.
        await until('a checkpoint after the restart', async () => (await checkpointCount()) > checkpointsBefore, 20_000);
        await until('/healthz saying 200', async () => (await healthz()) === 200, 20_000);
        await until('more appends', () => load.acked.filter((a) => a.at > back).length >= 100);
      } finally {
        await load.stop();
      }
      await expectEveryOutcomeKept(admin, load, 'crash');
      expect(logged('the PostgreSQL engine is unreachable; retrying with backoff until it answers')).toBe(1);
      expect(logged('the PostgreSQL engine is reachable again')).toBe(1);
      expect(logged('issuing a checkpoint failed')).toBe(0);
    },
    OUTAGE_TEST_MS,
  );

  it(
    'answers at once while PostgreSQL refuses connections for 30 s, says so once, and goes on when it is back',
    async () => {
      lines.length = 0;
      const load = writers(server, 16, 'refused', mark);
      try {
        await until('appends under way', () => load.acked.length >= 100);
        const checkpointsBefore = await checkpointCount();
        await halt('fast');
        await until('/healthz saying 503', async () => (await healthz()) === 503, 20_000);
        const down = Date.now();
        const refusedAtStart = load.refusedConnections.get('08006') ?? 0;
        // The outage itself: half a minute of clients trying, each told at once that nothing was made.
        await new Promise((r) => setTimeout(r, 30_000 - (Date.now() - down)));
        expect(await healthz()).toBe(503);
        // A client whose append was in flight at the stop waits for its outcome; the others are told at once, by
        // cotwire, with 08006, at their pace of ten tries a second: hundreds of answers in the half minute.
        expect((load.refusedConnections.get('08006') ?? 0) - refusedAtStart).toBeGreaterThan(100);
        expect(load.refusedConnections.get('none')).toBeUndefined();
        await resume();
        const back = Date.now();
        await expectAppendsResume(load, back);
        await until('a checkpoint after the restart', async () => (await checkpointCount()) > checkpointsBefore, 20_000);
        await until('/healthz saying 200', async () => (await healthz()) === 200, 20_000);
      } finally {
        // A failed expectation above must not leave the writers waiting on a stopped PostgreSQL.
        await resume().catch(() => undefined);
        await load.stop();
      }
      await expectEveryOutcomeKept(admin, load, 'refused');
      expect(logged('the PostgreSQL engine is unreachable; retrying with backoff until it answers')).toBe(1);
      expect(logged('the PostgreSQL engine is reachable again')).toBe(1);
      expect(logged('issuing a checkpoint failed')).toBe(0);
    },
    OUTAGE_TEST_MS,
  );

  it("recovers each of its own backends killed with pg_terminate_backend, and a client's killed backend ends only that client's session", async () => {
    lines.length = 0;
    const load = writers(server, 4, 'terminated', mark);
    const terminate = async (applicationName: string): Promise<void> => {
      const [[n]] = (await admin.query('SELECT count(pg_catalog.pg_terminate_backend(pid))::int FROM pg_catalog.pg_stat_activity WHERE application_name = $1', [
        applicationName,
      ])) as [[number]];
      expect(n, applicationName).toBeGreaterThan(0);
    };
    try {
      await until('appends under way', () => load.acked.length >= 20);
      const c = await server.client();
      let ledgers = 0;
      // What each of the server's backends does, done before its termination (so that it has a backend to lose) and after.
      const work: Record<string, () => Promise<unknown>> = {
        'cotwire writer': () => c.query("INSERT INTO _cot_steps (session_id, step_type, content) VALUES ('terminated-own', 'Action', 'x')"),
        'cotwire signer': () => Promise.resolve(),
        // The server's own connection checks a parent_trace_id.
        cotwire: () =>
          c.query(
            "INSERT INTO _cot_steps (session_id, step_type, content, parent_trace_id) SELECT 'terminated-own', 'Action', 'child', trace_id FROM _cot_steps WHERE session_id = 'terminated-own' LIMIT 1",
          ),
        'cotwire owner': () => c.query(`CREATE TABLE _cot_after_kill_${++ledgers} (session_id VARCHAR, note VARCHAR)`),
      };
      for (const [role, use] of Object.entries(work)) {
        await use();
        const checkpointsBefore = await checkpointCount();
        const at = Date.now();
        await terminate(role);
        await use();
        await until(`appends after ${role} was terminated`, () => load.acked.filter((a) => a.at > at).length >= 20, 20_000);
        await until(`a checkpoint after ${role} was terminated`, async () => (await checkpointCount()) > checkpointsBefore, 20_000);
      }
      await c.query("INSERT INTO _cot_after_kill_2 (session_id, note) VALUES ('s', 'after')");
      expect((await c.query('SELECT valid FROM cot_verify_after_kill_2_all()')).rows).toEqual([{ valid: true }]);

      // A client's backend terminated mid-statement: that statement gets PostgreSQL's 57P01, its session ends, the next one works.
      const victim = await server.client({ application_name: 'restart-victim' });
      const sleeping = victim.query('SELECT pg_catalog.pg_sleep(30)').then(
        () => null,
        (err: { code?: string }) => err.code ?? 'none',
      );
      await until('the victim sleeping', async () => {
        const [[n]] = (await admin.query(
          "SELECT count(*)::int FROM pg_catalog.pg_stat_activity WHERE application_name = 'restart-victim' AND state = 'active'",
        )) as [[number]];
        return n > 0;
      });
      await terminate('restart-victim');
      expect(await sleeping).toBe('57P01');
      await expect(victim.query('SELECT 1')).rejects.toThrow();
      const next = await server.client({ application_name: 'restart-victim' });
      expect((await next.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
      expect(await healthz()).toBe(200);
    } finally {
      await load.stop();
    }
    await expectEveryOutcomeKept(admin, load, 'terminated');
    // A terminated backend is not an engine down.
    expect(logged('the PostgreSQL engine is unreachable; retrying with backoff until it answers')).toBe(0);
    expect(logged('issuing a checkpoint failed')).toBe(0);
  });

  it('reports an INSERT failed, and makes nothing, when its backend is terminated between Execute and Sync', async () => {
    const raw = await WireClient.startup(server.port, { application_name: 'between-execute-and-sync' });
    raw.write(serialize.parse({ text: "INSERT INTO _cot_steps (session_id, step_type, content) VALUES ('between', 'Action', $1)", types: [25] }));
    raw.write(serialize.bind({ values: ['held until Sync'] }));
    raw.write(serialize.execute({}));
    raw.write(serialize.flush());
    // The INSERT's rows are evaluated and its CommandComplete sent; the append waits for the Sync.
    await raw.until('C');
    const [[n]] = (await admin.query(
      "SELECT count(pg_catalog.pg_terminate_backend(pid))::int FROM pg_catalog.pg_stat_activity WHERE application_name = 'between-execute-and-sync'",
    )) as [[number]];
    expect(n).toBe(1);
    await until('the backend gone', async () => {
      const [[left]] = (await admin.query("SELECT count(*)::int FROM pg_catalog.pg_stat_activity WHERE application_name = 'between-execute-and-sync'")) as [
        [number],
      ];
      return left === 0;
    });
    raw.write(serialize.sync());
    const answered = await raw.until('E');
    const fields = errorFields(answered.at(-1)?.body as Buffer);
    expect(['57P01', '08006']).toContain(fields.C);
    expect(fields.S).toBe('FATAL');
    await raw.waitClosed();
    const [[stored]] = (await admin.query("SELECT count(*)::int FROM public._cot_steps WHERE session_id = 'between'")) as [[number]];
    expect(stored).toBe(0);
  });
});
