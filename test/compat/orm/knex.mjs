// Knex with migrations: the tables a migration makes, CRUD, a transaction, and the rollback.
import knexFactory from 'knex';

/** @param {{host: string, port: number, user: string, database: string}} conn @param {(name: string, fn: () => Promise<unknown>) => Promise<unknown>} step @param {boolean} cotwire */
export async function flow(conn, step, cotwire) {
  const migrations = {
    getMigrations: async () => ['001_tables', '002_note'],
    getMigrationName: (m) => m,
    getMigration: async (m) =>
      m === '001_tables'
        ? {
            up: async (k) => {
              await k.schema.createTable('customers', (t) => {
                t.increments('id');
                t.string('email').notNullable().unique();
                t.string('name');
                t.boolean('active').defaultTo(true);
                t.jsonb('prefs');
                t.timestamps(true, true);
              });
              await k.schema.createTable('orders', (t) => {
                t.increments('id');
                t.integer('customer_id').unsigned().references('id').inTable('customers');
                t.decimal('total', 10, 2);
                t.index(['customer_id']);
              });
            },
            down: async (k) => {
              await k.schema.dropTable('orders');
              await k.schema.dropTable('customers');
            },
          }
        : {
            up: (k) => k.schema.alterTable('orders', (t) => t.text('note')),
            down: (k) => k.schema.alterTable('orders', (t) => t.dropColumn('note')),
          },
  };
  const db = knexFactory({ client: 'pg', connection: conn, migrations: { migrationSource: migrations } });
  try {
    await step('migrate.latest', () => db.migrate.latest());
    await step('hasTable / hasColumn', async () => [await db.schema.hasTable('orders'), await db.schema.hasColumn('orders', 'note')]);
    await step('columnInfo', () => db('customers').columnInfo());
    await step('insert returning', () =>
      db('customers')
        .insert([
          { email: 'a@x.io', name: 'Ada', prefs: { theme: 'dark' } },
          { email: 'b@x.io', name: 'Bob' },
        ])
        .returning(['id', 'email']),
    );
    await step('insert order', () => db('orders').insert({ customer_id: 1, total: '12.50', note: 'first' }).returning('*'));
    await step('join + aggregate', () =>
      db('customers as c')
        .leftJoin('orders as o', 'o.customer_id', 'c.id')
        .select('c.name')
        .count('o.id as n')
        .sum('o.total as total')
        .groupBy('c.name')
        .orderBy('c.name'),
    );
    await step('where in / json', () => db('customers').whereIn('id', [1, 2]).andWhereRaw("prefs->>'theme' = ?", ['dark']).select('email'));
    await step('update returning', () => db('customers').where({ id: 2 }).update({ name: 'Bobby' }).returning(['id', 'name']));
    await step('increment', () => db('orders').where({ id: 1 }).increment('total', 1).returning('total'));
    await step('unique violation', () => db('customers').insert({ email: 'a@x.io' }));
    await step('transaction rolled back', async () => {
      await db
        .transaction(async (tx) => {
          await tx('customers').insert({ email: 'c@x.io' });
          throw new Error('undo');
        })
        .catch(() => undefined);
      return db('customers').count('* as n').first();
    });
    await step('delete returning', () => db('orders').where({ id: 1 }).del().returning('id'));
    if (cotwire)
      await step('ledger insert', () =>
        db('_cot_steps').insert({ session_id: 'knex', step_type: 'Observation', content: 'from knex' }).returning(['step_index']),
      );
    await step('migrate.rollback', () => db.migrate.rollback());
    await step('after rollback', async () => [await db.schema.hasColumn('orders', 'note'), await db.schema.hasTable('orders')]);
  } finally {
    await db.destroy();
  }
}
