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

export function stepRow(session: string, i: number, agent = `agent-${i % 10}`): Array<string | number> {
  return [
    session,
    agent,
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

/** Steps per session in the read datasets. */
export const SESSION_STEPS = 50;

/**
 * Where step i of a read dataset of `size` steps belongs: sessions of 50
 * steps, interleaved as agents working at the same time write them (step i
 * goes to session i mod size/50), each session run by one of 1,000 agents.
 * A session's rows are thus spread over the whole dataset, as in a ledger
 * many agents append to.
 */
export function seededStep(size: number, i: number): { readonly session: string; readonly agent: string } {
  const k = i % Math.max(1, Math.floor(size / SESSION_STEPS));
  return { session: `d${size}-${k}`, agent: `agent-${k % 1000}` };
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

  async insert(client: pg.Client, rows: ReadonlyArray<ReadonlyArray<string | number | null>>): Promise<void> {
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
export function writerRow(session: string, i: number, confidence: (value: number) => string = () => '0.5', agent?: string): Array<string | null> {
  const r = stepRow(session, i, agent);
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

/**
 * What a PostgreSQL user would build instead of cotwire, doing the same job:
 * the chain computed in a BEFORE INSERT trigger under a per-session row lock
 * (each session's head in `_cot_heads`, locked FOR UPDATE), ledger_seq from
 * one sequence, an index on (session_id, step_index), and a SQL function that
 * recomputes one session's chain. Clients insert only their own columns.
 */
export function anchorSchema(): string {
  return `${postgresSchema().replace('trace_id uuid PRIMARY KEY', 'trace_id uuid PRIMARY KEY DEFAULT gen_random_uuid()').replace('step_index integer NOT NULL', 'step_index integer').replace('prev_hash text NOT NULL', 'prev_hash text').replace('current_hash text NOT NULL', 'current_hash text').replace('ledger_seq bigint NOT NULL', 'ledger_seq bigint')};
CREATE INDEX _cot_steps_session ON _cot_steps (session_id, step_index);
CREATE TABLE _cot_heads (session_id text PRIMARY KEY, step_index integer NOT NULL, hash text NOT NULL);
CREATE SEQUENCE _cot_seq;
CREATE FUNCTION _cot_row_hash(prev text, s _cot_steps) RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT encode(sha256(convert_to(concat_ws(chr(31), prev, s.trace_id, s.org_id, s.agent_id, s.session_id, s.step_index, s.step_type, s.content,
    s.input_data, s.output_data, s.confidence, s.duration_ms, s.token_count, s.model, s.metadata, s.has_embedding,
    (extract(epoch FROM s.created_at) * 1000000)::bigint, s.parent_trace_id, s.ledger_seq), 'UTF8')), 'hex')
$$;
CREATE FUNCTION _cot_chain() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE h _cot_heads%ROWTYPE;
BEGIN
  INSERT INTO _cot_heads VALUES (NEW.session_id, -1, '') ON CONFLICT (session_id) DO NOTHING;
  SELECT * INTO h FROM _cot_heads WHERE session_id = NEW.session_id FOR UPDATE;
  NEW.step_index := h.step_index + 1;
  NEW.prev_hash := h.hash;
  NEW.ledger_seq := nextval('_cot_seq');
  NEW.current_hash := _cot_row_hash(NEW.prev_hash, NEW);
  UPDATE _cot_heads SET step_index = NEW.step_index, hash = NEW.current_hash WHERE session_id = NEW.session_id;
  RETURN NEW;
END
$$;
CREATE TRIGGER _cot_chain BEFORE INSERT ON _cot_steps FOR EACH ROW EXECUTE FUNCTION _cot_chain();
CREATE FUNCTION cot_verify(s text) RETURNS TABLE (valid boolean, step_count bigint, first_broken_index integer) LANGUAGE sql STABLE AS $$
  SELECT coalesce(bool_and(ok), true), count(*), min(step_index) FILTER (WHERE NOT ok)
  FROM (
    SELECT step_index,
      prev_hash = coalesce(lag(current_hash) OVER w, '') AND current_hash = _cot_row_hash(prev_hash, t) AND step_index = row_number() OVER w - 1 AS ok
    FROM _cot_steps t WHERE session_id = s WINDOW w AS (ORDER BY step_index)
  ) x
$$;`;
}
