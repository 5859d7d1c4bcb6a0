// After the bench: the analytic queries on the same 1M interleaved rows, compressed both ways.
import { DuckDBInstance } from '@duckdb/node-api';
import { seedCotwire } from './dist-bench/bench/seed.js';
import { rmSync, mkdirSync } from 'node:fs';
rmSync('/tmp/ab', { recursive: true, force: true }); mkdirSync('/tmp/ab');
await seedCotwire('/tmp/ab/fast.duckdb', 1_000_000);
const inst = await DuckDBInstance.create('/tmp/ab/small.duckdb');
const conn = await inst.connect();
const q = async (s) => (await conn.runAndReadAll(s)).getRows();
await q(`ATTACH '/tmp/ab/fast.duckdb' AS fast (READ_ONLY)`);
await q(`CREATE TABLE small AS SELECT * FROM fast._cot_steps ORDER BY ledger_seq`);
await q('CHECKPOINT');
await q("SET disabled_optimizers = 'statistics_propagation'");
const queries = {
  mix: (t) => `SELECT agent_id, step_type, count(*) FROM ${t} GROUP BY 1, 2 ORDER BY 1, 2`,
  p95: (t) => `SELECT model, date_trunc('hour', created_at) AS hour, percentile_cont(0.95) WITHIN GROUP (ORDER BY duration_ms) FROM ${t} GROUP BY 1, 2 ORDER BY 1, 2`,
  window: (t) => `SELECT max(gap) FROM (SELECT created_at - lag(created_at) OVER (PARTITION BY session_id ORDER BY step_index) AS gap FROM ${t}) t`,
};
for (const round of [1, 2]) for (const [name, sql] of Object.entries(queries)) for (const t of ['fast._cot_steps', 'small']) {
  const lat = []; for (let i = 0; i < 5; i++) { const s = performance.now(); await q(sql(t)); lat.push(performance.now() - s); }
  lat.sort((a, b) => a - b); console.log(round, name.padEnd(7), t.padEnd(16), lat[2].toFixed(1), 'ms');
}
