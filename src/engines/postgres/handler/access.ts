import type { Refusal } from '../../../guard/refusal.js';
import { PgError } from '../../../errors/pg-error.js';
import { fingerprint, GuardRefusal } from '../../../guard/refusal.js';
import type { PgStatement, PostgresGuard } from '../guard.js';

export type { PgStatement };
import type { SecurityEventLog } from '../../../ledger/security-events.js';
import { identityRefusal, stampIdentity } from '../../../ledger/chain/validate.js';
import type { Observer } from '../../../observe/observer.js';
import { foreignSessionRefusal, organisationPredicate, scopeLedgerReads, tenantLedgers } from '../../../guard/tenant-scope.js';
import { type CatalogColumns, type CatalogStatistics, catalogStatistics, MASKED_RELATIONS, scopeSizeCalls } from '../../../guard/catalog-statistics.js';
import type { RelayBackend } from '../../../engine/port.js';
import { ForeignSessionError } from '../../../ledger/chain/append.js';
import { ParsedStatement } from '../../../sql/parsed.js';
import { STEPS_TABLE, type LedgerTable } from '../../../ledger/chain/schema.js';
import { pgRelation } from '../ledger/catalog.js';
import { PG_SCHEMA } from '../ledger/names.js';
import { strings } from '../../../sql/pg-tree.js';
import { tokenize, type Token } from '../../../sql/lexer.js';
import type { SessionInfo } from '../../../session/handler-port.js';

/**
 * Access on a PostgreSQL engine, in one place: the guard's plan of each
 * statement, the roles (readers read, writers also append to ledgers,
 * admins run whatever PostgreSQL lets the client role run), identity
 * stamping, and the record of every refusal in `_cot_security_events`.
 */

/** Statements a reader or a writer may run besides appends: they read, or only change the session. */
const READS = new Set([
  'SelectStmt',
  'ExplainStmt',
  'VariableShowStmt',
  'VariableSetStmt',
  'TransactionStmt',
  'DeclareCursorStmt',
  'FetchStmt',
  'ClosePortalStmt',
  'DeallocateStmt',
  'DiscardStmt',
  'ListenStmt',
  'UnlistenStmt',
  'PrepareStmt',
  'ExecuteStmt',
  'CopyStmt',
]);

/** Settings that would lift a reader's read-only transactions (SET TRANSACTION and SET SESSION CHARACTERISTICS included). */
const READ_ONLY_SETTINGS = new Set([
  'default_transaction_read_only',
  'transaction_read_only',
  'session_authorization',
  'role',
  'transaction',
  'session characteristics',
]);

/**
 * Whether a statement could make a reader's transactions writable: setting
 * or resetting the read-only settings, or a transaction begun READ WRITE.
 * (RESET ALL and DISCARD ALL restore the defaults; the connection sets
 * read-only again after them: connection.ts.)
 */
function liftsReadOnly(kind: string, node: Record<string, unknown>): boolean {
  if (kind === 'VariableSetStmt') return READ_ONLY_SETTINGS.has(String(node.name ?? '').toLowerCase());
  if (kind === 'TransactionStmt') return JSON.stringify(node.options ?? []).includes('"transaction_read_only"');
  return false;
}

/**
 * What a user with an org_id may not reach beside the ledgers: the server's
 * own tables (the audit's findings name every organisation's sessions), and
 * a setting whose name is computed (the organisation the second wall reads
 * is a setting the guard keeps clients from changing by name).
 */
function serverStateRead(tree: Record<string, unknown>): Refusal | null {
  let found: Refusal | null = null;
  const visit = (v: unknown): void => {
    if (found !== null) return;
    if (Array.isArray(v)) v.forEach(visit);
    else if (v !== null && typeof v === 'object') {
      const node = v as Record<string, unknown>;
      if (typeof node.relname === 'string' && node.schemaname === PG_SCHEMA) {
        found = {
          reason: 'tenant',
          operation: 'SELECT',
          target: `${PG_SCHEMA}.${node.relname}`,
          message: `cannot read ${PG_SCHEMA}.${node.relname}: a user with an org_id reads the server's state through the cot_* functions only`,
          hint: 'The cot_* functions answer for your organisation.',
        };
        return;
      }
      const call = node.FuncCall as { funcname?: unknown; args?: unknown[] } | undefined;
      const name = call === undefined ? '' : (strings(call.funcname).at(-1) ?? '').toLowerCase();
      if (name === 'set_config' && (call?.args?.[0] as { A_Const?: unknown } | undefined)?.A_Const === undefined) {
        found = {
          reason: 'tenant',
          operation: 'set_config()',
          target: 'set_config',
          message: 'cannot call set_config() with a computed setting name: a user with an org_id names the setting it changes',
          hint: "Write the setting's name as a string constant: set_config('search_path', ...).",
        };
        return;
      }
      for (const x of Object.values(node)) visit(x);
    }
  };
  visit(tree);
  return found;
}

/**
 * EXPLAIN for a user with an org_id, with COSTS OFF: PostgreSQL estimates
 * rows from the whole table's statistics, every organisation's. The plan
 * itself stays; the client's own options are kept (a COSTS it gave is
 * replaced).
 */
function withoutCosts(text: string, tree: Record<string, unknown>): string {
  if (tree.ExplainStmt === undefined) return text;
  const tokens = tokenize(text);
  const at = tokens.findIndex((t) => t.kind === 'word' && t.text.toLowerCase() === 'explain');
  const next = tokens[at + 1];
  if (at < 0 || next === undefined) return text;
  if (next.text === '(') {
    const close = tokens.findIndex((t, i) => i > at && t.text === ')');
    const inside = text.slice(next.end, tokens[close]?.start ?? next.end);
    const options = inside
      .split(',')
      .map((o) => o.trim())
      .filter((o) => o !== '' && !/^costs\b/i.test(o));
    return `${text.slice(0, next.start)}(${['COSTS OFF', ...options].join(', ')})${text.slice(tokens[close]?.end ?? next.end)}`;
  }
  // EXPLAIN [ANALYZE] [VERBOSE] statement: its words become options.
  let end = at + 1;
  const words: string[] = [];
  while (['analyze', 'analyse', 'verbose'].includes(tokens[end]?.text.toLowerCase() ?? '')) words.push((tokens[end++] as Token).text.toUpperCase());
  const from = tokens[end];
  if (from === undefined) return text;
  return `${text.slice(0, (tokens[at] as Token).end)} (${['COSTS OFF', ...words].join(', ')}) ${text.slice(from.start)}`;
}

export type { CatalogColumns };

export interface ProxyAccessServices {
  readonly guard: PostgresGuard;
  readonly securityLog: SecurityEventLog;
  readonly observer: Observer;
}

/** What a user with an org_id reads ledgers through: the ledgers as last read, which may lag a ledger just created (it then reads as empty). */
export interface ProxyTenant {
  readonly org: string;
  ledgers(): readonly LedgerTable[];
  /** The columns of the catalog relations whose counts of the ledgers' rows are hidden, in this PostgreSQL. */
  readonly catalogColumns: CatalogColumns;
}

export class ProxyAccess {
  private statistics: CatalogStatistics | null = null;

  constructor(
    private readonly services: ProxyAccessServices,
    private readonly info: SessionInfo,
    private readonly applicationName: () => string,
    private readonly tenant: ProxyTenant | null = null,
  ) {}

  /** The statements of a query string, each planned (PostgreSQL's syntax errors pass through). */
  split(sql: string): readonly PgStatement[] {
    const statements = this.services.guard.split(sql);
    const tenant = this.tenant;
    if (tenant === null) return statements;
    // Each ledger a scoped user's statement reads is read through its organisation's filter (guard/tenant-scope.ts);
    // the ledgers' row-level security is the second wall.
    const scope = organisationPredicate(tenant.org, tenantLedgers(tenant.ledgers(), pgRelation(STEPS_TABLE)));
    return statements.map((s) => {
      const beside = serverStateRead(s.tree);
      if (beside !== null) return { ...s, plan: { kind: 'refused', refusal: beside } };
      const scoped = scopeLedgerReads(new ParsedStatement(s.text), this.services.guard.names, scope);
      if ('refusal' in scoped) return { ...s, plan: { kind: 'refused', refusal: scoped.refusal } };
      // The catalog's counts of a ledger's rows are every organisation's (guard/catalog-statistics.ts).
      this.statistics ??= catalogStatistics(this.services.guard.names.prefixes, tenant.catalogColumns);
      const stats = this.statistics;
      const counted = scopeLedgerReads(new ParsedStatement(scoped.text), stats.names, stats.predicate, stats.select);
      if ('refusal' in counted) return { ...s, plan: { kind: 'refused', refusal: counted.refusal } };
      const sized = scopeSizeCalls(new ParsedStatement(counted.text), this.services.guard.names.prefixes);
      if ('refusal' in sized) return { ...s, plan: { kind: 'refused', refusal: sized.refusal } };
      const text = withoutCosts(sized.text, s.tree);
      if (text === s.text) return s;
      const [again] = this.services.guard.split(text);
      return again === undefined ? s : { ...again, offset: s.offset };
    });
  }

  /** Throws (and records) the refusal of a statement: the guard's, or the role's. */
  admit(statement: PgStatement): void {
    const { plan } = statement;
    if (plan.kind === 'refused') this.refuse(plan.refusal, statement.text);
    const kind = Object.keys(statement.tree)[0] ?? '';
    if (this.info.role === 'admin') return;
    if (plan.kind === 'append' || plan.kind === 'copy-ledger') {
      if (this.info.role === 'writer') return;
      const ledger = plan.ledger.join('.');
      this.refuse(roleRefusal(this.info, plan.kind === 'append' ? `INSERT INTO ${ledger}` : `COPY ${ledger} FROM STDIN`, ledger), statement.text);
    }
    const node = (statement.tree as Record<string, Record<string, unknown>>)[kind] ?? {};
    const reads =
      READS.has(kind) &&
      !(kind === 'SelectStmt' && node.intoClause !== undefined) &&
      !(kind === 'CopyStmt' && node.is_from === true) &&
      !(kind === 'ExplainStmt' && JSON.stringify(node.options ?? []).includes('"analyze"')) &&
      !(this.info.role === 'reader' && liftsReadOnly(kind, node)) &&
      !(kind === 'PrepareStmt' && Object.keys((node.query as object | undefined) ?? {})[0] !== 'SelectStmt');
    if (!reads) this.refuse(roleRefusal(this.info, operationOf(kind), ''), statement.text);
  }

  /** agent_id and org_id come from the authenticated identity: filled in where absent, refused where different. */
  stampIdentity(clientColumns: readonly string[], rows: (string | null)[][], statement: string): void {
    const other = stampIdentity(this.info.identity, clientColumns, rows);
    if (other !== null) this.refuse(identityRefusal(this.info.user, other), statement);
  }

  /** An append the writer refused as another's session: recorded as a tenant refusal, and thrown; any other error is thrown as it is. */
  appendRefused(err: unknown, statement: string): never {
    if (err instanceof ForeignSessionError) this.refuse(foreignSessionRefusal(err), statement);
    throw err;
  }

  /** Redaction and retention on request: admins only; a refusal is recorded as every refusal is. */
  erasure(operation: string, target: string, statement: string): void {
    if (this.info.role !== 'admin') this.refuse(roleRefusal(this.info, `${operation} ${target}`.trim(), ''), statement);
  }

  /** An erasure carried out: recorded too, beside the refusals, so that every attempt leaves a trace. */
  erasureDone(operation: string, target: string, statement: string, outcome: string): void {
    this.recordAttempt(operation, target, '00000', outcome, statement);
  }

  /** An erasure an admin asked for that failed (no such row, a column that cannot be redacted). */
  erasureFailed(operation: string, target: string, statement: string, err: unknown): void {
    this.recordAttempt(operation, target, err instanceof PgError ? err.code : 'XX000', 'erasure failed', statement);
  }

  private recordAttempt(operation: string, target: string, sqlstate: string, reason: string, statement: string, print = fingerprint(statement)): void {
    this.services.securityLog.record({
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

  get user(): string {
    return this.info.user;
  }

  get role(): string {
    return this.info.role;
  }

  /** Whether the session may begin with read-only transactions: a reader's, or a client's startup settings that say so. */
  get startsReadOnly(): boolean {
    if (this.info.role === 'reader') return true;
    return [...this.info.startupParameters].some(([k, v]) => /read_only/i.test(k) || (k.toLowerCase() === 'options' && /read_only|characteristics/i.test(v)));
  }

  /** A reader's transactions are read-only in PostgreSQL too. */
  get readOnly(): boolean {
    return this.info.role === 'reader';
  }

  refuse(refusal: Refusal, statement: string): never {
    const err = new GuardRefusal(refusal, fingerprint(statement));
    this.services.observer.refusal(refusal.operation, refusal.reason);
    this.recordAttempt(refusal.operation, refusal.target, err.code, refusal.reason, statement, err.fingerprint);
    throw err;
  }
}

function roleRefusal(info: SessionInfo, operation: string, target: string): Refusal {
  return {
    reason: 'role',
    operation,
    target,
    message: `permission denied: role "${info.role}" of user "${info.user}" may not ${operation}`,
    hint:
      info.role === 'reader'
        ? 'A reader may only read: SELECT, SHOW and the like.'
        : 'A writer may read, and append to ledger tables with INSERT or COPY FROM STDIN.',
  };
}

/** "CreateTableAsStmt" → "CREATE TABLE AS", for messages. */
function operationOf(kind: string): string {
  return kind
    .replace(/Stmt$/, '')
    .replace(/([a-z])([A-Z])/g, '$1 $2')
    .toUpperCase();
}

/** The columns of the catalog relations that count ledgers' rows, in order, as this PostgreSQL has them. */
export async function catalogColumns(backend: RelayBackend): Promise<CatalogColumns> {
  const columns = new Map<string, Array<{ name: string; type: string }>>();
  const text = (v: string | Uint8Array | null | undefined): string => (v instanceof Uint8Array ? Buffer.from(v).toString('utf8') : (v ?? ''));
  const relations = MASKED_RELATIONS.map((r) => `'${r}'`).join(', ');
  await backend.openPortal(
    '',
    `SELECT c.relname, a.attname, t.typname FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class c ON c.oid = a.attrelid JOIN pg_catalog.pg_type t ON t.oid = a.atttypid
     WHERE c.relnamespace = 'pg_catalog'::regnamespace AND c.relname IN (${relations}) AND a.attnum > 0 AND NOT a.attisdropped ORDER BY c.relname, a.attnum`,
    [],
    [],
    [],
  );
  await backend.fetch('', 0, (cells) => {
    const relation = text(cells[0]);
    const list = columns.get(relation) ?? [];
    list.push({ name: text(cells[1]), type: text(cells[2]) });
    columns.set(relation, list);
  });
  await backend.sync();
  return columns;
}
