import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useCotwireAndPostgres } from '../fixtures/compared.js';

/**
 * drizzle-kit pull, which writes a Drizzle schema from a live database: run
 * against cotwire and against PostgreSQL over the same schema, the tables it
 * writes (columns, types, defaults, keys, foreign keys, unique constraints,
 * indexes) must be PostgreSQL's. cotwire's own ledgers are there too, and
 * are left out; of a view, its name and its columns' names are compared
 * (docs/compatibility.md: a view's column of varchar(n) reads as text, and
 * its query is printed as DuckDB keeps it). An identity column reads as a
 * serial one (the same page), so the schema has none.
 */

const run = promisify(execFile);
const DRIZZLE_KIT = join(import.meta.dirname, '..', '..', 'node_modules', '.bin', 'drizzle-kit');

const SCHEMA = [
  'CREATE TABLE customers (id serial PRIMARY KEY, name varchar(80) NOT NULL, email text UNIQUE, active boolean NOT NULL DEFAULT true, since timestamptz DEFAULT now(), prefs jsonb)',
  'CREATE TABLE orders (id bigserial PRIMARY KEY, customer_id integer NOT NULL REFERENCES customers (id), total numeric(10,2) NOT NULL, tags text[], placed date, note text)',
  'CREATE INDEX orders_customer_idx ON orders (customer_id)',
  'CREATE INDEX orders_placed_total_idx ON orders (placed, total)',
  'CREATE UNIQUE INDEX customers_name_key ON customers (name)',
  'CREATE TABLE tokens (id uuid PRIMARY KEY, label text, score double precision, n smallint DEFAULT 0)',
  'CREATE VIEW open_orders AS SELECT id, customer_id, total FROM orders WHERE placed IS NULL',
];

const servers = useCotwireAndPostgres();
const dirs: string[] = [];

/** The schema file drizzle-kit pull writes, as its exported declarations by name. */
async function pull(port: number, user: string, database: string): Promise<Map<string, string>> {
  const out = mkdtempSync(join(tmpdir(), 'cotwire-drizzle-'));
  dirs.push(out);
  await run(DRIZZLE_KIT, ['pull', '--dialect', 'postgresql', '--url', `postgres://${user}@127.0.0.1:${port}/${database}`, '--out', out], {
    maxBuffer: 64 * 2 ** 20,
    env: { ...process.env, CI: 'true' },
  });
  expect(readdirSync(out)).toContain('schema.ts');
  const text = readFileSync(join(out, 'schema.ts'), 'utf8');
  return new Map(
    text
      .split(/\n(?=export const )/)
      .slice(1)
      .map((block) => [/^export const (\w+)/.exec(block)?.[1] ?? '', block.trim()] as const),
  );
}

let cot: Map<string, string>;
let real: Map<string, string>;

beforeAll(async () => {
  const c = await servers.cotwire.client();
  const p = new pg.Client({ host: '127.0.0.1', port: servers.postgres.port, user: servers.postgres.user, database: 'postgres' });
  await p.connect();
  try {
    for (const sql of SCHEMA) {
      await c.query(sql);
      await p.query(sql);
    }
  } finally {
    await p.end();
  }
  [cot, real] = await Promise.all([pull(servers.cotwire.port, 'cotwire', 'cotwire'), pull(servers.postgres.port, servers.postgres.user, 'postgres')]);
}, 240_000);

afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe('drizzle-kit pull', () => {
  it("writes PostgreSQL's tables: columns, types, defaults, keys, foreign keys, unique constraints and indexes", () => {
    const tables = [...real.keys()].filter((k) => real.get(k)?.includes('pgTable(') === true);
    expect(tables.sort()).toEqual(['customers', 'orders', 'tokens']);
    for (const name of tables) expect(cot.get(name), name).toBe(real.get(name));
    // The rest of what cotwire has are its ledgers.
    const others = [...cot.keys()].filter((k) => !real.has(k));
    expect(
      others.every((k) => /^cot[A-Z]/.test(k)),
      others.join(', '),
    ).toBe(true);
  });

  it('writes the view, with its columns', () => {
    const columns = (block: string | undefined): string[] => [...(block ?? '').matchAll(/^\s*(\w+): /gm)].map((m) => m[1] as string);
    expect(cot.has('openOrders')).toBe(true);
    expect(columns(cot.get('openOrders'))).toEqual(columns(real.get('openOrders')));
    expect(columns(real.get('openOrders'))).toEqual(['id', 'customerId', 'total']);
  });
});
