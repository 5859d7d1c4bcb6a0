import { SqlState } from './sqlstate.js';

export type Severity = 'ERROR' | 'FATAL' | 'PANIC' | 'WARNING' | 'NOTICE' | 'DEBUG' | 'INFO' | 'LOG';

export interface PgErrorFields {
  detail?: string;
  hint?: string;
  /** 1-based character offset into the statement text, as in ErrorResponse field 'P'. */
  position?: number;
  schema?: string;
  table?: string;
  column?: string;
  constraint?: string;
  cause?: unknown;
}

/**
 * The only kind of error that reaches a client. Everything else is logged and
 * replaced by a generic XX000, so that internal messages never leak
 * (pg-gateway's BackendError rule).
 */
export class PgError extends Error {
  readonly code: string;
  readonly severity: Severity;
  readonly detail: string | undefined;
  readonly hint: string | undefined;
  readonly position: number | undefined;
  readonly schema: string | undefined;
  readonly table: string | undefined;
  readonly column: string | undefined;
  readonly constraint: string | undefined;
  /** Extra fields for the log line about this error (never sent to the client). */
  logContext: Readonly<Record<string, unknown>> | undefined;

  constructor(code: string, message: string, fields: PgErrorFields = {}, severity: Severity = 'ERROR') {
    super(message, fields.cause === undefined ? undefined : { cause: fields.cause });
    this.name = 'PgError';
    this.code = code;
    this.severity = severity;
    this.detail = fields.detail;
    this.hint = fields.hint;
    this.position = fields.position;
    this.schema = fields.schema;
    this.table = fields.table;
    this.column = fields.column;
    this.constraint = fields.constraint;
  }

  get isFatal(): boolean {
    return this.severity === 'FATAL' || this.severity === 'PANIC';
  }

  /** The same error with a position, or with the position shifted by `offset` characters. */
  withPosition(position: number | undefined): PgError {
    return new PgError(this.code, this.message, { ...this.fields(), position }, this.severity);
  }

  private fields(): PgErrorFields {
    const f: PgErrorFields = {};
    if (this.detail !== undefined) f.detail = this.detail;
    if (this.hint !== undefined) f.hint = this.hint;
    if (this.schema !== undefined) f.schema = this.schema;
    if (this.table !== undefined) f.table = this.table;
    if (this.column !== undefined) f.column = this.column;
    if (this.constraint !== undefined) f.constraint = this.constraint;
    return f;
  }
}

export function protocolViolation(message: string): PgError {
  return new PgError(SqlState.ProtocolViolation, message, {}, 'FATAL');
}

export function featureNotSupported(message: string, hint?: string): PgError {
  return new PgError(SqlState.FeatureNotSupported, message, hint === undefined ? {} : { hint });
}

export function isPgError(err: unknown): err is PgError {
  return err instanceof PgError;
}
