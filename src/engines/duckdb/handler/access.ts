import type { EngineConnection, StatementKind } from '../../../engine/port.js';
import { PgError } from '../../../errors/pg-error.js';
import { explainExecutes } from '../guard/classify.js';
import type { Guard, GuardCatalog } from '../guard/guard.js';
import type { ProtectedNames } from '../../../guard/names.js';
import { fingerprint, GuardRefusal, type Refusal } from '../../../guard/refusal.js';
import type { SecurityEventLog } from '../../../ledger/security-events.js';
import type { Observer } from '../../../observe/observer.js';
import type { SessionInfo } from '../../../session/handler-port.js';
import type { Token } from '../../../sql/lexer.js';
import type { ParsedStatement } from '../../../sql/parsed.js';
import { identityRefusal, stampIdentity } from '../../../ledger/chain/validate.js';
import { commandTag } from './command-tag.js';
import { foreignSessionRefusal, type LedgerPredicate, organisationPredicate, scopeLedgerReads, tenantLedgers } from '../../../guard/tenant-scope.js';
import { LedgerDependents, TABLE_STATISTICS } from '../guard/dependents.js';
import { ForeignSessionError } from '../../../ledger/chain/append.js';
import { STEPS_TABLE, type LedgerTable } from '../../../ledger/chain/schema.js';
import { wordOf } from '../../../sql/spans.js';

/**
 * The one place in the handler where access is decided and refusals are
 * recorded: the guard's verdicts, the roles, the ledger writer's monopoly
 * on appends, engine settings, identity stamping. Every refusal of every
 * path (statements, COPY, SET, appends) is counted, logged and appended to
 * `_cot_security_events` here, the same way, and thrown.
 */

const EVERYONE: readonly string[] = ['reader', 'writer', 'admin'];
export const WRITERS: readonly string[] = ['writer', 'admin'];
export const ADMINS: readonly string[] = ['admin'];

/** Which roles may run a statement of this kind: reads for everyone, everything else for admins. */
export function rolesFor(kind: StatementKind, tokens: readonly Token[]): readonly string[] {
  const first = tokens[0]?.text.toUpperCase();
  switch (kind) {
    case 'SELECT':
    case 'RELATION':
    case 'PRAGMA':
    case 'CALL':
      // PRAGMA and CALL reach this point only when the guard found them read-only.
      return first === 'CHECKPOINT' || first === 'FORCE' ? ADMINS : EVERYONE;
    case 'EXPLAIN':
      return explainExecutes(tokens) ? ADMINS : EVERYONE;
    case 'VARIABLE_SET':
      return first === 'SET' || first === 'RESET' ? EVERYONE : ADMINS;
    case 'DROP':
      return first === 'DEALLOCATE' ? EVERYONE : ADMINS;
    default:
      return ADMINS;
  }
}

/** The operation, as a refusal names it: "UPDATE", "CREATE TABLE" ... */
export function operationName(kind: StatementKind, tokens: readonly Token[]): string {
  return commandTag(kind, tokens, 0).replace(/( \d+)+$/, '');
}

/** The guard's catalog questions, asked of the client's own engine connection (its view of the catalog). */
function engineCatalog(engine: EngineConnection): GuardCatalog {
  const column = (rows: unknown[][]): string[] => rows.map((r) => String(r[0]));
  return {
    tablesInSchema: async (schema) =>
      column(await engine.query('SELECT table_name FROM system.main.duckdb_tables() WHERE lower(schema_name) = lower($1)', [schema])),
    tableOfIndex: async (index) =>
      column(await engine.query('SELECT table_name FROM system.main.duckdb_indexes() WHERE lower(index_name) = lower($1)', [index]))[0] ?? null,
    schemasWithTable: async (name) =>
      column(await engine.query('SELECT schema_name FROM system.main.duckdb_tables() WHERE lower(table_name) = lower($1)', [name])),
    currentSchema: async () => column(await engine.query('SELECT system.main.current_schema()'))[0] ?? 'main',
  };
}

/** Which views and macros each server's users with an org_id may not read (guard/dependents.ts), kept by the server's guard. */
const LEDGER_DEPENDENTS = new WeakMap<Guard, LedgerDependents>();

/** The refusal of a name that reaches a ledger where the organisation's filter does not. */
function dependentRefusal(name: string, why: string): Refusal {
  return {
    reason: 'tenant',
    operation: 'SELECT',
    target: name,
    message: `cannot read "${name}": a user with an org_id reads ledgers only by name, and "${name}" ${why}`,
    hint: 'Read the ledger tables themselves, or the cot_* functions: the server restricts both to your organisation.',
  };
}

/** What every connection's access control shares. */
export interface AccessServices {
  readonly guard: Guard;
  readonly securityLog: SecurityEventLog;
  readonly observer: Observer;
}

export class AccessControl {
  private readonly catalog: GuardCatalog;

  private readonly guard: Guard;
  private readonly securityLog: SecurityEventLog;
  private readonly observer: Observer;

  constructor(
    services: AccessServices,
    private readonly info: SessionInfo,
    engine: EngineConnection,
    private readonly applicationName: () => string,
  ) {
    this.guard = services.guard;
    this.securityLog = services.securityLog;
    this.observer = services.observer;
    this.catalog = engineCatalog(engine);
  }

  /** The ledgers' names: what the guard protects. */
  get names(): ProtectedNames {
    return this.guard.names;
  }

  /** Whether a name is a ledger's (the CREATE TABLE that makes one gets the chain columns). */
  isLedgerName(name: string | undefined): boolean {
    return this.guard.names.isProtected(name);
  }

  /** Whether only the server writes a table of this name (access.ts's guard knows). */
  isServerOnly(name: string | undefined): boolean {
    return this.guard.names.isServerOnly(name);
  }

  /** Names only the server may use (its catalog database), refused before anything else. */
  reservedNames(text: string, tokens: readonly Token[]): void {
    this.recorded(text, () => this.guard.refuseReservedNames(text, tokens));
  }

  /** What needs no engine to refuse (files, network, extensions), before DuckDB binds anything. */
  beforePrepare(text: string, tokens: readonly Token[]): void {
    this.recorded(text, () => this.guard.precheck(text, tokens));
  }

  /**
   * A statement DuckDB could not prepare: the refusal the guard would give
   * it, recorded, or null (the engine's error stands).
   */
  unprepared(err: unknown, statement: ParsedStatement): GuardRefusal | null {
    const refusal = err instanceof GuardRefusal ? err : this.guard.refusalWithoutEngine(statement, err instanceof PgError ? err.code : undefined);
    if (refusal !== null) this.record(refusal, statement.text);
    return refusal;
  }

  /**
   * A prepared statement bound for the engine: the guard's verdict on what
   * DuckDB says it is, never an append to a ledger (only the writer
   * appends), and the role's.
   */
  async engineStatement(statement: ParsedStatement<StatementKind>): Promise<void> {
    const { text, tokens, kind } = statement;
    if (kind === undefined) throw new Error('the guard decides on the kind the engine gave the statement, and it has none yet');
    await this.recordedAsync(text, async () => {
      const allowed = await this.guard.check({ text, tokens, kind, parsed: statement }, this.catalog);
      if (allowed.appendsTo != null) throw this.guard.engineAppendRefusal(allowed.appendsTo, text, tokens);
    });
    this.authorize(operationName(kind, tokens), rolesFor(kind, tokens), text);
  }

  /** An INSERT the ledger writer will append. */
  async ledgerAppend(statement: ParsedStatement, ledger: string): Promise<void> {
    const { text, tokens } = statement;
    await this.recordedAsync(text, async () => {
      this.guard.precheck(text, tokens);
      await this.guard.check({ text, tokens, kind: 'INSERT', parsed: statement }, this.catalog);
    });
    this.authorize(`INSERT INTO ${ledger}`, WRITERS, text);
  }

  /** COPY ... FROM STDIN into a table: the role's, and never into a ledger only the server appends to. */
  copyInto(targetText: string, ledger: string | null): void {
    const statement = `COPY ${targetText} FROM STDIN`;
    this.authorize(`COPY into ${targetText}`, ledger !== null ? WRITERS : ADMINS, statement);
    if (ledger !== null && this.guard.names.isServerOnly(ledger)) {
      const refusal = new GuardRefusal(
        {
          reason: 'ledger',
          operation: 'COPY into',
          target: ledger,
          message: `cannot COPY into ledger table "${ledger}": only the server appends to it`,
          hint: 'Clients may read it.',
        },
        fingerprint(statement),
      );
      this.record(refusal, statement);
      throw refusal;
    }
  }

  /** One INSERT of COPY rows into an ordinary table, as the guard sees it. */
  async copyRows(sql: string, tokens: readonly Token[], targetText: string): Promise<void> {
    await this.recordedAsync(`COPY ${targetText} FROM STDIN`, async () => {
      const allowed = await this.guard.check({ text: sql, tokens, kind: 'INSERT' }, this.catalog);
      if (allowed.appendsTo != null) throw this.guard.engineAppendRefusal(allowed.appendsTo, sql, tokens);
    });
  }

  /** SET of a name that is not a PostgreSQL parameter: the engine's settings are everyone's. */
  engineSetting(name: string, value: string | null): void {
    const refusal = this.guard.refuseEngineSetting(name, `SET ${name}`);
    if (refusal === null) return;
    this.record(refusal, `SET ${name} = ${value ?? 'DEFAULT'}`);
    throw refusal;
  }

  /**
   * A writer's identity is stamped on its appends: an omitted agent_id or
   * org_id takes the authenticated value, and a different one is refused,
   * so that no agent writes steps in another's name. Columns match
   * without regard to case, as DuckDB matches them.
   */
  stampIdentity(clientColumns: readonly string[], rows: (string | null)[][], statement: string): void {
    const other = stampIdentity(this.info.identity, clientColumns, rows);
    if (other === null) return;
    const refusal = new GuardRefusal(identityRefusal(this.info.user, other), fingerprint(statement));
    this.record(refusal, statement);
    throw refusal;
  }

  /** What a user with an org_id may not read (guard/tenant-scope.ts): recorded as every refusal is, and thrown. */
  tenantRefusal(refusal: Refusal, statement: string): never {
    const err = new GuardRefusal(refusal, fingerprint(statement));
    this.record(err, statement);
    throw err;
  }

  /** How this user reads each ledger: its organisation's filter (guard/tenant-scope.ts), or null for a user without an org_id, who reads them whole. */
  tenantScope(ledgers: readonly LedgerTable[]): LedgerPredicate | null {
    const org = this.info.identity.org_id;
    return org === undefined ? null : organisationPredicate(org, tenantLedgers(ledgers, `main.${STEPS_TABLE}`));
  }

  /**
   * The statement as a user with an org_id runs it: each ledger it names
   * read through `scope`. Refused (and recorded) when a reference cannot be
   * placed, or when it reaches a ledger where no filter does: a view or a
   * macro over one, which the engine expands after the server has had its
   * say, or a table's storage statistics. `generation` is the catalog's,
   * whose views and macros `query` reads when it moves on.
   */
  async scopedReads(statement: ParsedStatement, scope: LedgerPredicate, generation: number, query: (sql: string) => Promise<unknown[][]>): Promise<string> {
    const result = scopeLedgerReads(statement, this.guard.names, scope);
    if ('refusal' in result) this.tenantRefusal(result.refusal, statement.text);
    const words = statement.tokens.filter((t) => t.kind === 'word' || t.kind === 'quoted').map((t) => wordOf(t) ?? '');
    const statistics = words.find((w) => TABLE_STATISTICS.has(w));
    if (statistics !== undefined) this.tenantRefusal(dependentRefusal(statistics, "shows the statistics of every organisation's rows"), statement.text);
    let dependents = LEDGER_DEPENDENTS.get(this.guard);
    if (dependents === undefined) {
      dependents = new LedgerDependents(this.guard.names);
      LEDGER_DEPENDENTS.set(this.guard, dependents);
    }
    const names = await dependents.at(generation, query);
    const found = words.find((w) => names.has(w));
    if (found !== undefined)
      this.tenantRefusal(dependentRefusal(found, "reads a ledger table, which the engine expands where no organisation's filter reaches"), statement.text);
    return result.text;
  }

  /** An append the writer refused as another's session: recorded as a tenant refusal, and thrown; any other error is thrown as it is. */
  appendRefused(err: unknown, statement: string): never {
    if (err instanceof ForeignSessionError) this.tenantRefusal(foreignSessionRefusal(err), statement);
    throw err;
  }

  /** Redaction and retention on request: admins only; a refusal is recorded as every refusal is. */
  erasure(operation: string, target: string, statement: string): void {
    this.authorize(`${operation} ${target}`.trim(), ADMINS, statement);
  }

  /** A change to the catalog the handler makes itself (CREATE EXTENSION): admins only, as every DDL. */
  catalogCommand(operation: string, statement: string): void {
    this.authorize(operation, ADMINS, statement);
  }

  /** An erasure carried out: recorded too, beside the refusals, so that every attempt leaves a trace. */
  erasureDone(operation: string, target: string, statement: string, outcome: string): void {
    this.recordAttempt(operation, target, '00000', outcome, statement);
  }

  /** An erasure an admin asked for that failed (no such row, a column that cannot be redacted). */
  erasureFailed(operation: string, target: string, statement: string, err: unknown): void {
    const code = err instanceof PgError ? err.code : 'XX000';
    this.recordAttempt(operation, target, code, 'erasure failed', statement);
  }

  private recordAttempt(operation: string, target: string, sqlstate: string, reason: string, statement: string, print = fingerprint(statement)): void {
    this.securityLog.record({
      user: this.info.user,
      org: this.info.identity.org_id ?? null,
      remoteAddress: this.info.remoteAddress,
      applicationName: this.applicationName(),
      operation,
      target,
      sqlstate,
      reason,
      fingerprint: print,
      statement,
    });
  }

  /**
   * Least privilege by role: readers read, writers also append to ledgers,
   * admins run everything the guard allows.
   */
  private authorize(operation: string, allowed: readonly string[], statement: string): void {
    const { role, user } = this.info;
    if (allowed.includes(role)) return;
    const err = new GuardRefusal(
      {
        reason: 'role',
        operation,
        target: '',
        message: `permission denied: role "${role}" of user "${user}" may not ${operation}`,
        hint:
          role === 'reader'
            ? 'A reader may only read: SELECT, SHOW and the like.'
            : 'A writer may read, and append to ledger tables with INSERT or COPY FROM STDIN.',
      },
      fingerprint(statement),
    );
    this.record(err, statement);
    throw err;
  }

  private recorded(statement: string, decide: () => void): void {
    try {
      decide();
    } catch (err) {
      if (err instanceof GuardRefusal) this.record(err, statement);
      throw err;
    }
  }

  private async recordedAsync(statement: string, decide: () => Promise<void>): Promise<void> {
    try {
      await decide();
    } catch (err) {
      if (err instanceof GuardRefusal) this.record(err, statement);
      throw err;
    }
  }

  private record(err: GuardRefusal, statement: string): void {
    this.observer.refusal(err.refusal.operation, err.refusal.reason);
    this.recordAttempt(err.refusal.operation, err.refusal.target, err.code, err.refusal.reason, statement, err.fingerprint);
  }
}
