/**
 * Ledger tables: the default `_cot_steps`, and the chain columns the server
 * adds to every other ledger. The hash pre-image and the verification SQL
 * are both derived from these definitions.
 */

export const STEP_TYPES = [
  'Observation',
  'Hypothesis',
  'ToolCall',
  'ToolResult',
  'Reasoning',
  'Decision',
  'Action',
  'Error',
  'Correction',
  'Summary',
  'PlanStep',
  'FinalAnswer',
] as const;
export type StepType = (typeof STEP_TYPES)[number];

export const STEPS_TABLE = '_cot_steps';

/** The columns the server computes on every ledger; a client that supplies one gets an error. */
export const CHAIN_COLUMNS: ReadonlyArray<{ readonly name: string; readonly type: string }> = [
  { name: 'step_index', type: 'INTEGER' },
  { name: 'prev_hash', type: 'VARCHAR' },
  { name: 'current_hash', type: 'VARCHAR' },
  { name: 'created_at', type: 'TIMESTAMP WITH TIME ZONE' },
  { name: 'ledger_seq', type: 'BIGINT' },
];

/** `_cot_steps` computes these too. */
export const STEPS_SERVER_COLUMNS = new Set(['trace_id', 'step_index', 'prev_hash', 'current_hash', 'created_at', 'ledger_seq', 'has_embedding']);

export const STEPS_DDL = `CREATE TABLE IF NOT EXISTS main.${STEPS_TABLE} (
  trace_id UUID NOT NULL,
  org_id VARCHAR,
  agent_id VARCHAR,
  session_id VARCHAR NOT NULL,
  step_index INTEGER NOT NULL,
  step_type VARCHAR NOT NULL,
  content VARCHAR,
  input_data JSON,
  output_data JSON,
  confidence DOUBLE,
  duration_ms BIGINT,
  token_count INTEGER,
  model VARCHAR,
  metadata JSON,
  prev_hash VARCHAR NOT NULL,
  current_hash VARCHAR NOT NULL,
  has_embedding BOOLEAN NOT NULL,
  created_at TIMESTAMP WITH TIME ZONE NOT NULL,
  parent_trace_id UUID,
  ledger_seq BIGINT NOT NULL
)`;

/**
 * Steps are read back by trace_id (cot_trace(), receipts, drivers' point
 * reads) and by session (cot_replay(), cot_verify(), the MCP tools): without
 * these indexes each such read scans the whole ledger, so it costs what the
 * ledger holds rather than what the session holds (docs/benchmarks.md).
 */
export const STEPS_INDEX_DDL: readonly string[] = [
  `CREATE INDEX IF NOT EXISTS ${STEPS_TABLE}_trace_id ON main.${STEPS_TABLE} (trace_id)`,
  `CREATE INDEX IF NOT EXISTS ${STEPS_TABLE}_session_id ON main.${STEPS_TABLE} (session_id)`,
];

export interface LedgerColumn {
  readonly name: string;
  /** DuckDB's type name, as duckdb_columns() reports it. */
  readonly type: string;
  /** The column's default expression, or null. */
  readonly defaultSql: string | null;
  readonly notNull: boolean;
}

/** What the writer and the verifier know about one ledger table. */
export interface LedgerTable {
  readonly catalog: string;
  readonly schema: string;
  readonly name: string;
  /**
   * The SQL that names the table in the engine, where that is not
   * catalog.schema.name: on PostgreSQL, ledgers live in `public` and keep
   * the schema `main` in every hash and record (engines/postgres/ledger/catalog.ts).
   */
  readonly relation?: string;
  /** All columns in table order. */
  readonly columns: readonly LedgerColumn[];
  /** The column that partitions chains (`session_id`), or null when the whole table is one chain. */
  readonly chainKey: string | null;
  /** Columns the server computes; clients may not supply them. */
  readonly serverColumns: ReadonlySet<string>;
  /** `_cot_steps` gets the reasoning-step checks. */
  readonly isSteps: boolean;
  /**
   * Appends may be acknowledged from the writer's journal before the engine
   * has them: the table is in the database file, and its only constraints
   * are NOT NULL, which the writer checks itself. Rows of other ledgers are
   * committed to the engine before they are acknowledged.
   */
  readonly journaled: boolean;
  /** The hash specification its rows are chained with, recorded as the table's comment (ledger/chain/hash-version.ts). */
  readonly hashVersion: HashVersion;
  /**
   * The qualified name of the ledger of redactions whose digests stand in
   * for this ledger's redacted values (ledger/erasure/redactions.ts); null for a
   * v1 ledger, or where the database has none.
   */
  readonly redactions: string | null;
  /** The qualified name of the ledger of retention records that account for removed sessions (ledger/erasure/retention-sql.ts), or null. */
  readonly retention: string | null;
  /**
   * The qualified name of the log's events ledger when it records lost
   * appends (ledger/log/log-events.ts), whose steps verification then tells as
   * a gap; null otherwise, which spares verification the look.
   */
  readonly losses?: string | null;
}

export function qualifiedName(t: Pick<LedgerTable, 'catalog' | 'schema' | 'name' | 'relation'>): string {
  if (t.relation !== undefined) return t.relation;
  return `${quoteIdent(t.catalog)}.${quoteIdent(t.schema)}.${quoteIdent(t.name)}`;
}

export function quoteIdent(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

export function quoteLiteral(s: string): string {
  return `'${s.replaceAll("'", "''")}'`;
}

const TIMESTAMPTZ = 'TIMESTAMP WITH TIME ZONE';

/**
 * The SQL expression for a column's canonical text in the hash pre-image:
 * its VARCHAR cast, except timestamps with time zone, which are hashed as
 * microseconds since the epoch so that no time zone setting can change
 * them. NULL stays NULL (the pre-image marks it).
 */
export function canonicalTextSql(column: string, type: string): string {
  const ref = quoteIdent(column);
  if (type.toUpperCase() === TIMESTAMPTZ) return `CAST(epoch_us(${ref}) AS VARCHAR)`;
  return `CAST(${ref} AS VARCHAR)`;
}

export const HASH_VERSION = 'cotwire/v1';

/**
 * `cotwire/v2` hashes each column's digest instead of its text, so that a
 * redacted value can be stood for by its digest (canonical.ts). Ledgers
 * created by this version use it; ledgers created before keep v1.
 */
export const HASH_VERSION_V2 = 'cotwire/v2';

/**
 * `cotwire/v3` enters each value a client supplies as a commitment under a
 * salt of the row's own (commitments.ts), so that an erased value cannot be
 * found again by hashing guesses.
 */
export const HASH_VERSION_V3 = 'cotwire/v3';

export type HashVersion = typeof HASH_VERSION | typeof HASH_VERSION_V2 | typeof HASH_VERSION_V3;

/** The server column that holds a v3 row's salt (ledger/chain/commitments.ts). */
export const SALT_COLUMN = 'row_salt';

/**
 * The columns a v3 pre-image holds as text rather than as a commitment: what
 * the server computes (the chain's own columns, the salt, a step's trace_id
 * and has_embedding) and the chain's key. Every other column is a value a
 * client supplied, and may be erased.
 */
const UNCOMMITTED = new Set(['current_hash', SALT_COLUMN, 'step_index', 'prev_hash', 'created_at', 'ledger_seq', 'session_id', 'trace_id', 'has_embedding']);

const CHAIN_NAMES: ReadonlySet<string> = new Set(CHAIN_COLUMNS.map((c) => c.name));
const CHAIN_NAMES_V3: ReadonlySet<string> = new Set([...CHAIN_NAMES, SALT_COLUMN]);
const STEPS_SERVER_COLUMNS_V3: ReadonlySet<string> = new Set([...STEPS_SERVER_COLUMNS, SALT_COLUMN]);

/** The columns the server computes in a ledger: the chain's, a step's own, and a v3 row's salt. */
export function serverColumnsOf(isSteps: boolean, version: HashVersion): ReadonlySet<string> {
  if (version === HASH_VERSION_V3) return isSteps ? STEPS_SERVER_COLUMNS_V3 : CHAIN_NAMES_V3;
  return isSteps ? STEPS_SERVER_COLUMNS : CHAIN_NAMES;
}

/** The statement that gives a new v3 ledger its salt column, run in the transaction that creates it. */
export function addSaltColumnSql(table: Pick<LedgerTable, 'catalog' | 'schema' | 'name' | 'relation'>): string {
  return `ALTER TABLE ${qualifiedName(table)} ADD COLUMN ${SALT_COLUMN} VARCHAR`;
}

/** Whether a column enters a v3 pre-image as a salted commitment. */
export function isCommitted(column: string): boolean {
  return !UNCOMMITTED.has(column);
}

/** Each committed column of a v3 ledger (names in table order) with its place among them, which picks its key. */
export function committedPlaces(columns: readonly string[]): ReadonlyMap<string, number> {
  return new Map(columns.filter(isCommitted).map((c, m) => [c, m] as const));
}
