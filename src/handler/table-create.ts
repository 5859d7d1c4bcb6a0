import { createSequences, ORPHANED_SEQUENCES, ownershipComments, type SerialTable } from '../catalog/serial.js';
import type { ExecuteOutcome } from '../session/handler-port.js';
import { commandTag } from './command-tag.js';
import type { HandlerContext } from './context.js';
import type { ConnectionPortal, EnginePlan } from './plan.js';

const quoteIdent = (s: string): string => `"${s.replaceAll('"', '""')}"`;

/**
 * CREATE TABLE with serial or identity columns (catalog/serial.ts): the
 * sequences, the table that draws from them and the marks that they are its
 * own, in one transaction, so a failure leaves no sequence behind.
 */
export async function executeSerialCreate(ctx: HandlerContext, portal: ConnectionPortal, plan: EnginePlan, table: SerialTable): Promise<ExecuteOutcome> {
  await ctx.tx.atomically(async () => {
    ctx.tx.wrote();
    // IF NOT EXISTS on a table that exists creates nothing, its sequences included.
    if (table.ifNotExists && (await tableExists(ctx, table))) return;
    for (const sql of createSequences(table)) await ctx.engine.run(sql);
    await ctx.engine.run(table.create);
    for (const sql of ownershipComments(table)) await ctx.engine.run(sql);
  });
  portal.done = true;
  return { done: true, tag: commandTag(plan.statement.kind, plan.tokens, 0) };
}

async function tableExists(ctx: HandlerContext, table: SerialTable): Promise<boolean> {
  const schema = table.schema === null || table.schema === 'public' ? null : table.schema;
  const rows = await ctx.engine.query(
    `SELECT 1 FROM duckdb_tables() WHERE lower(table_name) = lower($1) AND ($2 IS NULL OR lower(schema_name) = lower($2))
       AND (database_name = 'temp') = $3`,
    [table.table, schema, table.temporary ? 'true' : 'false'],
  );
  return rows.length > 0;
}

/** After a DROP: the sequences PostgreSQL would have dropped with their table, so that it can be created again. */
export async function dropOrphanedSequences(ctx: HandlerContext): Promise<void> {
  const rows = await ctx.engine.query(ORPHANED_SEQUENCES);
  for (const [database, schema, name] of rows) {
    await ctx.engine.run(`DROP SEQUENCE IF EXISTS ${[database, schema, name].map((p) => quoteIdent(String(p))).join('.')}`);
  }
}
