import { totalmem } from 'node:os';
/**
 * The configuration: every key, its default and what it allows. The file
 * (YAML or JSON) is validated against this once at start-up; environment
 * variables override it, and command-line flags override both.
 */

export type LogLevel = 'trace' | 'debug' | 'info' | 'warn' | 'error' | 'fatal' | 'silent';
export type AuthMethod = 'scram-sha-256' | 'password';

/** reader: SELECT only; writer: SELECT and appends to ledgers; admin: everything the guard allows. */
export type Role = 'reader' | 'writer' | 'admin';
export const ROLES: readonly Role[] = ['reader', 'writer', 'admin'];

export interface UserConfig {
  readonly name: string;
  /** A SCRAM-SHA-256 verifier, as printed by `cotwire passwd`. Never a plain password. Null: the user has a token and reaches only the HTTP listener. */
  readonly password: string | null;
  /** Least privilege unless configured: reader. */
  readonly role: Role;
  /** For writers: the identity the ledger writer stamps on their steps. */
  readonly agentId: string | null;
  readonly orgId: string | null;
  /** The hash of the bearer token with which this user reaches the HTTP listener, as printed by `cotwire token`; null: none. */
  readonly token?: string | null;
}

export interface Config {
  readonly listen: { readonly host: string; readonly port: number };
  readonly database: {
    /** A file path, or ":memory:". */
    readonly path: string;
    /** The database name clients connect to. */
    readonly name: string;
    /** `fast-reads`: rows read one by one (a session, a step) cost a fifth, the file about twice the disk; `small`: DuckDB's own compression. */
    readonly compression: 'fast-reads' | 'small';
  };
  /**
   * Where statements run: the embedded DuckDB file (`database.path`), or an
   * existing PostgreSQL (docs/scaling.md), which several cotwire instances
   * may share.
   */
  readonly engine: {
    readonly kind: EngineKind;
    /** For `postgres`: a connection URL whose role may create the cotwire roles (`cotwire init-postgres`) or is a member of the owner role. */
    readonly url: string | null;
    /** For `postgres`: the prefix of the roles cotwire creates (`<prefix>_owner`, `_server`, `_reader`, `_writer`, `_admin`); one per cotwire database in a cluster. */
    readonly rolePrefix: string;
    /**
     * For `postgres`: how long the server waits to connect, or for the
     * answer to one of its own short calls (a commit, the checkpoint lease,
     * a parent step's check), before it takes the connection for lost: a
     * network cut is then an engine down, not a hang.
     */
    readonly answerTimeoutMs: number;
  };
  readonly tls: { readonly key: string | null; readonly cert: string | null };
  readonly auth: { readonly method: AuthMethod };
  readonly users: readonly UserConfig[];
  readonly limits: {
    /** The largest protocol message accepted, in bytes. */
    readonly maxMessageSize: number;
    /** The engine's memory for every connection together, in MiB; a statement past it (and past spillMB on disk) gets 53200. */
    readonly memoryMB: number;
    /** How much the engine may spill to its temp directory beyond memoryMB, in MiB. */
    readonly spillMB: number;
    /** Authenticated connections at once; the next gets 53300. */
    readonly maxConnections: number;
    /** Connections still in startup or authentication at once, apart from maxConnections: a flood of them never takes an authenticated client's slot. */
    readonly maxStartupConnections: number;
    /** The same, from one client address. */
    readonly maxStartupConnectionsPerAddress: number;
    /** How long shutdown waits for running statements before cancelling them, in milliseconds. */
    readonly shutdownGraceMs: number;
    /** Every connection's statement_timeout to begin with, in milliseconds (0 = none). */
    readonly statementTimeoutMs: number;
    /** How long a client may take from connecting to being authenticated, in milliseconds (PostgreSQL's authentication_timeout). */
    readonly startupTimeoutMs: number;
    /** Every connection's idle_in_transaction_session_timeout to begin with, in milliseconds (0 = none). */
    readonly idleInTransactionTimeoutMs: number;
    /** Named prepared statements one connection may hold. */
    readonly maxPreparedStatements: number;
    /** Named portals (and cursors) one connection may hold open. */
    readonly maxPortals: number;
    /** Bytes of rows one ledger statement may hold in the server while they are checked and chained. */
    readonly maxAppendBytes: number;
  };
  readonly log: {
    readonly level: LogLevel;
    /** Statements that run at least this long get a warn line, in milliseconds (0 = never). */
    readonly slowStatementMs: number;
  };
  /**
   * The HTTP listener: /healthz, /metrics, the OTLP receiver (`POST /v1/traces`) and the viewer. On by default on
   * OTLP/HTTP's standard port; off when port is null. `metrics.host` and `metrics.port` are older names for it.
   */
  readonly http: { readonly host: string; readonly port: number | null };
  /** OpenTelemetry spans taken in at `POST /v1/traces` (docs/ingest.md). */
  readonly otlp: {
    /** Spans that are not GenAI spans: `drop` (counted in cotwire_otlp_spans_total) or `keep` as Observation steps. */
    readonly nonGenAiSpans: 'drop' | 'keep';
    /** The largest request body, before and after gzip, in bytes; a larger one gets 413. */
    readonly maxBodyBytes: number;
  };
  readonly ledger: {
    /** Whether `_cot` tables are chained ledgers (the guard protects them either way). */
    readonly enabled: boolean;
    /** The largest `content` of a reasoning step, in bytes. */
    readonly maxContentBytes: number;
    /** The share of the other steps selected for an embedding (ledger/chain/embedding-sample.ts). */
    readonly embeddingSampleRate: number;
    /** Step types always selected for an embedding. */
    readonly embeddingAlwaysTypes: readonly string[];
    /** Days a whole session is kept; 0 keeps everything forever (used by the retention feature). */
    readonly retentionDays: number;
    /**
     * The shortest retention allowed, in days: the EU AI Act keeps a high-risk AI system's logs at
     * least six months (Articles 19(1) and 26(6)), so a shorter period is refused wherever one is
     * given; 0 turns the floor off, for systems the Act does not cover.
     */
    readonly retentionFloorDays: number;
    /** The background audit verifies every chain at start-up and then this often; 0 = at start-up only. */
    readonly verifyIntervalSeconds: number;
    /** Between audits, every ledger's fingerprint is checked this often, and a change starts an audit; 0 = never. */
    readonly watchIntervalSeconds: number;
    /** Memory for recently read sessions, from which replays and step reads are answered; 0 = off. */
    readonly sessionCacheMB: number;
    /**
     * Keep `_cot_steps` also as a row store beside a file-backed database (`<database>.steps/`),
     * from which cold replays and step reads are answered without a columnar scan.
     */
    readonly stepStore: boolean;
    /** The hash specification new ledgers are chained with (README, "Hash specification"); existing ledgers keep theirs. */
    readonly hashVersion: LedgerHashVersion;
    /**
     * Who may extend a session of `_cot_steps`: `org`, any writer of the organisation of its first
     * step; `agent`, only the agent that wrote its first step.
     */
    readonly sessionOwner: SessionOwner;
  };
  /** Signed checkpoints of the global Merkle log (docs/transparency-log.md, "Checkpoints"). */
  readonly checkpoint: {
    /**
     * The signing key file from `cotwire keygen`; keep it off the database's disk. Unset: a key
     * is created beside the database file on first start (an in-memory database gets a fresh one).
     */
    readonly keyFile: string | null;
    readonly intervalSeconds: number;
    readonly maxLeaves: number;
    /**
     * Where else each checkpoint goes: a file, a directory ("/" at the end, or existing), or an
     * http(s) URL. Unset: `<database>.checkpoints/`, so that an offline check always has something
     * outside the database file to hold it against; an empty list writes none.
     */
    readonly sinks: readonly string[];
  };
  readonly guard: {
    /** Table-name prefixes that make a table a ledger; `_cot` is always one of them. */
    readonly protectedPrefixes: readonly string[];
  };
  /** Vectors of the steps selected for an embedding, and cot_search() over them (docs/search.md). */
  readonly embedding: {
    /** Whether selected steps are embedded in the background and cot_search() answers. */
    readonly enabled: boolean;
    /** `builtin`: the hashed bag of words computed in the server; `openai`: a service speaking OpenAI's embeddings API. */
    readonly provider: EmbeddingProvider;
    /** For `openai`: the full endpoint, such as http://localhost:11434/v1/embeddings. */
    readonly url: string | null;
    /** The model the vectors are made with; the built-in embedder's is cotwire-hashed-v1. */
    readonly model: string;
    readonly dimensions: number;
    /** Sent as a bearer token; read from COTWIRE_EMBEDDING_API_KEY only, never from the file. */
    readonly apiKey: string | null;
    /** Whether the request asks the service for `dimensions` (OpenAI's text-embedding-3 models shorten their vectors). */
    readonly sendDimensions: boolean;
    readonly timeoutMs: number;
    /** Texts per request. */
    readonly batchSize: number;
    /** Retries of a failed request (network, timeout, 429, 5xx), with exponential backoff. */
    readonly maxRetries: number;
  };
}

export type EngineKind = 'duckdb' | 'postgres';
export const ENGINE_KINDS: readonly EngineKind[] = ['duckdb', 'postgres'];

export type EmbeddingProvider = 'builtin' | 'openai';
export const EMBEDDING_PROVIDERS: readonly EmbeddingProvider[] = ['builtin', 'openai'];
/** The built-in embedder's model name (embedding/hashed.ts). */
export const BUILTIN_EMBEDDING_MODEL = 'cotwire-hashed-v1';

/**
 * Half the machine's memory for the engine by default (DuckDB's own default is 80%): the server's own
 * buffers, Node's heap and the operating system's cache need the rest.
 */
export const DEFAULT_MEMORY_MB = Math.max(256, Math.floor(totalmem() / 1024 / 1024 / 2));

/**
 * The server's own share of limits.memoryMB, in MiB: what every
 * connection's messages being received may hold together. The DuckDB engine
 * gets the rest.
 */
export function serverShareMB(limits: Pick<Config['limits'], 'memoryMB'>): number {
  return Math.max(16, Math.floor(limits.memoryMB / 4));
}

export const DEFAULTS: Config = {
  listen: { host: '127.0.0.1', port: 5433 },
  database: { path: './data/cotwire.duckdb', name: 'cotwire', compression: 'fast-reads' },
  engine: { kind: 'duckdb', url: null, rolePrefix: 'cotwire', answerTimeoutMs: 30_000 },
  tls: { key: null, cert: null },
  auth: { method: 'scram-sha-256' },
  users: [],
  limits: {
    maxMessageSize: 64 * 1024 * 1024,
    memoryMB: DEFAULT_MEMORY_MB,
    spillMB: 4 * DEFAULT_MEMORY_MB,
    maxConnections: 100,
    maxStartupConnections: 64,
    maxStartupConnectionsPerAddress: 16,
    shutdownGraceMs: 10_000,
    statementTimeoutMs: 0,
    startupTimeoutMs: 15_000,
    idleInTransactionTimeoutMs: 0,
    maxPreparedStatements: 10_000,
    maxPortals: 1_000,
    maxAppendBytes: 256 * 1024 * 1024,
  },
  log: { level: 'info', slowStatementMs: 1000 },
  http: { host: '127.0.0.1', port: 4318 },
  otlp: { nonGenAiSpans: 'drop', maxBodyBytes: 16 * 1024 * 1024 },
  ledger: {
    enabled: true,
    maxContentBytes: 65536,
    embeddingSampleRate: 0.1,
    embeddingAlwaysTypes: ['Decision', 'Action', 'Error', 'Correction', 'FinalAnswer'],
    retentionDays: 0,
    // Six months, rounded up.
    retentionFloorDays: 183,
    verifyIntervalSeconds: 3600,
    watchIntervalSeconds: 10,
    sessionCacheMB: 64,
    stepStore: true,
    hashVersion: 'cotwire/v3',
    sessionOwner: 'org',
  },
  checkpoint: { keyFile: null, intervalSeconds: 10, maxLeaves: 10_000, sinks: ['./data/cotwire.duckdb.checkpoints/'] },
  guard: { protectedPrefixes: ['_cot'] },
  embedding: {
    enabled: true,
    provider: 'builtin',
    url: null,
    model: BUILTIN_EMBEDDING_MODEL,
    dimensions: 384,
    apiKey: null,
    sendDimensions: false,
    timeoutMs: 30_000,
    batchSize: 64,
    maxRetries: 5,
  },
};

/** The hash specifications a new ledger may be chained with. */
export const LEDGER_HASH_VERSIONS = ['cotwire/v2', 'cotwire/v3'] as const;
export type LedgerHashVersion = (typeof LEDGER_HASH_VERSIONS)[number];
export const SESSION_OWNERS = ['org', 'agent'] as const;
export type SessionOwner = (typeof SESSION_OWNERS)[number];

export const LOG_LEVELS: readonly LogLevel[] = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'];
export const AUTH_METHODS: readonly AuthMethod[] = ['scram-sha-256', 'password'];
