import { existsSync, rmSync } from 'node:fs';
import { loadModule, parseSync } from 'libpg-query';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PostgresConnection } from '../../src/engines/postgres/adapter/connection.js';
import { installPostgres } from '../../src/engines/postgres/ledger/install.js';
import { DEFAULTS } from '../../src/config/schema.js';

const loadDefaults = (): typeof DEFAULTS => DEFAULTS;
import { startPgEngine, type PgEngine } from '../fixtures/pg-engine.js';
import { startPgTestServer, type PgTestServer } from '../fixtures/pg-server.js';
import { PG_ATTACKS, PG_DENIALS, variants, type PgAttack } from './attacks.js';

/**
 * Every attack on the ledgers, in every spelling: first shown to change a
 * bare PostgreSQL (the same objects, without cotwire's walls, as a
 * superuser), then refused by cotwire, and refused again by PostgreSQL's
 * own permissions when the guard is bypassed (a client connected straight
 * to PostgreSQL as the role cotwire runs client statements as).
 */

let engine: PgEngine;
let server: PgTestServer;
let through: pg.Client;
let direct: pg.Client;
let watcher: PostgresConnection;
let bareAdmin: PostgresConnection;
const BARE = 'bare';
const HOST_FILE = '/tmp/cotwire-attack-out';

/**
 * Everything an attack could change that must not change: rows, definitions, walls, functions, the log.
 * `upTo` (the log's size when the baseline was taken) leaves out what the server appends meanwhile (its
 * record of each refusal): rows past it, and the log's nodes and the heads of the server's own ledgers; a
 * client ledger must have no row past it at all. Null compares every row (the bare twin has no log).
 */
async function protectedState(conn: PostgresConnection, upTo: bigint | null): Promise<string> {
  const q = (sql: string): Promise<unknown[][]> => conn.query(sql).catch((err: unknown) => [[`error: ${(err as Error).message}`]]);
  const parts: unknown[] = [];
  const ledgers = (await q(
    `SELECT c.oid::regclass::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p', 'v', 'm') AND c.relname ILIKE '\\_cot%' ORDER BY 1`,
  )) as Array<[string]>;
  parts.push(ledgers);
  const server = /_cot_(security_events|checkpoints)$/;
  for (const [t] of ledgers) {
    const upto = upTo === null ? '' : `WHERE x.ledger_seq <= ${upTo}`;
    parts.push(await q(`SELECT count(*), md5(string_agg(x::text, '|' ORDER BY x::text)) FROM ${t} x ${upto}`));
    if (upTo !== null && !server.test(t)) parts.push(await q(`SELECT count(*) FROM ${t}`));
  }
  parts.push(
    await q(`SELECT c.relname, c.relowner::regrole::text, c.relacl::text, c.relrowsecurity, c.relhasrules, obj_description(c.oid, 'pg_class')
             FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname IN ('public', 'cotwire') AND c.relname ILIKE '%cot%' ORDER BY 1`),
  );
  parts.push(
    await q(`SELECT attrelid::regclass::text, attname, format_type(atttypid, atttypmod), attnotnull, col_description(attrelid, attnum) FROM pg_attribute
             WHERE attrelid IN (SELECT oid FROM pg_class WHERE relname ILIKE '\\_cot%') AND attnum > 0 AND NOT attisdropped ORDER BY 1, 2`),
  );
  parts.push(await q(`SELECT tgrelid::regclass::text, tgname, tgenabled FROM pg_trigger WHERE NOT tgisinternal ORDER BY 1, 2`));
  parts.push(await q(`SELECT ev_class::regclass::text, rulename FROM pg_rewrite WHERE rulename <> '_RETURN' ORDER BY 1, 2`));
  parts.push(await q(`SELECT polrelid::regclass::text, polname FROM pg_policy ORDER BY 1, 2`));
  parts.push(await q(`SELECT indexrelid::regclass::text, indrelid::regclass::text FROM pg_index WHERE indrelid::regclass::text ILIKE '%cot%' ORDER BY 1`));
  parts.push(await q(`SELECT inhrelid::regclass::text, inhparent::regclass::text FROM pg_inherits ORDER BY 1`));
  parts.push(
    await q(`SELECT p.oid::regprocedure::text, p.proowner::regrole::text, md5(p.prosrc) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
             WHERE n.nspname IN ('public', 'cotwire') ORDER BY 1`),
  );
  parts.push(await q(`SELECT evtname, evtenabled FROM pg_event_trigger ORDER BY 1`));
  const nodes = upTo === null ? '' : `WHERE position < 2 * ${upTo} - bit_count(${upTo}::bit(64))`;
  parts.push(await q(`SELECT count(*), md5(string_agg(position::text || encode(hash, 'hex'), '' ORDER BY position)) FROM cotwire.log_nodes ${nodes}`));
  parts.push(await q(upTo === null ? 'SELECT size FROM cotwire.log_head' : `SELECT size >= ${upTo} FROM cotwire.log_head`));
  parts.push(await q(`SELECT md5(string_agg(x::text, '|' ORDER BY x::text)) FROM cotwire.chain_heads x WHERE ledger !~ '_cot_(security_events|checkpoints)$'`));
  parts.push(await q(`SELECT holder FROM cotwire.signer`));
  parts.push(await q(`SELECT md5(string_agg(x::text, '|' ORDER BY x::text)) FROM cotwire.secrets x`));
  return JSON.stringify(parts, (_, v: unknown) => (typeof v === 'bigint' ? v.toString() : v));
}

async function logSize(): Promise<bigint> {
  const [[size]] = (await watcher.query('SELECT size FROM cotwire.log_head')) as [[bigint]];
  return size;
}

/** Runs an attack, by the simple query protocol (or the extended one, when it has parameters or `extended`); answers its error, or null. */
async function runAs(client: pg.Client, attack: PgAttack, extended = false): Promise<unknown> {
  try {
    if (extended) await client.query({ text: attack.sql, values: (attack.params ?? []) as unknown[], queryMode: 'extended' } as pg.QueryConfig);
    else await (attack.params === undefined ? client.query(attack.sql) : client.query(attack.sql, attack.params as unknown[]));
    return null;
  } catch (err) {
    // A failed statement may leave the session in a transaction block.
    await client.query('ROLLBACK').catch(() => undefined);
    return err;
  }
}

async function seedBare(): Promise<void> {
  await bareAdmin.run('BEGIN');
  // The server's ledgers are cotwire/v3: each row has its salt (32 hex digits).
  await bareAdmin.run(`INSERT INTO public._cot_steps (trace_id, session_id, step_index, step_type, content, prev_hash, current_hash, has_embedding, created_at, ledger_seq, row_salt)
    SELECT gen_random_uuid(), 's' || (i % 2), i, 'Observation', 'c' || i, '', 'h' || i, false, now(), i, md5(i::text) FROM generate_series(1, 3) i`);
  await bareAdmin.run(
    `INSERT INTO public._cot_events (session_id, kind, step_index, prev_hash, current_hash, created_at, ledger_seq) VALUES ('e', 'start', 0, '', 'h', now(), 10)`,
  );
  await bareAdmin.run(`INSERT INTO cotwire.log_nodes VALUES (0, sha256('x'))`);
  await bareAdmin.run(`INSERT INTO cotwire.chain_heads VALUES ('main._cot_steps', 's0', 1, 'h')`);
  await bareAdmin.run('COMMIT');
}

beforeAll(async () => {
  await loadModule();
  engine = await startPgEngine();
  // No checkpoint during the attacks: the only appends are the records of refusals.
  server = await startPgTestServer(engine, { checkpoint: { ...loadDefaults().checkpoint, intervalSeconds: 86_400 } });
  through = await server.client();
  await through.query('CREATE TABLE notes (id int, body text)');
  await through.query("INSERT INTO notes VALUES (1, 'hello'), (2, 'world')");
  await through.query('CREATE TABLE _cot_events (session_id text NOT NULL, kind text)');
  await through.query("INSERT INTO _cot_events VALUES ('e', 'start'), ('e', 'stop')");
  await through.query(
    "INSERT INTO _cot_steps (session_id, step_type, content) VALUES ('s1', 'Observation', 'a'), ('s1', 'Decision', 'b'), ('s2', 'Action', 'c')",
  );
  await through.query('GRANT SELECT ON notes TO PUBLIC');
  direct = new pg.Client({ connectionString: engine.adminUrl });
  direct.on('error', () => undefined);
  await direct.connect();
  watcher = await engine.admin();
  // The bare twin: the same objects, as a superuser sees them, without cotwire's triggers.
  await watcher.run(`CREATE DATABASE ${BARE}`);
  bareAdmin = await PostgresConnection.open(engine.url.replace(/\/postgres$/, `/${BARE}`));
  await installPostgres(bareAdmin, 'bare');
  // The bare twin's own connection works without cotwire's walls too.
  await bareAdmin.run('SET session_replication_role = replica');
  await bareAdmin.run(
    'CREATE TABLE public._cot_events (session_id text NOT NULL, kind text, step_index integer NOT NULL, prev_hash text NOT NULL, current_hash text NOT NULL, created_at timestamptz NOT NULL, ledger_seq bigint NOT NULL)',
  );
  await bareAdmin.run('CREATE TABLE notes (id int, body text)');
  await bareAdmin.run("INSERT INTO notes VALUES (1, 'hello'), (2, 'world')");
  await seedBare();
}, 120_000);

afterAll(async () => {
  direct?.end().catch(() => undefined);
  bareAdmin?.close();
  await server?.close();
  engine?.stop();
  rmSync(HOST_FILE, { force: true });
});

/** A superuser session on the bare twin, each attack its own (an attack may commit; the state is compared after). */
async function bareClient(): Promise<pg.Client> {
  const c = new pg.Client({ connectionString: engine.url.replace(/\/postgres$/, `/${BARE}`) });
  c.on('error', () => undefined);
  await c.connect();
  // Without cotwire's walls: its triggers and event trigger stay defined (an attack may drop them) but do not fire.
  await c.query('SET session_replication_role = replica');
  return c;
}

describe('attacks on a PostgreSQL engine', () => {
  it('each base attack really changes a bare PostgreSQL', async () => {
    const inert: string[] = [];
    for (const attack of PG_ATTACKS) {
      const before = await protectedState(bareAdmin, null);
      const client = await bareClient();
      let failed: unknown = null;
      try {
        await client.query('BEGIN');
        for (const part of [attack]) await client.query(part.sql, (part.params ?? undefined) as unknown[] | undefined);
      } catch (err) {
        failed = err;
      }
      // Read the effect inside the attacker's own transaction, then undo it.
      const after = failed === null ? await protectedStateOf(client) : before;
      await client.query('ROLLBACK').catch(() => undefined);
      await client.end();
      const hostTouched = existsSync(HOST_FILE);
      rmSync(HOST_FILE, { force: true });
      // An attack that committed on its own (its text has COMMIT) is undone by reseeding.
      if ((await protectedState(bareAdmin, null)) !== before) await reseedBare();
      if (failed !== null || (after === before && !hostTouched))
        inert.push(`${attack.sql}: ${failed === null ? 'changed nothing' : (failed as Error).message}`);
    }
    expect(inert).toEqual([]);
  }, 300_000);

  it('cotwire refuses every spelling of every attack, and nothing changes', async () => {
    const upTo = await logSize();
    const before = await protectedState(watcher, upTo);
    const changed: string[] = [];
    const reachedPostgres: string[] = [];
    let total = 0;
    for (const base of PG_ATTACKS) {
      for (const attack of variants(base)) {
        total++;
        const err = (await runAs(through, attack)) as { code?: string } | null;
        if (err === null) changed.push(`accepted: ${JSON.stringify(attack.sql)}`);
        // And by the extended protocol (Parse, Bind, Execute), which reaches the guard another way.
        if ((await runAs(through, attack, true)) === null) changed.push(`accepted (extended): ${JSON.stringify(attack.sql)}`);
        // What the guard can read it refuses itself; only code PostgreSQL runs later (a DO block, a function body) meets PostgreSQL's permissions.
        if (
          !['dynamic', 'function', 'procedure'].includes(base.technique) &&
          parses(attack.sql) &&
          /^permission denied/.test((err as Error | null)?.message ?? '')
        ) {
          reachedPostgres.push(attack.sql);
        }
        if (existsSync(HOST_FILE)) changed.push(`touched the host: ${JSON.stringify(attack.sql)}`);
        const now = await protectedState(watcher, upTo);
        if (now !== before) {
          changed.push(`changed the ledgers: ${JSON.stringify(attack.sql)}`);
          break;
        }
      }
    }
    expect(changed).toEqual([]);
    expect(total).toBeGreaterThan(1500);
    // What the server appended meanwhile (its records of the refusals) still chains.
    const verdicts = (await watcher.query('SELECT coalesce(bool_and(valid), true) FROM cot_verify_security_events_all()')) as [[boolean]];
    expect(verdicts[0]?.[0]).toBe(true);
    expect(reachedPostgres).toEqual([]);
    const events = await watcher.query('SELECT count(*) FROM public._cot_security_events');
    expect(Number((events[0] as [bigint])[0])).toBeGreaterThan(0);
  }, 300_000);

  it('refuses what would stall or rewrite a ledger, through cotwire and straight to PostgreSQL', async () => {
    const accepted: string[] = [];
    for (const base of PG_DENIALS) {
      for (const attack of variants(base)) {
        if ((await runAs(through, attack)) === null) accepted.push(`cotwire: ${JSON.stringify(attack.sql)}`);
        if ((await runAs(direct, attack)) === null) accepted.push(`PostgreSQL: ${JSON.stringify(attack.sql)}`);
      }
    }
    expect(accepted).toEqual([]);
  }, 300_000);

  it('with the guard bypassed, PostgreSQL itself refuses every attack as the client role', async () => {
    const upTo = await logSize();
    const before = await protectedState(watcher, upTo);
    const changed: string[] = [];
    for (const base of PG_ATTACKS) {
      for (const attack of variants(base)) {
        await runAs(direct, attack);
        if (existsSync(HOST_FILE)) changed.push(`touched the host: ${JSON.stringify(attack.sql)}`);
        if ((await protectedState(watcher, upTo)) !== before) {
          changed.push(`changed the ledgers: ${JSON.stringify(attack.sql)}`);
          break;
        }
      }
    }
    expect(changed).toEqual([]);
  }, 300_000);
});

function parses(sql: string): boolean {
  try {
    parseSync(sql);
    return true;
  } catch {
    return false;
  }
}

async function protectedStateOf(client: pg.Client): Promise<string> {
  const conn = { query: async (sql: string) => (await client.query({ text: sql, rowMode: 'array' })).rows as unknown[][] } as unknown as PostgresConnection;
  // An attack that ends with its own COMMIT leaves no transaction to probe in: the state is read as committed.
  const inBlock = await client.query('SAVEPOINT probe').then(
    () => true,
    () => false,
  );
  try {
    return await protectedState(conn, null);
  } finally {
    if (inBlock) await client.query('ROLLBACK TO SAVEPOINT probe').catch(() => undefined);
  }
}

async function reseedBare(): Promise<void> {
  for (const t of ['_cot_steps', '_cot_events']) await bareAdmin.run(`DELETE FROM public.${t}`).catch(() => undefined);
  await bareAdmin.run('DELETE FROM cotwire.log_nodes').catch(() => undefined);
  await bareAdmin.run('DELETE FROM cotwire.chain_heads').catch(() => undefined);
  await seedBare();
}
