import type { Token } from '../../../sql/lexer.js';
import { COMPAT_CATALOG, INFORMATION_SCHEMA, P } from './catalog-sql.js';

/**
 * The catalog, a second time, over tables that hold its costly views' rows.
 *
 * Each view over DuckDB's catalog costs 5-50 ms to run, and clients that read
 * a whole schema (pg_dump, SQLAlchemy's reflection, drizzle-kit) join several
 * of them per query, hundreds of times; binding a query over the nested views
 * costs as much again. So the catalog's set-up is repeated in a schema of its
 * own (SNAPSHOT_SCHEMA, and SNAPSHOT_INFORMATION for information_schema),
 * where each view named in SNAPSHOT_RELATIONS is a table, refreshed from its
 * definition after the schema changes, and every other view and macro reads
 * the copy. A statement reads the copy when the rewriter's names are pointed
 * at it (snapshotText).
 *
 * The tables are right for a connection only when they match what the live
 * views would show it: no temporary objects of its own, no DDL of its own
 * still uncommitted, and no DDL committed since the refresh. The handler
 * decides per statement (engines/duckdb/handler/catalog-mode.ts); this module
 * holds the SQL and the refresh.
 */

export const SNAPSHOT_SCHEMA = `${COMPAT_CATALOG}.pg_snapshot`;
export const SNAPSHOT_INFORMATION = `${COMPAT_CATALOG}.information_snapshot`;

/**
 * The views kept as tables, in the order the set-up creates them (each one's
 * definition reads only those before it), with the order their rows are
 * kept in: clients read catalogs without ORDER BY and expect PostgreSQL's
 * order (a table's columns by number, relations as they were created).
 */
const SNAPSHOT_ORDER: ReadonlyArray<readonly [name: string, orderBy: string]> = [
  ['cot_columns', 'table_oid, column_index'],
  ['cot_serials', 'cot_k'],
  ['cot_namespaces', 'oid'],
  ['cot_views', 'view_oid'],
  ['cot_keys', 'table_oid, constraint_index'],
  ['cot_indexes', 'indrelid, indexrelid'],
  ['cot_constraints', 'oid'],
  ['cot_functions', 'oid'],
  ['pg_namespace', 'oid'],
  ['pg_class', 'oid'],
  ['cot_relnames', 'oid'],
  ['pg_attribute', 'attrelid, attnum'],
  ['pg_attrdef', 'oid'],
  ['pg_type', 'oid'],
  ['pg_index', 'indrelid, indexrelid'],
  ['pg_constraint', 'oid'],
  ['pg_description', 'objoid, classoid, objsubid'],
  ['pg_proc', 'oid'],
  ['pg_depend', 'classid, objid, refclassid, refobjid'],
];

export const SNAPSHOT_RELATIONS: readonly string[] = SNAPSHOT_ORDER.map(([name]) => name);

const dotted = (s: string): string => s.replaceAll('.', '\\.');
const DEFINED = new RegExp(`^CREATE (VIEW|MACRO) (${dotted(P)}|${dotted(INFORMATION_SCHEMA)})\\.(\\w+)`);
const NAME = new RegExp(`\\b${dotted(P)}\\.(\\w+)`, 'g');
const INFORMATION_NAME = new RegExp(`\\b${dotted(INFORMATION_SCHEMA)}\\.`, 'g');

/** The set-up statements with the copy after them, and the names (in P) that the copy redefines. */
export interface SnapshotSetup {
  readonly statements: readonly string[];
  /** The views in P, and the macros that read one (directly or through another): what the copy redefines. */
  readonly readers: ReadonlySet<string>;
}

/** The views of P, and its macros that read a view, directly or through another such macro. */
function catalogReaders(statements: readonly string[]): Set<string> {
  const readers = new Set<string>();
  const macros = new Map<string, string>();
  for (const s of statements) {
    const m = DEFINED.exec(s);
    if (m?.[2] !== P) continue;
    if (m[1] === 'VIEW') readers.add(m[3] as string);
    else macros.set(m[3] as string, s);
  }
  for (let grew = true; grew; ) {
    grew = false;
    for (const [name, s] of macros) {
      if (readers.has(name) || !(s.includes(`${INFORMATION_SCHEMA}.`) || [...s.matchAll(NAME)].some((r) => readers.has(r[1] as string)))) continue;
      readers.add(name);
      grew = true;
    }
  }
  return readers;
}

/**
 * The catalog's set-up followed by its copy: every view, and every macro
 * that reads one, again in the snapshot schemas and reading the copy, with
 * each of SNAPSHOT_RELATIONS a table (empty until the first refresh) beside
 * its definition, `cot_live_<name>`. Tables, types, rows and the macros that
 * read no view are not copied: the copy uses the originals.
 */
export function snapshotSetup(statements: readonly string[]): SnapshotSetup {
  const readers = catalogReaders(statements);
  const order: string[] = [];
  const copy = statements.flatMap((statement) => {
    const m = DEFINED.exec(statement);
    const name = m?.[3] as string;
    if (m === null || (m[2] === P && !readers.has(name))) return [];
    if (m[1] === 'VIEW' && m[2] === P && SNAPSHOT_RELATIONS.includes(name)) {
      order.push(name);
      const body = statement.replace(/^CREATE VIEW \S+ AS\s/, '');
      return [
        `CREATE VIEW ${SNAPSHOT_SCHEMA}.cot_live_${name} AS ${pointAtSnapshot(body, readers)}`,
        `CREATE TABLE ${SNAPSHOT_SCHEMA}.${name} AS SELECT * FROM ${SNAPSHOT_SCHEMA}.cot_live_${name} LIMIT 0`,
      ];
    }
    return [pointAtSnapshot(statement, readers)];
  });
  if (order.join() !== SNAPSHOT_RELATIONS.join()) throw new Error(`catalog snapshot: the set-up creates ${order.join(', ')}`);
  return { statements: [...statements, `CREATE SCHEMA ${SNAPSHOT_SCHEMA}`, `CREATE SCHEMA ${SNAPSHOT_INFORMATION}`, ...copy], readers };
}

/**
 * SQL with the catalog's views and the macros that read them (`readers`)
 * named in the copy instead. Given the text's tokens, a name inside a string
 * or a quoted identifier is left as it is (a client's text, where only the
 * rewrite put the names).
 */
export function pointAtSnapshot(sql: string, readers: ReadonlySet<string>, tokens?: readonly Token[]): string {
  const quoted = (tokens ?? []).filter((t) => t.kind === 'string' || t.kind === 'quoted');
  const outside = (at: number): boolean => !quoted.some((t) => at >= t.start && at < t.end);
  return sql
    .replace(NAME, (all, name: string, at: number) => (readers.has(name) && outside(at) ? `${SNAPSHOT_SCHEMA}.${name}` : all))
    .replace(INFORMATION_NAME, (all, at: number) => (outside(at) ? `${SNAPSHOT_INFORMATION}.` : all));
}

/** The statements that refresh every table, in one transaction: each definition reads the tables refreshed before it. */
export function refreshSql(): string[] {
  return [
    'BEGIN TRANSACTION',
    ...SNAPSHOT_ORDER.flatMap(([name, orderBy]) => [
      `DELETE FROM ${SNAPSHOT_SCHEMA}.${name}`,
      `INSERT INTO ${SNAPSHOT_SCHEMA}.${name} SELECT * FROM ${SNAPSHOT_SCHEMA}.cot_live_${name} ORDER BY ${orderBy}`,
    ]),
    'COMMIT',
  ];
}

/** Whether a statement, as the engine runs it, reads the catalog's views (or a macro that does). */
export function readsCatalog(engineText: string, readers: ReadonlySet<string>): boolean {
  if (engineText.includes(`${INFORMATION_SCHEMA}.`)) return true;
  for (const m of engineText.matchAll(NAME)) if (readers.has(m[1] as string)) return true;
  return false;
}

/** How long the schema stays unchanged before its tables are worth refreshing (see CatalogSnapshot's `changing`). */
const QUIET_MS = 250;

/** What a refresh tells the server's log. */
export interface SnapshotEvents {
  refreshed(ms: number): void;
  failed(err: unknown): void;
}

/** What the refresh runs on: a connection of its own, made like a client's so that it sees the same objects. */
export interface SnapshotConnection {
  run(sql: string): Promise<void>;
  query(sql: string): Promise<unknown[][]>;
  close(): void;
}

/**
 * Names every connection without objects of its own sees, read with the
 * tables in the refresh's transaction: the handler asks for them at the
 * first statement of each generation (which functions clients made, which
 * relations exist), and reading them there cost the first catalog read
 * after a change 60 ms (duckdb_functions() lists every built-in).
 */
export interface SchemaNames {
  /** The functions and macros clients made, lower-case. */
  readonly functions: ReadonlySet<string>;
  /** Every table and view, schema-qualified (`main.orders`). */
  readonly relations: ReadonlySet<string>;
  /** The tables among them. */
  readonly tables: ReadonlySet<string>;
}

/** The queries behind SchemaNames, one column of names each. */
export function schemaNamesSql(compatCatalog: string): { readonly functions: string; readonly relations: string; readonly tables: string } {
  const other = `database_name <> '${compatCatalog.replaceAll("'", "''")}'`;
  const tables = `SELECT schema_name || '.' || table_name FROM duckdb_tables() WHERE NOT temporary AND ${other}`;
  return {
    functions: `SELECT DISTINCT lower(function_name) FROM duckdb_functions() WHERE NOT internal AND ${other} AND database_name NOT IN ('system', 'temp')`,
    relations: `${tables}
      UNION ALL SELECT schema_name || '.' || view_name FROM duckdb_views() WHERE NOT temporary AND NOT internal AND ${other}`,
    tables,
  };
}

const namesOf = (rows: unknown[][]): ReadonlySet<string> => new Set(rows.map((r) => String(r[0])));

/**
 * The tables' state, shared by every connection: a generation that each
 * change to the schema moves on, and the generation the tables hold.
 */
export class CatalogSnapshot {
  private changes = 0;
  private built = -1;
  private building: Promise<void> | null = null;
  private connection: Promise<SnapshotConnection> | null = null;
  /** When the schema last changed (performance.now()), and the refresh waiting for it to settle. */
  private lastChange = Number.NEGATIVE_INFINITY;
  private settling: NodeJS.Timeout | null = null;
  /** Set by close: no refresh starts after the server stopped (its connection would hold the engine, and its file, open). */
  private closed = false;
  private names: SchemaNames | null = null;

  /** `connect`: a connection for the refresh, with the objects a client's connection has (its temporary macros). */
  constructor(
    private readonly connect: () => Promise<SnapshotConnection>,
    /** Runs before each refresh on its connection: the objects it needs may have changed with the schema. */
    private readonly prepare: (conn: SnapshotConnection) => Promise<void>,
    /** Told of each refresh: how long it took, or why it failed (the next catalog read tries again). */
    private readonly told: SnapshotEvents = { refreshed: () => undefined, failed: () => undefined },
  ) {}

  /**
   * The schema changed (or may have): the tables are stale until the next
   * refresh, which runs once the schema has settled, so that the first tool
   * to read the catalog after a migration finds them up to date rather than
   * waiting for them (a refresh of 100 tables takes about 0.1 s here).
   */
  changed(): void {
    this.changes++;
    this.lastChange = performance.now();
    this.refreshSoon();
  }

  /**
   * Whether the schema changed within the last QUIET_MS. A migration or an
   * ORM's sync alternates DDL with a catalog read or two, and a refresh for
   * each read would cost more than the live views: while the schema is
   * changing, reads take the live views and one refresh follows once it
   * settles.
   */
  private get changing(): boolean {
    return performance.now() - this.lastChange < QUIET_MS;
  }

  /** Moved on by every change to the schema: what was read of the catalog before it may be stale. */
  get generation(): number {
    return this.changes;
  }

  /** Whether the tables hold the catalog as it is now. */
  get fresh(): boolean {
    return this.built === this.changes;
  }

  /** The names read with the tables, when they hold `generation`; null otherwise (the caller asks the engine). */
  namesAt(generation: number): SchemaNames | null {
    return this.built === generation ? this.names : null;
  }

  /**
   * Brings the tables up to date, refreshing them if the schema changed
   * since; one refresh runs at a time. Under a stream of DDL it gives up
   * after a few rounds, and the caller reads the live views.
   */
  async ensureFresh(): Promise<void> {
    for (let round = 0; round < 3 && !this.fresh; round++) {
      if (this.building === null) {
        if (this.changing) {
          this.refreshSoon();
          return;
        }
        this.building = this.refresh().finally(() => {
          this.building = null;
        });
      }
      await this.building;
    }
  }

  /** Refreshes the tables once the schema has settled, without waiting for it (a transaction that began stale reads the live views). */
  refreshSoon(): void {
    if (this.fresh || this.settling !== null || this.closed) return;
    const wait = Math.max(0, this.lastChange + QUIET_MS - performance.now());
    this.settling = setTimeout(() => {
      this.settling = null;
      if (this.changing) this.refreshSoon();
      else this.ensureFresh().catch((err: unknown) => this.told.failed(err));
    }, wait);
    this.settling.unref();
  }

  /** Stops refreshing: the pending one is dropped, one under way is waited for, and the connection closed. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.settling !== null) clearTimeout(this.settling);
    this.settling = null;
    await this.building?.catch(() => undefined);
    const connection = this.connection;
    this.connection = null;
    (await connection?.catch(() => null))?.close();
  }

  private async refresh(): Promise<void> {
    if (this.closed) throw new Error('the server is stopping: the catalog snapshot is not refreshed');
    const generation = this.changes;
    const started = performance.now();
    this.connection ??= this.connect();
    let conn: SnapshotConnection;
    try {
      conn = await this.connection;
    } catch (err) {
      this.connection = null;
      throw err;
    }
    await this.prepare(conn);
    const sql = schemaNamesSql(COMPAT_CATALOG);
    let names: SchemaNames;
    try {
      const refresh = refreshSql();
      await conn.run(refresh.slice(0, -1).join(';\n'));
      names = {
        functions: namesOf(await conn.query(sql.functions)),
        relations: namesOf(await conn.query(sql.relations)),
        tables: namesOf(await conn.query(sql.tables)),
      };
      await conn.run(refresh.at(-1) as string);
    } catch (err) {
      await conn.run('ROLLBACK').catch(() => undefined);
      throw err;
    }
    this.names = names;
    this.built = generation;
    this.told.refreshed(performance.now() - started);
  }
}
