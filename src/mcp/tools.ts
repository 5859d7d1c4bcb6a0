import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { STEP_TYPES } from '../ledger/chain/schema.js';
import { ToolError } from './tool-error.js';
import type { Json, TraceStore } from './trace-store.js';
import { SqlState } from '../errors/sqlstate.js';

/**
 * The reasoning-trace tools. Each input schema is checked by the SDK before
 * the handler runs, so a malformed call never reaches cotwire; what cotwire
 * itself refuses comes back with its SQLSTATE.
 */

const sessionId = z.string().min(1, 'session_id must not be empty').max(1024).describe('The session (one chain of thought) the step belongs to.');
const traceId = z.guid('trace_id must be a UUID').describe("A step's trace_id, as log_reasoning_step returned it.");
const json = z.json().describe('Any JSON value.');

function ok(result: Record<string, Json>): CallToolResult {
  return { content: [{ type: 'text', text: JSON.stringify(result, null, 2) }], structuredContent: result };
}

function failed(err: unknown): CallToolResult {
  const e = err instanceof ToolError ? err : new ToolError('XX000', err instanceof Error ? err.message : String(err));
  return { content: [{ type: 'text', text: e.text() }], structuredContent: { error: e.toJSON() }, isError: true };
}

/** Runs a handler, turning every failure into a tool error result: the MCP server stays up. */
function tool<A>(fn: (args: A) => Promise<Record<string, Json>>): (args: A) => Promise<CallToolResult> {
  return async (args) => {
    try {
      return ok(await fn(args));
    } catch (err) {
      return failed(err);
    }
  };
}

const noSession = (id: string): ToolError =>
  new ToolError(SqlState.NoDataFound, `session "${id}" has no steps`, "Session ids are case-sensitive; get_session_history lists an agent's sessions.");

export function registerTools(server: McpServer, store: TraceStore): void {
  server.registerTool(
    'log_reasoning_step',
    {
      title: 'Log a reasoning step',
      description:
        "Append one step of your chain of thought to the tamper-evident ledger. The server chains it to the session's previous step with SHA-256 and returns its trace_id, step_index, current_hash and global ledger_seq. Steps are never changed or removed. The agent_id is the identity of the connection, never an argument.",
      inputSchema: {
        session_id: sessionId,
        step_type: z.enum(STEP_TYPES, { error: `step_type must be one of ${STEP_TYPES.join(', ')}` }).describe('What kind of step this is.'),
        content: z.string().describe('The step itself: what was observed, thought, decided or answered.'),
        input_data: json.optional().describe("The step's input, for example a tool call's arguments."),
        output_data: json.optional().describe("The step's output, for example a tool's result."),
        confidence: z.number().min(0, 'confidence must be between 0 and 1').max(1, 'confidence must be between 0 and 1').optional(),
        duration_ms: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).optional(),
        token_count: z.number().int().min(0).max(2_147_483_647).optional(),
        model: z.string().max(1024).optional().describe('The model that produced the step.'),
        metadata: json.optional(),
        parent_trace_id: traceId.optional().describe('The step this one follows from, when reasoning branches (tree of thoughts).'),
      },
    },
    tool(async (step) => ({ ...(await store.logStep(step)) })),
  );

  server.registerTool(
    'replay_decision',
    {
      title: 'Replay a decision',
      description:
        "Return a session's steps in order, with its agent_id and step_count, and (unless verify_chain is false) whether its hash chain is intact, naming the first broken step when it is not.",
      inputSchema: { session_id: sessionId, verify_chain: z.boolean().default(true) },
    },
    tool(async ({ session_id, verify_chain }) => {
      const steps = await store.replay(session_id);
      const first = steps[0];
      if (first === undefined) throw noSession(session_id);
      const check = verify_chain ? await store.verify(session_id) : null;
      return {
        session_id,
        agent_id: first['agent_id'] ?? null,
        step_count: steps.length,
        chain_valid: check === null ? null : check.valid,
        first_broken_step: check?.first_break ?? null,
        steps,
      };
    }),
  );

  server.registerTool(
    'get_session_history',
    {
      title: "List an agent's sessions",
      description:
        "List an agent's sessions, most recent first: step_count, first_step_at, last_step_at and chain_valid. agent_id defaults to your own identity.",
      inputSchema: { agent_id: z.string().min(1).max(1024).optional(), limit: z.number().int().min(1).max(1000).default(50) },
    },
    tool(async ({ agent_id, limit }) => {
      const agent = agent_id ?? (await store.identity());
      const sessions = await store.sessions(agent, limit);
      return { agent_id: agent, sessions };
    }),
  );

  server.registerTool(
    'get_trace',
    {
      title: 'Get a step',
      description: 'Return one step, every column, by its trace_id.',
      inputSchema: { trace_id: traceId },
    },
    tool(async ({ trace_id }) => {
      const step = await store.step(trace_id);
      if (step === null) throw new ToolError(SqlState.NoDataFound, `no step has trace_id ${trace_id}`);
      return step;
    }),
  );

  server.registerTool(
    'verify_chain',
    {
      title: "Verify a session's chain",
      description:
        "Recompute a session's hash chain. Returns valid, step_count and, when broken, the first break: its step_index, kind (edited, inserted, deleted or reordered) and the expected and actual hashes.",
      inputSchema: { session_id: sessionId },
    },
    tool(async ({ session_id }) => {
      const check = await store.verify(session_id);
      if (check === null) throw noSession(session_id);
      return { session_id, ...check };
    }),
  );

  server.registerTool(
    'reasoning_trail',
    {
      title: 'Reasoning trail',
      description: 'Walk parent_trace_id links from a step up to its root, and return the path from the root down to the step: the reasoning behind an action.',
      inputSchema: { trace_id: traceId },
    },
    tool(async ({ trace_id }) => {
      const { trail, complete, missing_parent } = await store.trail(trace_id);
      return { trace_id, depth: trail.length, complete, missing_parent, trail };
    }),
  );

  server.registerTool(
    'thought_tree',
    {
      title: 'Tree of thoughts',
      description:
        "Return a session's steps as a tree: each step under the earlier step its parent_trace_id names; steps without one are roots, in step order.",
      inputSchema: { session_id: sessionId },
    },
    tool(async ({ session_id }) => {
      const { step_count, roots } = await store.tree(session_id);
      if (step_count === 0) throw noSession(session_id);
      return { session_id, step_count, roots: roots as unknown as Json };
    }),
  );

  server.registerTool(
    'search_reasoning',
    {
      title: 'Search reasoning by meaning',
      description:
        'Find the recorded steps most similar to a text ("decisions about pricing", an error message), best first, with their similarity (cosine, 1 is identical). Only steps selected for an embedding are searched: Decision, Action, Error, Correction and FinalAnswer always, a sample of the others. Filters narrow the search before ranking.',
      inputSchema: {
        query: z.string().min(1, 'query must not be empty').max(10_000).describe('What to look for, in words.'),
        k: z.number().int().min(1).max(1000).default(10).describe('How many steps to return.'),
        step_types: z.array(z.enum(STEP_TYPES)).optional().describe('Only steps of these types.'),
        agent_id: z.string().min(1).max(1024).optional(),
        session_id: sessionId.optional(),
        since: z.iso.datetime({ offset: true }).optional().describe('Only steps created at or after this time (ISO 8601).'),
        until: z.iso.datetime({ offset: true }).optional().describe('Only steps created before this time (ISO 8601).'),
        min_similarity: z.number().min(-1).max(1).optional().describe('Only steps at least this similar.'),
      },
      annotations: { readOnlyHint: true },
    },
    tool(async (args) => {
      const steps = await store.search(args);
      return { query: args.query, count: steps.length, steps };
    }),
  );

  server.registerTool(
    'query',
    {
      title: 'Read-only SQL',
      description:
        'Run one read-only SQL statement (PostgreSQL dialect, DuckDB engine) for exploration, for example over _cot_steps or the analytics macros such as cot_session_summary(). It runs in a read-only transaction: the server refuses anything that writes. At most max_rows rows come back.',
      inputSchema: { sql: z.string().min(1).max(100_000), max_rows: z.number().int().min(1).max(10_000).default(100) },
      annotations: { readOnlyHint: true },
    },
    tool(async ({ sql, max_rows }) => ({ ...(await store.query(sql, max_rows)) })),
  );
}
