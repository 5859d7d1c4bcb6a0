import { createHash, randomUUID } from 'node:crypto';
import type pg from 'pg';

/**
 * The rows both systems receive: a reasoning step with about 300 bytes of
 * content, small JSON input, output and metadata, and the other columns of
 * `_cot_steps`. Deterministic, so that both get the same data.
 */
export const STEP_COLUMNS = [
  'session_id',
  'agent_id',
  'step_type',
  'content',
  'input_data',
  'output_data',
  'confidence',
  'duration_ms',
  'token_count',
  'model',
  'metadata',
] as const;

const TYPES = ['Observation', 'Reasoning', 'ToolCall', 'ToolResult', 'Decision', 'FinalAnswer'] as const;
const MODELS = ['model-a', 'model-b', 'model-c', 'model-d'] as const;
const CONTENT = 'The agent considered the user request, looked up the order history and weighed two plans: refund now or ask for a photo of the damage first. '
  .repeat(3)
  .slice(0, 300);

export function stepRow(session: string, i: number): Array<string | number> {
  return [
    session,
    `agent-${i % 10}`,
    TYPES[i % TYPES.length] as string,
    CONTENT,
    `{"query":"order ${i}"}`,
    `{"ok":true,"n":${i % 7}}`,
    (i % 100) / 100,
    20 + ((i * 37) % 900),
    100 + (i % 400),
    MODELS[i % MODELS.length] as string,
    `{"run":${i % 3}}`,
  ];
}

/** The same table in PostgreSQL, keyed by trace_id as a PostgreSQL user would key it. */
export function postgresSchema(): string {
  return `CREATE TABLE _cot_steps (
    trace_id uuid PRIMARY KEY, org_id text, agent_id text, session_id text NOT NULL, step_index integer NOT NULL,
    step_type text NOT NULL, content text, input_data json, output_data json, confidence double precision,
    duration_ms bigint, token_count integer, model text, metadata json, prev_hash text NOT NULL,
    current_hash text NOT NULL, has_embedding boolean NOT NULL DEFAULT false, created_at timestamptz NOT NULL DEFAULT now(),
    parent_trace_id uuid, ledger_seq bigint NOT NULL)`;
}

/**
 * PostgreSQL with the chain computed by the client, as "Postgres with a
 * trigger" users would: the client keeps each session's head, hashes the
 * row with its predecessor's hash, and inserts it.
 */
export class PostgresChain {
  private readonly heads = new Map<string, { index: number; hash: string }>();
  private seq = 0;

  async insert(client: pg.Client, rows: ReadonlyArray<Array<string | number>>): Promise<void> {
    const values: unknown[] = [];
    const tuples: string[] = [];
    for (const row of rows) {
      const session = row[0] as string;
      const head = this.heads.get(session);
      const index = head === undefined ? 0 : head.index + 1;
      const prev = head?.hash ?? '';
      const hash = createHash('sha256').update(prev).update(JSON.stringify(row)).digest('hex');
      this.heads.set(session, { index, hash });
      const base = values.length;
      values.push(randomUUID(), index, prev, hash, ++this.seq, ...row);
      tuples.push(`(${Array.from({ length: 5 + row.length }, (_, k) => `$${base + k + 1}`).join(', ')})`);
    }
    await client.query(
      `INSERT INTO _cot_steps (trace_id, step_index, prev_hash, current_hash, ledger_seq, ${STEP_COLUMNS.join(', ')}) VALUES ${tuples.join(', ')}`,
      values,
    );
  }
}

/**
 * A step as the ledger writer takes it: the client columns of `_cot_steps` in table order
 * (org_id, agent_id, session_id, step_type, content, input_data, output_data, confidence,
 * duration_ms, token_count, model, metadata, parent_trace_id); `confidence` gives the text of
 * the step's confidence.
 */
export function writerRow(session: string, i: number, confidence: (value: number) => string = () => '0.5'): Array<string | null> {
  const r = stepRow(session, i);
  return [
    null,
    r[1] as string,
    r[0] as string,
    r[2] as string,
    r[3] as string,
    r[4] as string,
    r[5] as string,
    confidence(r[6] as number),
    String(r[7]),
    String(r[8]),
    r[9] as string,
    r[10] as string,
    null,
  ];
}
