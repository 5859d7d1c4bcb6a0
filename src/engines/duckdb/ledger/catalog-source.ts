import type { SqlConnection } from '../../../engine/port.js';
import { LedgerCatalog, type CatalogSource, type CatalogTable } from '../../../ledger/chain/catalog.js';
import type { LedgerShapes } from '../../../ledger/chain/shapes.js';

/** DuckDB's catalog: every attached database's tables. */
export const readDuckdbTables: CatalogSource = async (conn, isProtected) => {
  const [[mainCatalog]] = (await conn.query('SELECT current_database()')) as [[string]];
  const rows = await conn.query(
    `SELECT database_name, schema_name, table_name, column_name, data_type, column_default, NOT is_nullable
     FROM system.main.duckdb_columns() WHERE NOT internal ORDER BY database_name, schema_name, table_name, column_index`,
  );
  const constrained = new Set<string>(
    (await conn.query(`SELECT DISTINCT database_name, schema_name, table_name FROM system.main.duckdb_constraints() WHERE constraint_type <> 'NOT NULL'`)).map(
      (r) => `${String(r[0])}\u0000${String(r[1])}\u0000${String(r[2])}`,
    ),
  );
  const comments = new Map<string, string | null>(
    (await conn.query(`SELECT database_name, schema_name, table_name, comment FROM system.main.duckdb_tables() WHERE NOT internal`)).map((r) => [
      `${String(r[0])}\u0000${String(r[1])}\u0000${String(r[2])}`,
      r[3] === null ? null : String(r[3]),
    ]),
  );
  const byTable = new Map<string, CatalogTable>();
  for (const [catalog, schema, name, column, type, def, notNull] of rows as Array<[string, string, string, string, string, string | null, boolean]>) {
    if (!isProtected(name)) continue;
    const key = `${catalog}\u0000${schema}\u0000${name}`;
    let t = byTable.get(key);
    if (t === undefined) {
      t = { catalog, schema, name, columns: [], comment: comments.get(key) ?? null, constrained: constrained.has(key) };
      byTable.set(key, t);
    }
    t.columns.push({ name: column, type, defaultSql: def, notNull });
  }
  return { mainCatalog, tables: [...byTable.values()] };
};

/** The ledgers of a DuckDB database, read from its catalog. */
export function duckdbLedgers(conn: SqlConnection, isProtected: (name: string) => boolean, shapes: LedgerShapes | null = null): LedgerCatalog {
  return new LedgerCatalog(conn, isProtected, shapes, readDuckdbTables);
}
