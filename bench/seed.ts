import type pg from 'pg';
import { DuckDBEngine } from '../src/engines/duckdb/adapter/engine.js';
import { STEPS_DDL, STEPS_INDEX_DDL } from '../src/ledger/chain/schema.js';
import { LedgerWriter } from '../src/engines/duckdb/ledger/writer.js';
import { SESSION_STEPS, seededStep, stepRow, writerRow } from './dataset.js';
import { duckdbLedgers } from '../src/engines/duckdb/ledger/catalog-source.js';

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
    const catalog = duckdbLedgers(conn, (name) => name.startsWith('_cot'));
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
        const { session, agent } = seededStep(size, i);
        rows.push(writerRow(session, existing + i, (c) => confidence.get(c) ?? String(c), agent));
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

/** The columns a seeded step's values come from, in SQL over i (its number in the ledger) and k (its session in the dataset). */
const seededColumns = (size: number): string => {
  const sessions = Math.max(1, Math.floor(size / SESSION_STEPS));
  return `'d${size}-' || k AS session_id, 'agent-' || (k % 1000) AS agent_id,
       (ARRAY['Observation','Reasoning','ToolCall','ToolResult','Decision','FinalAnswer'])[i % 6 + 1] AS step_type, $1::text AS content,
       ('{"query":"order ' || i || '"}')::json AS input_data, ('{"ok":true,"n":' || (i % 7) || '}')::json AS output_data, (i % 100) / 100.0 AS confidence,
       20 + ((i * 37) % 900) AS duration_ms, 100 + (i % 400) AS token_count, (ARRAY['model-a','model-b','model-c','model-d'])[i % 4 + 1] AS model,
       ('{"run":' || (i % 3) || '}')::json AS metadata, now() + (i || ' microseconds')::interval AS created_at, (i - $2) / ${sessions} AS step`;
};

/**
 * The same rows in plain PostgreSQL, generated server-side in one statement
 * (placeholder hashes: nothing verifies chains there).
 */
export async function seedPostgres(client: pg.Client, size: number): Promise<void> {
  const base = Number((await client.query('SELECT count(*) AS n FROM _cot_steps')).rows[0].n);
  const sessions = Math.max(1, Math.floor(size / SESSION_STEPS));
  await client.query(
    `INSERT INTO _cot_steps (trace_id, step_index, prev_hash, current_hash, ledger_seq, session_id, agent_id, step_type, content,
       input_data, output_data, confidence, duration_ms, token_count, model, metadata, created_at)
     SELECT gen_random_uuid(), step, md5(i::text), md5((i + 1)::text) || md5(i::text), i + 1000000000,
       session_id, agent_id, step_type, content, input_data, output_data, confidence, duration_ms, token_count, model, metadata, created_at
     FROM (SELECT i, (i - $2) % ${sessions} AS k FROM generate_series($2::bigint, $3::bigint) AS i) g, LATERAL (SELECT ${seededColumns(size)}) c`,
    [stepRow('x', 0)[3], base, base + size - 1],
  );
  await client.query('ANALYZE _cot_steps');
}

/**
 * The same rows in the trigger anchor (dataset.ts, anchorSchema), with real
 * chains that its cot_verify() accepts: one INSERT per step level (every
 * session's step j at once, chained to the heads the level before left),
 * as the trigger would have chained them one by one, in a fraction of the time.
 */
export async function seedAnchor(client: pg.Client, size: number): Promise<void> {
  const base = Number((await client.query('SELECT count(*) AS n FROM _cot_steps')).rows[0].n);
  const sessions = Math.max(1, Math.floor(size / SESSION_STEPS));
  const levels = Math.ceil(size / sessions);
  await client.query('ALTER TABLE _cot_steps DISABLE TRIGGER _cot_chain');
  try {
    for (let j = 0; j < levels; j++) {
      const first = base + j * sessions;
      const last = Math.min(base + size, first + sessions) - 1;
      await client.query(
        `WITH r AS (
           SELECT ROW(gen_random_uuid(), NULL, c.agent_id, c.session_id, c.step, c.step_type, c.content, c.input_data, c.output_data, c.confidence,
             c.duration_ms, c.token_count, c.model, c.metadata, coalesce(h.hash, ''), NULL, false, c.created_at, NULL, nextval('_cot_seq'))::_cot_steps AS r
           FROM (SELECT i, (i - $2) % ${sessions} AS k FROM generate_series($4::bigint, $3::bigint) AS i) g, LATERAL (SELECT ${seededColumns(size)}) c
           LEFT JOIN _cot_heads h ON h.session_id = c.session_id
         ), ins AS (
           INSERT INTO _cot_steps
           SELECT (r).trace_id, (r).org_id, (r).agent_id, (r).session_id, (r).step_index, (r).step_type, (r).content, (r).input_data, (r).output_data,
             (r).confidence, (r).duration_ms, (r).token_count, (r).model, (r).metadata, (r).prev_hash, _cot_row_hash((r).prev_hash, r),
             (r).has_embedding, (r).created_at, (r).parent_trace_id, (r).ledger_seq
           FROM r RETURNING session_id, step_index, current_hash
         )
         INSERT INTO _cot_heads SELECT session_id, step_index, current_hash FROM ins
         ON CONFLICT (session_id) DO UPDATE SET step_index = EXCLUDED.step_index, hash = EXCLUDED.hash`,
        [stepRow('x', 0)[3], base, last, first],
      );
    }
  } finally {
    await client.query('ALTER TABLE _cot_steps ENABLE TRIGGER _cot_chain');
  }
  await client.query('VACUUM ANALYZE _cot_heads');
  await client.query('ANALYZE _cot_steps');
}
