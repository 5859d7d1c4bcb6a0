import type { HashVersion } from '../../../ledger/chain/schema.js';
import type { CatalogSnapshot } from '../catalog/snapshot.js';
import type { CatalogMode } from './catalog-mode.js';
import type { LostRanges } from '../../../ledger/chain/chain-check.js';
import type { CompatRewriter } from '../catalog/compat.js';
import type { DeclaredStore } from '../catalog/declared.js';
import type { EngineConnection, EngineStatement, WireParam } from '../../../engine/port.js';
import type { AuditReport } from '../log/auditor.js';
import type { ErasureService } from '../../../engine/erasure-call.js';
import type { LedgerCatalog } from '../../../ledger/chain/catalog.js';
import type { LedgerWriter } from '../ledger/writer.js';
import type { SessionInfo } from '../../../session/handler-port.js';
import type { AccessControl, AccessServices } from './access.js';
import type { QueryVectors } from '../search/search-sql.js';
import type { AdvisoryLocks } from './advisory-locks.js';
import type { ForeignKeyRegistry } from './key-registry.js';
import type { Backends } from './backends.js';
import type { SessionCache } from './session-cache.js';
import type { StepStore } from '../steps-store/store.js';
import type { EngineCalls, EngineSlots } from './engine-calls.js';
import type { ConnectionPortal, Statement } from './plan.js';
import type { SessionSettings } from './settings.js';
import type { TransactionState } from './transaction.js';

/** What every connection shares: the guard, the ledgers and their writer. */
export interface ConnectionServices extends AccessServices {
  readonly ledgers: LedgerCatalog;
  readonly writer: LedgerWriter;
  /** PostgreSQL-only syntax onto the engine's (the catalog layer's rewrites). */
  readonly rewriter: CompatRewriter;
  readonly maxContentBytes: number;
  /** What a ledger created by a client's CREATE TABLE is chained with. */
  readonly newLedgerHashVersion: HashVersion;
  /** statement_timeout for new connections, in milliseconds. */
  readonly statementTimeoutMs: number;
  /** idle_in_transaction_session_timeout for new connections, in milliseconds. */
  readonly idleInTransactionTimeoutMs: number;
  /** The engine threads clients' calls may hold at once. */
  readonly engineSlots: EngineSlots;
  /** The most bytes of rows one ledger statement may hold in the server while they are checked and chained. */
  readonly maxAppendBytes: number;
  /** The sessions' advisory locks (pg_advisory_lock and its kin). */
  readonly advisoryLocks: AdvisoryLocks;
  /** The sessions as SQL functions reach them (statement_timestamp, set_config in a query, pg_cancel_backend ...). */
  readonly backends: Backends;
  /** What DDL declared that DuckDB does not keep (varchar(n), jsonb, constraint names), for the catalog. */
  readonly declared: DeclaredStore;
  /** The latest background audit (null before the first): its findings count against a chain's verification. */
  readonly auditReport: () => AuditReport | null;
  /** The ledger_seq ranges recorded lost: a chain's steps they account for are a gap, not a break. */
  readonly lostRanges: LostRanges;
  /** Recently read sessions of _cot_steps (ledger.sessionCacheMB), or null when it is off. */
  readonly sessionCache: SessionCache | null;
  /** `_cot_steps` as a row store (ledger.stepStore), or null when off or in memory. */
  readonly stepStore: StepStore | null;
  /** cot_search()'s query vectors, and the search macros each connection defines. */
  readonly search: { readonly vectors: QueryVectors; readonly macros: readonly string[] };
  /** Redaction on an admin's behalf (cot_redact); the server runs it, not the client's engine connection. */
  readonly erasure: ErasureService;
  /** The catalog's costly views kept as tables, shared by every connection (catalog/snapshot.ts). */
  readonly catalogSnapshot: CatalogSnapshot;
  /** The foreign keys the server keeps, and their locks (foreign-keys.ts). */
  readonly foreignKeys: ForeignKeyRegistry;
}

/** One connection's parts, as the pipeline's stages share them. */
export interface HandlerContext {
  readonly engine: EngineConnection;
  readonly info: SessionInfo;
  readonly services: ConnectionServices;
  readonly settings: SessionSettings;
  /** Every access decision, and the record of every refusal. */
  readonly access: AccessControl;
  readonly tx: TransactionState;
  /** Every engine call of a client's statement: under statement_timeout, and cancellable. */
  readonly calls: EngineCalls;
  /** The session's emulated temporary functions (Sequelize's findOrCreate): each one's INSERT. */
  readonly tempFunctions: Map<string, string>;
  /** Whether its statements read the catalog's snapshot or its live views. */
  readonly catalog: CatalogMode;
}

/** The connection's portals, for stages that run a query of their own (COPY's, a cursor's). */
export interface StatementHost {
  /** A portal over a statement without parameters, with these result formats. */
  bindPortal(statement: Statement, resultFormats: readonly number[]): Promise<ConnectionPortal>;
  closePortal(portal: ConnectionPortal): void;
  closeStatement(statement: Statement): void;
}

/**
 * Waits until the engine holds every ledger row acknowledged so far (the
 * writer acknowledges from its journal, engines/duckdb/ledger/writer.ts): a statement, or
 * a transaction's snapshot, then sees every append that came before it.
 */
export async function appendsVisible(ctx: HandlerContext, seq?: bigint): Promise<void> {
  const wait = ctx.services.writer.visible(seq);
  if (wait !== null) await wait;
}

/** A prepared statement's whole result, bound to `params`, as text cells (the server's own queries read it so). */
export async function statementRows(statement: EngineStatement, params: readonly WireParam[]): Promise<Array<Array<string | null>>> {
  statement.bind(params);
  const cursor = await statement.execute({ materialize: true });
  const rows: Array<Array<string | null>> = [];
  try {
    const sink = {
      row: (cells: readonly (string | Uint8Array | null)[]) =>
        rows.push(cells.map((c) => (c === null || typeof c === 'string' ? c : Buffer.from(c).toString('utf8')))),
      flushIfFull: () => Promise.resolve(),
    };
    await cursor.fetch(0, [], sink, { timeZone: 'UTC' });
  } finally {
    cursor.close();
  }
  return rows;
}
