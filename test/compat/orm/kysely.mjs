// Kysely with its Migrator (advisory lock, migration tables), introspection, CRUD and a transaction.
import { Kysely, Migrator, PostgresDialect, sql } from 'kysely';
import pg from 'pg';

/** @param {{host: string, port: number, user: string, database: string}} conn @param {(name: string, fn: () => Promise<unknown>) => Promise<unknown>} step @param {boolean} cotwire */
export async function flow(conn, step, cotwire) {
  const db = new Kysely({ dialect: new PostgresDialect({ pool: new pg.Pool({ ...conn, max: 2 }) }) });
  const provider = {
    getMigrations: async () => ({
      '001_tables': {
        up: async (k) => {
          await k.schema
            .createTable('authors')
            .addColumn('id', 'serial', (c) => c.primaryKey())
            .addColumn('name', 'text', (c) => c.notNull())
            .addColumn('born', 'date')
            .execute();
          await k.schema
            .createTable('books')
            .addColumn('id', 'integer', (c) => c.generatedByDefaultAsIdentity().primaryKey())
            .addColumn('author_id', 'integer', (c) => c.references('authors.id').notNull())
            .addColumn('title', 'text', (c) => c.notNull())
            .addColumn('price', 'numeric(8, 2)')
            .addColumn('tags', sql`text[]`)
            .execute();
          await k.schema.createIndex('books_author_idx').on('books').column('author_id').execute();
        },
        down: async (k) => {
          await k.schema.dropTable('books').execute();
          await k.schema.dropTable('authors').execute();
        },
      },
    }),
  };
  const migrator = new Migrator({ db, provider });
  try {
    await step('migrateToLatest', async () => {
      const { error, results } = await migrator.migrateToLatest();
      if (error !== undefined) throw error;
      return results;
    });
    await step('introspection.getTables', async () =>
      (await db.introspection.getTables())
        .filter((t) => !t.name.startsWith('_cot') && !t.name.startsWith('kysely'))
        .map((t) => ({ name: t.name, columns: t.columns.map((c) => [c.name, c.dataType, c.isNullable, c.isAutoIncrementing]) })),
    );
    await step('insert returning', () =>
      db
        .insertInto('authors')
        .values([{ name: 'Ursula', born: '1929-10-21' }, { name: 'Iain' }])
        .returning(['id', 'name'])
        .execute(),
    );
    await step('insert books', () =>
      db
        .insertInto('books')
        .values([
          { author_id: 1, title: 'The Dispossessed', price: '9.99', tags: ['sf', 'anarchy'] },
          { author_id: 2, title: 'Excession', price: '12.50', tags: [] },
        ])
        .returningAll()
        .execute(),
    );
    await step('join + group', () =>
      db
        .selectFrom('authors as a')
        .innerJoin('books as b', 'b.author_id', 'a.id')
        .select(['a.name', (eb) => eb.fn.count('b.id').as('n'), (eb) => eb.fn.sum('b.price').as('total')])
        .groupBy('a.name')
        .orderBy('a.name')
        .execute(),
    );
    await step('where with parameters', () => db.selectFrom('books').select('title').where('price', '>', '10').where('title', 'like', 'E%').execute());
    await step('update', () =>
      db
        .updateTable('books')
        .set({ price: sql`price + ${1}` })
        .where('id', '=', 1)
        .returning('price')
        .execute(),
    );
    await step('transaction', () =>
      db.transaction().execute(async (tx) => {
        await tx.insertInto('authors').values({ name: 'Octavia' }).execute();
        return tx
          .selectFrom('authors')
          .select((eb) => eb.fn.countAll().as('n'))
          .executeTakeFirst();
      }),
    );
    await step('delete', () => db.deleteFrom('books').where('id', '=', 2).executeTakeFirst());
    if (cotwire)
      await step('ledger insert', () =>
        db
          .insertInto('_cot_steps')
          .values({ session_id: 'kysely', step_type: 'Decision', content: 'from kysely' })
          .returning(['step_index', 'current_hash'])
          .execute(),
      );
    await step('migrateDown', async () => {
      const { error, results } = await migrator.migrateDown();
      if (error !== undefined) throw error;
      return results;
    });
  } finally {
    await db.destroy();
  }
}
