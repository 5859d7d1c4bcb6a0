import type { LedgerAppender } from '../../../ledger/chain/append.js';
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
import { canonicalConverter, type CanonicalConverter } from '../../../ledger/chain/canonical-values.js';
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
  /** The rows' values when they are plain parameters and literals: their canonical texts are computed here, with no round trip. */
  readonly direct: DirectValues | null;
}

/** One client column's value in a VALUES tuple: a parameter (0-based), or a literal and what the grammar made of it. */
type DirectElement = { readonly param: number } | { readonly literal: string | null; readonly kind: 'text' | 'number' | 'boolean' };

interface DirectValues {
  /** Per tuple, per client column (table order). */
  readonly tuples: ReadonlyArray<ReadonlyArray<DirectElement>>;
  readonly converters: readonly CanonicalConverter[];
}

const NUMBER_TYPES: ReadonlySet<string> = new Set(['SMALLINT', 'INTEGER', 'BIGINT', 'DOUBLE']);
/** Parameter types PostgreSQL reads as the column's own input: unknown (left to infer), text, varchar. */
const TEXT_PARAMETER_TYPES: ReadonlySet<number> = new Set([0, 25, 1043]);

/** The rows one ledger statement may hold in the server while they are checked and chained. */
const EVAL_PORTAL = 'cotwire_eval';
const RETURNING_PORTAL = 'cotwire_returning';

export async function planAppend(ledgers: LedgerCatalog, ledger: readonly string[], text: string, insert: Record<string, unknown>): Promise<LedgerAppendPlan> {
  const table = await ledgerNamed(ledgers, ledger);
  const pieces = insertPieces(text, insert);
  const plan = appendPlanOf(table, pieces);
  return plan.serverProvided.length > 0 ? plan : { ...plan, direct: directValues(table, insert, pieces) };
}

/**
 * `VALUES` tuples made only of parameters, string and number literals,
 * NULL, TRUE and FALSE, into client columns whose canonical text
 * canonical-values.ts computes (the same text both engines give): what
 * drivers send for each appended step. Anything else is evaluated by the
 * client's backend.
 */
function directValues(table: LedgerTable, insert: Record<string, unknown>, pieces: InsertPieces): DirectValues | null {
  if (insert.withClause !== undefined || insert.onConflictClause !== undefined || (insert.override !== undefined && insert.override !== 'OVERRIDING_NOT_SET'))
    return null;
  const select = (insert.selectStmt as { SelectStmt?: Record<string, unknown> } | undefined)?.SelectStmt;
  if (select === undefined || select.op !== 'SETOP_NONE') return null;
  if (Object.keys(select).some((k) => k !== 'valuesLists' && k !== 'limitOption' && k !== 'op')) return null;
  const clientColumns = table.columns.filter((c) => !table.serverColumns.has(c.name));
  const converters: CanonicalConverter[] = [];
  for (const c of clientColumns) {
    const converter = pgCanonicalConverter(c.type);
    if (converter === null) return null;
    converters.push(converter);
  }
  const provided = pieces.columns ?? clientColumns.map((c) => c.name);
  const position = new Map(provided.map((name, i) => [name, i]));
  const tuples: DirectElement[][] = [];
  for (const list of (select.valuesLists as Array<{ List?: { items?: unknown[] } }> | undefined) ?? []) {
    const items = list.List?.items ?? [];
    if (items.length !== provided.length) return null;
    const tuple: DirectElement[] = [];
    for (const c of clientColumns) {
      const at = position.get(c.name);
      const element: DirectElement | null = at === undefined ? { literal: null, kind: 'text' } : directElement(items[at]);
      if (element === null) return null;
      // A number or a boolean in a column of another type is cast by PostgreSQL: it decides the text.
      if ('kind' in element && element.literal !== null && element.kind !== 'text' && (element.kind === 'number') !== NUMBER_TYPES.has(c.type)) return null;
      if ('kind' in element && element.kind === 'boolean' && c.type !== 'BOOLEAN') return null;
      tuple.push(element);
    }
    tuples.push(tuple);
  }
  return tuples.length === 0 ? null : { tuples, converters };
}

/**
 * The converter of a column type, as PostgreSQL reads its input: the same
 * canonical text as DuckDB's where both accept a spelling
 * (test/postgres/canonical.test.ts holds them to PostgreSQL), except a
 * double that underflows to zero, which PostgreSQL refuses as out of range.
 */
export function pgCanonicalConverter(type: string): CanonicalConverter | null {
  const converter = canonicalConverter(type);
  if (converter === null || type !== 'DOUBLE') return converter;
  return (text) => {
    const canonical = converter(text);
    return canonical !== undefined && Number(text) === 0 && /[1-9]/.test(text.split(/[eE]/)[0] ?? '') ? undefined : canonical;
  };
}

function directElement(node: unknown): DirectElement | null {
  const n = node as { ParamRef?: { number?: number }; A_Const?: Record<string, { [k: string]: unknown } | boolean> };
  if (n.ParamRef !== undefined) return typeof n.ParamRef.number === 'number' ? { param: n.ParamRef.number - 1 } : null;
  const k = n.A_Const;
  if (k === undefined) return null;
  if (k.isnull === true) return { literal: null, kind: 'text' };
  // libpg-query leaves out a field at its zero value: an empty string, 0, false.
  if (typeof k.sval === 'object') return { literal: String(k.sval.sval ?? ''), kind: 'text' };
  if (typeof k.ival === 'object') return { literal: String(k.ival.ival ?? 0), kind: 'number' };
  if (typeof k.fval === 'object' && typeof k.fval.fval === 'string') return { literal: k.fval.fval, kind: 'number' };
  if (typeof k.boolval === 'object') return { literal: k.boolval.boolval === true ? 'true' : 'false', kind: 'boolean' };
  return null;
}

/**
 * The rows of a plan with direct values, as canonical texts of the client
 * columns; null when one value is not plainly convertible (a binary or
 * typed parameter, a spelling PostgreSQL must judge), which the client's
 * backend then evaluates, with its own error if it is wrong.
 */
export function directRows(
  plan: LedgerAppendPlan,
  values: readonly BindValue[],
  declaredTypes: readonly number[],
  maxBytes: number,
): (string | null)[][] | null {
  const direct = plan.direct;
  if (direct === null) return null;
  const rows: (string | null)[][] = [];
  let bytes = 0;
  for (const tuple of direct.tuples) {
    const row: (string | null)[] = [];
    for (const [c, element] of tuple.entries()) {
      let text: string | null;
      if ('param' in element) {
        const v = values[element.param];
        if (v === undefined || (v !== null && typeof v !== 'string') || !TEXT_PARAMETER_TYPES.has(declaredTypes[element.param] ?? 0)) return null;
        text = v;
      } else {
        text = element.literal;
      }
      if (text === null) {
        row.push(null);
        bytes += 1;
        continue;
      }
      const canonical = (direct.converters[c] as CanonicalConverter)(text);
      if (canonical === undefined) return null;
      row.push(canonical);
      bytes += canonical.length;
    }
    rows.push(row);
  }
  if (bytes > maxBytes) {
    throw new PgError(SqlState.OutOfMemory, `the rows of this ledger statement need more than ${maxBytes} bytes of server memory (limits.maxAppendBytes)`);
  }
  return rows;
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
  return { table, pieces, clientColumns: clientColumns.map((c) => c.name), evaluate, serverProvided, direct: null };
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

/** The rows may not extend another organisation's (or agent's) session: refused and recorded before they queue. */
export async function checkOwners(
  access: ProxyAccess,
  writer: LedgerAppender,
  table: LedgerTable,
  rows: ReadonlyArray<ReadonlyArray<string | null>>,
  statement: string,
): Promise<void> {
  try {
    await writer.checkOwners(table, rows);
  } catch (err) {
    access.appendRefused(err, statement);
  }
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
