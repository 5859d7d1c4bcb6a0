import type { EngineConnection, EngineStatement, RowSink, WireParam } from '../engine/port.js';
import { PgError } from '../errors/pg-error.js';
import { SqlState } from '../errors/sqlstate.js';
import { quoteIdent, type LedgerTable } from '../ledger/schema.js';
import type { InsertParts } from '../sql/insert.js';
import type { Token } from '../sql/lexer.js';
import type { FieldDescription } from '../protocol/messages.js';
import { qualifiedName } from '../ledger/schema.js';

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
  const provided = parts.columns ?? clientColumns.map((c) => c.name);
  const seen = new Set<string>();
  for (const name of provided) {
    const column = byName.get(name.toLowerCase());
    if (column === undefined) {
      throw new PgError(SqlState.UndefinedColumn, `column "${name}" of relation "${table.name}" does not exist`);
    }
    if (table.serverColumns.has(column.name)) {
      throw new PgError('428C9', `cannot insert a non-DEFAULT value into column "${column.name}"`, {
        detail: `Column "${column.name}" of ledger table "${table.name}" is computed by the server.`,
        hint: 'Leave it out of the INSERT; RETURNING shows the value the server computed.',
      });
    }
    if (seen.has(column.name)) throw new PgError('42701', `column "${column.name}" specified more than once`);
    seen.add(column.name);
  }
  const position = new Map(provided.map((name, i) => [(byName.get(name.toLowerCase())?.name ?? name), i]));
  const source = parts.source === null ? 'SELECT 1' : replaceDefaults(parts, statementTokens, statementText, provided.map((n) => byName.get(n.toLowerCase())?.defaultSql ?? null));
  if (parts.source !== null) await checkWidth(conn, source, provided.length, declaredTypes);
  const exprs = clientColumns.map((c) => {
    const i = position.get(c.name);
    const value = `CAST(${i === undefined ? (c.defaultSql ?? 'NULL') : `src.${quoteIdent(`c${i + 1}`)}`} AS ${c.type})`;
    return c.type.toUpperCase() === TIMESTAMPTZ ? `CAST(system.main.epoch_us(${value}) AS VARCHAR)` : `CAST(${value} AS VARCHAR)`;
  });
  const aliases = parts.source === null ? 'c0' : provided.map((_, i) => quoteIdent(`c${i + 1}`)).join(', ');
  const evaluate = await conn.prepare(`SELECT ${exprs.join(', ')} FROM (${source}) AS src(${aliases})`, declaredTypes);
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
  return { table, clientColumns: clientColumns.map((c) => c.name), evaluate, returning: parts.returning, fields };
}

/** PostgreSQL's rule: the source must give exactly one value per target column. */
async function checkWidth(conn: EngineConnection, source: string, expected: number, declaredTypes: readonly number[]): Promise<void> {
  const probe = await conn.prepare(`SELECT * FROM (${source}) AS src`, declaredTypes);
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
export async function evaluateRows(plan: LedgerInsertPlan, params: readonly WireParam[]): Promise<(string | null)[][]> {
  plan.evaluate.bind(params);
  const cursor = await plan.evaluate.execute({ materialize: true });
  const rows: (string | null)[][] = [];
  const sink: RowSink = {
    row: (cells) => rows.push(cells.map((c) => (c === null ? null : typeof c === 'string' ? c : Buffer.from(c).toString('utf8')))),
    flushIfFull: () => Promise.resolve(),
  };
  try {
    await cursor.fetch(0, [], sink, { timeZone: 'UTC' });
  } finally {
    cursor.close();
  }
  return rows;
}
