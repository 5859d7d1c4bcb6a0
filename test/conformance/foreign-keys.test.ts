import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import { sqlstate, useConformanceServer } from '../fixtures/conformance.js';

/**
 * Foreign keys as PostgreSQL keeps them, on both engines: actions carried
 * out in the statement's transaction, PostgreSQL's errors where a key
 * refuses, and the DDL around them (ALTER TABLE on a referenced table,
 * DROP, TRUNCATE) as PostgreSQL answers it.
 */
const s = useConformanceServer();

const rows = async (c: pg.Client, sql: string): Promise<unknown[]> => (await c.query(sql)).rows;
const error = (p: Promise<unknown>): Promise<{ code?: string; message?: string; detail?: string; hint?: string; constraint?: string }> =>
  p.then(
    () => ({}),
    (e: { code?: string; message?: string; detail?: string; hint?: string; constraint?: string }) => e,
  );

/** A customer, an order of theirs, its items and a note: the shape ORMs make (Sequelize's defaults are CASCADE and SET NULL). */
async function shop(c: pg.Client, p: string): Promise<void> {
  await c.query(`CREATE TABLE ${p}_customers (id serial PRIMARY KEY, email text UNIQUE)`);
  await c.query(
    `CREATE TABLE ${p}_orders (id serial PRIMARY KEY, customer_id integer REFERENCES ${p}_customers (id) ON DELETE CASCADE ON UPDATE CASCADE, note text)`,
  );
  await c.query(`CREATE TABLE ${p}_items (id int PRIMARY KEY, order_id int NOT NULL REFERENCES ${p}_orders ON DELETE CASCADE, qty int)`);
  await c.query(
    `CREATE TABLE ${p}_notes (id int PRIMARY KEY, customer_id int DEFAULT 2, CONSTRAINT ${p}_notes_customer FOREIGN KEY (customer_id) REFERENCES ${p}_customers (id) ON DELETE SET DEFAULT)`,
  );
  await c.query(`INSERT INTO ${p}_customers (email) VALUES ('a@x.io'), ('b@x.io'), ('c@x.io')`);
  await c.query(`INSERT INTO ${p}_orders (customer_id, note) VALUES (1, 'o1'), (1, 'o2'), (2, 'o3')`);
  await c.query(`INSERT INTO ${p}_items VALUES (1, 1, 5), (2, 2, 1), (3, 3, 2)`);
  await c.query(`INSERT INTO ${p}_notes VALUES (1, 1), (2, 3)`);
}

describe('foreign keys', () => {
  it('carry out ON DELETE CASCADE through every level, and SET DEFAULT, in the statement', async () => {
    const c = await s.as();
    await shop(c, 'fk_cascade');
    expect((await c.query('DELETE FROM fk_cascade_customers WHERE id = 1')).rowCount).toBe(1);
    expect(await rows(c, 'SELECT id, customer_id FROM fk_cascade_orders ORDER BY id')).toEqual([{ id: 3, customer_id: 2 }]);
    expect(await rows(c, 'SELECT id FROM fk_cascade_items ORDER BY id')).toEqual([{ id: 3 }]);
    expect(await rows(c, 'SELECT id, customer_id FROM fk_cascade_notes ORDER BY id')).toEqual([
      { id: 1, customer_id: 2 },
      { id: 2, customer_id: 3 },
    ]);
    // SET DEFAULT to a key that has no parent refuses the delete, and nothing of it stays.
    await c.query('DELETE FROM fk_cascade_orders WHERE customer_id = 2');
    const refused = await error(c.query('DELETE FROM fk_cascade_customers WHERE id = 2'));
    expect(refused).toMatchObject({
      code: '23503',
      message: 'update or delete on table "fk_cascade_customers" violates foreign key constraint "fk_cascade_notes_customer" on table "fk_cascade_notes"',
      detail: 'Key (id)=(2) is still referenced from table "fk_cascade_notes".',
    });
    // A default that names no parent is refused as the child's own change.
    await c.query('ALTER TABLE fk_cascade_notes ALTER COLUMN customer_id SET DEFAULT 42');
    const missing = await error(c.query('DELETE FROM fk_cascade_customers WHERE id = 3'));
    expect(missing).toMatchObject({
      code: '23503',
      message: 'insert or update on table "fk_cascade_notes" violates foreign key constraint "fk_cascade_notes_customer"',
      detail: 'Key (customer_id)=(42) is not present in table "fk_cascade_customers".',
    });
    expect(await rows(c, 'SELECT count(*)::int AS n FROM fk_cascade_customers')).toEqual([{ n: 2 }]);
  });

  it('set NULL, and refuse with 23503 where the key has no action', async () => {
    const c = await s.as();
    await c.query('CREATE TABLE fk_plain_parent (code text PRIMARY KEY, name text)');
    await c.query('CREATE TABLE fk_plain_child (id int PRIMARY KEY, code text REFERENCES fk_plain_parent ON DELETE SET NULL)');
    await c.query('CREATE TABLE fk_plain_strict (id int PRIMARY KEY, code text REFERENCES fk_plain_parent (code))');
    await c.query("INSERT INTO fk_plain_parent VALUES ('a', 'A'), ('b', 'B')");
    await c.query("INSERT INTO fk_plain_child VALUES (1, 'a'), (2, 'b'), (3, NULL)");
    await c.query("INSERT INTO fk_plain_strict VALUES (1, 'b')");
    await c.query("DELETE FROM fk_plain_parent WHERE code = 'a'");
    expect(await rows(c, 'SELECT id, code FROM fk_plain_child ORDER BY id')).toEqual([
      { id: 1, code: null },
      { id: 2, code: 'b' },
      { id: 3, code: null },
    ]);
    const refused = await error(c.query("DELETE FROM fk_plain_parent WHERE code = 'b'"));
    expect(refused).toMatchObject({
      code: '23503',
      message: 'update or delete on table "fk_plain_parent" violates foreign key constraint "fk_plain_strict_code_fkey" on table "fk_plain_strict"',
      detail: 'Key (code)=(b) is still referenced from table "fk_plain_strict".',
      constraint: 'fk_plain_strict_code_fkey',
    });
    // The SET NULL the refused statement made is gone with it.
    expect(await rows(c, 'SELECT code FROM fk_plain_child WHERE id = 2')).toEqual([{ code: 'b' }]);
    const orphan = await error(c.query("INSERT INTO fk_plain_strict VALUES (2, 'zz')"));
    expect(orphan).toMatchObject({
      code: '23503',
      message: 'insert or update on table "fk_plain_strict" violates foreign key constraint "fk_plain_strict_code_fkey"',
      detail: 'Key (code)=(zz) is not present in table "fk_plain_parent".',
    });
    expect(await sqlstate(c.query("UPDATE fk_plain_strict SET code = 'zz'"))).toBe('23503');
  });

  it('let a referenced row be updated, upserted and deleted after its children in one transaction', async () => {
    const c = await s.fresh();
    await shop(c, 'fk_update');
    expect((await c.query('UPDATE fk_update_customers SET email = email')).rowCount).toBe(3);
    const upsert = await c.query(
      "INSERT INTO fk_update_customers (id, email) VALUES (1, 'a2@x.io') ON CONFLICT (id) DO UPDATE SET email = excluded.email RETURNING id, email",
    );
    expect(upsert.rows).toEqual([{ id: 1, email: 'a2@x.io' }]);
    await c.query('BEGIN');
    await c.query('DELETE FROM fk_update_items WHERE order_id IN (SELECT id FROM fk_update_orders WHERE customer_id = 2)');
    await c.query('DELETE FROM fk_update_orders WHERE customer_id = 2');
    await c.query('DELETE FROM fk_update_customers WHERE id = 2');
    await c.query('COMMIT');
    expect(await rows(c, 'SELECT id FROM fk_update_customers ORDER BY id')).toEqual([{ id: 1 }, { id: 3 }]);
    // A statement that fails in a block takes the block down, cascades included.
    await c.query('BEGIN');
    await c.query('DELETE FROM fk_update_notes WHERE customer_id = 1');
    await c.query('DELETE FROM fk_update_customers WHERE id = 1');
    expect(await sqlstate(c.query('INSERT INTO fk_update_orders (customer_id) VALUES (1)'))).toBe('23503');
    await c.query('ROLLBACK');
    expect(await rows(c, 'SELECT count(*)::int AS n FROM fk_update_items')).toEqual([{ n: 2 }]);
  });

  it('carry a changed key to the children with ON UPDATE CASCADE, SET NULL or SET DEFAULT', async () => {
    const c = await s.as();
    await c.query('CREATE TABLE fk_rekey_parent (code text PRIMARY KEY, n int)');
    await c.query('CREATE TABLE fk_rekey_child (id int PRIMARY KEY, code text REFERENCES fk_rekey_parent ON UPDATE CASCADE ON DELETE CASCADE)');
    await c.query("CREATE TABLE fk_rekey_other (id int PRIMARY KEY, code text DEFAULT 'd' REFERENCES fk_rekey_parent ON UPDATE SET DEFAULT)");
    await c.query('CREATE TABLE fk_rekey_loose (id int PRIMARY KEY, code text REFERENCES fk_rekey_parent ON UPDATE SET NULL)');
    await c.query("INSERT INTO fk_rekey_parent VALUES ('a', 1), ('b', 2), ('c', 3), ('d', 4)");
    await c.query("INSERT INTO fk_rekey_child VALUES (1, 'a'), (2, 'b'), (3, 'a'), (4, 'c')");
    await c.query("INSERT INTO fk_rekey_other VALUES (1, 'b')");
    await c.query("INSERT INTO fk_rekey_loose VALUES (1, 'c')");
    // With a parameter, as drivers send it; the rows whose key stays keep their children as they are.
    const updated = await c.query("UPDATE fk_rekey_parent SET code = code || '2' WHERE n <= $1", [2]);
    expect(updated.rowCount).toBe(2);
    expect(await rows(c, 'SELECT id, code FROM fk_rekey_child ORDER BY id')).toEqual([
      { id: 1, code: 'a2' },
      { id: 2, code: 'b2' },
      { id: 3, code: 'a2' },
      { id: 4, code: 'c' },
    ]);
    expect(await rows(c, 'SELECT id, code FROM fk_rekey_other')).toEqual([{ id: 1, code: 'd' }]);
    // With a FROM list, and with an alias.
    await c.query('CREATE TABLE fk_rekey_map (old text, new text)');
    await c.query("INSERT INTO fk_rekey_map VALUES ('c', 'c9')");
    await c.query('UPDATE fk_rekey_parent AS p SET code = m.new FROM fk_rekey_map m WHERE p.code = m.old');
    expect(await rows(c, 'SELECT code FROM fk_rekey_child WHERE id = 4')).toEqual([{ code: 'c9' }]);
    expect(await rows(c, 'SELECT code FROM fk_rekey_loose')).toEqual([{ code: null }]);
    expect(await rows(c, 'SELECT count(*)::int AS n FROM fk_rekey_parent p JOIN fk_rekey_child c USING (code)')).toEqual([{ n: 4 }]);
    // Parameters the key's expression does not use are no matter (a Parse of the whole statement binds them all).
    await c.query('UPDATE fk_rekey_parent SET n = $1, code = $2 WHERE code = $3', [10, 'a3', 'a2']);
    expect(await rows(c, "SELECT id FROM fk_rekey_child WHERE code = 'a3' ORDER BY id")).toEqual([{ id: 1 }, { id: 3 }]);
    expect(await sqlstate(c.query('DELETE FROM fk_rekey_other WHERE id = $1 AND code = $2', [1, 'zz']))).toBe('succeeded');
  });

  it('refuse a DELETE or UPDATE of a referenced key however the statement names its rows', async () => {
    const c = await s.as();
    await c.query('CREATE TABLE fk_named_parent (id int PRIMARY KEY, tag text)');
    await c.query('CREATE TABLE fk_named_child (id int PRIMARY KEY, pid int REFERENCES fk_named_parent)');
    await c.query("INSERT INTO fk_named_parent VALUES (1, 'a'), (2, 'b'), (3, 'c'), (4, 'd'), (5, 'e')");
    await c.query('INSERT INTO fk_named_child VALUES (1, 1), (2, 2)');
    await c.query('CREATE TABLE fk_named_gone (x int)');
    await c.query('INSERT INTO fk_named_gone VALUES (3), (4)');
    expect((await c.query('DELETE FROM fk_named_parent AS p USING fk_named_gone g WHERE p.id = g.x')).rowCount).toBe(2);
    expect(await sqlstate(c.query('DELETE FROM fk_named_parent WHERE id IN (1, 5)'))).toBe('23503');
    expect(await sqlstate(c.query('DELETE FROM fk_named_parent WHERE tag = $1', ['b']))).toBe('23503');
    expect(await sqlstate(c.query('UPDATE fk_named_parent SET id = id + 100 WHERE id = 2'))).toBe('23503');
    expect((await c.query("UPDATE fk_named_parent SET tag = 'z' WHERE id = 1")).rowCount).toBe(1);
    expect(await rows(c, 'SELECT id FROM fk_named_parent ORDER BY id')).toEqual([{ id: 1 }, { id: 2 }, { id: 5 }]);
  });

  it('let a referenced table be altered, as Sequelize sync({ alter: true }) and ADD CONSTRAINT CHECK do', async () => {
    const c = await s.as();
    await shop(c, 'fk_alter');
    await c.query('ALTER TABLE fk_alter_customers ADD COLUMN nickname varchar(20)');
    await c.query('ALTER TABLE fk_alter_customers ALTER COLUMN nickname TYPE varchar(40)');
    await c.query('ALTER TABLE fk_alter_customers ADD CONSTRAINT fk_alter_email CHECK (length(email) > 3)');
    await c.query('ALTER TABLE fk_alter_customers RENAME COLUMN nickname TO alias');
    expect(await sqlstate(c.query(`INSERT INTO fk_alter_customers (email, alias) VALUES ('long@x.io', '${'n'.repeat(41)}')`))).toBe('22001');
    expect(await sqlstate(c.query("INSERT INTO fk_alter_customers (email) VALUES ('x')"))).toBe('23514');
    // The keys are still there, and still act.
    await c.query('DELETE FROM fk_alter_customers WHERE id = 1');
    expect(await rows(c, 'SELECT count(*)::int AS n FROM fk_alter_orders')).toEqual([{ n: 1 }]);
    expect(await sqlstate(c.query('INSERT INTO fk_alter_orders (customer_id) VALUES (1)'))).toBe('23503');
  });

  it('are added to a table with rows, dropped, and stop a DROP or TRUNCATE of what they reference', async () => {
    const c = await s.as();
    await c.query('CREATE TABLE fk_ddl_parent (id int PRIMARY KEY)');
    await c.query('CREATE TABLE fk_ddl_child (id int PRIMARY KEY, parent_id int)');
    await c.query('INSERT INTO fk_ddl_parent VALUES (1), (2)');
    await c.query('INSERT INTO fk_ddl_child VALUES (1, 1), (2, 42)');
    const bad = await error(c.query('ALTER TABLE fk_ddl_child ADD CONSTRAINT fk_ddl_link FOREIGN KEY (parent_id) REFERENCES fk_ddl_parent (id)'));
    expect(bad).toMatchObject({ code: '23503', detail: 'Key (parent_id)=(42) is not present in table "fk_ddl_parent".' });
    await c.query('DELETE FROM fk_ddl_child WHERE id = 2');
    expect(
      (await c.query('ALTER TABLE ONLY fk_ddl_child ADD CONSTRAINT fk_ddl_link FOREIGN KEY (parent_id) REFERENCES fk_ddl_parent (id) ON DELETE CASCADE'))
        .command,
    ).toBe('ALTER');
    expect(await sqlstate(c.query('ALTER TABLE fk_ddl_child ADD CONSTRAINT fk_ddl_link FOREIGN KEY (parent_id) REFERENCES fk_ddl_parent (id)'))).toBe('42710');
    expect(await sqlstate(c.query('ALTER TABLE fk_ddl_child ADD FOREIGN KEY (id) REFERENCES fk_ddl_missing (id)'))).toBe('42P01');
    expect(await sqlstate(c.query('ALTER TABLE fk_ddl_parent ADD FOREIGN KEY (id) REFERENCES fk_ddl_child (parent_id)'))).toBe('42830');
    const truncate = await error(c.query('TRUNCATE fk_ddl_parent'));
    expect(truncate).toMatchObject({ code: '0A000', detail: 'Table "fk_ddl_child" references "fk_ddl_parent".' });
    const drop = await error(c.query('DROP TABLE fk_ddl_parent'));
    expect(drop).toMatchObject({
      code: '2BP01',
      message: 'cannot drop table fk_ddl_parent because other objects depend on it',
      detail: 'constraint fk_ddl_link on table fk_ddl_child depends on table fk_ddl_parent',
    });
    const keys = await rows(
      c,
      "SELECT conname, confdeltype, pg_get_constraintdef(oid) AS def FROM pg_constraint WHERE conrelid = 'fk_ddl_child'::regclass AND contype = 'f'",
    );
    expect(keys).toEqual([{ conname: 'fk_ddl_link', confdeltype: 'c', def: 'FOREIGN KEY (parent_id) REFERENCES fk_ddl_parent(id) ON DELETE CASCADE' }]);
    expect(await rows(c, "SELECT delete_rule, update_rule FROM information_schema.referential_constraints WHERE constraint_name = 'fk_ddl_link'")).toEqual([
      { delete_rule: 'CASCADE', update_rule: 'NO ACTION' },
    ]);
    await c.query('TRUNCATE fk_ddl_parent CASCADE');
    expect(await rows(c, 'SELECT count(*)::int AS n FROM fk_ddl_child')).toEqual([{ n: 0 }]);
    expect((await c.query('ALTER TABLE fk_ddl_child DROP CONSTRAINT fk_ddl_link')).command).toBe('ALTER');
    await c.query('INSERT INTO fk_ddl_parent VALUES (3)');
    await c.query('INSERT INTO fk_ddl_child VALUES (3, 99)');
    await c.query('ALTER TABLE fk_ddl_child ADD FOREIGN KEY (id) REFERENCES fk_ddl_parent (id)');
    expect(await rows(c, "SELECT conname FROM pg_constraint WHERE conrelid = 'fk_ddl_child'::regclass AND contype = 'f'")).toEqual([
      { conname: 'fk_ddl_child_id_fkey' },
    ]);
    await c.query('DROP TABLE fk_ddl_parent CASCADE');
    await c.query('INSERT INTO fk_ddl_child VALUES (4, 4)');
    expect(await rows(c, "SELECT count(*)::int AS n FROM pg_constraint WHERE conrelid = 'fk_ddl_child'::regclass AND contype = 'f'")).toEqual([{ n: 0 }]);
  });

  it('keep a key between transactions: a delete waits for the transaction that added a child, then refuses', async () => {
    const a = await s.fresh();
    const b = await s.fresh();
    await a.query('CREATE TABLE fk_tx_parent (id int PRIMARY KEY)');
    await a.query('CREATE TABLE fk_tx_child (id int PRIMARY KEY, parent_id int REFERENCES fk_tx_parent)');
    await a.query('INSERT INTO fk_tx_parent VALUES (1), (2)');
    await a.query('BEGIN');
    await a.query('INSERT INTO fk_tx_child VALUES (1, 1)');
    const deleting = error(b.query('DELETE FROM fk_tx_parent WHERE id = 1'));
    await a.query('COMMIT');
    expect(await deleting).toMatchObject({ code: '23503' });
    // And the other way: a child of a parent deleted meanwhile is refused once the delete commits.
    await b.query('BEGIN');
    await b.query('DELETE FROM fk_tx_parent WHERE id = 2');
    const adding = error(a.query('INSERT INTO fk_tx_child VALUES (2, 2)'));
    await b.query('COMMIT');
    expect(await adding).toMatchObject({ code: '23503' });
    expect(await rows(a, 'SELECT id FROM fk_tx_child ORDER BY id')).toEqual([{ id: 1 }]);
    await a.end();
    await b.end();
  });
});
