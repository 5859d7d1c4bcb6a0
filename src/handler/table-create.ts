import { withConstraint, type ForeignKeyAddition } from '../catalog/alter-table.js';
import { createSequences, ORPHANED_SEQUENCES, ownershipComments, type SerialTable } from '../catalog/serial.js';
import type { EngineCursor, EngineStatement } from '../engine/port.js';
import { PgError } from '../errors/pg-error.js';
import { SqlState } from '../errors/sqlstate.js';
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

/**
 * The engine statement of a plan the handler carries out itself at Execute
 * (ALTER TABLE ... ADD FOREIGN KEY): it has the statement's kind, for the
 * access checks, the command tag and read-only transactions, and is never
 * executed by the engine.
 */
export class HandledStatement implements EngineStatement {
  readonly paramTypes: readonly number[] = [];
  readonly columns = null;

  constructor(readonly kind: EngineStatement['kind']) {}

  bind(): void {}

  execute(): Promise<EngineCursor> {
    return Promise.reject(new Error(`${this.kind} is carried out by the handler`));
  }

  close(): void {}
}

const literal = (s: string): string => `'${s.replaceAll("'", "''")}'`;

/**
 * ALTER TABLE ... ADD FOREIGN KEY, which DuckDB cannot do in place: the
 * table is rebuilt with the key, in one transaction. Its rows are copied
 * aside, the table is created again from its own definition plus the key,
 * the rows go back (each checked against the key, as PostgreSQL checks them)
 * and its indexes and comments are restored. A table that other tables'
 * keys reference cannot be dropped in DuckDB, and is refused.
 */
export async function executeForeignKeyAdd(ctx: HandlerContext, portal: ConnectionPortal, plan: EnginePlan, fk: ForeignKeyAddition): Promise<ExecuteOutcome> {
  await ctx.tx.atomically(async () => {
    ctx.tx.wrote();
    const schema = fk.schema === 'public' ? 'main' : fk.schema;
    const tables = await ctx.engine.query(
      `SELECT database_name, schema_name, table_name, sql, comment FROM duckdb_tables()
       WHERE lower(table_name) = lower($1) AND ($2 IS NULL OR lower(schema_name) = lower($2))
       ORDER BY database_name = 'temp' DESC, schema_name = 'main' DESC LIMIT 1`,
      [fk.table, schema],
    );
    const found = tables[0];
    if (found === undefined) throw new PgError(SqlState.UndefinedTable, `relation "${fk.table}" does not exist`);
    const [database, schemaName, name, sql, comment] = found.map((v) => (v === null ? null : String(v)));
    const where = `database_name = ${literal(database ?? '')} AND schema_name = ${literal(schemaName ?? '')}`;
    const target = [database, schemaName, name].map((p) => quoteIdent(p ?? '')).join('.');
    const referencing = await ctx.engine.query(
      `SELECT table_name FROM duckdb_constraints() WHERE ${where} AND constraint_type = 'FOREIGN KEY' AND lower(referenced_table) = lower(${literal(name ?? '')})`,
    );
    if (referencing.length > 0) {
      throw new PgError(SqlState.FeatureNotSupported, `cannot add a foreign key to "${name}" while "${String(referencing[0]?.[0])}" references it`, {
        hint: 'cotwire adds a foreign key by rebuilding the table: declare it in CREATE TABLE, or add it before other tables reference this one.',
      });
    }
    const create = withConstraint(sql ?? '', target, fk.constraint);
    if (create === null) throw new PgError(SqlState.InternalError, `cannot read the definition of "${name}"`);
    const indexes = await ctx.engine.query(`SELECT sql FROM duckdb_indexes() WHERE ${where} AND table_name = ${literal(name ?? '')} AND sql IS NOT NULL`);
    const notes = await ctx.engine.query(
      `SELECT column_name, comment FROM duckdb_columns() WHERE ${where} AND table_name = ${literal(name ?? '')} AND comment IS NOT NULL`,
    );
    const kept = quoteIdent(`cot_rebuild_${process.hrtime.bigint()}`);
    await ctx.engine.run(`CREATE TEMPORARY TABLE ${kept} AS SELECT * FROM ${target}`);
    await ctx.engine.run(`DROP TABLE ${target}`);
    await ctx.engine.run(create);
    await ctx.engine.run(`INSERT INTO ${target} SELECT * FROM ${kept}`);
    await ctx.engine.run(`DROP TABLE ${kept}`);
    for (const [index] of indexes) await ctx.engine.run(String(index));
    if (comment !== null && comment !== undefined && comment !== '') await ctx.engine.run(`COMMENT ON TABLE ${target} IS ${literal(comment)}`);
    for (const [column, note] of notes) await ctx.engine.run(`COMMENT ON COLUMN ${target}.${quoteIdent(String(column))} IS ${literal(String(note))}`);
  });
  portal.done = true;
  return { done: true, tag: commandTag(plan.statement.kind, plan.tokens, 0) };
}
