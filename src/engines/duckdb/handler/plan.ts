import type { ColumnAlter, ConstraintAddition } from '../catalog/alter-table.js';
import type { DeclaredChange } from '../catalog/declared.js';
import type { AdvisoryWait } from '../../../sql/advisory.js';
import type { SerialTable } from '../catalog/serial.js';
import type { EngineCursor, EngineStatement, StatementKind, WireParam } from '../../../engine/port.js';
import { PgError } from '../../../errors/pg-error.js';
import { SqlState } from '../../../errors/sqlstate.js';
import type { FieldDescription } from '../../../protocol/messages.js';
import type { Portal, PreparedStatement, StatementSource } from '../../../session/handler-port.js';
import type { CopyFromStdin, CopyToStdout } from '../../../sql/copy.js';
import type { StatementText, Token } from '../../../sql/lexer.js';
import type { ParsedStatement } from '../../../sql/parsed.js';
import { operationName, rolesFor } from './access.js';
import type { SessionCommand } from './commands.js';
import type { LedgerInsertPlan } from './ledger-insert.js';
import type { KeyWork } from './key-registry.js';
import type { ErasureCall } from '../../../sql/erasure-call.js';
import { readsNoLedger } from '../../../sql/relations-read.js';
import type { SchemaNames } from '../catalog/snapshot.js';
import { catalogRelationOid } from '../catalog/pg-catalog.js';

/**
 * What a statement becomes once it is planned: which path runs it (a
 * session command, the engine, the ledger writer, COPY) and what that path
 * needs. The connection dispatches on the plan's kind.
 */

/** A position in the text the engine ran, as a position in the statement the client sent (see engines/duckdb/catalog/rewrite.ts). */
export type PositionMap = (position: number) => number;
export const SAME_POSITION: PositionMap = (p) => p;

/** A statement as the engine sees it, after the catalog's rewrites. */
export interface EngineText extends StatementText {
  readonly clientPosition?: PositionMap;
  /** The text's parsed form, which every rule after the rewrite reads (its tokens are `tokens`). */
  readonly parsed: ParsedStatement<StatementKind>;
}

export type Plan =
  | {
      readonly kind: 'engine';
      readonly statement: EngineStatement;
      readonly tokens: readonly Token[];
      readonly offset: number;
      readonly clientPosition: PositionMap;
      /** Set for CREATE TABLE of a ledger name: the chain columns to add after it. */
      readonly createsLedger: readonly string[] | null;
      /** Set for CREATE TABLE with serial or identity columns: `statement` is the probe, this runs instead. */
      readonly createsSequences: SerialTable | null;
      /** Set for ALTER TABLE ... ADD FOREIGN KEY, which the handler carries out by rebuilding the table. */
      readonly addsConstraint: ConstraintAddition | null;
      /** Set for an ALTER TABLE an index may block (DROP COLUMN, TYPE, RENAME COLUMN): the indexes are set aside around it. */
      readonly altersIndexedColumns: ColumnAlter | null;
      /** Set for a DROP of several objects, or of one in `public`: one DROP per object, in one transaction (catalog/drop.ts). */
      readonly dropsEach: readonly string[] | null;
      /** What the statement declares that DuckDB does not keep, recorded once it commits (engines/duckdb/catalog/declared.ts). */
      readonly declares: readonly DeclaredChange[];
      /** The advisory locks on constant keys the statement waits for before it runs. */
      readonly advisoryWaits: readonly AdvisoryWait[];
      /** Parameters (1-based) that are cot_search() query texts, embedded before the statement runs. */
      readonly searchParams: readonly number[];
      /** What the statement does to the foreign keys the server keeps, and to the tables they relate (foreign-keys.ts). */
      readonly keys: KeyWork;
      /** For a SELECT: whether it reads no ledger row, and need not wait for appends (waitsForAppends). */
      readonly ledgerReads: LedgerReadCheck | null;
    }
  | { readonly kind: 'copy-in'; readonly copy: CopyFromStdin; readonly offset: number }
  /** COPY ... TO STDOUT: the query is an ordinary prepared read whose rows become COPY lines. */
  | { readonly kind: 'copy-out'; readonly copy: CopyToStdout; readonly query: Statement }
  | {
      /** An INSERT into a ledger: the writer appends; the client's statement itself never runs. */
      readonly kind: 'ledger-insert';
      readonly insert: LedgerInsertPlan;
      readonly tokens: readonly Token[];
      readonly offset: number;
      readonly clientPosition: PositionMap;
    }
  | { readonly kind: 'command'; readonly command: SessionCommand }
  /** cot_redact() and its kin: the server carries them out (erasure.ts). */
  | { readonly kind: 'erasure'; readonly call: ErasureCall; readonly text: string }
  | { readonly kind: 'empty' };

export type EnginePlan = Extract<Plan, { kind: 'engine' }>;
export type CopyOutPlan = Extract<Plan, { kind: 'copy-out' }>;

/** The engine statement kinds that only read. */
export const READ_KINDS: ReadonlySet<StatementKind> = new Set<StatementKind>(['SELECT', 'EXPLAIN', 'PRAGMA', 'RELATION']);

export class Statement implements PreparedStatement {
  portals = 0;
  closed = false;
  /** Set while the connection's plan cache keeps it (PlanCache, in plan.ts): how many unnamed statements it stands for. */
  cache: { readonly key: string; holders: number; evicted: boolean } | null = null;
  /** The portal whose parameters are currently bound to the engine statement. */
  boundBy: ConnectionPortal | null = null;

  constructor(
    readonly plan: Plan,
    readonly paramTypes: readonly number[],
    readonly fields: readonly FieldDescription[] | null,
  ) {}
}

export class ConnectionPortal implements Portal {
  cursor: EngineCursor | null = null;
  done = false;

  constructor(
    readonly statement: Statement,
    readonly fields: readonly FieldDescription[] | null,
    readonly params: readonly (Buffer | null)[],
    readonly paramFormats: readonly number[],
    readonly formats: readonly (0 | 1)[],
  ) {}
}

/** The statement kind, as metrics label it. */
export function planKind(plan: Plan): string {
  switch (plan.kind) {
    case 'engine':
      return plan.statement.kind;
    case 'command':
      return plan.command.kind.toUpperCase();
    case 'copy-in':
    case 'copy-out':
      return 'COPY';
    case 'ledger-insert':
      return 'INSERT';
    case 'empty':
      return 'EMPTY';
    case 'erasure':
      return 'SELECT';
  }
}

/** The operation a read-only transaction refuses this plan for, or null when the plan only reads. */
export function writeOperation(plan: Plan): string | null {
  switch (plan.kind) {
    case 'engine':
      return rolesFor(plan.statement.kind, plan.tokens).includes('reader') ? null : operationName(plan.statement.kind, plan.tokens);
    case 'ledger-insert':
      return 'INSERT';
    case 'copy-in':
      return 'COPY FROM';
    case 'erasure':
      return plan.call.fn === 'cot_retain' ? 'cot_retain()' : `${plan.call.fn}()`;
    default:
      return null;
  }
}

/** The portal's parameters, as the engine binds them. */
export function wireParams(portal: ConnectionPortal): WireParam[] {
  const { params, paramFormats, statement } = portal;
  return params.map((value, i) => ({
    value,
    format: paramFormats.length === 0 ? 0 : (paramFormats[paramFormats.length === 1 ? 0 : i] as number),
    typeOid: statement.paramTypes[i] ?? 0,
  }));
}

/** Binds the portal's parameters to its statement's engine statement, which holds one portal's at a time. */
export function bindEngine(portal: ConnectionPortal, engineStatement: EngineStatement): void {
  engineStatement.bind(wireParams(portal));
  portal.statement.boundBy = portal;
}

/** Maps an engine error: positions become offsets into the client's string, and interrupts say why. */
export function clientError(err: unknown, offset: number, clientPosition: PositionMap = SAME_POSITION): unknown {
  if (!(err instanceof PgError)) return err;
  if (err.position === undefined) return err;
  const position = clientPosition(err.position) + offset;
  return position === err.position ? err : err.withPosition(position);
}

/** What an unnamed plan's reuse is judged against: everything its planning read besides the text. */
export interface PlanState {
  readonly services: { readonly catalogSnapshot: { readonly generation: number }; readonly ledgers: { readonly version: number } };
  readonly settings: { readonly version: number };
  readonly tx: { readonly status: string };
  /** Calls of a temporary function are rewritten when a statement is planned: a connection that made one keeps no plans. */
  readonly tempFunctions: ReadonlyMap<string, unknown>;
}

/** Unnamed plans kept per connection, and the longest text kept (a longer one is planned each time). */
const PLANS_KEPT = 32;
const MAX_KEPT_TEXT = 16 * 1024;

/**
 * The plans of a connection's unnamed statements, kept by text: drivers and
 * ORMs send the same query as a new unnamed Parse each time, and planning it
 * again (PostgreSQL's parser, the guard, the rewrite, DuckDB's prepare)
 * costs about a millisecond more than binding a named statement
 * (docs/benchmarks.md). A plan is handed out again only under the same key,
 * which names everything its planning read: the text and its offset in the
 * query string, the parameter types, the catalog's generation, the ledgers',
 * the settings' and the transaction state. A kept plan is bound again as a
 * named statement is.
 */
export class PlanCache {
  /** Least recently used first. */
  private readonly byKey = new Map<string, Statement>();

  constructor(
    private readonly state: PlanState,
    /** Closes a plan nobody holds any more. */
    private readonly discard: (statement: Statement) => void,
  ) {}

  /** The key a plan of this text is kept under (null: not worth keeping), and the plan kept under it. */
  find(source: string | StatementSource, paramTypes: readonly number[]): { readonly key: string | null; readonly kept: Statement | undefined } {
    const text = typeof source === 'string' ? source : source.text;
    if (text.length > MAX_KEPT_TEXT || this.state.tempFunctions.size > 0) return { key: null, kept: undefined };
    const { services, settings, tx } = this.state;
    const offset = typeof source === 'string' ? -1 : source.offset;
    const key = `${services.catalogSnapshot.generation}/${services.ledgers.version}/${settings.version}/${tx.status}/${offset}/${paramTypes.join(',')}\u0000${text}`;
    const kept = this.byKey.get(key);
    if (kept?.cache == null) return { key, kept: undefined };
    this.byKey.delete(key);
    this.byKey.set(key, kept);
    kept.cache.holders++;
    return { key, kept };
  }

  /** Keeps a plan just made (held by the statement it was made for), if it can be bound again as it is. */
  keep(key: string | null, statement: Statement): void {
    if (key === null || !reusable(statement) || this.byKey.has(key) || statement.cache !== null) return;
    statement.cache = { key, holders: 1, evicted: false };
    this.byKey.set(key, statement);
    while (this.byKey.size > PLANS_KEPT) {
      const oldest = this.byKey.entries().next().value;
      if (oldest === undefined) break;
      this.byKey.delete(oldest[0]);
      this.evict(oldest[1]);
    }
  }

  /** A statement let go of the plan: whether it closes now (nobody holds it, and the cache no longer keeps it). */
  released(statement: Statement): boolean {
    const cache = statement.cache;
    if (cache === null) return true;
    if (cache.holders > 0) cache.holders--;
    return cache.holders === 0 && cache.evicted;
  }

  /** Lets go of every plan (the connection ends). */
  clear(): void {
    for (const statement of this.byKey.values()) this.evict(statement);
    this.byKey.clear();
  }

  private evict(statement: Statement): void {
    const cache = statement.cache;
    if (cache === null) return;
    cache.evicted = true;
    if (cache.holders === 0) this.discard(statement);
  }
}

/** Plans that can be bound again as they are: appends, and the engine's queries and row changes. */
function reusable(statement: Statement): boolean {
  const { plan } = statement;
  if (plan.kind === 'ledger-insert') return true;
  return plan.kind === 'engine' && plan.declares.length === 0 && REUSABLE_KINDS.has(plan.statement.kind);
}

const REUSABLE_KINDS: ReadonlySet<string> = new Set(['SELECT', 'INSERT', 'UPDATE', 'DELETE']);

/**
 * The transaction's say, at execution: the access mode may have changed
 * since the statement was prepared, so a read-only transaction refuses
 * every plan that writes here, whatever path it would take.
 */
export function admit(statement: Statement, tx: { readOnly(): boolean; checkNotFailed(): void; queried(): void }): void {
  const { plan } = statement;
  if (plan.kind === 'command' || plan.kind === 'empty') return;
  const writes = tx.readOnly() ? writeOperation(plan) : null;
  if (writes !== null) {
    tx.checkNotFailed();
    throw new PgError(SqlState.ReadOnlySqlTransaction, `cannot execute ${writes} in a read-only transaction`);
  }
  tx.queried();
}

/** What deciding whether a statement waits for appends reads of the connection. */
export interface AppendsState {
  readonly services: { readonly catalogSnapshot: { readonly generation: number; namesAt(generation: number): SchemaNames | null; refreshSoon(): void } };
  readonly catalog: { readonly seesSharedSchema: boolean };
  readonly tx: { readonly status: string };
}

/**
 * Whether a SELECT reads no ledger row (sql/relations-read.ts), found out
 * once per generation of the catalog. Only for a connection that sees the
 * shared schema alone (a temporary view could read a ledger under a plain
 * table's name), and once the snapshot holds the names of the present
 * generation: until then, the statement is taken to read the ledgers.
 */
export class LedgerReadCheck {
  private generation = -1;
  private none = false;

  constructor(private readonly client: ParsedStatement) {}

  readsNoLedger(state: AppendsState): boolean {
    if (!state.catalog.seesSharedSchema) return false;
    const { catalogSnapshot } = state.services;
    const generation = catalogSnapshot.generation;
    if (generation === this.generation) return this.none;
    const names = catalogSnapshot.namesAt(generation);
    if (names === null) {
      // The snapshot is refreshed after DDL or for a catalog read; a server that had neither since it started asks for one.
      catalogSnapshot.refreshSoon();
      return false;
    }
    const kinds = namesByCase(names);
    this.none = readsNoLedger(this.client.tree, this.client.tokens, {
      isPlainTable: (name, schema) => {
        const n = name.toLowerCase();
        if (n.startsWith('_cot')) return false;
        if (schema !== undefined) return kinds.tables.has(`${schema.toLowerCase()}.${n}`);
        return catalogRelationOid(n) === undefined && kinds.tableNames.has(n) && !kinds.viewNames.has(n);
      },
      isFunctionMade: (name) => names.functions.has(name),
    });
    this.generation = generation;
    return this.none;
  }
}

const byCase = new WeakMap<SchemaNames, { tables: Set<string>; tableNames: Set<string>; viewNames: Set<string> }>();

/** The names lower-cased (the engine matches identifiers regardless of case), once per snapshot. */
function namesByCase(names: SchemaNames): { tables: Set<string>; tableNames: Set<string>; viewNames: Set<string> } {
  let kinds = byCase.get(names);
  if (kinds === undefined) {
    const unqualified = (q: string): string => q.slice(q.indexOf('.') + 1);
    const tables = new Set([...names.tables].map((t) => t.toLowerCase()));
    const views = [...names.relations].map((r) => r.toLowerCase()).filter((r) => !tables.has(r));
    kinds = { tables, tableNames: new Set([...tables].map(unqualified)), viewNames: new Set(views.map(unqualified)) };
    byCase.set(names, kinds);
  }
  return kinds;
}

/**
 * Whether a statement waits, before it runs, until the engine holds every
 * acknowledged append (context.ts, appendsVisible), which costs an engine
 * commit while appends are pending. Not a ledger INSERT (it waits only when
 * it reads, ledger-insert.ts), nor a read that waits for itself when it
 * reaches the engine (steps-reads.ts), nor a statement in autocommit that
 * reads no ledger row: it answers the same either way.
 */
export function waitsForAppends(plan: Plan, state: AppendsState): boolean {
  if (plan.kind === 'ledger-insert') return false;
  if (plan.kind !== 'engine') return true;
  if (plan.statement.waitsForAppends === true) return false;
  return !(state.tx.status === 'I' && plan.ledgerReads?.readsNoLedger(state) === true);
}
