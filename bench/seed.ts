import type pg from 'pg';
import { DuckDBEngine } from '../src/engine/duckdb/engine.js';
import { LedgerCatalog } from '../src/ledger/catalog.js';
import { STEPS_DDL, STEPS_INDEX_DDL } from '../src/ledger/schema.js';
import { LedgerWriter } from '../src/ledger/writer.js';
import { stepRow, writerRow } from './dataset.js';

/**
 * The read benchmarks' datasets. cotwire's is appended by its own ledger
 * writer, offline, in large units (the chains are real, so verification can
 * be measured on them); PostgreSQL's is generated in SQL. Returns cotwire's
 * append rate, for the record.
 */
export async function seedCotwire(path: string, size: number): Promise<number> {
  const engine = await DuckDBEngine.open({ path });
  const conn = await engine.connect();
  try {
    await conn.run(STEPS_DDL);
    for (const ddl of STEPS_INDEX_DDL) await conn.run(ddl);
    const catalog = new LedgerCatalog(conn, (name) => name.startsWith('_cot'));
    const table = await catalog.find(['_cot_steps']);
    if (table === null) throw new Error('no _cot_steps');
    // Offline and in large units: straight into DuckDB, without the server's journal.
    const writer = await LedgerWriter.open(engine, catalog, { journalPath: null });
    // The canonical text of each confidence value is DuckDB's own DOUBLE → VARCHAR cast.
    const confidence = new Map<number, string>();
    for (const [v, text] of (await conn.query('SELECT x / 100.0, CAST(CAST(x / 100.0 AS DOUBLE) AS VARCHAR) FROM range(100) t(x)')) as Array<
      [number, string]
    >) {
      confidence.set(Number(v), text);
    }
    const existing = Number(((await conn.query('SELECT count(*) FROM main._cot_steps')) as [[bigint]])[0][0]);
    const t = performance.now();
    const UNIT = 10_000;
    for (let done = 0; done < size; done += UNIT) {
      const rows: Array<Array<string | null>> = [];
      for (let i = done; i < Math.min(size, done + UNIT); i++) {
        rows.push(writerRow(`seed-${Math.floor((existing + i) / 100)}`, existing + i, (c) => confidence.get(c) ?? String(c)));
      }
      await writer.append([{ table, rows }]);
    }
    const rate = size / ((performance.now() - t) / 1000);
    await writer.close();
    return rate;
  } finally {
    conn.close();
    await engine.close();
  }
}

/** The same rows in PostgreSQL, generated server-side (the chain is not re-verified there). */
export async function seedPostgres(client: pg.Client, size: number): Promise<void> {
  const base = Number((await client.query('SELECT count(*) AS n FROM _cot_steps')).rows[0].n);
  const sample = stepRow('x', 0);
  await client.query(
    `INSERT INTO _cot_steps (trace_id, step_index, prev_hash, current_hash, ledger_seq, session_id, agent_id, step_type, content,
       input_data, output_data, confidence, duration_ms, token_count, model, metadata, created_at)
     SELECT gen_random_uuid(), i % 100, md5(i::text), md5((i + 1)::text) || md5(i::text), i + 1000000000,
       'seed-' || (i / 100), 'agent-' || (i % 10),
       (ARRAY['Observation','Reasoning','ToolCall','ToolResult','Decision','FinalAnswer'])[i % 6 + 1], $1,
       ('{"query":"order ' || i || '"}')::json, ('{"ok":true,"n":' || (i % 7) || '}')::json, (i % 100) / 100.0,
       20 + ((i * 37) % 900), 100 + (i % 400), (ARRAY['model-a','model-b','model-c','model-d'])[i % 4 + 1],
       ('{"run":' || (i % 3) || '}')::json, now() + (i || ' microseconds')::interval
     FROM generate_series($2::bigint, $3::bigint) AS i`,
    [sample[3], base, base + size - 1],
  );
  await client.query('ANALYZE _cot_steps');
}
