import type { EngineConnection } from '../../../engine/port.js';
import { STEPS_TABLE } from '../../../ledger/chain/schema.js';
import { EMBEDDINGS_TABLE, MAX_TEXT_CHARS, embeddingText, vectorMismatch, type VectorTableState } from '../../../ledger/embeddings.js';

export { EMBEDDINGS_TABLE, MAX_TEXT_CHARS, embeddingText, vectorMismatch, type VectorTableState };

export function embeddingsDdl(dimensions: number): string[] {
  return [
    `CREATE TABLE IF NOT EXISTS main.${EMBEDDINGS_TABLE} (
  trace_id UUID NOT NULL,
  session_id VARCHAR NOT NULL,
  agent_id VARCHAR,
  step_type VARCHAR NOT NULL,
  step_created_at TIMESTAMP WITH TIME ZONE NOT NULL,
  model VARCHAR NOT NULL,
  dimensions INTEGER NOT NULL,
  vector FLOAT[${dimensions}] NOT NULL,
  created_at TIMESTAMP WITH TIME ZONE NOT NULL
)`,
    // cot_similar() reads one step's vector, and search results are joined back to their steps.
    `CREATE INDEX IF NOT EXISTS ${EMBEDDINGS_TABLE}_trace_id ON main.${EMBEDDINGS_TABLE} (trace_id)`,
  ];
}

/**
 * Creates the vector table for this length of vector, or reads what it
 * holds. An empty table of another length is made again; one with vectors
 * is left as it is, for `cotwire reembed` to rebuild.
 */
export async function openVectorTable(conn: EngineConnection, dimensions: number): Promise<VectorTableState> {
  for (const ddl of embeddingsDdl(dimensions)) await conn.run(ddl);
  const state = await vectorTableState(conn);
  if (state.model !== null || state.dimensions === dimensions) return state;
  await rebuildVectorTable(conn, dimensions);
  return { dimensions, model: null };
}

/** Drops every vector and creates the table for vectors of this length. */
export async function rebuildVectorTable(conn: EngineConnection, dimensions: number): Promise<void> {
  await conn.run(`DROP TABLE IF EXISTS main.${EMBEDDINGS_TABLE}`);
  for (const ddl of embeddingsDdl(dimensions)) await conn.run(ddl);
}

async function vectorTableState(conn: EngineConnection): Promise<VectorTableState> {
  const [[type]] = (await conn.query(
    `SELECT data_type FROM system.main.duckdb_columns() WHERE database_name = current_database() AND schema_name = 'main' AND table_name = '${EMBEDDINGS_TABLE}' AND column_name = 'vector'`,
  )) as [[string]];
  const dimensions = Number(/\[(\d+)\]$/.exec(type)?.[1] ?? 0);
  const [row] = (await conn.query(`SELECT model FROM main.${EMBEDDINGS_TABLE} LIMIT 1`)) as Array<[string]>;
  return { dimensions, model: row?.[0] ?? null };
}

/** Writes vectors: one row per step, in one transaction. */
export async function storeVectors(
  conn: EngineConnection,
  model: string,
  rows: ReadonlyArray<{ readonly step: PendingStep; readonly vector: Float32Array }>,
): Promise<void> {
  if (rows.length === 0) return;
  const now = String(BigInt(Date.now()) * 1000n);
  const dims = String(rows[0]?.vector.length ?? 0);
  await conn.run('BEGIN TRANSACTION');
  try {
    await conn.append(
      { catalog: await mainCatalog(conn), schema: 'main', name: EMBEDDINGS_TABLE },
      [TEXT, TEXT, TEXT, TEXT, MICROS, TEXT, TEXT, { epochMicros: false, floats: rows[0]?.vector.length ?? 0 }, MICROS],
      rows.map(({ step, vector }) => [step.traceId, step.sessionId, step.agentId, step.stepType, step.createdAt, model, dims, vector, now]),
    );
    await conn.run('COMMIT');
  } catch (err) {
    await conn.run('ROLLBACK').catch(() => undefined);
    throw err;
  }
}

const TEXT = { epochMicros: false };
const MICROS = { epochMicros: true };

const catalogs = new WeakMap<EngineConnection, string>();

async function mainCatalog(conn: EngineConnection): Promise<string> {
  let name = catalogs.get(conn);
  if (name === undefined) {
    const [[db]] = (await conn.query('SELECT current_database()')) as [[string]];
    name = db;
    catalogs.set(conn, name);
  }
  return name;
}

/** A vector as DuckDB's list literal; float32 values print exactly in at most 9 significant digits. */
export function vectorText(v: Float32Array): string {
  let s = '[';
  for (let i = 0; i < v.length; i++) s += (i === 0 ? '' : ',') + (v[i] as number).toPrecision(9);
  return `${s}]`;
}

/** A step waiting for its vector. */
export interface PendingStep {
  readonly traceId: string;
  readonly seq: number;
  readonly text: string;
  readonly sessionId: string;
  readonly agentId: string | null;
  readonly stepType: string;
  /** Microseconds since the epoch. */
  readonly createdAt: string;
}

const STEP_COLUMNS =
  'CAST(trace_id AS VARCHAR), ledger_seq, content, CAST(input_data AS VARCHAR), CAST(output_data AS VARCHAR), session_id, agent_id, step_type, CAST(epoch_us(created_at) AS VARCHAR)';

function pendingOf(r: unknown[]): PendingStep {
  const [traceId, seq, content, input, output, sessionId, agentId, stepType, createdAt] = r as [
    string,
    bigint,
    string | null,
    string | null,
    string | null,
    string,
    string | null,
    string,
    string,
  ];
  return { traceId, seq: Number(seq), text: embeddingText(content, input, output), sessionId, agentId, stepType, createdAt };
}

/**
 * The steps selected for an embedding that have no vector, as ledger_seq in
 * order, and the highest ledger_seq the ledger held then, read in one
 * snapshot: the queue a restart recomputes, so nothing queued is lost.
 */
export async function missingVectors(conn: EngineConnection): Promise<{ readonly missing: number[]; readonly scanned: number }> {
  const rows = (await conn.query(
    `SELECT (SELECT coalesce(max(ledger_seq), 0) FROM main.${STEPS_TABLE}),
            (SELECT coalesce(list(s.ledger_seq ORDER BY s.ledger_seq), []) FROM main.${STEPS_TABLE} s
             WHERE s.has_embedding AND NOT EXISTS (SELECT 1 FROM main.${EMBEDDINGS_TABLE} e WHERE e.trace_id = s.trace_id))`,
  )) as Array<[bigint, bigint[]]>;
  const [scanned, missing] = rows[0] ?? [0n, []];
  return { missing: missing.map(Number), scanned: Number(scanned) };
}

/** Selected steps with ledger_seq in [from, to] (and among `only`, when given), the first `limit` in order. */
export async function selectedSteps(conn: EngineConnection, from: number, to: number, limit: number, only?: readonly number[]): Promise<PendingStep[]> {
  // The range lets the scan skip row groups by their ledger_seq bounds; the list picks within it.
  const among = only === undefined ? '' : ` AND ledger_seq IN (${only.map((n) => String(Math.trunc(n))).join(',')})`;
  const rows = await conn.query(
    `SELECT ${STEP_COLUMNS} FROM main.${STEPS_TABLE} WHERE has_embedding AND ledger_seq >= CAST($1 AS BIGINT) AND ledger_seq <= CAST($2 AS BIGINT)${among} ORDER BY ledger_seq LIMIT ${Math.trunc(limit)}`,
    [String(from), String(to)],
  );
  return rows.map(pendingOf);
}
