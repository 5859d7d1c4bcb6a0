/**
 * cotwire and PostgreSQL side by side (issue 7): the same client (`pg`), the
 * same rows, each workload run several times with the two systems
 * interleaved, and the median and spread of each reported with the ratio
 * cotwire ÷ PostgreSQL. Prints a markdown table and writes it, with the
 * machine's description, to docs/benchmarks.md.
 *
 *   npm run bench              the full run (1M and 10M steps for the analytic queries)
 *   npm run bench -- --quick   under three minutes (smaller datasets, fewer runs)
 *   npm run bench -- --catalog catalog introspection alone (bench/catalog.ts): prints its rows, writes nothing
 */
import { execFile, spawnSync } from 'node:child_process';
import { cpus, totalmem } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { startCotwire, type CotwireProcess } from './cotwire.js';
import { Client as McpClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { anchorSchema, SESSION_STEPS, STEP_COLUMNS, postgresSchema, PostgresChain, stepRow } from './dataset.js';
import { seedAnchor, seedCotwire, seedPostgres } from './seed.js';
import { appendRate, proofMicros } from './log.js';
import { exportSpans, otlpBatch, rowsOf } from './otlp.js';
import { appendRatesWhileAuditing, auditCost, startupAudit } from './audit.js';
import { writeReport, type Row } from './report.js';
import { SEARCH_SIZES, searchBench } from './search.js';
import { catalogBench } from './catalog.js';
import { startPostgres, type ThrowawayPostgres } from '../test/fixtures/postgres.js';
import { Guard } from '../src/engines/duckdb/guard/guard.js';
import { tokenize } from '../src/sql/lexer.js';

const run = promisify(execFile);
// The same guard the server builds (engines/duckdb/start.ts), for timing its cached decision in this process.
const guardForBench = await Guard.create({ prefixes: ['_cot'], reservedFunctions: new Set(), engineSettings: new Set() });
const QUICK = process.argv.includes('--quick');
const CATALOG_ONLY = process.argv.includes('--catalog');
const ROOT = join(import.meta.dirname, '..', '..');

interface Sizes {
  readonly runs: number;
  readonly singleRows: number;
  readonly batches: number;
  readonly pointQueries: number;
  readonly analytic: readonly number[];
  readonly stream: number;
  /** Rows of the long read whose memory is watched (0: skipped). */
  readonly flatStream: number;
  /** Appends per run of the log on/off comparison. */
  readonly logAppends: number;
  /** Steps of the ledger one audit is timed over. */
  readonly auditRows: number;
  /** Steps already in the ledger while appends race audits. */
  readonly auditAppendBase: number;
  /** Sessions (or steps) read per run of each agent read workload. */
  readonly sessionReads: number;
}

const SIZES: Sizes = QUICK
  ? {
      runs: 3,
      singleRows: 300,
      batches: 20,
      pointQueries: 200,
      analytic: [100_000],
      stream: 100_000,
      flatStream: 0,
      logAppends: 3_000,
      auditRows: 200_000,
      auditAppendBase: 100_000,
      sessionReads: 40,
    }
  : {
      runs: 5,
      singleRows: 2_000,
      batches: 100,
      pointQueries: 1_000,
      analytic: [1_000_000, 10_000_000],
      stream: 1_000_000,
      flatStream: 10_000_000,
      logAppends: 20_000,
      auditRows: 1_000_000,
      auditAppendBase: 1_000_000,
      sessionReads: 200,
    };

/** cotwire, plain PostgreSQL, and PostgreSQL doing the same job with a trigger (dataset.ts, anchorSchema). */
type System = 'cot' | 'pg' | 'anchor';

/** Runs `measure` for each system, rotating which goes first, `runs` times; NaN marks a system a workload does not measure. */
async function interleaved(runs: number, measure: (system: System) => Promise<number>): Promise<Record<System, number[]>> {
  const out: Record<System, number[]> = { cot: [], pg: [], anchor: [] };
  const systems: System[] = ['cot', 'pg', 'anchor'];
  for (let i = 0; i < runs; i++) {
    for (let k = 0; k < systems.length; k++) {
      const system = systems[(i + k) % systems.length] as System;
      out[system].push(await measure(system));
    }
  }
  return out;
}

/** The longest the reads wait for the start-up audit before they are measured beside it. */
const AUDIT_WAIT_SECONDS = 20 * 60;

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
}

/** Streams a query's rows, counting and dropping each (pg keeps none when rows are listened to). */
function countRows(client: pg.Client, text: string): Promise<number> {
  return new Promise((resolve, reject) => {
    let n = 0;
    const query = client.query(new pg.Query({ text, rowMode: 'array' } as pg.QueryConfig));
    query.on('row', () => n++);
    query.on('end', () => resolve(n));
    query.on('error', reject);
  });
}

/** What the guard spends on a statement whose decision it has cached, in µs (measured in this process). */
function guardDecisionMicros(): number {
  const text = 'SELECT * FROM _cot_steps WHERE trace_id = $1';
  const tokens = tokenize(text);
  const input = { text, tokens, kind: 'SELECT' as const };
  guardForBench.decide(input);
  const n = 200_000;
  const t = performance.now();
  for (let i = 0; i < n; i++) {
    guardForBench.precheck(text, tokens);
    guardForBench.decide(input);
  }
  return ((performance.now() - t) * 1000) / n;
}

/** Trace ids of `n` steps drawn at random from a system's ledger. */
async function sampleIds(client: pg.Client, n: number): Promise<string[]> {
  const r = await client.query(`SELECT trace_id::text AS id FROM _cot_steps ORDER BY random() LIMIT ${n}`);
  return r.rows.map((row: { id: string }) => row.id);
}

/** How each read path's p50 grows from one dataset size to the next: flat is 1×, linear is the size ratio. */
function flatness(byLabel: ReadonlyMap<string, ReadonlyArray<{ readonly steps: string; readonly row: Row }>>): string[] {
  const lines: string[] = [];
  for (const [label, sizes] of byLabel) {
    const [small, large] = [sizes[0], sizes[sizes.length - 1]];
    if (small === undefined || large === undefined || small === large) continue;
    const growth = (xs: readonly number[] | undefined, ys: readonly number[] | undefined): string => {
      const [a, b] = [median((xs ?? []).filter(Number.isFinite)), median((ys ?? []).filter(Number.isFinite))];
      return Number.isFinite(a) && Number.isFinite(b) && a > 0 ? `${(b / a).toFixed(2)}×` : '—';
    };
    lines.push(
      `- ${label}, ${small.steps} → ${large.steps} steps: cotwire ${growth(small.row.cot, large.row.cot)}, PostgreSQL with the trigger chain ${growth(small.row.anchor, large.row.anchor)}`,
    );
  }
  return lines;
}

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

/** Catalog introspection (bench/catalog.ts): a cotwire of its own, and a database of its own in `postgres`. */
async function catalogRows(postgres: ThrowawayPostgres, notes: string[]): Promise<Row[]> {
  const cotwire = await startCotwire(ROOT);
  try {
    const admin = new pg.Client({ host: '127.0.0.1', port: postgres.port, user: postgres.user, database: 'postgres' });
    await admin.connect();
    await admin.query('CREATE DATABASE catalog');
    await admin.end();
    return await catalogBench(
      ROOT,
      { port: cotwire.port, user: 'cotwire', database: 'cotwire' },
      { port: postgres.port, user: postgres.user, database: 'catalog' },
      SIZES.runs,
      notes,
    );
  } finally {
    await cotwire.remove().catch(() => undefined);
  }
}

/** `--catalog`: the catalog rows alone, printed; docs/benchmarks.md is left as the last full run wrote it. */
async function catalogOnly(): Promise<void> {
  const postgres = await startPostgres();
  const notes: string[] = [];
  try {
    const rows = await catalogRows(postgres, notes);
    const med = (xs: readonly number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN;
    console.log('\n| workload | cotwire (s) | PostgreSQL (s) | cotwire ÷ PostgreSQL (time) | target met |\n|---|---|---|---|---|');
    for (const r of rows) {
      console.log(`| ${r.name} | ${med(r.cot).toFixed(3)} | ${med(r.pg).toFixed(3)} | ${(med(r.cot) / med(r.pg)).toFixed(1)}× | ${r.met ? 'yes' : 'no'} |`);
    }
    for (const note of notes) console.log(`\n${note}`);
  } finally {
    postgres.stop();
  }
}

async function main(): Promise<void> {
  if (CATALOG_ONLY) {
    await catalogOnly();
    return;
  }
  const started = Date.now();
  // PostgreSQL keeps its default durability: cotwire syncs every acknowledged append too.
  const postgres: ThrowawayPostgres = await startPostgres({ durable: true });
  const cotwire: CotwireProcess = await startCotwire(ROOT);
  const rows: Row[] = [];
  const notes: string[] = [];
  try {
    const cot = await connect(cotwire.port, 'cotwire', 'cotwire', 16);
    const pgc = await connect(postgres.port, postgres.user, 'postgres', 16);
    await pgc[0]?.query(postgresSchema());
    await pgc[0]?.query('CREATE DATABASE anchor');
    const anc = await connect(postgres.port, postgres.user, 'anchor', 16);
    await anc[0]?.query(anchorSchema());
    const chain = new PostgresChain();
    const clients = (s: System): pg.Client[] => (s === 'cot' ? cot : s === 'pg' ? pgc : anc);
    const INSERT_COT = `INSERT INTO _cot_steps (${STEP_COLUMNS.join(', ')}) VALUES (${STEP_COLUMNS.map((_, i) => `$${i + 1}`).join(', ')})`;
    // cotwire and the trigger anchor take the same INSERT (the chain is theirs to compute); plain PostgreSQL's client chains.
    const insertOne = async (c: pg.Client, s: System, session: string, i: number): Promise<void> => {
      const values = stepRow(session, i);
      if (s === 'pg') await chain.insert(c, [values]);
      else await c.query(INSERT_COT, values);
    };
    const rate = async (s: System, n: number, work: () => Promise<void>): Promise<number> => {
      cotwire.resetPeak();
      const t = performance.now();
      await work();
      const seconds = (performance.now() - t) / 1000;
      if (s === 'cot') peak = Math.max(peak, cotwire.peakRss());
      return n / seconds;
    };
    let peak = 0;
    const throughput = async (
      name: string,
      target: string,
      unit: string,
      measure: (s: System) => Promise<number>,
      better: 'higher' | 'lower',
      goal: (ratio: number, cot: number, anchorRatio: number) => boolean,
    ): Promise<Row> => {
      peak = 0;
      const r = await interleaved(SIZES.runs, measure);
      const finite = (xs: number[]): number[] => xs.filter(Number.isFinite);
      const [cotM, pgM, anchorM] = [median(finite(r.cot)), median(finite(r.pg)), median(finite(r.anchor))];
      const over = (other: number): number => (better === 'higher' ? cotM / other : other / cotM);
      const [ratio, anchorRatio] = [over(pgM), over(anchorM)];
      const row: Row = {
        name,
        unit,
        cot: r.cot,
        pg: r.pg,
        anchor: r.anchor,
        ratio,
        anchorRatio,
        target,
        met: goal(ratio, cotM, anchorRatio),
        rssMiB: peak / 2 ** 20,
      };
      rows.push(row);
      console.log(
        `${name}: cotwire ${cotM.toFixed(2)} ${unit}, PostgreSQL ${pgM.toFixed(2)}, trigger chain ${anchorM.toFixed(2)}; ratios ${ratio.toFixed(2)}× and ${anchorRatio.toFixed(2)}×`,
      );
      return row;
    };

    /** The read rows of each dataset size, by workload, for how their latency grows from one size to the next. */
    const readRows = new Map<string, Array<{ readonly steps: string; readonly row: Row }>>();
    const readRow = async (
      label: string,
      steps: string,
      target: string,
      goal: (ratio: number, cot: number, anchorRatio: number) => boolean,
      measure: (s: System) => Promise<number>,
    ): Promise<void> => {
      const row = await throughput(`${label}, over ${steps} steps (p50)`, target, 'ms', measure, 'lower', goal);
      readRows.set(label, [...(readRows.get(label) ?? []), { steps, row }]);
    };
    /** p50 latency of `n` calls of `query` on the system's first connection. */
    const p50 = async (s: System, n: number, query: (c: pg.Client, i: number) => Promise<unknown>): Promise<number> => {
      const c = clients(s)[0] as pg.Client;
      const latencies: number[] = [];
      for (let i = 0; i < n; i++) {
        const t = performance.now();
        await query(c, i);
        latencies.push(performance.now() - t);
      }
      return median(latencies);
    };
    /**
     * What agents and auditors read of one session or one step (issue 18), over a dataset of `size`
     * interleaved sessions of 50 steps (`steps` held in all). Each call reads sessions no call read
     * before, so none is in cotwire's session cache: these are cold reads, except the agent loop's.
     */
    const agentReads = async (size: number, steps: string): Promise<void> => {
      const sessions = Math.max(1, Math.floor(size / SESSION_STEPS));
      let pick = 0;
      const fresh = (): string => `d${size}-${(pick++ * 7919) % sessions}`;
      const n = SIZES.sessionReads;
      /** A read held to the trigger chain: at least as fast. */
      const chainRead = (label: string, measure: (s: System) => Promise<number>): Promise<void> =>
        readRow(label, steps, '≥ 1.0× trigger chain', (_, __, a) => a >= 1, measure);
      await chainRead('replay of one 50-step session (cot_replay), read cold', (s) =>
        s === 'pg'
          ? Promise.resolve(Number.NaN)
          : p50(s, n, (c) =>
              s === 'cot'
                ? c.query({ name: 'replay', text: 'SELECT * FROM cot_replay($1)', values: [fresh()] })
                : c.query({ name: 'replay', text: 'SELECT * FROM _cot_steps WHERE session_id = $1 ORDER BY step_index', values: [fresh()] }),
            ),
      );
      let loop = 0;
      await chainRead('the agent loop: append a step to its session, then replay the session (p50 of the replay)', async (s) => {
        if (s === 'pg') return Number.NaN;
        const c = clients(s)[0] as pg.Client;
        const latencies: number[] = [];
        for (let agent = 0; agent < 20; agent++) {
          const session = `loop-${size}-${loop++}`;
          for (let i = 0; i < Math.max(2, Math.floor(n / 20)); i++) {
            await c.query(INSERT_COT, stepRow(session, i));
            const t = performance.now();
            if (s === 'cot') await c.query({ name: 'replay', text: 'SELECT * FROM cot_replay($1)', values: [session] });
            else await c.query({ name: 'replay', text: 'SELECT * FROM _cot_steps WHERE session_id = $1 ORDER BY step_index', values: [session] });
            latencies.push(performance.now() - t);
          }
        }
        return median(latencies);
      });
      await chainRead('verify of one 50-step session (cot_verify), read cold', (s) =>
        s === 'pg' ? Promise.resolve(Number.NaN) : p50(s, n, (c) => c.query({ name: 'verify', text: 'SELECT * FROM cot_verify($1)', values: [fresh()] })),
      );
      const traces = {
        cot: await sampleIds(cot[0] as pg.Client, n * 2),
        pg: await sampleIds(pgc[0] as pg.Client, n * 2),
        anchor: await sampleIds(anc[0] as pg.Client, n * 2),
      };
      let traced = 0;
      await readRow(
        'one step by trace_id (cot_trace), read cold',
        steps,
        '≤ 2× PostgreSQL',
        (r) => r >= 0.5,
        (s) =>
          p50(s, n, (c) => {
            const id = traces[s][traced++ % traces[s].length];
            return s === 'cot'
              ? c.query({ name: 'trace', text: 'SELECT * FROM cot_trace($1)', values: [id] })
              : c.query({ name: 'trace', text: 'SELECT * FROM _cot_steps WHERE trace_id = $1', values: [id] });
          }),
      );
      let agents = 0;
      const anchorSessions = `SELECT session_id, count(*) AS step_count, min(created_at) AS first_step_at, max(created_at) AS last_step_at,
          (SELECT valid FROM cot_verify(session_id)) AS chain_valid
        FROM _cot_steps WHERE agent_id = $1 GROUP BY session_id ORDER BY first_step_at`;
      await chainRead("an agent's sessions, each chain verified (cot_sessions(agent))", (s) =>
        s === 'pg'
          ? Promise.resolve(Number.NaN)
          : p50(s, Math.max(3, Math.floor(n / 10)), (c) => {
              const agent = `agent-${(agents++ * 37) % 1000}`;
              return s === 'cot'
                ? c.query({ name: 'sessions', text: 'SELECT * FROM cot_sessions($1)', values: [agent] })
                : c.query({ name: 'sessions', text: anchorSessions, values: [agent] });
            }),
      );
      await readRow(
        "the viewer's page of one 50-step session (GET /sessions/S: its steps and their verification), read cold",
        steps,
        'report',
        () => true,
        async (s) => {
          if (s !== 'cot') return Number.NaN;
          const latencies: number[] = [];
          for (let i = 0; i < n; i++) {
            const t = performance.now();
            const res = await fetch(`http://127.0.0.1:${cotwire.httpPort}/sessions/${fresh()}`);
            const page = await res.text();
            latencies.push(performance.now() - t);
            if (res.status !== 200 || !page.includes('article class="step"')) throw new Error(`the viewer answered ${res.status}`);
          }
          return median(latencies);
        },
      );
      const mcp = new McpClient({ name: 'cotwire-bench', version: '1.0.0' });
      await mcp.connect(
        new StdioClientTransport({
          command: process.execPath,
          args: [join(ROOT, 'dist', 'cli.js'), 'mcp', '--url', `postgres://cotwire@127.0.0.1:${cotwire.port}/cotwire`],
          stderr: 'ignore',
        }),
      );
      try {
        await readRow(
          'MCP replay_decision round trip (the replay and the verification of a session), read cold',
          steps,
          'report',
          () => true,
          async (s) => {
            if (s !== 'cot') return Number.NaN;
            const latencies: number[] = [];
            for (let i = 0; i < n; i++) {
              const t = performance.now();
              const r = (await mcp.callTool({ name: 'replay_decision', arguments: { session_id: fresh() } })) as { isError?: boolean };
              latencies.push(performance.now() - t);
              if (r.isError === true) throw new Error('replay_decision failed');
            }
            return median(latencies);
          },
        );
      } finally {
        await mcp.close();
      }
    };

    let runNo = 0;
    await throughput(
      'single-row INSERT of a step, autocommit, 1 connection',
      '≥ 1.0× trigger chain',
      'steps/s',
      (s) => {
        const session = `single-${runNo++}`;
        const c = clients(s)[0] as pg.Client;
        return rate(s, SIZES.singleRows, async () => {
          for (let i = 0; i < SIZES.singleRows; i++) await insertOne(c, s, session, i);
        });
      },
      'higher',
      (_, __, a) => a >= 1,
    );

    await throughput(
      'single-row INSERT, 16 connections on 16 sessions',
      '≥ 1.0× trigger chain',
      'steps/s',
      (s) => {
        const tag = runNo++;
        const per = Math.ceil(SIZES.singleRows / 16);
        return rate(s, per * 16, async () => {
          await Promise.all(
            clients(s).map(async (c, k) => {
              for (let i = 0; i < per; i++) await insertOne(c, s, `many-${tag}-${k}`, i);
            }),
          );
        });
      },
      'higher',
      (_, __, a) => a >= 1,
    );

    await throughput(
      'single-row INSERT, 16 connections on ONE session',
      '≥ 1.0× trigger chain',
      'steps/s',
      (s) => {
        const session = `shared-${runNo++}`;
        const per = Math.ceil(SIZES.singleRows / 16);
        return rate(s, per * 16, async () => {
          await Promise.all(
            clients(s).map(async (c) => {
              for (let i = 0; i < per; i++) await insertOne(c, s, session, i);
            }),
          );
        });
      },
      'higher',
      (_, __, a) => a >= 1,
    );

    const batchSql = `INSERT INTO _cot_steps (${STEP_COLUMNS.join(', ')}) VALUES ${Array.from({ length: 100 }, (_, r) => `(${STEP_COLUMNS.map((_, i) => `$${r * STEP_COLUMNS.length + i + 1}`).join(', ')})`).join(', ')}`;
    await throughput(
      '100-row INSERT ... VALUES batches',
      '≥ 1.0× trigger chain',
      'steps/s',
      (s) => {
        const session = `batch-${runNo++}`;
        const c = clients(s)[0] as pg.Client;
        return rate(s, SIZES.batches * 100, async () => {
          for (let b = 0; b < SIZES.batches; b++) {
            const batch = Array.from({ length: 100 }, (_, i) => stepRow(session, b * 100 + i));
            if (s === 'pg') await chain.insert(c, batch);
            else await c.query(batchSql, batch.flat());
          }
        });
      },
      'higher',
      (_, __, a) => a >= 1,
    );

    // Issue 37: GenAI spans over OTLP/HTTP, against the same steps as one INSERT over the wire. PostgreSQL and the
    // trigger chain take the INSERT in both rows; cotwire takes the spans in the first and the INSERT in the second.
    const OTLP_BATCH = 512;
    const otlpSql = `INSERT INTO _cot_steps (${STEP_COLUMNS.join(', ')}) VALUES ${Array.from({ length: OTLP_BATCH }, (_, r) => `(${STEP_COLUMNS.map((_, i) => `$${r * STEP_COLUMNS.length + i + 1}`).join(', ')})`).join(', ')}`;
    const otlpRate = (s: System, viaOtlp: boolean): Promise<number> => {
      const session = `otlp-${runNo++}`;
      const c = clients(s)[0] as pg.Client;
      const requests = Math.max(2, Math.floor(SIZES.batches / 2));
      // The INSERTs carry the rows the server makes of the same spans.
      const bodies = Array.from({ length: requests }, (_, b) => otlpBatch(session, b * OTLP_BATCH, OTLP_BATCH));
      const spans = s === 'cot' && viaOtlp;
      const batches = spans ? [] : bodies.map(rowsOf);
      return rate(s, requests * OTLP_BATCH, async () => {
        for (let b = 0; b < requests; b++) {
          if (spans) {
            await exportSpans(cotwire.httpPort, bodies[b] as Uint8Array);
            continue;
          }
          const batch = batches[b] as Array<Array<string | number | null>>;
          if (s === 'pg') await chain.insert(c, batch);
          else await c.query(otlpSql, batch.flat());
        }
      });
    };
    await throughput(
      `GenAI spans over OTLP/HTTP protobuf, ${OTLP_BATCH} per request (PostgreSQL: the same steps as one INSERT)`,
      'report',
      'spans/s',
      (s) => otlpRate(s, true),
      'higher',
      () => true,
    );
    await throughput(
      `the same steps as one ${OTLP_BATCH}-row INSERT over the wire`,
      'report',
      'steps/s',
      (s) => otlpRate(s, false),
      'higher',
      () => true,
    );

    // Reads: the datasets are loaded outside the measurement, the same rows in both.
    for (const size of SIZES.analytic) {
      console.log(`loading ${size} steps into each system ...`);
      await Promise.all(cot.map((c) => c.end()));
      await cotwire.stop();
      const loaded = await seedCotwire(cotwire.databasePath, size);
      await cotwire.restart();
      cot.splice(0, cot.length, ...(await connect(cotwire.port, 'cotwire', 'cotwire', 16)));
      await seedPostgres(pgc[0] as pg.Client, size);
      await seedAnchor(anc[0] as pg.Client, size);
      // The reads are measured as a server spends most of its time: between audits, not under the start-up one.
      const audited = await startupAudit(AUDIT_WAIT_SECONDS, cot[0] as pg.Client);
      const auditNote =
        audited === null
          ? `the start-up audit of ${size} steps had not ended ${AUDIT_WAIT_SECONDS / 60} minutes after PostgreSQL's load; the reads at this size ran beside it`
          : `the start-up audit of ${size} steps ended ${audited.toFixed(0)} s after PostgreSQL's load`;
      if (audited === null) notes.push(auditNote);
      console.log(`loaded (cotwire's writer: ${Math.round(loaded)} steps/s offline); ${auditNote}`);
      // Each dataset is loaded on top of the ones before (and the rows the append workloads wrote).
      const held = Number((await (cot[0] as pg.Client).query('SELECT count(*) AS n FROM _cot_steps')).rows[0].n);
      const steps = `${(held / 1e6).toFixed(held < 1e6 ? 2 : 1)}M`;
      const analytic: Array<[string, string]> = [
        ['step-type mix per agent', 'SELECT agent_id, step_type, count(*) FROM _cot_steps GROUP BY 1, 2 ORDER BY 1, 2'],
        [
          'p95 duration per model per hour',
          "SELECT model, date_trunc('hour', created_at) AS hour, percentile_cont(0.95) WITHIN GROUP (ORDER BY duration_ms) FROM _cot_steps GROUP BY 1, 2 ORDER BY 1, 2",
        ],
        [
          'per-session window (lag of created_at)',
          'SELECT max(gap) FROM (SELECT created_at - lag(created_at) OVER (PARTITION BY session_id ORDER BY step_index) AS gap FROM _cot_steps) t',
        ],
      ];
      for (const [label, sql] of analytic) {
        await throughput(
          `analytic over ${steps} steps: ${label}`,
          '≥ 10×',
          'ms',
          async (s) => {
            // The trigger anchor's table is the same to an analytic query: only plain PostgreSQL runs it.
            if (s === 'anchor') return Number.NaN;
            const c = clients(s)[0] as pg.Client;
            const t = performance.now();
            await c.query(sql);
            if (s === 'cot') peak = Math.max(peak, cotwire.peakRss());
            return performance.now() - t;
          },
          'lower',
          (r) => r >= 10,
        );
      }
      await agentReads(size, steps);
    }
    notes.push(...flatness(readRows));

    // Point reads, by trace_id, from the loaded dataset: each system's own steps.
    const idsOf = {
      cot: await sampleIds(cot[0] as pg.Client, 200),
      pg: await sampleIds(pgc[0] as pg.Client, 200),
      anchor: await sampleIds(anc[0] as pg.Client, 200),
    };
    const ids = idsOf.cot;
    for (const conns of [1, 8]) {
      await throughput(
        `point SELECT by trace_id, ${conns} connection${conns > 1 ? 's' : ''} (p50 latency)`,
        '≤ 2× PostgreSQL',
        'ms',
        async (s) => {
          const latencies: number[] = [];
          const per = Math.ceil(SIZES.pointQueries / conns);
          await Promise.all(
            clients(s)
              .slice(0, conns)
              .map(async (c) => {
                for (let i = 0; i < per; i++) {
                  const t = performance.now();
                  await c.query({ name: 'point', text: 'SELECT * FROM _cot_steps WHERE trace_id = $1', values: [idsOf[s][i % idsOf[s].length]] });
                  latencies.push(performance.now() - t);
                }
              }),
          );
          return median(latencies);
        },
        'lower',
        (r) => r >= 0.5,
      );
    }

    // The guard's share of the point SELECT. Each unnamed Parse goes through the guard: with the
    // same text its decision comes from the cache (warm), with a new text it is made again (cold).
    const guardRuns = { warm: [] as number[], cold: [] as number[], share: [] as number[] };
    const guardWarmMicros = guardDecisionMicros();
    for (let run = 0; run < SIZES.runs; run++) {
      const c = cot[0] as pg.Client;
      for (const temperature of ['warm', 'cold'] as const) {
        const latencies: number[] = [];
        for (let i = 0; i < SIZES.pointQueries; i++) {
          const text =
            temperature === 'warm' ? 'SELECT * FROM _cot_steps WHERE trace_id = $1' : `SELECT * FROM _cot_steps WHERE trace_id = $1 /* ${run}-${i} */`;
          const t = performance.now();
          await c.query({ text, values: [ids[i % ids.length]] });
          latencies.push(performance.now() - t);
        }
        guardRuns[temperature].push(median(latencies));
      }
      guardRuns.share.push((100 * guardWarmMicros) / ((guardRuns.warm.at(-1) as number) * 1000));
    }
    rows.push({
      name: `guard overhead: the same point SELECT, guard cache warm (p50 ${median(guardRuns.warm).toFixed(2)} ms) and cold (p50 ${median(guardRuns.cold).toFixed(2)} ms); the warm decision costs ${guardWarmMicros.toFixed(1)} µs`,
      unit: '% of latency',
      cot: guardRuns.share,
      pg: [],
      ratio: Number.NaN,
      target: '≤ 5% warm',
      met: median(guardRuns.share) <= 5,
      rssMiB: Number.NaN,
    });
    console.log(
      `guard: warm p50 ${median(guardRuns.warm).toFixed(3)} ms, cold p50 ${median(guardRuns.cold).toFixed(3)} ms, warm decision ${guardWarmMicros.toFixed(2)} µs`,
    );

    await throughput(
      `SELECT * streaming ${SIZES.stream / 1e6}M steps to the client`,
      '≥ 0.7×',
      'steps/s',
      (s) => {
        if (s === 'anchor') return Promise.resolve(Number.NaN);
        const c = clients(s)[0] as pg.Client;
        return rate(s, SIZES.stream, async () => {
          await c.query({ text: `SELECT * FROM _cot_steps LIMIT ${SIZES.stream}`, rowMode: 'array' });
        });
      },
      'higher',
      (r) => r >= 0.7,
    );

    await throughput(
      'chain verification, SQL (cot_verify_all)',
      '≥ 500k steps/s',
      'steps/s',
      async (s) => {
        if (s !== 'cot') return Number.NaN;
        const n = Number((await (cot[0] as pg.Client).query('SELECT count(*) AS n FROM _cot_steps')).rows[0].n);
        return rate(s, n, async () => {
          await (cot[0] as pg.Client).query('SELECT count(*) FROM cot_verify_all()');
        });
      },
      'higher',
      (_, c) => c >= 500_000,
    );

    if (SIZES.flatStream > 0) {
      // Memory during a long read: the client counts and drops each row, so only the server holds any.
      const c = cot[0] as pg.Client;
      cotwire.resetPeak();
      const before = cotwire.peakRss();
      const t = performance.now();
      const streamed = await countRows(c, `SELECT * FROM _cot_steps LIMIT ${SIZES.flatStream}`);
      const seconds = (performance.now() - t) / 1000;
      const peakMiB = cotwire.peakRss() / 2 ** 20;
      rows.push({
        name: `SELECT * streaming ${SIZES.flatStream / 1e6}M steps: cotwire's memory (RSS ${Math.round(before / 2 ** 20)} MiB before the read)`,
        unit: 'steps/s',
        cot: [streamed / seconds],
        pg: [],
        ratio: Number.NaN,
        target: 'flat',
        met: peakMiB - before / 2 ** 20 < 256,
        rssMiB: peakMiB,
      });
      console.log(`streamed ${streamed} rows in ${seconds.toFixed(1)} s; RSS ${Math.round(before / 2 ** 20)} → peak ${Math.round(peakMiB)} MiB`);
    }

    const total = Number((await (cot[0] as pg.Client).query('SELECT count(*) AS n FROM _cot_steps')).rows[0].n);
    {
      // A receipt over the wire, against the log of every step the run appended.
      const c = cot[0] as pg.Client;
      const leaves = Number((await c.query('SELECT tree_size FROM cot_checkpoint()')).rows[0]?.tree_size ?? 0);
      const traces = (
        await c.query({ text: `SELECT trace_id FROM _cot_steps WHERE ledger_seq <= ${leaves} USING SAMPLE 200 ROWS`, rowMode: 'array' })
      ).rows.map((r) => r[0] as string);
      const latencies: number[] = [];
      for (const trace of traces) {
        const t = performance.now();
        const r = await c.query('SELECT leaf_index, inclusion_proof FROM cot_prove($1)', [trace]);
        latencies.push(performance.now() - t);
        if (!Array.isArray(r.rows[0]?.inclusion_proof)) throw new Error(`cot_prove(${trace}) returned no proof`);
      }
      rows.push({
        name: `cot_prove(trace_id) over SQL at ${(leaves / 1e6).toFixed(1)}M leaves (the step's lookup, its proof and the checkpoint), p50`,
        unit: 'ms',
        cot: [median(latencies)],
        pg: [],
        ratio: Number.NaN,
        target: '≤ 10 ms',
        met: median(latencies) <= 10,
        rssMiB: Number.NaN,
      });
      console.log(`cot_prove at ${leaves} leaves: p50 ${median(latencies).toFixed(2)} ms`);
    }
    await Promise.all([...cot, ...pgc, ...anc].map((c) => c.end()));
    await cotwire.stop();
    const t = performance.now();
    // A broken chain would make the figure meaningless: the run stops with the verifier's report.
    await run(process.execPath, [join(ROOT, 'dist', 'cli.js'), 'verify', '--db', cotwire.databasePath], { maxBuffer: 64 * 2 ** 20 }).catch(
      (err: { stdout?: string; stderr?: string; code?: number | string; signal?: string }) => {
        throw new Error(
          `cotwire verify failed (exit ${String(err.code)}${err.signal ? `, ${err.signal}` : ''}): ${(err.stdout ?? '').slice(0, 2000)} ${(err.stderr ?? '').slice(0, 2000)}`,
        );
      },
    );
    const cliRate = total / ((performance.now() - t) / 1000);
    rows.push({
      name: 'chain verification, CLI (cotwire verify)',
      unit: 'steps/s',
      cot: [cliRate],
      pg: [],
      ratio: Number.NaN,
      target: '≥ 500k steps/s',
      met: cliRate >= 500_000,
      rssMiB: Number.NaN,
    });

    // The global Merkle log: what it adds to appends, and what a proof costs at a million leaves.
    const on: number[] = [];
    const off: number[] = [];
    for (let r = 0; r < SIZES.runs; r++) {
      off.push(await appendRate(false, SIZES.logAppends));
      on.push(await appendRate(true, SIZES.logAppends));
    }
    const logRatio = median(on) / median(off);
    rows.push({
      name: 'appends through the writer, 16 concurrent one-step units: global log on (cotwire column) vs off (PostgreSQL column)',
      unit: 'steps/s',
      cot: on,
      pg: off,
      ratio: logRatio,
      target: '≥ 0.9×',
      met: logRatio >= 0.9,
      rssMiB: Number.NaN,
    });
    console.log(`log on ${median(on).toFixed(0)} steps/s, off ${median(off).toFixed(0)} steps/s, ratio ${logRatio.toFixed(3)}`);
    const proof = proofMicros(1_000_000, 1000);
    rows.push({
      name: `inclusion proof from the node file at 1M leaves, p50 (consistency proof ${proof.consistency.toFixed(0)} µs; building the 1M-leaf tree took ${proof.buildSeconds.toFixed(1)} s)`,
      unit: 'µs',
      cot: [proof.inclusion],
      pg: [],
      ratio: Number.NaN,
      target: '≤ 1000 µs',
      met: proof.inclusion <= 1000,
      rssMiB: Number.NaN,
    });
    console.log(`proofs at 1M leaves: inclusion p50 ${proof.inclusion.toFixed(1)} µs, consistency p50 ${proof.consistency.toFixed(1)} µs`);

    // The online audit: what one costs per million rows, and what audits running back to back take from appends.
    const audit = await auditCost(SIZES.auditRows);
    const perMillion = (s: number): number => (s * 1_000_000) / SIZES.auditRows;
    rows.push({
      name: `one audit of ${SIZES.auditRows / 1_000_000}M steps, seconds per million rows: rows held against the global log (cotwire column) and every chain recomputed (PostgreSQL column: cotwire's own SQL verification, for scale); one look of the watch: ${perMillion(audit.watchSeconds).toFixed(2)} s per million rows`,
      unit: 's/M rows',
      cot: [perMillion(audit.reconcileSeconds)],
      pg: [perMillion(audit.chainsSeconds)],
      ratio: Number.NaN,
      target: 'reconciliation ≤ 10 s/M',
      met: perMillion(audit.reconcileSeconds) <= 10,
      rssMiB: Number.NaN,
    });
    console.log(
      `audit of ${SIZES.auditRows} steps: reconcile ${audit.reconcileSeconds.toFixed(2)} s, chains ${audit.chainsSeconds.toFixed(2)} s, watch ${audit.watchSeconds.toFixed(2)} s (built in ${audit.buildSeconds.toFixed(1)} s)`,
    );
    const { during, without } = await appendRatesWhileAuditing(SIZES.auditAppendBase, SIZES.logAppends, SIZES.runs);
    const auditRatio = median(during) / median(without);
    rows.push({
      name: `appends through the writer over ${SIZES.auditAppendBase / 1000}k steps, 16 concurrent one-step units: audits running back to back, each pausing three times as long as it works (cotwire column), vs none (PostgreSQL column)`,
      unit: 'steps/s',
      cot: during,
      pg: without,
      ratio: auditRatio,
      target: '≥ 0.7×',
      met: auditRatio >= 0.7,
      rssMiB: Number.NaN,
    });
    console.log(`appends during audits ${median(during).toFixed(0)} steps/s, without ${median(without).toFixed(0)} steps/s, ratio ${auditRatio.toFixed(3)}`);
    // Catalog introspection (issue 36): tools that read a whole schema, on a schema of 100 tables.
    rows.push(...(await catalogRows(postgres, notes)));
  } finally {
    await cotwire.remove().catch(() => undefined);
    postgres.stop();
  }
  const machine = `${cpus().length} cores (${cpus()[0]?.model ?? 'unknown CPU'}), ${Math.round(totalmem() / 2 ** 30)} GiB, Node.js ${process.version}`;
  const table = writeReport(join(ROOT, 'docs', 'benchmarks.md'), rows, { machine, quick: QUICK, seconds: (Date.now() - started) / 1000, notes });
  console.log(`\n${table}`);
  // Semantic search (issue 19): cotwire with embedding on against itself with it off; no PostgreSQL column.
  console.log(`\n${await searchBench(ROOT, QUICK ? SEARCH_SIZES.quick : SEARCH_SIZES.full)}`);
  // Retention and erasure (issue 20): cotwire/v2 against v1, and retaining out 1M of 10M steps; its own process, for its memory.
  const erasure = spawnSync(process.execPath, [join(import.meta.dirname, 'erasure.js'), ...(QUICK ? ['--quick'] : [])], { stdio: 'inherit' });
  // cotwire on a PostgreSQL engine (issue 21): the proxy's cost and a second instance, in docs/benchmarks.md too.
  const engine = spawnSync(process.execPath, [join(import.meta.dirname, 'postgres-engine.js'), ...(QUICK ? ['--quick'] : [])], { stdio: 'inherit' });
  if (erasure.status !== 0) throw new Error(`bench/erasure.ts failed with exit ${String(erasure.status)}`);
  // Issue 36 through the wire: v1, v2 and v3 appends, and a scoped reader's reads against an unscoped one's.
  const wire = spawnSync(process.execPath, [join(import.meta.dirname, 'wire-versions.js'), ...(QUICK ? ['--quick'] : [])], { stdio: 'inherit' });
  if (wire.status !== 0) throw new Error(`bench/wire-versions.ts failed with exit ${String(wire.status)}`);
  if (engine.status !== 0) throw new Error(`bench/postgres-engine.ts failed with exit ${String(engine.status)}`);
}

await main();
