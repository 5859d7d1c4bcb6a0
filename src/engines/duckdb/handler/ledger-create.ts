import type { ExecuteOutcome } from '../../../session/handler-port.js';
import { PgError } from '../../../errors/pg-error.js';
import { SqlState } from '../../../errors/sqlstate.js';
import { unchainableColumn } from '../ledger/column-types.js';
import { recordHashVersionSql } from '../../../ledger/chain/hash-version.js';
import { addSaltColumnSql, CHAIN_COLUMNS, HASH_VERSION_V3, qualifiedName, quoteIdent } from '../../../ledger/chain/schema.js';
import type { Token } from '../../../sql/lexer.js';
import { identifierText } from '../../../sql/identifiers.js';
import type { AccessControl } from './access.js';
import { commandTag } from './command-tag.js';
import type { HandlerContext } from './context.js';
import { bindEngine, type ConnectionPortal, type EnginePlan } from './plan.js';

/** The name of the ledger a CREATE TABLE creates, or null. */
export function createdLedgerName(access: AccessControl, tokens: readonly Token[]): string[] | null {
  let i = 1;
  while (['OR', 'REPLACE', 'TEMP', 'TEMPORARY', 'PERSISTENT', 'UNLOGGED'].includes(tokens[i]?.text.toUpperCase() ?? '')) i++;
  if (tokens[i]?.text.toUpperCase() !== 'TABLE') return null;
  i++;
  if (tokens[i]?.text.toUpperCase() === 'IF') i += 3;
  const parts: string[] = [];
  for (;;) {
    const part = identifierText(tokens, i);
    if (part === null) return null;
    parts.push(part);
    if (tokens[i + 1]?.text !== '.') break;
    i += 2;
  }
  return access.isLedgerName(parts[parts.length - 1]) ? parts : null;
}

/** CREATE TABLE of a ledger, made atomic with the chain columns the server adds. */
export async function executeLedgerCreate(ctx: HandlerContext, portal: ConnectionPortal, plan: EnginePlan, parts: readonly string[]): Promise<ExecuteOutcome> {
  const own = ctx.tx.autocommit;
  try {
    const cursor = await ctx.tx.atomically(async () => {
      if (portal.statement.boundBy !== portal) bindEngine(portal, plan.statement);
      ctx.tx.wrote();
      portal.cursor = await plan.statement.execute();
      await completeLedger(ctx, parts);
      return portal.cursor;
    });
    // Other connections (the writer's among them) see the ledger once it commits:
    // now, or at the COMMIT of the enclosing transaction.
    ctx.services.ledgers.created(parts[parts.length - 1] as string);
    if (!own) ctx.tx.ledgerCreated(parts[parts.length - 1] as string);
    portal.done = true;
    return { done: true, tag: commandTag(plan.statement.kind, plan.tokens, cursor.rowsChanged) };
  } catch (err) {
    ctx.services.ledgers.invalidate();
    throw err;
  }
}

/** A column whose values the writer's texts cannot carry back into the table (ledger/column-types.ts): 0A000. */
function refuseUnchainableColumns(name: string, columns: ReadonlyArray<ReadonlyArray<unknown>>): void {
  const bad = unchainableColumn(columns.map(([, , column, type]) => ({ name: String(column), type: String(type) })));
  if (bad === null) return;
  throw new PgError(SqlState.FeatureNotSupported, `column "${bad.name}" of ledger "${name}" cannot be of type ${bad.type}`, {
    detail: bad.detail,
    hint: 'Use a type that holds the value as text or numbers: a duration as BIGINT microseconds or as text, nested strings as JSON or VARCHAR[].',
  });
}

/**
 * After CREATE TABLE of a ledger name: the server adds the chain columns,
 * in the same transaction. A table that declares one of them itself is
 * refused, so that no client can supply chain values.
 */
async function completeLedger(ctx: HandlerContext, parts: readonly string[]): Promise<void> {
  const name = parts[parts.length - 1] as string;
  const schema = parts.length > 1 ? (parts[parts.length - 2] as string) : null;
  const rows = await ctx.engine.query(
    `SELECT database_name, schema_name, column_name, data_type FROM system.main.duckdb_columns()
     WHERE lower(table_name) = lower($1) AND ($2 IS NULL OR lower(schema_name) = lower($2))`,
    [name, schema],
  );
  refuseUnchainableColumns(name, rows);
  const generated = await ctx.engine.query(
    `SELECT count(*) FROM system.main.duckdb_tables()
     WHERE lower(table_name) = lower($1) AND ($2 IS NULL OR lower(schema_name) = lower($2)) AND sql ILIKE '%GENERATED ALWAYS AS%'`,
    [name, schema],
  );
  if (Number(generated[0]?.[0] ?? 0) > 0) {
    // The writer chains a value for every column it is given; the engine computes a generated one itself.
    throw new PgError(SqlState.FeatureNotSupported, `a ledger cannot have generated columns: "${name}"`, {
      hint: 'Compute the value in the INSERT, or in a view over the ledger.',
    });
  }
  // Column names compare without regard to case, as DuckDB compares them.
  const existing = new Set(rows.map((r) => String(r[2]).toLowerCase()));
  const chain = CHAIN_COLUMNS.map((c) => c.name);
  const missing = CHAIN_COLUMNS.filter((c) => !existing.has(c.name));
  if (missing.length === 0) return;
  const declared = chain.filter((c) => existing.has(c));
  if (declared.length > 0) {
    throw new PgError('42701', `column "${declared[0] as string}" is reserved for the ledger chain of "${name}"`, {
      hint: `The server adds ${chain.join(', ')} to every ledger table; leave them out of CREATE TABLE.`,
    });
  }
  const [catalogName, schemaName] = [String(rows[0]?.[0] ?? ''), String(rows[0]?.[1] ?? 'main')];
  const target = qualifiedName({ catalog: catalogName, schema: schemaName, name });
  for (const c of missing) await ctx.engine.run(`ALTER TABLE ${target} ADD COLUMN ${quoteIdent(c.name)} ${c.type}`);
  const version = ctx.services.newLedgerHashVersion;
  if (version === HASH_VERSION_V3) await ctx.engine.run(addSaltColumnSql({ catalog: catalogName, schema: schemaName, name }));
  await ctx.engine.run(recordHashVersionSql({ catalog: catalogName, schema: schemaName, name }, version));
  ctx.services.writer.created({ catalog: catalogName, schema: schemaName, name });
}
