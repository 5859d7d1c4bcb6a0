/**
 * What a tool call reports when it fails: the server's SQLSTATE and message,
 * or a connection failure named as PostgreSQL's client would name it. A tool
 * error goes back to the agent as an MCP tool result with isError set; the
 * MCP server itself never stops for one.
 */
export class ToolError extends Error {
  constructor(
    readonly sqlstate: string,
    message: string,
    readonly hint?: string,
    readonly detail?: string,
  ) {
    super(message);
  }

  /** The error as the agent reads it: "ERROR 25006: ..." plus the hint. */
  text(): string {
    const lines = [`ERROR ${this.sqlstate}: ${this.message}`];
    if (this.detail !== undefined) lines.push(`DETAIL: ${this.detail}`);
    if (this.hint !== undefined) lines.push(`HINT: ${this.hint}`);
    return lines.join('\n');
  }

  toJSON(): Record<string, string> {
    const out: Record<string, string> = { sqlstate: this.sqlstate, message: this.message };
    if (this.detail !== undefined) out['detail'] = this.detail;
    if (this.hint !== undefined) out['hint'] = this.hint;
    return out;
  }
}

interface DriverError {
  readonly code?: unknown;
  readonly message?: unknown;
  readonly hint?: unknown;
  readonly detail?: unknown;
  readonly severity?: unknown;
}

const CONNECT_FAILURES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ETIMEDOUT']);

/** node-postgres' errors: a server ErrorResponse carries severity and a SQLSTATE; anything else is the connection. */
export function toToolError(err: unknown, target: string): ToolError {
  if (err instanceof ToolError) return err;
  const e = (typeof err === 'object' && err !== null ? err : {}) as DriverError;
  const message = typeof e.message === 'string' ? e.message : String(err);
  const code = typeof e.code === 'string' ? e.code : '';
  if (typeof e.severity === 'string' && /^[0-9A-Z]{5}$/.test(code)) {
    return new ToolError(code, message, typeof e.hint === 'string' ? e.hint : undefined, typeof e.detail === 'string' ? e.detail : undefined);
  }
  if (CONNECT_FAILURES.has(code)) {
    return new ToolError('08001', `could not connect to cotwire at ${target}: ${message}`, 'Start cotwire, or check the --url given to `cotwire mcp`.');
  }
  return new ToolError(
    '08006',
    `the connection to cotwire at ${target} was lost: ${message}`,
    'The next call opens a new connection; a step whose call failed this way may or may not have been appended, so look it up before logging it again.',
  );
}
