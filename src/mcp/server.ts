import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { COTWIRE_VERSION } from '../version.js';
import { registerTools } from './tools.js';
import { TraceStore } from './trace-store.js';

export interface McpOptions {
  /** postgres://USER:PASSWORD@HOST:PORT/DB of a running cotwire. */
  readonly url: string;
  readonly stdin?: NodeJS.ReadableStream;
  readonly stdout?: NodeJS.WritableStream;
}

/**
 * Serves the reasoning-trace tools over stdio until the client closes the
 * stream. Standard output carries only MCP messages, so nothing else may
 * write to it.
 */
export async function runMcpServer(options: McpOptions): Promise<void> {
  const store = TraceStore.fromUrl(options.url);
  const server = new McpServer(
    { name: 'cotwire', version: COTWIRE_VERSION },
    {
      instructions:
        "cotwire keeps a tamper-evident ledger of agents' chains of thought. Log each step with log_reasoning_step (same session_id for one chain of thought); read them back with replay_decision, get_trace, reasoning_trail and thought_tree; check integrity with verify_chain; explore with read-only SQL through query.",
    },
  );
  registerTools(server, store);
  const transport = new StdioServerTransport(options.stdin as NodeJS.ReadStream | undefined, options.stdout as NodeJS.WriteStream | undefined);
  const closed = new Promise<void>((resolve) => {
    transport.onclose = () => resolve();
  });
  const input = options.stdin ?? process.stdin;
  input.once('end', () => void server.close());
  await server.connect(transport);
  await closed;
  await store.close();
}
