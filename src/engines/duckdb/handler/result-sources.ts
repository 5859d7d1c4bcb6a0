import { DECLARED_COLUMNS } from '../catalog/declared.js';
import { CATALOG_RELATIONS, COMPAT_CATALOG, INFORMATION_RELATIONS } from '../catalog/pg-catalog.js';
import type { FieldDescription } from '../../../protocol/messages.js';
import { TYPE_OID_BY_NAME, TypeOid } from '../../../protocol/type-oids.js';
import { jsonbText } from '../../../sql/jsonb.js';
import type { ParsedStatement } from '../../../sql/parsed.js';
import { type FromTable, type SelectSources, selectSources, tablesOf } from '../../../sql/result-sources.js';
import { quoteLiteral } from '../../../sql/identifiers.js';
import type { HandlerContext } from './context.js';

/**
 * RowDescription as PostgreSQL fills it for a column read from a table: the
 * table's OID and the column's number, and the column's declared type where
 * DuckDB keeps a plainer one (varchar(n) and char(n) are VARCHAR, jsonb is
 * JSON). A jsonb result's values are printed as jsonb prints them.
 */

interface CatalogColumn {
  readonly column: string;
  readonly tableOid: number;
  readonly attnum: number;
  /** The declared type's OID where DuckDB holds a plainer one; null otherwise. */
  readonly typeOid: number | null;
  readonly typmod: number;
}

/** The declared types DuckDB holds as a plainer one (engines/duckdb/catalog/declared.ts). */
const DECLARED_TYPES: Readonly<Record<string, { readonly oid: number; readonly over: string }>> = {
  varchar: { oid: TypeOid.varchar, over: 'VARCHAR' },
  bpchar: { oid: TypeOid.bpchar, over: 'VARCHAR' },
  jsonb: { oid: TypeOid.jsonb, over: 'JSON' },
};

/** What the catalog says of the tables of one name: where each is, its declared columns, and each one's columns by qualified name. */
interface TableFacts {
  readonly found: ReadonlyArray<readonly unknown[]>;
  readonly declared: ReadonlyArray<readonly unknown[]>;
  readonly info: Map<string, ReadonlyArray<readonly unknown[]>>;
}

/**
 * The facts read for every connection that sees the shared schema, by
 * table name (lower case), for one generation of the catalog: a statement
 * text new to a connection then costs no engine query for tables another
 * statement named before (each costs about 2 ms here).
 */
const shared = new WeakMap<object, { readonly epoch: number; readonly tables: Map<string, TableFacts> }>();

/**
 * What the catalog says of the FROM tables' columns, by table (its key in
 * the query). Read from duckdb_tables() and pragma_table_info(), which are
 * cheap: duckdb_columns() binds every view of the catalog layer, and costs
 * milliseconds.
 */
async function catalogColumns(ctx: HandlerContext, all: readonly FromTable[]): Promise<Map<FromTable, CatalogColumn[]>> {
  const out = new Map<FromTable, CatalogColumn[]>();
  // The catalog's own relations are views, which have no columns to name as sources: nothing to look up.
  for (const t of all) if (isCatalogRelation(t)) out.set(t, []);
  const tables = all.filter((t) => !out.has(t));
  if (tables.length === 0) return out;
  const names = [...new Set(tables.map((t) => t.name.toLowerCase()))];
  const epoch = ctx.services.catalogSnapshot.generation;
  let cache: Map<string, TableFacts> | null = null;
  if (ctx.catalog.seesSharedSchema) {
    let entry = shared.get(ctx.services);
    if (entry === undefined || entry.epoch !== epoch) {
      entry = { epoch, tables: new Map() };
      shared.set(ctx.services, entry);
    }
    cache = entry.tables;
  }
  const facts = new Map<string, TableFacts>();
  const missing = names.filter((n) => {
    const known = cache?.get(n);
    if (known !== undefined) facts.set(n, known);
    return known === undefined;
  });
  if (missing.length > 0) {
    const list = missing.map(quoteLiteral).join(', ');
    const found = await ctx.engine.query(
      `SELECT database_name, schema_name, table_name, table_oid FROM duckdb_tables()
       WHERE lower(table_name) IN (${list}) AND database_name NOT IN ('system', ${quoteLiteral(COMPAT_CATALOG)})
       ORDER BY database_name = 'temp' DESC, schema_name = 'main' DESC`,
    );
    const declared = await ctx.engine.query(
      `SELECT lower(schema_name), lower(table_name), lower(column_name), pg_type, typmod FROM ${DECLARED_COLUMNS}
       WHERE lower(table_name) IN (${list})`,
    );
    for (const n of missing) {
      const mine: TableFacts = {
        found: found.filter((r) => String(r[2]).toLowerCase() === n),
        declared: declared.filter((r) => r[1] === n),
        info: new Map(),
      };
      facts.set(n, mine);
      // A temporary table is its connection's own.
      if (cache !== null && !mine.found.some((r) => r[0] === 'temp')) cache.set(n, mine);
    }
  }
  for (const t of tables) {
    const schema = t.schema === null ? null : t.schema.toLowerCase() === 'public' ? 'main' : t.schema.toLowerCase();
    const known = facts.get(t.name.toLowerCase()) as TableFacts;
    // The first table of that name on the search path: a temporary one, then public's.
    const row = known.found.find((r) => schema === null || String(r[1]).toLowerCase() === schema);
    if (row === undefined) {
      out.set(t, []);
      continue;
    }
    const [database, schemaName, table] = row.slice(0, 3).map(String) as [string, string, string];
    const qualified = [database, schemaName, table].map((p) => `"${p.replaceAll('"', '""')}"`).join('.');
    let info = known.info.get(qualified);
    if (info === undefined) {
      info = await ctx.engine.query(`SELECT cid, name, type FROM pragma_table_info(${quoteLiteral(qualified)}) ORDER BY cid`);
      known.info.set(qualified, info);
    }
    out.set(
      t,
      info.map((r) => {
        const column = String(r[1]);
        const d =
          database === 'temp'
            ? undefined
            : known.declared.find((x) => x[0] === schemaName.toLowerCase() && x[1] === table.toLowerCase() && x[2] === column.toLowerCase());
        const type = d === undefined ? undefined : DECLARED_TYPES[String(d[3])];
        const typeOid = type !== undefined && type.over === String(r[2]) ? type.oid : null;
        return { tableOid: Number(row[3]), attnum: Number(r[0]) + 1, column, typeOid, typmod: typeOid === null ? -1 : Number(d?.[4] ?? -1) };
      }),
    );
  }
  return out;
}

/** A column's source, or what an expression is: jsonb, a type's name, a cast with a type modifier, or another expression. */
type Source = CatalogColumn | 'jsonb' | 'regtype' | 'typmod' | 'expression' | null;

/** The source each result column of a query reads, in order; null when the list cannot be matched to the engine's columns. */
function resolve(sources: SelectSources, columns: Map<FromTable, CatalogColumn[]>): Source[] | null {
  // Each FROM item's columns, by the name the query reaches them by.
  const scope = new Map<string, Array<{ readonly name: string; readonly source: Source }>>();
  for (const f of sources.from) {
    if (f.kind === 'table') {
      scope.set(
        f.key.toLowerCase(),
        (columns.get(f) ?? []).map((c) => ({ name: c.column, source: c })),
      );
    } else {
      const inner = resolve(f.sources, columns);
      if (inner === null || inner.length !== f.names.length) return null;
      scope.set(
        f.key.toLowerCase(),
        f.names.map((name, i) => ({ name: name ?? '?column?', source: inner[i] ?? null })),
      );
    }
  }
  const out: Source[] = [];
  for (const t of sources.targets) {
    if (t.kind === 'star') {
      if (sources.opaque || (!sources.plainStar && t.qualifier === null)) return null;
      const from = t.qualifier === null ? [...scope.values()] : [scope.get(t.qualifier.toLowerCase()) ?? []];
      if (from.some((cols) => cols.length === 0)) return null;
      for (const cols of from) out.push(...cols.map((c) => c.source));
    } else if (t.kind === 'column' || t.kind === 'jsonbOf') {
      const name = t.column.toLowerCase();
      // A column JOIN ... USING merged reads its side's (the left one, unless RIGHT; none for FULL).
      const merged = t.qualifier === null ? sources.merged.get(name) : undefined;
      const from =
        merged !== undefined
          ? merged.map((k) => scope.get(k) ?? [])
          : t.qualifier !== null
            ? [scope.get(t.qualifier.toLowerCase()) ?? []]
            : [...scope.values()];
      const candidates = sources.opaque && t.qualifier === null ? [] : from.flat().filter((c) => c.name.toLowerCase() === name);
      const source = candidates.length === 1 ? (candidates[0]?.source ?? null) : null;
      if (t.kind === 'column') out.push(source);
      else out.push(source === 'jsonb' || (typeof source === 'object' && source?.typeOid === TypeOid.jsonb) ? 'jsonb' : 'expression');
    } else {
      out.push(t.kind === 'other' ? 'expression' : t.kind);
    }
  }
  return out;
}

/** The OID a declared type's values have in the engine (text for varchar(n) and char(n), json for jsonb). */
const ENGINE_OID: ReadonlyMap<number, number> = new Map([
  [TypeOid.varchar, TypeOid.text],
  [TypeOid.bpchar, TypeOid.text],
  [TypeOid.jsonb, TypeOid.json],
]);

type Resolved = readonly Source[] | null;

/** Each connection's statements' sources, by text, with the catalog's generation they were read in (a temporary table is the connection's own). */
const caches = new WeakMap<HandlerContext, Map<string, { readonly epoch: number; readonly resolved: Resolved }>>();

/** A relation the rewriter points at the catalog's views (rewrite/catalog-refs.ts). */
function isCatalogRelation(t: FromTable): boolean {
  const name = t.name.toLowerCase();
  const schema = t.schema?.toLowerCase() ?? null;
  if (schema === null || schema === 'pg_catalog') return CATALOG_RELATIONS.has(name);
  return schema === 'information_schema' && INFORMATION_RELATIONS.has(name);
}

/** The fields of a query's RowDescription, with each table column's source and declared type. */
export async function describeSources(ctx: HandlerContext, client: ParsedStatement, fields: readonly FieldDescription[]): Promise<readonly FieldDescription[]> {
  const clientText = client.text;
  if (fields.length === 0 || !/\bfrom\b|jsonb|regtype|pg_typeof|numeric|decimal/i.test(clientText)) return fields;
  let cache = caches.get(ctx);
  if (cache === undefined) {
    cache = new Map();
    caches.set(ctx, cache);
  }
  // The snapshot's generation moves with every change to the schema, on any connection.
  const catalogEpoch = ctx.services.catalogSnapshot.generation;
  let resolved = cache.get(clientText)?.epoch === catalogEpoch ? (cache.get(clientText)?.resolved ?? null) : undefined;
  if (resolved === undefined) {
    const epoch = catalogEpoch;
    const sources = selectSources(client);
    const tables = sources === null ? [] : tablesOf(sources);
    // What cannot be read of the catalog leaves the description as the engine gave it, never fails the statement.
    const columns = tables.length === 0 ? new Map<FromTable, CatalogColumn[]>() : await catalogColumns(ctx, tables).catch(() => null);
    if (columns === null) return fields;
    resolved = sources === null ? null : resolve(sources, columns);
    if (cache.size >= 500) cache.clear();
    cache.set(clientText, { epoch, resolved });
  }
  if (resolved === null || resolved.length !== fields.length) return fields;
  return fields.map((f, i) => {
    const source = resolved[i];
    if (source === 'jsonb') return f.typeOid === TypeOid.json ? { ...f, typeOid: TypeOid.jsonb } : f;
    if (source === 'regtype') return f.typeOid === TypeOid.text ? { ...f, typeOid: TypeOid.regtype, typeSize: 4 } : f;
    // PostgreSQL describes an expression's numeric without a modifier; the engine's DECIMAL has the digits it holds.
    if (source === 'expression') return f.typeOid === TypeOid.numeric ? { ...f, typeModifier: -1 } : f;
    if (source === 'typmod') return f;
    if (source === null || source === undefined) return f;
    const declared = source.typeOid !== null && ENGINE_OID.get(source.typeOid) === f.typeOid;
    return {
      ...f,
      tableOid: source.tableOid,
      columnAttr: source.attnum,
      ...(declared ? { typeOid: source.typeOid as number, typeModifier: source.typmod } : {}),
    };
  });
}

/** A text cell as a string: the engine hands text columns over as their UTF-8 bytes. */
const cellText = (cell: string | Uint8Array): string =>
  typeof cell === 'string' ? cell : Buffer.from(cell.buffer, cell.byteOffset, cell.byteLength).toString('utf8');

/** A cell of a jsonb result: jsonb's text, and in binary its version byte before it. */
function jsonbCell(cell: string | Uint8Array, binary: boolean): string | Uint8Array {
  const text = cellText(cell);
  const normal = jsonbText(text) ?? text;
  return binary ? Buffer.concat([Buffer.from([1]), Buffer.from(normal, 'utf8')]) : normal;
}

/** A regtype cell in binary: the type's OID, by its name (0 for a type cotwire has no OID for). */
function regtypeCell(cell: string | Uint8Array): Uint8Array {
  const out = Buffer.alloc(4);
  out.writeUInt32BE(TYPE_OID_BY_NAME.get(cellText(cell)) ?? 0);
  return out;
}

/** A cell of a char(n) result: blank-padded to n characters, as PostgreSQL stores it. */
function bpcharCell(cell: string | Uint8Array, length: number): string {
  const text = cellText(cell);
  const chars = [...text].length;
  return chars < length ? text + ' '.repeat(length - chars) : text;
}

/**
 * How each column's cells are printed where its declared type prints them
 * otherwise than the engine's (jsonb, char(n)); null when no column needs it.
 */
export function declaredCells(
  fields: readonly FieldDescription[] | null,
  formats: readonly (0 | 1)[],
): ((cells: readonly (string | Uint8Array | null)[]) => (string | Uint8Array | null)[]) | null {
  const fix = (fields ?? []).map((f, i): ((c: string | Uint8Array) => string | Uint8Array) | null => {
    if (f.typeOid === TypeOid.jsonb) return (c) => jsonbCell(c, formats[i] === 1);
    if (f.typeOid === TypeOid.regtype && formats[i] === 1) return regtypeCell;
    if (f.typeOid === TypeOid.bpchar && f.typeModifier > 4) return (c) => bpcharCell(c, f.typeModifier - 4);
    return null;
  });
  if (!fix.some((f) => f !== null)) return null;
  return (cells) => cells.map((c, i) => (c === null ? null : (fix[i]?.(c) ?? c)));
}
