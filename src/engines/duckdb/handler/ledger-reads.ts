import type { EngineCursor, EngineStatement, RowSink, WireParam } from '../../../engine/port.js';
import type { AuditReport } from '../log/auditor.js';
import { LOG_KINDS } from '../dialect/audit-sql.js';
import { CHAIN_START, chainRowsSql, chainVerdict, checkChain, storedLinks, type LostRanges } from '../../../ledger/chain/chain-check.js';
import { retainedPrefixSql } from '../../../ledger/erasure/retention-sql.js';
import type { LedgerCatalog } from '../../../ledger/chain/catalog.js';
import type { LedgerTable } from '../../../ledger/chain/schema.js';
import { verifyMacroName } from '../../../ledger/chain/verdict-sql.js';
import { TypeOid } from '../../../protocol/type-oids.js';
import { type ScalarCell, scalarCell } from '../../../protocol/scalar-cells.js';
import type { ChainVerifyRead, ReadArg } from '../../../sql/verify-call.js';

/**
 * The reads an agent or an auditor makes of one chain, answered by the
 * handler instead of the engine's macro: `SELECT * FROM cot_verify($1)`
 * (or a list of its columns). The stored rows are still read from the
 * engine, inside the client's own transaction, through the ledger's index;
 * only the recomputation moves into the server, where fifty SHA-256 cost
 * well under a millisecond (docs/benchmarks.md). Anything else about the
 * call, a result format or a column type it cannot render, falls back to
 * the macro, which answers the same.
 */

/**
 * The argument's value as text: null for SQL NULL, undefined when it is a
 * binary value of a type other than text, which the handler does not read.
 */
export function argumentText(arg: ReadArg, params: readonly WireParam[], paramTypes: readonly number[]): string | null | undefined {
  if ('literal' in arg) return arg.literal;
  const p = params[arg.param - 1];
  if (p === undefined) return undefined;
  if (p.value === null) return null;
  const type = paramTypes[arg.param - 1] ?? TypeOid.unspecified;
  const textual = type === TypeOid.text || type === TypeOid.varchar || type === TypeOid.unspecified || type === TypeOid.unknown;
  return p.format === 0 || textual ? p.value.toString('utf8') : undefined;
}

/** What a served verification needs from the server. */
export interface ChainVerifySources {
  readonly ledgers: LedgerCatalog;
  /** The latest audit, whose findings about a chain count against it as in the SQL. */
  readonly auditReport: () => AuditReport | null;
  /** The ledger_seq ranges recorded lost. */
  readonly lostRanges: LostRanges;
  /** Runs a query on the client's own engine connection (its transaction and snapshot), with text parameters; rows of text cells. */
  query(sql: string, params: readonly string[]): Promise<Array<ReadonlyArray<string | null>>>;
  /**
   * For a user with an org_id: whether a chain is its organisation's (it holds one of its rows), as the
   * scoped macro asks; a chain that is not is answered with no row, as by the macro. Absent for a user without one.
   */
  owns?(table: LedgerTable, key: string): Promise<boolean>;
}

/** The result types a served read renders itself; any other falls back to the engine. */
const RENDERED = new Set<number>([TypeOid.text, TypeOid.varchar, TypeOid.bool, TypeOid.int8, TypeOid.int4]);

/**
 * The engine statement of the macro call, answered by the handler when it
 * can be: the statement keeps its description, parameters and fallback.
 */
export class ServedChainVerify implements EngineStatement {
  readonly kind = 'SELECT';
  private params: readonly WireParam[] = [];

  constructor(
    private readonly inner: EngineStatement,
    private readonly read: ChainVerifyRead,
    private readonly sources: ChainVerifySources,
  ) {}

  get paramTypes(): readonly number[] {
    return this.inner.paramTypes;
  }

  get columns(): EngineStatement['columns'] {
    return this.inner.columns;
  }

  /** Whether this statement's description is one the handler can render: otherwise the engine always answers. */
  static applies(inner: EngineStatement, read: ChainVerifyRead): boolean {
    const columns = inner.columns;
    return (
      inner.kind === 'SELECT' &&
      columns !== null &&
      columns.length === read.columns.length &&
      columns.every((c, i) => c.name === read.columns[i] && RENDERED.has(c.typeOid))
    );
  }

  bind(params: readonly WireParam[]): void {
    this.params = params;
    this.inner.bind(params);
  }

  async execute(options?: { readonly materialize?: boolean }): Promise<EngineCursor> {
    const key = argumentText(this.read.arg, this.params, this.inner.paramTypes);
    const table = key === undefined ? undefined : (await this.sources.ledgers.all()).find((l) => verifyMacroName(l) === this.read.macro);
    if (key === undefined || table === undefined) return this.inner.execute(options);
    const owned = key === null || this.sources.owns === undefined || (await this.sources.owns(table, key));
    const rows = key === null || !owned ? [] : await this.verdict(table, key);
    return new ValuesCursor(
      rows,
      (this.inner.columns ?? []).map((c) => c.typeOid),
    );
  }

  close(): void {
    this.inner.close();
  }

  /** The one row verifySql and withAuditFindings give for this chain, projected; none for a chain that never was. */
  private async verdict(table: LedgerTable, key: string): Promise<ScalarCell[][]> {
    const stored = await this.sources.query(chainRowsSql(table), [key]);
    const prefixSql = retainedPrefixSql(table);
    const [prefix] = prefixSql === null ? [] : ((await this.sources.query(prefixSql, [key])) as Array<[bigint | number, string]>);
    const check = checkChain(
      storedLinks(table, stored),
      prefix === undefined ? CHAIN_START : { index: Number(prefix[0]), hash: String(prefix[1]) },
      this.sources.lostRanges,
    );
    const row = chainVerdict(key, check, auditFinding(this.sources.auditReport(), table, key));
    if (row === null) return [];
    return [this.read.columns.map((c) => row[c as keyof typeof row])];
  }
}

/** The kind of the audit's first finding (by ledger_seq) held against the global log for this chain, or null. */
function auditFinding(report: AuditReport | null, table: LedgerTable, key: string): string | null {
  const ledger = `${table.schema}.${table.name}`;
  let first: { kind: string; seq: number } | null = null;
  for (const f of report?.findings ?? []) {
    if (f.ledger !== ledger || !LOG_KINDS.includes(f.kind)) continue;
    if (table.chainKey !== null && f.chainKey === null) continue;
    if ((f.chainKey ?? '') !== key) continue;
    const seq = f.firstSeq ?? 0;
    if (first === null || seq < first.seq) first = { kind: f.kind, seq };
  }
  return first?.kind ?? null;
}

/** Rows computed in the server, rendered in the protocol's text or binary format. */
class ValuesCursor implements EngineCursor {
  readonly rowsChanged = 0;
  readonly returnsRows = true;
  private next = 0;

  constructor(
    private readonly rows: readonly ScalarCell[][],
    private readonly types: readonly number[],
  ) {}

  async fetch(maxRows: number, formats: readonly (0 | 1)[], sink: RowSink): Promise<{ rows: number; done: boolean }> {
    const end = maxRows === 0 ? this.rows.length : Math.min(this.rows.length, this.next + maxRows);
    const start = this.next;
    for (; this.next < end; this.next++) {
      const row = this.rows[this.next] as ScalarCell[];
      sink.row(row.map((v, c) => scalarCell(v, this.types[c] ?? TypeOid.text, formats[c] === 1)));
    }
    await sink.flushIfFull();
    return { rows: end - start, done: this.next >= this.rows.length };
  }

  close(): void {
    this.next = this.rows.length;
  }
}

/** A plan's row estimate, as DuckDB draws it in a box (`│   ~5,000 rows   │`) or writes it in JSON. */
const BOX_ESTIMATE = /│(\s*)~[\d,.]+ rows?(\s*)│/g;
const JSON_ESTIMATE = /("Estimated Cardinality"\s*:\s*)"[\d.]+"/g;

/** A plan's text without its estimates: the same width, the count gone. */
export function withoutEstimates(plan: string): string {
  return plan
    .replace(BOX_ESTIMATE, (m) => {
      const inner = m.length - 2;
      const text = '~? rows';
      const left = Math.floor((inner - text.length) / 2);
      return `│${' '.repeat(Math.max(0, left))}${text}${' '.repeat(Math.max(0, inner - text.length - left))}│`;
    })
    .replace(JSON_ESTIMATE, '$1"?"');
}

/**
 * EXPLAIN for a user with an org_id: DuckDB estimates a scan's rows from the
 * whole table's statistics, every organisation's, so the estimates are left
 * out of the plan it is shown. The plan itself (the filter on its
 * organisation included) stays.
 */
export class EstimatesHidden implements EngineStatement {
  readonly kind = 'EXPLAIN';

  constructor(private readonly inner: EngineStatement) {}

  get paramTypes(): readonly number[] {
    return this.inner.paramTypes;
  }

  get columns(): EngineStatement['columns'] {
    return this.inner.columns;
  }

  bind(params: readonly WireParam[]): void {
    this.inner.bind(params);
  }

  async execute(options?: { readonly materialize?: boolean }): Promise<EngineCursor> {
    const cursor = await this.inner.execute(options);
    return {
      rowsChanged: cursor.rowsChanged,
      returnsRows: cursor.returnsRows,
      fetch: (maxRows, formats, sink, settings) =>
        cursor.fetch(
          maxRows,
          formats,
          {
            row: (cells) =>
              sink.row(
                cells.map((c) =>
                  c === null ? null : typeof c === 'string' ? withoutEstimates(c) : Buffer.from(withoutEstimates(Buffer.from(c).toString('utf8')), 'utf8'),
                ),
              ),
            flushIfFull: () => sink.flushIfFull(),
          },
          settings,
        ),
      close: () => cursor.close(),
    };
  }

  close(): void {
    this.inner.close();
  }
}
