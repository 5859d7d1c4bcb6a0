import { parseOptions } from '../../../session/startup-options.js';
import { PgError } from '../../../errors/pg-error.js';
import { SqlState } from '../../../errors/sqlstate.js';
import { SERVER_VERSION, SERVER_VERSION_NUM } from '../catalog/compat.js';
import { resolveTimeZone } from '../../../engine/pg-format.js';

/**
 * PostgreSQL run-time parameters that clients set and read, kept per
 * connection. DuckDB has none of them (or locks its own), so cotwire answers
 * for them the way PostgreSQL would. Only search_path reaches the engine.
 */
interface SettingSpec {
  /** Canonical spelling, as SHOW ALL and ParameterStatus print it. */
  readonly name: string;
  readonly defaultValue: string;
  /** Sent as ParameterStatus at startup and whenever it changes (GUC_REPORT). */
  readonly report?: boolean;
  readonly readOnly?: boolean;
  readonly description: string;
  /** Returns the stored form of a new value, or throws. */
  readonly normalize?: (value: string) => string;
}

const invalidValue = (name: string, value: string, hint?: string): PgError =>
  new PgError(SqlState.InvalidParameterValue, `invalid value for parameter "${name}": "${value}"`, hint === undefined ? {} : { hint });

function oneOf(name: string, allowed: readonly string[], hint?: string): (v: string) => string {
  return (v) => {
    const found = allowed.find((a) => a.toLowerCase() === v.trim().toLowerCase());
    if (found === undefined) throw invalidValue(name, v, hint ?? `Available values: ${allowed.join(', ')}.`);
    return found;
  };
}

const onOff =
  (name: string) =>
  (v: string): string => {
    const s = v.trim().toLowerCase();
    if (['on', 'true', 'yes', '1', 't', 'y'].includes(s)) return 'on';
    if (['off', 'false', 'no', '0', 'f', 'n'].includes(s)) return 'off';
    throw invalidValue(name, v, 'Use on or off.');
  };

const UNITS_MS: ReadonlyArray<readonly [string, number]> = [
  ['d', 86_400_000],
  ['h', 3_600_000],
  ['min', 60_000],
  ['s', 1000],
  ['ms', 1],
];

/** Parses a duration such as "5s", "250", "1min" into milliseconds; renders it back as SHOW does. */
export function parseDurationMs(name: string, v: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|min|h|d|us)?\s*$/i.exec(v);
  if (m === null) throw invalidValue(name, v, 'Valid units for this parameter are "us", "ms", "s", "min", "h", and "d".');
  const n = Number(m[1]);
  const unit = (m[2] ?? 'ms').toLowerCase();
  const factor = unit === 'us' ? 0.001 : (UNITS_MS.find(([u]) => u === unit)?.[1] ?? 1);
  const ms = Math.round(n * factor);
  if (!Number.isSafeInteger(ms) || ms > 2_147_483_647) throw invalidValue(name, v, 'The value is out of range.');
  return ms;
}

function formatDuration(ms: number): string {
  if (ms === 0) return '0';
  for (const [unit, factor] of UNITS_MS) if (ms % factor === 0) return `${ms / factor}${unit}`;
  return `${ms}ms`;
}

const duration =
  (name: string) =>
  (v: string): string =>
    formatDuration(parseDurationMs(name, v));

function timeZone(v: string): string {
  const trimmed = v.trim();
  const named = resolveTimeZone(trimmed);
  if (named !== null) return named;
  // A bare hour offset, as in SET TIME ZONE -8: POSIX Etc/GMT zones invert the sign.
  const m = /^([+-]?)(\d{1,2})$/.exec(trimmed);
  if (m !== null && Number(m[2]) <= 14) {
    const hours = Number(m[2]);
    if (hours === 0) return 'UTC';
    return `Etc/GMT${m[1] === '-' ? '+' : '-'}${hours}`;
  }
  throw invalidValue('TimeZone', v, 'Use an IANA time zone name such as "Europe/Paris" or "UTC".');
}

function dateStyle(v: string): string {
  const parts = v
    .split(',')
    .map((p) => p.trim().toUpperCase())
    .filter((p) => p !== '');
  let order = 'MDY';
  let iso = false;
  for (const p of parts) {
    if (p === 'ISO') iso = true;
    else if (p === 'MDY' || p === 'DMY' || p === 'YMD') order = p;
    else if (p === 'US' || p === 'NONEURO' || p === 'NONEUROPEAN') order = 'MDY';
    else if (p === 'EURO' || p === 'EUROPEAN') order = 'DMY';
    else throw invalidValue('DateStyle', v, 'cotwire writes dates in the ISO style only, for example "ISO, MDY".');
  }
  if (!iso && parts.some((p) => !['MDY', 'DMY', 'YMD', 'US', 'EURO', 'EUROPEAN', 'NONEURO', 'NONEUROPEAN'].includes(p))) {
    throw invalidValue('DateStyle', v);
  }
  return `ISO, ${order}`;
}

function clientEncoding(v: string): string {
  // PostgreSQL ignores everything but letters and digits in an encoding name (asyncpg sends 'utf-8', quotes included).
  const s = v.toUpperCase().replace(/[^A-Z0-9]/g, '');
  if (s === 'UTF8' || s === 'UNICODE') return 'UTF8';
  if (s === 'SQLASCII') return 'SQL_ASCII';
  throw new PgError(SqlState.InvalidParameterValue, `invalid value for parameter "client_encoding": "${v}"`, {
    hint: 'cotwire speaks UTF8 only.',
  });
}

function integerIn(name: string, min: number, max: number) {
  return (v: string): string => {
    const n = Number(v.trim());
    if (!Number.isInteger(n) || n < min || n > max) {
      throw invalidValue(name, v, `${name} must be an integer between ${min} and ${max}.`);
    }
    return String(n);
  };
}

const ISOLATION = ['read uncommitted', 'read committed', 'repeatable read', 'serializable'];

const SPECS: readonly SettingSpec[] = [
  { name: 'application_name', defaultValue: '', report: true, description: 'Sets the application name to be reported in statistics and logs.' },
  { name: 'client_encoding', defaultValue: 'UTF8', report: true, normalize: clientEncoding, description: "Sets the client's character set encoding." },
  { name: 'DateStyle', defaultValue: 'ISO, MDY', report: true, normalize: dateStyle, description: 'Sets the display format for date and time values.' },
  {
    name: 'IntervalStyle',
    defaultValue: 'postgres',
    report: true,
    normalize: oneOf('IntervalStyle', ['postgres'], 'cotwire writes intervals in the postgres style only.'),
    description: 'Sets the display format for interval values.',
  },
  { name: 'TimeZone', defaultValue: 'UTC', report: true, normalize: timeZone, description: 'Sets the time zone for displaying and interpreting time stamps.' },
  { name: 'integer_datetimes', defaultValue: 'on', report: true, readOnly: true, description: 'Shows whether datetimes are integer based.' },
  {
    name: 'standard_conforming_strings',
    defaultValue: 'on',
    report: true,
    normalize: oneOf('standard_conforming_strings', ['on'], 'Backslashes in ordinary string literals are always literal in cotwire.'),
    description: "Causes '...' strings to treat backslashes literally.",
  },
  { name: 'server_version', defaultValue: SERVER_VERSION, report: true, readOnly: true, description: 'Shows the server version.' },
  { name: 'server_version_num', defaultValue: SERVER_VERSION_NUM, readOnly: true, description: 'Shows the server version as an integer.' },
  { name: 'server_encoding', defaultValue: 'UTF8', report: true, readOnly: true, description: 'Shows the server (database) character set encoding.' },
  { name: 'is_superuser', defaultValue: 'off', report: true, readOnly: true, description: 'Shows whether the current user is a superuser.' },
  { name: 'session_authorization', defaultValue: '', report: true, readOnly: true, description: 'Sets the session user name.' },
  {
    name: 'default_transaction_read_only',
    defaultValue: 'off',
    report: true,
    normalize: onOff('default_transaction_read_only'),
    description: 'Sets the default read-only status of new transactions.',
  },
  { name: 'in_hot_standby', defaultValue: 'off', report: true, readOnly: true, description: 'Shows whether hot standby is currently active.' },
  {
    name: 'extra_float_digits',
    defaultValue: '1',
    normalize: integerIn('extra_float_digits', -15, 3),
    description: 'Sets the number of digits displayed for floating-point values.',
  },
  {
    name: 'statement_timeout',
    defaultValue: '0',
    normalize: duration('statement_timeout'),
    description: 'Sets the maximum allowed duration of any statement.',
  },
  { name: 'lock_timeout', defaultValue: '0', normalize: duration('lock_timeout'), description: 'Sets the maximum allowed duration of any wait for a lock.' },
  {
    name: 'idle_in_transaction_session_timeout',
    defaultValue: '0',
    normalize: duration('idle_in_transaction_session_timeout'),
    description: 'Sets the maximum allowed idle time between queries, when in a transaction.',
  },
  {
    name: 'idle_session_timeout',
    defaultValue: '0',
    normalize: duration('idle_session_timeout'),
    description: 'Sets the maximum allowed idle time between queries, when not in a transaction.',
  },
  { name: 'search_path', defaultValue: '"$user", public', description: 'Sets the schema search order for names that are not schema-qualified.' },
  {
    name: 'client_min_messages',
    defaultValue: 'notice',
    normalize: oneOf('client_min_messages', ['debug5', 'debug4', 'debug3', 'debug2', 'debug1', 'log', 'notice', 'warning', 'error']),
    description: 'Sets the message levels that are sent to the client.',
  },
  {
    name: 'bytea_output',
    defaultValue: 'hex',
    normalize: oneOf('bytea_output', ['hex'], 'cotwire writes bytea in the hex format only.'),
    description: 'Sets the output format for bytea.',
  },
  {
    name: 'default_transaction_isolation',
    defaultValue: 'repeatable read',
    normalize: oneOf('default_transaction_isolation', ISOLATION),
    description: 'Sets the transaction isolation level of each new transaction.',
  },
  {
    name: 'transaction_isolation',
    defaultValue: 'repeatable read',
    normalize: oneOf('transaction_isolation', ISOLATION),
    description: "Sets the current transaction's isolation level.",
  },
  {
    name: 'transaction_read_only',
    defaultValue: 'off',
    normalize: onOff('transaction_read_only'),
    description: "Sets the current transaction's read-only status.",
  },
  {
    name: 'synchronous_commit',
    defaultValue: 'on',
    normalize: oneOf('synchronous_commit', ['local', 'remote_write', 'remote_apply', 'on', 'off']),
    description: "Sets the current transaction's synchronization level.",
  },
  { name: 'row_security', defaultValue: 'on', normalize: onOff('row_security'), description: 'Enable row security.' },
  {
    name: 'escape_string_warning',
    defaultValue: 'on',
    normalize: onOff('escape_string_warning'),
    description: 'Warn about backslash escapes in ordinary string literals.',
  },
  // pg_dump sets these before it reads anything; they change nothing in cotwire.
  {
    name: 'synchronize_seqscans',
    defaultValue: 'on',
    normalize: onOff('synchronize_seqscans'),
    description: 'Enable synchronized sequential scans.',
  },
  {
    name: 'quote_all_identifiers',
    defaultValue: 'off',
    normalize: onOff('quote_all_identifiers'),
    description: 'When generating SQL fragments, quote all identifiers.',
  },
  {
    name: 'enable_partitionwise_aggregate',
    defaultValue: 'off',
    normalize: onOff('enable_partitionwise_aggregate'),
    description: 'Enables partitionwise aggregation and grouping.',
  },
  { name: 'jit', defaultValue: 'off', normalize: onOff('jit'), description: 'Allow JIT compilation.' },
  { name: 'lc_messages', defaultValue: 'C', description: 'Sets the language in which messages are displayed.' },
  { name: 'lc_monetary', defaultValue: 'C', description: 'Sets the locale for formatting monetary amounts.' },
  { name: 'lc_numeric', defaultValue: 'C', description: 'Sets the locale for formatting numbers.' },
  { name: 'lc_time', defaultValue: 'C', description: 'Sets the locale for formatting date and time values.' },
  { name: 'lc_collate', defaultValue: 'C', readOnly: true, description: 'Shows the collation order locale.' },
  { name: 'lc_ctype', defaultValue: 'C', readOnly: true, description: 'Shows the character classification and case conversion locale.' },
  { name: 'max_identifier_length', defaultValue: '63', readOnly: true, description: 'Shows the maximum identifier length.' },
  { name: 'max_index_keys', defaultValue: '32', readOnly: true, description: 'Shows the maximum number of index keys.' },
  { name: 'block_size', defaultValue: '8192', readOnly: true, description: 'Shows the size of a disk block.' },
  { name: 'work_mem', defaultValue: '4MB', description: 'Sets the maximum memory to be used for query workspaces.' },
  { name: 'maintenance_work_mem', defaultValue: '64MB', description: 'Sets the maximum memory to be used for maintenance operations.' },
  { name: 'geqo', defaultValue: 'on', normalize: onOff('geqo'), description: 'Enables genetic query optimization.' },
  { name: 'enable_seqscan', defaultValue: 'on', normalize: onOff('enable_seqscan'), description: "Enables the planner's use of sequential-scan plans." },
  {
    name: 'check_function_bodies',
    defaultValue: 'on',
    normalize: onOff('check_function_bodies'),
    description: 'Check routine bodies during CREATE FUNCTION and CREATE PROCEDURE.',
  },
  { name: 'default_with_oids', defaultValue: 'off', normalize: oneOf('default_with_oids', ['off']), description: 'WITH OIDS is not supported.' },
  {
    name: 'xmloption',
    defaultValue: 'content',
    normalize: oneOf('xmloption', ['content', 'document']),
    description: 'Sets whether XML data in implicit parsing and serialization operations is to be considered as documents or content fragments.',
  },
  { name: 'max_connections', defaultValue: '100', readOnly: true, description: 'Sets the maximum number of concurrent connections.' },
];

const SPEC_BY_NAME = new Map(SPECS.map((s) => [s.name.toLowerCase(), s]));

/** The parameter names that are reported to the client, in startup order. */
export const REPORTED = SPECS.filter((s) => s.report === true).map((s) => s.name);

export function isKnownSetting(name: string): boolean {
  return SPEC_BY_NAME.has(name.toLowerCase());
}

export { parseOptions };

export class SessionSettings {
  private readonly values = new Map<string, string>();
  private readonly changed = new Map<string, string>();
  private changes = 0;
  /** Values to restore when the transaction ends (SET LOCAL). */
  private localRestore: Map<string, string> | null = null;

  constructor(overrides: ReadonlyMap<string, string>) {
    for (const s of SPECS) this.values.set(s.name.toLowerCase(), overrides.get(s.name) ?? s.defaultValue);
  }

  get(name: string): string | undefined {
    return this.values.get(name.toLowerCase());
  }

  canonicalName(name: string): string {
    return SPEC_BY_NAME.get(name.toLowerCase())?.name ?? name.toLowerCase();
  }

  /**
   * Sets a parameter; `value` null means DEFAULT. Custom names with a dot
   * (placeholders such as "myapp.tenant") are accepted, as in PostgreSQL.
   * Returns the stored value.
   */
  set(name: string, value: string | null, local = false): string {
    const key = name.toLowerCase();
    const spec = SPEC_BY_NAME.get(key);
    if (spec === undefined && !key.includes('.')) {
      throw new PgError(SqlState.UndefinedObject, `unrecognized configuration parameter "${name}"`, {
        hint: "The engine's own settings are locked; the PostgreSQL parameters that cotwire keeps are listed by SHOW ALL.",
      });
    }
    if (spec?.readOnly === true) {
      throw new PgError('55P02', `parameter "${spec.name}" cannot be changed`);
    }
    let stored: string;
    if (value === null) stored = spec?.defaultValue ?? '';
    else stored = spec?.normalize !== undefined ? spec.normalize(value) : value;
    if (local) {
      this.localRestore ??= new Map();
      if (!this.localRestore.has(key)) this.localRestore.set(key, this.values.get(key) ?? '');
    }
    this.assign(key, stored);
    return stored;
  }

  /** A value as SET would store it (validated and normalised), without storing it; null is the default. */
  normalize(name: string, value: string | null): string {
    const spec = SPEC_BY_NAME.get(name.toLowerCase());
    if (value === null) return spec?.defaultValue ?? '';
    return spec?.normalize !== undefined ? spec.normalize(value) : value;
  }

  /** At startup: values from the StartupMessage (and its `options`), validated like SET. */
  applyStartup(params: ReadonlyMap<string, string>): void {
    const all = new Map(params);
    const options = params.get('options');
    if (options !== undefined) for (const [k, v] of parseOptions(options)) all.set(k, v);
    for (const [name, value] of all) {
      const key = name.toLowerCase();
      if (key === 'options') continue;
      const spec = SPEC_BY_NAME.get(key);
      if (spec === undefined || spec.readOnly === true) {
        if (key.includes('.')) this.assign(key, value);
        continue;
      }
      this.set(spec.name, value);
    }
    this.changed.clear();
  }

  forceSet(name: string, value: string): void {
    this.assign(name.toLowerCase(), value);
  }

  private assign(key: string, value: string): void {
    const old = this.values.get(key);
    if (old !== value) this.changes++;
    this.values.set(key, value);
    const spec = SPEC_BY_NAME.get(key);
    if (spec?.report === true && old !== value) this.changed.set(spec.name, value);
  }

  resetAll(): void {
    for (const s of SPECS) if (s.readOnly !== true) this.assign(s.name.toLowerCase(), s.defaultValue);
  }

  /** Ends a transaction: SET LOCAL values revert. */
  endTransaction(): void {
    if (this.localRestore === null) return;
    for (const [key, value] of this.localRestore) this.assign(key, value);
    this.localRestore = null;
  }

  /** Moved on by every change of a value: a plan made under older values may read them (search_path, for one). */
  get version(): number {
    return this.changes;
  }

  takeChanges(): Array<[string, string]> {
    const out = [...this.changed];
    this.changed.clear();
    return out;
  }

  /** For SHOW ALL: name, setting, description. */
  all(): Array<[string, string, string]> {
    return SPECS.map((s) => [s.name, this.values.get(s.name.toLowerCase()) ?? '', s.description]);
  }

  reported(): Array<[string, string]> {
    return REPORTED.map((n) => [n, this.values.get(n.toLowerCase()) ?? '']);
  }

  get statementTimeoutMs(): number {
    return parseDurationMs('statement_timeout', this.get('statement_timeout') ?? '0');
  }

  get lockTimeoutMs(): number {
    return parseDurationMs('lock_timeout', this.get('lock_timeout') ?? '0');
  }

  get idleInTransactionTimeoutMs(): number {
    return parseDurationMs('idle_in_transaction_session_timeout', this.get('idle_in_transaction_session_timeout') ?? '0');
  }

  get timeZone(): string {
    return this.get('TimeZone') ?? 'UTC';
  }
}
