import type { ProtectedNames } from '../../../guard/names.js';
import { tokenize } from '../../../sql/lexer.js';
import { COMPAT_CATALOG } from '../catalog/compat.js';

/**
 * The views and macros whose definitions read a ledger, directly or through
 * another of them. A user with an org_id reads ledgers only by name, where
 * the server puts its filter (guard/tenant-scope.ts); the engine expands a
 * view or a macro after that, where no filter reaches, so these are refused
 * to such a user. Read once per generation of the catalog, for every
 * connection.
 */
export class LedgerDependents {
  private generation = -1;
  private names: Promise<ReadonlySet<string>> | null = null;

  constructor(private readonly protectedNames: ProtectedNames) {}

  /** The names (lower case) at this generation of the catalog, read with `query` when it moved on. */
  at(generation: number, query: (sql: string) => Promise<unknown[][]>): Promise<ReadonlySet<string>> {
    if (this.names !== null && this.generation === generation) return this.names;
    this.generation = generation;
    this.names = this.read(query).catch((err: unknown) => {
      this.names = null;
      throw err;
    });
    return this.names;
  }

  private async read(query: (sql: string) => Promise<unknown[][]>): Promise<ReadonlySet<string>> {
    const hidden = `('system', 'temp', '${COMPAT_CATALOG}')`;
    const rows = [
      ...(await query(`SELECT lower(view_name), sql FROM system.main.duckdb_views() WHERE NOT internal AND database_name NOT IN ${hidden}`)),
      ...(await query(
        `SELECT lower(function_name), macro_definition FROM system.main.duckdb_functions()
         WHERE function_type IN ('macro', 'table_macro') AND NOT internal AND database_name NOT IN ${hidden} AND macro_definition IS NOT NULL`,
      )),
    ];
    const words = rows.map(([name, sql]) => {
      const found = new Set<string>();
      for (const t of tokenize(String(sql ?? ''))) {
        if (t.kind === 'word') found.add(t.text.toLowerCase());
        else if (t.kind === 'quoted') found.add(t.text.slice(1, -1).replaceAll('""', '"').toLowerCase());
      }
      return { name: String(name), found };
    });
    const dependents = new Set<string>();
    for (const w of words) if ([...w.found].some((x) => this.protectedNames.isProtected(x))) dependents.add(w.name);
    // Through one another, to any depth: until a pass adds none.
    for (let grew = true; grew; ) {
      grew = false;
      for (const w of words) {
        if (!dependents.has(w.name) && [...w.found].some((x) => dependents.has(x))) {
          dependents.add(w.name);
          grew = true;
        }
      }
    }
    return dependents;
  }
}

/** DuckDB's functions that show what a table holds without reading its rows: its storage's statistics, its estimated size. */
export const TABLE_STATISTICS: ReadonlySet<string> = new Set([
  'pragma_storage_info',
  'storage_info',
  'duckdb_tables',
  'pragma_metadata_info',
  'duckdb_table_sample',
]);
