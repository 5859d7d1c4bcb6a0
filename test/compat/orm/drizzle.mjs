// Drizzle (node-postgres): the DDL drizzle-kit generates, then queries, the relational API and transactions.
import { and, count, desc, eq, gt, inArray, relations, sql, sum } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/node-postgres';
import { boolean, index, integer, jsonb, numeric, pgTable, serial, text, timestamp, varchar } from 'drizzle-orm/pg-core';
import pg from 'pg';

const customers = pgTable('customers', {
  id: serial('id').primaryKey(),
  name: varchar('name', { length: 100 }).notNull(),
  email: varchar('email', { length: 255 }).notNull().unique(),
  active: boolean('active').notNull().default(true),
  prefs: jsonb('prefs'),
  createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
});
const orders = pgTable(
  'orders',
  {
    id: integer('id').primaryKey().generatedAlwaysAsIdentity(),
    customerId: integer('customer_id')
      .notNull()
      .references(() => customers.id, { onDelete: 'cascade' }),
    total: numeric('total', { precision: 10, scale: 2 }).notNull(),
    note: text('note'),
  },
  (t) => [index('orders_customer_idx').on(t.customerId)],
);
const customersRelations = relations(customers, ({ many }) => ({ orders: many(orders) }));
const ordersRelations = relations(orders, ({ one }) => ({ customer: one(customers, { fields: [orders.customerId], references: [customers.id] }) }));

/** What drizzle-kit generate writes for the schema above (its migration file). */
const MIGRATION = [
  `CREATE TABLE "customers" ("id" serial PRIMARY KEY NOT NULL, "name" varchar(100) NOT NULL, "email" varchar(255) NOT NULL, "active" boolean DEFAULT true NOT NULL, "prefs" jsonb, "created_at" timestamp with time zone DEFAULT now() NOT NULL, CONSTRAINT "customers_email_unique" UNIQUE("email"))`,
  `CREATE TABLE "orders" ("id" integer PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "orders_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 2147483647 START WITH 1 CACHE 1), "customer_id" integer NOT NULL, "total" numeric(10, 2) NOT NULL, "note" text)`,
  `ALTER TABLE "orders" ADD CONSTRAINT "orders_customer_id_customers_id_fk" FOREIGN KEY ("customer_id") REFERENCES "public"."customers"("id") ON DELETE cascade ON UPDATE no action`,
  `CREATE INDEX "orders_customer_idx" ON "orders" USING btree ("customer_id")`,
];

/** @param {{host: string, port: number, user: string, database: string}} conn @param {(name: string, fn: () => Promise<unknown>) => Promise<unknown>} step @param {boolean} cotwire */
export async function flow(conn, step, cotwire) {
  const pool = new pg.Pool({ ...conn, max: 2 });
  const db = drizzle(pool, { schema: { customers, orders, customersRelations, ordersRelations } });
  try {
    await step('migration', async () => {
      for (const statement of MIGRATION) await pool.query(statement);
    });
    await step('insert returning', () =>
      db
        .insert(customers)
        .values({ name: 'Alice', email: 'a@x.io', prefs: { theme: 'dark' } })
        .returning({ id: customers.id, name: customers.name }),
    );
    await step('insert many', () =>
      db
        .insert(customers)
        .values([
          { name: 'Bob', email: 'b@x.io', active: false },
          { name: 'Carol', email: 'c@x.io' },
        ])
        .returning({ id: customers.id }),
    );
    await step('insert orders', () =>
      db
        .insert(orders)
        .values([
          { customerId: 1, total: '19.99' },
          { customerId: 1, total: '1234.50', note: 'big' },
          { customerId: 2, total: '0.10' },
        ])
        .returning(),
    );
    await step('select where / order / limit', () =>
      db
        .select()
        .from(orders)
        .where(and(eq(orders.customerId, 1), gt(orders.total, '10')))
        .orderBy(desc(orders.total))
        .limit(5),
    );
    await step('inner join', () =>
      db.select({ id: orders.id, name: customers.name }).from(orders).innerJoin(customers, eq(customers.id, orders.customerId)).orderBy(orders.id),
    );
    await step('aggregates', () =>
      db
        .select({ cid: orders.customerId, n: count(), s: sum(orders.total) })
        .from(orders)
        .groupBy(orders.customerId)
        .orderBy(orders.customerId),
    );
    await step('inArray', () =>
      db
        .select({ id: orders.id })
        .from(orders)
        .where(inArray(orders.customerId, [1, 2]))
        .orderBy(orders.id),
    );
    await step('jsonb operator', () => db.select({ id: customers.id }).from(customers).where(sql`${customers.prefs}->>'theme' = ${'dark'}`));
    await step('relational findMany', () =>
      db.query.customers.findMany({
        with: { orders: { orderBy: (o, { asc }) => [asc(o.id)] } },
        orderBy: (c, { asc }) => [asc(c.id)],
        columns: { id: true, name: true },
      }),
    );
    await step('relational findFirst', () =>
      db.query.orders.findFirst({ where: (o, { eq }) => eq(o.id, 2), with: { customer: { columns: { name: true } } }, columns: { id: true } }),
    );
    await step('update returning', () =>
      db
        .update(orders)
        .set({ total: sql`${orders.total} + 1`, note: 'upd' })
        .where(eq(orders.id, 1))
        .returning({ id: orders.id, total: orders.total }),
    );
    await step('onConflictDoNothing', () =>
      db.insert(customers).values({ name: 'dup', email: 'c@x.io' }).onConflictDoNothing().returning({ id: customers.id }),
    );
    await step('delete returning', () => db.delete(orders).where(eq(orders.id, 3)).returning({ id: orders.id }));
    await step('transaction', () =>
      db.transaction(async (tx) => {
        const [c] = await tx.insert(customers).values({ name: 'Dave', email: 'd@x.io' }).returning({ id: customers.id });
        await tx.insert(orders).values({ customerId: c.id, total: '42.00' });
        return tx.select({ n: count() }).from(orders).where(eq(orders.customerId, c.id));
      }),
    );
    await step('transaction rolled back', async () => {
      await db
        .transaction(async (tx) => {
          await tx.insert(customers).values({ name: 'Eve', email: 'e@x.io' });
          tx.rollback();
        })
        .catch(() => undefined);
      return db.select({ n: count() }).from(customers).where(eq(customers.email, 'e@x.io'));
    });
    await step('prepared statement', async () => {
      const p = db
        .select({ name: customers.name })
        .from(customers)
        .where(eq(customers.id, sql.placeholder('id')))
        .prepare('get_customer');
      return [await p.execute({ id: 1 }), await p.execute({ id: 2 })];
    });
    if (cotwire) {
      const steps = pgTable('_cot_steps', {
        sessionId: text('session_id'),
        stepType: text('step_type'),
        content: text('content'),
        stepIndex: integer('step_index'),
      });
      await step('ledger insert', () =>
        db.insert(steps).values({ sessionId: 'drizzle', stepType: 'Observation', content: 'from drizzle' }).returning({ stepIndex: steps.stepIndex }),
      );
    }
  } finally {
    await pool.end();
  }
}
