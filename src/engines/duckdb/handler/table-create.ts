import {
  hasLengthCheck,
  indexAfterAlter,
  lengthCheck,
  retypedDefinition,
  withConstraint,
  withoutLengthChecks,
  type ColumnAlter,
  type ConstraintAddition,
} from '../catalog/alter-table.js';
import { createSequences, ORPHANED_SEQUENCES, ownershipComments, type SerialTable } from '../catalog/serial.js';
import type { EngineCursor, EngineStatement } from '../../../engine/port.js';
import { PgError } from '../../../errors/pg-error.js';
import { SqlState } from '../../../errors/sqlstate.js';
import type { ExecuteOutcome } from '../../../session/handler-port.js';
import { commandTag } from './command-tag.js';
import type { HandlerContext } from './context.js';
import type { ConnectionPortal, EnginePlan } from './plan.js';
import { quoteIdentifier as quoteIdent, quoteLiteral as literal } from '../../../sql/identifiers.js';

/**
 * CREATE TABLE with serial or identity columns (engines/duckdb/catalog/serial.ts): the
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

/** A DROP of several objects (or of one in `public`), one DROP per object, all or none. */
export async function executeDropEach(ctx: HandlerContext, portal: ConnectionPortal, plan: EnginePlan, statements: readonly string[]): Promise<ExecuteOutcome> {
  await ctx.tx.atomically(async () => {
    ctx.tx.wrote();
    for (const sql of statements) await ctx.engine.run(sql);
    await dropOrphanedSequences(ctx);
  });
  portal.done = true;
  return { done: true, tag: commandTag(plan.statement.kind, plan.tokens, 0) };
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

/** Where a rebuilt table ends up: its definition again, plus a constraint, or followed by an ALTER. */
interface Rebuild {
  readonly schema: string | null;
  readonly table: string;
  readonly constraint?: string;
  readonly alter?: ColumnAlter;
  /** Columns whose length checks the table is created without (a change of their type follows). */
  readonly dropChecks?: readonly string[];
}

/** The table's definition as DuckDB prints it, and the name other statements reach it by. */
async function tableDefinition(
  ctx: HandlerContext,
  table: string,
  schema: string | null,
): Promise<{ readonly database: string; readonly schemaName: string; readonly name: string; readonly sql: string; readonly comment: string | null } | null> {
  const rows = await ctx.engine.query(
    `SELECT database_name, schema_name, table_name, sql, comment FROM duckdb_tables()
     WHERE lower(table_name) = lower($1) AND ($2 IS NULL OR lower(schema_name) = lower($2))
     ORDER BY database_name = 'temp' DESC, schema_name = 'main' DESC LIMIT 1`,
    [table, schema === 'public' ? 'main' : schema],
  );
  const found = rows[0];
  if (found === undefined) return null;
  const [database, schemaName, name, sql, comment] = found.map((v) => (v === null ? null : String(v)));
  return { database: database ?? '', schemaName: schemaName ?? '', name: name ?? '', sql: sql ?? '', comment: comment ?? null };
}

/** A table whose foreign key references this one, which keeps DuckDB from dropping it; null when none does. */
async function referencingTable(ctx: HandlerContext, database: string, schemaName: string, name: string): Promise<string | null> {
  const rows = await ctx.engine.query(
    `SELECT table_name FROM duckdb_constraints() WHERE database_name = $1 AND schema_name = $2 AND constraint_type = 'FOREIGN KEY' AND lower(referenced_table) = lower($3)`,
    [database, schemaName, name],
  );
  return rows[0] === undefined ? null : String(rows[0][0]);
}

/**
 * A table created again from its own definition, in the transaction: its
 * rows are copied aside, it is dropped and created (with one more
 * constraint, or then altered: DuckDB alters a table freely until it has
 * indexes), the rows go back (each checked against the table's keys, as
 * PostgreSQL checks them), and its indexes and comments are restored. A
 * table that other tables' keys reference cannot be dropped in DuckDB, and
 * is refused.
 */
async function rebuildTable(ctx: HandlerContext, rebuild: Rebuild): Promise<void> {
  const found = await tableDefinition(ctx, rebuild.table, rebuild.schema);
  if (found === null) throw new PgError(SqlState.UndefinedTable, `relation "${rebuild.table}" does not exist`);
  const { database, schemaName, name, comment } = found;
  const where = `database_name = ${literal(database)} AND schema_name = ${literal(schemaName)}`;
  const target = [database, schemaName, name].map((p) => quoteIdent(p)).join('.');
  const referencing = await referencingTable(ctx, database, schemaName, name);
  if (referencing !== null) {
    throw new PgError(SqlState.FeatureNotSupported, `cannot change "${name}" while "${referencing}" references it`, {
      hint: 'cotwire makes this change by rebuilding the table, which DuckDB refuses while another table references it: drop that foreign key first, or make the change before it exists.',
    });
  }
  // A change of types only is made in the definition: DuckDB will not alter a key column's type.
  const retyped = rebuild.alter?.retyped ?? null;
  const definition = withoutLengthChecks(found.sql, rebuild.dropChecks ?? []);
  const create = withConstraint(retyped === null ? definition : (retypedDefinition(definition, retyped) ?? ''), target, rebuild.constraint ?? null);
  if (create === null) throw new PgError(SqlState.InternalError, `cannot read the definition of "${name}"`);
  const indexes = await ctx.engine.query(`SELECT sql FROM duckdb_indexes() WHERE ${where} AND table_name = ${literal(name)} AND sql IS NOT NULL`);
  const notes = await ctx.engine.query(
    `SELECT column_name, comment FROM duckdb_columns() WHERE ${where} AND table_name = ${literal(name)} AND comment IS NOT NULL`,
  );
  const kept = quoteIdent(`cot_rebuild_${process.hrtime.bigint()}`);
  await ctx.engine.run(`CREATE TEMPORARY TABLE ${kept} AS SELECT * FROM ${target}`);
  await ctx.engine.run(`DROP TABLE ${target}`);
  await ctx.engine.run(create);
  await ctx.engine.run(`INSERT INTO ${target} SELECT * FROM ${kept}`);
  await ctx.engine.run(`DROP TABLE ${kept}`);
  const alter = rebuild.alter;
  if (alter !== undefined && retyped === null) await ctx.engine.run(alter.sql);
  for (const [index] of indexes) {
    const again = alter === undefined ? String(index) : indexAfterAlter(String(index), alter);
    if (again !== null) await ctx.engine.run(again);
  }
  if (comment !== null && comment !== '') await ctx.engine.run(`COMMENT ON TABLE ${target} IS ${literal(comment)}`);
  for (const [column, note] of notes) {
    let c = String(column);
    if (alter?.dropped.some((d) => d.toLowerCase() === c.toLowerCase()) === true) continue;
    if (alter?.renamed !== null && alter?.renamed !== undefined && alter.renamed.from.toLowerCase() === c.toLowerCase()) c = alter.renamed.to;
    await ctx.engine.run(`COMMENT ON COLUMN ${target}.${quoteIdent(c)} IS ${literal(String(note))}`);
  }
}

/** The columns of a table's primary key and unique constraints, lower case. */
async function keyColumns(ctx: HandlerContext, table: string, schema: string | null): Promise<string[]> {
  const rows = await ctx.engine.query(
    `SELECT DISTINCT lower(unnest(constraint_column_names)) FROM duckdb_constraints()
     WHERE lower(table_name) = lower($1) AND ($2 IS NULL OR lower(schema_name) = lower($2)) AND constraint_type IN ('PRIMARY KEY', 'UNIQUE')`,
    [table, schema],
  );
  return rows.map((r) => String(r[0]));
}

/** ALTER TABLE ... ADD FOREIGN KEY or CHECK, which DuckDB cannot do in place: the table is rebuilt with the constraint. */
export async function executeConstraintAdd(
  ctx: HandlerContext,
  portal: ConnectionPortal,
  plan: EnginePlan,
  added: ConstraintAddition,
): Promise<ExecuteOutcome> {
  await ctx.tx.atomically(async () => {
    ctx.tx.wrote();
    await rebuildTable(ctx, { schema: added.schema, table: added.table, constraint: added.constraint });
  });
  portal.done = true;
  return { done: true, tag: commandTag(plan.statement.kind, plan.tokens, 0) };
}

/**
 * DROP COLUMN, ALTER COLUMN ... TYPE and RENAME COLUMN, which DuckDB refuses
 * while an index depends on the column, even one dropped earlier in the
 * transaction: on a table with indexes the table is rebuilt, altered while
 * it has none, and its indexes created again (without those on a dropped
 * column, as PostgreSQL drops them; with a renamed column's new name).
 *
 * A varchar(n) column's length is a CHECK, which DuckDB will not let a
 * change of type pass either: such a column is rebuilt without it, and a
 * column added or retyped as varchar(n) gains its own by a rebuild after
 * the ALTER. A table other tables reference cannot be rebuilt: an added
 * column then goes without the check (docs/compatibility.md).
 */
export async function executeColumnAlter(ctx: HandlerContext, portal: ConnectionPortal, plan: EnginePlan, alter: ColumnAlter): Promise<ExecuteOutcome> {
  const schema = alter.schema === 'public' ? 'main' : alter.schema;
  await ctx.tx.atomically(async () => {
    ctx.tx.wrote();
    const indexes = await ctx.engine.query(
      `SELECT 1 FROM duckdb_indexes() WHERE lower(table_name) = lower($1) AND ($2 IS NULL OR lower(schema_name) = lower($2)) AND sql IS NOT NULL`,
      [alter.table, schema],
    );
    const retyped = alter.lengths.filter((l) => !l.added).map((l) => l.column);
    const before = retyped.length === 0 ? null : await tableDefinition(ctx, alter.table, alter.schema);
    const checked = before !== null && hasLengthCheck(before.sql, retyped);
    // Adding columns is what DuckDB does to an indexed table too.
    const addsOnly = !alter.changesColumns;
    // DuckDB refuses to change the type of a key's column: such a change is made by a rebuild too.
    const keyed = alter.retyped !== null && (await keyColumns(ctx, alter.table, schema)).some((c) => retyped.some((r) => r.toLowerCase() === c));
    if ((indexes.length === 0 || addsOnly) && !checked && !keyed) await ctx.engine.run(alter.sql);
    else await rebuildTable(ctx, { schema: alter.schema, table: alter.table, alter, dropChecks: retyped });
    const checks = alter.lengths.flatMap((l) => (l.length === null ? [] : [lengthCheck(l.column, l.length, l.padded)]));
    if (checks.length === 0) return;
    const after = await tableDefinition(ctx, alter.table, alter.schema);
    if (after === null || (await referencingTable(ctx, after.database, after.schemaName, after.name)) !== null) return;
    await rebuildTable(ctx, { schema: alter.schema, table: alter.table, constraint: checks.join(', ') });
  });
  portal.done = true;
  return { done: true, tag: commandTag(plan.statement.kind, plan.tokens, 0) };
}
