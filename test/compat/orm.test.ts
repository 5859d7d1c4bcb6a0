import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useCotwireAndPostgres } from '../fixtures/compared.js';
import { startTestServer, type TestServer } from '../fixtures/server.js';

/**
 * The ORMs and query builders applications are built with (Knex, Kysely,
 * Drizzle, TypeORM, Sequelize), each running its real flow against cotwire
 * and against PostgreSQL: migrations or schema sync, CRUD on ordinary tables,
 * transactions, and an insert into the ledger through the ORM (cotwire
 * only). Every step's outcome, value or SQLSTATE, must be PostgreSQL's,
 * except where docs/compatibility.md names the difference (DIFFERENCES).
 */

interface Connection {
  readonly host: string;
  readonly port: number;
  readonly user: string;
  readonly database: string;
}
type Step = (name: string, fn: () => Promise<unknown>) => Promise<unknown>;
type Flow = (conn: Connection, step: Step, cotwire: boolean) => Promise<void>;
type Outcome = { readonly ok: true; readonly value: unknown } | { readonly ok: false; readonly code: string | undefined };

const CLIENTS = ['knex', 'kysely', 'drizzle', 'typeorm', 'sequelize'] as const;

/** Steps whose outcome on cotwire differs, with what cotwire gives (docs/compatibility.md, "ORMs and query builders"). */
const DIFFERENCES: Readonly<Record<string, Readonly<Record<string, Outcome | ((o: Outcome | undefined) => void)>>>> = {};

const started = Date.now();

/** A value as compared: dates near now (a default of now()) as a mark, class instances as plain objects, bigints as text. */
function normalise(v: unknown): unknown {
  if (v instanceof Date) return Math.abs(v.getTime() - started) < 30 * 60_000 ? '<now>' : v.toISOString();
  if (typeof v === 'bigint') return v.toString();
  if (Buffer.isBuffer(v)) return v.toString('hex');
  if (Array.isArray(v)) return v.map(normalise);
  if (v !== null && typeof v === 'object') {
    return Object.fromEntries(
      Object.entries(v as Record<string, unknown>)
        .filter(([, x]) => typeof x !== 'function')
        .map(([k, x]) => [k, normalise(x)]),
    );
  }
  return v;
}

async function run(client: string, conn: Connection, cotwire: boolean): Promise<Map<string, Outcome>> {
  const outcomes = new Map<string, Outcome>();
  const step: Step = async (name, fn) => {
    try {
      const value = await fn();
      outcomes.set(name, { ok: true, value: JSON.parse(JSON.stringify(normalise(value ?? null))) as unknown });
      return value;
    } catch (err) {
      const e = err as { code?: string; cause?: { code?: string }; original?: { code?: string }; parent?: { code?: string }; driverError?: { code?: string } };
      outcomes.set(name, { ok: false, code: e.code ?? e.cause?.code ?? e.original?.code ?? e.parent?.code ?? e.driverError?.code });
      return undefined;
    }
  };
  const { flow } = (await import(`./orm/${client}.mjs`)) as { flow: Flow };
  await flow(conn, step, cotwire);
  return outcomes;
}

const servers = useCotwireAndPostgres();

describe.each(CLIENTS)('%s', (client) => {
  let cot: Map<string, Outcome>;
  let real: Map<string, Outcome>;
  let own: TestServer | undefined;

  beforeAll(async () => {
    // A database of its own on each side: cotwire's is one file per server, so each client gets a server.
    own = await startTestServer();
    const admin = new pg.Client({ host: '127.0.0.1', port: servers.postgres.port, user: servers.postgres.user, database: 'postgres' });
    await admin.connect();
    await admin.query(`CREATE DATABASE orm_${client}`);
    await admin.end();
    real = await run(client, { host: '127.0.0.1', port: servers.postgres.port, user: servers.postgres.user, database: `orm_${client}` }, false);
    cot = await run(client, { host: '127.0.0.1', port: own.port, user: 'cotwire', database: 'cotwire' }, true);
  });

  afterAll(async () => {
    // The clients' pools have sent Terminate; their sockets close a moment later, before the server says it is going.
    await new Promise((resolve) => setTimeout(resolve, 500));
    await own?.[Symbol.asyncDispose]();
  });

  it('gets what PostgreSQL gives, step by step', () => {
    expect([...cot.keys()].filter((k) => !k.startsWith('ledger'))).toEqual([...real.keys()]);
    for (const [name, want] of real) {
      const known = DIFFERENCES[client]?.[name];
      if (typeof known === 'function') known(cot.get(name));
      else expect.soft(cot.get(name), name).toEqual(known ?? want);
    }
  });

  it('appends to the ledger through the ORM', () => {
    const ledger = [...cot].filter(([k]) => k.startsWith('ledger'));
    expect(ledger.length).toBeGreaterThan(0);
    for (const [name, outcome] of ledger) expect(outcome, name).toMatchObject({ ok: true });
  });
});
