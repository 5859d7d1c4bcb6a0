import type { CatalogSource, CatalogTable } from '../../../ledger/chain/catalog.js';
import { PG_LEDGER_SCHEMA, pgRoles } from './names.js';
import { quoteIdent } from '../../../ledger/chain/schema.js';

/**
 * Ledgers in a PostgreSQL engine. They live in `public`, owned by the owner
 * role, and are described with DuckDB's type names, so that the writer,
 * the hash pre-image and verification see one kind of ledger on either
 * engine. Their schema is `main` in every hash and record, as in DuckDB, so
 * that a ledger moved between engines keeps its log leaves and its records
 * (docs/scaling.md, "Moving between engines").
 */

/** PostgreSQL's type names (format_type) as DuckDB names them, for the types a ledger column may have. */
const DUCKDB_TYPE: Readonly<Record<string, string>> = {
  text: 'VARCHAR',
  'character varying': 'VARCHAR',
  json: 'JSON',
  uuid: 'UUID',
  smallint: 'SMALLINT',
  integer: 'INTEGER',
  bigint: 'BIGINT',
  'double precision': 'DOUBLE',
  boolean: 'BOOLEAN',
  'timestamp with time zone': 'TIMESTAMP WITH TIME ZONE',
};

/** The DuckDB name of a PostgreSQL column type; other types keep PostgreSQL's name, upper case, and no ledger can hash them. */
export function duckdbTypeOf(pgType: string): string {
  return DUCKDB_TYPE[pgType] ?? pgType.toUpperCase();
}

/** The column types a ledger on PostgreSQL can hold: those whose canonical text both engines agree on. */
export function pgLedgerTypeSupported(duckdbType: string): boolean {
  return Object.values(DUCKDB_TYPE).includes(duckdbType);
}

/** The SQL name of a ledger in the engine. */
export function pgRelation(name: string): string {
  return `${PG_LEDGER_SCHEMA}.${quoteIdent(name)}`;
}

/** The tables of `public` with protected names that the owner role owns. */
export function readPostgresTables(rolePrefix: string): CatalogSource {
  const owner = pgRoles(rolePrefix).owner;
  return async (conn, isProtected) => {
    const rows = (await conn.query(
      `SELECT current_database(), c.relname, a.attname, pg_catalog.format_type(a.atttypid, NULL), pg_catalog.pg_get_expr(d.adbin, d.adrelid), a.attnotnull,
              pg_catalog.obj_description(c.oid, 'pg_class')
       FROM pg_catalog.pg_class c
       JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
       JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
       LEFT JOIN pg_catalog.pg_attrdef d ON d.adrelid = c.oid AND d.adnum = a.attnum
       WHERE n.nspname = $1 AND c.relkind = 'r' AND pg_catalog.pg_get_userbyid(c.relowner) = $2
       ORDER BY c.relname, a.attnum`,
      [PG_LEDGER_SCHEMA, owner],
    )) as Array<[string, string, string, string, string | null, boolean, string | null]>;
    const byName = new Map<string, CatalogTable>();
    let mainCatalog = '';
    for (const [catalog, name, column, type, def, notNull, comment] of rows) {
      mainCatalog = catalog;
      if (!isProtected(name)) continue;
      let t = byName.get(name);
      if (t === undefined) {
        t = { catalog, schema: 'main', name, relation: pgRelation(name), columns: [], comment, constrained: true };
        byName.set(name, t);
      }
      t.columns.push({ name: column, type: duckdbTypeOf(type), defaultSql: def, notNull });
    }
    if (mainCatalog === '') {
      const [[db]] = (await conn.query('SELECT current_database()')) as [[string]];
      mainCatalog = db;
    }
    return { mainCatalog, tables: [...byName.values()] };
  };
}
