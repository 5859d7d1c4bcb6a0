import { loadModule } from 'libpg-query';
import { beforeAll, describe, expect, it } from 'vitest';
import { retypedDefinition } from '../../../src/engines/duckdb/catalog/alter-table.js';
import { CompatRewriter } from '../../../src/engines/duckdb/catalog/compat.js';
import {
  actionSql,
  defaultKeyName,
  type ForeignKey,
  keyDdlOf,
  keyIn,
  keyMappingSql,
  orphanSql,
  tableWriteOf,
  updateParts,
} from '../../../src/engines/duckdb/catalog/foreign-keys.js';
import { lexStatement, tokenize } from '../../../src/sql/lexer.js';
import { ParsedStatement } from '../../../src/sql/parsed.js';

const parsed = (sql: string) => new ParsedStatement(sql);
const rewriter = new CompatRewriter();
const rw = (sql: string): string => rewriter.rewrite(sql, tokenize(sql));

beforeAll(async () => {
  await loadModule();
});

describe('foreign keys the server keeps', () => {
  it('reads them from CREATE TABLE, on columns and as table constraints, with their actions', () => {
    const ddl = keyDdlOf(
      parsed(
        'CREATE TABLE IF NOT EXISTS public.c (id int PRIMARY KEY, pid int NOT NULL CONSTRAINT fk1 REFERENCES p ON DELETE CASCADE, a int, b text, FOREIGN KEY (a, b) REFERENCES s.p2 (x, y) ON UPDATE SET NULL ON DELETE SET DEFAULT)',
      ),
    );
    expect(ddl).toEqual({
      op: 'add',
      at: { schema: 'main', table: 'c' },
      alone: false,
      ifNotExists: true,
      keys: [
        { name: 'fk1', columns: ['pid'], refSchema: null, refTable: 'p', refColumns: null, onUpdate: 'a', onDelete: 'c', matchFull: false },
        { name: null, columns: ['a', 'b'], refSchema: 's', refTable: 'p2', refColumns: ['x', 'y'], onUpdate: 'n', onDelete: 'd', matchFull: false },
      ],
    });
    // A temporary table's keys and a ledger's stay DuckDB's.
    expect(keyDdlOf(parsed('CREATE TEMP TABLE t (pid int REFERENCES p)'))).toBeNull();
    expect(keyDdlOf(parsed('CREATE TABLE _cot_notes (pid int REFERENCES p)'))).toBeNull();
    expect(keyDdlOf(parsed('CREATE TABLE t (id int)'))).toBeNull();
  });

  it('reads the ALTER TABLE, DROP and RENAME that change them', () => {
    expect(keyDdlOf(parsed('ALTER TABLE ONLY c ADD CONSTRAINT k FOREIGN KEY (pid) REFERENCES p (id) NOT VALID'))).toMatchObject({
      op: 'add',
      alone: true,
      keys: [{ name: 'k', columns: ['pid'], refColumns: ['id'] }],
    });
    expect(keyDdlOf(parsed('ALTER TABLE c ADD COLUMN z int REFERENCES p'))).toMatchObject({ op: 'add', alone: false, keys: [{ columns: ['z'] }] });
    expect(keyDdlOf(parsed('ALTER TABLE c DROP CONSTRAINT IF EXISTS k'))).toEqual({
      op: 'drop-constraint',
      at: { schema: 'main', table: 'c' },
      name: 'k',
      missingOk: true,
    });
    expect(keyDdlOf(parsed('ALTER TABLE c DROP COLUMN pid CASCADE'))).toEqual({
      op: 'drop-column',
      at: { schema: 'main', table: 'c' },
      column: 'pid',
      cascade: true,
    });
    expect(keyDdlOf(parsed('DROP TABLE a, public.b, s.c CASCADE'))).toEqual({
      op: 'drop-tables',
      tables: [
        { schema: 'main', table: 'a' },
        { schema: 'main', table: 'b' },
        { schema: 's', table: 'c' },
      ],
      cascade: true,
      unqualified: ['a'],
    });
    expect(keyDdlOf(parsed('ALTER TABLE c RENAME TO d'))).toEqual({ op: 'rename-table', at: { schema: 'main', table: 'c' }, to: 'd' });
    expect(keyDdlOf(parsed('ALTER TABLE c RENAME COLUMN a TO b'))).toEqual({ op: 'rename-column', at: { schema: 'main', table: 'c' }, from: 'a', to: 'b' });
    expect(keyDdlOf(parsed('DROP SCHEMA s, public CASCADE'))).toEqual({ op: 'drop-schemas', schemas: ['s', 'main'], cascade: true });
    expect(keyDdlOf(parsed('DROP VIEW v'))).toBeNull();
  });

  it('reads which tables and columns a write changes', () => {
    expect(tableWriteOf(parsed('INSERT INTO c (pid) VALUES (1)'))).toEqual({
      kind: 'insert',
      tables: [{ schema: 'main', table: 'c' }],
      sets: [],
      cascade: false,
    });
    expect(tableWriteOf(parsed('INSERT INTO p (id) VALUES (1) ON CONFLICT (id) DO UPDATE SET name = excluded.name'))?.sets).toEqual(['name']);
    expect(tableWriteOf(parsed('UPDATE p SET id = 2, (a, b) = (1, 2) WHERE id = 1'))?.sets).toEqual(['id', 'a', 'b']);
    expect(tableWriteOf(parsed('DELETE FROM s.p WHERE id = 1'))).toEqual({ kind: 'delete', tables: [{ schema: 's', table: 'p' }], sets: [], cascade: false });
    expect(tableWriteOf(parsed('TRUNCATE a, b CASCADE'))).toMatchObject({ kind: 'truncate', cascade: true, tables: [{ table: 'a' }, { table: 'b' }] });
    expect(tableWriteOf(parsed('WITH x AS (SELECT 1) DELETE FROM p'))).toMatchObject({ kind: 'delete' });
    expect(tableWriteOf(parsed('SELECT 1'))).toBeNull();
  });

  it("names an unnamed key as PostgreSQL does, within 63 bytes and apart from the schema's other constraints", () => {
    expect(defaultKeyName('orders', ['customer_id'], new Set())).toBe('orders_customer_id_fkey');
    expect(defaultKeyName('orders', ['customer_id'], new Set(['orders_customer_id_fkey']))).toBe('orders_customer_id_fkey1');
    const long = defaultKeyName('t'.repeat(40), ['c'.repeat(40)], new Set());
    expect(Buffer.byteLength(long)).toBe(63);
    expect(long.endsWith('_fkey')).toBe(true);
  });

  it('writes the checks and actions over the orphans a change leaves', () => {
    const k: ForeignKey = {
      schema: 'main',
      table: 'c',
      name: 'c_a_b_fkey',
      ordinal: 1,
      columns: ['a', 'B'],
      refSchema: 'main',
      refTable: 'p',
      refColumns: ['x', 'y'],
      onUpdate: 'a',
      onDelete: 'c',
    };
    expect(orphanSql('db', k, true)).toBe(
      'SELECT CAST(cot_c."a" AS VARCHAR), CAST(cot_c."B" AS VARCHAR) FROM "db"."main"."c" cot_c WHERE cot_c."a" IS NOT NULL AND cot_c."B" IS NOT NULL AND NOT EXISTS (SELECT 1 FROM "db"."main"."p" cot_p WHERE cot_p."x" = cot_c."a" AND cot_p."y" = cot_c."B") AND cot_c.rowid >= 36028797018960000 LIMIT 1',
    );
    expect(actionSql('db', k, 'n')).toMatch(/^UPDATE "db"\."main"\."c" AS cot_c SET "a" = NULL, "B" = NULL WHERE cot_c\."a" IS NOT NULL/);
    expect(actionSql('db', k, 'c')).toMatch(/^DELETE FROM "db"\."main"\."c" AS cot_c WHERE /);
  });

  it('takes them out of the DDL the engine runs, for a permanent table only', () => {
    expect(rw('CREATE TABLE c (id int PRIMARY KEY, pid int REFERENCES p (id) ON DELETE CASCADE NOT NULL, q int)')).toBe(
      'CREATE TABLE c (id int PRIMARY KEY, pid int  NOT NULL, q int)',
    );
    expect(rw('CREATE TABLE c (id int, CONSTRAINT k FOREIGN KEY (id) REFERENCES p (id) MATCH FULL, q int)')).toBe('CREATE TABLE c (id int, q int)');
    expect(rw('CREATE TABLE c (FOREIGN KEY (id) REFERENCES p, id int)')).toBe('CREATE TABLE c ( id int)');
    expect(rw('ALTER TABLE c ADD COLUMN z int REFERENCES p')).toBe('ALTER TABLE c ADD COLUMN z int ');
    expect(rw('CREATE TEMP TABLE c (pid int REFERENCES p ON DELETE CASCADE)')).toBe('CREATE TEMP TABLE c (pid int REFERENCES p )');
  });
});

describe('a change of column types made in the definition', () => {
  it("swaps each column's type, and nothing else, in DuckDB's CREATE TABLE", () => {
    const sql = `CREATE TABLE customers(id INTEGER DEFAULT(nextval('customers_id_seq')) PRIMARY KEY, email VARCHAR NOT NULL UNIQUE, "Tags" VARCHAR[], n DECIMAL(10,2), CHECK((length(email) <= 255)));`;
    expect(
      retypedDefinition(sql, [
        { column: 'email', type: 'VARCHAR' },
        { column: 'n', type: 'DECIMAL(12,4)' },
        { column: 'tags', type: 'INTEGER[]' },
      ]),
    ).toBe(
      `CREATE TABLE customers(id INTEGER DEFAULT(nextval('customers_id_seq')) PRIMARY KEY, email VARCHAR NOT NULL UNIQUE, "Tags" INTEGER[], n DECIMAL(12,4), CHECK((length(email) <= 255)));`,
    );
    expect(retypedDefinition(sql, [{ column: 'missing', type: 'INTEGER' }])).toBeNull();
  });
});

describe("an UPDATE's parts, for the keys an ON UPDATE CASCADE rekeys", () => {
  const parts = (sql: string, alias: string) => updateParts(sql, lexStatement(sql).tokens, alias);

  it('reads the target, each SET expression, FROM and WHERE, and maps each old key to its new one', () => {
    const p = parts("UPDATE p AS x SET code = code || '2', n = f(a, b) FROM m WHERE x.code = m.old AND a IS DISTINCT FROM b RETURNING *", 'x');
    expect(p).toEqual({
      target: 'p AS x',
      alias: 'x',
      sets: new Map([
        ['code', "code || '2'"],
        ['n', 'f(a, b)'],
      ]),
      from: 'm',
      where: 'x.code = m.old AND a IS DISTINCT FROM b',
    });
    expect(keyMappingSql(p as NonNullable<typeof p>, ['code', 'n2'])).toBe(
      `SELECT CAST("x"."code" AS VARCHAR), CAST("x"."n2" AS VARCHAR), CAST(code || '2' AS VARCHAR), CAST("x"."n2" AS VARCHAR) FROM p AS x, m WHERE x.code = m.old AND a IS DISTINCT FROM b`,
    );
    expect(parts('UPDATE p SET id = $1 WHERE id = $2;', 'p')).toMatchObject({ sets: new Map([['id', '$1']]), from: null, where: 'id = $2' });
  });

  it('takes no multiple assignment, and no other statement', () => {
    expect(parts('UPDATE p SET (a, b) = (1, 2)', 'p')).toBeNull();
    expect(parts('INSERT INTO p VALUES (1)', 'p')).toBeNull();
  });
});

describe('the keys a parent change removes', () => {
  it('reads a DELETE as its target, USING and WHERE', () => {
    const sql = 'DELETE FROM p AS x USING m WHERE x.id = m.id AND m.gone RETURNING x.id';
    expect(updateParts(sql, lexStatement(sql).tokens, 'x')).toEqual({
      target: 'p AS x',
      alias: 'x',
      sets: new Map(),
      from: 'm',
      where: 'x.id = m.id AND m.gone',
    });
    const all = 'DELETE FROM p;';
    expect(updateParts(all, lexStatement(all).tokens, 'p')).toEqual({ target: 'p', alias: 'p', sets: new Map(), from: null, where: null });
  });

  it('names child rows on the removed keys, typed as the columns are', () => {
    expect(keyIn('cot_c', ['pid'], ['INTEGER'], [['1'], ['2']])).toBe("cot_c.\"pid\" IN (CAST('1' AS INTEGER), CAST('2' AS INTEGER))");
    expect(keyIn('cot_c', ['a', 'b'], ['VARCHAR', 'DATE'], [['x', '2024-01-01']])).toBe(
      '(cot_c."a" = CAST(\'x\' AS VARCHAR) AND cot_c."b" = CAST(\'2024-01-01\' AS DATE))',
    );
  });
});
