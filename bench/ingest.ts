import { cpus, totalmem } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { startupAudit } from './audit.js';
import { writeSection } from './report.js';
import { startCotwire } from './cotwire.js';
import { anchorSchema, PostgresChain, postgresSchema, SESSION_STEPS, STEP_COLUMNS } from './dataset.js';
import { exportSpans, otlpBatch, rowsOf } from './otlp.js';
import { seedCotwire } from './seed.js';
import { startPostgres } from '../test/fixtures/postgres.js';

/**
 * Issue 37: GenAI spans taken over OTLP/HTTP protobuf, against the same steps appended over the wire (cotwire,
 * plain PostgreSQL, PostgreSQL with the trigger chain), in interleaved rounds; and the viewer's page of one session
 * over a ledger of 1M steps, beside the two SQL calls it is made of. Results go to docs/benchmarks.md between the
 * bench-ingest markers. `--quick`: fewer requests and 100k steps.
 */

const QUICK = process.argv.includes('--quick');
const ROOT = join(import.meta.dirname, '..', '..');
const ROUNDS = 5;
const BATCH = 512;
const REQUESTS = QUICK ? 10 : 40;
const LEDGER = QUICK ? 100_000 : 1_000_000;
const PAGES = QUICK ? 50 : 200;

type System = 'otlp' | 'wire' | 'pg' | 'anchor';

const sql = `INSERT INTO _cot_steps (${STEP_COLUMNS.join(', ')}) VALUES ${Array.from({ length: BATCH }, (_, r) => `(${STEP_COLUMNS.map((_, i) => `$${r * STEP_COLUMNS.length + i + 1}`).join(', ')})`).join(', ')}`;

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] as number;
}

async function client(port: number, user: string, database: string): Promise<pg.Client> {
  const c = new pg.Client({ host: '127.0.0.1', port, user, database });
  c.on('error', () => undefined);
  await c.connect();
  return c;
}

const started = Date.now();
const postgres = await startPostgres({ durable: true });
const cotwire = await startCotwire(ROOT);
const lines: string[] = [];
try {
  const cot = await client(cotwire.port, 'cotwire', 'cotwire');
  const plain = await client(postgres.port, postgres.user, 'postgres');
  await plain.query(postgresSchema());
  await plain.query('CREATE DATABASE anchor');
  const anchor = await client(postgres.port, postgres.user, 'anchor');
  await anchor.query(anchorSchema());
  const chain = new PostgresChain();

  let run = 0;
  const rates: Record<System, number[]> = { otlp: [], wire: [], pg: [], anchor: [] };
  const cpu: number[] = [];
  const order: System[] = ['otlp', 'wire', 'pg', 'anchor'];
  for (let round = 0; round < ROUNDS; round++) {
    for (let k = 0; k < order.length; k++) {
      const system = order[(round + k) % order.length] as System;
      const session = `ingest-${run++}`;
      // The bodies are made before the clock starts, as an exporter has its spans before it sends them; the other
      // ways take the rows the server makes of the same spans.
      const bodies = Array.from({ length: REQUESTS }, (_, b) => otlpBatch(session, b * BATCH, BATCH));
      const batches = system === 'otlp' ? [] : bodies.map(rowsOf);
      const cpuBefore = cotwire.cpu().all;
      const t = performance.now();
      for (let b = 0; b < REQUESTS; b++) {
        const rows = batches[b] as Array<Array<string | number | null>>;
        if (system === 'otlp') await exportSpans(cotwire.httpPort, bodies[b] as Uint8Array);
        else if (system === 'wire') await cot.query(sql, rows.flat());
        else if (system === 'pg') await chain.insert(plain, rows);
        else await anchor.query(sql, rows.flat());
      }
      const seconds = (performance.now() - t) / 1000;
      rates[system].push((REQUESTS * BATCH) / seconds);
      if (system === 'otlp') cpu.push((cotwire.cpu().all - cpuBefore) / (REQUESTS * BATCH));
      console.log(`round ${round + 1} ${system}: ${((REQUESTS * BATCH) / seconds).toFixed(0)} per second`);
    }
  }
  const check = await cot.query("SELECT count(*)::int AS n, count(DISTINCT session_id)::int AS s FROM _cot_steps WHERE session_id LIKE 'ingest-%'");
  const expected = ROUNDS * 2 * REQUESTS * BATCH;
  if (check.rows[0].n !== expected) throw new Error(`cotwire holds ${check.rows[0].n} ingest steps, not ${expected}`);

  const m = (s: System): number => median(rates[s]);
  const range = (s: System): string => `${Math.min(...rates[s]).toFixed(0)}–${Math.max(...rates[s]).toFixed(0)}`;
  lines.push(
    `Run: ${new Date().toISOString().slice(0, 10)}, \`npm run bench:ingest${QUICK ? ' -- --quick' : ''}\`, ${Math.round((Date.now() - started) / 1000)} s. Machine: ${cpus().length} × ${cpus()[0]?.model ?? 'unknown CPU'}, ${Math.round(totalmem() / 2 ** 30)} GiB.`,
    '',
    `${ROUNDS} interleaved rounds of ${REQUESTS} requests of ${BATCH} steps, one client, each round a new session. The spans are GenAI chat spans (\`bench/otlp.ts\`); the INSERTs carry the rows the server makes of the same spans (their messages, tokens, model and \`metadata.otel\`), so the rows are the same both ways.`,
    '',
    '| how the steps arrive | steps/s, median (range) | ÷ cotwire over the wire |',
    '|---|---|---|',
    `| cotwire, OTLP/HTTP protobuf (the span decoded, mapped, checked against the session for duplicates, appended) | ${m('otlp').toFixed(0)} (${range('otlp')}) | ${(m('otlp') / m('wire')).toFixed(2)}× |`,
    `| cotwire, one ${BATCH}-row INSERT over the wire | ${m('wire').toFixed(0)} (${range('wire')}) | 1.00× |`,
    `| PostgreSQL, plain table, the same INSERT (the client chains) | ${m('pg').toFixed(0)} (${range('pg')}) | ${(m('pg') / m('wire')).toFixed(2)}× |`,
    `| PostgreSQL, trigger chain, the same INSERT | ${m('anchor').toFixed(0)} (${range('anchor')}) | ${(m('anchor') / m('wire')).toFixed(2)}× |`,
    '',
    `cotwire's CPU per span over OTLP (the whole process): ${median(cpu).toFixed(0)} µs.`,
  );

  // The viewer's session page over a ledger of LEDGER steps: cold sessions, as an auditor opens them.
  await cot.end();
  await cotwire.stop();
  const loaded = await seedCotwire(cotwire.databasePath, LEDGER);
  await cotwire.restart();
  const reader = await client(cotwire.port, 'cotwire', 'cotwire');
  const audited = await startupAudit(20 * 60, reader);
  console.log(`loaded ${LEDGER} steps (${Math.round(loaded)} steps/s offline); the start-up audit ended after ${audited?.toFixed(0) ?? 'more than 1200'} s`);
  const sessions = Math.floor(LEDGER / SESSION_STEPS);
  let pick = 0;
  const fresh = (): string => `d${LEDGER}-${(pick++ * 7919) % sessions}`;
  const timed = async (n: number, call: () => Promise<void>): Promise<number> => {
    const latencies: number[] = [];
    for (let i = 0; i < n; i++) {
      const t = performance.now();
      await call();
      latencies.push(performance.now() - t);
    }
    return median(latencies);
  };
  const page = await timed(PAGES, async () => {
    const res = await fetch(`http://127.0.0.1:${cotwire.httpPort}/sessions/${fresh()}`);
    const text = await res.text();
    if (res.status !== 200 || (text.match(/<article class="step"/g) ?? []).length !== SESSION_STEPS) throw new Error(`the viewer answered ${res.status}`);
  });
  const replay = await timed(PAGES, async () => {
    await reader.query('SELECT * FROM cot_replay($1)', [fresh()]);
  });
  const verify = await timed(PAGES, async () => {
    await reader.query('SELECT * FROM cot_verify($1)', [fresh()]);
  });
  const held = Number((await reader.query('SELECT count(*) AS n FROM _cot_steps')).rows[0].n);
  lines.push(
    '',
    `The viewer's page of one ${SESSION_STEPS}-step session (\`GET /sessions/S\`: its verification, its steps, their redactions, rendered), over ${(held / 1e6).toFixed(2)}M steps, sessions read cold, p50 of ${PAGES}:`,
    '',
    '| read | p50 ms |',
    '|---|---|',
    `| the page, over HTTP | ${page.toFixed(2)} |`,
    `| \`cot_replay(session)\` over the wire | ${replay.toFixed(2)} |`,
    `| \`cot_verify(session)\` over the wire | ${verify.toFixed(2)} |`,
  );
  await reader.end();
  await anchor.end();
  await plain.end();
} finally {
  await cotwire.remove();
  postgres.stop();
}

const table = lines.join('\n');
console.log(`\n${table}`);
writeSection(join(ROOT, 'docs', 'benchmarks.md'), 'bench-ingest', table);
