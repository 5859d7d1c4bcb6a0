"""SQLAlchemy: dialect initialization, reflection of ordinary and ledger
tables, Core and ORM queries, an ORM insert into the ledger inside a
transaction. Debian's SQLAlchemy 1.4 with psycopg2 and asyncpg, or with
SA_DRIVER=psycopg SQLAlchemy 2 on psycopg 3 (its dialect is 2.0's; the
compatibility suite puts SQLAlchemy 2 on PYTHONPATH). Prints one JSON object
(see psycopg2_flows.py)."""
import asyncio
import datetime
import json
import os
import sys

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.orm import Session, declarative_base

TARGET = sys.argv[1] if len(sys.argv) > 1 else 'postgres'
DRIVER = os.environ.get('SA_DRIVER', 'psycopg2')
URL = '{user}@{host}:{port}/{db}'.format(
    user=os.environ['PGUSER'], host=os.environ['PGHOST'], port=os.environ['PGPORT'], db=os.environ['PGDATABASE'])
out = {}


def plain(v):
    if isinstance(v, (datetime.datetime, datetime.date)):
        return v.isoformat()
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if isinstance(v, dict):
        return {str(k): plain(x) for k, x in v.items()}
    if isinstance(v, (int, float, str, bool)) or v is None:
        return v
    return str(v)


engine = sa.create_engine('postgresql+' + DRIVER + '://' + URL)
out['driver'] = engine.dialect.driver
with engine.begin() as conn:
    conn.execute(sa.text('DROP VIEW IF EXISTS sa_open_tasks'))
    conn.execute(sa.text('DROP TABLE IF EXISTS sa_tasks'))
    conn.execute(sa.text('DROP TABLE IF EXISTS sa_agents'))
    conn.execute(sa.text('CREATE TABLE sa_agents (id integer PRIMARY KEY, name text NOT NULL UNIQUE)'))
    conn.execute(sa.text(
        'CREATE TABLE sa_tasks (id integer PRIMARY KEY, agent_id integer REFERENCES sa_agents (id), title text NOT NULL, '
        "done boolean DEFAULT false, created timestamptz, score numeric(5,2))"))
    conn.execute(sa.text('CREATE INDEX sa_tasks_title ON sa_tasks (title)'))
    conn.execute(sa.text('CREATE VIEW sa_open_tasks AS SELECT id, title FROM sa_tasks WHERE NOT done'))

out['server_version'] = engine.dialect.server_version_info[0]
out['default_schema'] = engine.dialect.default_schema_name

inspector = sa.inspect(engine)
out['schemas'] = sorted(s for s in inspector.get_schema_names() if s == 'public')
out['tables'] = sorted(t for t in inspector.get_table_names() if t.startswith('sa_'))
out['views'] = sorted(v for v in inspector.get_view_names() if v.startswith('sa_'))
out['columns'] = [(c['name'], str(c['type']), c['nullable'], c['default']) for c in inspector.get_columns('sa_tasks')]
out['pk'] = inspector.get_pk_constraint('sa_tasks')['constrained_columns']
out['fks'] = [(f['constrained_columns'], f['referred_table'], f['referred_columns']) for f in inspector.get_foreign_keys('sa_tasks')]
out['indexes'] = sorted((i['name'], i['column_names'], bool(i['unique'])) for i in inspector.get_indexes('sa_tasks'))
out['unique'] = [(u['column_names']) for u in inspector.get_unique_constraints('sa_agents')]

metadata = sa.MetaData()
tasks = sa.Table('sa_tasks', metadata, autoload_with=engine)
agents = sa.Table('sa_agents', metadata, autoload_with=engine)
out['reflected'] = [(c.name, str(c.type)) for c in tasks.columns]
with engine.begin() as conn:
    conn.execute(agents.insert(), [{'id': 1, 'name': 'planner'}, {'id': 2, 'name': 'critic'}])
    conn.execute(tasks.insert(), [
        {'id': 1, 'agent_id': 1, 'title': 'plan', 'done': False, 'created': datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc), 'score': 1.5},
        {'id': 2, 'agent_id': 2, 'title': 'review', 'done': True, 'created': None, 'score': None},
    ])
with engine.connect() as conn:
    q = sa.select(agents.c.name, sa.func.count(tasks.c.id).label('n')).join(tasks, tasks.c.agent_id == agents.c.id).group_by(agents.c.name).order_by(agents.c.name)
    out['core_join'] = [tuple(r) for r in conn.execute(q)]
    out['open'] = [tuple(r) for r in conn.execute(sa.text('SELECT * FROM sa_open_tasks ORDER BY id'))]

Base = declarative_base()


class Agent(Base):
    __tablename__ = 'sa_agents'
    id = sa.Column(sa.Integer, primary_key=True)
    name = sa.Column(sa.Text, nullable=False)


with Session(engine) as session:
    session.add(Agent(id=3, name='scout'))
    session.commit()
    out['orm'] = [a.name for a in session.query(Agent).order_by(Agent.id)]

if TARGET == 'cotwire':
    steps = sa.Table('_cot_steps', sa.MetaData(), autoload_with=engine)
    out['ledger_columns'] = [c.name for c in steps.columns][:6]
    with engine.connect() as conn:
        conn = conn.execution_options(isolation_level='AUTOCOMMIT')
        r = conn.execute(steps.insert().values(session_id='sa-' + DRIVER, step_type='Observation', content='seen').returning(steps.c.step_index))
        out['ledger_returning'] = r.scalar()

    class Step(declarative_base()):
        # A ledger step as an application models it: the server computes trace_id (and the chain).
        __tablename__ = '_cot_steps'
        trace_id = sa.Column(postgresql.UUID(as_uuid=False), primary_key=True, server_default=sa.FetchedValue())
        session_id = sa.Column(sa.Text)
        step_type = sa.Column(sa.Text)
        content = sa.Column(sa.Text)

    # The ORM's unit of work: an INSERT ... RETURNING trace_id inside its transaction.
    with Session(engine) as session:
        step = Step(session_id='sa-orm-' + DRIVER, step_type='Decision', content='chosen')
        session.add(step)
        session.commit()
        out['ledger_orm'] = [len(str(step.trace_id)), session.execute(sa.select(steps.c.step_index).where(steps.c.session_id == 'sa-orm-' + DRIVER)).scalar()]


async def with_asyncpg():
    aengine = create_async_engine('postgresql+asyncpg://' + URL)
    async with aengine.connect() as conn:
        rows = await conn.execute(sa.text('SELECT name FROM sa_agents ORDER BY id'))
        names = [r[0] for r in rows]
        tables = await conn.run_sync(lambda c: sorted(t for t in sa.inspect(c).get_table_names() if t.startswith('sa_')))
    await aengine.dispose()
    return names, tables


out['asyncpg'] = asyncio.run(with_asyncpg())

with engine.begin() as conn:
    conn.execute(sa.text('DROP VIEW sa_open_tasks'))
    conn.execute(sa.text('DROP TABLE sa_tasks'))
    conn.execute(sa.text('DROP TABLE sa_agents'))
print(json.dumps(plain(out), sort_keys=True))
