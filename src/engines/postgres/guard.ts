import { parseSync } from 'libpg-query';
import { PgError } from '../../errors/pg-error.js';
import { SqlState } from '../../errors/sqlstate.js';
import { serverOnlyRefusal as serverOnly, type Refusal } from '../../guard/refusal.js';
import type { ProtectedNames } from '../../guard/names.js';
import { callsIn } from '../../sql/pg-tree.js';
import { ErasureCallError, erasureCall, type ErasureCall } from '../../sql/erasure-call.js';

/** cotwire's own schema on a PostgreSQL engine (engines/postgres/ledger/names.ts). */
const PG_SCHEMA = 'cotwire';

/**
 * The guard on a PostgreSQL engine. PostgreSQL's own parser (libpg-query is
 * its grammar) splits and reads every statement, so what is decided here is
 * what the engine will run. It is the first wall, not the only one: client
 * statements run as a role PostgreSQL lets read ledgers and nothing else,
 * and triggers refuse UPDATE, DELETE and TRUNCATE on them (docs/scaling.md).
 * It answers a refusal with the same message and SQLSTATE as on DuckDB,
 * records it, and routes what cotwire does itself: appends to a ledger go
 * to the writer, CREATE TABLE of a ledger to the server, and transaction
 * control is followed so that appends wait for COMMIT.
 */

type Node = Record<string, unknown>;

export type PgPlan =
  | { readonly kind: 'engine' }
  | { readonly kind: 'append'; readonly ledger: readonly string[]; readonly insert: Node }
  | { readonly kind: 'create-ledger'; readonly ledger: readonly string[]; readonly create: Node }
  | { readonly kind: 'copy-ledger'; readonly ledger: readonly string[]; readonly copy: Node }
  | { readonly kind: 'transaction'; readonly op: TransactionOp; readonly savepoint: string | null }
  | { readonly kind: 'erasure'; readonly call: ErasureCall }
  | { readonly kind: 'refused'; readonly refusal: Refusal };

export type TransactionOp = 'begin' | 'commit' | 'rollback' | 'savepoint' | 'release' | 'rollback_to' | 'prepare' | 'other';

export interface PgStatement {
  readonly text: string;
  /** Where it starts in the string, in characters. */
  readonly offset: number;
  readonly tree: Node;
  readonly plan: PgPlan;
}

const LEDGER_HINT = 'Ledger tables accept SELECT and INSERT only: rows are appended and chained by the server, and are never changed or removed.';

function refused(reason: Refusal['reason'], operation: string, target: string, message: string, hint: string): PgPlan {
  return { kind: 'refused', refusal: { reason, operation, target, message, hint } };
}

function ledgerRefusal(operation: string, table: string): PgPlan {
  return refused('ledger', operation, table, `cannot ${operation} ledger table "${table}": ledger tables are append-only`, LEDGER_HINT);
}

function serverOnlyRefusal(table: string): PgPlan {
  return { kind: 'refused', refusal: serverOnly(table) };
}

/** The backend's statements and portals that cotwire opens for its clients are named so (cotwire_1, cotwire_s1). */
function isServerName(name: string): boolean {
  return name.startsWith('cotwire_');
}

function serverNameRefusal(operation: string, name: string): PgPlan {
  return refused(
    'unsupported',
    operation,
    name,
    `cannot ${operation} "${name}": names beginning with "cotwire_" are the server's own statements and portals`,
    'Choose another name.',
  );
}

function unwrap(node: unknown): [string, Node] | null {
  if (node === null || typeof node !== 'object') return null;
  const key = Object.keys(node)[0];
  return key === undefined ? null : [key, (node as Node)[key] as Node];
}

interface RangeVar {
  readonly relname?: string;
  readonly schemaname?: string;
  readonly catalogname?: string;
  /** "t" for a temporary table. */
  readonly relpersistence?: string;
}

const nameParts = (r: RangeVar | undefined): string[] => [r?.catalogname, r?.schemaname, r?.relname].filter((x): x is string => x !== undefined);

/**
 * PostgreSQL's large-object functions that create, change or remove one, or
 * move one between the server's files and the database. Any role may call
 * them, read-only transaction or not: a client could fill the disk or remove
 * another's objects. Reading one (lo_get, loread) stays allowed.
 */
const LARGE_OBJECT_WRITES = new Set([
  'lo_creat',
  'lo_create',
  'lo_from_bytea',
  'lo_put',
  'lo_unlink',
  'lo_import',
  'lo_export',
  'lowrite',
  'lo_truncate',
  'lo_truncate64',
]);

/** cot_redact(), cot_redact_row() or cot_retain(), which the server answers; one called in any other shape is refused (0A000). */
function erasurePlan(text: string): PgPlan | null {
  try {
    const call = erasureCall(text);
    return call === null ? null : { kind: 'erasure', call };
  } catch (err) {
    if (err instanceof ErasureCallError) throw new PgError(SqlState.FeatureNotSupported, err.message);
    throw err;
  }
}

/** The settings a client's backend starts with that say who it is (cot_agent_id() reads cotwire.agent_id): the server's to set. */
export const IDENTITY_SETTING_PREFIX = 'cotwire.';

/** A string constant's text, through casts; undefined for anything computed. */
function constantText(node: unknown): string | undefined {
  const n = node as { A_Const?: { sval?: { sval?: string } }; TypeCast?: { arg?: unknown } } | undefined;
  if (n?.TypeCast !== undefined) return constantText(n.TypeCast.arg);
  return n?.A_Const?.sval?.sval;
}

function identitySettingRefusal(name: string): PgPlan {
  return refused(
    'unsupported',
    'SET',
    name,
    `cannot set ${name}: the server sets it from the authenticated user`,
    'cot_agent_id() answers the identity of the user who connected.',
  );
}

/** The first large-object function in a statement's tree that writes, or null. */
function largeObjectWrite(stmt: Node): string | null {
  const call = (callsIn({ stmts: [stmt], raw: stmt }) ?? []).find((c) => LARGE_OBJECT_WRITES.has(c.name.toLowerCase()));
  return call === undefined ? null : call.name.toLowerCase();
}

/** Every string a tree holds: names, literals, everything a statement spells. */
function everyString(node: unknown, out: string[] = []): string[] {
  if (typeof node === 'string') out.push(node);
  else if (Array.isArray(node)) for (const x of node) everyString(x, out);
  else if (node !== null && typeof node === 'object') for (const v of Object.values(node)) everyString(v, out);
  return out;
}

const DATA_MODIFYING = new Set(['InsertStmt', 'UpdateStmt', 'DeleteStmt', 'MergeStmt']);

/** The data-modifying statements a WITH clause holds, anywhere in a tree. */
function modifyingCtes(node: unknown, out: Array<[string, Node]> = []): Array<[string, Node]> {
  if (Array.isArray(node)) {
    for (const x of node) modifyingCtes(x, out);
  } else if (node !== null && typeof node === 'object') {
    const cte = (node as { CommonTableExpr?: { ctequery?: unknown } }).CommonTableExpr;
    if (cte !== undefined) {
      const inner = unwrap(cte.ctequery);
      if (inner !== null && DATA_MODIFYING.has(inner[0])) out.push(inner);
    }
    for (const v of Object.values(node)) modifyingCtes(v, out);
  }
  return out;
}

const OPERATION: Readonly<Record<string, string>> = {
  InsertStmt: 'INSERT INTO',
  UpdateStmt: 'UPDATE',
  DeleteStmt: 'DELETE FROM',
  MergeStmt: 'MERGE INTO',
};

const CACHE_LIMIT = 10_000;

export class PostgresGuard {
  private readonly cache = new Map<string, readonly PgStatement[]>();

  constructor(
    readonly names: ProtectedNames,
    /** Function names no client may create or replace (cotwire's own). */
    private readonly reservedFunctions: ReadonlySet<string>,
  ) {}

  /**
   * Splits a query string into statements with PostgreSQL's grammar, each
   * with its plan. A string PostgreSQL cannot parse is answered with its
   * syntax error, as PostgreSQL would.
   */
  split(sql: string): readonly PgStatement[] {
    const cached = this.cache.get(sql);
    if (cached !== undefined) return cached;
    const statements = this.parse(sql);
    // Drivers send the same texts again and again: a plan, like the DuckDB guard's decision, is kept by text.
    if (this.cache.size >= CACHE_LIMIT) this.cache.clear();
    this.cache.set(sql, statements);
    return statements;
  }

  private parse(sql: string): readonly PgStatement[] {
    let tree: { stmts?: Array<{ stmt: Node; stmt_location?: number; stmt_len?: number }> };
    try {
      tree = parseSync(sql) as typeof tree;
    } catch (err) {
      const e = err as Error & { sqlDetails?: { cursorPosition?: number } };
      const at = e.sqlDetails?.cursorPosition;
      // libpg-query counts bytes; PostgreSQL's position counts characters, from 1.
      throw new PgError(
        SqlState.SyntaxError,
        e.message,
        typeof at === 'number' ? { position: Buffer.from(sql, 'utf8').subarray(0, at).toString('utf8').length + 1 } : {},
      );
    }
    const bytes = Buffer.from(sql, 'utf8');
    const out: PgStatement[] = [];
    for (const s of tree.stmts ?? []) {
      // Locations are byte offsets into the UTF-8 string.
      const start = s.stmt_location ?? 0;
      const end = s.stmt_len === undefined || s.stmt_len === 0 ? bytes.length : start + s.stmt_len;
      const raw = bytes.subarray(start, end).toString('utf8');
      const text = raw.trim();
      if (text === '') continue;
      const lead = raw.length - raw.trimStart().length;
      // Locations in the tree count from the start of the string: a statement of several gets a tree of its own text.
      const stmt = (tree.stmts?.length ?? 0) > 1 ? ((parseSync(text) as typeof tree).stmts?.[0]?.stmt ?? s.stmt) : s.stmt;
      out.push({ text, offset: bytes.subarray(0, start).toString('utf8').length + lead, tree: stmt, plan: erasurePlan(text) ?? this.plan(stmt) });
    }
    return out;
  }

  /** What one statement becomes. */
  plan(stmt: Node): PgPlan {
    const setsIdentity = (callsIn({ stmts: [stmt], raw: stmt }) ?? [])
      .filter((c) => c.name.toLowerCase() === 'set_config')
      .map((c) => constantText(c.args[0]))
      .find((name) => name?.toLowerCase().startsWith(IDENTITY_SETTING_PREFIX));
    if (setsIdentity !== undefined) return identitySettingRefusal(setsIdentity ?? '');
    const lo = largeObjectWrite(stmt);
    if (lo !== null) {
      return refused(
        'unsupported',
        `${lo}()`,
        lo,
        `cannot call ${lo}(): large objects cannot be created, changed or removed by clients`,
        'Keep data in tables; a ledger holds text and JSON.',
      );
    }
    const top = unwrap(stmt);
    if (top === null) return { kind: 'engine' };
    const [kind, node] = top;
    // A data-modifying WITH anywhere writes what it names, whatever the statement around it is.
    for (const [k, inner] of modifyingCtes(node)) {
      const target = nameParts((inner as { relation?: RangeVar }).relation);
      if (this.isProtected(target)) {
        return k === 'InsertStmt'
          ? refused(
              'ledger',
              'INSERT INTO',
              target.join('.'),
              `cannot append to ledger table "${target.join('.')}" from inside a WITH clause`,
              'Append with INSERT INTO ... as a statement of its own; a WITH clause may feed it (INSERT INTO ledger WITH ... SELECT ...).',
            )
          : ledgerRefusal(OPERATION[k] ?? k, target.join('.'));
      }
    }
    switch (kind) {
      case 'SelectStmt':
        return this.select(node);
      case 'InsertStmt': {
        const target = nameParts(node.relation as RangeVar);
        if (!this.isProtected(target)) return { kind: 'engine' };
        if (this.isServerOnly(target)) return serverOnlyRefusal(target.join('.'));
        if (node.onConflictClause !== undefined) return ledgerRefusal('INSERT ... ON CONFLICT into', target.join('.'));
        return { kind: 'append', ledger: target, insert: node };
      }
      case 'UpdateStmt':
      case 'DeleteStmt':
      case 'MergeStmt': {
        const target = nameParts(node.relation as RangeVar);
        return this.isProtected(target) ? ledgerRefusal(OPERATION[kind] as string, target.join('.')) : { kind: 'engine' };
      }
      case 'TruncateStmt': {
        const hit = ((node.relations as unknown[]) ?? []).map((r) => nameParts((r as { RangeVar: RangeVar }).RangeVar)).find((n) => this.isProtected(n));
        return hit === undefined ? { kind: 'engine' } : ledgerRefusal('TRUNCATE', hit.join('.'));
      }
      case 'CreateStmt':
      case 'CreateTableAsStmt':
      case 'ViewStmt':
        return this.planCreate(kind, node);
      case 'TransactionStmt':
        return { kind: 'transaction', op: transactionOp(String(node.kind)), savepoint: typeof node.savepoint_name === 'string' ? node.savepoint_name : null };
      case 'ExplainStmt': {
        const analyze = ((node.options as unknown[]) ?? []).some((o) => (o as { DefElem?: { defname?: string } }).DefElem?.defname === 'analyze');
        if (!analyze) return { kind: 'engine' };
        const inner = this.plan(node.query as Node);
        if (inner.kind === 'append') {
          return refused(
            'ledger',
            'EXPLAIN ANALYZE',
            inner.ledger.join('.'),
            `cannot EXPLAIN ANALYZE an append to ledger table "${inner.ledger.join('.')}": only the ledger writer appends`,
            LEDGER_HINT,
          );
        }
        return inner;
      }
      case 'PrepareStmt': {
        if (typeof node.name === 'string' && isServerName(node.name)) return serverNameRefusal('PREPARE', node.name);
        const inner = this.plan(node.query as Node);
        if (inner.kind === 'append') {
          return refused(
            'ledger',
            'PREPARE',
            inner.ledger.join('.'),
            `cannot PREPARE an append to ledger table "${inner.ledger.join('.')}": only the ledger writer appends`,
            "Use the extended protocol (a driver's prepared statement) for repeated appends.",
          );
        }
        return inner.kind === 'refused' ? inner : { kind: 'engine' };
      }
      case 'DeclareCursorStmt':
        if (typeof node.portalname === 'string' && isServerName(node.portalname)) return serverNameRefusal('DECLARE', node.portalname);
        return this.plan(node.query as Node);
      case 'CopyStmt': {
        const target = nameParts(node.relation as RangeVar);
        if (node.filename !== undefined || node.is_program === true) {
          return refused(
            'host',
            'COPY',
            String(node.filename ?? ''),
            'cannot COPY to or from a file or program: the server does not access files for clients',
            'Use COPY ... FROM STDIN or TO STDOUT.',
          );
        }
        if (this.isProtected(target) && node.is_from === true) {
          return this.isServerOnly(target) ? serverOnlyRefusal(target.join('.')) : { kind: 'copy-ledger', ledger: target, copy: node };
        }
        return node.query === undefined ? { kind: 'engine' } : this.plan(node.query as Node);
      }
      case 'VariableSetStmt': {
        const name = String(node.name ?? '').toLowerCase();
        if (name.startsWith(`${IDENTITY_SETTING_PREFIX}`)) return identitySettingRefusal(name);
        return { kind: 'engine' };
      }
      case 'VariableShowStmt':
      case 'DiscardStmt':
      case 'DeallocateStmt':
      case 'ExecuteStmt':
      case 'ClosePortalStmt':
      case 'FetchStmt':
      case 'ListenStmt':
      case 'UnlistenStmt':
      case 'NotifyStmt':
      case 'CheckPointStmt':
      case 'DoStmt':
      case 'CallStmt':
        // What these run was classified when it was prepared or is a body PostgreSQL's permissions govern.
        return { kind: 'engine' };
      case 'CreateFunctionStmt': {
        const fname =
          everyString((node.funcname as unknown[]) ?? [])
            .at(-1)
            ?.toLowerCase() ?? '';
        if (this.reservedFunctions.has(fname) || this.names.isProtected(fname)) {
          return refused(
            'shadow',
            'CREATE FUNCTION',
            fname,
            `cannot create function "${fname}": the name is cotwire's`,
            'Choose another name; cot_* functions verify and read the ledgers.',
          );
        }
        return { kind: 'engine' };
      }
      default:
        // Any other statement that names a ledger (DROP, ALTER, COMMENT, GRANT, CREATE INDEX or TRIGGER or RULE
        // or VIEW of its name, LOCK, CLUSTER, ...) is refused; without one, PostgreSQL's permissions decide.
        return this.mentionsProtected(node) ? this.uncertain(statementName(kind), node) : { kind: 'engine' };
    }
  }

  /** A new table, a table made from a query, or a view: what it is named, and what its query reads. */
  private planCreate(kind: string, node: Node): PgPlan {
    switch (kind) {
      case 'CreateStmt': {
        const target = nameParts(node.relation as RangeVar);
        if (this.isProtected(target) && (node.relation as RangeVar).relpersistence === 't') {
          return refused(
            'shadow',
            'CREATE TEMP TABLE',
            target.join('.'),
            `cannot create temporary table "${target.join('.')}": ledger names are reserved for ledger tables`,
            'Create the ledger as a permanent table.',
          );
        }
        if (this.isProtected(target)) return { kind: 'create-ledger', ledger: target, create: node };
        return this.mentionsProtected(node) ? this.uncertain('CREATE TABLE', node) : { kind: 'engine' };
      }
      case 'CreateTableAsStmt': {
        // A table or materialized view made from a query reads what the query reads; only its own name matters.
        const target = nameParts((node.into as { rel?: RangeVar } | undefined)?.rel);
        if (this.isProtected(target)) {
          return refused(
            'ledger',
            'CREATE TABLE AS',
            target.join('.'),
            `cannot create ledger table "${target.join('.')}" from a query: ledger rows are appended one INSERT at a time by the server`,
            'CREATE TABLE the ledger, then INSERT INTO it ... SELECT.',
          );
        }
        return this.readsOnly(node.query as Node);
      }
      case 'ViewStmt': {
        const target = nameParts(node.view as RangeVar);
        if (this.isProtected(target)) {
          return refused(
            'shadow',
            'CREATE VIEW',
            target.join('.'),
            `cannot create view "${target.join('.')}": ledger names are reserved for ledger tables`,
            'Choose another name for the view.',
          );
        }
        return this.readsOnly(node.query as Node);
      }
      default:
        return { kind: 'engine' };
    }
  }

  private select(node: Node): PgPlan {
    const into = nameParts((node.intoClause as { rel?: RangeVar } | undefined)?.rel);
    if (this.isProtected(into)) return ledgerRefusal('SELECT INTO', into.join('.'));
    const locks = (node.lockingClause as unknown[] | undefined) ?? [];
    if (locks.length > 0 && this.mentionsProtected(node)) {
      return refused(
        'ledger',
        'SELECT ... FOR UPDATE',
        this.protectedIn(node)[0] ?? '',
        'cannot lock rows of a ledger table: ledger rows are never changed',
        LEDGER_HINT,
      );
    }
    return { kind: 'engine' };
  }

  private uncertain(operation: string, node: Node): PgPlan {
    const target = this.protectedIn(node)[0] ?? '';
    return ledgerRefusal(operation, target);
  }

  /** The server's own records (checkpoints, refusals, erasure): only the server appends to them. */
  private isServerOnly(parts: readonly string[]): boolean {
    return parts.length > 0 && this.names.isServerOnly(parts[parts.length - 1] as string);
  }

  /**
   * A query that a new table or view is made from: it may read ledgers, and is planned as a statement of its own,
   * so that anything in it that writes or locks a ledger is refused as it would be there.
   */
  private readsOnly(query: Node): PgPlan {
    const inner = this.plan(query);
    return inner.kind === 'engine' || inner.kind === 'refused' ? inner : this.uncertain('CREATE', query);
  }

  /** A ledger's name, or anything in cotwire's own schema (the log, the chain heads, the signing lease). */
  private isProtected(parts: readonly string[]): boolean {
    if (parts.length >= 2 && parts[parts.length - 2]?.toLowerCase() === PG_SCHEMA) return true;
    return parts.length > 0 && this.names.isProtected(parts[parts.length - 1]);
  }

  private mentionsProtected(node: Node): boolean {
    return this.protectedIn(node).length > 0;
  }

  /** Every name in the tree that is a ledger's, or a dotted name ending in one. */
  private protectedIn(node: Node): string[] {
    return everyString(node).filter((s) => this.names.isProtected(s) || s.split('.').some((p) => this.names.isProtected(p.replaceAll('"', '').trim())));
  }
}

function transactionOp(kind: string): TransactionOp {
  switch (kind) {
    case 'TRANS_STMT_BEGIN':
    case 'TRANS_STMT_START':
      return 'begin';
    case 'TRANS_STMT_COMMIT':
      return 'commit';
    case 'TRANS_STMT_ROLLBACK':
      return 'rollback';
    case 'TRANS_STMT_SAVEPOINT':
      return 'savepoint';
    case 'TRANS_STMT_RELEASE':
      return 'release';
    case 'TRANS_STMT_ROLLBACK_TO':
      return 'rollback_to';
    case 'TRANS_STMT_PREPARE':
      return 'prepare';
    default:
      return 'other';
  }
}

/** "AlterTableStmt" → "ALTER TABLE", for messages. */
function statementName(kind: string): string {
  return kind
    .replace(/Stmt$/, '')
    .replace(/([a-z])([A-Z])/g, '$1 $2')
    .toUpperCase();
}
