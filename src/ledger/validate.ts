import { PgError } from '../errors/pg-error.js';
import { SqlState } from '../errors/sqlstate.js';
import { STEP_TYPES, type LedgerTable } from './schema.js';

const STEP_TYPE_SET: ReadonlySet<string> = new Set(STEP_TYPES);

/**
 * The reasoning-step rules of `_cot_steps`, checked on each row's canonical
 * texts (client columns, table order) before anything is written. Other
 * ledgers have only the rules their own DDL declares.
 */
export function validateSteps(
  table: LedgerTable,
  columns: readonly string[],
  rows: ReadonlyArray<ReadonlyArray<string | null>>,
  maxContentBytes: number,
): void {
  if (!table.isSteps) return;
  const at = (name: string): number => columns.indexOf(name);
  const session = at('session_id');
  const stepType = at('step_type');
  const confidence = at('confidence');
  const content = at('content');
  for (const row of rows) {
    const sid = row[session] ?? null;
    if (sid === null) throw notNull('session_id');
    if (sid === '') throw check('session_id', 'session_id must not be empty');
    const type = row[stepType] ?? null;
    if (type === null) throw notNull('step_type');
    if (!STEP_TYPE_SET.has(type)) {
      throw new PgError(SqlState.CheckViolation, `invalid step_type "${type}": step_type must be one of ${STEP_TYPES.join(', ')}`, {
        table: table.name,
        column: 'step_type',
        constraint: 'step_type',
      });
    }
    const c = row[confidence] ?? null;
    if (c !== null) {
      const v = Number(c);
      if (!(v >= 0 && v <= 1)) throw check('confidence', `confidence ${c} is outside 0..1`);
    }
    const text = row[content] ?? null;
    if (text !== null) {
      const bytes = Buffer.byteLength(text, 'utf8');
      if (bytes > maxContentBytes) {
        throw new PgError(SqlState.StringDataRightTruncation, `value too long for column "content": ${bytes} bytes, the limit is ${maxContentBytes}`, {
          hint: 'The limit is ledger.maxContentBytes in the configuration.',
          table: table.name,
          column: 'content',
        });
      }
    }
  }

  function notNull(column: string): PgError {
    return new PgError(SqlState.NotNullViolation, `null value in column "${column}" of relation "${table.name}" violates not-null constraint`, {
      table: table.name,
      column,
    });
  }

  function check(column: string, message: string): PgError {
    return new PgError(SqlState.CheckViolation, message, { table: table.name, column, constraint: column });
  }
}
