import {
  actionSql,
  defaultKeyName,
  deleteKeySql,
  type ForeignKey,
  type ForeignKeyDecl,
  insertKeySql,
  type KeyAction,
  type KeyDdl,
  keyFromRow,
  LOAD_KEYS,
  orphanSql,
  orphansSql,
  keyMappingSql,
  keyIn,
  presentKeysSql,
  qualified,
  renameColumnSql,
  renameTableSql,
  type TableName,
  type TableWrite,
} from '../catalog/foreign-keys.js';
import { PgError } from '../../../errors/pg-error.js';
import { SqlState } from '../../../errors/sqlstate.js';
import type { EngineStatement, WireParam } from '../../../engine/port.js';
import { quoteIdentifier as ident, quoteLiteral as lit } from '../../../sql/identifiers.js';
import { lexStatement } from '../../../sql/lexer.js';
import { type HandlerContext, statementRows } from './context.js';
import type { KeyWork, LockMode } from './key-registry.js';

/**
 * Foreign keys kept by the server (catalog/foreign-keys.ts says why):
 * their DDL is checked and recorded, and every statement that writes a
 * table they relate runs in one transaction with what they ask for: the
 * child rows it added checked against their parents, the children of rows
 * it removed or rekeyed deleted, set to NULL or to their default, or the
 * statement refused with PostgreSQL's 23503.
 */

const same = (a: string, b: string): boolean => a.toLowerCase() === b.toLowerCase();
const isTable = (t: TableName, schema: string, table: string): boolean => same(t.schema, schema) && same(t.table, table);
const lockKey = (schema: string, table: string): string => `${schema}.${table}`.toLowerCase();
const childOf = (k: ForeignKey, t: TableName): boolean => isTable(t, k.schema, k.table);
const parentOf = (k: ForeignKey, t: TableName): boolean => isTable(t, k.refSchema, k.refTable);
const overlaps = (sets: readonly string[] | null, columns: readonly string[]): boolean => sets === null || sets.some((s) => columns.some((c) => same(c, s)));

/** Whether the write adds or changes child keys of `k` (which its parent must then hold). */
function writesChildKey(w: TableWrite, k: ForeignKey): boolean {
  if (w.kind === 'insert' || w.kind === 'merge') return true;
  return w.kind === 'update' && overlaps(w.sets, k.columns);
}

/** Whether the write removes or changes keys that `k`'s children reference. */
function writesParentKey(w: TableWrite, k: ForeignKey): boolean {
  if (w.kind === 'delete' || w.kind === 'merge' || w.kind === 'truncate') return true;
  return (w.kind === 'update' || w.kind === 'insert') && overlaps(w.sets, k.refColumns);
}

/** The keys the statement sees: the committed ones, or its own transaction's when that changed them. */
async function currentKeys(ctx: HandlerContext): Promise<readonly ForeignKey[]> {
  const registry = ctx.services.foreignKeys;
  if (!registry.changedHere(ctx.info.processId)) return registry.committed;
  return (await ctx.engine.query(LOAD_KEYS)).map(keyFromRow);
}

/** The locks a write needs, by table: shared on the parents of keys it writes, exclusive on tables whose referenced keys it changes. */
function locksFor(keys: readonly ForeignKey[], w: TableWrite): Map<string, LockMode> {
  const locks = new Map<string, LockMode>();
  for (const t of w.tables) {
    for (const k of keys) {
      if (childOf(k, t) && writesChildKey(w, k) && !parentOf(k, t)) {
        const key = lockKey(k.refSchema, k.refTable);
        if (!locks.has(key)) locks.set(key, 'shared');
      }
      if (parentOf(k, t) && writesParentKey(w, k)) locks.set(lockKey(t.schema, t.table), 'exclusive');
    }
  }
  return locks;
}

function deadline(ctx: HandlerContext): number {
  const limits = [ctx.settings.lockTimeoutMs, ctx.settings.statementTimeoutMs].filter((ms) => ms > 0);
  return limits.length === 0 ? Number.POSITIVE_INFINITY : Date.now() + Math.min(...limits);
}

async function lock(ctx: HandlerContext, key: string, mode: LockMode): Promise<void> {
  await ctx.services.foreignKeys.locks.acquire(ctx.info.processId, key, mode, ctx.tx.snapshotBegan(), deadline(ctx));
}

/**
 * Runs a statement (`run`, told whether to read its whole result before
 * the keys are checked) with what its DDL and its writes ask of the
 * foreign keys, as one unit: nothing of it commits if a key refuses it.
 * A statement that relates to no key runs as it is.
 */
export async function keepingKeys<T>(
  ctx: HandlerContext,
  work: KeyWork,
  run: (materialize: boolean) => Promise<T>,
  params: BoundParams | null = null,
): Promise<T> {
  const { keyDdl } = work;
  const keys = await currentKeys(ctx);
  if (keyDdl === null && keys.length === 0) return run(false);
  const writes = keys.length === 0 ? null : work.writes();
  const writing = writes !== null && writes.tables.some((t) => keys.some((k) => childOf(k, t) || parentOf(k, t)));
  if (keyDdl === null && !writing) return run(false);
  const registry = ctx.services.foreignKeys;
  const session = ctx.info.processId;
  const autocommit = ctx.tx.autocommit;
  try {
    // Outside a block the locks come first, so that the statement's snapshot sees what their last holders committed.
    if (writing) for (const [key, mode] of locksFor(keys, writes)) await lock(ctx, key, mode);
    let changed = false;
    const result = await ctx.tx.atomically(async () => {
      ctx.tx.wrote();
      // CREATE TABLE IF NOT EXISTS (ADD COLUMN IF NOT EXISTS) of one that exists declares nothing.
      const ddl = keyDdl?.op === 'add' && keyDdl.ifNotExists && (await tableInfo(ctx, keyDdl.at)) !== null ? null : keyDdl;
      if (ddl !== null) changed = await beforeDdl(ctx, keys, ddl);
      if (writing && writes.kind === 'truncate') await truncateChildren(ctx, keys, writes);
      const cascades = writing ? await rekeyed(ctx, keys, writes, work, params) : [];
      const before = writing ? await keysBefore(ctx, keys, writes, work, params) : new Map<ForeignKey, Array<Array<string | null>>>();
      const out = await run(true);
      for (const c of cascades) await carry(ctx, c);
      const gone = await keysGone(ctx, before);
      if (ddl !== null) changed = (await afterDdl(ctx, keys, ddl)) || changed;
      if (writing) await afterWrite(ctx, keys, writes, 0, gone);
      return out;
    });
    if (changed) {
      if (autocommit) await keysCommitted(ctx);
      else {
        registry.changedBy(session);
        await ctx.tx.onCommit(() => keysCommitted(ctx));
      }
    }
    return result;
  } finally {
    if (autocommit) registry.locks.releaseAll(session);
  }
}

async function keysCommitted(ctx: HandlerContext): Promise<void> {
  await ctx.services.foreignKeys.load(ctx.engine);
  ctx.services.catalogSnapshot.changed();
}

// ---- ON UPDATE CASCADE ----
/** The parameters a portal bound, for the queries the keys run beside its statement (ON UPDATE CASCADE's old and new keys). */
export interface BoundParams {
  readonly types: readonly number[];
  readonly values: readonly WireParam[];
}

/** One ON UPDATE CASCADE to carry: each rekeyed parent's key before and after, as text. */
interface Rekeyed {
  readonly key: ForeignKey;
  readonly pairs: ReadonlyArray<readonly (string | null)[]>;
}

/**
 * A query's rows as text, with the parameters of the statement it was read
 * from: those it names, numbered again from $1 (DuckDB wants every number up
 * to the highest bound). Null when the engine cannot prepare it: the caller
 * then does without.
 */
async function textRows(ctx: HandlerContext, sql: string, params: BoundParams | null): Promise<Array<Array<string | null>> | null> {
  const { text, tokens } = lexStatement(sql);
  const order: number[] = [];
  let out = '';
  let at = 0;
  for (const t of tokens) {
    if (t.kind !== 'param') continue;
    const n = Number(t.text.slice(1));
    if (!order.includes(n)) order.push(n);
    out += `${text.slice(at, t.start)}$${order.indexOf(n) + 1}`;
    at = t.end;
  }
  out += text.slice(at);
  let statement: EngineStatement;
  try {
    statement = await ctx.engine.prepare(
      out,
      order.map((n) => params?.types[n - 1] ?? 0),
    );
  } catch {
    return null;
  }
  try {
    return await statementRows(
      statement,
      order.flatMap((n) => params?.values[n - 1] ?? []),
    );
  } finally {
    statement.close();
  }
}

/** Each connection's key checks and actions, prepared once: planning one costs more than running it. */
const prepared = new WeakMap<object, Map<string, EngineStatement>>();

/** The rows of a check or action the keys run, through the connection's prepared statement for it. */
async function keyRows(ctx: HandlerContext, sql: string): Promise<Array<Array<string | null>>> {
  let cache = prepared.get(ctx.engine);
  if (cache === undefined) {
    cache = new Map();
    prepared.set(ctx.engine, cache);
  }
  let statement = cache.get(sql);
  if (statement === undefined) {
    if (cache.size >= 256) {
      for (const s of cache.values()) s.close();
      cache.clear();
    }
    statement = await ctx.engine.prepare(sql, []);
    cache.set(sql, statement);
  }
  try {
    return await statementRows(statement, []);
  } catch (err) {
    // A table dropped or made again since: prepared afresh next time.
    cache.delete(sql);
    statement.close();
    throw err;
  }
}

/**
 * Before an UPDATE of referenced keys whose foreign keys cascade: each
 * row's key before and after, read with the statement's own SET, FROM and
 * WHERE (DuckDB rewrites such a row as a new one, so nothing pairs them
 * afterwards). Rows whose key stays are left out.
 */
async function rekeyed(ctx: HandlerContext, keys: readonly ForeignKey[], w: TableWrite, work: KeyWork, params: BoundParams | null): Promise<Rekeyed[]> {
  const parts = w.kind === 'update' ? work.update() : null;
  if (parts === null) return [];
  const out: Rekeyed[] = [];
  for (const t of w.tables) {
    for (const k of keys) {
      if (!parentOf(k, t) || k.onUpdate !== 'c' || !writesParentKey(w, k)) continue;
      const n = k.refColumns.length;
      const rows = (await textRows(ctx, keyMappingSql(parts, k.refColumns), params)) ?? [];
      const pairs = rows.filter((r) => r.slice(0, n).every((v) => v !== null) && r.slice(0, n).some((v, i) => v !== r[n + i]));
      if (pairs.length > 0) out.push({ key: k, pairs });
    }
  }
  return out;
}

/** ON UPDATE CASCADE: the children of each rekeyed parent take its new key. */
async function carry(ctx: HandlerContext, r: Rekeyed): Promise<void> {
  const { key: k, pairs } = r;
  const db = ctx.services.foreignKeys.database;
  const types = await ctx.engine.query(
    `SELECT lower(column_name), data_type FROM duckdb_columns() WHERE database_name = $1 AND schema_name = $2 AND table_name = $3`,
    [db, k.schema, k.table],
  );
  const typeOf = new Map(types.map((t) => [String(t[0]), String(t[1])]));
  const names = [...k.columns.map((_, i) => `cot_o${i}`), ...k.columns.map((_, i) => `cot_n${i}`)];
  const cast = (i: number, side: 'o' | 'n'): string => `CAST(cot_m.cot_${side}${i} AS ${typeOf.get((k.columns[i] as string).toLowerCase()) ?? 'VARCHAR'})`;
  for (let at = 0; at < pairs.length; at += 500) {
    const values = pairs
      .slice(at, at + 500)
      .map((p) => `(${p.map((v) => (v === null ? 'NULL' : lit(v))).join(', ')})`)
      .join(', ');
    await ctx.engine.run(
      `UPDATE ${qualified(db, k)} AS cot_c SET ${k.columns.map((c, i) => `${ident(c)} = ${cast(i, 'n')}`).join(', ')}
       FROM (VALUES ${values}) AS cot_m(${names.join(', ')}) WHERE ${k.columns.map((c, i) => `cot_c.${ident(c)} = ${cast(i, 'o')}`).join(' AND ')}`,
    );
  }
}

// ---- the keys a parent's change removes ----

/** Functions whose value differs at each call. */
const VOLATILE = /\b(random|gen_random_uuid|uuid|uuid_generate_v4|clock_timestamp|timeofday|nextval|setseed|statement_timestamp)\s*\(/i;

/** Above this many keys, the children are searched for every missing parent instead. */
const MAX_NAMED_KEYS = 1000;

/** A table's column types, by lower-case name. */
async function columnTypes(ctx: HandlerContext, schema: string, table: string): Promise<Map<string, string>> {
  const db = ctx.services.foreignKeys.database;
  const rows = await keyRows(
    ctx,
    `SELECT lower(column_name), data_type FROM duckdb_columns() WHERE database_name = ${lit(db)} AND schema_name = ${lit(schema)} AND table_name = ${lit(table)}`,
  );
  return new Map(rows.map((r) => [String(r[0]), String(r[1])]));
}

/**
 * Before a DELETE or an UPDATE of referenced keys: the keys of the rows it
 * will change, read with its own FROM (USING), WHERE and parameters, so that
 * afterwards only the children on keys that are gone are looked at (rather
 * than every child row against every parent). Null where the statement
 * cannot be read so, or names too many keys.
 */
async function keysBefore(
  ctx: HandlerContext,
  keys: readonly ForeignKey[],
  w: TableWrite,
  work: KeyWork,
  params: BoundParams | null,
): Promise<Map<ForeignKey, Array<Array<string | null>>>> {
  const found = new Map<ForeignKey, Array<Array<string | null>>>();
  const parts = w.kind === 'delete' || w.kind === 'update' ? work.update() : null;
  // A volatile function would pick other rows when read again: every child is searched then.
  if (parts === null || VOLATILE.test(`${parts.from ?? ''} ${parts.where ?? ''}`)) return found;
  for (const t of w.tables) {
    for (const k of keys) {
      if (!parentOf(k, t) || !writesParentKey(w, k)) continue;
      const n = k.refColumns.length;
      const rows = await textRows(ctx, `${keyMappingSql(parts, k.refColumns)} LIMIT ${MAX_NAMED_KEYS + 1}`, params);
      if (rows === null || rows.length > MAX_NAMED_KEYS) continue;
      const seen = new Set<string>();
      const tuples = rows.map((r) => r.slice(0, n)).filter((r) => r.every((v) => v !== null) && !seen.has(JSON.stringify(r)) && seen.add(JSON.stringify(r)));
      found.set(k, tuples);
    }
  }
  return found;
}

/** After the change: for each key read before it, the condition on child rows for the keys the parent no longer has ('' for none). */
async function keysGone(ctx: HandlerContext, before: Map<ForeignKey, Array<Array<string | null>>>): Promise<Map<ForeignKey, string>> {
  const db = ctx.services.foreignKeys.database;
  const gone = new Map<ForeignKey, string>();
  for (const [k, tuples] of before) {
    if (tuples.length === 0) {
      gone.set(k, '');
      continue;
    }
    const parentTypes = await columnTypes(ctx, k.refSchema, k.refTable);
    const childTypes = await columnTypes(ctx, k.schema, k.table);
    const types = (columns: readonly string[], of: Map<string, string>): string[] => columns.map((c) => of.get(c.toLowerCase()) ?? 'VARCHAR');
    const stillThere = await textRows(ctx, presentKeysSql(db, k, types(k.refColumns, parentTypes), tuples), null);
    // Not known: every child is searched (the key is left out of the map).
    if (stillThere === null) continue;
    const present = new Set(stillThere.map((r) => JSON.stringify(r)));
    const missing = tuples.filter((t) => !present.has(JSON.stringify(t)));
    gone.set(k, missing.length === 0 ? '' : keyIn('cot_c', k.columns, types(k.columns, childTypes), missing));
  }
  return gone;
}

// ---- DDL ----

interface TableInfo extends TableName {
  /** Lower-case name → the column's name and DuckDB type. */
  readonly columns: ReadonlyMap<string, { readonly name: string; readonly type: string }>;
  /** The column sets of its primary key (first) and unique constraints and indexes, lower case. */
  readonly uniques: ReadonlyArray<{ readonly primary: boolean; readonly columns: readonly string[] }>;
}

async function tableInfo(ctx: HandlerContext, t: TableName): Promise<TableInfo | null> {
  const db = ctx.services.foreignKeys.database;
  const rows = await ctx.engine.query(
    `SELECT schema_name, table_name, column_name, data_type FROM duckdb_columns()
     WHERE database_name = $1 AND lower(schema_name) = lower($2) AND lower(table_name) = lower($3) ORDER BY column_index`,
    [db, t.schema, t.table],
  );
  const first = rows[0];
  if (first === undefined) return null;
  const columns = new Map(rows.map((r) => [String(r[2]).toLowerCase(), { name: String(r[2]), type: String(r[3]) }]));
  const keys = await ctx.engine.query(
    `SELECT constraint_type = 'PRIMARY KEY', constraint_column_names FROM duckdb_constraints()
       WHERE database_name = $1 AND schema_name = $2 AND table_name = $3 AND constraint_type IN ('PRIMARY KEY', 'UNIQUE')
     UNION ALL
     SELECT false, CAST(expressions AS VARCHAR[]) FROM duckdb_indexes()
       WHERE database_name = $1 AND schema_name = $2 AND table_name = $3 AND is_unique
     ORDER BY 1 DESC`,
    [db, String(first[0]), String(first[1])],
  );
  const uniques = keys.map((r) => ({
    primary: r[0] === true,
    columns: (Array.isArray(r[1]) ? r[1] : []).map((c) =>
      String(c)
        .replace(/^"(.*)"$/, '$1')
        .toLowerCase(),
    ),
  }));
  return { schema: String(first[0]), table: String(first[1]), columns, uniques };
}

function undefinedTable(t: TableName): PgError {
  return new PgError(SqlState.UndefinedTable, `relation "${t.schema === 'main' ? '' : `${t.schema}.`}${t.table}" does not exist`);
}

/** DuckDB's type families that compare with one another, as PostgreSQL's key operators require. */
function family(type: string): string {
  if (/^(TINYINT|SMALLINT|INTEGER|BIGINT|HUGEINT|UTINYINT|USMALLINT|UINTEGER|UBIGINT|UHUGEINT|FLOAT|DOUBLE|DECIMAL)/.test(type)) return 'number';
  if (/^TIMESTAMP/.test(type)) return 'timestamp';
  return type;
}

/** A declared key checked against its tables, as the record to keep. */
async function resolveKey(ctx: HandlerContext, child: TableInfo, d: ForeignKeyDecl, keys: readonly ForeignKey[]): Promise<ForeignKey> {
  const refAt = { schema: d.refSchema ?? child.schema, table: d.refTable };
  const parent = isTable(refAt, child.schema, child.table) ? child : await tableInfo(ctx, refAt);
  if (parent === null) throw undefinedTable(refAt);
  const column = (t: TableInfo, c: string): { name: string; type: string } => {
    const found = t.columns.get(c.toLowerCase());
    if (found === undefined) throw new PgError(SqlState.UndefinedColumn, `column "${c}" referenced in foreign key constraint does not exist`);
    return found;
  };
  const columns = d.columns.map((c) => column(child, c));
  let refNames = d.refColumns;
  if (refNames === null) {
    const primary = parent.uniques.find((u) => u.primary);
    if (primary === undefined) throw new PgError(SqlState.InvalidForeignKey, `there is no primary key for referenced table "${parent.table}"`);
    refNames = primary.columns;
  }
  const refColumns = refNames.map((c) => column(parent, c));
  if (d.matchFull && columns.length > 1) {
    throw new PgError(SqlState.FeatureNotSupported, 'MATCH FULL foreign keys of several columns are not supported', {
      hint: 'Use MATCH SIMPLE (the default), with a CHECK that the key columns are all NULL or all set.',
    });
  }
  if (refColumns.length !== columns.length) {
    throw new PgError(SqlState.InvalidForeignKey, 'number of referencing and referenced columns for foreign key disagree');
  }
  const wanted = refColumns.map((c) => c.name.toLowerCase()).sort();
  if (!parent.uniques.some((u) => u.columns.length === wanted.length && [...u.columns].sort().every((c, i) => c === wanted[i]))) {
    throw new PgError(SqlState.InvalidForeignKey, `there is no unique constraint matching given keys for referenced table "${parent.table}"`);
  }
  const mine = keys.filter((k) => isTable(child, k.schema, k.table));
  const name =
    d.name ??
    defaultKeyName(
      child.table,
      columns.map((c) => c.name),
      new Set(keys.filter((k) => same(k.schema, child.schema)).map((k) => k.name)),
    );
  columns.forEach((c, i) => {
    const r = refColumns[i] as { name: string; type: string };
    if (family(c.type) !== family(r.type)) {
      throw new PgError(SqlState.DatatypeMismatch, `foreign key constraint "${name}" cannot be implemented`, {
        detail: `Key columns "${c.name}" and "${r.name}" are of incompatible types: ${c.type.toLowerCase()} and ${r.type.toLowerCase()}.`,
      });
    }
  });
  if (mine.some((k) => k.name === name)) throw new PgError(SqlState.DuplicateObject, `constraint "${name}" for relation "${child.table}" already exists`);
  return {
    schema: child.schema,
    table: child.table,
    name,
    ordinal: mine.reduce((m, k) => Math.max(m, k.ordinal), 0) + 1,
    columns: columns.map((c) => c.name),
    refSchema: parent.schema,
    refTable: parent.table,
    refColumns: refColumns.map((c) => c.name),
    onUpdate: d.onUpdate,
    onDelete: d.onDelete,
  };
}

const describe = (k: ForeignKey): string => `constraint ${k.name} on table ${k.table}`;

/** 2BP01 for a DROP without CASCADE, naming every key that depends on the object. */
function dependents(keys: readonly ForeignKey[], on: string): PgError {
  return new PgError(SqlState.DependentObjectsStillExist, `cannot drop ${on} because other objects depend on it`, {
    detail: keys.map((k) => `${describe(k)} depends on ${on}`).join('\n'),
    hint: 'Use DROP ... CASCADE to drop the dependent objects too.',
  });
}

/** DROP ... CASCADE: PostgreSQL's notice of the keys it drops with the object. */
function cascaded(ctx: HandlerContext, keys: readonly ForeignKey[]): void {
  if (keys.length === 0) return;
  const lines = keys.map((k) => `drop cascades to ${describe(k)}`);
  const notice =
    keys.length === 1
      ? new PgError(SqlState.SuccessfulCompletion, lines[0] as string, {}, 'NOTICE')
      : new PgError(SqlState.SuccessfulCompletion, `drop cascades to ${keys.length} other objects`, { detail: lines.join('\n') }, 'NOTICE');
  ctx.services.backends.notice(ctx.info.processId, notice);
}

/** What must happen before a DDL statement runs: a drop's dependents refused or dropped. True when the keys changed. */
async function beforeDdl(ctx: HandlerContext, keys: readonly ForeignKey[], ddl: KeyDdl): Promise<boolean> {
  let gone: ForeignKey[] = [];
  if (ddl.op === 'drop-tables') {
    // DROP TABLE t drops a temporary t where one hides the table.
    const temporary = new Set((await ctx.engine.query(`SELECT lower(table_name) FROM duckdb_tables() WHERE database_name = 'temp'`)).map((r) => String(r[0])));
    const tables = ddl.tables.filter((t) => !(ddl.unqualified.includes(t.table) && temporary.has(t.table.toLowerCase())));
    const dropped = (k: ForeignKey, side: 'child' | 'parent'): boolean => tables.some((t) => (side === 'child' ? childOf(k, t) : parentOf(k, t)));
    const blocking = keys.filter((k) => dropped(k, 'parent') && !dropped(k, 'child'));
    const first = blocking[0];
    if (first !== undefined && !ddl.cascade)
      throw dependents(
        blocking.filter((k) => k.refTable === first.refTable),
        `table ${first.refTable}`,
      );
    cascaded(ctx, blocking);
    gone = keys.filter((k) => dropped(k, 'child') || dropped(k, 'parent'));
  } else if (ddl.op === 'drop-column') {
    const column = (cols: readonly string[]): boolean => cols.some((c) => same(c, ddl.column));
    const referencing = keys.filter((k) => parentOf(k, ddl.at) && column(k.refColumns) && !(childOf(k, ddl.at) && column(k.columns)));
    const first = referencing[0];
    if (first !== undefined && !ddl.cascade) throw dependents(referencing, `column ${ddl.column} of table ${first.refTable}`);
    cascaded(ctx, referencing);
    gone = keys.filter((k) => (childOf(k, ddl.at) && column(k.columns)) || referencing.includes(k));
  } else if (ddl.op === 'drop-schemas') {
    // DROP SCHEMA ... CASCADE drops the tables in it: their keys go, and so do keys from elsewhere that reference them.
    const inside = (schema: string): boolean => ddl.schemas.some((x) => same(x, schema));
    const blocking = keys.filter((k) => inside(k.refSchema) && !inside(k.schema));
    const first = blocking[0];
    if (first !== undefined && !ddl.cascade) throw dependents(blocking, `schema ${first.refSchema}`);
    cascaded(ctx, blocking);
    gone = keys.filter((k) => inside(k.schema) || inside(k.refSchema));
  } else if (ddl.op === 'drop-constraint') {
    gone = keys.filter((k) => childOf(k, ddl.at) && k.name === ddl.name);
    if (gone.length === 0 && !ddl.missingOk)
      throw new PgError(SqlState.UndefinedObject, `constraint "${ddl.name}" of relation "${ddl.at.table}" does not exist`);
  }
  for (const k of gone) await ctx.engine.run(deleteKeySql(k));
  return gone.length > 0;
}

/** What follows a DDL statement: the keys it declared checked and recorded, renames carried into the records. True when the keys changed. */
async function afterDdl(ctx: HandlerContext, keys: readonly ForeignKey[], ddl: KeyDdl): Promise<boolean> {
  if (ddl.op === 'rename-table' || ddl.op === 'rename-column') {
    if (!keys.some((k) => childOf(k, ddl.at) || parentOf(k, ddl.at))) return false;
    const sqls = ddl.op === 'rename-table' ? renameTableSql(ddl.at, ddl.to) : renameColumnSql(ddl.at, ddl.from, ddl.to);
    for (const sql of sqls) await ctx.engine.run(sql);
    return true;
  }
  if (ddl.op !== 'add') return false;
  const child = await tableInfo(ctx, ddl.at);
  if (child === null) throw undefinedTable(ddl.at);
  const added: ForeignKey[] = [];
  for (const d of ddl.keys) {
    const k = await resolveKey(ctx, child, d, [...keys, ...added]);
    added.push(k);
    await ctx.engine.run(insertKeySql(k));
    await checkChildren(ctx, k, false);
  }
  return true;
}

// ---- writes ----

const keyText = (columns: readonly string[], values: readonly unknown[]): string =>
  `Key (${columns.join(', ')})=(${values.map((v) => (v === null ? 'null' : String(v))).join(', ')})`;

/** 23503 if a child row of `k` has no parent; `newOnly`: only the rows the transaction appended. */
async function checkChildren(ctx: HandlerContext, k: ForeignKey, newOnly: boolean): Promise<void> {
  const [orphan] = await keyRows(ctx, orphanSql(ctx.services.foreignKeys.database, k, newOnly));
  if (orphan === undefined) return;
  throw new PgError(SqlState.ForeignKeyViolation, `insert or update on table "${k.table}" violates foreign key constraint "${k.name}"`, {
    detail: `${keyText(k.columns, orphan)} is not present in table "${k.refTable}".`,
    schema: k.schema === 'main' ? 'public' : k.schema,
    table: k.table,
    constraint: k.name,
  });
}

/** 23503 for a parent's change that leaves a child row on the key it removed. */
function stillReferenced(k: ForeignKey, orphan: readonly unknown[]): PgError {
  return new PgError(
    SqlState.ForeignKeyViolation,
    `update or delete on table "${k.refTable}" violates foreign key constraint "${k.name}" on table "${k.table}"`,
    {
      detail: `${keyText(k.refColumns, orphan)} is still referenced from table "${k.table}".`,
      schema: k.refSchema === 'main' ? 'public' : k.refSchema,
      table: k.refTable,
      constraint: k.name,
    },
  );
}

/** TRUNCATE of a table other tables reference: refused, or (CASCADE) they are emptied too. */
async function truncateChildren(ctx: HandlerContext, keys: readonly ForeignKey[], w: TableWrite): Promise<void> {
  const emptied: TableName[] = [...w.tables];
  for (let i = 0; i < emptied.length; i++) {
    const t = emptied[i] as TableName;
    for (const k of keys) {
      if (!parentOf(k, t) || emptied.some((e) => childOf(k, e))) continue;
      if (!w.cascade) {
        throw new PgError(SqlState.FeatureNotSupported, 'cannot truncate a table referenced in a foreign key constraint', {
          detail: `Table "${k.table}" references "${k.refTable}".`,
          hint: `Truncate table "${k.table}" at the same time, or use TRUNCATE ... CASCADE.`,
        });
      }
      emptied.push({ schema: k.schema, table: k.table });
    }
  }
  const db = ctx.services.foreignKeys.database;
  for (const t of emptied.slice(w.tables.length)) await ctx.engine.run(`DELETE FROM ${qualified(db, t)}`);
}

/** How deep cascades may go: a cycle of CASCADE keys ends when nothing is left to delete, this is a guard against a fault. */
const MAX_CASCADE_DEPTH = 64;

/**
 * After a write: the child keys it added or changed must have parents;
 * the parent keys it removed or changed have their children deleted, set
 * NULL or to their default, or refuse the statement (NO ACTION,
 * RESTRICT). A cascade's own changes are kept in turn.
 */
async function afterWrite(
  ctx: HandlerContext,
  keys: readonly ForeignKey[],
  w: TableWrite,
  depth: number,
  gone: ReadonlyMap<ForeignKey, string> = new Map(),
): Promise<void> {
  if (depth > MAX_CASCADE_DEPTH) throw new PgError(SqlState.ProgramLimitExceeded, 'foreign key cascades nest too deeply');
  const db = ctx.services.foreignKeys.database;
  for (const t of w.tables) {
    for (const k of keys) {
      if (childOf(k, t) && writesChildKey(w, k)) await checkChildren(ctx, k, w.kind === 'insert' && w.sets?.length === 0);
    }
    for (const k of keys) {
      if (!parentOf(k, t) || !writesParentKey(w, k) || w.kind === 'truncate') continue;
      const action: KeyAction = w.kind === 'delete' || w.kind === 'merge' ? k.onDelete : k.onUpdate;
      // The keys the change removed, where they were read before it: none, or the child rows on them.
      const among = gone.get(k) ?? null;
      if (among === '') continue;
      if (action === 'a' || action === 'r') {
        const [orphan] = await keyRows(ctx, orphanSql(db, k, false, among));
        if (orphan === undefined) continue;
        throw stillReferenced(k, orphan);
      }
      if (action === 'c' && w.kind === 'update') {
        const [orphan] = await keyRows(ctx, orphanSql(db, k, false, among));
        if (orphan === undefined) continue;
        throw new PgError(
          SqlState.FeatureNotSupported,
          `ON UPDATE CASCADE of this change is not supported (foreign key constraint "${k.name}" on table "${k.table}")`,
          {
            detail: `${keyText(k.refColumns, orphan)} is still referenced from table "${k.table}".`,
            hint: 'cotwire carries a key to its children when the UPDATE gives each key column one expression (not SET (a, b) = ...), one level deep. Update the referencing rows first, or set the key column by itself.',
          },
        );
      }
      const child = { schema: k.schema, table: k.table };
      if (action !== 'c' && action !== 'n' && action !== 'd') continue;
      // SET DEFAULT may leave a row on the key just removed (its default): PostgreSQL then refuses the parent's change.
      const before = action === 'd' ? new Set((await keyRows(ctx, orphansSql(db, k, among))).map((r) => JSON.stringify(r))) : null;
      const changed = (await keyRows(ctx, `${actionSql(db, k, action, among)} RETURNING 1`)).length;
      if (changed === 0) continue;
      if (before !== null) {
        const [orphan] = await keyRows(ctx, orphanSql(db, k, false));
        if (orphan !== undefined && before.has(JSON.stringify(orphan))) throw stillReferenced(k, orphan);
        await checkChildren(ctx, k, false);
      }
      if (action === 'c') await lock(ctx, lockKey(child.schema, child.table), 'exclusive');
      const next: TableWrite =
        action === 'c' ? { kind: 'delete', tables: [child], sets: [], cascade: false } : { kind: 'update', tables: [child], sets: k.columns, cascade: false };
      // The child's own children, for the rows the action removed or rekeyed (its parent keys need no check again).
      await afterWrite(
        ctx,
        keys.filter((x) => x !== k || action === 'c'),
        next,
        depth + 1,
      );
    }
  }
}

/** Whether the table has a kept foreign key of this name (ALTER TABLE ... DROP CONSTRAINT of one is the server's to carry out). */
export async function keptKeyNamed(ctx: HandlerContext, at: TableName, name: string): Promise<boolean> {
  return (await currentKeys(ctx)).some((k) => childOf(k, at) && k.name === name);
}
