"""SQLAlchemy 2 reflection of a whole schema (MetaData.reflect, views too) on psycopg 3, for bench/catalog.ts.
Prints the seconds it took and the number of relations reflected, as JSON."""
import json
import sys
import time

import sqlalchemy as sa

engine = sa.create_engine(sys.argv[1])
started = time.perf_counter()
metadata = sa.MetaData()
metadata.reflect(bind=engine, views=True)
print(json.dumps({'seconds': time.perf_counter() - started, 'tables': len(metadata.tables)}))
