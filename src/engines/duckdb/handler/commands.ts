import type { Token } from '../../../sql/lexer.js';
import { ParsedStatement } from '../../../sql/parsed.js';
import { skipLockedRefusal } from '../catalog/rewrite/queries.js';
import { isKnownSetting } from './settings.js';

/**
 * Statements that cotwire answers itself because they concern the session or
 * transaction state rather than data: transaction control (with savepoint
 * emulation) and PostgreSQL's run-time parameters. Everything else goes to the
 * engine.
 */
export type SessionCommand =
  /** readOnly: READ ONLY (true), READ WRITE (false), or neither (null: default_transaction_read_only). */
  | { readonly kind: 'begin'; readonly readOnly: boolean | null }
  | { readonly kind: 'commit' }
  | { readonly kind: 'rollback' }
  | { readonly kind: 'savepoint'; readonly name: string }
  | { readonly kind: 'release'; readonly name: string }
  | { readonly kind: 'rollback-to'; readonly name: string }
  | { readonly kind: 'set'; readonly name: string; readonly value: string | null; readonly local: boolean }
  /** SET TRANSACTION ... (session false) or SET SESSION CHARACTERISTICS AS TRANSACTION ... (session true). */
  | { readonly kind: 'set-transaction'; readonly session: boolean; readonly readOnly: boolean | null }
  | { readonly kind: 'reset'; readonly name: string | null }
  | { readonly kind: 'show'; readonly name: string }
  | { readonly kind: 'discard'; readonly what: string }
  /** DEALLOCATE name | ALL (null): SQL-level and protocol-level prepared statements share one namespace. */
  | { readonly kind: 'deallocate'; readonly name: string | null }
  | {
      readonly kind: 'declare';
      readonly name: string;
      readonly binary: boolean;
      readonly hold: boolean;
      readonly scroll: boolean;
      /** The cursor's query, and where it starts in the statement. */
      readonly query: string;
      readonly queryOffset: number;
    }
  /** FETCH or MOVE; count null is ALL; backward for any direction that is not forward. */
  | { readonly kind: 'fetch'; readonly name: string; readonly count: number | null; readonly move: boolean; readonly backward: boolean }
  | { readonly kind: 'close'; readonly name: string | null }
  /** SELECT [pg_catalog.]set_config('name', 'value', is_local): a SET that answers the new value (pg_dump's first query). */
  | { readonly kind: 'set-config'; readonly name: string; readonly value: string; readonly local: boolean }
  /**
   * The function Sequelize creates for findOrCreate (an INSERT that catches a
   * unique violation, in PL/pgSQL): kept by the session, which runs its
   * INSERT when the function is called (see planner.ts).
   */
  | { readonly kind: 'temp-function'; readonly name: string; readonly insert: string | null }
  /** LOCK [TABLE] [ONLY] name [, ...] [IN mode MODE] [NOWAIT]: the tables, each a dotted name, and the mode. */
  | { readonly kind: 'lock'; readonly tables: ReadonlyArray<readonly string[]>; readonly mode: string }
  /** CREATE EXTENSION [IF NOT EXISTS] name [WITH] [SCHEMA s] [VERSION v] [CASCADE]: recorded in the catalog (pg_extension). */
  | { readonly kind: 'create-extension'; readonly name: string; readonly ifNotExists: boolean; readonly schema: string | null }
  /** DROP EXTENSION [IF EXISTS] name [, ...] [CASCADE | RESTRICT]. */
  | { readonly kind: 'drop-extension'; readonly names: readonly string[]; readonly ifExists: boolean }
  /** A PostgreSQL command cotwire recognises and cannot serve: 0A000 with a hint, not a syntax error. */
  | { readonly kind: 'unsupported'; readonly command: string; readonly hint: string };

const NO_PROCEDURES = 'cotwire runs no procedural languages; a SQL function of one expression is CREATE FUNCTION f(x) AS <expression> (a DuckDB macro).';

const NO_NOTIFICATIONS = 'cotwire sends no asynchronous notifications. Poll instead: a ledger is ordered by ledger_seq and created_at.';

const upper = (t: Token | undefined): string => (t?.kind === 'word' ? t.text.toUpperCase() : '');

function identifier(t: Token | undefined): string | null {
  if (t === undefined) return null;
  if (t.kind === 'word') return t.text.toLowerCase();
  if (t.kind === 'quoted' && t.text.startsWith('"')) return t.text.slice(1, -1).replaceAll('""', '"');
  return null;
}

/** A dotted parameter name (a.b) starting at `i`; returns the name and the index after it. */
function settingName(tokens: readonly Token[], i: number): { name: string; next: number } | null {
  let name = identifier(tokens[i]);
  if (name === null) return null;
  let j = i + 1;
  while (tokens[j]?.text === '.' && identifier(tokens[j + 1]) !== null) {
    name += `.${identifier(tokens[j + 1]) as string}`;
    j += 2;
  }
  return { name, next: j };
}

function unquoteString(text: string): string {
  if (text.startsWith("'")) return text.slice(1, -1).replaceAll("''", "'");
  if (/^[eE]'/.test(text)) {
    return text
      .slice(2, -1)
      .replaceAll("''", "'")
      .replace(/\\(.)/g, (_, c: string) => ({ n: '\n', t: '\t', r: '\r', b: '\b', f: '\f' })[c] ?? c);
  }
  const dollar = /^(\$[^$]*\$)([\s\S]*)\1$/.exec(text);
  if (dollar !== null) return dollar[2] as string;
  return text;
}

/** The value list of SET: 'a', b, "C", -8 → "a, b, \"C\", -8"; null for DEFAULT. */
function settingValue(tokens: readonly Token[], i: number): string | null | undefined {
  if (i >= tokens.length) return undefined;
  if (tokens.length === i + 1 && upper(tokens[i]) === 'DEFAULT') return null;
  const parts: string[] = [];
  let current = '';
  for (let j = i; j < tokens.length; j++) {
    const t = tokens[j] as Token;
    if (t.kind === 'punct' && t.text === ',') {
      parts.push(current);
      current = '';
      continue;
    }
    if (t.kind === 'string') current += unquoteString(t.text);
    else if (t.kind === 'word') current += t.text.toLowerCase();
    else if (t.kind === 'quoted' || t.kind === 'number' || t.kind === 'operator' || t.text === '.') current += t.text;
    else return undefined;
  }
  parts.push(current);
  return parts.join(', ');
}

/** DECLARE name [BINARY] [ASENSITIVE | INSENSITIVE] [[NO] SCROLL] CURSOR [{WITH | WITHOUT} HOLD] FOR query */
function recognizeDeclare(tokens: readonly Token[], text: string): SessionCommand | null {
  const name = identifier(tokens[1]);
  if (name === null) return null;
  let binary = false;
  let scroll = false;
  let hold = false;
  let i = 2;
  for (;;) {
    const w = upper(tokens[i]);
    if (w === 'BINARY') binary = true;
    else if (w === 'SCROLL') scroll = true;
    else if (w === 'NO' && upper(tokens[i + 1]) === 'SCROLL') i++;
    else if (w !== 'ASENSITIVE' && w !== 'INSENSITIVE') break;
    i++;
  }
  if (upper(tokens[i]) !== 'CURSOR') return null;
  i++;
  if ((upper(tokens[i]) === 'WITH' || upper(tokens[i]) === 'WITHOUT') && upper(tokens[i + 1]) === 'HOLD') {
    hold = upper(tokens[i]) === 'WITH';
    i += 2;
  }
  if (upper(tokens[i]) !== 'FOR' || tokens[i + 1] === undefined) return null;
  const start = (tokens[i + 1] as Token).start;
  return { kind: 'declare', name, binary, hold, scroll, query: text.slice(start), queryOffset: start };
}

/** FETCH / MOVE [direction] [FROM | IN] name */
function recognizeFetch(tokens: readonly Token[], move: boolean): SessionCommand | null {
  let i = 1;
  let count: number | null = 1;
  let backward = false;
  const number = (t: Token | undefined): number | null => (t?.kind === 'number' && /^\d+$/.test(t.text) ? Number(t.text) : null);
  const w = upper(tokens[i]);
  if (w === 'NEXT') i++;
  else if (w === 'ALL') {
    count = null;
    i++;
  } else if (w === 'FORWARD') {
    i++;
    if (upper(tokens[i]) === 'ALL') {
      count = null;
      i++;
    } else if (number(tokens[i]) !== null) {
      count = number(tokens[i]);
      i++;
    }
  } else if (['PRIOR', 'FIRST', 'LAST', 'ABSOLUTE', 'RELATIVE', 'BACKWARD'].includes(w)) {
    backward = true;
    i++;
    if (number(tokens[i]) !== null || upper(tokens[i]) === 'ALL' || tokens[i]?.text === '-') i += tokens[i]?.text === '-' ? 2 : 1;
  } else if (tokens[i]?.text === '-' && number(tokens[i + 1]) !== null) {
    backward = true;
    i += 2;
  } else if (number(tokens[i]) !== null) {
    count = number(tokens[i]);
    i++;
  }
  if (upper(tokens[i]) === 'FROM' || upper(tokens[i]) === 'IN') i++;
  const name = identifier(tokens[i]);
  if (name === null || i + 1 !== tokens.length) return null;
  return { kind: 'fetch', name, count, move, backward };
}

/**
 * FOR UPDATE SKIP LOCKED (job queues: pg-boss, graphile-worker) skips rows other sessions lock; DuckDB locks none,
 * and without the skip two workers would claim the same row (or one fails with 40001): refused, in a query or in
 * the subquery or CTE of a DML statement.
 */
function skipLockedRefused(tokens: readonly Token[], text: string | undefined): SessionCommand | null {
  const skip = tokens.findIndex((t, i) => upper(t) === 'SKIP' && upper(tokens[i + 1]) === 'LOCKED');
  if (skip < 0 || text === undefined) return null;
  const hint = skipLockedRefusal(new ParsedStatement(text, tokens).tree);
  return hint === null ? null : { kind: 'unsupported', command: 'SELECT ... SKIP LOCKED', hint };
}

export function recognizeCommand(tokens: readonly Token[], text?: string): SessionCommand | null {
  const w0 = upper(tokens[0]);
  const w1 = upper(tokens[1]);
  switch (w0) {
    case 'DECLARE':
      return text === undefined ? null : recognizeDeclare(tokens, text);
    case 'FETCH':
    case 'MOVE':
      return recognizeFetch(tokens, w0 === 'MOVE');
    case 'CLOSE': {
      if (w1 === 'ALL' && tokens.length === 2) return { kind: 'close', name: null };
      const name = identifier(tokens[1]);
      return name === null || tokens.length !== 2 ? null : { kind: 'close', name };
    }
    case 'DEALLOCATE': {
      const i = w1 === 'PREPARE' ? 2 : 1;
      if (upper(tokens[i]) === 'ALL' && tokens.length === i + 1) return { kind: 'deallocate', name: null };
      const name = identifier(tokens[i]);
      return name === null || tokens.length !== i + 1 ? null : { kind: 'deallocate', name };
    }
    case 'BEGIN':
    case 'START':
      if (w0 === 'START' && w1 !== 'TRANSACTION') return null;
      return { kind: 'begin', readOnly: accessMode(tokens) };
    case 'COMMIT':
    case 'END':
      if (w1 === 'PREPARED') return null;
      return { kind: 'commit' };
    case 'ABORT':
      return { kind: 'rollback' };
    case 'ROLLBACK': {
      if (w1 === 'PREPARED') return null;
      let i = 1;
      if (w1 === 'WORK' || w1 === 'TRANSACTION') i = 2;
      if (upper(tokens[i]) === 'TO') {
        i++;
        if (upper(tokens[i]) === 'SAVEPOINT') i++;
        const name = identifier(tokens[i]);
        return name === null ? null : { kind: 'rollback-to', name };
      }
      return { kind: 'rollback' };
    }
    case 'SAVEPOINT': {
      const name = identifier(tokens[1]);
      return name === null ? null : { kind: 'savepoint', name };
    }
    case 'RELEASE': {
      const name = identifier(tokens[w1 === 'SAVEPOINT' ? 2 : 1]);
      return name === null ? null : { kind: 'release', name };
    }
    case 'SET':
      return recognizeSet(tokens);
    case 'RESET': {
      if (w1 === 'ALL' && tokens.length === 2) return { kind: 'reset', name: null };
      const n = settingName(tokens, 1);
      if (n === null || n.next !== tokens.length) return null;
      return isKnownSetting(n.name) || n.name.includes('.') ? { kind: 'reset', name: n.name } : null;
    }
    case 'SHOW': {
      if (w1 === 'ALL' && tokens.length === 2) return { kind: 'show', name: 'all' };
      if (w1 === 'TIME' && upper(tokens[2]) === 'ZONE' && tokens.length === 3) return { kind: 'show', name: 'TimeZone' };
      if (w1 === 'TRANSACTION' && upper(tokens[2]) === 'ISOLATION' && upper(tokens[3]) === 'LEVEL' && tokens.length === 4) {
        return { kind: 'show', name: 'transaction_isolation' };
      }
      if (w1 === 'SESSION' && upper(tokens[2]) === 'AUTHORIZATION' && tokens.length === 3) {
        return { kind: 'show', name: 'session_authorization' };
      }
      const n = settingName(tokens, 1);
      if (n === null || n.next !== tokens.length) return null;
      return isKnownSetting(n.name) || n.name.includes('.') ? { kind: 'show', name: n.name } : null;
    }
    case 'UPDATE':
    case 'DELETE':
    case 'INSERT':
      // A job queue's claim: UPDATE job ... WHERE id IN (SELECT ... FOR UPDATE SKIP LOCKED).
      return skipLockedRefused(tokens, text);
    case 'SELECT':
    case 'WITH': {
      const refused = skipLockedRefused(tokens, text);
      if (refused !== null) return refused;
      if (tokens.some((t, i) => t.kind === 'word' && t.text.toLowerCase() === 'pg_notify' && tokens[i + 1]?.text === '(')) {
        return { kind: 'unsupported', command: 'pg_notify', hint: NO_NOTIFICATIONS };
      }
      return w0 === 'SELECT' ? recognizeSetConfig(tokens) : null;
    }
    case 'LOCK':
      return recognizeLock(tokens);
    case 'DROP': {
      if (w1 === 'EXTENSION') return recognizeDropExtension(tokens);
      // DROP FUNCTION IF EXISTS pg_temp.testfunc(): the session's emulated function (Sequelize's findOrCreate).
      const m = /^DROP\s+FUNCTION\s+(?:IF\s+EXISTS\s+)?pg_temp\.(\w+)\s*\(\s*\)\s*;?$/i.exec((text ?? '').trim());
      return m === null ? null : { kind: 'temp-function', name: (m[1] as string).toLowerCase(), insert: null };
    }
    case 'DO':
      return { kind: 'unsupported', command: 'DO', hint: NO_PROCEDURES };
    case 'CREATE': {
      if (w1 === 'EXTENSION') return recognizeCreateExtension(tokens);
      const insertFunction = sequelizeInsertFunction(text ?? '');
      if (insertFunction !== null) return { kind: 'temp-function', ...insertFunction };
      // CREATE FUNCTION ... LANGUAGE plpgsql; DuckDB's CREATE FUNCTION f(x) AS x + 1 is a macro and stays.
      let i = 1;
      if (upper(tokens[i]) === 'OR' && upper(tokens[i + 1]) === 'REPLACE') i += 2;
      if (upper(tokens[i]) !== 'FUNCTION' && upper(tokens[i]) !== 'PROCEDURE') return null;
      const pg = tokens.some((t, j) => upper(t) === 'LANGUAGE' || (upper(t) === 'RETURNS' && j > i));
      return pg ? { kind: 'unsupported', command: `CREATE ${upper(tokens[i])} ... LANGUAGE`, hint: NO_PROCEDURES } : null;
    }
    case 'LISTEN':
    case 'UNLISTEN':
    case 'NOTIFY':
      return { kind: 'unsupported', command: w0, hint: NO_NOTIFICATIONS };
    case 'DISCARD': {
      const what = w1 === 'TEMPORARY' ? 'TEMP' : w1;
      return ['ALL', 'PLANS', 'SEQUENCES', 'TEMP'].includes(what) && tokens.length === 2 ? { kind: 'discard', what } : null;
    }
    default:
      return null;
  }
}

/**
 * A whole-hour offset from UTC as the IANA zone of that offset ("+02:00" is
 * Etc/GMT-2: POSIX signs are inverted); null for anything else.
 */
function offsetZone(offset: string): string | null {
  const m = /^\s*([+-]?)(\d{1,2})(?::(\d{2}))?\s*$/.exec(offset);
  if (m === null || (m[3] !== undefined && m[3] !== '00')) return null;
  const hours = Number(m[2]);
  if (hours > 14) return null;
  if (hours === 0) return 'UTC';
  return `Etc/GMT${m[1] === '-' ? '+' : '-'}${hours}`;
}

/** `SELECT [pg_catalog.]set_config('name', 'value', true|false)` and nothing else; null for any other SELECT. */
function recognizeSetConfig(tokens: readonly Token[]): SessionCommand | null {
  let i = 1;
  if (tokens[i]?.kind === 'word' && tokens[i]?.text.toLowerCase() === 'pg_catalog' && tokens[i + 1]?.text === '.') i += 2;
  if (tokens[i]?.kind !== 'word' || tokens[i]?.text.toLowerCase() !== 'set_config' || tokens[i + 1]?.text !== '(') return null;
  const name = tokens[i + 2];
  const value = tokens[i + 4];
  const local = upper(tokens[i + 6]);
  const plain = (t: Token | undefined): string | null => (t?.kind === 'string' && t.text.startsWith("'") ? t.text.slice(1, -1).replaceAll("''", "'") : null);
  const n = plain(name);
  const v = plain(value);
  if (n === null || v === null || tokens[i + 3]?.text !== ',' || tokens[i + 5]?.text !== ',' || !(local === 'TRUE' || local === 'FALSE')) return null;
  if (tokens[i + 7]?.text !== ')' || tokens.length !== i + 8) return null;
  return { kind: 'set-config', name: n, value: v, local: local === 'TRUE' };
}

/** An extension's name: an identifier or a string ('uuid-ossp' is usually written "uuid-ossp"). */
function extensionName(t: Token | undefined): string | null {
  if (t?.kind === 'string' && t.text.startsWith("'")) return unquoteString(t.text);
  return identifier(t);
}

/** CREATE EXTENSION [IF NOT EXISTS] name [WITH] [SCHEMA schema] [VERSION version] [CASCADE]; null for any other shape. */
function recognizeCreateExtension(tokens: readonly Token[]): SessionCommand | null {
  let i = 2;
  const ifNotExists = upper(tokens[i]) === 'IF' && upper(tokens[i + 1]) === 'NOT' && upper(tokens[i + 2]) === 'EXISTS';
  if (ifNotExists) i += 3;
  const name = extensionName(tokens[i]);
  if (name === null) return null;
  i++;
  if (upper(tokens[i]) === 'WITH') i++;
  let schema: string | null = null;
  while (i < tokens.length) {
    const w = upper(tokens[i]);
    if (w === 'SCHEMA' && identifier(tokens[i + 1]) !== null) {
      schema = identifier(tokens[i + 1]);
      i += 2;
    } else if ((w === 'VERSION' || w === 'FROM') && extensionName(tokens[i + 1]) !== null) {
      i += 2;
    } else if (w === 'CASCADE') {
      i++;
    } else {
      return null;
    }
  }
  return { kind: 'create-extension', name, ifNotExists, schema };
}

/** DROP EXTENSION [IF EXISTS] name [, ...] [CASCADE | RESTRICT]; null for any other shape. */
function recognizeDropExtension(tokens: readonly Token[]): SessionCommand | null {
  let i = 2;
  const ifExists = upper(tokens[i]) === 'IF' && upper(tokens[i + 1]) === 'EXISTS';
  if (ifExists) i += 2;
  const names: string[] = [];
  for (;;) {
    const name = extensionName(tokens[i]);
    if (name === null) return null;
    names.push(name);
    i++;
    if (tokens[i]?.text !== ',') break;
    i++;
  }
  if (upper(tokens[i]) === 'CASCADE' || upper(tokens[i]) === 'RESTRICT') i++;
  return i === tokens.length ? { kind: 'drop-extension', names, ifExists } : null;
}

/** A transaction's access mode among its modes: READ ONLY, READ WRITE (ISOLATION LEVEL READ COMMITTED is not one). */
function accessMode(tokens: readonly Token[]): boolean | null {
  let mode: boolean | null = null;
  for (let i = 0; i + 1 < tokens.length; i++) {
    if (upper(tokens[i]) !== 'READ') continue;
    const next = upper(tokens[i + 1]);
    if (next === 'ONLY') mode = true;
    else if (next === 'WRITE') mode = false;
  }
  return mode;
}

function recognizeSet(tokens: readonly Token[]): SessionCommand | null {
  let i = 1;
  let local = false;
  const scope = upper(tokens[1]);
  if (scope === 'SESSION' || scope === 'LOCAL') {
    if (scope === 'SESSION' && upper(tokens[2]) === 'CHARACTERISTICS') return { kind: 'set-transaction', session: true, readOnly: accessMode(tokens) };
    if (scope === 'SESSION' && upper(tokens[2]) === 'AUTHORIZATION') return null;
    local = scope === 'LOCAL';
    i = 2;
  }
  const head = upper(tokens[i]);
  if (head === 'TRANSACTION') return { kind: 'set-transaction', session: false, readOnly: accessMode(tokens) };
  if (head === 'TIME' && upper(tokens[i + 1]) === 'ZONE') {
    const rest = tokens.slice(i + 2);
    if (rest.length === 1 && (upper(rest[0]) === 'LOCAL' || upper(rest[0]) === 'DEFAULT')) {
      return { kind: 'set', name: 'TimeZone', value: null, local };
    }
    // SET TIME ZONE INTERVAL '+02:00' HOUR TO MINUTE (Sequelize): a fixed offset.
    if (upper(rest[0]) === 'INTERVAL' && rest[1]?.kind === 'string') {
      const offset = rest[1].text.slice(1, -1).replaceAll("''", "'");
      const tail = rest.slice(2).map(upper).join(' ');
      if (!(tail === '' || tail === 'HOUR TO MINUTE')) return null;
      // An offset that is no whole hour is passed on as it is, for TimeZone's own 22023.
      return { kind: 'set', name: 'TimeZone', value: offsetZone(offset) ?? offset, local };
    }
    const value = settingValue(tokens, i + 2);
    return value === undefined ? null : { kind: 'set', name: 'TimeZone', value, local };
  }
  if (head === 'NAMES') {
    const value = settingValue(tokens, i + 1);
    return value === undefined ? null : { kind: 'set', name: 'client_encoding', value, local };
  }
  if (head === 'SCHEMA' && tokens[i + 1]?.kind === 'string') {
    const value = settingValue(tokens, i + 1);
    return value === undefined || value === null ? null : { kind: 'set', name: 'search_path', value, local };
  }
  // DuckDB's own forms (SET GLOBAL, SET VARIABLE) go to the engine.
  if (head === 'GLOBAL' || head === 'VARIABLE') return null;
  const n = settingName(tokens, i);
  if (n === null) return null;
  const op = tokens[n.next];
  if (op === undefined || !(upper(op) === 'TO' || op.text === '=')) return null;
  const value = settingValue(tokens, n.next + 1);
  return value === undefined ? null : { kind: 'set', name: n.name, value, local };
}

/** LOCK's grammar, as PostgreSQL has it; null (the engine's syntax error) for anything else. */
function recognizeLock(tokens: readonly Token[]): SessionCommand | null {
  let i = 1;
  if (upper(tokens[i]) === 'TABLE') i++;
  if (upper(tokens[i]) === 'ONLY') i++;
  const tables: string[][] = [];
  for (;;) {
    const parts: string[] = [];
    for (;;) {
      const part = identifier(tokens[i]);
      if (part === null) return null;
      parts.push(part);
      i++;
      if (tokens[i]?.text !== '.') break;
      i++;
    }
    if (tokens[i]?.text === '*') i++;
    tables.push(parts);
    if (tokens[i]?.text !== ',') break;
    i++;
  }
  let mode = 'ACCESS EXCLUSIVE';
  if (upper(tokens[i]) === 'IN') {
    const words: string[] = [];
    for (i++; i < tokens.length && upper(tokens[i]) !== 'MODE'; i++) words.push(upper(tokens[i]));
    if (upper(tokens[i]) !== 'MODE' || words.length === 0) return null;
    mode = words.join(' ');
    i++;
  }
  if (upper(tokens[i]) === 'NOWAIT') i++;
  return i === tokens.length ? { kind: 'lock', tables, mode } : null;
}

/**
 * Sequelize's findOrCreate on PostgreSQL: `CREATE OR REPLACE FUNCTION
 * pg_temp.testfunc(OUT response "t", OUT sequelize_caught_exception text)
 * RETURNS RECORD AS $f$ BEGIN INSERT ... RETURNING * INTO response;
 * EXCEPTION WHEN unique_violation THEN ... END $f$ LANGUAGE plpgsql`.
 */
const SEQUELIZE_FUNCTION =
  /^CREATE\s+OR\s+REPLACE\s+FUNCTION\s+pg_temp\.(\w+)\s*\(\s*OUT\s+response\s+[^,]+,\s*OUT\s+sequelize_caught_exception\s+text\s*\)\s*RETURNS\s+RECORD\s+AS\s+(\$\w*\$)\s*BEGIN\s+(INSERT\s[\s\S]*?)\s+RETURNING\s+\*\s+INTO\s+response;\s*EXCEPTION\s+WHEN\s+unique_violation\s+THEN\s+GET\s+STACKED\s+DIAGNOSTICS\s+sequelize_caught_exception\s*=\s*PG_EXCEPTION_DETAIL;\s*END\s*\2\s*LANGUAGE\s+plpgsql\s*$/i;

function sequelizeInsertFunction(text: string): { name: string; insert: string } | null {
  const m = SEQUELIZE_FUNCTION.exec(text.trim().replace(/;$/, ''));
  return m === null ? null : { name: (m[1] as string).toLowerCase(), insert: m[3] as string };
}
