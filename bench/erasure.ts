import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { DuckDBEngine } from '../src/engines/duckdb/adapter/engine.js';
import type { EngineConnection } from '../src/engine/port.js';
import { chainRowsSql, checkChain, storedLinks } from '../src/ledger/chain/chain-check.js';
import { loadColumnHasher, rowHash, rowHashV2 } from '../src/ledger/chain/canonical.js';
import { rowHashV3, SaltKeys } from '../src/ledger/chain/commitments.js';
import { committedOf } from '../src/ledger/chain/row-hash.js';
import type { LedgerCatalog } from '../src/ledger/chain/catalog.js';
import { recordHashVersionSql } from '../src/ledger/chain/hash-version.js';
import { REDACTIONS_DDL } from '../src/ledger/erasure/redactions.js';
import { RETENTION_DDL, RETENTION_INDEX_DDL } from '../src/ledger/erasure/retention-sql.js';
import { Retention } from '../src/ledger/erasure/retention.js';
import { duckdbErasureStore } from '../src/engines/duckdb/erasure/store.js';
import { addSaltColumnSql, HASH_VERSION, HASH_VERSION_V2, HASH_VERSION_V3, STEPS_DDL, STEPS_INDEX_DDL, type HashVersion } from '../src/ledger/chain/schema.js';
import { chainVerifier } from '../src/engines/duckdb/dialect/verify.js';
import { LedgerWriter } from '../src/engines/duckdb/ledger/writer.js';
import { writerRow } from './dataset.js';
import { duckdbLedgers } from '../src/engines/duckdb/ledger/catalog-source.js';

/**
 * The cost of cotwire/v2 (issue 20) and v3 (issue 36) against v1, and of retention:
 *
 *   - hashing a step in the process: v1 hashes one pre-image, v2 one per column and the pre-image,
 *     v3 a key per two committed columns, a commitment per committed column and the pre-image;
 *   - appending through the ledger writer (chain, hash, DuckDB append), offline, in units of 1,000;
 *   - verifying every chain in SQL (what cot_verify_all() and the audit run), and one session in the
 *     process (what cot_verify(s) runs);
 *   - retaining out 1M of 10M steps (20,000 sessions of 50 among 200,000).
 *
 * Results go to docs/benchmarks.md between the bench-erasure markers.
 * `--quick` runs a tenth of each size.
 */

const QUICK = process.argv.includes('--quick');
const scale = (n: number): number => (QUICK ? Math.floor(n / 10) : n);
const root = mkdtempSync(join(tmpdir(), 'cotwire-bench-erasure-'));

interface Ledger {
  readonly engine: DuckDBEngine;
  readonly conn: EngineConnection;
  readonly catalog: LedgerCatalog;
  readonly writer: LedgerWriter;
}

async function openLedger(path: string, version: HashVersion): Promise<Ledger> {
  const engine = await DuckDBEngine.open({ path });
  const conn = await engine.connect();
  await conn.run(STEPS_DDL);
  for (const ddl of STEPS_INDEX_DDL) await conn.run(ddl);
  if (version === HASH_VERSION_V3) await conn.run(addSaltColumnSql({ catalog: 'x', schema: 'main', name: '_cot_steps' }).replace('"x".', ''));
  if (version !== HASH_VERSION) {
    await conn.run(recordHashVersionSql({ catalog: 'memory', schema: 'main', name: '_cot_steps' }, version).replace('"memory".', ''));
  }
  for (const ddl of [REDACTIONS_DDL, RETENTION_DDL]) await conn.run(ddl);
  await conn.run(recordHashVersionSql({ catalog: 'x', schema: 'main', name: '_cot_retention' }).replace('"x".', ''));
  await conn.run(RETENTION_INDEX_DDL);
  const catalog = duckdbLedgers(conn, (name) => name.startsWith('_cot'));
  const writer = await LedgerWriter.open(engine, catalog, { journalPath: null });
  return { engine, conn, catalog, writer };
}

async function closeLedger(l: Ledger): Promise<void> {
  await l.writer.close();
  l.conn.close();
  await l.engine.close();
}

/** Appends `count` steps to sessions named by `session(i)`; returns steps a second. */
async function append(l: Ledger, count: number, session: (i: number) => string, from = 0): Promise<number> {
  const table = await l.catalog.find(['_cot_steps']);
  if (table === null) throw new Error('no _cot_steps');
  const UNIT = 1000;
  const t = performance.now();
  for (let done = 0; done < count; done += UNIT) {
    const rows: Array<Array<string | null>> = [];
    for (let i = done; i < Math.min(count, done + UNIT); i++) rows.push(writerRow(session(from + i), from + i));
    await l.writer.append([{ table, rows }]);
  }
  return count / ((performance.now() - t) / 1000);
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] as number;
}

const results: string[] = [];
const record = (line: string): void => {
  results.push(line);
  console.log(line);
};

// 1. Hashing one step in the process.
{
  const names = [
    'trace_id',
    'org_id',
    'agent_id',
    'session_id',
    'step_index',
    'step_type',
    'content',
    'input_data',
    'output_data',
    'confidence',
    'duration_ms',
    'token_count',
    'model',
    'metadata',
    'prev_hash',
    'current_hash',
    'has_embedding',
    'created_at',
    'parent_trace_id',
    'ledger_seq',
  ];
  // Rows as the writer hashes them: ids, indexes, links, times and contents differ from row to row; agents,
  // sessions, types and models repeat (the v2 digests of short values are cached).
  const rows = Array.from({ length: 10_000 }, (_, i) => {
    const hex = (n: number): string => n.toString(16).padStart(8, '0');
    const values: Record<string, string | null> = {
      trace_id: `0190${hex(i).slice(0, 4)}-${hex(i).slice(4)}-7000-8000-${hex(i * 7919).padStart(12, '0')}`,
      org_id: null,
      agent_id: `agent-${i % 10}`,
      session_id: `session-${i % 200}`,
      step_index: String(Math.floor(i / 200)),
      step_type: ['Observation', 'Reasoning', 'ToolCall', 'Decision'][i % 4] as string,
      content: `step ${i}: the customer asked about order ${4711 + i} and the refund policy `.repeat(3),
      input_data: `{"query":"order ${i}"}`,
      output_data: `{"ok":true,"n":${i % 7}}`,
      confidence: String((i % 100) / 100),
      duration_ms: String(20 + ((i * 37) % 900)),
      token_count: String(100 + (i % 400)),
      model: ['model-a', 'model-b'][i % 2] as string,
      metadata: `{"run":${i % 3}}`,
      prev_hash: hex(i * 31).repeat(8),
      current_hash: null,
      has_embedding: i % 3 === 0 ? 'true' : 'false',
      created_at: String(1_700_000_000_000_000 + i * 1000),
      parent_trace_id: null,
      ledger_seq: String(i + 1),
    };
    return names.map((n) => values[n] ?? null);
  });
  let next = 0;
  const texts = (): Array<string | null> => rows[next++ % rows.length] as Array<string | null>;
  const rate = (fn: () => string): number => {
    const runs: number[] = [];
    for (let r = 0; r < 5; r++) {
      const n = scale(200_000);
      const t = performance.now();
      for (let i = 0; i < n; i++) fn();
      runs.push(n / ((performance.now() - t) / 1000));
    }
    return median(runs);
  };
  await loadColumnHasher();
  const v1 = rate(() => rowHash('_cot_steps', names, texts()));
  const v2 = rate(() => rowHashV2('_cot_steps', names, texts()));
  // v3 with the salt column; a fresh salt per row, as the writer draws one.
  const namesV3 = [...names, 'row_salt'];
  const committed = committedOf(namesV3);
  const salts = Array.from({ length: 1024 }, (_, i) => SaltKeys.of(Buffer.from(`${i.toString(16).padStart(4, '0')}${'5a'.repeat(14)}`, 'hex')));
  let salt = 0;
  const v3 = rate(() => rowHashV3('_cot_steps', namesV3, [...texts(), null], committed, salts[salt++ % salts.length] as SaltKeys) ?? '');
  record(
    `| Hash one step in the process (20 columns, a 200-byte content) | ${Math.round(v1).toLocaleString('en')} /s | ${Math.round(v2).toLocaleString('en')} /s | ${Math.round(v3).toLocaleString('en')} /s | ${(v2 / v1).toFixed(2)}x | ${(v3 / v1).toFixed(2)}x |`,
  );
}

// 2. and 3. Appends and verification, v1 against v2, on the same steps.
{
  const size = scale(1_000_000);
  const sessions = size / 50;
  const rates: Record<string, number> = {};
  const verifyAll: Record<string, number> = {};
  const verifyOne: Record<string, number> = {};
  for (const version of [HASH_VERSION, HASH_VERSION_V2, HASH_VERSION_V3] as const) {
    const l = await openLedger(join(root, `${version.replace('/', '-')}.duckdb`), version);
    try {
      rates[version] = await append(l, size, (i) => `s-${i % sessions}`);
      await l.writer.visible();
      const t = performance.now();
      const verdicts = await chainVerifier(l.conn, l.catalog, { rowsPerSlice: 1_000_000, pause: async () => undefined }).verify(null);
      verifyAll[version] = (performance.now() - t) / 1000;
      if (verdicts.some((v) => !v.valid)) throw new Error(`${version}: a chain does not verify`);
      const table = await l.catalog.find(['_cot_steps']);
      if (table === null) throw new Error('no _cot_steps');
      const runs: number[] = [];
      for (let r = 0; r < 200; r++) {
        const t1 = performance.now();
        const check = checkChain(storedLinks(table, await l.conn.query(chainRowsSql(table), [`s-${(r * 7919) % sessions}`])));
        runs.push(performance.now() - t1);
        if (check.firstBreak !== null) throw new Error('a session does not verify');
      }
      verifyOne[version] = median(runs);
    } finally {
      await closeLedger(l);
    }
  }
  const n = size.toLocaleString('en');
  const [v1, v2, v3] = [HASH_VERSION, HASH_VERSION_V2, HASH_VERSION_V3].map((v) => ({
    rate: rates[v] as number,
    all: verifyAll[v] as number,
    one: verifyOne[v] as number,
  })) as [{ rate: number; all: number; one: number }, { rate: number; all: number; one: number }, { rate: number; all: number; one: number }];
  const steps = (x: number): string => `${Math.round(x).toLocaleString('en')} steps/s`;
  record(
    `| Append ${n} steps through the ledger writer (units of 1,000) | ${steps(v1.rate)} | ${steps(v2.rate)} | ${steps(v3.rate)} | ${(v2.rate / v1.rate).toFixed(2)}x | ${(v3.rate / v1.rate).toFixed(2)}x |`,
  );
  record(
    `| Verify all ${n} steps in SQL (cot_verify_all, the audit) | ${v1.all.toFixed(1)} s | ${v2.all.toFixed(1)} s | ${v3.all.toFixed(1)} s | ${(v1.all / v2.all).toFixed(2)}x | ${(v1.all / v3.all).toFixed(2)}x |`,
  );
  record(
    `| Verify one 50-step session in the process (cot_verify(s)), p50 | ${v1.one.toFixed(2)} ms | ${v2.one.toFixed(2)} ms | ${v3.one.toFixed(2)} ms | ${(v1.one / v2.one).toFixed(2)}x | ${(v1.one / v3.one).toFixed(2)}x |`,
  );
}

// 4. Retaining out 1M of 10M steps.
let retention = '';
{
  const total = scale(10_000_000);
  const old = total / 10;
  const path = join(root, 'retention.duckdb');
  const l = await openLedger(path, HASH_VERSION_V2);
  try {
    const seededOld = await append(l, old, (i) => `old-${i % (old / 50)}`);
    await new Promise((r) => setTimeout(r, 1100));
    const cutoff = new Date();
    await new Promise((r) => setTimeout(r, 50));
    const seededNew = await append(l, total - old, (i) => `new-${i % ((total - old) / 50)}`, old);
    await l.writer.visible();
    await l.engine.checkpoint();
    const before = statSync(path).size;
    const r = new Retention(duckdbErasureStore(l.conn), l.catalog, l.writer, { changed: () => undefined, erased: () => l.writer.scrubJournal() });
    const t = performance.now();
    const removed = await r.run({ cutoff, dryRun: false, reason: 'bench', actor: 'bench' });
    const seconds = (performance.now() - t) / 1000;
    const steps = removed.reduce((n, s) => n + s.stepCount, 0);
    if (steps !== old) throw new Error(`retention removed ${steps} steps, not ${old}`);
    const t2 = performance.now();
    const verdicts = await chainVerifier(l.conn, l.catalog, { rowsPerSlice: 1_000_000, pause: async () => undefined }).verify(null);
    const verifySeconds = (performance.now() - t2) / 1000;
    if (verdicts.some((v) => !v.valid)) throw new Error('a chain does not verify after retention');
    await closeLedger(l);
    const t3 = performance.now();
    const { bytesAfter } = await (await import('../src/engines/duckdb/adapter/engine.js')).rewriteDatabaseFile(path, 'fast-reads');
    const rewriteSeconds = (performance.now() - t3) / 1000;
    retention = [
      `| Retain out ${old.toLocaleString('en')} of ${total.toLocaleString('en')} steps (${removed.length.toLocaleString('en')} sessions): records, then deletes | ${seconds.toFixed(1)} s | ${Math.round(steps / seconds).toLocaleString('en')} steps/s |`,
      `| Verify the ${(total - old).toLocaleString('en')} steps left, with the retained prefixes | ${verifySeconds.toFixed(1)} s | |`,
      `| Rewrite the database file (at the stop) | ${rewriteSeconds.toFixed(1)} s | ${(before / 2 ** 20).toFixed(0)} MiB before, ${(bytesAfter / 2 ** 20).toFixed(0)} MiB after |`,
      `| (seeding, for the record: the ledger writer offline) | | ${Math.round(seededOld).toLocaleString('en')} and ${Math.round(seededNew).toLocaleString('en')} steps/s |`,
    ].join('\n');
    console.log(retention);
  } catch (err) {
    await closeLedger(l).catch(() => undefined);
    throw err;
  }
}

const machine = `${cpus().length} cores (${cpus()[0]?.model ?? 'unknown'}), Node ${process.version}`;
const section = `<!-- bench-erasure:start -->
Measured by \`npm run bench:erasure\`${QUICK ? ' (--quick: a tenth of each size)' : ''} on ${machine}, ${new Date().toISOString().slice(0, 10)}.

| cotwire/v1 against v2 and v3 | v1 | v2 | v3 | v2 ÷ v1 (speed) | v3 ÷ v1 (speed) |
|---|---|---|---|---|---|
${results.join('\n')}

| Retention | time | rate |
|---|---|---|
${retention}
<!-- bench-erasure:end -->`;
const docs = join(import.meta.dirname, '../../docs/benchmarks.md');
const text = readFileSync(docs, 'utf8');
const start = text.indexOf('<!-- bench-erasure:start -->');
const end = text.indexOf('<!-- bench-erasure:end -->');
writeFileSync(
  docs,
  start >= 0 && end > start ? `${text.slice(0, start)}${section}${text.slice(end + '<!-- bench-erasure:end -->'.length)}` : `${text.trimEnd()}\n\n${section}\n`,
);
rmSync(root, { recursive: true, force: true });
