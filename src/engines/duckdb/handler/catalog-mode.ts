import type { EngineConnection, EngineCursor, EngineStatement, RenderSettings, RowSink, WireParam } from '../../../engine/port.js';
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
  private generationAtBegin = -1;

  constructor(
    private readonly snapshot: CatalogSnapshot,
    private readonly tx: () => TransactionState,
    /** The catalog's views and the macros that read them (catalog/compat.ts, CATALOG_READERS). */
    private readonly readers: ReadonlySet<string>,
    /** The connection's user has an org_id: the tables, filled on a connection without one, would show it every organisation's counts. */
    private readonly scoped = false,
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
    if (this.temporaryObjects || this.ddlInTransaction || this.scoped) return false;
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
    this.generationAtBegin = this.snapshot.generation;
  }

  /**
   * The generation of the catalog whose kept answers (CatalogAnswers) this
   * connection's catalog read may take now: the snapshot's tables are right
   * for it and hold that generation, which a transaction still sees only if
   * no DDL ran anywhere since it began. Null otherwise.
   */
  async answersGeneration(): Promise<number | null> {
    if (!(await this.usable())) return null;
    const generation = this.snapshot.generation;
    if (this.tx().autocommit) return this.snapshot.fresh ? generation : null;
    return this.generationAtBegin === generation ? generation : null;
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

/**
 * Catalog reads answered from memory. A query that reads only the catalog,
 * over the snapshot's tables, answers the same until the schema changes: the
 * tables change only with it. Clients that read a whole schema (pg_dump,
 * SQLAlchemy's reflection, drizzle-kit, a BI tool's sync) send the same few
 * hundred such queries each time, and each costs DuckDB's planning over
 * nested views and macros (milliseconds, tens for some). So the rows a
 * client was sent for one are kept, by the engine's text, the parameters,
 * the session's user, role and settings and the format asked for, for one
 * generation of the catalog: any DDL on any connection starts a new one.
 * Only queries are kept whose every relation is one of the catalog's own and
 * whose words name nothing that changes without DDL (the clock, settings,
 * sequences' values, sizes, statistics, locks, backends, the ledgers'
 * functions); results of more than MAX_ROWS rows are not kept.
 */
export class CatalogAnswers {
  private epoch = -1;
  private readonly described = new Map<string, Described>();
  private readonly answers = new Map<string, ReadonlyArray<ReadonlyArray<string | Uint8Array | null>>>();
  private held = 0;
  private userFunctions: Promise<ReadonlySet<string>> | null = null;

  /** The answers of one generation of the catalog (those of an older one are dropped). */
  at(generation: number): this {
    if (generation !== this.epoch) {
      this.epoch = generation;
      this.described.clear();
      this.answers.clear();
      this.held = 0;
      this.userFunctions = null;
    }
    return this;
  }

  /**
   * The names of the functions clients made (CREATE FUNCTION, a DuckDB
   * macro), read once per generation by `load`: one may read a table, so a
   * query that calls one is never kept.
   */
  functionsMade(load: () => Promise<ReadonlySet<string>>): Promise<ReadonlySet<string>> {
    this.userFunctions ??= load();
    return this.userFunctions;
  }

  get generation(): number {
    return this.epoch;
  }

  description(key: string): Described | undefined {
    return this.described.get(key);
  }

  describe(key: string, d: Described): void {
    if (this.described.size < MAX_ENTRIES) this.described.set(key, d);
  }

  answer(key: string): ReadonlyArray<ReadonlyArray<string | Uint8Array | null>> | undefined {
    return this.answers.get(key);
  }

  keep(key: string, rows: ReadonlyArray<ReadonlyArray<string | Uint8Array | null>>): void {
    if (this.answers.size >= MAX_ENTRIES || this.held + rows.length > MAX_HELD_ROWS) return;
    this.answers.set(key, rows);
    this.held += rows.length;
  }
}

const kept = new WeakMap<object, CatalogAnswers>();

/** The answers kept for every connection of one server (`owner`: its connections' shared services). */
export function catalogAnswers(owner: object): CatalogAnswers {
  let answers = kept.get(owner);
  if (answers === undefined) {
    answers = new CatalogAnswers();
    kept.set(owner, answers);
  }
  return answers;
}

/** What a prepared catalog read describes, kept with its answers. */
export interface Described {
  readonly kind: EngineStatement['kind'];
  readonly paramTypes: readonly number[];
  readonly columns: EngineStatement['columns'];
}

/** Queries and rows kept per generation: pg_dump sends about 170 queries, drizzle-kit 650 for 100 tables. */
const MAX_ENTRIES = 20_000;
const MAX_ROWS = 10_000;
const MAX_HELD_ROWS = 200_000;

/** Words of a query whose answer may change without DDL, or differ by connection. */
const CHANGING_WORDS = new Set([
  'now',
  'current_timestamp',
  'current_time',
  'current_date',
  'localtime',
  'localtimestamp',
  'clock_timestamp',
  'statement_timestamp',
  'transaction_timestamp',
  'timeofday',
  'age',
  'random',
  'setseed',
  'uuid',
  'today',
  'get_current_time',
  'get_current_timestamp',
  'current_localtimestamp',
  'gen_random_uuid',
  'uuid_generate_v4',
  'nextval',
  'currval',
  'lastval',
  'setval',
  'current_setting',
  'set_config',
  'getvariable',
  'pg_backend_pid',
  'pg_cancel_backend',
  'pg_terminate_backend',
  'pg_reload_conf',
  'pg_conf_load_time',
  'pg_postmaster_start_time',
  'pg_relation_size',
  'pg_table_size',
  'pg_total_relation_size',
  'pg_indexes_size',
  'pg_database_size',
  'pg_tablespace_size',
  'pg_column_size',
  'pg_sequence_last_value',
  'pg_sequences',
  'pg_settings',
  'pg_db_role_setting',
  'pg_locks',
  'pg_prepared_statements',
  'pg_prepared_xacts',
  'pg_cursors',
  'pg_my_temp_schema',
  'pg_is_other_temp_schema',
  'pg_blocking_pids',
  'pg_listening_channels',
  'pg_notification_queue_usage',
  'pg_trigger_depth',
  'current_query',
  'inet_client_addr',
  'inet_client_port',
  'inet_server_addr',
  'inet_server_port',
]);

/** Literals a cast to a date or a time reads as the clock. */
const CLOCK_TEXTS = new Set(['now', 'today', 'tomorrow', 'yesterday']);

const CHANGING_PREFIXES = ['pg_stat', 'pg_advisory', 'pg_try_advisory', 'pg_sleep', 'pg_last_', 'pg_current_', 'txid_', 'pg_export_', 'cot_'];

type PgNode = Record<string, unknown>;

/**
 * Whether a catalog read's answer may be kept (see CatalogAnswers): a query
 * (SELECT or WITH) whose relations are all the catalog's and whose words
 * name nothing that changes without DDL. `isCatalogRelation` says whether a
 * relation, by its name and schema, is one of the catalog's.
 */
export function answerable(
  tokens: readonly Token[],
  tree: PgNode | null,
  isCatalogRelation: (name: string, schema: string | undefined) => boolean,
  functionsMade: ReadonlySet<string>,
): boolean {
  const first = tokens.find((t) => t.kind === 'word' || t.text === '(');
  if (tree === null || first === undefined || !['select', 'with'].includes(first.text.toLowerCase())) return false;
  for (const t of tokens) {
    // 'now'::timestamptz and its kin read the clock too.
    if (t.kind === 'string' && CLOCK_TEXTS.has(t.text.slice(1, -1).trim().toLowerCase())) return false;
    if (t.kind !== 'word' && t.kind !== 'quoted') continue;
    const w = t.text.replace(/^"|"$/g, '').toLowerCase();
    if (CHANGING_WORDS.has(w) || CHANGING_PREFIXES.some((p) => w.startsWith(p))) return false;
  }
  const ctes = new Set<string>();
  let made = false;
  const relations: Array<{ readonly name: string; readonly schema: string | undefined }> = [];
  const visit = (v: unknown): void => {
    if (Array.isArray(v)) v.forEach(visit);
    else if (v !== null && typeof v === 'object') {
      const node = v as PgNode;
      if (typeof node.ctename === 'string') ctes.add(node.ctename.toLowerCase());
      if (typeof node.relname === 'string')
        relations.push({ name: node.relname.toLowerCase(), schema: typeof node.schemaname === 'string' ? node.schemaname.toLowerCase() : undefined });
      const call = node.FuncCall as PgNode | undefined;
      const names = (call?.funcname as PgNode[] | undefined)?.map((n) => String((n.String as PgNode | undefined)?.sval ?? '').toLowerCase());
      if (names !== undefined && (names.length > 2 || (names.length === 2 && names[0] !== 'pg_catalog') || functionsMade.has(names.at(-1) ?? ''))) made = true;
      for (const x of Object.values(node)) visit(x);
    }
  };
  visit(tree);
  return !made && relations.every((r) => (r.schema === undefined && ctes.has(r.name)) || isCatalogRelation(r.name, r.schema));
}

/**
 * A catalog read whose answers CatalogAnswers keeps: described as its first
 * preparation described it, prepared only when an answer is not kept, and
 * its rows kept once a client has been sent all of them.
 */
export class AnsweredStatement implements EngineStatement {
  readonly kind: EngineStatement['kind'];
  readonly paramTypes: readonly number[];
  readonly columns: EngineStatement['columns'];
  private params: readonly WireParam[] = [];

  constructor(
    private readonly answers: CatalogAnswers,
    /** The engine's text and the session's user, role and settings. */
    private readonly key: string,
    described: Described,
    private inner: EngineStatement | null,
    private readonly prepare: () => Promise<EngineStatement>,
    /** The catalog's generation whose answers this statement may use now (see CatalogMode.answersGeneration), or null. */
    private readonly current: () => Promise<number | null>,
  ) {
    this.kind = described.kind;
    this.paramTypes = described.paramTypes;
    this.columns = described.columns;
  }

  bind(params: readonly WireParam[]): void {
    this.params = params;
  }

  async execute(options?: { readonly materialize?: boolean }): Promise<EngineCursor> {
    const generation = await this.current();
    if (generation === null) return (await this.statement()).execute(options);
    this.answers.at(generation);
    const params = this.params.map((p) => (p.value === null ? 'N' : `${p.format}:${p.typeOid}:${p.value.toString('base64')}`)).join(',');
    return new AnswerCursor(this.answers, `${this.key}\u0000${params}`, generation, async () => (await this.statement()).execute(options));
  }

  private async statement(): Promise<EngineStatement> {
    if (this.inner === null) this.inner = await this.prepare();
    this.inner.bind(this.params);
    return this.inner;
  }

  close(): void {
    this.inner?.close();
  }
}

/** Replays a kept answer, or fetches from the engine and keeps what it sent once the result is done. */
class AnswerCursor implements EngineCursor {
  readonly rowsChanged = 0;
  readonly returnsRows = true;
  private kept: ReadonlyArray<ReadonlyArray<string | Uint8Array | null>> | null = null;
  private at = 0;
  private engine: EngineCursor | null = null;
  private recording: Array<ReadonlyArray<string | Uint8Array | null>> | null = null;
  private answerKey = '';

  constructor(
    private readonly answers: CatalogAnswers,
    private readonly key: string,
    private readonly generation: number,
    private readonly open: () => Promise<EngineCursor>,
  ) {}

  async fetch(
    maxRows: number,
    formats: readonly (0 | 1)[],
    sink: RowSink,
    settings: RenderSettings,
  ): Promise<{ readonly rows: number; readonly done: boolean }> {
    if (this.kept === null && this.engine === null) {
      this.answerKey = `${this.key}\u0000${formats.join('')}\u0000${settings.timeZone}`;
      const kept = this.answers.generation === this.generation ? this.answers.answer(this.answerKey) : undefined;
      if (kept !== undefined) this.kept = kept;
      else {
        this.engine = await this.open();
        this.recording = [];
      }
    }
    if (this.kept !== null) {
      const end = maxRows === 0 ? this.kept.length : Math.min(this.kept.length, this.at + maxRows);
      const from = this.at;
      for (; this.at < end; this.at++) {
        sink.row(this.kept[this.at] as ReadonlyArray<string | Uint8Array | null>);
        if ((this.at - from) % 256 === 255) await sink.flushIfFull();
      }
      return { rows: end - from, done: this.at >= this.kept.length };
    }
    const engine = this.engine as EngineCursor;
    const recording = this.recording;
    const recorder: RowSink = {
      row: (cells) => {
        if (this.recording !== null) {
          if (this.recording.length >= MAX_ROWS) this.recording = null;
          else this.recording.push(cells.map((c) => (c instanceof Uint8Array ? Uint8Array.from(c) : c)));
        }
        sink.row(cells);
      },
      flushIfFull: () => sink.flushIfFull(),
    };
    const result = await engine.fetch(maxRows, formats, recording === null ? sink : recorder, settings);
    if (result.done && this.recording !== null) {
      // Kept only for the generation it was read in: a newer one has answers of its own.
      if (this.answers.generation === this.generation) this.answers.keep(this.answerKey, this.recording);
      this.recording = null;
    }
    return result;
  }

  close(): void {
    this.engine?.close();
  }
}
