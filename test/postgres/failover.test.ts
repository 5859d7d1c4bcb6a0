import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PostgresConnection } from '../../src/engines/postgres/adapter/connection.js';
import { countLogged, logLines } from '../fixtures/log-lines.js';
import { usePgEngine } from '../fixtures/pg-engine.js';
import { expectEveryOutcomeKept, writers } from '../fixtures/pg-outcomes.js';
import { startPgTestServer, type PgTestServer } from '../fixtures/pg-server.js';
import type { Standby } from '../fixtures/postgres.js';
import { TcpLink } from '../fixtures/tcp-link.js';
import { until } from '../fixtures/poll.js';

/**
 * A managed PostgreSQL's failover, as cotwire sees it: the primary dies,
 * the address it was given leads to a replica still in recovery, then the
 * replica is promoted. Replication is synchronous, as docs/scaling.md says
 * to run it when every acknowledged append matters: then none is lost.
 */

const ctx = usePgEngine();
const lines: string[] = [];
let standby: Standby;
let link: TcpLink;
let server: PgTestServer;

beforeAll(async () => {
  standby = await ctx.engine.pg.standby();
  const primary = await ctx.engine.admin();
  await primary.run("ALTER SYSTEM SET synchronous_standby_names = '*'");
  await primary.query('SELECT pg_catalog.pg_reload_conf()');
  await until('the standby streaming synchronously', async () => {
    const rows = await primary.query("SELECT 1 FROM pg_catalog.pg_stat_replication WHERE sync_state = 'sync'");
    return rows.length > 0;
  });
  link = new TcpLink(ctx.engine.pg.port);
  await link.listen();
  const url = new URL(ctx.engine.url);
  url.port = String(link.port);
  server = await startPgTestServer(
    { ...ctx.engine, url: url.toString() },
    {
      engine: { kind: 'postgres', url: url.toString(), rolePrefix: 'cotwire', answerTimeoutMs: 5000 },
      checkpoint: { keyFile: null, intervalSeconds: 1, maxLeaves: 10_000, sinks: [] },
      http: { host: '127.0.0.1', port: 0 },
    },
    { log: logLines(lines) },
  );
});
afterAll(async () => {
  await server?.close();
  link?.close();
  standby?.stop();
});

const healthz = async (): Promise<number> => (await fetch(`http://127.0.0.1:${server.running.httpAddress?.port}/healthz`)).status;

describe('cotwire through a failover to a promoted replica at the same address', () => {
  it('waits out the replica in recovery, goes on when it is promoted, and has lost no acknowledged step', async () => {
    const onStandby = await PostgresConnection.open(`postgres://postgres@127.0.0.1:${standby.port}/postgres`, 'test on standby', { readsStandby: true });
    const load = writers(server, 16, 'failover');
    try {
      await until('appends under way', () => load.acked.length >= 200);
      const checkpointsBefore = ((await onStandby.query('SELECT count(*)::int FROM public._cot_checkpoints')) as [[number]])[0][0];
      await ctx.engine.pg.halt('immediate');
      link.retarget(standby.port);
      await until('/healthz saying 503', async () => (await healthz()) === 503, 20_000);
      // The address now leads to the replica, in recovery: cotwire's probe reaches it and does not take it for the
      // primary, and says why (clients refused meanwhile are told the same).
      await until('the probe refusing the replica', () => lines.some((l) => l.includes('the server at the engine URL is a standby in recovery')));
      expect(await healthz()).toBe(503);
      await standby.promote();
      const promoted = Date.now();
      await until('an append after the promotion', () => load.acked.some((a) => a.at > promoted), 20_000);
      await until(
        'a checkpoint on the promoted replica',
        async () => {
          const [[n]] = (await onStandby.query('SELECT count(*)::int FROM public._cot_checkpoints')) as [[number]];
          return n > checkpointsBefore;
        },
        20_000,
      );
      await until('/healthz saying 200', async () => (await healthz()) === 200, 20_000);
    } finally {
      await load.stop().catch((err: Error) => {
        console.error(lines.slice(-30).join('\n'));
        throw err;
      });
    }
    await expectEveryOutcomeKept(onStandby, load, 'failover');
    expect(countLogged(lines, 'the PostgreSQL engine is unreachable; retrying with backoff until it answers')).toBe(1);
    expect(countLogged(lines, 'the PostgreSQL engine is reachable again')).toBe(1);
    onStandby.close();
  }, 300_000);
});
