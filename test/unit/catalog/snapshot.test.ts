import { describe, expect, it } from 'vitest';
import { CATALOG_READERS, engineSetup } from '../../../src/engines/duckdb/catalog/compat.js';
import { pointAtSnapshot, readsCatalog, refreshSql, SNAPSHOT_RELATIONS } from '../../../src/engines/duckdb/catalog/snapshot.js';
import { tokenize } from '../../../src/sql/lexer.js';

describe('the catalog snapshot', () => {
  it('copies the views and the macros that read them, and none that read no view', () => {
    for (const name of ['pg_class', 'pg_attribute', 'pg_tables', 'cot_relnames', 'obj_description', 'pg_get_constraintdef', 'cot_regclass_in'])
      expect(CATALOG_READERS.has(name), name).toBe(true);
    for (const name of ['cot_type_key', 'cot_typmod', 'format_type']) expect(CATALOG_READERS.has(name), name).toBe(false);
    const setup = engineSetup();
    for (const name of SNAPSHOT_RELATIONS) {
      expect(setup).toContain(`CREATE TABLE cotwire_pg.pg_snapshot.${name} AS SELECT * FROM cotwire_pg.pg_snapshot.cot_live_${name} LIMIT 0`);
    }
    // A refresh fills each table from its definition, in the set-up's order, in one transaction.
    expect(refreshSql()[0]).toBe('BEGIN TRANSACTION');
    expect(refreshSql().at(-1)).toBe('COMMIT');
  });

  it('points a query at the copy, and never changes a string or a quoted name', () => {
    const sql = `SELECT 'cotwire_pg.pg.pg_class', "cotwire_pg.pg.pg_proc", cotwire_pg.pg.obj_description(t), cotwire_pg.pg.cot_type_key(x) FROM cotwire_pg.pg.pg_class, cotwire_pg.information.columns`;
    expect(pointAtSnapshot(sql, CATALOG_READERS, tokenize(sql))).toBe(
      `SELECT 'cotwire_pg.pg.pg_class', "cotwire_pg.pg.pg_proc", cotwire_pg.pg_snapshot.obj_description(t), cotwire_pg.pg.cot_type_key(x) FROM cotwire_pg.pg_snapshot.pg_class, cotwire_pg.information_snapshot.columns`,
    );
    expect(readsCatalog('SELECT cotwire_pg.pg.cot_type_key(x)', CATALOG_READERS)).toBe(false);
    expect(readsCatalog('SELECT * FROM cotwire_pg.information.tables', CATALOG_READERS)).toBe(true);
  });
});
