/**
 * Semantic search (issue 19): what embedding costs the append path, how fast
 * the built-in embedder and the background worker go, and what cot_search()
 * costs at 100k and 1M embedded steps. `npm run bench` runs it after the
 * comparison with PostgreSQL; `npm run bench:search` runs it alone. There is
 * no PostgreSQL column: the comparison that matters is cotwire with
 * embedding on against cotwire with it off.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { DuckDBEngine } from '../src/engines/duckdb/adapter/engine.js';
import { HashedEmbedder } from '../src/embedding/hashed.js';
import { STEPS_DDL, STEPS_INDEX_DDL } from '../src/ledger/chain/schema.js';
import { LedgerWriter } from '../src/engines/duckdb/ledger/writer.js';
import { startupAudit } from './audit.js';
import { startCotwire, type CotwireProcess } from './cotwire.js';
import { STEP_COLUMNS, stepRow } from './dataset.js';
import { duckdbLedgers } from '../src/engines/duckdb/ledger/catalog-source.js';

const START = '<!-- bench-search:start -->';
const END = '<!-- bench-search:end -->';

interface SearchSizes {
  readonly runs: number;
  /** Runs of the appends with embedding on and off: the machine's noise is larger than the difference. */
  readonly appendRuns: number;
  readonly appends: number;
  readonly batches: number;
  readonly embedderTexts: number;
  readonly datasets: readonly number[];
  readonly queries: number;
}

export const SEARCH_SIZES = {
  full: { runs: 5, appendRuns: 10, appends: 3_000, batches: 100, embedderTexts: 20_000, datasets: [100_000, 1_000_000], queries: 50 },
  quick: { runs: 3, appendRuns: 3, appends: 300, batches: 20, embedderTexts: 5_000, datasets: [20_000], queries: 20 },
} satisfies Record<string, SearchSizes>;

const WORDS = (
  'price pricing plan premium discount customer refund order invoice payment card charge retry timeout error ' +
  'database schema migration column index table query latency cache invalidate deploy rollback release build ' +
  'test flaky dependency version login password token session user account email support ticket escalate ' +
  'forecast demand inventory warehouse shipping delay carrier route budget cost margin revenue churn signup'
).split(' ');

/** A deterministic, varied step text of about 20 words. */
export function stepText(i: number): string {
  let x = (i * 2654435761) >>> 0;
  const out: string[] = [];
  for (let w = 0; w < 20; w++) {
    x = (x * 1103515245 + 12345) >>> 0;
    out.push(WORDS[x % WORDS.length] as string);
  }
  return `Step ${i}: ${out.join(' ')}.`;
}

const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
};

const range = (xs: readonly number[], digits: number): string =>
  `${median(xs).toFixed(digits)} (${Math.min(...xs).toFixed(digits)}–${Math.max(...xs).toFixed(digits)})`;

/** Steps written straight into the file, every one selected for an embedding (rate 1), before the server starts. */
async function seedSelected(path: string, from: number, count: number): Promise<void> {
  const engine = await DuckDBEngine.open({ path });
  const conn = await engine.connect();
  try {
    await conn.run(STEPS_DDL);
    for (const ddl of STEPS_INDEX_DDL) await conn.run(ddl);
    const catalog = duckdbLedgers(conn, (name) => name.startsWith('_cot'));
    const table = await catalog.find(['_cot_steps']);
    if (table === null) throw new Error('no _cot_steps');
    const writer = await LedgerWriter.open(engine, catalog, { journalPath: null, embeddingSample: { rate: 1, alwaysTypes: new Set() } });
    for (let done = from; done < from + count; done += 10_000) {
      const rows: Array<Array<string | null>> = [];
      for (let i = done; i < Math.min(from + count, done + 10_000); i++) {
        const session = `s-${i % 20_000}`;
        rows.push([null, `agent-${i % 100}`, session, i % 3 === 0 ? 'Decision' : 'Observation', stepText(i), null, null, null, null, null, null, null, null]);
      }
      await writer.append([{ table, rows }]);
    }
    await writer.close();
  } finally {
    conn.close();
    await engine.close();
  }
}

async function client(port: number): Promise<pg.Client> {
  const c = new pg.Client({ host: '127.0.0.1', port, user: 'cotwire', database: 'cotwire' });
  await c.connect();
  return c;
}

/** Waits until the vector table holds `n` rows; the seconds it took. */
async function drained(c: pg.Client, n: number): Promise<number> {
  const t = performance.now();
  for (;;) {
    const { rows } = await c.query('SELECT count(*)::int AS n FROM _cot_embeddings');
    if (rows[0].n >= n) return (performance.now() - t) / 1000;
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** The median latency of `n` calls of `query`, in ms. */
export async function p50(n: number, query: (i: number) => Promise<unknown>): Promise<number> {
  const latencies: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    await query(i);
    latencies.push(performance.now() - t);
  }
  return median(latencies);
}

/** Runs the search benchmarks; returns the markdown it also writes into docs/benchmarks.md. */
export async function searchBench(root: string, sizes: SearchSizes, log: (line: string) => void = console.log): Promise<string> {
  const lines: string[] = [];
  const started = Date.now();

  // The built-in embedder alone, in this process.
  const embedder = new HashedEmbedder();
  const texts = Array.from({ length: sizes.embedderTexts }, (_, i) => stepText(i));
  const rates: number[] = [];
  for (let r = 0; r < sizes.runs; r++) {
    const t = performance.now();
    for (const text of texts) embedder.embedNow(text);
    rates.push(texts.length / ((performance.now() - t) / 1000));
  }
  lines.push(
    `| built-in embedder (cotwire-hashed-v1, 384 dimensions), one thread, texts of ~${texts[0]?.length ?? 0} characters | texts/s | ${range(rates, 0)} |`,
  );
  log(`embedder: ${median(rates).toFixed(0)} texts/s`);

  // Appends with embedding on (the default rule and embedder) and off, interleaved.
  const dir = mkdtempSync(join(tmpdir(), 'cotwire-bench-search-'));
  const off = join(dir, 'off.yaml');
  writeFileSync(off, 'embedding:\n  enabled: false\n');
  const on = await startCotwire(root);
  const offServer = await startCotwire(root, ['--config', off]);
  try {
    const insert = `INSERT INTO _cot_steps (${STEP_COLUMNS.join(', ')}) VALUES (${STEP_COLUMNS.map((_, i) => `$${i + 1}`).join(', ')})`;
    const results = { single: { on: [] as number[], off: [] as number[] }, batch: { on: [] as number[], off: [] as number[] } };
    const clients = { on: await client(on.port), off: await client(offServer.port) };
    for (let r = 0; r < sizes.appendRuns; r++) {
      for (const which of r % 2 === 0 ? (['on', 'off'] as const) : (['off', 'on'] as const)) {
        const c = clients[which];
        let t = performance.now();
        for (let i = 0; i < sizes.appends; i++) {
          const row = stepRow(`a-${r}-${i % 50}`, i);
          row[3] = stepText(i);
          await c.query(insert, row);
        }
        results.single[which].push(sizes.appends / ((performance.now() - t) / 1000));
        t = performance.now();
        for (let b = 0; b < sizes.batches; b++) {
          const values: Array<string | number> = [];
          const tuples: string[] = [];
          for (let i = 0; i < 100; i++) {
            const row = stepRow(`b-${r}-${b}`, i);
            row[3] = stepText(b * 100 + i);
            tuples.push(`(${row.map((_, j) => `$${values.length + j + 1}`).join(', ')})`);
            values.push(...row);
          }
          await c.query(`INSERT INTO _cot_steps (${STEP_COLUMNS.join(', ')}) VALUES ${tuples.join(', ')}`, values);
        }
        results.batch[which].push((sizes.batches * 100) / ((performance.now() - t) / 1000));
      }
    }
    for (const [kind, label] of [
      ['single', 'single-row appends, one connection'],
      ['batch', '100-row INSERTs, one connection'],
    ] as const) {
      const ratio = median(results[kind].on) / median(results[kind].off);
      lines.push(
        `| ${label}: embedding on ÷ off (on ${range(results[kind].on, 0)}, off ${range(results[kind].off, 0)} steps/s) | ratio | ${ratio.toFixed(2)}× (target ≥ 0.95×: ${ratio >= 0.95 ? 'met' : '**not met**'}) |`,
      );
      log(`${label}: on ${median(results[kind].on).toFixed(0)}, off ${median(results[kind].off).toFixed(0)} steps/s`);
    }
    await clients.on.end();
    await clients.off.end();
  } finally {
    await on.remove();
    await offServer.remove();
  }

  // cot_search at each size of the vector table: the steps are written into the file with the
  // server stopped, and the server embeds them at start (its backlog), which is timed too.
  const server: CotwireProcess = await startCotwire(root);
  try {
    let seeded = 0;
    for (const size of sizes.datasets) {
      await server.stop();
      await seedSelected(server.databasePath, seeded, size - seeded);
      const added = size - seeded;
      seeded = size;
      await server.restart();
      const c = await client(server.port);
      const seconds = await drained(c, size);
      lines.push(
        `| background embedding of ${added.toLocaleString('en')} steps at start-up (built-in embedder, beside the start-up audit) | steps/s | ${(added / seconds).toFixed(0)} |`,
      );
      log(`worker: ${added} steps in ${seconds.toFixed(1)} s`);
      // The searches are timed on a quiet server: the start-up audit of the new steps ends first.
      if ((await startupAudit(20 * 60, c)) === null)
        lines.push('| (the start-up audit had not ended after 20 minutes: the searches below ran beside it) | | |');
      const n = sizes.queries;
      const search = await p50(n, (i) =>
        c.query({
          name: 'search',
          text: 'SELECT trace_id, similarity FROM cot_search($1, 10)',
          values: [`${WORDS[i % WORDS.length]} ${WORDS[(i * 7) % WORDS.length]} problem ${i}`],
        }),
      );
      const filtered = await p50(n, (i) =>
        c.query({
          name: 'filtered',
          text: "SELECT trace_id, similarity FROM cot_search($1, 10, agent_id := $2, step_types := ['Decision'])",
          values: [`${WORDS[i % WORDS.length]} decision ${i}`, `agent-${i % 100}`],
        }),
      );
      const ids = (await c.query(`SELECT trace_id::text AS id FROM _cot_embeddings USING SAMPLE ${n} ROWS`)).rows.map((r) => r.id as string);
      const similar = await p50(ids.length, (i) =>
        c.query({ name: 'similar', text: 'SELECT trace_id, similarity FROM cot_similar($1, 10)', values: [ids[i]] }),
      );
      const label = size.toLocaleString('en');
      lines.push(`| cot_search(text, 10) over ${label} vectors (p50; the text embedded per query) | ms | ${search.toFixed(1)} |`);
      lines.push(`| cot_search(text, 10, agent_id, step_types) over ${label} vectors (p50) | ms | ${filtered.toFixed(1)} |`);
      lines.push(`| cot_similar(trace_id, 10) over ${label} vectors (p50) | ms | ${similar.toFixed(1)} |`);
      log(`search over ${size}: ${search.toFixed(1)} ms, filtered ${filtered.toFixed(1)} ms, similar ${similar.toFixed(1)} ms`);
      await c.end();
    }
  } finally {
    await server.remove();
    rmSync(dir, { recursive: true, force: true });
  }

  const table = [
    `Run: ${new Date().toISOString().slice(0, 10)}, ${Math.round((Date.now() - started) / 1000)} s.`,
    '',
    '| workload | unit | cotwire |',
    '|---|---|---|',
    ...lines,
  ].join('\n');
  const path = join(root, 'docs', 'benchmarks.md');
  const page = existsSync(path) ? readFileSync(path, 'utf8') : '';
  const at = page.indexOf(START);
  const end = page.indexOf(END);
  writeFileSync(path, at >= 0 && end > at ? `${page.slice(0, at + START.length)}\n${table}\n${page.slice(end)}` : `${page}\n${START}\n${table}\n${END}\n`);
  return table;
}

if (process.argv[1]?.endsWith(join('bench', 'search.js')) === true) {
  const quick = process.argv.includes('--quick');
  console.log(await searchBench(join(import.meta.dirname, '..', '..'), quick ? SEARCH_SIZES.quick : SEARCH_SIZES.full));
}
