import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { parseScramVerifier } from '../session/scram.js';
import { parseTokenHash } from '../session/bearer-token.js';
import {
  AUTH_METHODS,
  BUILTIN_EMBEDDING_MODEL,
  DEFAULTS,
  EMBEDDING_PROVIDERS,
  ENGINE_KINDS,
  LEDGER_HASH_VERSIONS,
  SESSION_OWNERS,
  LOG_LEVELS,
  ROLES,
  type Config,
  type UserConfig,
} from './schema.js';

/** A configuration problem, reported as one line naming the key, the value and what is allowed. */
export class ConfigError extends Error {}

export interface ConfigSources {
  readonly argv: Readonly<Record<string, string | undefined>>;
  readonly env: Readonly<Record<string, string | undefined>>;
}

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type Obj = { [key: string]: Json };

const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
const show = (v: unknown): string => JSON.stringify(v) ?? String(v);

function fail(key: string, value: unknown, allowed: string): never {
  throw new ConfigError(`invalid configuration: ${key} = ${show(value)}; ${allowed}`);
}

function section(root: Obj, key: string, known: readonly string[]): Obj {
  const v = root[key];
  if (v === undefined || v === null) return {};
  if (!isObj(v)) fail(key, v, 'expected a mapping');
  for (const k of Object.keys(v)) {
    if (!known.includes(k)) fail(`${key}.${k}`, v[k], `unknown key; known keys are ${known.join(', ')}`);
  }
  return v;
}

function str(v: Json | undefined, path: string, def: string): string {
  if (v === undefined || v === null) return def;
  if (typeof v !== 'string' || v === '') fail(path, v, 'expected a non-empty string');
  return v;
}

function optStr(v: Json | undefined, path: string): string | null {
  if (v === undefined || v === null) return null;
  if (typeof v !== 'string' || v === '') fail(path, v, 'expected a file path');
  return v;
}

function bool(v: Json | undefined, path: string, def: boolean): boolean {
  if (v === undefined || v === null) return def;
  if (typeof v !== 'boolean') fail(path, v, 'expected true or false');
  return v;
}

/** Reserved for deployments without ledgers; every release so far runs with them. */
function ledgersEnabled(v: Json | undefined): boolean {
  const enabled = bool(v, 'ledger.enabled', DEFAULTS.ledger.enabled);
  if (!enabled) fail('ledger.enabled', v, 'cotwire does not yet run without ledgers; leave it true');
  return enabled;
}

function fraction(v: Json | undefined, path: string, def: number): number {
  if (v === undefined || v === null) return def;
  if (typeof v !== 'number' || !(v >= 0 && v <= 1)) fail(path, v, 'expected a number from 0 to 1');
  return v;
}

/** COTWIRE_USERS: the users list as YAML or JSON, for containers configured by environment alone. */
function envUsers(text: string): Json {
  try {
    return parseYaml(text) as Json;
  } catch (err) {
    throw new ConfigError(`invalid configuration: COTWIRE_USERS is not YAML or JSON: ${(err as Error).message.split('\n')[0] ?? ''}`);
  }
}

/**
 * `http`, or its older names `metrics.host` and `metrics.port`, which name the same listener. A port of `off` (or
 * null in the file) turns it off.
 */
function httpConfig(http: { host: Json | undefined; port: Json | undefined }, metrics: { host: Json | undefined; port: Json | undefined }): Config['http'] {
  const port = (v: Json | undefined, path: string): number | null => (v === 'off' || v === null ? null : int(v, path, 0, 0, 65535));
  const d = DEFAULTS.http;
  const given = (v: Json | undefined): boolean => v !== undefined;
  if (given(http.port) && given(metrics.port) && port(http.port, 'http.port') !== port(metrics.port, 'metrics.port')) {
    fail('metrics.port', metrics.port, `metrics.port is the older name of http.port, which is ${show(http.port)}: give one of them`);
  }
  const portValue = given(http.port) ? port(http.port, 'http.port') : given(metrics.port) ? port(metrics.port, 'metrics.port') : d.port;
  const host = given(http.host) ? str(http.host, 'http.host', d.host) : str(metrics.host, 'metrics.host', d.host);
  return { host, port: portValue };
}

function optText(v: Json | undefined, path: string): string | null {
  if (v === undefined || v === null) return null;
  if (typeof v !== 'string' || v === '') fail(path, v, 'expected a non-empty string');
  return v;
}

function int(v: unknown, path: string, def: number, min: number, max: number): number {
  if (v === undefined || v === null) return def;
  const n = typeof v === 'string' && /^\d+$/.test(v.trim()) ? Number(v) : v;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < min || n > max) {
    fail(path, v, `expected an integer from ${min} to ${max}`);
  }
  return n;
}

function oneOf<T extends string>(v: unknown, path: string, def: T, allowed: readonly T[]): T {
  if (v === undefined || v === null) return def;
  if (typeof v !== 'string' || !(allowed as readonly string[]).includes(v)) fail(path, v, `expected one of ${allowed.join(', ')}`);
  return v as T;
}

function users(v: Json | undefined): UserConfig[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) fail('users', v, 'expected a list of { name, password, role }');
  const seen = new Set<string>();
  return v.map((u, i) => {
    if (!isObj(u)) fail(`users[${i}]`, u, 'expected { name, password }');
    const keys = ['name', 'password', 'role', 'agent_id', 'org_id', 'token'];
    for (const k of Object.keys(u)) if (!keys.includes(k)) fail(`users[${i}].${k}`, u[k], `unknown key; known keys are ${keys.join(', ')}`);
    const name = str(u.name, `users[${i}].name`, '');
    if (name === '') fail(`users[${i}].name`, u.name, 'expected a user name');
    if (seen.has(name)) fail(`users[${i}].name`, name, 'user names must be unique');
    seen.add(name);
    const token = optText(u.token, `users[${i}].token`);
    if (token !== null && parseTokenHash(token) === null) {
      fail(`users[${i}].token`, `${token.slice(0, 12)}...`, 'expected a token hash from `cotwire token` (sha256:...), never the token itself');
    }
    // A user that only sends spans over HTTP needs no password.
    const password = token !== null && (u.password === undefined || u.password === null) ? null : str(u.password, `users[${i}].password`, '');
    if (password !== null && parseScramVerifier(password) === null) {
      fail(
        `users[${i}].password`,
        password.length > 12 ? `${password.slice(0, 12)}...` : password,
        'expected a SCRAM-SHA-256 verifier from `cotwire passwd`, never a plain password',
      );
    }
    const role = oneOf(u.role, `users[${i}].role`, 'reader', ROLES);
    const agentId = optText(u.agent_id, `users[${i}].agent_id`);
    const orgId = optText(u.org_id, `users[${i}].org_id`);
    if (agentId !== null && role !== 'writer') fail(`users[${i}].role`, role, 'an agent_id is for writer users');
    // An admin without an org_id sees every organisation; one with would be neither.
    if (orgId !== null && role === 'admin') fail(`users[${i}].role`, role, 'an org_id is for reader and writer users: an admin sees every organisation');
    return { name, password, role, agentId, orgId, token };
  });
}

/** The protected prefixes: `_cot` always, plus any configured; the list can widen the rule, never narrow it. */
function prefixes(v: Json | undefined): string[] {
  if (v === undefined || v === null) return [...DEFAULTS.guard.protectedPrefixes];
  if (!Array.isArray(v) || v.some((p) => typeof p !== 'string' || !/^[A-Za-z_][A-Za-z0-9_$]*$/.test(p))) {
    fail('guard.protectedPrefixes', v, 'expected a list of table-name prefixes such as ["_cot", "audit_"]');
  }
  return [...new Set(['_cot', ...(v as string[]).map((p) => p.toLowerCase())])];
}

/** A list of step type names; the server holds them to _cot_steps' types when it starts (engines/duckdb/start.ts). */
function stepTypes(v: Json | undefined, path: string, def: readonly string[]): string[] {
  if (v === undefined || v === null) return [...def];
  if (!Array.isArray(v) || v.some((t) => typeof t !== 'string' || !/^[A-Za-z]+$/.test(t))) {
    fail(path, v, 'expected a list of step types such as [Decision, Error]');
  }
  return [...new Set(v as string[])];
}

function embeddingConfig(e: Obj, env: ConfigSources['env']): Config['embedding'] {
  const d = DEFAULTS.embedding;
  const provider = oneOf(firstSet(env.COTWIRE_EMBEDDING_PROVIDER, e.provider), 'embedding.provider', d.provider, EMBEDDING_PROVIDERS);
  const url = optText(firstSet(env.COTWIRE_EMBEDDING_URL, e.url), 'embedding.url');
  if (url !== null && !/^https?:\/\//i.test(url)) fail('embedding.url', url, 'expected an http:// or https:// URL');
  if (url !== null && !URL.canParse(url)) fail('embedding.url', url, 'not a valid URL');
  if (url !== null && (new URL(url).username !== '' || new URL(url).password !== '')) {
    fail('embedding.url', '(a URL with credentials)', 'give the API key in COTWIRE_EMBEDDING_API_KEY, not in the URL');
  }
  const model = str(firstSet(env.COTWIRE_EMBEDDING_MODEL, e.model), 'embedding.model', provider === 'builtin' ? BUILTIN_EMBEDDING_MODEL : '');
  if (provider === 'builtin' && model !== BUILTIN_EMBEDDING_MODEL) fail('embedding.model', model, `the builtin provider's model is ${BUILTIN_EMBEDDING_MODEL}`);
  if (provider === 'openai' && (url === null || model === '')) {
    fail('embedding', e, 'the openai provider needs embedding.url (the full endpoint, such as http://localhost:11434/v1/embeddings) and embedding.model');
  }
  const apiKey = env.COTWIRE_EMBEDDING_API_KEY;
  return {
    enabled: bool(e.enabled, 'embedding.enabled', d.enabled),
    provider,
    url,
    model,
    dimensions: int(firstSet(env.COTWIRE_EMBEDDING_DIMENSIONS, e.dimensions), 'embedding.dimensions', d.dimensions, 2, 16_000),
    apiKey: apiKey === undefined || apiKey === '' ? null : apiKey,
    sendDimensions: bool(e.sendDimensions, 'embedding.sendDimensions', d.sendDimensions),
    timeoutMs: int(e.timeoutMs, 'embedding.timeoutMs', d.timeoutMs, 100, 600_000),
    batchSize: int(e.batchSize, 'embedding.batchSize', d.batchSize, 1, 2048),
    maxRetries: int(e.maxRetries, 'embedding.maxRetries', d.maxRetries, 0, 100),
  };
}

/** The environment beats the file. */
function firstSet(...values: Array<Json | undefined>): Json | undefined {
  return values.find((v) => v !== undefined);
}

/** Unset, checkpoints go to a directory beside a database file (an in-memory database has none). */
function sinks(v: Json | undefined, databasePath: string): string[] {
  if (v === undefined || v === null) return databasePath === ':memory:' ? [] : [`${databasePath}.checkpoints/`];
  if (!Array.isArray(v) || v.some((t) => typeof t !== 'string' || t === '')) {
    fail('checkpoint.sinks', v, 'expected a list of file paths, directories (ending in "/") or http(s) URLs');
  }
  for (const t of v as string[]) {
    if (/^[a-z][a-z0-9+.-]*:\/\//i.test(t) && !/^https?:\/\//i.test(t)) fail('checkpoint.sinks', t, 'a URL sink must be http:// or https://');
    if (/^https?:\/\//i.test(t) && !URL.canParse(t)) fail('checkpoint.sinks', t, 'not a valid URL');
  }
  return [...(v as string[])];
}

/** Reads the file named by --config or COTWIRE_CONFIG (if any), applies env and flags, validates, freezes. */
export function loadConfig(sources: ConfigSources): Config {
  const { argv, env } = sources;
  const path = argv.config ?? env.COTWIRE_CONFIG;
  let root: Obj = {};
  if (path !== undefined && path !== '') {
    let text: string;
    try {
      text = readFileSync(path, 'utf8');
    } catch (err) {
      throw new ConfigError(`cannot read the configuration file ${path}: ${(err as Error).message}`);
    }
    let parsed: unknown;
    try {
      parsed = parseYaml(text);
    } catch (err) {
      throw new ConfigError(`cannot parse the configuration file ${path}: ${(err as Error).message.split('\n')[0]}`);
    }
    if (parsed !== null && parsed !== undefined && !isObj(parsed)) fail('(root)', parsed, 'expected a mapping');
    root = (parsed ?? {}) as Obj;
  }
  const known = [
    'listen',
    'database',
    'engine',
    'tls',
    'auth',
    'users',
    'limits',
    'log',
    'http',
    'metrics',
    'otlp',
    'ledger',
    'checkpoint',
    'guard',
    'embedding',
  ];
  for (const k of Object.keys(root)) if (!known.includes(k)) fail(k, root[k], `unknown key; known keys are ${known.join(', ')}`);

  const listen = section(root, 'listen', ['host', 'port']);
  const database = section(root, 'database', ['path', 'name', 'compression']);
  const engine = section(root, 'engine', ['kind', 'url', 'rolePrefix', 'answerTimeoutMs']);
  const tls = section(root, 'tls', ['key', 'cert']);
  const auth = section(root, 'auth', ['method']);
  const limits = section(root, 'limits', [
    'maxMessageSize',
    'memoryMB',
    'spillMB',
    'maxConnections',
    'maxStartupConnections',
    'maxStartupConnectionsPerAddress',
    'shutdownGraceMs',
    'statementTimeoutMs',
    'startupTimeoutMs',
    'idleInTransactionTimeoutMs',
    'maxPreparedStatements',
    'maxPortals',
    'maxAppendBytes',
  ]);
  const log = section(root, 'log', ['level', 'slowStatementMs']);
  const guard = section(root, 'guard', ['protectedPrefixes']);
  const http = section(root, 'http', ['host', 'port']);
  const metrics = section(root, 'metrics', ['host', 'port']);
  const otlp = section(root, 'otlp', ['nonGenAiSpans', 'maxBodyBytes']);
  const checkpoint = section(root, 'checkpoint', ['keyFile', 'intervalSeconds', 'maxLeaves', 'sinks']);

  const ledger = section(root, 'ledger', [
    'enabled',
    'maxContentBytes',
    'embeddingSampleRate',
    'embeddingAlwaysTypes',
    'retentionDays',
    'retentionFloorDays',
    'verifyIntervalSeconds',
    'watchIntervalSeconds',
    'sessionCacheMB',
    'stepStore',
    'hashVersion',
    'sessionOwner',
  ]);

  const embedding = section(root, 'embedding', ['enabled', 'provider', 'url', 'model', 'dimensions', 'sendDimensions', 'timeoutMs', 'batchSize', 'maxRetries']);

  // A flag beats the environment, which beats the file.
  const pick = (flag: string | undefined, envVar: string | undefined, fileValue: Json | undefined): Json | undefined => flag ?? envVar ?? fileValue;

  const config: Config = {
    listen: {
      host: str(pick(argv.host, env.COTWIRE_HOST, listen.host), 'listen.host', DEFAULTS.listen.host),
      port: int(pick(argv.port, env.COTWIRE_PORT, listen.port), 'listen.port', DEFAULTS.listen.port, 0, 65535),
    },
    database: {
      path: str(pick(argv.db, env.COTWIRE_DB, database.path), 'database.path', DEFAULTS.database.path),
      name: str(database.name, 'database.name', DEFAULTS.database.name),
      compression: oneOf(database.compression, 'database.compression', DEFAULTS.database.compression, ['fast-reads', 'small'] as const),
    },
    engine: engineConfig(engine, pick(argv['engine-url'], env.COTWIRE_ENGINE_URL, engine.url), pick(argv.engine, env.COTWIRE_ENGINE, engine.kind)),
    tls: {
      key: optStr(pick(argv['tls-key'], env.COTWIRE_TLS_KEY, tls.key), 'tls.key'),
      cert: optStr(pick(argv['tls-cert'], env.COTWIRE_TLS_CERT, tls.cert), 'tls.cert'),
    },
    auth: { method: oneOf(auth.method, 'auth.method', DEFAULTS.auth.method, AUTH_METHODS) },
    users: users(env.COTWIRE_USERS === undefined ? root.users : envUsers(env.COTWIRE_USERS)),
    limits: limitsConfig(limits),
    log: {
      level: oneOf(pick(argv['log-level'], env.COTWIRE_LOG_LEVEL, log.level), 'log.level', DEFAULTS.log.level, LOG_LEVELS),
      slowStatementMs: int(log.slowStatementMs, 'log.slowStatementMs', DEFAULTS.log.slowStatementMs, 0, 86_400_000),
    },
    ledger: ledgerConfig(ledger),
    checkpoint: {
      keyFile: optStr(pick(argv['checkpoint-key'], env.COTWIRE_CHECKPOINT_KEY, checkpoint.keyFile), 'checkpoint.keyFile'),
      intervalSeconds: int(checkpoint.intervalSeconds, 'checkpoint.intervalSeconds', DEFAULTS.checkpoint.intervalSeconds, 1, 86_400),
      maxLeaves: int(checkpoint.maxLeaves, 'checkpoint.maxLeaves', DEFAULTS.checkpoint.maxLeaves, 1, 100_000_000),
      sinks: sinks(checkpoint.sinks, str(pick(argv.db, env.COTWIRE_DB, database.path), 'database.path', DEFAULTS.database.path)),
    },
    guard: { protectedPrefixes: prefixes(guard.protectedPrefixes) },
    embedding: embeddingConfig(embedding, env),
    http: httpConfig(
      { host: pick(argv['http-host'], env.COTWIRE_HTTP_HOST, http.host), port: pick(argv['http-port'], env.COTWIRE_HTTP_PORT, http.port) },
      { host: pick(undefined, env.COTWIRE_METRICS_HOST, metrics.host), port: pick(argv['metrics-port'], env.COTWIRE_METRICS_PORT, metrics.port) },
    ),
    otlp: {
      nonGenAiSpans: oneOf(otlp.nonGenAiSpans, 'otlp.nonGenAiSpans', DEFAULTS.otlp.nonGenAiSpans, ['drop', 'keep'] as const),
      maxBodyBytes: int(otlp.maxBodyBytes, 'otlp.maxBodyBytes', DEFAULTS.otlp.maxBodyBytes, 1024, 1024 * 1024 * 1024),
    },
  };
  if ((config.tls.key === null) !== (config.tls.cert === null)) {
    fail('tls', config.tls, 'set both tls.key and tls.cert, or neither');
  }
  return deepFreeze(config);
}

function limitsConfig(limits: Obj): Config['limits'] {
  return {
    maxMessageSize: int(limits.maxMessageSize, 'limits.maxMessageSize', DEFAULTS.limits.maxMessageSize, 1024, 1024 * 1024 * 1024),
    memoryMB: int(limits.memoryMB, 'limits.memoryMB', DEFAULTS.limits.memoryMB, 64, 16 * 1024 * 1024),
    spillMB: int(limits.spillMB, 'limits.spillMB', limits.memoryMB === undefined ? DEFAULTS.limits.spillMB : 4 * Number(limits.memoryMB), 0, 64 * 1024 * 1024),
    maxConnections: int(limits.maxConnections, 'limits.maxConnections', DEFAULTS.limits.maxConnections, 1, 10_000),
    maxStartupConnections: int(limits.maxStartupConnections, 'limits.maxStartupConnections', DEFAULTS.limits.maxStartupConnections, 1, 10_000),
    maxStartupConnectionsPerAddress: int(
      limits.maxStartupConnectionsPerAddress,
      'limits.maxStartupConnectionsPerAddress',
      DEFAULTS.limits.maxStartupConnectionsPerAddress,
      1,
      10_000,
    ),
    shutdownGraceMs: int(limits.shutdownGraceMs, 'limits.shutdownGraceMs', DEFAULTS.limits.shutdownGraceMs, 0, 3_600_000),
    statementTimeoutMs: int(limits.statementTimeoutMs, 'limits.statementTimeoutMs', DEFAULTS.limits.statementTimeoutMs, 0, 2_147_483_647),
    startupTimeoutMs: int(limits.startupTimeoutMs, 'limits.startupTimeoutMs', DEFAULTS.limits.startupTimeoutMs, 100, 3_600_000),
    idleInTransactionTimeoutMs: int(
      limits.idleInTransactionTimeoutMs,
      'limits.idleInTransactionTimeoutMs',
      DEFAULTS.limits.idleInTransactionTimeoutMs,
      0,
      2_147_483_647,
    ),
    maxPreparedStatements: int(limits.maxPreparedStatements, 'limits.maxPreparedStatements', DEFAULTS.limits.maxPreparedStatements, 1, 1_000_000),
    maxPortals: int(limits.maxPortals, 'limits.maxPortals', DEFAULTS.limits.maxPortals, 1, 1_000_000),
    maxAppendBytes: int(limits.maxAppendBytes, 'limits.maxAppendBytes', DEFAULTS.limits.maxAppendBytes, 1024, 16 * 1024 * 1024 * 1024),
  };
}

/**
 * A retention shorter than the floor would erase logs the EU AI Act asks a
 * high-risk AI system to keep; refused here so that neither the hourly job
 * nor cot_retain(), which run the configured period, can ever run it.
 */
function retention(ledger: Obj): { retentionDays: number; retentionFloorDays: number } {
  const days = int(ledger.retentionDays, 'ledger.retentionDays', DEFAULTS.ledger.retentionDays, 0, 100_000);
  const floor = int(ledger.retentionFloorDays, 'ledger.retentionFloorDays', DEFAULTS.ledger.retentionFloorDays, 0, 100_000);
  if (days > 0 && days < floor) {
    fail(
      'ledger.retentionDays',
      days,
      `shorter than ledger.retentionFloorDays = ${floor} (the EU AI Act, Articles 19(1) and 26(6), keeps a high-risk AI system's logs at least six months): ` +
        `raise retentionDays to ${floor} or more (0 keeps everything), or set ledger.retentionFloorDays: 0 if the system is not a high-risk AI system under the Act`,
    );
  }
  return { retentionDays: days, retentionFloorDays: floor };
}

function ledgerConfig(ledger: Obj): Config['ledger'] {
  return {
    enabled: ledgersEnabled(ledger.enabled),
    maxContentBytes: int(ledger.maxContentBytes, 'ledger.maxContentBytes', DEFAULTS.ledger.maxContentBytes, 1, 64 * 1024 * 1024),
    embeddingSampleRate: fraction(ledger.embeddingSampleRate, 'ledger.embeddingSampleRate', DEFAULTS.ledger.embeddingSampleRate),
    embeddingAlwaysTypes: stepTypes(ledger.embeddingAlwaysTypes, 'ledger.embeddingAlwaysTypes', DEFAULTS.ledger.embeddingAlwaysTypes),
    ...retention(ledger),
    verifyIntervalSeconds: int(ledger.verifyIntervalSeconds, 'ledger.verifyIntervalSeconds', DEFAULTS.ledger.verifyIntervalSeconds, 0, 31_536_000),
    watchIntervalSeconds: int(ledger.watchIntervalSeconds, 'ledger.watchIntervalSeconds', DEFAULTS.ledger.watchIntervalSeconds, 0, 86_400),
    sessionCacheMB: int(ledger.sessionCacheMB, 'ledger.sessionCacheMB', DEFAULTS.ledger.sessionCacheMB, 0, 1_048_576),
    stepStore: bool(ledger.stepStore, 'ledger.stepStore', DEFAULTS.ledger.stepStore),
    hashVersion: oneOf(ledger.hashVersion, 'ledger.hashVersion', DEFAULTS.ledger.hashVersion, LEDGER_HASH_VERSIONS),
    sessionOwner: oneOf(ledger.sessionOwner, 'ledger.sessionOwner', DEFAULTS.ledger.sessionOwner, SESSION_OWNERS),
  };
}

/** A URL alone means PostgreSQL; PostgreSQL without a URL has nothing to connect to. */
function engineConfig(section: Obj, urlValue: Json | undefined, kindValue: Json | undefined): Config['engine'] {
  if (urlValue !== undefined && urlValue !== null && (typeof urlValue !== 'string' || urlValue === ''))
    fail('engine.url', urlValue, 'expected a postgres:// URL');
  const url = (urlValue ?? null) as string | null;
  const kind = oneOf(kindValue ?? (url === null ? undefined : 'postgres'), 'engine.kind', DEFAULTS.engine.kind, ENGINE_KINDS);
  if (kind === 'postgres' && url === null)
    fail('engine.url', null, 'engine.kind is postgres: set engine.url (or COTWIRE_ENGINE_URL, --engine-url) to a postgres:// URL');
  if (url !== null) {
    if (kind === 'duckdb') fail('engine.url', url, 'engine.kind is duckdb, which takes no URL (its file is database.path)');
    if (!/^postgres(ql)?:\/\//.test(url)) fail('engine.url', redactUrl(url), 'expected a postgres:// or postgresql:// URL');
  }
  const rolePrefix = str(section.rolePrefix, 'engine.rolePrefix', DEFAULTS.engine.rolePrefix);
  if (!/^[a-z][a-z0-9_]{0,40}$/.test(rolePrefix)) fail('engine.rolePrefix', rolePrefix, 'expected a lower-case identifier of at most 41 characters');
  const answerTimeoutMs = int(section.answerTimeoutMs, 'engine.answerTimeoutMs', DEFAULTS.engine.answerTimeoutMs, 100, 3_600_000);
  return { kind, url, rolePrefix, answerTimeoutMs };
}

/** A URL as it may appear in a message or a log: without its password. */
export function redactUrl(url: string): string {
  return url.replace(/^(postgres(?:ql)?:\/\/[^:/@]*):[^@/]*@/, '$1:***@');
}

function deepFreeze<T>(v: T): T {
  if (typeof v === 'object' && v !== null) {
    for (const x of Object.values(v)) deepFreeze(x);
    Object.freeze(v);
  }
  return v;
}
