"""pandas (Debian's, over SQLAlchemy and psycopg2): to_sql creates and fills
a table, read_sql reads it back with types, and an ORM model with a serial
key is created by create_all and written through a session. Prints one JSON
object (see psycopg2_flows.py)."""
import datetime
import decimal
import json
import os
import sys

import pandas as pd
import sqlalchemy as sa
from sqlalchemy.orm import Session, declarative_base

TARGET = sys.argv[1] if len(sys.argv) > 1 else 'postgres'
URL = 'postgresql+psycopg2://{user}@{host}:{port}/{db}'.format(
    user=os.environ['PGUSER'], host=os.environ['PGHOST'], port=os.environ['PGPORT'], db=os.environ['PGDATABASE'])
out = {}


def plain(v):
    if v is None or (isinstance(v, float) and v != v):
        return None  # NaN, pandas' missing value
    if isinstance(v, (datetime.datetime, datetime.date, pd.Timestamp)):
        return v.isoformat()
    if isinstance(v, decimal.Decimal):
        return str(v)
    if hasattr(v, 'item'):
        return v.item()
    return v


engine = sa.create_engine(URL)
with engine.begin() as conn:
    conn.execute(sa.text('DROP TABLE IF EXISTS pd_readings'))
    conn.execute(sa.text('DROP TABLE IF EXISTS pd_runs'))

frame = pd.DataFrame({
    'sensor': ['a', 'b', 'a'],
    'value': [1.5, 2.25, None],
    'count': [1, 2, 3],
    'at': pd.to_datetime(['2024-01-01 00:00:00', '2024-01-02 12:30:00', '2024-01-03 23:59:59']),
    'ok': [True, False, True],
})
out['to_sql'] = frame.to_sql('pd_readings', engine, index=False)
back = pd.read_sql('SELECT * FROM pd_readings ORDER BY count', engine)
out['read_columns'] = list(back.columns)
out['read_dtypes'] = [str(t) for t in back.dtypes]
out['read_rows'] = [[plain(x) for x in row] for row in back.itertuples(index=False)]
grouped = pd.read_sql(sa.text('SELECT sensor, count(*) AS n, avg(value) AS mean FROM pd_readings GROUP BY sensor ORDER BY sensor'), engine)
out['grouped'] = [[plain(x) for x in row] for row in grouped.itertuples(index=False)]
params = pd.read_sql(sa.text('SELECT count FROM pd_readings WHERE sensor = :s AND count > :c ORDER BY count'), engine, params={'s': 'a', 'c': 1})
out['params'] = params['count'].tolist()
out['append'] = frame.head(1).to_sql('pd_readings', engine, index=False, if_exists='append')
out['count_after_append'] = int(pd.read_sql('SELECT count(*) AS n FROM pd_readings', engine)['n'][0])

Base = declarative_base()


class Run(Base):
    __tablename__ = 'pd_runs'
    id = sa.Column(sa.Integer, primary_key=True)  # serial, as create_all makes it
    name = sa.Column(sa.String(40), nullable=False, unique=True)
    meta = sa.Column(sa.dialects.postgresql.JSONB)
    started = sa.Column(sa.DateTime(timezone=True), server_default=sa.func.now())


Base.metadata.create_all(engine)
with Session(engine) as s:
    s.add_all([Run(name='first', meta={'k': 1}), Run(name='second')])
    s.commit()
    out['orm_ids'] = [r.id for r in s.query(Run).order_by(Run.id)]
    out['orm_meta'] = [r.meta for r in s.query(Run).order_by(Run.id)]
insp = sa.inspect(engine)
out['reflected'] = [[c['name'], str(c['type'])] for c in insp.get_columns('pd_runs')]
out['unique'] = [u['column_names'] for u in insp.get_unique_constraints('pd_runs')]

if TARGET == 'cotwire':
    steps = pd.DataFrame({'session_id': ['pandas', 'pandas'], 'step_type': ['Observation', 'Decision'], 'content': ['read', 'decide']})
    out['ledger_to_sql'] = steps.to_sql('_cot_steps', engine, index=False, if_exists='append')
    out['ledger_read'] = pd.read_sql("SELECT step_index FROM _cot_steps WHERE session_id = 'pandas' ORDER BY step_index", engine)['step_index'].tolist()

with engine.begin() as conn:
    conn.execute(sa.text('DROP TABLE pd_readings'))
    conn.execute(sa.text('DROP TABLE pd_runs'))
print(json.dumps(out))
