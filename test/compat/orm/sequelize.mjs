// Sequelize in its default configuration: sync(), models with an association, queries, findOrCreate, transactions.
import { DataTypes, Op, Sequelize } from 'sequelize';

/** @param {{host: string, port: number, user: string, database: string}} conn @param {(name: string, fn: () => Promise<unknown>) => Promise<unknown>} step @param {boolean} cotwire */
export async function flow(conn, step, cotwire) {
  const sequelize = new Sequelize(conn.database, conn.user, '', { host: conn.host, port: conn.port, dialect: 'postgres', logging: false, pool: { max: 2 } });
  const Customer = sequelize.define(
    'Customer',
    {
      name: { type: DataTypes.STRING(100), allowNull: false },
      email: { type: DataTypes.STRING, allowNull: false, unique: true },
      active: { type: DataTypes.BOOLEAN, defaultValue: true },
    },
    { tableName: 'customers', underscored: true },
  );
  const Order = sequelize.define(
    'Order',
    {
      total: { type: DataTypes.DECIMAL(10, 2), allowNull: false },
      paid: { type: DataTypes.BOOLEAN, allowNull: false, defaultValue: false },
      meta: DataTypes.JSONB,
    },
    { tableName: 'orders', underscored: true, indexes: [{ fields: ['paid'] }] },
  );
  Customer.hasMany(Order, { foreignKey: { name: 'customerId', allowNull: false } });
  Order.belongsTo(Customer, { foreignKey: { name: 'customerId', allowNull: false } });
  const plain = (rows) => rows.map((r) => r.get({ plain: true }));
  try {
    await step('authenticate', () => sequelize.authenticate().then(() => 'ok'));
    await step('sync', () => sequelize.sync().then(() => 'ok'));
    await step('sync again', () => sequelize.sync().then(() => 'ok'));
    await step('showIndex', () =>
      sequelize
        .getQueryInterface()
        .showIndex('orders')
        .then((r) => r.map((i) => [i.name, i.unique, i.primary, i.fields.map((f) => f.attribute)])),
    );
    await step('create', () => Customer.create({ name: 'Alice', email: 'a@x.io' }).then((c) => c.get({ plain: true })));
    await step('bulkCreate', () =>
      Customer.bulkCreate(
        [
          { name: 'Bob', email: 'b@x.io', active: false },
          { name: 'Carol', email: 'c@x.io' },
        ],
        { returning: true },
      ).then(plain),
    );
    await step('create orders', () =>
      Order.bulkCreate(
        [
          { customerId: 1, total: 19.99, meta: { items: 2 } },
          { customerId: 1, total: '1234.50', paid: true, meta: { items: 10 } },
          { customerId: 2, total: 0.1 },
        ],
        { returning: true },
      ).then(plain),
    );
    await step('findAll include', () =>
      Customer.findAll({
        include: [{ model: Order }],
        order: [
          ['id', 'ASC'],
          [Order, 'id', 'ASC'],
        ],
      }).then(plain),
    );
    await step('findAll include limit', () =>
      Customer.findAll({ include: [{ model: Order, required: false }], order: [['id', 'ASC']], limit: 2, offset: 1 }).then(plain),
    );
    await step('findOne where', () =>
      Order.findOne({ where: { total: { [Op.gt]: 100 }, paid: true }, include: Customer }).then((o) => o?.get({ plain: true })),
    );
    await step('date filter', () => Customer.count({ where: { createdAt: { [Op.gt]: new Date('2020-01-01T00:00:00Z') } } }));
    await step('count / max', async () => [await Order.count(), await Order.max('total')]);
    await step('jsonb where', () => Order.findAll({ where: { meta: { items: 10 } }, attributes: ['id'], raw: true }));
    await step('update returning', () => Order.update({ paid: true }, { where: { id: 1 }, returning: true }).then(([n, rows]) => [n, plain(rows)]));
    await step('increment', () => Order.increment('total', { by: 1, where: { id: 3 } }).then(() => Order.findByPk(3, { raw: true })));
    await step('findOrCreate existing', () =>
      Customer.findOrCreate({ where: { email: 'a@x.io' }, defaults: { name: 'x' } }).then(([c, created]) => [c.get({ plain: true }), created]),
    );
    await step('findOrCreate new', () =>
      Customer.findOrCreate({ where: { email: 'd@x.io' }, defaults: { name: 'Dave' } }).then(([c, created]) => [c.get({ plain: true }), created]),
    );
    await step('unique violation', () => Customer.create({ name: 'dup', email: 'a@x.io' }));
    await step('managed transaction', () =>
      sequelize.transaction(async (t) => {
        await Customer.create({ name: 'Eve', email: 'e@x.io' }, { transaction: t });
        return Customer.count({ transaction: t });
      }),
    );
    await step('transaction rolled back', async () => {
      await sequelize
        .transaction(async (t) => {
          await Customer.create({ name: 'Fay', email: 'f@x.io' }, { transaction: t });
          throw new Error('undo');
        })
        .catch(() => undefined);
      return Customer.count();
    });
    await step('destroy', () => Order.destroy({ where: { id: 3 } }));
    // A referenced row: updated, saved, then destroyed with its orders (Sequelize's keys cascade), and its table altered.
    await step('update parent', () => Customer.update({ name: 'Alicia' }, { where: { id: 1 } }).then(([n]) => n));
    await step('save parent', async () => {
      const c = await Customer.findByPk(1);
      c.active = false;
      return (await c.save()).get({ plain: true }).active;
    });
    await step('sync alter', () => sequelize.sync({ alter: true }).then(() => 'ok'));
    await step('destroy parent', async () => [await Customer.destroy({ where: { id: 1 } }), await Order.count()]);
    if (cotwire) {
      const Step = sequelize.define(
        'Step',
        {
          traceId: { type: DataTypes.UUID, primaryKey: true, field: 'trace_id' },
          sessionId: { type: DataTypes.STRING, field: 'session_id' },
          stepType: { type: DataTypes.STRING, field: 'step_type' },
          content: DataTypes.TEXT,
        },
        { tableName: '_cot_steps', timestamps: false },
      );
      await step('ledger insert', () =>
        Step.create({ sessionId: 'sequelize', stepType: 'Observation', content: 'from sequelize' }).then((s) => s.get({ plain: true })),
      );
      // A model of every column: create() asks RETURNING for all of them, here inside a transaction.
      const FullStep = sequelize.define(
        'FullStep',
        {
          traceId: { type: DataTypes.UUID, primaryKey: true, field: 'trace_id' },
          sessionId: { type: DataTypes.STRING, field: 'session_id' },
          stepType: { type: DataTypes.STRING, field: 'step_type' },
          content: DataTypes.TEXT,
          stepIndex: { type: DataTypes.INTEGER, field: 'step_index' },
          prevHash: { type: DataTypes.STRING, field: 'prev_hash' },
          currentHash: { type: DataTypes.STRING, field: 'current_hash' },
          createdAt: { type: DataTypes.DATE, field: 'created_at' },
          ledgerSeq: { type: DataTypes.BIGINT, field: 'ledger_seq' },
        },
        { tableName: '_cot_steps', timestamps: false },
      );
      await step('ledger insert of a whole model in a transaction', async () => {
        const created = await sequelize.transaction(async (transaction) => [
          (await FullStep.create({ sessionId: 'sequelize-tx', stepType: 'Observation', content: 'one' }, { transaction })).get({ plain: true }),
          (await FullStep.create({ sessionId: 'sequelize-tx', stepType: 'Decision', content: 'two' }, { transaction })).get({ plain: true }),
        ]);
        const read = (await FullStep.findAll({ where: { sessionId: 'sequelize-tx' }, order: [['stepIndex', 'ASC']] })).map((s) => s.get({ plain: true }));
        if (JSON.stringify(created) !== JSON.stringify(read)) throw new Error(`created ${JSON.stringify(created)} but read ${JSON.stringify(read)}`);
        return read.map((s) => [s.stepIndex, s.prevHash.length, s.currentHash.length]);
      });
    }
  } finally {
    await sequelize.close();
  }
}
