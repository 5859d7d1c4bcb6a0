import { strings } from '../../../../sql/pg-tree.js';
import { CATALOG_FUNCTIONS, CATALOG_RELATIONS, INFORMATION_RELATIONS, INFORMATION_SCHEMA, PG_SCHEMA } from '../pg-catalog.js';
import { callOf, type Node, rangeCall, spelledName, type Walker, wordOf } from './walker.js';

/**
 * References to PostgreSQL's catalog, pointed at cotwire's views of it
 * (engines/duckdb/catalog/pg-catalog.ts): pg_catalog and information_schema
 * relations, columns and functions, the database name before a schema,
 * `public` for DuckDB's `main`, tableoid, current_schema and its kin, and
 * the int2vector and oidvector columns' text.
 */

/** Catalog columns PostgreSQL types int2vector or oidvector, whose text form is '1 2' (DuckDB lists print as [1, 2]). */
const VECTOR_COLUMNS = new Set(['indkey', 'indoption', 'indclass', 'indcollation', 'proargtypes', 'stxkeys', 'partattrs']);

/** A range variable (FROM t, INSERT INTO t ...): the catalog's relations, `public`, the database clients name. */
export function catalogRelation(w: Walker, node: Node): void {
  const target = w.inTarget;
  if (w.replacedRelations.has(node.location as number)) return;
  const relname = typeof node.relname === 'string' ? node.relname : null;
  const i = w.index(node.location);
  if (relname === null || i === null) return;
  if (typeof node.catalogname === 'string') {
    // database.schema.table, with the database clients connect to: the schema in this database.
    if (node.catalogname !== w.database || w.tokens[i + 1]?.text !== '.' || w.dotted(i)?.parts.length !== 3) return;
    w.replaceTokens(i, i + 3, node.schemaname === 'public' ? 'main' : (w.tokens[i + 2]?.text ?? ''));
    return;
  }
  const name = w.dotted(i);
  if (name === null) return;
  const schema = typeof node.schemaname === 'string' ? node.schemaname : null;
  if (schema === 'public' && name.parts.length === 2) {
    w.replaceTokens(i, i + 1, 'main');
  } else if (target) {
    return;
  } else if (schema === 'pg_catalog' || (schema === null && !w.ctes.has(relname))) {
    if (CATALOG_RELATIONS.has(relname)) w.replaceTokens(i, name.next, `${PG_SCHEMA}.${relname}`);
  } else if (schema === 'information_schema') {
    if (INFORMATION_RELATIONS.has(relname)) w.replaceTokens(i, name.next, `${INFORMATION_SCHEMA}.${relname}`);
  }
}

/**
 * `pg_catalog.pg_class.relname`, and `c.tableoid`: the system column
 * PostgreSQL gives every row, the OID of its catalog table (pg_dump reads
 * it from each catalog it queries).
 */
export function catalogColumn(w: Walker, node: Node): void {
  const fields = strings(node.fields);
  // pg_catalog.pg_class.relname (SQLAlchemy): the relation is in the catalog's schema, and is named pg_class there.
  if (
    fields.length === 3 &&
    ((fields[0] === 'pg_catalog' && CATALOG_RELATIONS.has(fields[1] as string)) ||
      (fields[0] === 'information_schema' && INFORMATION_RELATIONS.has(fields[1] as string)))
  ) {
    const at = w.index(node.location);
    const name = at === null ? null : w.dotted(at);
    if (at !== null && name !== null && name.parts.length === 3) w.replaceTokens(at, at + 2, '');
  }
  if (fields[fields.length - 1] !== 'tableoid' || fields.length > 2) return;
  const scope = w.fromScopes[w.fromScopes.length - 1];
  const oid = fields.length === 2 ? w.catalogTables.get(fields[0] as string) : scope?.length === 1 ? scope[0] : undefined;
  const i = w.index(node.location);
  if (oid === undefined || i === null) return;
  const name = w.dotted(i);
  if (name !== null && name.parts.length === fields.length) w.replaceTokens(i, name.next, `CAST(${oid} AS BIGINT)`);
}

/** `pg_catalog.f(...)`, `information_schema.f(...)` and the catalog's own functions: cotwire's, or the engine's of that name. */
export function catalogFunction(w: Walker, node: Node): void {
  const call = callOf(w, node);
  const name = call === null ? null : spelledName(w, call);
  if (call === null || name === null) return;
  const { parts, fn, i } = call;
  // format('%s ...') is PostgreSQL's; DuckDB's own format() takes '{}'.
  const first = ((node.args as Node[] | undefined)?.[0]?.A_Const as Node | undefined)?.sval as { sval?: string } | undefined;
  if (fn === 'format' && !(first?.sval?.includes('%') ?? false)) return;
  if (parts.length === 2 && (parts[0] === 'pg_catalog' || parts[0] === 'information_schema')) {
    w.replaceTokens(i, name.next, CATALOG_FUNCTIONS.has(fn) ? `${PG_SCHEMA}.${fn}` : fn);
    // _pg_expandarray returns a set of (x, n) rows; the macro returns a list of them, unnested here (pgjdbc's metadata).
    const close = w.tokens[name.next]?.text === '(' ? w.closing(name.next) : null;
    if (fn === '_pg_expandarray' && close !== null) {
      w.insertBefore(i, 'unnest(');
      w.insertAfter(close, ')');
    }
  } else if (parts.length === 1 && CATALOG_FUNCTIONS.has(fn)) {
    w.replaceTokens(i, name.next, `${PG_SCHEMA}.${fn}`);
  }
}

/** `current_schema`, `user` and `current_catalog` without parentheses, as DuckDB's functions. */
export function valueFunction(w: Walker, node: Node): void {
  const i = w.index(node.location);
  if (i === null || w.tokens[i + 1]?.text === '(') return;
  if (node.op === 'SVFOP_CURRENT_SCHEMA') w.replaceTokens(i, i + 1, `${PG_SCHEMA}.current_schema()`);
  else if (node.op === 'SVFOP_USER' && wordOf(w.tokens[i]) === 'user') w.replaceTokens(i, i + 1, 'current_user()');
  else if (node.op === 'SVFOP_CURRENT_CATALOG') w.replaceTokens(i, i + 1, 'current_database()');
}

/**
 * `pg_partition_ancestors(rel) [WITH ORDINALITY] AS a(relid, depth)` in
 * FROM: no table is partitioned, so the relation is its only ancestor
 * (psql 15's \d asks for triggers and foreign keys this way).
 */
export function partitionAncestors(w: Walker, node: Node): boolean {
  const alias = node.alias as { aliasname?: string } | undefined;
  const call = rangeCall(node);
  const parts = strings(call?.funcname);
  if (call === undefined || parts[parts.length - 1] !== 'pg_partition_ancestors') return false;
  const span = w.callSpan(w.index(call.location));
  if (span === null) return false;
  let end = span.close;
  if (wordOf(w.tokens[end + 1]) === 'with' && wordOf(w.tokens[end + 2]) === 'ordinality') end += 2;
  const arg = w.argumentsText(span);
  const columns = node.ordinality === true ? `CAST(${arg} AS BIGINT) AS relid, CAST(1 AS BIGINT) AS ordinality` : `CAST(${arg} AS BIGINT) AS relid`;
  w.replacedRelations.add(call.location as number);
  w.replaceTokens(span.i, end + 1, `LATERAL (SELECT ${columns})${alias === undefined ? ' AS pg_partition_ancestors' : ''}`);
  return true;
}

/**
 * `SELECT i.indkey FROM pg_index i`: an int2vector or oidvector column read
 * as a result is text, '1 2' (pg_dump parses it so); in expressions it
 * stays the list it is in the catalog's views.
 */
export function vectorResults(w: Walker, select: Node): void {
  if (w.catalogTables.size === 0) return;
  for (const target of (select.targetList as Node[] | undefined) ?? []) {
    const res = target.ResTarget as Node | undefined;
    const ref = (res?.val as Node | undefined)?.ColumnRef as Node | undefined;
    const fields = strings(ref?.fields);
    const column = fields[fields.length - 1];
    if (ref === undefined || column === undefined || !VECTOR_COLUMNS.has(column)) continue;
    const i = w.index(ref.location);
    const name = i === null ? null : w.dotted(i);
    if (i === null || name === null || name.parts.length !== fields.length) continue;
    w.insertBefore(i, 'array_to_string(');
    w.insertAfter(name.next - 1, `, ' ')${res?.name === undefined ? ` AS ${column}` : ''}`);
  }
}

/** `ix.indkey::varchar`: a vector column's text form, space-separated as in PostgreSQL (SQLAlchemy splits it). */
export function vectorText(w: Walker, node: Node): void {
  const type = strings((node.typeName as Node | undefined)?.names).at(-1);
  if (type !== 'varchar' && type !== 'text') return;
  const fields = strings((node.arg as Node | undefined)?.ColumnRef ? ((node.arg as Node).ColumnRef as Node).fields : undefined);
  const column = fields[fields.length - 1];
  const castAt = w.index(node.location);
  const typeAt = w.index((node.typeName as Node | undefined)?.location);
  if (column === undefined || !VECTOR_COLUMNS.has(column) || castAt === null || typeAt === null) return;
  if (w.tokens[castAt]?.text !== '::') return;
  const start = w.argStart(node.arg as Node, castAt);
  const typeEnd = w.typeNameEnd(typeAt);
  if (start === null || typeEnd === null) return;
  w.insertBefore(start, 'array_to_string(');
  w.replaceTokens(castAt, typeEnd, ", ' ')");
}
