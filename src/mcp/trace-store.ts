import { createHash } from 'node:crypto';
import pg from 'pg';
import Cursor from 'pg-cursor';
import { leadingWords, tokenize } from '../sql/lexer.js';
import { toToolError, ToolError } from './tool-error.js';
import { SqlState } from '../errors/sqlstate.js';

/**
 * The MCP tools' view of cotwire: plain SQL over a Postgres connection pool,
 * so that every append goes through the server's guard and writer like any
 * other client's. Nothing here opens a database file.
 */

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type Step = Record<string, Json>;

/** search_reasoning's inputs. */
export interface SearchFilters {
  readonly query: string;
  readonly k: number;
  readonly step_types?: readonly string[] | undefined;
  readonly agent_id?: string | undefined;
  readonly session_id?: string | undefined;
  readonly since?: string | undefined;
  readonly until?: string | undefined;
  readonly min_similarity?: number | undefined;
}

export interface NewStep {
  readonly session_id: string;
  readonly step_type: string;
  readonly content: string;
  readonly input_data?: Json | undefined;
  readonly output_data?: Json | undefined;
  readonly confidence?: number | undefined;
  readonly duration_ms?: number | undefined;
  readonly token_count?: number | undefined;
  readonly model?: string | undefined;
  readonly metadata?: Json | undefined;
  readonly parent_trace_id?: string | undefined;
}

export interface ChainCheck {
  readonly valid: boolean;
  readonly step_count: number;
  /** The first step where the chain breaks, and how: edited, inserted, deleted or reordered. */
  readonly first_break: { step_index: number; kind: string; expected_hash: string | null; actual_hash: string | null } | null;
}

export interface ThoughtNode {
  readonly trace_id: string;
  readonly step_index: number;
  readonly step_type: string;
  readonly content: string | null;
  readonly confidence: number | null;
  readonly parent_trace_id: string | null;
  readonly children: ThoughtNode[];
}

/** Deep enough for any real chain of thought; a longer walk means parent links that loop. */
const MAX_TRAIL = 10_000;

/**
 * bigint columns (counts, step indexes, ledger_seq) as JSON numbers where
 * they are exact, not node-postgres's strings; anything else as the driver
 * parses it.
 */
function jsonTypeParser(oid: number, format?: 'text' | 'binary'): (value: string) => unknown {
  if (oid === pg.types.builtins.INT8 && format !== 'binary') {
    return (value) => {
      const n = Number(value);
      return Number.isSafeInteger(n) ? n : value;
    };
  }
  return (pg.types.getTypeParser as (oid: number, format?: string) => (value: string) => unknown)(oid, format);
}

/** Driver values as JSON: BIGINT (a string from node-postgres) as a number, timestamps as ISO text. */
function jsonValue(v: unknown): Json {
  if (v === null || v === undefined) return null;
  if (v instanceof Date) return v.toISOString();
  if (typeof v === 'bigint') return Number(v);
  return v as Json;
}

function stepOf(row: Record<string, unknown>): Step {
  const out: Step = {};
  for (const [k, v] of Object.entries(row)) out[k] = k === 'ledger_seq' && v !== null ? Number(v) : jsonValue(v);
  return out;
}

/**
 * pg-cursor has no handler for COPY data, and node-postgres would throw from
 * its socket handler (ending the process) if one arrived: the query tool
 * refuses COPY first, and this keeps a stray CopyData from being fatal.
 */
class ReadCursor extends Cursor {
  handleCopyData(): void {}
}

const jsonParam = (v: Json | undefined): string | null => (v === undefined ? null : JSON.stringify(v));

/** The store's statements (a fixed set of texts) by the name they are prepared under. */
const statementNames = new Map<string, string>();

export class TraceStore {
  private agentId: Promise<string> | null = null;

  constructor(
    private readonly pool: pg.Pool,
    /**
     * The query tool's own connections: a SET run through it changes only
     * them, never the connections that log steps.
     */
    private readonly readPool: pg.Pool,
    /** host:port, for connection errors. */
    private readonly target: string,
    /** The user it connects as: the agent its steps are logged as when the server knows no agent_id for it. */
    private readonly user: string,
  ) {}

  static fromUrl(url: string): TraceStore {
    const options = { connectionString: url, application_name: 'cotwire-mcp', idleTimeoutMillis: 30_000, types: { getTypeParser: jsonTypeParser } };
    const pools = [new pg.Pool({ ...options, max: 4 }), new pg.Pool({ ...options, max: 2 })] as const;
    // An idle connection that the server closes is dropped from its pool; the next call opens another.
    for (const p of pools) p.on('error', () => undefined);
    const parsed = new pg.Client(options);
    return new TraceStore(pools[0], pools[1], `${parsed.host}:${parsed.port}`, parsed.user ?? '');
  }

  async close(): Promise<void> {
    await Promise.all([this.pool.end(), this.readPool.end()]);
  }

  /**
   * Runs one of the store's own statements as a named prepared statement,
   * which each pooled connection prepares once: the server then plans a
   * tool's query once per connection, not at every call.
   */
  private async run(text: string, values: readonly unknown[] = []): Promise<Record<string, unknown>[]> {
    let name = statementNames.get(text);
    if (name === undefined) {
      name = `cotwire_mcp_${createHash('sha256').update(text).digest('hex').slice(0, 16)}`;
      statementNames.set(text, name);
    }
    try {
      return (await this.pool.query({ name, text, values: values as unknown[] })).rows as Record<string, unknown>[];
    } catch (err) {
      throw toToolError(err, this.target);
    }
  }

  /**
   * The agent the steps are logged as: the identity the server stamps for
   * this Postgres user (users[].agent_id), or else the user's name. A caller
   * never chooses it.
   */
  identity(): Promise<string> {
    // The user's name as the client gave it: on a PostgreSQL engine, current_user is the backend's role.
    this.agentId ??= this.run('SELECT coalesce(cot_agent_id(), $1::text) AS agent_id', [this.user]).then(
      (rows) => String(rows[0]?.['agent_id']),
      (err: unknown) => {
        this.agentId = null;
        throw err;
      },
    );
    return this.agentId;
  }

  async logStep(step: NewStep): Promise<{ trace_id: string; step_index: number; current_hash: string; ledger_seq: number; agent_id: string }> {
    const agentId = await this.identity();
    const rows = await this.run(
      `INSERT INTO _cot_steps (session_id, agent_id, step_type, content, input_data, output_data, confidence, duration_ms, token_count, model, metadata, parent_trace_id)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
       RETURNING trace_id, step_index, current_hash, ledger_seq, agent_id`,
      [
        step.session_id,
        agentId,
        step.step_type,
        step.content,
        jsonParam(step.input_data),
        jsonParam(step.output_data),
        step.confidence ?? null,
        step.duration_ms ?? null,
        step.token_count ?? null,
        step.model ?? null,
        jsonParam(step.metadata),
        step.parent_trace_id ?? null,
      ],
    );
    const r = rows[0] ?? {};
    return {
      trace_id: String(r['trace_id']),
      step_index: Number(r['step_index']),
      current_hash: String(r['current_hash']),
      ledger_seq: Number(r['ledger_seq']),
      agent_id: String(r['agent_id']),
    };
  }

  async replay(sessionId: string): Promise<Step[]> {
    return (await this.run('SELECT * FROM cot_replay($1)', [sessionId])).map(stepOf);
  }

  async step(traceId: string): Promise<Step | null> {
    const rows = await this.run('SELECT * FROM cot_trace($1)', [traceId]);
    return rows[0] === undefined ? null : stepOf(rows[0]);
  }

  /** Null when the session has no steps. */
  async verify(sessionId: string): Promise<ChainCheck | null> {
    const rows = await this.run('SELECT valid, step_count, first_broken_index, break_kind, expected_hash, actual_hash FROM cot_verify($1)', [sessionId]);
    const r = rows[0];
    if (r === undefined) return null;
    const valid = r['valid'] === true;
    return {
      valid,
      step_count: Number(r['step_count']),
      first_break: valid
        ? null
        : {
            step_index: Number(r['first_broken_index']),
            kind: String(r['break_kind']),
            expected_hash: (r['expected_hash'] as string | null) ?? null,
            actual_hash: (r['actual_hash'] as string | null) ?? null,
          },
    };
  }

  /** cot_search(): the steps most like a text, best first, with their similarity. */
  async search(f: SearchFilters): Promise<Step[]> {
    const rows = await this.run(
      `SELECT trace_id, session_id, agent_id, step_index, step_type, content, created_at, similarity
       FROM cot_search($1, CAST($2 AS INTEGER), step_types := string_to_array($3, ','), agent_id := $4, session_id := $5,
                       since := $6, until := $7, min_similarity := $8)`,
      [
        f.query,
        f.k,
        f.step_types === undefined || f.step_types.length === 0 ? null : f.step_types.join(','),
        f.agent_id ?? null,
        f.session_id ?? null,
        f.since ?? null,
        f.until ?? null,
        f.min_similarity ?? null,
      ],
    );
    return rows.map(stepOf);
  }

  async sessions(agentId: string, limit: number): Promise<Step[]> {
    const rows = await this.run(
      `SELECT session_id, step_count, first_step_at, last_step_at, chain_valid
       FROM cot_sessions($1) ORDER BY last_step_at DESC, session_id LIMIT $2`,
      [agentId, limit],
    );
    return rows.map(stepOf);
  }

  /** The steps from the root of a step's parent_trace_id links down to the step itself. */
  async trail(traceId: string): Promise<{ trail: Step[]; complete: boolean; missing_parent: string | null }> {
    const path: Step[] = [];
    const seen = new Set<string>();
    let next: string | null = traceId;
    while (next !== null) {
      if (seen.has(next) || path.length >= MAX_TRAIL) {
        throw new ToolError('22000', `the parent_trace_id links from step ${traceId} do not reach a root within ${MAX_TRAIL} steps (they loop at ${next})`);
      }
      seen.add(next);
      const step = await this.step(next);
      if (step === null) {
        if (path.length === 0) throw new ToolError(SqlState.NoDataFound, `no step has trace_id ${traceId}`);
        // The parent was named but is not in the ledger: the trail is what can be shown.
        return { trail: path.reverse(), complete: false, missing_parent: next };
      }
      path.push(step);
      next = (step['parent_trace_id'] as string | null) ?? null;
    }
    return { trail: path.reverse(), complete: true, missing_parent: null };
  }

  /**
   * A session's steps as a tree: a step hangs under the step its
   * parent_trace_id names when that step is in the session; every other step
   * is a root. Roots and children keep step order.
   */
  async tree(sessionId: string): Promise<{ step_count: number; roots: ThoughtNode[] }> {
    const steps = await this.replay(sessionId);
    const nodes = new Map<string, ThoughtNode>();
    for (const s of steps) {
      nodes.set(String(s['trace_id']), {
        trace_id: String(s['trace_id']),
        step_index: Number(s['step_index']),
        step_type: String(s['step_type']),
        content: (s['content'] as string | null) ?? null,
        confidence: (s['confidence'] as number | null) ?? null,
        parent_trace_id: (s['parent_trace_id'] as string | null) ?? null,
        children: [],
      });
    }
    const roots: ThoughtNode[] = [];
    for (const node of nodes.values()) {
      const parent = node.parent_trace_id === null ? undefined : nodes.get(node.parent_trace_id);
      // A parent later in the session would make a loop possible; such a link is shown as a root.
      if (parent !== undefined && parent.step_index < node.step_index) parent.children.push(node);
      else roots.push(node);
    }
    return { step_count: steps.length, roots };
  }

  /**
   * One statement, in a read-only transaction that is always rolled back:
   * the server's guard refuses anything that writes (25006), whatever the
   * role of the user the MCP server connects as.
   */
  async query(sql: string, maxRows: number): Promise<{ columns: string[]; rows: Json[][]; truncated: boolean; command: string | null }> {
    if (leadingWords(tokenize(sql), 1)[0] === 'COPY') {
      throw new ToolError('0A000', 'the query tool does not run COPY', "Use SELECT: the rows come back as the tool's result.");
    }
    let client: pg.PoolClient;
    try {
      client = await this.readPool.connect();
    } catch (err) {
      throw toToolError(err, this.target);
    }
    let broken: unknown;
    try {
      await client.query('BEGIN READ ONLY');
      const cursor = client.query(new ReadCursor(sql, [], { rowMode: 'array' }));
      // A cursor that failed has already synchronised the connection; closing it again would not.
      const { rows, result } = await new Promise<{ rows: unknown[][]; result: pg.QueryResult | undefined }>((resolve, reject) => {
        cursor.read(maxRows + 1, (err, rows, result) => (err !== undefined && err !== null ? reject(err) : resolve({ rows: rows as unknown[][], result })));
      });
      await cursor.close();
      return {
        columns: (result?.fields ?? []).map((f) => f.name),
        rows: rows.slice(0, maxRows).map((r) => r.map(jsonValue)),
        truncated: rows.length > maxRows,
        command: result?.command ?? null,
      };
    } catch (err) {
      broken = typeof (err as { severity?: unknown }).severity === 'string' ? undefined : err;
      throw toToolError(err, this.target);
    } finally {
      if (broken === undefined) await client.query('ROLLBACK').catch((err: unknown) => (broken = err));
      client.release(broken instanceof Error ? broken : undefined);
    }
  }
}
