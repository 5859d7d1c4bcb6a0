/**
 * cotwire on a PostgreSQL engine (issue 21), against the same statements
 * sent to that PostgreSQL directly: what the proxy costs on reads and on
 * appends, and what a second instance adds. One durable PostgreSQL
 * (Debian's, fsync on) serves three databases: `engine`, which cotwire
 * instances run on; `plain`, the same INSERTs into a table of the same
 * shape with no chain; `anchor`, the same INSERTs chained by a trigger
 * under a per-session lock (bench/dataset.ts). The systems alternate, each
 * measured `runs` times; medians are reported, with the ratio.
 *
 *   npm run bench:postgres [-- --quick]
 *
 * Results go to docs/benchmarks.md between the bench-postgres markers.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { anchorSchema, postgresSchema, STEP_COLUMNS, stepRow } from './dataset.js';
import { startPostgres } from '../test/fixtures/postgres.js';
import { serverNodeFlags } from '../test/fixtures/node-flags.js';

const QUICK = process.argv.includes('--quick');
const RUNS = QUICK ? 3 : 5;
const SINGLE = QUICK ? 300 : 2_000;
/** Appends into each system, unmeasured, before the append workloads. */
const WARMUP = QUICK ? 1_000 : 8_000;
/** Reads through each system, unmeasured, before the read workloads. */
const READ_WARMUP = QUICK ? 300 : 2_000;
const POINTS = QUICK ? 300 : 2_000;
const STREAM = QUICK ? 50_000 : 500_000;
const CLIENTS = 16;
/** `--steps N`: after the rest, a session's replay and verification in ledgers of N steps (sessions of 50, interleaved). */
const STEPS = Number(process.argv[process.argv.indexOf('--steps') + 1] ?? 0) || 0;
/** `--scale-only`: those alone, into a section of their own in docs/benchmarks.md. */
const SCALE_ONLY = process.argv.includes('--scale-only');
const MARK = SCALE_ONLY ? `bench-postgres-steps-${STEPS}` : 'bench-postgres';

const tmp = mkdtempSync(join(tmpdir(), 'cotwire-bench-pg-'));
const postgres = await startPostgres({ durable: true });
const url = (db: string): string => `postgres://postgres@127.0.0.1:${postgres.port}/${db}`;
const admin = new pg.Client({ connectionString: url('postgres') });
await admin.connect();
for (const db of ['engine', 'plain', 'anchor']) await admin.query(`CREATE DATABASE ${db}`);
await admin.end();

async function connect(port: number, user: string, database: string, n: number): Promise<pg.Client[]> {
  return Promise.all(
    Array.from({ length: n }, async () => {
      const c = new pg.Client({ host: '127.0.0.1', port, user, database });
      c.on('error', () => undefined);
      await c.connect();
      return c;
    }),
  );
}

async function startInstance(): Promise<{ child: ChildProcess; port: number }> {
  // dist-bench/bench → the built CLI in dist/; checkpoints go nowhere but the database.
  const child = spawn(
    process.execPath,
    [
      ...serverNodeFlags(),
      join(import.meta.dirname, '../../dist/launch.cjs'),
      'serve',
      '--port',
      '0',
      '--http-port',
      '0',
      '--engine-url',
      url('engine'),
      '--db',
      join(tmp, 'unused.duckdb'),
      '--log-level',
      'info',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  child.stdout?.on('data', (b: Buffer) => (out += b.toString()));
  child.stderr?.on('data', (b: Buffer) => (out += b.toString()));
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setInterval(() => {
      const m = /listening on 127\.0\.0\.1:(\d+)/.exec(out);
      if (m !== null) {
        clearInterval(timer);
        resolve(Number(m[1]));
      }
    }, 20);
    child.once('exit', () => {
      clearInterval(timer);
      reject(new Error(`cotwire exited: ${out}`));
    });
  });
  return { child, port };
}

const first = await startInstance();
const second = await startInstance();
const plain = await connect(postgres.port, 'postgres', 'plain', CLIENTS);
await plain[0]?.query(postgresSchema().replace('trace_id uuid PRIMARY KEY', 'trace_id uuid PRIMARY KEY DEFAULT gen_random_uuid()'));
await plain[0]?.query(
  "ALTER TABLE _cot_steps ALTER COLUMN step_index SET DEFAULT 0, ALTER COLUMN prev_hash SET DEFAULT '', ALTER COLUMN current_hash SET DEFAULT '', ALTER COLUMN ledger_seq SET DEFAULT 0",
);
const anchor = await connect(postgres.port, 'postgres', 'anchor', CLIENTS);
await anchor[0]?.query(anchorSchema());
const cot = await connect(first.port, 'cotwire', 'cotwire', CLIENTS);
const cot2 = await connect(second.port, 'cotwire', 'cotwire', CLIENTS / 2);
// A proxy's second hop alone, for the reads: a bare TCP relay in a process of its own, in front of the same PostgreSQL.
const relayProcess = spawn(process.execPath, [join(import.meta.dirname, 'tcp-relay.js'), String(postgres.port)], { stdio: ['ignore', 'pipe', 'inherit'] });
const relayPort = await new Promise<number>((resolve, reject) => {
  relayProcess.stdout?.once('data', (b: Buffer) => resolve(Number(b.toString().trim())));
  relayProcess.once('exit', (code) => reject(new Error(`the TCP relay exited (${code}) before it listened`)));
});

const INSERT = `INSERT INTO _cot_steps (${STEP_COLUMNS.join(', ')}) VALUES (${STEP_COLUMNS.map((_, i) => `$${i + 1}`).join(', ')})`;
type System = 'cotwire' | 'plain' | 'trigger' | 'relay';
const clientsOf = (s: System): pg.Client[] => (s === 'cotwire' ? cot : s === 'plain' ? plain : anchor);

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
}

let batch = 0;
/** Appends per second: `n` single-row INSERTs spread over `clients`, each client on its own sessions. */
async function appends(clients: readonly pg.Client[], n: number): Promise<number> {
  const tag = `b${++batch}`;
  const per = Math.ceil(n / clients.length);
  const t = performance.now();
  await Promise.all(
    clients.map(async (c, k) => {
      for (let i = 0; i < per; i++) await c.query(INSERT, stepRow(`${tag}-s${k % 8}`, i));
    }),
  );
  return (per * clients.length) / ((performance.now() - t) / 1000);
}

async function p50(c: pg.Client, n: number, query: (i: number) => Promise<unknown>): Promise<number> {
  const latencies: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    await query(i);
    latencies.push(performance.now() - t);
  }
  void c;
  return median(latencies);
}

interface Result {
  readonly name: string;
  readonly unit: string;
  readonly values: Record<string, number>;
  readonly ratio: number;
  readonly against: string;
}
const results: Result[] = [];

async function compare(
  name: string,
  unit: string,
  better: 'higher' | 'lower',
  systems: readonly System[],
  measure: (s: System) => Promise<number>,
): Promise<void> {
  const runs: Record<string, number[]> = {};
  for (let r = 0; r < RUNS; r++) {
    for (let k = 0; k < systems.length; k++) {
      const s = systems[(r + k) % systems.length] as System;
      const value = await measure(s);
      runs[s] = [...(runs[s] ?? []), value];
    }
  }
  const values = Object.fromEntries(Object.entries(runs).map(([s, xs]) => [s, median(xs)]));
  const cotM = values.cotwire as number;
  const against = systems.includes('plain') ? 'plain' : (systems[1] as string);
  const other = values[against] as number;
  const ratio = better === 'higher' ? cotM / other : other / cotM;
  results.push({ name, unit, values, ratio, against });
  console.log(
    `${name}: ${Object.entries(values)
      .map(([s, v]) => `${s} ${v.toFixed(2)}`)
      .join(', ')} ${unit}; cotwire ÷ ${against} ${ratio.toFixed(2)}×`,
  );
}

// Seed rows for the reads (through cotwire, so that they are chained), and a table to stream.
for (let i = 0; i < 50; i++) await cot[0]?.query(INSERT, stepRow('read-session', i));
// The trigger chain verifies the same session, of the same 50 steps.
for (let i = 0; i < 50; i++) await anchor[0]?.query(INSERT, stepRow('read-session', i));
await plain[0]?.query(
  `INSERT INTO _cot_steps (${STEP_COLUMNS.join(', ')}) SELECT 'read-session', 'agent', 'Observation', 'x', '{}', '{}', 0.5, 1, 1, 'm', '{}' FROM generate_series(1, 50)`,
);
for (const c of [cot[0], plain[0]]) {
  await c?.query('CREATE TABLE stream (id bigint, body text, at timestamptz, score double precision)');
  await c?.query(`INSERT INTO stream SELECT i, repeat('x', 40), now(), i / 3.0 FROM generate_series(1, ${STREAM}) i`);
  await c?.query('CREATE INDEX stream_id ON stream (id)');
}

type Reader = 'cotwire' | 'plain' | 'relay';
const [relayed] = await connect(relayPort, 'postgres', 'plain', 1);
const [engineDirect] = await connect(postgres.port, 'postgres', 'engine', 1);
const [engineRelayed] = await connect(relayPort, 'postgres', 'engine', 1);
if (!SCALE_ONLY) {
  const readers: Record<Reader, pg.Client> = { cotwire: cot[0] as pg.Client, plain: plain[0] as pg.Client, relay: relayed as pg.Client };
  // Unmeasured reads first, the same in every system, as for the appends below.
  for (const s of ['cotwire', 'plain', 'relay'] as const) {
    for (let i = 0; i < READ_WARMUP; i++) {
      await readers[s].query('SELECT 1');
      await readers[s].query({ name: 'point', text: 'SELECT * FROM stream WHERE id = $1', values: [1 + (i % 1000)] });
    }
  }
  await compare('SELECT 1, one client (p50)', 'ms', 'lower', ['cotwire', 'plain', 'relay'], (s) =>
    p50(readers[s as Reader], POINTS, () => readers[s as Reader].query('SELECT 1')),
  );
  await compare('a point read by key, prepared (p50)', 'ms', 'lower', ['cotwire', 'plain', 'relay'], (s) =>
    p50(readers[s as Reader], POINTS, (i) =>
      readers[s as Reader].query({ name: 'point', text: 'SELECT * FROM stream WHERE id = $1', values: [1 + (i % 1000)] }),
    ),
  );
  // The same 50 rows, read from the same table: through cotwire, and from cotwire's database directly (and relayed).
  const replayers: Record<Reader, pg.Client> = { cotwire: cot[0] as pg.Client, plain: engineDirect as pg.Client, relay: engineRelayed as pg.Client };
  await compare('one session replayed, 50 steps (p50)', 'ms', 'lower', ['cotwire', 'plain', 'relay'], (s) =>
    p50(replayers[s as Reader], POINTS / 4, () =>
      replayers[s as Reader].query("SELECT * FROM public._cot_steps WHERE session_id = 'read-session' ORDER BY step_index"),
    ),
  );
  await compare(`SELECT * of ${STREAM.toLocaleString('en')} rows to a client`, 'rows/s', 'higher', ['cotwire', 'plain'], async (s) => {
    const t = performance.now();
    const r = await readers[s as 'cotwire' | 'plain'].query('SELECT * FROM stream');
    return r.rowCount === null ? 0 : r.rowCount / ((performance.now() - t) / 1000);
  });
  // Unmeasured appends first, into each system and each instance: a server's first thousands of appends run code
  // that is not yet optimised, on a heap still growing (the first 16-client run cost cotwire about twice the CPU a
  // row of the third), and PostgreSQL's tables and indexes start empty in all three.
  for (const clients of [cot, cot2, plain, anchor]) await appends(clients, WARMUP);
  await compare('single-row INSERT, 1 client', 'rows/s', 'higher', ['cotwire', 'plain', 'trigger'], (s) => appends(clientsOf(s).slice(0, 1), SINGLE / 4));
  await compare(`single-row INSERT, ${CLIENTS} clients`, 'rows/s', 'higher', ['cotwire', 'plain', 'trigger'], (s) => appends(clientsOf(s), SINGLE));

  // A second instance: the same 16 clients, split over two instances, against all on one.
  const runsTwo: number[] = [];
  const runsOne: number[] = [];
  for (let r = 0; r < RUNS; r++) {
    runsOne.push(await appends(cot, SINGLE));
    runsTwo.push(await appends([...cot.slice(0, CLIENTS / 2), ...cot2], SINGLE));
  }
  const one = median(runsOne);
  const two = median(runsTwo);
  results.push({
    name: `single-row INSERT, ${CLIENTS} clients over two instances`,
    unit: 'rows/s',
    values: { 'one instance': one, 'two instances': two },
    ratio: two / one,
    against: 'one instance',
  });
  console.log(`two instances: ${two.toFixed(0)} rows/s against ${one.toFixed(0)} on one (${(two / one).toFixed(2)}×)`);

  // Verification of one session by the functions init installed, against the trigger chain's own check.
  const verifyP50 = median(
    await Promise.all([0].map(() => p50(cot[0] as pg.Client, POINTS / 4, () => (cot[0] as pg.Client).query("SELECT * FROM cot_verify('read-session')")))),
  );
  const anchorVerify = await p50(anchor[0] as pg.Client, POINTS / 4, () => (anchor[0] as pg.Client).query("SELECT * FROM cot_verify('read-session')"));
  results.push({
    name: 'one session verified in SQL (p50)',
    unit: 'ms',
    values: { cotwire: verifyP50, trigger: anchorVerify },
    ratio: anchorVerify / verifyP50,
    against: 'trigger',
  });
}

if (STEPS > 0) {
  // The same rows in all three, 10,000 a statement: through cotwire (chained by its writer), plain, and chained by the trigger.
  const sessions = Math.max(1, Math.floor(STEPS / 50));
  const fill = `INSERT INTO _cot_steps (${STEP_COLUMNS.join(', ')})
    SELECT 'd-' || (i % $3), 'agent-' || (i % $3 % 1000), (ARRAY['Observation','Reasoning','ToolCall','ToolResult','Decision','FinalAnswer'])[1 + i % 6],
      $4, ('{"query":"order ' || i || '"}')::json, '{"ok":true}'::json, (i % 100) / 100.0, 20 + i % 900, 100 + i % 400, 'model-' || (i % 4), '{"run":1}'::json
    FROM generate_series($1::bigint, $2::bigint) i`;
  const content = String(stepRow('x', 0)[3]);
  // As a PostgreSQL user reading sessions would have it (cotwire's table and the trigger's have theirs).
  await plain[0]?.query('CREATE INDEX plain_session ON _cot_steps (session_id, step_index)');
  for (const [name, c] of [
    ['cotwire', cot[0]],
    ['plain', plain[0]],
    ['trigger', anchor[0]],
  ] as const) {
    const t = performance.now();
    for (let from = 0; from < STEPS; from += 10_000) await c?.query(fill, [from, Math.min(STEPS, from + 10_000) - 1, sessions, content]);
    console.log(`${name}: ${STEPS.toLocaleString('en')} steps written in ${((performance.now() - t) / 1000).toFixed(0)} s`);
  }
  await plain[0]?.query('ANALYZE _cot_steps');
  await anchor[0]?.query('ANALYZE _cot_steps');
  // cotwire embeds the selected steps of what was just written in the background; the reads are measured once it is
  // done (the same process serves them), and how long it took is said.
  const embedStart = performance.now();
  for (;;) {
    const { rows } = await (engineDirect as pg.Client).query(
      'SELECT (SELECT count(*) FROM public._cot_steps WHERE has_embedding)::int8 AS selected, (SELECT count(*) FROM public._cot_embeddings)::int8 AS embedded',
    );
    const { selected, embedded } = rows[0] as { selected: string; embedded: string };
    if (Number(embedded) >= Number(selected) || performance.now() - embedStart > 20 * 60_000) {
      console.log(
        `cotwire: ${Number(embedded).toLocaleString('en')} of ${Number(selected).toLocaleString('en')} selected steps embedded ${((performance.now() - embedStart) / 1000).toFixed(0)} s after the trigger's load`,
      );
      break;
    }
    await new Promise((r) => setTimeout(r, 1000));
  }
  // A session of 50 steps spread over the whole ledger, as agents working at once leave it.
  const session = `d-${Math.floor(sessions / 2)}`;
  const atScale = `in a ledger of ${STEPS.toLocaleString('en')} steps`;
  // Unmeasured reads of the same session first, through each system: the server's read path runs optimised code
  // after its first thousands of statements, and this process has so far only loaded rows.
  for (const s of ['cotwire', 'plain', 'trigger'] as const) {
    const c = clientsOf(s)[0] as pg.Client;
    for (let i = 0; i < READ_WARMUP; i++) await c.query('SELECT * FROM public._cot_steps WHERE session_id = $1 ORDER BY step_index', [session]);
  }
  await compare(`one session replayed, 50 steps, ${atScale} (p50)`, 'ms', 'lower', ['cotwire', 'plain', 'trigger'], (s) =>
    p50(clientsOf(s)[0] as pg.Client, POINTS / 4, () =>
      (clientsOf(s)[0] as pg.Client).query('SELECT * FROM public._cot_steps WHERE session_id = $1 ORDER BY step_index', [session]),
    ),
  );
  await compare(`one session verified in SQL, ${atScale} (p50)`, 'ms', 'lower', ['cotwire', 'trigger'], (s) =>
    p50(clientsOf(s)[0] as pg.Client, POINTS / 4, () => (clientsOf(s)[0] as pg.Client).query('SELECT * FROM cot_verify($1)', [session])),
  );
}

for (const c of [...cot, ...cot2, ...plain, ...anchor, engineDirect as pg.Client, relayed as pg.Client, engineRelayed as pg.Client])
  await c.end().catch(() => undefined);
relayProcess.kill('SIGTERM');
first.child.kill('SIGTERM');
second.child.kill('SIGTERM');
await new Promise((r) => setTimeout(r, 1000));
postgres.stop();
rmSync(tmp, { recursive: true, force: true });

const fmt = (v: number): string => (v >= 100 ? v.toFixed(0) : v.toFixed(2));
const machine = `${cpus().length} cores (${cpus()[0]?.model ?? 'unknown'}), Node ${process.version}`;
const section = `<!-- ${MARK}:start -->
Measured by \`npm run bench:postgres${((f) => (f === '' ? '' : ` --${f}`))([QUICK ? ' --quick' : '', STEPS > 0 ? ` --steps ${STEPS}` : '', SCALE_ONLY ? ' --scale-only' : ''].join(''))}\` on ${machine}, ${new Date().toISOString().slice(0, 10)}, against one durable PostgreSQL (fsync on). \`cotwire\` is cotwire with \`engine.kind: postgres\` on that PostgreSQL; \`plain\` the same statements sent to it directly, into a table of the same shape without a chain; \`trigger\` the same INSERTs chained by a trigger under a per-session lock; \`relay\` the reads sent to PostgreSQL through a bare TCP relay in a process of its own (a proxy's second hop, with nothing done to the bytes). The ratio is cotwire's speed ÷ the other's (above 1: cotwire is faster).

| workload | results (median of ${RUNS}) | ratio |
|---|---|---|
${results
  .map(
    (r) =>
      `| ${r.name} | ${Object.entries(r.values)
        .map(([s, v]) => `${s} ${fmt(v)} ${r.unit}`)
        .join('; ')} | ${r.ratio.toFixed(2)}× against ${r.against} |`,
  )
  .join('\n')}
<!-- ${MARK}:end -->`;
const docs = join(import.meta.dirname, '../../docs/benchmarks.md');
const text = readFileSync(docs, 'utf8');
const start = text.indexOf(`<!-- ${MARK}:start -->`);
const end = text.indexOf(`<!-- ${MARK}:end -->`);
writeFileSync(
  docs,
  start >= 0 && end > start ? `${text.slice(0, start)}${section}${text.slice(end + `<!-- ${MARK}:end -->`.length)}` : `${text.trimEnd()}\n\n${section}\n`,
);
