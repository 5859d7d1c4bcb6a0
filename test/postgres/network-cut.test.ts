import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PostgresConnection } from '../../src/engines/postgres/adapter/connection.js';
import { usePgEngine } from '../fixtures/pg-engine.js';
import { countLogged, logLines } from '../fixtures/log-lines.js';
import { expectEveryOutcomeKept, writers } from '../fixtures/pg-outcomes.js';
import { startPgTestServer, type PgTestServer } from '../fixtures/pg-server.js';
import { TcpLink } from '../fixtures/tcp-link.js';
import { until } from '../fixtures/poll.js';

/**
 * A network cut between cotwire and its PostgreSQL: packets stop, and no
 * socket fails (no RST, no FIN), as when a link or a firewall drops them.
 * Without a bound of its own cotwire would wait on such a socket for the
 * kernel's retransmissions, a quarter of an hour. It takes the connection
 * for lost after engine.answerTimeoutMs, says the engine is unreachable,
 * and, once the network is back, goes on and decides what was in flight
 * from the log.
 */

const ctx = usePgEngine();
const lines: string[] = [];
let link: TcpLink;
let server: PgTestServer;
let admin: PostgresConnection;
const ANSWER_TIMEOUT_MS = 2000;

beforeAll(async () => {
  link = new TcpLink(ctx.engine.pg.port);
  await link.listen();
  const log = logLines(lines);
  const url = new URL(ctx.engine.url);
  url.port = String(link.port);
  server = await startPgTestServer(
    { ...ctx.engine, url: url.toString() },
    {
      engine: { kind: 'postgres', url: url.toString(), rolePrefix: 'cotwire', answerTimeoutMs: ANSWER_TIMEOUT_MS },
      checkpoint: { keyFile: null, intervalSeconds: 1, maxLeaves: 10_000, sinks: [] },
      http: { host: '127.0.0.1', port: 0 },
    },
    { log },
  );
  // Looks behind cotwire's back on a path of its own, which the cut does not touch.
  admin = await ctx.engine.admin();
});
afterAll(async () => {
  link?.restore();
  await server?.close();
  link?.close();
});

const healthz = async (): Promise<number> => (await fetch(`http://127.0.0.1:${server.running.httpAddress?.port}/healthz`)).status;
const logged = (message: string): number => countLogged(lines, message);

describe('cotwire when the network to its PostgreSQL is cut', () => {
  it('takes the silent connections for lost, answers at once meanwhile, and goes on when the network is back', async () => {
    const load = writers(server, 8, 'cut');
    try {
      await until('appends under way', () => load.acked.length >= 100, 60_000);
      link.sever();
      const cutAt = Date.now();
      // No socket fails: only the answer timeout can tell. The engine is taken for down, once.
      await until('/healthz saying 503', async () => (await healthz()) === 503, 10 * ANSWER_TIMEOUT_MS);
      // Meanwhile a new client is told so (08006), not left waiting on the cut; the appends that were in flight wait
      // for their outcome, which the log decides once the network is back.
      for (let i = 0; i < 5; i++) {
        const refused = await server.client({ application_name: 'cut-newcomer' }).then(
          () => 'connected',
          (err: { code?: string }) => err.code ?? 'none',
        );
        expect(refused).toBe('08006');
      }
      link.restore();
      const back = Date.now();
      await until('an append after the network came back', () => load.acked.some((a) => a.at > back), 20_000);
      await until('/healthz saying 200', async () => (await healthz()) === 200, 20_000);
      expect(back - cutAt).toBeGreaterThan(0);
    } finally {
      link.restore();
      await load.stop();
    }
    await expectEveryOutcomeKept(admin, load, 'cut');
    expect(logged('the PostgreSQL engine is unreachable; retrying with backoff until it answers')).toBe(1);
    expect(logged('the PostgreSQL engine is reachable again')).toBe(1);
  }, 180_000);
});
