import { PgError } from '../../errors/pg-error.js';
import { SqlState } from '../../errors/sqlstate.js';
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

/**
 * An INSERT's evaluated rows without the server columns it listed (after
 * the client columns), each of which must be NULL (DEFAULT is NULL here):
 * any other value is the client's attempt to set what only the server
 * computes.
 */
export function serverColumnsLeftToServer(
  table: Pick<LedgerTable, 'name'>,
  width: number,
  serverProvided: readonly string[],
  rows: (string | null)[][],
): (string | null)[][] {
  if (serverProvided.length === 0) return rows;
  for (const row of rows) {
    const given = row.findIndex((v, i) => i >= width && v !== null);
    if (given >= 0) {
      const column = serverProvided[given - width] as string;
      throw new PgError(SqlState.GeneratedAlways, `cannot insert a non-DEFAULT value into column "${column}"`, {
        detail: `Column "${column}" of ledger table "${table.name}" is computed by the server.`,
        hint: 'Leave it out of the INSERT, or give DEFAULT or NULL; RETURNING shows the value the server computed.',
      });
    }
  }
  return rows.map((row) => row.slice(0, width));
}

/**
 * Stamps a writer's identity (agent_id, org_id) on rows where the column is
 * NULL; answers the first row that gives another value, which the caller
 * refuses and records, or null.
 */
export function stampIdentity(
  identity: Readonly<Record<string, string>>,
  clientColumns: readonly string[],
  rows: (string | null)[][],
): { readonly column: string; readonly value: string; readonly given: string } | null {
  for (const [column, value] of Object.entries(identity)) {
    const at = clientColumns.findIndex((c) => c.toLowerCase() === column.toLowerCase());
    if (at < 0) continue;
    for (const row of rows) {
      const given = row[at] ?? null;
      if (given === null) row[at] = value;
      else if (given !== value) return { column, value, given };
    }
  }
  return null;
}

/** What a writer is told who gave another identity than its own. */
export function identityRefusal(
  user: string,
  other: { readonly column: string; readonly value: string; readonly given: string },
): { reason: 'role'; operation: string; target: string; message: string; hint: string } {
  return {
    reason: 'role',
    operation: 'INSERT',
    target: other.column,
    message: `user "${user}" may append only as ${other.column} "${other.value}", not "${other.given}"`,
    hint: `Leave ${other.column} out: the server fills it in from the authenticated identity.`,
  };
}

/**
 * parent_trace_id must name a step that exists, as a foreign key would
 * require: `lookup` answers which of the given trace_ids the steps ledger
 * holds, in the engine's own SQL.
 */
export async function checkParents(
  table: LedgerTable,
  clientColumns: readonly string[],
  rows: ReadonlyArray<ReadonlyArray<string | null>>,
  lookup: (traceIds: readonly string[]) => Promise<Iterable<string>>,
): Promise<void> {
  if (!table.isSteps) return;
  const at = clientColumns.indexOf('parent_trace_id');
  const parents = [...new Set(rows.map((r) => r[at] ?? null).filter((p): p is string => p !== null))];
  if (parents.length === 0) return;
  const known = new Set(await lookup(parents));
  const missing = parents.find((p) => !known.has(p));
  if (missing !== undefined) {
    throw new PgError(SqlState.ForeignKeyViolation, `insert or update on table "${table.name}" violates foreign key constraint "parent_trace_id"`, {
      detail: `Key (parent_trace_id)=(${missing}) is not present in table "${table.name}".`,
      table: table.name,
      constraint: 'parent_trace_id',
    });
  }
}
