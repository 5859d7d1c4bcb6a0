// TypeORM (EntitySchema, synchronize): schema sync and its second, no-op run, repositories, QueryBuilder, transactions.
import 'reflect-metadata';
import { DataSource, EntitySchema } from 'typeorm';

const Customer = new EntitySchema({
  name: 'Customer',
  tableName: 'customers',
  columns: {
    id: { type: Number, primary: true, generated: 'increment' },
    name: { type: 'text' },
    email: { type: 'text', unique: true },
    active: { type: 'boolean', default: true },
    createdAt: { name: 'created_at', type: 'timestamptz', createDate: true },
  },
  relations: { orders: { type: 'one-to-many', target: 'Order', inverseSide: 'customer' } },
});
const Order = new EntitySchema({
  name: 'Order',
  tableName: 'orders',
  columns: {
    id: { type: 'int', primary: true, generated: 'increment' },
    total: { type: 'numeric', precision: 10, scale: 2 },
    paid: { type: 'boolean', default: false },
    version: { type: 'int', version: true },
  },
  relations: {
    customer: { type: 'many-to-one', target: 'Customer', joinColumn: { name: 'customer_id' }, inverseSide: 'orders', nullable: false, onDelete: 'CASCADE' },
  },
  indices: [{ name: 'orders_paid_idx', columns: ['paid'] }],
});
// A generated uuid key: TypeORM creates the uuid-ossp extension and makes the column's default uuid_generate_v4().
const Token = new EntitySchema({
  name: 'Token',
  tableName: 'tokens',
  columns: {
    id: { type: 'uuid', primary: true, generated: 'uuid' },
    label: { type: 'text' },
  },
});
const Step = new EntitySchema({
  name: 'Step',
  tableName: '_cot_steps',
  synchronize: false,
  columns: {
    traceId: { name: 'trace_id', type: 'uuid', primary: true, generated: 'uuid' },
    sessionId: { name: 'session_id', type: 'text' },
    stepType: { name: 'step_type', type: 'text' },
    content: { type: 'text' },
    stepIndex: { name: 'step_index', type: 'int', nullable: true },
  },
});

// A ledger entity mapped whole, as an application reading its traces back maps it: the server's columns are
// TypeORM's generated and create-date columns, which it asks RETURNING for.
const FullStep = new EntitySchema({
  name: 'FullStep',
  tableName: '_cot_steps',
  synchronize: false,
  columns: {
    traceId: { name: 'trace_id', type: 'uuid', primary: true, generated: 'uuid' },
    sessionId: { name: 'session_id', type: 'text' },
    stepType: { name: 'step_type', type: 'text' },
    content: { type: 'text' },
    stepIndex: { name: 'step_index', type: 'int', insert: false, update: false, nullable: true },
    prevHash: { name: 'prev_hash', type: 'text', insert: false, update: false, nullable: true },
    currentHash: { name: 'current_hash', type: 'text', insert: false, update: false, nullable: true },
    createdAt: { name: 'created_at', type: 'timestamptz', createDate: true },
    ledgerSeq: { name: 'ledger_seq', type: 'bigint', generated: 'increment' },
  },
});

/** @param {{host: string, port: number, user: string, database: string}} conn @param {(name: string, fn: () => Promise<unknown>) => Promise<unknown>} step @param {boolean} cotwire */
export async function flow(conn, step, cotwire) {
  const ds = new DataSource({
    type: 'postgres',
    ...conn,
    username: conn.user,
    entities: cotwire ? [Customer, Order, Token, Step, FullStep] : [Customer, Order, Token],
    synchronize: false,
    logging: false,
  });
  await step('initialize', () => ds.initialize().then(() => 'ok'));
  try {
    await step('synchronize', () => ds.synchronize().then(() => 'ok'));
    await step('synchronize again plans nothing', async () => (await ds.driver.createSchemaBuilder().log()).upQueries.map((q) => q.query));
    await step('getTable', async () => {
      const qr = ds.createQueryRunner();
      try {
        const t = await qr.getTable('orders');
        return (
          t && {
            columns: t.columns.map((c) => [c.name, c.type, c.isGenerated, c.isNullable]),
            keys: t.foreignKeys.map((f) => [f.columnNames, f.referencedTableName]),
            indices: t.indices.map((i) => i.name),
          }
        );
      } finally {
        await qr.release();
      }
    });
    const customers = ds.getRepository('Customer');
    const orders = ds.getRepository('Order');
    await step('save', () =>
      customers.save([
        { name: 'Alice', email: 'a@x.io' },
        { name: 'Bob', email: 'b@x.io', active: false },
      ]),
    );
    await step('save with relation', () =>
      orders.save([
        { total: '19.99', customer: { id: 1 } },
        { total: '1234.50', paid: true, customer: { id: 1 } },
        { total: '0.10', customer: { id: 2 } },
      ]),
    );
    await step('find with relations', () => customers.find({ relations: { orders: true }, order: { id: 'ASC', orders: { id: 'ASC' } } }));
    await step('findOne', () => orders.findOne({ where: { id: 2 }, relations: { customer: true } }));
    await step('findAndCount', () => orders.findAndCount({ where: { paid: false }, order: { id: 'DESC' }, skip: 0, take: 1 }));
    await step('QueryBuilder', () =>
      ds
        .createQueryBuilder('Order', 'o')
        .leftJoinAndSelect('o.customer', 'c')
        .where('c.email = :email', { email: 'a@x.io' })
        .andWhere('o.total > :t', { t: 10 })
        .orderBy('o.total', 'DESC')
        .getMany(),
    );
    await step('QueryBuilder aggregate', () =>
      ds
        .createQueryBuilder('Order', 'o')
        .select('o.customer_id', 'cid')
        .addSelect('COUNT(*)', 'n')
        .addSelect('SUM(o.total)', 's')
        .groupBy('o.customer_id')
        .orderBy('cid')
        .getRawMany(),
    );
    await step('update', () => orders.update({ id: 1 }, { paid: true }).then((r) => r.affected));
    await step('save bumps the version', async () => {
      const o = await orders.findOneBy({ id: 2 });
      o.total = '1300.00';
      return (await orders.save(o)).version;
    });
    await step('transaction', () =>
      ds.transaction(async (m) => {
        await m.getRepository('Customer').save({ name: 'Carol', email: 'c@x.io' });
        return m.getRepository('Customer').count();
      }),
    );
    await step('transaction rolled back', async () => {
      await ds
        .transaction(async (m) => {
          await m.getRepository('Customer').save({ name: 'Dave', email: 'd@x.io' });
          throw new Error('undo');
        })
        .catch(() => undefined);
      return customers.count();
    });
    await step('delete', () => orders.delete({ id: 3 }).then((r) => r.affected));
    // A referenced row: saved with its relation loaded, then deleted with its orders (ON DELETE CASCADE).
    await step('save parent', async () => {
      const c = await customers.findOne({ where: { id: 1 }, relations: { orders: true } });
      c.name = 'Alicia';
      return (await customers.save(c)).name;
    });
    await step('delete parent', async () => [(await customers.delete({ id: 1 })).affected, await orders.count()]);
    await step('uuid-ossp created', async () => (await ds.query("SELECT extname FROM pg_extension WHERE extname = 'uuid-ossp'")).map((r) => r.extname));
    await step('uuid column', async () => {
      const qr = ds.createQueryRunner();
      try {
        const t = await qr.getTable('tokens');
        return t?.columns.map((c) => [c.name, c.type, c.isGenerated, c.generationStrategy, c.isPrimary]);
      } finally {
        await qr.release();
      }
    });
    await step('save with generated uuids', async () => {
      const saved = await ds.getRepository('Token').save([{ label: 'a' }, { label: 'b' }]);
      const found = await ds.getRepository('Token').find({ order: { label: 'ASC' } });
      return {
        saved: saved.map((t) => /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/.test(t.id)),
        found: found.map((t) => [t.label, t.id === saved.find((s) => s.label === t.label)?.id]),
      };
    });
    if (cotwire) {
      await step('ledger insert', () => ds.getRepository('Step').save({ sessionId: 'typeorm', stepType: 'Action', content: 'from typeorm' }));
      // save() inside a transaction of an entity whose created_at and ledger_seq come back from RETURNING.
      await step('ledger insert of a whole entity in a transaction', async () => {
        const saved = await ds.transaction((m) =>
          m.getRepository('FullStep').save([
            { sessionId: 'typeorm-tx', stepType: 'Observation', content: 'one' },
            { sessionId: 'typeorm-tx', stepType: 'Decision', content: 'two' },
          ]),
        );
        const read = await ds.getRepository('FullStep').find({ where: { sessionId: 'typeorm-tx' }, order: { stepIndex: 'ASC' } });
        const same = saved.every(
          (s, i) =>
            s.traceId === read[i]?.traceId && String(s.ledgerSeq) === String(read[i]?.ledgerSeq) && s.createdAt.getTime() === read[i]?.createdAt.getTime(),
        );
        if (!same) throw new Error(`saved ${JSON.stringify(saved)} but read ${JSON.stringify(read)}`);
        return read.map((s) => [s.stepIndex, s.currentHash.length]);
      });
    }
  } finally {
    await ds.destroy();
  }
}
