import type { ColumnAlter, ConstraintAddition } from '../catalog/alter-table.js';
import type { DeclaredChange } from '../catalog/declared.js';
import type { AdvisoryWait } from '../../../sql/advisory.js';
import type { SerialTable } from '../catalog/serial.js';
import type { EngineCursor, EngineStatement, StatementKind, WireParam } from '../../../engine/port.js';
import { PgError } from '../../../errors/pg-error.js';
import type { FieldDescription } from '../../../protocol/messages.js';
import type { Portal, PreparedStatement } from '../../../session/handler-port.js';
import type { CopyFromStdin, CopyToStdout } from '../../../sql/copy.js';
import type { StatementText, Token } from '../../../sql/lexer.js';
import type { ParsedStatement } from '../../../sql/parsed.js';
import { operationName, rolesFor } from './access.js';
import type { SessionCommand } from './commands.js';
import type { LedgerInsertPlan } from './ledger-insert.js';
import type { KeyWork } from './key-registry.js';
import type { ErasureCall } from '../../../sql/erasure-call.js';

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
