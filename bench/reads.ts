/**
 * The reads agents and auditors make one at a time, and the single-row
 * append, side by side with PostgreSQL (plain, and with the trigger chain of
 * dataset.ts), over interleaved datasets of 1M and 10M steps: the part of
 * `npm run bench` that issue 38's targets are about, runnable alone.
 *
 *   npm run bench:reads                      1M and 10M steps
 *   npm run bench:reads -- --steps 200000    one smaller dataset
 *
 * Prints one line per workload; writes nothing.
 */
import { statSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { startPostgres } from '../test/fixtures/postgres.js';
import { startupAudit } from './audit.js';
import { startCotwire } from './cotwire.js';
import { anchorSchema, PostgresChain, postgresSchema, SESSION_STEPS, STEP_COLUMNS, stepRow } from './dataset.js';
import { p50 } from './search.js';
import { DEFAULT_MEMORY_MB } from '../src/config/schema.js';
import { seedAnchor, seedCotwire, seedPostgres } from './seed.js';

const ROOT = join(import.meta.dirname, '..', '..');
const at = process.argv.indexOf('--steps');
const SIZES = at > 0 ? [Number(process.argv[at + 1])] : [1_000_000, 9_000_000];
const READS = 200;
/**
 * The reads of the warm-up round, on each system, before the rounds that count: V8 compiles a path
 * only after many calls (a point read's p50 on a fresh server, rounds of 2,000: 317, 135, 79, 75, 73 µs).
 */
const WARMUP_READS = 1_000;
const STREAMED = 100_000;
/** The longest the reads wait for the start-up audit before they are measured beside it. */
const AUDIT_WAIT_SECONDS = 20 * 60;
const RUNS = 3;

type System = 'cot' | 'pg' | 'anchor';

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? Number.NaN;
}

async function client(port: number, user: string, database: string): Promise<pg.Client> {
  const c = new pg.Client({ host: '127.0.0.1', port, user, database });
  await c.connect();
  return c;
}

function report(name: string, unit: string, values: Partial<Record<System, number[]>>, better: 'lower' | 'higher'): void {
  const m = (s: System): number => median(values[s] ?? []);
  const ratio = (s: System): string => {
    const [a, b] = [m('cot'), m(s)];
    if (!Number.isFinite(a) || !Number.isFinite(b)) return '—';
    return `${(better === 'lower' ? b / a : a / b).toFixed(2)}×`;
  };
  const f = (v: number): string => (Number.isFinite(v) ? (unit === 'ms' ? v.toFixed(3) : v.toFixed(0)) : '—');
  console.log(`| ${name} | ${unit} | ${f(m('cot'))} | ${f(m('pg'))} | ${f(m('anchor'))} | ${ratio('pg')} | ${ratio('anchor')} |`);
}

async function main(): Promise<void> {
  const postgres = await startPostgres({ durable: true });
  const cotwire = await startCotwire(ROOT);
  try {
    const plain = await client(postgres.port, postgres.user, 'postgres');
    await plain.query(postgresSchema());
    await plain.query('CREATE DATABASE anchor');
    const anchor = await client(postgres.port, postgres.user, 'anchor');
    await anchor.query(anchorSchema());
    let cot = await client(cotwire.port, 'cotwire', 'cotwire');
    const INSERT = `INSERT INTO _cot_steps (${STEP_COLUMNS.join(', ')}) VALUES (${STEP_COLUMNS.map((_, i) => `$${i + 1}`).join(', ')})`;
    const chain = new PostgresChain();
    console.log('| workload | unit | cotwire | PostgreSQL | trigger chain | ÷ PostgreSQL | ÷ trigger chain |');
    console.log('|---|---|---|---|---|---|---|');
    let run = 0;
    const appends: Record<System, number[]> = { cot: [], pg: [], anchor: [] };
    // The first round warms each system up (see round() below) and is not counted.
    for (let r = -1; r < RUNS; r++) {
      for (const s of ['cot', 'pg', 'anchor'] as const) {
        const session = `single-${run++}`;
        const c = s === 'cot' ? cot : s === 'pg' ? plain : anchor;
        const n = r < 0 ? 500 : 2_000;
        const t = performance.now();
        for (let i = 0; i < n; i++) {
          if (s === 'pg') await chain.insert(c, [stepRow(session, i)]);
          else await c.query(INSERT, stepRow(session, i));
        }
        if (r >= 0) appends[s].push(n / ((performance.now() - t) / 1000));
      }
    }
    report('single-row INSERT of a step, autocommit, 1 connection', 'steps/s', appends, 'higher');
    for (const size of SIZES) {
      await cot.end();
      await cotwire.stop();
      const t = performance.now();
      await seedCotwire(cotwire.databasePath, size);
      console.log(`seeded ${size} steps into cotwire in ${((performance.now() - t) / 1000).toFixed(0)} s`);
      await cotwire.restart();
      cotwire.resetPeak();
      const filled = performance.now();
      await cotwire.logged(/the row store of _cot_steps holds the ledger/, 3_600);
      const storeBytes = statSync(`${cotwire.databasePath}.steps`).size;
      const dbBytes = statSync(cotwire.databasePath).size;
      console.log(
        `the row store filled in ${((performance.now() - filled) / 1000).toFixed(1)} s: ${(storeBytes / 2 ** 20).toFixed(0)} MiB beside the database's ${(dbBytes / 2 ** 20).toFixed(0)} MiB`,
      );
      cot = await client(cotwire.port, 'cotwire', 'cotwire');
      await seedPostgres(plain, size);
      await seedAnchor(anchor, size);
      // Measured as a server spends most of its time: between audits, not under the start-up one.
      const audited = await startupAudit(AUDIT_WAIT_SECONDS, cot);
      console.log(
        audited === null
          ? `the start-up audit of ${size} steps had not ended ${AUDIT_WAIT_SECONDS / 60} minutes after PostgreSQL's load: the reads ran beside it`
          : `the start-up audit ended ${audited.toFixed(0)} s after PostgreSQL's load`,
      );
      const held = Number((await cot.query('SELECT count(*) AS n FROM _cot_steps')).rows[0].n);
      const label = `${(held / 1e6).toFixed(1)}M`;
      const sessions = Math.max(1, Math.floor(size / SESSION_STEPS));
      let pick = 0;
      const fresh = (): string => `d${size}-${(pick++ * 7919) % sessions}`;
      const wanted = (READS * RUNS + WARMUP_READS) * 2;
      const ids = async (c: pg.Client): Promise<string[]> => {
        const got = (await c.query(`SELECT trace_id::text AS id FROM _cot_steps ORDER BY random() LIMIT ${wanted}`)).rows.map((x: { id: string }) => x.id);
        if (got.length < wanted) throw new Error(`the step reads need ${wanted} steps, each read once; the ledger holds ${got.length}`);
        return got;
      };
      const traceIds = { cot: await ids(cot), pg: await ids(plain), anchor: await ids(anchor) };
      // Each system reads each of its sampled steps once: a counter of its own, over enough of them for every round.
      const traced: Record<System, number> = { cot: 0, pg: 0, anchor: 0 };
      const replay: Partial<Record<System, number[]>> = { cot: [], anchor: [] };
      const verify: Partial<Record<System, number[]>> = { cot: [], anchor: [] };
      const trace: Partial<Record<System, number[]>> = { cot: [], pg: [], anchor: [] };
      const point: Partial<Record<System, number[]>> = { cot: [], pg: [], anchor: [] };
      const loop: Partial<Record<System, number[]>> = { cot: [], anchor: [] };
      let loops = 0;
      /**
       * One round of every read on each system; `record` false makes it a warm-up, whose figures
       * are dropped: the first statements after a restart run code V8 has not compiled yet, which
       * PostgreSQL's C does not pay. Its sessions and steps are not read again, so the reads that
       * count stay cold.
       */
      const round = async (reads: number, record: boolean): Promise<void> => {
        const keep = (into: number[] | undefined, value: number): void => {
          if (record) into?.push(value);
        };
        for (const s of ['cot', 'anchor'] as const) {
          const c = s === 'cot' ? cot : anchor;
          const replaySql = s === 'cot' ? 'SELECT * FROM cot_replay($1)' : 'SELECT * FROM _cot_steps WHERE session_id = $1 ORDER BY step_index';
          keep(replay[s], await p50(reads, () => c.query({ name: 'replay', text: replaySql, values: [fresh()] })));
          keep(verify[s], await p50(reads, () => c.query({ name: 'verify', text: 'SELECT * FROM cot_verify($1)', values: [fresh()] })));
          const latencies: number[] = [];
          for (let agent = 0; agent < 10; agent++) {
            const session = `loop-${size}-${loops++}`;
            for (let i = 0; i < reads / 10; i++) {
              await c.query(INSERT, stepRow(session, i));
              const t0 = performance.now();
              await c.query({ name: 'replay', text: replaySql, values: [session] });
              latencies.push(performance.now() - t0);
            }
          }
          keep(loop[s], median(latencies));
        }
        for (const s of ['cot', 'pg', 'anchor'] as const) {
          const c = s === 'cot' ? cot : s === 'pg' ? plain : anchor;
          const sql = s === 'cot' ? 'SELECT * FROM cot_trace($1)' : 'SELECT * FROM _cot_steps WHERE trace_id = $1';
          keep(trace[s], await p50(reads, () => c.query({ name: 'trace', text: sql, values: [traceIds[s][traced[s]++]] })));
          keep(
            point[s],
            await p50(reads, () => c.query({ name: 'point', text: 'SELECT * FROM _cot_steps WHERE trace_id = $1', values: [traceIds[s][traced[s]++]] })),
          );
        }
      };
      await round(WARMUP_READS, false);
      for (let r = 0; r < RUNS; r++) await round(READS, true);
      report(`replay of one 50-step session, cold, over ${label} steps (p50)`, 'ms', replay, 'lower');
      report(`verify of one 50-step session, cold, over ${label} steps (p50)`, 'ms', verify, 'lower');
      report(`one step by trace_id (cot_trace), cold, over ${label} steps (p50)`, 'ms', trace, 'lower');
      report(`point SELECT by trace_id, 1 connection, over ${label} steps (p50)`, 'ms', point, 'lower');
      report(`the agent loop: append, then replay (p50 of the replay), over ${label} steps`, 'ms', loop, 'lower');
      const streamed: Partial<Record<System, number[]>> = { cot: [], pg: [] };
      for (let r = 0; r < RUNS; r++) {
        for (const s of ['cot', 'pg'] as const) {
          const t = performance.now();
          await (s === 'cot' ? cot : plain).query({ text: `SELECT * FROM _cot_steps LIMIT ${STREAMED}`, rowMode: 'array' });
          streamed[s]?.push(STREAMED / ((performance.now() - t) / 1000));
        }
      }
      report(`SELECT * streaming ${STREAMED / 1000}k steps to the client, over ${label} steps`, 'steps/s', streamed, 'higher');
      const verifyStarted = performance.now();
      await cot.query('SELECT count(*) FROM cot_verify_all()');
      report(
        `chain verification, SQL (cot_verify_all), over ${label} steps`,
        'steps/s',
        { cot: [held / ((performance.now() - verifyStarted) / 1000)] },
        'higher',
      );
      const mib = (bytes: number): string => (bytes / 2 ** 20).toFixed(0);
      console.log(
        `cotwire's peak RSS over ${label} steps, from its restart (the row store's fill, the reads, the verification): ${mib(cotwire.peakRss())} MiB, of which anonymous ${mib(cotwire.peakAnon())} MiB (the rest: the row store's mapped file pages); limits.memoryMB: ${DEFAULT_MEMORY_MB} MiB`,
      );
    }
    await Promise.all([cot.end(), plain.end(), anchor.end()]);
  } finally {
    await cotwire.remove();
    postgres.stop();
  }
}

await main();
