import type { EngineConnection, EngineCursor, EngineStatement, RenderSettings, WireParam } from '../../../engine/port.js';
import type { Token } from '../../../sql/lexer.js';
import { CatalogSnapshot, pointAtSnapshot, readsCatalog, type SnapshotConnection, type SnapshotEvents } from '../catalog/snapshot.js';
import type { TransactionObserver, TransactionState } from './transaction.js';

/** The first words of statements that read once, where they run: queries, and DML reading the catalog as it runs. */
const READS = new Set(['select', 'with', 'values', 'table', '(', 'insert', 'update', 'delete']);

/**
 * Whether one connection's statements may read the catalog's copy over the
 * snapshot tables (engines/duckdb/catalog/snapshot.ts) or must read the live
 * views.
 *
 * The tables hold what a connection without objects of its own sees. So a
 * connection reads them unless it made a temporary object, or runs DDL in a
 * transaction not yet committed. Outside a transaction a statement first
 * brings the tables up to date (or reads the views while the schema is still
 * changing: see CatalogSnapshot). Inside one, it reads them only if they were
 * up to date when the transaction began: DuckDB gives a transaction the
 * tables as they were when it first touched them, and a refresh after that
 * is not seen.
 */
export class CatalogMode implements TransactionObserver {
  private temporaryObjects = false;
  private ddlInTransaction = false;
  private freshAtBegin = false;

  constructor(
    private readonly snapshot: CatalogSnapshot,
    private readonly tx: () => TransactionState,
    /** The catalog's views and the macros that read them (catalog/compat.ts, CATALOG_READERS). */
    private readonly readers: ReadonlySet<string>,
  ) {}

  /**
   * Whether a statement, as the engine runs it, is a query that reads the
   * catalog. A statement that keeps its text (CREATE VIEW, PREPARE) reads
   * the live views whenever it runs later, so it is never pointed at the
   * tables.
   */
  reads(engineText: string, tokens: readonly Token[]): boolean {
    const first = tokens.find((t) => t.kind === 'word' || t.text === '(');
    return first !== undefined && READS.has(first.text.toLowerCase()) && readsCatalog(engineText, this.readers);
  }

  /** A catalog read as it runs over the snapshot tables, or null when they are not right for this connection now. */
  async snapshotText(engineText: string, tokens: readonly Token[]): Promise<string | null> {
    return (await this.usable()) ? pointAtSnapshot(engineText, this.readers, tokens) : null;
  }

  /** Whether the snapshot tables show this connection what the live views would. */
  async usable(): Promise<boolean> {
    if (this.temporaryObjects || this.ddlInTransaction) return false;
    if (!this.tx().autocommit) {
      // This transaction reads the views; the next one finds the tables up to date.
      if (!this.freshAtBegin) this.snapshot.refreshSoon();
      return this.freshAtBegin;
    }
    try {
      await this.snapshot.ensureFresh();
      return this.snapshot.fresh;
    } catch {
      // The live views answer the same, only slower.
      return false;
    }
  }

  /**
   * Whether this connection sees the schema every connection sees: it made
   * no temporary object, and its transaction holds no DDL of its own. What
   * one connection read of it may then serve another (result-sources.ts).
   */
  get seesSharedSchema(): boolean {
    return !this.temporaryObjects && !this.ddlInTransaction;
  }

  /** DDL ran on this connection; `tokens` are the client's statement. */
  ddlRan(tokens: readonly Token[]): void {
    this.snapshot.changed();
    if (!this.tx().autocommit) this.ddlInTransaction = true;
    if (tokens.some((t) => t.kind === 'word' && /^(temp|temporary|pg_temp)$/i.test(t.text))) this.temporaryObjects = true;
  }

  /** A transaction began (BEGIN, or a multi-statement string's). */
  transactionBegan(): void {
    this.freshAtBegin = this.snapshot.fresh;
  }

  /** The transaction ended: its DDL, committed or rolled back, is every connection's catalog now. */
  transactionEnded(): void {
    if (this.ddlInTransaction) this.snapshot.changed();
    this.ddlInTransaction = false;
  }
}

/**
 * A prepared catalog read over the snapshot tables: before each run it
 * checks that they are still right for the connection, and if not, prepares
 * the statement again over the live views.
 */
export class CatalogStatement implements EngineStatement {
  private params: readonly WireParam[] | null = null;
  private live = false;

  constructor(
    private inner: EngineStatement,
    private readonly mode: CatalogMode,
    private readonly prepareLive: () => Promise<EngineStatement>,
  ) {}

  get kind() {
    return this.inner.kind;
  }

  get paramTypes() {
    return this.inner.paramTypes;
  }

  get columns() {
    return this.inner.columns;
  }

  get waitsForAppends() {
    return this.inner.waitsForAppends;
  }

  bind(params: readonly WireParam[]): void {
    this.params = params;
    this.inner.bind(params);
  }

  async execute(options?: { readonly materialize?: boolean }): Promise<EngineCursor> {
    if (!this.live && !(await this.mode.usable())) {
      const live = await this.prepareLive();
      this.inner.close();
      this.inner = live;
      this.live = true;
      if (this.params !== null) live.bind(this.params);
    }
    return this.inner.execute(options);
  }

  renderCanonical(rows: ReadonlyArray<ReadonlyArray<string | null>>, settings: RenderSettings): Array<Array<string | null>> | null {
    return this.inner.renderCanonical?.(rows, settings) ?? null;
  }

  close(): void {
    this.inner.close();
  }
}

/**
 * The snapshot shared by every connection, refreshed on a connection of its
 * own. `setup` makes that connection like a client's (its temporary macros,
 * which pg_proc lists); `before` runs before each refresh (the ledgers'
 * macros, which change with the schema).
 */
export function catalogSnapshot(
  connect: () => Promise<EngineConnection>,
  setup: readonly string[],
  before: () => Promise<readonly string[][]>,
  told: SnapshotEvents,
): CatalogSnapshot {
  return new CatalogSnapshot(
    async (): Promise<SnapshotConnection> => {
      const conn = await connect();
      await conn.run(setup.join(';\n'));
      return conn;
    },
    async (conn) => {
      for (const group of await before()) await conn.run(group.join(';\n')).catch(() => undefined);
    },
    told,
  );
}
