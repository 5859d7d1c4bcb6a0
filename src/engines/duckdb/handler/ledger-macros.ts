import { STEPS_TABLE, type LedgerTable } from '../../../ledger/chain/schema.js';
import { CHECKPOINTS_TABLE } from '../../../ledger/log/checkpoint-schema.js';
import { EMBEDDINGS_TABLE } from '../../../ledger/embeddings.js';
import { AUDIT_MACROS } from '../dialect/audit-sql.js';
import { duckdbDialect } from '../dialect/dialect.js';
import { damagedVerifyMacros } from '../dialect/verify-sql.js';
import type { ConnectionServices } from './context.js';

/** Which rows of a ledger a user with an org_id reads: a predicate over its columns, or null for every row (access.ts makes it). */
export type TenantPredicate = (name: string, schema: string | null) => string | null;

/**
 * The SQL verification and reading macros for the ledgers that exist now, in
 * groups that stand alone: one group per ledger, and the steps ledger's
 * readers. Every client connection defines them, and so does the catalog
 * snapshot's, whose pg_proc must list what a client's would. A user with an
 * org_id gets them scoped to its organisation (scopedMacros).
 */
export async function ledgerMacroGroups(services: Pick<ConnectionServices, 'ledgers' | 'search'>, scope: TenantPredicate | null = null): Promise<string[][]> {
  const ledgers = await services.ledgers.all();
  const groups: string[][] = [scope === null ? [...AUDIT_MACROS] : AUDIT_MACROS.map((m) => auditScoped(m, scope))];
  for (const t of ledgers)
    groups.push(scope === null ? duckdbDialect.verifyFunctions(t) : duckdbDialect.verifyFunctions(t).map((m) => verifyScoped(m, t, scope)));
  for (const d of await services.ledgers.damaged()) groups.push(damagedVerifyMacros(d, d.reason));
  const steps = ledgers.find((t) => t.isSteps);
  const reads = (sql: readonly string[]): string[] => (scope === null ? [...sql] : sql.map((m) => readsScoped(m, scope)));
  if (steps !== undefined) groups.push(reads(duckdbDialect.stepsFunctions(steps)));
  if (steps !== undefined) groups.push(reads(services.search.macros));
  if (steps !== undefined && ledgers.some((t) => t.schema === 'main' && t.name === CHECKPOINTS_TABLE)) {
    groups.push(reads(duckdbDialect.proofFunctions()));
    groups.push(reads(duckdbDialect.receiptFunctions(steps)));
  }
  return groups;
}

/** `CREATE OR REPLACE TEMP MACRO name(args) AS TABLE body`: the head and the body. */
function macroParts(sql: string): { head: string; body: string } {
  const m = /^(CREATE OR REPLACE TEMP MACRO [\s\S]*?\) AS TABLE)([\s\S]*)$/.exec(sql);
  if (m === null) throw new Error(`not a table macro: ${sql.slice(0, 60)}`);
  return { head: m[1] as string, body: m[2] as string };
}

/** The steps ledger and its vectors as the reading macros name them, each read through the organisation's predicate. */
function readsScoped(sql: string, scope: TenantPredicate): string {
  let out = sql;
  for (const name of [STEPS_TABLE, EMBEDDINGS_TABLE]) {
    const where = scope(name, 'main') ?? 'true';
    out = out.replace(new RegExp(`(?<![\\w$."])main\\.${name}(?![\\w$])`, 'g'), `(SELECT * FROM main.${name} WHERE ${where})`);
  }
  return out;
}

/**
 * A ledger's verification, answered only for the organisation's own chains:
 * the chains are verified whole, as they were written (a chain holds one
 * organisation's steps once sessions are owned), and the verdicts of other
 * chains are left out, as are the audit's findings about them.
 */
function verifyScoped(sql: string, table: LedgerTable, scope: TenantPredicate): string {
  const { head, body } = macroParts(sql);
  const where = scope(table.name, table.schema);
  const relation = `"${table.catalog.replaceAll('"', '""')}"."${table.schema.replaceAll('"', '""')}"."${table.name.replaceAll('"', '""')}"`;
  const key = table.chainKey === null ? '' : `"${table.chainKey.replaceAll('"', '""')}"`;
  // One chain: whether it is the organisation's, by the ledger's index on the chain key; every chain: the organisation's keys.
  const own =
    table.chainKey === null || where === 'false'
      ? 'false'
      : where === null
        ? 'true'
        : head.endsWith('(chain) AS TABLE')
          ? `EXISTS (SELECT 1 FROM ${relation} WHERE ${key} = chain AND ${where})`
          : `v.chain_key IN (SELECT CAST(${key} AS VARCHAR) FROM ${relation} WHERE ${where})`;
  return `${head} SELECT v.* FROM (${body}) AS v WHERE ${own}`;
}

/** The audit's findings about the organisation's own sessions only. */
function auditScoped(sql: string, scope: TenantPredicate): string {
  const { head, body } = macroParts(sql);
  const where = scope(STEPS_TABLE, 'main') ?? 'true';
  return `${head} SELECT a.* FROM (${body}) AS a WHERE a.ledger = 'main.${STEPS_TABLE}' AND a.chain_key IN (SELECT session_id FROM main.${STEPS_TABLE} WHERE ${where})`;
}
