import { serverColumnsLeftToServer as leftToServer } from '../../../ledger/chain/validate.js';
import type { EngineConnection, EngineStatement, RowSink, WireParam } from '../../../engine/port.js';
import { PgError } from '../../../errors/pg-error.js';
import { SqlState } from '../../../errors/sqlstate.js';
import { quoteIdent, type LedgerColumn, type LedgerTable } from '../../../ledger/chain/schema.js';
import { canonicalConverter, type CanonicalConverter } from '../../../ledger/chain/canonical-values.js';
import type { InsertParts } from '../../../sql/insert.js';
import type { Token } from '../../../sql/lexer.js';
import type { FieldDescription } from '../../../protocol/messages.js';
import { qualifiedName } from '../../../ledger/chain/schema.js';

/**
 * An INSERT into a ledger, as cotwire runs it: the client's rows are
 * evaluated by a read on the client's own connection (so a transaction sees
 * its own data, and evaluation runs in parallel across connections), and
 * the writer then chains and appends them. The client's statement itself
 * is never executed.
 */
export interface LedgerInsertPlan {
  readonly table: LedgerTable;
  /** The client columns, in table order: the columns of each evaluated row. */
  readonly clientColumns: readonly string[];
  /** Evaluates the client's rows as canonical texts of the client columns. */
  readonly evaluate: EngineStatement;
  /** The RETURNING list, or null. */
  readonly returning: string | null;
  /** What RETURNING produces, for Describe; null without RETURNING. */
  readonly fields: readonly FieldDescription[] | null;
  /** The rows' values when they are plain parameters and literals: converted here, without the engine. */
  readonly direct: DirectValues | null;
  /**
   * Server columns the client listed (ORMs send every column of an entity):
   * evaluated after the client columns, and accepted only as DEFAULT or NULL,
   * which mean "the server computes it".
   */
  readonly serverProvided: readonly string[];
}

/** One client column's value in a VALUES tuple. */
type DirectElement = { readonly param: number } | { readonly literal: string | null; readonly kind: LiteralKind };

/**
 * A number or boolean literal is typed by the parser: in a column of another
 * type the engine's cast decides its text (1e5 becomes 100000.0 in VARCHAR).
 */
type LiteralKind = 'text' | 'number' | 'boolean';
const NUMBER_TYPES: ReadonlySet<string> = new Set(['SMALLINT', 'INTEGER', 'BIGINT', 'DOUBLE']);

/**
 * `VALUES` tuples made only of parameters, string and number literals,
 * NULL, TRUE and FALSE, for client columns whose canonical text
 * canonical-values.ts computes: what drivers send for each appended step.
 */
interface DirectValues {
  /** Per tuple, per client column (table order). */
  readonly tuples: ReadonlyArray<ReadonlyArray<DirectElement>>;
  readonly converters: readonly CanonicalConverter[];
  /** The client's declared parameter types: a typed parameter may be converted differently. */
  readonly declaredTypes: readonly number[];
}

const TIMESTAMPTZ = 'TIMESTAMP WITH TIME ZONE';

export async function planLedgerInsert(
  conn: EngineConnection,
  table: LedgerTable,
  parts: InsertParts,
  statementTokens: readonly Token[],
  statementText: string,
  declaredTypes: readonly number[],
): Promise<LedgerInsertPlan> {
  if (parts.unsupported !== null) {
    throw new PgError(SqlState.FeatureNotSupported, `${parts.unsupported} is not supported for ledger table "${table.name}"`, {
      hint: 'Append with a plain INSERT ... VALUES or INSERT ... SELECT.',
    });
  }
  const clientColumns = table.columns.filter((c) => !table.serverColumns.has(c.name));
  const byName = new Map(table.columns.map((c) => [c.name.toLowerCase(), c]));
  const provided = parts.byName ? await sourceNames(conn, parts, declaredTypes) : (parts.columns ?? clientColumns.map((c) => c.name));
  const seen = new Set<string>();
  const serverProvided: string[] = [];
  for (const name of provided) {
    const column = byName.get(name.toLowerCase());
    if (column === undefined) {
      throw new PgError(SqlState.UndefinedColumn, `column "${name}" of relation "${table.name}" does not exist`);
    }
    if (seen.has(column.name)) throw new PgError('42701', `column "${column.name}" specified more than once`);
    seen.add(column.name);
    if (table.serverColumns.has(column.name)) serverProvided.push(column.name);
  }
  const position = new Map(provided.map((name, i) => [byName.get(name.toLowerCase())?.name ?? name, i]));
  const source =
    parts.source === null
      ? 'SELECT 1'
      : replaceDefaults(
          parts,
          statementTokens,
          statementText,
          provided.map((n) => byName.get(n.toLowerCase())?.defaultSql ?? null),
        );
  // BY NAME took its column list from the same probe, so its width already matches.
  if (parts.source !== null && !parts.byName) await inSource(checkWidth(conn, source, provided.length, declaredTypes), parts, source, WIDTH_PREFIX.length);
  const exprs = clientColumns.map((c) => {
    const i = position.get(c.name);
    const value = `CAST(${i === undefined ? (c.defaultSql ?? 'NULL') : `src.${quoteIdent(`c${i + 1}`)}`} AS ${c.type})`;
    return c.type.toUpperCase() === TIMESTAMPTZ ? `CAST(system.main.epoch_us(${value}) AS VARCHAR)` : `CAST(${value} AS VARCHAR)`;
  });
  // A listed server column is read back to check that it is DEFAULT or NULL.
  for (const name of serverProvided) exprs.push(`CAST(src.${quoteIdent(`c${(position.get(name) as number) + 1}`)} AS VARCHAR)`);
  const aliases = parts.source === null ? 'c0' : provided.map((_, i) => quoteIdent(`c${i + 1}`)).join(', ');
  const prefix = `SELECT ${exprs.join(', ')} FROM (`;
  const evaluate = await inSource(conn.prepare(`${prefix}${source}) AS src(${aliases})`, declaredTypes), parts, source, prefix.length);
  // What cotwire builds around the client's source must stay a read.
  if (evaluate.kind !== 'SELECT') {
    evaluate.close();
    throw new PgError(SqlState.SyntaxError, `cannot append to "${table.name}": the rows to insert are not a query`);
  }
  let fields: FieldDescription[] | null = null;
  if (parts.returning !== null) {
    const probe = await conn.prepare(`SELECT ${parts.returning} FROM ${qualifiedName(table)} WHERE false`, []);
    if (probe.kind !== 'SELECT') {
      probe.close();
      evaluate.close();
      throw new PgError(SqlState.SyntaxError, 'invalid RETURNING list');
    }
    fields = (probe.columns ?? []).map((c) => ({
      name: c.name,
      tableOid: 0,
      columnAttr: 0,
      typeOid: c.typeOid,
      typeSize: c.typeSize,
      typeModifier: c.typeModifier,
      format: 0,
    }));
    probe.close();
  }
  const direct = serverProvided.length > 0 ? null : directValues(parts, statementTokens, clientColumns, position, declaredTypes);
  return { table, clientColumns: clientColumns.map((c) => c.name), evaluate, returning: parts.returning, fields, direct, serverProvided };
}

/** The evaluated rows without the server columns the client listed, each of which must be NULL (ledger/chain/validate.ts). */
export function serverColumnsLeftToServer(plan: LedgerInsertPlan, rows: (string | null)[][]): (string | null)[][] {
  return leftToServer(plan.table, plan.clientColumns.length, plan.serverProvided, rows);
}

/** Parameter types whose text a client sends as the value itself. */
const TEXT_PARAMETER_TYPES: ReadonlySet<number> = new Set([0, 25, 705, 1043]);

function directValues(
  parts: InsertParts,
  tokens: readonly Token[],
  clientColumns: readonly LedgerColumn[],
  position: ReadonlyMap<string, number>,
  declaredTypes: readonly number[],
): DirectValues | null {
  if (parts.source === null) return null;
  const converters: CanonicalConverter[] = [];
  const kinds: Array<Set<LiteralKind>> = [];
  for (const c of clientColumns) {
    const convert = canonicalConverter(c.type);
    // A column left out takes its default: only a NULL default is known without the engine.
    if (convert === null || (!position.has(c.name) && c.defaultSql !== null)) return null;
    converters.push(convert);
    const type = c.type.toUpperCase();
    kinds.push(new Set<LiteralKind>(['text', ...(NUMBER_TYPES.has(type) ? ['number' as const] : []), ...(type === 'BOOLEAN' ? ['boolean' as const] : [])]));
  }
  const start = parts.sourceStart;
  const end = start + parts.source.length;
  const source = tokens.filter((t) => t.start >= start && t.end <= end);
  if (source[0]?.kind !== 'word' || source[0].text.toUpperCase() !== 'VALUES') return null;
  const tuples: DirectElement[][] = [];
  let i = 1;
  for (;;) {
    if (source[i]?.text !== '(') return null;
    i++;
    const given: DirectElement[] = [];
    for (;;) {
      const element = directElement(source, i);
      if (element === null) return null;
      given.push(element.element);
      i = element.next;
      const t = source[i++];
      if (t?.text === ')') break;
      if (t?.text !== ',') return null;
    }
    if (given.length !== position.size) return null;
    tuples.push(
      clientColumns.map((c) => {
        const at = position.get(c.name);
        return at === undefined ? { literal: null, kind: 'text' } : (given[at] as DirectElement);
      }),
    );
    if (tuples.at(-1)?.some((e, c) => 'kind' in e && e.literal !== null && !kinds[c]?.has(e.kind))) return null;
    if (i === source.length) break;
    if (source[i]?.text !== ',') return null;
    i++;
  }
  return { tuples, converters, declaredTypes };
}

/** A parameter, a plain literal or NULL at `i`, and where the next token is; null for anything else. */
function directElement(tokens: readonly Token[], i: number): { element: DirectElement; next: number } | null {
  const t = tokens[i];
  if (t === undefined) return null;
  if (t.kind === 'param') return { element: { param: Number(t.text.slice(1)) - 1 }, next: i + 1 };
  // Only the plain '...' form: E'', U&'', B'' and X'' strings are decoded by the engine.
  if (t.kind === 'string' && t.text.startsWith("'")) return { element: { literal: t.text.slice(1, -1).replaceAll("''", "'"), kind: 'text' }, next: i + 1 };
  if (t.kind === 'number' && /^[\d.]/.test(t.text) && !t.text.includes('_')) return { element: { literal: t.text, kind: 'number' }, next: i + 1 };
  if (t.text === '-' && tokens[i + 1]?.kind === 'number' && !tokens[i + 1]?.text.includes('_')) {
    return { element: { literal: `-${tokens[i + 1]?.text ?? ''}`, kind: 'number' }, next: i + 2 };
  }
  if (t.kind === 'word') {
    const word = t.text.toUpperCase();
    if (word === 'NULL') return { element: { literal: null, kind: 'text' }, next: i + 1 };
    if (word === 'TRUE' || word === 'FALSE') return { element: { literal: word.toLowerCase(), kind: 'boolean' }, next: i + 1 };
  }
  return null;
}

/**
 * The rows' canonical texts computed without the engine, or null when any
 * value needs DuckDB: a parameter sent in binary or with a non-text type,
 * or a text whose conversion is not certain (canonical-values.ts).
 */
export function directRows(plan: LedgerInsertPlan, params: readonly WireParam[]): (string | null)[][] | null {
  const direct = plan.direct;
  if (direct === null) return null;
  const rows: (string | null)[][] = [];
  for (const tuple of direct.tuples) {
    const row: (string | null)[] = [];
    for (let c = 0; c < tuple.length; c++) {
      const element = tuple[c] as DirectElement;
      let text: string | null;
      if ('param' in element) {
        const p = params[element.param];
        if (p === undefined || p.format !== 0 || !TEXT_PARAMETER_TYPES.has(direct.declaredTypes[element.param] ?? 0)) return null;
        text = p.value === null ? null : p.value.toString('utf8');
      } else {
        text = element.literal;
      }
      if (text === null) {
        row.push(null);
        continue;
      }
      const canonical = (direct.converters[c] as CanonicalConverter)(text);
      if (canonical === undefined) return null;
      row.push(canonical);
    }
    rows.push(row);
  }
  return rows;
}

/** PostgreSQL's rule: the source must give exactly one value per target column. */
const WIDTH_PREFIX = 'SELECT * FROM (';

/** INSERT ... BY NAME: the names of the source's columns, in order, are its column list. */
async function sourceNames(conn: EngineConnection, parts: InsertParts, declaredTypes: readonly number[]): Promise<string[]> {
  const source = parts.source;
  if (source === null) return [];
  if (/^\s*VALUES\b/i.test(source)) {
    throw new PgError(SqlState.SyntaxError, 'INSERT BY NAME can only be used when inserting from a SELECT statement', {
      position: parts.sourceStart + 1,
    });
  }
  const probe = await inSource(conn.prepare(`${WIDTH_PREFIX}${source}) AS src`, declaredTypes), parts, source, WIDTH_PREFIX.length);
  const names = (probe.columns ?? []).map((c) => c.name);
  probe.close();
  return names;
}

/**
 * An error DuckDB reports in a query cotwire built around the client's
 * source, with its position moved to where that text is in the client's
 * statement; the start of the source when the error is elsewhere, or when
 * DEFAULTs were replaced and the texts no longer line up.
 */
async function inSource<T>(work: Promise<T>, parts: InsertParts, source: string, prefixLength: number): Promise<T> {
  try {
    return await work;
  } catch (err) {
    if (!(err instanceof PgError) || err.position === undefined) throw err;
    const at = err.position - prefixLength - 1;
    const exact = source === parts.source && at >= 0 && at < source.length;
    throw err.withPosition(parts.sourceStart + (exact ? at : 0) + 1);
  }
}

async function checkWidth(conn: EngineConnection, source: string, expected: number, declaredTypes: readonly number[]): Promise<void> {
  const probe = await conn.prepare(`${WIDTH_PREFIX}${source}) AS src`, declaredTypes);
  const width = probe.columns?.length ?? 0;
  probe.close();
  if (width > expected) throw new PgError(SqlState.SyntaxError, 'INSERT has more expressions than target columns');
  if (width < expected) throw new PgError(SqlState.SyntaxError, 'INSERT has more target columns than expressions');
}

/**
 * `DEFAULT` as a whole element of a VALUES tuple means the column's
 * default. A standalone VALUES query has no such thing, so each one is
 * replaced by the column's default expression (or NULL).
 */
function replaceDefaults(parts: InsertParts, tokens: readonly Token[], text: string, defaults: readonly (string | null)[]): string {
  const source = parts.source as string;
  const start = parts.sourceStart;
  const inSource = tokens.filter((t) => t.start >= start && t.end <= start + source.length);
  if (inSource[0]?.text.toUpperCase() !== 'VALUES') return source;
  let out = '';
  let last = start;
  let depth = 0;
  let element = 0;
  for (let k = 0; k < inSource.length; k++) {
    const t = inSource[k] as Token;
    if (t.text === '(') {
      depth++;
      if (depth === 1) element = 0;
    } else if (t.text === ')') {
      depth--;
    } else if (depth === 1 && t.text === ',') {
      element++;
    } else if (
      depth === 1 &&
      t.kind === 'word' &&
      t.text.toUpperCase() === 'DEFAULT' &&
      [',', '('].includes(inSource[k - 1]?.text ?? '') &&
      [',', ')'].includes(inSource[k + 1]?.text ?? '')
    ) {
      out += `${text.slice(last, t.start)}(${defaults[element] ?? 'NULL'})`;
      last = t.end;
    }
  }
  return out + text.slice(last, start + source.length);
}

/** Runs the evaluation with the client's parameters and collects each row's texts. */
export async function evaluateRows(plan: LedgerInsertPlan, params: readonly WireParam[], maxBytes: number): Promise<(string | null)[][]> {
  plan.evaluate.bind(params);
  // Streamed, not materialized: a source of billions of rows stops at the ceiling, not at the end of memory.
  const cursor = await plan.evaluate.execute();
  const rows: (string | null)[][] = [];
  let bytes = 0;
  const sink: RowSink = {
    row: (cells) => {
      const row = cells.map((c) => (c === null ? null : typeof c === 'string' ? c : Buffer.from(c).toString('utf8')));
      for (const c of row) bytes += c === null ? 8 : 16 + c.length * 2;
      rows.push(row);
    },
    flushIfFull: () => {
      if (bytes > maxBytes) {
        return Promise.reject(
          new PgError(SqlState.OutOfMemory, `the rows of this ledger statement need more than ${maxBytes} bytes of server memory (limits.maxAppendBytes)`, {
            detail: `${rows.length} rows were evaluated before the limit.`,
            hint: 'Append in smaller statements, or raise limits.maxAppendBytes.',
          }),
        );
      }
      return Promise.resolve();
    },
  };
  try {
    await cursor.fetch(0, [], sink, { timeZone: 'UTC' });
  } finally {
    cursor.close();
  }
  return rows;
}
