import { withAuditFindings } from './audit-sql.js';
import { columnDigestSql, withRedactedDigests } from '../../../ledger/erasure/redactions.js';
import { RETAINED_HASH, RETAINED_STEPS, withRetainedPrefix } from '../../../ledger/erasure/retention-sql.js';
import {
  canonicalTextSql,
  HASH_VERSION,
  HASH_VERSION_V2,
  HASH_VERSION_V3,
  committedPlaces,
  quoteIdent,
  quoteLiteral,
  SALT_COLUMN,
  STEPS_TABLE,
  type LedgerTable,
} from '../../../ledger/chain/schema.js';
import { BREAK_CTES, BREAK_ORDER, chainKeySql, gapCtes, verdictColumns, verifyMacroName } from '../../../ledger/chain/verdict-sql.js';

/**
 * The SQL side of verification: macros any client can call, written so that
 * they recompute every hash from the README's specification with DuckDB's
 * own sha256(). Built-in functions are called by their qualified names, so
 * that no user object could change what verification answers.
 */

const fn = (name: string): string => `system.main.${name}`;

/** lp(s) of a constant, as hex: its length and bytes are known when the SQL is written. */
function lpHex(s: string): string {
  const bytes = Buffer.from(s, 'utf8');
  const len = Buffer.alloc(8);
  len.writeBigUInt64BE(BigInt(bytes.length));
  return Buffer.concat([len, bytes]).toString('hex');
}

/**
 * The expression that recomputes a row's current_hash. The pre-image is
 * built as one hex string with a single concat() and decoded once: chaining
 * BLOB || per column copied the growing pre-image forty times per row.
 */
export function hashSql(table: LedgerTable, redacted = false): string {
  if (table.hashVersion === HASH_VERSION_V2) return hashSqlV2(table, redacted);
  if (table.hashVersion === HASH_VERSION_V3) return hashSqlV3(table, redacted);
  const parts = [`'${lpHex(HASH_VERSION)}${lpHex(table.name)}'`];
  for (const c of table.columns) {
    if (c.name === 'current_hash') continue;
    parts.push(`'${lpHex(c.name)}'`, lpValueHex(canonicalTextSql(c.name, c.type)));
  }
  return `${fn('sha256')}(${fn('unhex')}(${fn('concat')}(${parts.join(', ')})))`;
}

/** lp(v) of a canonical text expression, as hex (the NULL mark for NULL). */
function lpValueHex(v: string): string {
  return `CASE WHEN ${v} IS NULL THEN 'ffffffffffffffff' ELSE ${fn('lpad')}(${fn('to_hex')}(${fn('octet_length')}(${fn('encode')}(${v}))), 16, '0') || ${fn('hex')}(${fn('encode')}(${v})) END`;
}

/**
 * The `cotwire/v2` form: each column enters as the hex of SHA-256(lp(text))
 * (canonical.ts, preimageV2). `redacted`: over rows joined
 * withRedactedDigests, whose recorded digests stand in for redacted values.
 */
export function hashSqlV2(table: LedgerTable, redacted = false): string {
  const parts = [`'${lpHex(HASH_VERSION_V2)}${lpHex(table.name)}'`];
  for (const c of table.columns) {
    if (c.name === 'current_hash') continue;
    const digest = (text: string): string => `${fn('sha256')}(${fn('unhex')}(${lpValueHex(text)}))`;
    parts.push(`'${lpHex(c.name)}'`, redacted ? columnDigestSql(table, c, digest) : digest(canonicalTextSql(c.name, c.type)));
  }
  return `${fn('sha256')}(${fn('unhex')}(${fn('concat')}(${parts.join(', ')})))`;
}

/**
 * The `cotwire/v3` form (ledger/chain/commitments.ts): a committed column
 * enters as SHA-256(key || lp(text)), its key taken from the row's salt (two
 * to a block of SHA-256(lp("cotwire/v3 keys") || salt || u32(block))) or,
 * after a redaction, from the keys its salt column lists; any other column
 * as lp(text). A salt column in neither form gives no key, and the row no
 * hash. `redacted`: as for v2, with recorded commitments.
 */
export function hashSqlV3(table: LedgerTable, redacted = false): string {
  const parts = [`'${lpHex(HASH_VERSION_V3)}${lpHex(table.name)}'`];
  const salt = quoteIdent(SALT_COLUMN);
  const domain = lpHex('cotwire/v3 keys');
  const places = committedPlaces(table.columns.map((c) => c.name));
  for (const c of table.columns) {
    if (c.name === 'current_hash' || c.name === SALT_COLUMN) continue;
    parts.push(`'${lpHex(c.name)}'`);
    const m = places.get(c.name);
    if (m === undefined) {
      parts.push(lpValueHex(canonicalTextSql(c.name, c.type)));
      continue;
    }
    const block = Math.floor(m / 2)
      .toString(16)
      .padStart(8, '0');
    const listed = `${fn('json_extract_string')}(${salt}, ${quoteLiteral(`$."${c.name.replaceAll('\\', '\\\\').replaceAll('"', '\\"')}"`)})`;
    const key = `CASE WHEN ${fn('regexp_full_match')}(${salt}, '[0-9a-f]{32}')
        THEN ${fn('substr')}(${fn('sha256')}(${fn('unhex')}('${domain}' || ${salt} || '${block}')), ${1 + (m % 2) * 32}, 32)
      WHEN ${fn('json_valid')}(${salt}) AND ${fn('regexp_full_match')}(coalesce(${listed}, ''), '[0-9a-f]{32}') THEN ${listed} END`;
    const commit = (text: string): string => `${fn('sha256')}(${fn('unhex')}((${key}) || ${lpValueHex(text)}))`;
    parts.push(redacted ? columnDigestSql(table, c, commit) : commit(canonicalTextSql(c.name, c.type)));
  }
  return `${fn('sha256')}(${fn('unhex')}(${fn('concat')}(${parts.join(', ')})))`;
}

/**
 * One row per chain (`chain`, the SQL of one chain's key, when `where` keeps only it): whether it verifies, how many steps it has, and where
 * it first breaks (step_index, kind, expected and actual hash). `where` is a
 * SQL condition on the ledger's rows that keeps whole chains (for example
 * `chainKeySql(table) = $1`), or null for every chain.
 */
export function verifySql(table: LedgerTable, where: string | null, chain: string | null = null): string {
  const key = chainKeySql(table);
  const from = `${quoteIdent(table.catalog)}.${quoteIdent(table.schema)}.${quoteIdent(table.name)}`;
  return `
WITH raw AS MATERIALIZED (
  SELECT ${key} AS chain_key, step_index, ledger_seq, prev_hash, current_hash, ${hashSql(table, true)} AS recomputed,
    lag(step_index) OVER w AS prev_step, lag(ledger_seq) OVER w AS prev_seq,
    -- A chain whose first steps retention removed starts at the step after them, linked to the last one.
    row_number() OVER w - 1 + coalesce(${RETAINED_STEPS}, 0) AS position,
    lag(current_hash, 1, coalesce(${RETAINED_HASH}, '')) OVER w AS expected_prev,
    -- Ordered by step_index, two rows with the same index are neighbours.
    coalesce(step_index = lag(step_index) OVER w, false) OR coalesce(step_index = lead(step_index) OVER w, false) AS repeated_index
  FROM ${withRetainedPrefix(table, withRedactedDigests(table, from, chain), key, chain)}
  ${where === null ? '' : `WHERE ${where}`}
  WINDOW w AS (PARTITION BY ${key} ORDER BY step_index, ledger_seq)
),
${gapCtes(table.losses ?? null, fn)},
${BREAK_CTES}
SELECT chain_key,
  ${verdictColumns(
    (expr) => `arg_min(${expr}, ${BREAK_ORDER}) FILTER (WHERE break_kind IS NOT NULL)`,
    (expr) => `CAST(${expr} AS INTEGER)`,
  )}
FROM checked
GROUP BY chain_key
ORDER BY chain_key`;
}

/** The verification macros for one ledger: NAME(key) for one chain, NAME_all() for every chain. */
export function verifyMacros(table: LedgerTable): string[] {
  const name = verifyMacroName(table);
  return [
    `CREATE OR REPLACE TEMP MACRO ${name}(chain) AS TABLE ${withAuditFindings(table, verifySql(table, `${chainKeySql(table)} = chain`, 'chain'), 'chain')}`,
    `CREATE OR REPLACE TEMP MACRO ${name}_all() AS TABLE ${withAuditFindings(table, verifySql(table, null), null)}`,
  ];
}

/**
 * A damaged ledger's verification macros (ledger/chain/catalog.ts): they say why
 * instead of verifying, since every row would read as edited against a
 * changed shape, and a dropped ledger has no rows to read.
 */
export function damagedVerifyMacros(ledger: Pick<LedgerTable, 'schema' | 'name'>, reason: string): string[] {
  const name = verifyMacroName(ledger);
  const message = quoteLiteral(`ledger "${ledger.schema}.${ledger.name}" is damaged: ${reason}; SELECT * FROM cot_audit() lists what the audit found`);
  return [
    `CREATE OR REPLACE TEMP MACRO ${name}(chain) AS TABLE SELECT system.main.error(${message}) AS valid`,
    `CREATE OR REPLACE TEMP MACRO ${name}_all() AS TABLE SELECT system.main.error(${message}) AS valid`,
  ];
}

/** Reading macros for the default ledger. */
export function stepsReadMacros(steps: LedgerTable): string[] {
  const from = `main.${STEPS_TABLE}`;
  return [
    `CREATE OR REPLACE TEMP MACRO cot_replay(session) AS TABLE SELECT * FROM ${from} WHERE session_id = session ORDER BY step_index`,
    `CREATE OR REPLACE TEMP MACRO cot_trace(trace) AS TABLE SELECT * FROM ${from} WHERE trace_id = CAST(trace AS UUID)`,
    // Only the agent's own sessions are verified, not every chain in the ledger.
    `CREATE OR REPLACE TEMP MACRO cot_sessions(agent) AS TABLE
     WITH v AS (${verifySql(steps, `session_id IN (SELECT session_id FROM ${from} WHERE agent_id IS NOT DISTINCT FROM agent)`)})
     SELECT s.session_id, count(*)::BIGINT AS step_count, min(s.created_at) AS first_step_at, max(s.created_at) AS last_step_at,
            any_value(v.valid) AS chain_valid
     FROM ${from} s JOIN v ON v.chain_key = s.session_id
     WHERE s.agent_id IS NOT DISTINCT FROM agent
     GROUP BY s.session_id ORDER BY first_step_at`,
  ];
}
