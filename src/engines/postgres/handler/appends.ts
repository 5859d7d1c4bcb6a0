import type { BindValue, RelayBackend } from '../../../engine/port.js';
import { PgError } from '../../../errors/pg-error.js';
import { SqlState } from '../../../errors/sqlstate.js';
import type { LedgerCatalog } from '../../../ledger/chain/catalog.js';
import { canonicalPgExprSql, pgTypeName } from '../dialect/verify-sql.js';
import { fromCanonicalSql, pgArray } from '../ledger/writer.js';
import { PG_SCHEMA } from '../ledger/names.js';
import { quoteIdent, type LedgerTable } from '../../../ledger/chain/schema.js';
import { checkParents as checkParentsExist, serverColumnsLeftToServer, validateSteps } from '../../../ledger/chain/validate.js';
import type { AppendJob } from '../../../ledger/chain/append.js';
import type { ResultSink } from '../../../session/handler-port.js';
import { parseCopyCsv, parseCopyText } from '../../../sql/copy.js';
import { insertPieces, type InsertPieces } from '../../../sql/pg-insert.js';
import type { ProxyAccess } from './access.js';

/**
 * An INSERT into a ledger on a PostgreSQL engine. The client's statement
 * never runs as it is (its role may not insert into a ledger): PostgreSQL
 * evaluates its rows, in the client's own transaction and as the client,
 * to the canonical texts the chain hashes; they are checked and stamped
 * here, and the writer chains and inserts them. RETURNING is answered by
 * PostgreSQL over the rows the writer wrote, with the client's settings.
 */

export interface LedgerAppendPlan {
  readonly table: LedgerTable;
  readonly pieces: InsertPieces;
  /** The client columns in table order. */
  readonly clientColumns: readonly string[];
  /** The query that gives each row's canonical texts: client columns, then any server column the client listed. */
  readonly evaluate: string;
  /** Server columns the INSERT lists: each must be DEFAULT or NULL. */
  readonly serverProvided: readonly string[];
}

/** The rows one ledger statement may hold in the server while they are checked and chained. */
const EVAL_PORTAL = 'cotwire_eval';
const RETURNING_PORTAL = 'cotwire_returning';

export async function planAppend(ledgers: LedgerCatalog, ledger: readonly string[], text: string, insert: Record<string, unknown>): Promise<LedgerAppendPlan> {
  return appendPlanOf(await ledgerNamed(ledgers, ledger), insertPieces(text, insert));
}

export async function ledgerNamed(ledgers: LedgerCatalog, ledger: readonly string[]): Promise<LedgerTable> {
  const table = await ledgers.find(ledger);
  if (table === null) throw new PgError(SqlState.UndefinedTable, `relation "${ledger.join('.')}" does not exist`);
  return table;
}

/** The plan of rows that come as COPY's texts: each one cast to its column's type, as COPY would read it. */
export function copyPlan(table: LedgerTable, columns: readonly string[] | null): LedgerAppendPlan {
  const clientColumns = table.columns.filter((c) => !table.serverColumns.has(c.name)).map((c) => c.name);
  const listed = columns ?? clientColumns;
  for (const name of listed) {
    if (!table.columns.some((c) => c.name === name)) throw new PgError(SqlState.UndefinedColumn, `column "${name}" of relation "${table.name}" does not exist`);
  }
  const source = `SELECT * FROM unnest(${listed.map((_, i) => `$${i + 1}::text[]`).join(', ')})`;
  return appendPlanOf(table, { withText: '', columns: listed, source, returning: null, alias: table.name });
}

function appendPlanOf(table: LedgerTable, pieces: InsertPieces): LedgerAppendPlan {
  const clientColumns = table.columns.filter((c) => !table.serverColumns.has(c.name));
  const byName = new Map(table.columns.map((c) => [c.name, c]));
  const provided = pieces.columns ?? clientColumns.map((c) => c.name);
  const serverProvided: string[] = [];
  for (const name of provided) {
    // PostgreSQL has checked the names and their count when it described the INSERT.
    if (table.serverColumns.has(name)) serverProvided.push(name);
  }
  const position = new Map(provided.map((name, i) => [name, i]));
  const exprs = clientColumns.map((c) => {
    const i = position.get(c.name);
    return canonicalPgExprSql(i === undefined ? `NULL::${pgTypeName(c.type)}` : `CAST(src.c${i + 1} AS ${pgTypeName(c.type)})`, c.type);
  });
  for (const name of serverProvided) {
    const c = byName.get(name);
    if (c !== undefined) exprs.push(`CAST(src.c${(position.get(name) as number) + 1} AS text)`);
  }
  const aliases = provided.map((_, i) => `c${i + 1}`).join(', ');
  // A read-only transaction refuses the INSERT, not the SELECT that evaluates its rows: the check fails it (25006).
  const writable = `WHERE ${PG_SCHEMA}.writable()`;
  const evaluate =
    pieces.source === null
      ? `SELECT ${exprs.join(', ')} ${writable}`
      : `${pieces.withText} SELECT ${exprs.join(', ')} FROM (${pieces.source}) AS src(${aliases}) ${writable}`.trim();
  return { table, pieces, clientColumns: clientColumns.map((c) => c.name), evaluate, serverProvided };
}

/** The rows' canonical texts, evaluated by the client's backend in its transaction. */
/** COPY's rows, as PostgreSQL would read them (text or csv), into the arrays copyPlan's statement takes. */
export function copyRows(data: string, copy: Record<string, unknown>, width: number): BindValue[] {
  const option = (name: string): unknown => {
    const d = ((copy.options as Array<{ DefElem: { defname: string; arg?: Record<string, unknown> } }> | undefined) ?? []).find(
      (o) => o.DefElem.defname === name,
    );
    if (d === undefined) return undefined;
    const arg = d.DefElem.arg;
    if (arg === undefined) return true;
    return (
      (arg.String as { sval?: string } | undefined)?.sval ??
      (arg.Boolean as { boolval?: boolean } | undefined)?.boolval ??
      (arg.Integer as { ival?: number } | undefined)?.ival ??
      true
    );
  };
  const format = String(option('format') ?? 'text').toLowerCase();
  if (format === 'binary')
    throw new PgError(SqlState.FeatureNotSupported, 'COPY into a ledger in binary format is not supported', { hint: 'Use the text or csv format.' });
  const csv = format === 'csv';
  const delimiter = String(option('delimiter') ?? (csv ? ',' : '\t'));
  const nullString = String(option('null') ?? (csv ? '' : '\\N'));
  const quote = String(option('quote') ?? '"');
  const escapeChar = String(option('escape') ?? quote);
  const header = option('header');
  let rows = csv ? parseCopyCsv(data, delimiter, nullString, quote, escapeChar) : parseCopyText(data, delimiter, nullString);
  if (header === true || header === 'true' || header === 1 || header === 'match') rows = rows.slice(1);
  for (const [i, r] of rows.entries()) {
    if (r.length !== width)
      throw new PgError(SqlState.BadCopyFileFormat, r.length < width ? 'missing data for column' : 'extra data after last expected column', {
        detail: `COPY line ${i + 1}`,
      });
  }
  return Array.from({ length: width }, (_, c) => pgArray(rows.map((r) => r[c] ?? null)));
}

export async function evaluateRows(
  backend: RelayBackend,
  plan: LedgerAppendPlan,
  paramTypes: readonly number[],
  values: readonly BindValue[],
  maxBytes: number,
): Promise<(string | null)[][]> {
  const rows: (string | null)[][] = [];
  let bytes = 0;
  await backend.run(EVAL_PORTAL, plan.evaluate, paramTypes, values, (cells) => {
    const row = [...cells];
    for (const v of row) bytes += v === null ? 1 : v.length;
    rows.push(row);
  });
  if (bytes > maxBytes) {
    throw new PgError(SqlState.OutOfMemory, `the rows of this ledger statement need more than ${maxBytes} bytes of server memory (limits.maxAppendBytes)`);
  }
  return serverColumnsLeftToServer(plan.table, plan.clientColumns.length, plan.serverProvided, rows);
}

/** Stamps the identity and applies the reasoning-step rules; parents are checked by `parentsExist`. */
export function checkRows(access: ProxyAccess, plan: LedgerAppendPlan, rows: (string | null)[][], statement: string, maxContentBytes: number): AppendJob {
  access.stampIdentity(plan.clientColumns, rows, statement);
  validateSteps(plan.table, plan.clientColumns, rows, maxContentBytes);
  return { table: plan.table, rows };
}

/** parent_trace_id must name a step that exists. */
export async function checkParents(
  plan: LedgerAppendPlan,
  rows: ReadonlyArray<ReadonlyArray<string | null>>,
  query: (sql: string, params: string[]) => Promise<unknown[][]>,
): Promise<void> {
  await checkParentsExist(plan.table, plan.clientColumns, rows, async (parents) =>
    (await query(`SELECT trace_id::text FROM ${plan.table.relation ?? ''} WHERE trace_id = ANY($1::uuid[])`, [`{${parents.join(',')}}`])).map((r) =>
      String(r[0]),
    ),
  );
}

/** RETURNING over rows the writer wrote (every column's canonical text), evaluated by PostgreSQL in the client's session. */
export async function sendReturning(
  backend: RelayBackend,
  plan: LedgerAppendPlan,
  rows: ReadonlyArray<ReadonlyArray<string | null>>,
  resultFormats: readonly number[],
  sink: ResultSink,
): Promise<void> {
  if (plan.pieces.returning === null || rows.length === 0) return;
  const { columns } = plan.table;
  const arrays = columns.map((_, i) => pgArray(rows.map((r) => r[i] ?? null)));
  const sql = `SELECT ${plan.pieces.returning} FROM (SELECT ${columns
    .map((c, i) => `${fromCanonicalSql(`u.c${i}`, c.type)} AS ${quoteIdent(c.name)}`)
    .join(
      ', ',
    )} FROM unnest(${columns.map((_, i) => `$${i + 1}::text[]`).join(', ')}) AS u(${columns.map((_, i) => `c${i}`).join(', ')})) AS ${quoteIdent(plan.pieces.alias)}`;
  await backend.openPortal(
    RETURNING_PORTAL,
    sql,
    columns.map(() => 0),
    arrays,
    resultFormats,
  );
  for (;;) {
    const outcome = await backend.fetch(RETURNING_PORTAL, 1000, (cells) => sink.row(cells));
    if (outcome.kind !== 'suspended') break;
    await sink.flushIfFull();
  }
  await backend.closePortal(RETURNING_PORTAL);
}
