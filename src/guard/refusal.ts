import { createHash } from 'node:crypto';
import { PgError } from '../errors/pg-error.js';
import { SqlState } from '../errors/sqlstate.js';

/** Why a statement is refused: the operation and the object, for the message and the security log. */
export interface Refusal {
  readonly reason: 'ledger' | 'host' | 'shadow' | 'setting' | 'unsupported' | 'uncertain' | 'role' | 'tenant';
  readonly operation: string;
  readonly target: string;
  readonly message: string;
  readonly hint: string;
}

/** A refused statement: the error for the client and what to log and record. */
export class GuardRefusal extends PgError {
  constructor(
    readonly refusal: Refusal,
    readonly fingerprint: string,
  ) {
    super(SqlState.InsufficientPrivilege, refusal.message, { hint: refusal.hint });
    this.logContext = { refused: refusal.operation, target: refusal.target, reason: refusal.reason, fingerprint };
  }
}

/** A stable digest of a statement, for logs and the security ledger. */
export function fingerprint(sql: string): string {
  return createHash('sha256').update(sql.replace(/\s+/g, ' ').trim()).digest('hex');
}

/** A client's append to one of the server's own records (checkpoints, refusals, erasure): only the server appends to them. */
export function serverOnlyRefusal(table: string): Refusal {
  return {
    reason: 'ledger',
    operation: 'INSERT INTO',
    target: table,
    message: `cannot INSERT INTO ledger table "${table}": only the server appends to it`,
    hint: 'It records statements the server refused; clients may read it.',
  };
}
