/**
 * Catalog introspection, cotwire against PostgreSQL (issue 36): the same
 * schema of 100 tables (primary keys, foreign keys, unique constraints,
 * indexes, defaults and five views) in each, then what tools that read a
 * whole schema take: `pg_dump --schema-only` and SQLAlchemy 2's
 * `MetaData.reflect()` (psycopg 3). drizzle-kit pull is measured when
 * drizzle-kit is installed (it is not a dependency of this project).
 *
 *   npm run bench -- --catalog     this section alone (prints its table, writes nothing)
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import type { Row } from './report.js';

const run = promisify(execFile);

/** The tables the catalog is read for: each of a mix of types, one a foreign key to the one before, every fifth a unique column, every third an index. */
export function catalogSchema(tables = 100, views = 5): string[] {
  const out: string[] = [];
  for (let i = 0; i < tables; i++) {
    const columns = [
      'id integer PRIMARY KEY',
      'name varchar(80) NOT NULL',
      'created_at timestamp',
      'amount numeric(12,2)',
      'flag boolean DEFAULT false',
      'note text',
    ];
    if (i > 0) columns.push(`parent_id integer REFERENCES t${i - 1} (id)`);
    if (i % 5 === 0) columns.push('code varchar(20) UNIQUE');
    out.push(`CREATE TABLE t${i} (${columns.join(', ')})`);
    if (i % 3 === 0) out.push(`CREATE INDEX t${i}_name_idx ON t${i} (name)`);
  }
  for (let v = 0; v < views; v++) out.push(`CREATE VIEW v${v} AS SELECT id, name FROM t${v}`);
  return out;
}

/** A server to read the catalog of: where it listens, the user and the database. */
export interface CatalogTarget {
  readonly port: number;
  readonly user: string;
  readonly database: string;
}

const PYTHON = existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';

async function seconds(work: () => Promise<unknown>): Promise<number> {
  const t = performance.now();
  await work();
  return (performance.now() - t) / 1000;
}

async function pgDump(target: CatalogTarget): Promise<number> {
  return seconds(() =>
    run('pg_dump', ['--schema-only', '-h', '127.0.0.1', '-p', String(target.port), '-U', target.user, target.database], { maxBuffer: 64 * 2 ** 20 }),
  );
}

async function reflect(root: string, target: CatalogTarget): Promise<number> {
  const url = `postgresql+psycopg://${target.user}@127.0.0.1:${target.port}/${target.database}`;
  const { stdout } = await run(PYTHON, [join(root, 'bench', 'catalog-reflect.py'), url], {
    env: { ...process.env, PYTHONPATH: join(root, '.ci', 'python') },
    maxBuffer: 2 ** 20,
  });
  return (JSON.parse(stdout) as { seconds: number }).seconds;
}

async function drizzlePull(root: string, target: CatalogTarget): Promise<number> {
  const out = mkdtempSync(join(tmpdir(), 'cotwire-drizzle-'));
  try {
    const url = `postgres://${target.user}@127.0.0.1:${target.port}/${target.database}`;
    return await seconds(() =>
      run(join(root, 'node_modules', '.bin', 'drizzle-kit'), ['pull', '--dialect', 'postgresql', '--url', url, '--out', out], { maxBuffer: 64 * 2 ** 20 }),
    );
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
}

/** The catalog rows of the report: each tool's seconds on each server, interleaved, and cotwire's ratio (PostgreSQL ÷ cotwire, above 1 better for cotwire). */
export async function catalogBench(root: string, cotwire: CatalogTarget, postgres: CatalogTarget, runs: number, notes: string[]): Promise<Row[]> {
  for (const target of [cotwire, postgres]) {
    const c = new pg.Client({ host: '127.0.0.1', port: target.port, user: target.user, database: target.database });
    await c.connect();
    try {
      for (const statement of catalogSchema()) await c.query(statement);
    } finally {
      await c.end();
    }
  }
  const tools: Array<{ name: string; measure: (t: CatalogTarget) => Promise<number> }> = [
    { name: 'pg_dump --schema-only of 100 tables and 5 views', measure: pgDump },
  ];
  if (existsSync(join(root, '.ci', 'python', 'sqlalchemy'))) {
    tools.push({ name: 'SQLAlchemy 2 MetaData.reflect() of 100 tables and 5 views (psycopg 3)', measure: (t) => reflect(root, t) });
  } else notes.push('SQLAlchemy reflection not measured: SQLAlchemy 2 is not installed in .ci/python (see .ci/run).');
  if (existsSync(join(root, 'node_modules', '.bin', 'drizzle-kit'))) {
    tools.push({ name: 'drizzle-kit pull of 100 tables and 5 views', measure: (t) => drizzlePull(root, t) });
  } else notes.push('drizzle-kit pull not measured: drizzle-kit is not installed (not a dependency of this project).');
  const rows: Row[] = [];
  let changes = 0;
  for (const tool of tools) {
    // Each tool twice: with the schema as the previous run left it (cotwire then answers catalog reads it kept),
    // and as the first read after a change to it, as after a migration.
    for (const afterChange of [false, true]) {
      const cot: number[] = [];
      const pgs: number[] = [];
      for (let i = 0; i < runs; i++) {
        if (afterChange) await changeSchema([cotwire, postgres], `bench_change_${changes++}`);
        // The first of each pair alternates, so that neither always runs on a cold cache.
        if (i % 2 === 0) {
          cot.push(await tool.measure(cotwire));
          pgs.push(await tool.measure(postgres));
        } else {
          pgs.push(await tool.measure(postgres));
          cot.push(await tool.measure(cotwire));
        }
      }
      const ratio = median(pgs) / median(cot);
      const name = afterChange ? `${tool.name}, first read after a change to the schema` : tool.name;
      rows.push({ name, unit: 's', cot, pg: pgs, ratio, target: '≥ 0.5× (at most twice PostgreSQL’s time)', met: ratio >= 0.5, rssMiB: Number.NaN });
      console.log(`${name}: cotwire ${median(cot).toFixed(2)} s, PostgreSQL ${median(pgs).toFixed(2)} s, ratio ${ratio.toFixed(3)}`);
    }
  }
  return rows;
}

/** The pause after DDL in which cotwire's catalog snapshot settles and is refreshed (250 ms of quiet, then about 0.3 s). */
const SETTLE_MS = 1500;

/** A table made and dropped on each server, then the pause: what a tool reads next is a schema changed since its last read. */
async function changeSchema(targets: readonly CatalogTarget[], table: string): Promise<void> {
  for (const target of targets) {
    const c = new pg.Client({ host: '127.0.0.1', port: target.port, user: target.user, database: target.database });
    await c.connect();
    try {
      await c.query(`CREATE TABLE ${table} (id integer)`);
      await c.query(`DROP TABLE ${table}`);
    } finally {
      await c.end();
    }
  }
  await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
}

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length === 0 ? Number.NaN : s.length % 2 === 1 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
}
