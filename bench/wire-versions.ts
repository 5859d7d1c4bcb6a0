import { readdirSync, rmSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { basename, dirname, join } from 'node:path';
import pg from 'pg';
import { writeSection } from './report.js';
import { startCotwire, type CotwireProcess } from './cotwire.js';
import { STEP_COLUMNS, stepRow } from './dataset.js';
import { DuckDBEngine } from '../src/engines/duckdb/adapter/engine.js';
import { HASH_VERSION, HASH_VERSION_V2, HASH_VERSION_V3, type HashVersion, STEPS_DDL, STEPS_INDEX_DDL } from '../src/ledger/chain/schema.js';
import { makeScramVerifier } from '../src/session/scram.js';

/**
 * Issue 36 through the wire: appends into `_cot_steps` chained with
 * cotwire/v1, v2 and v3, one server each, as clients send them (single-row
 * INSERTs in autocommit, 100-row INSERT ... VALUES batches), in alternating
 * rounds; and what a reader with an org_id pays for the filter the server
 * writes into its statements, against a reader without one, on the same
 * ledger of two organisations. Results go to docs/benchmarks.md between the
 * bench-wire markers. `--quick` runs a quarter of each size.
 */

const QUICK = process.argv.includes('--quick');
const ROOT = join(import.meta.dirname, '..', '..');
const ROUNDS = 5;
const SINGLES = QUICK ? 500 : 2000;
const BATCHES = QUICK ? 50 : 200;
const SCOPED_STEPS = QUICK ? 50_000 : 200_000;
const PASSWORD = 'pw';

const columns = STEP_COLUMNS.join(', ');
const width = STEP_COLUMNS.length;
const batchSql = `INSERT INTO _cot_steps (${columns}) VALUES ${Array.from({ length: 100 }, (_, r) => `(${Array.from({ length: width }, (_, c) => `$${r * width + c + 1}`).join(', ')})`).join(', ')}`;
const singleSql = `INSERT INTO _cot_steps (${columns}) VALUES (${Array.from({ length: width }, (_, c) => `$${c + 1}`).join(', ')})`;

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] as number;
}

function configFile(dir: string, version: HashVersion, users: string): string {
  const path = join(dir, `cotwire-${version.replace('/', '-')}.yaml`);
  // v1 is not a setting (new ledgers are never v1): its server gets a database made offline with a v1 _cot_steps.
  writeFileSync(path, `ledger:\n  hashVersion: ${version === HASH_VERSION ? HASH_VERSION_V2 : version}\n  sessionCacheMB: 64\n${users}`);
  return path;
}

/** A server whose _cot_steps is chained with `version`. */
async function serverWith(version: HashVersion, users = ''): Promise<CotwireProcess> {
  const dir = join(ROOT, 'dist-bench');
  const server = await startCotwire(ROOT, ['--config', configFile(dir, version, users)]);
  if (version !== HASH_VERSION) return server;
  // Everything the first start made beside the database goes too (journal, heads, log nodes, key, checkpoints).
  await server.stop();
  const folder = dirname(server.databasePath);
  for (const f of readdirSync(folder)) if (f.startsWith(basename(server.databasePath))) rmSync(join(folder, f), { recursive: true, force: true });
  const engine = await DuckDBEngine.open({ path: server.databasePath });
  const conn = await engine.connect();
  // A table without a recorded version is chained with v1, as every ledger made before v2 was.
  await conn.run(STEPS_DDL);
  for (const ddl of STEPS_INDEX_DDL) await conn.run(ddl);
  conn.close();
  await engine.close();
  await server.restart();
  return server;
}

async function client(server: CotwireProcess, user = 'cotwire'): Promise<pg.Client> {
  const c = new pg.Client({ host: '127.0.0.1', port: server.port, user, password: PASSWORD, database: 'cotwire' });
  await c.connect();
  return c;
}

/** Steps per second of `count` single-row INSERTs, one client, autocommit. */
async function singles(c: pg.Client, tag: string, count: number): Promise<number> {
  const start = performance.now();
  for (let i = 0; i < count; i++) await c.query({ name: 'single', text: singleSql, values: stepRow(`${tag}-${i % 50}`, i) });
  return count / ((performance.now() - start) / 1000);
}

/** Steps per second of `count` 100-row INSERTs, one client, autocommit. */
async function batches(c: pg.Client, tag: string, count: number): Promise<number> {
  const start = performance.now();
  for (let b = 0; b < count; b++) {
    const values = Array.from({ length: 100 }, (_, r) => stepRow(`${tag}-${b % 50}`, b * 100 + r)).flat();
    await c.query({ name: 'batch', text: batchSql, values });
  }
  return (count * 100) / ((performance.now() - start) / 1000);
}

async function appends(): Promise<string[]> {
  const versions = [HASH_VERSION, HASH_VERSION_V2, HASH_VERSION_V3] as const;
  const servers = new Map<HashVersion, CotwireProcess>();
  for (const v of versions) servers.set(v, await serverWith(v));
  const single = new Map<HashVersion, number[]>(versions.map((v) => [v, []]));
  const batch = new Map<HashVersion, number[]>(versions.map((v) => [v, []]));
  // The server's CPU over the batches: its main thread (the protocol, the chain) and the whole process (DuckDB's threads, the commitment worker).
  const batchCpu = new Map<HashVersion, { main: number; all: number }>(versions.map((v) => [v, { main: 0, all: 0 }]));
  try {
    for (let round = 0; round < ROUNDS; round++) {
      for (const v of versions) {
        const c = await client(servers.get(v) as CotwireProcess);
        try {
          single.get(v)?.push(await singles(c, `s${round}`, SINGLES));
          const server = servers.get(v) as CotwireProcess;
          const before = server.cpu();
          batch.get(v)?.push(await batches(c, `b${round}`, BATCHES));
          const after = server.cpu();
          const sum = batchCpu.get(v) as { main: number; all: number };
          sum.main += after.main - before.main;
          sum.all += after.all - before.all;
        } finally {
          await c.end();
        }
      }
    }
  } finally {
    for (const s of servers.values()) await s.remove();
  }
  const rate = (xs: readonly number[]): string =>
    `${Math.round(median(xs)).toLocaleString('en')} (${Math.round(Math.min(...xs)).toLocaleString('en')}–${Math.round(Math.max(...xs)).toLocaleString('en')})`;
  const steps = ROUNDS * BATCHES * 100;
  const cpuPerStep = (v: HashVersion): string => {
    const c = batchCpu.get(v) ?? { main: 0, all: 0 };
    return `${(c.main / steps).toFixed(0)} / ${(c.all / steps).toFixed(0)}`;
  };
  const vs = (m: Map<HashVersion, number[]>, v: HashVersion): string => `${(median(m.get(v) ?? []) / median(m.get(HASH_VERSION) ?? [])).toFixed(2)}x`;
  return [
    '| steps/s into `_cot_steps`, one client | v1 | v2 | v3 | v2 ÷ v1 | v3 ÷ v1 |',
    '|---|---|---|---|---|---|',
    `| Single-row INSERT, autocommit (${SINGLES} a round) | ${rate(single.get(HASH_VERSION) ?? [])} | ${rate(single.get(HASH_VERSION_V2) ?? [])} | ${rate(single.get(HASH_VERSION_V3) ?? [])} | ${vs(single, HASH_VERSION_V2)} | ${vs(single, HASH_VERSION_V3)} |`,
    `| 100-row INSERT ... VALUES (${BATCHES} a round) | ${rate(batch.get(HASH_VERSION) ?? [])} | ${rate(batch.get(HASH_VERSION_V2) ?? [])} | ${rate(batch.get(HASH_VERSION_V3) ?? [])} | ${vs(batch, HASH_VERSION_V2)} | ${vs(batch, HASH_VERSION_V3)} |`,
    `| server CPU per step of those batches, µs: main thread / whole process | ${cpuPerStep(HASH_VERSION)} | ${cpuPerStep(HASH_VERSION_V2)} | ${cpuPerStep(HASH_VERSION_V3)} | | |`,
  ];
}

/** p50 in milliseconds of `runs` runs of a query. */
async function p50(c: pg.Client, text: string, values: () => unknown[], runs: number): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < runs; i++) {
    const start = performance.now();
    await c.query({ text, values: values() });
    times.push(performance.now() - start);
  }
  return median(times);
}

async function scopedReads(): Promise<string[]> {
  const verifier = makeScramVerifier(PASSWORD);
  const users = `users:\n${[
    ['cotwire', 'admin', ''],
    ['ra', 'reader', '    org_id: a\n'],
    ['everyone', 'reader', ''],
  ]
    .map(([name, role, extra]) => `  - name: ${name}\n    password: "${verifier}"\n    role: ${role}\n${extra}`)
    .join('')}`;
  const server = await serverWith(HASH_VERSION_V3, users);
  try {
    const admin = await client(server);
    const sessions = SCOPED_STEPS / 50;
    for (let b = 0; b < SCOPED_STEPS / 100; b++) {
      const rows = Array.from({ length: 100 }, (_, r) => {
        const i = b * 100 + r;
        const session = Math.floor(i / 50);
        return [session % 2 === 0 ? 'a' : 'b', ...stepRow(`s-${session}`, i)];
      });
      await admin.query({
        name: 'seed',
        text: `INSERT INTO _cot_steps (org_id, ${columns}) VALUES ${rows.map((_, r) => `(${Array.from({ length: width + 1 }, (_, c) => `$${r * (width + 1) + c + 1}`).join(', ')})`).join(', ')}`,
        values: rows.flat(),
      });
    }
    await admin.end();
    const scoped = await client(server, 'ra');
    const whole = await client(server, 'everyone');
    // Sessions of organisation a (even numbers), which both readers may read.
    let n = 0;
    const session = (): unknown[] => [`s-${(n++ * 2) % sessions}`];
    const queries: Array<[string, string, () => unknown[], number]> = [
      [
        'One session by SQL (SELECT ... WHERE session_id = $1 ORDER BY step_index)',
        'SELECT * FROM _cot_steps WHERE session_id = $1 ORDER BY step_index',
        session,
        200,
      ],
      ['One session by cot_replay($1)', 'SELECT * FROM cot_replay($1)', session, 200],
      ['Verify one session (cot_verify($1))', 'SELECT * FROM cot_verify($1)', session, 100],
      ['Count by step type over the ledger', 'SELECT step_type, count(*) FROM _cot_steps GROUP BY 1', () => [], 20],
      ['Session summaries (cot_session_summary())', 'SELECT count(*) FROM cot_session_summary()', () => [], 10],
    ];
    const lines = [
      `| p50 ms, ${SCOPED_STEPS.toLocaleString('en')} steps of two organisations (v3) | reader without org_id | reader with org_id | scoped ÷ unscoped (time) |`,
      '|---|---|---|---|',
    ];
    for (const [name, text, values, runs] of queries) {
      // Each once first: the connection's macros, the statement's plan.
      await whole.query({ text, values: values() });
      await scoped.query({ text, values: values() });
      const a = await p50(whole, text, values, runs);
      const b = await p50(scoped, text, values, runs);
      lines.push(`| ${name} | ${a.toFixed(2)} | ${b.toFixed(2)} | ${(b / a).toFixed(2)}x |`);
    }
    await scoped.end();
    await whole.end();
    return lines;
  } finally {
    await server.remove();
  }
}

const started = performance.now();
const appendTable = await appends();
const readTable = await scopedReads();
const cpu = cpus()[0]?.model.replace(/\s+/g, ' ').trim() ?? 'unknown';
const section = [
  `Measured by \`npm run bench:wire\`${QUICK ? ' (--quick)' : ''} on ${cpus().length} cores (${cpu}), Node ${process.version}, ${new Date().toISOString().slice(0, 10)}, ${Math.round((performance.now() - started) / 1000)} s: medians of ${ROUNDS} alternating rounds, with the range.`,
  '',
  ...appendTable,
  '',
  ...readTable,
].join('\n');
console.log(section);
writeSection(join(ROOT, 'docs', 'benchmarks.md'), 'bench-wire', section);
