"""asyncpg: binary results for every type it decodes, prepared statements,
its type introspection (set_type_codec queries pg_type recursively),
transactions and errors. Prints one JSON object (see psycopg2_flows.py)."""
import asyncio
import datetime
import decimal
import json
import os
import sys
import uuid

import asyncpg

from flows_common import plain

TARGET = sys.argv[1] if len(sys.argv) > 1 else 'postgres'


async def main():
    out = {}
    conn = await asyncpg.connect(
        host=os.environ['PGHOST'], port=int(os.environ['PGPORT']), user=os.environ['PGUSER'], database=os.environ['PGDATABASE'], timeout=10
    )
    out['server_version'] = conn.get_server_version().major
    await conn.execute('DROP TABLE IF EXISTS apg_items')
    await conn.execute(
        'CREATE TABLE apg_items (id integer PRIMARY KEY, small smallint, big bigint, name text, price numeric(12,3), ok boolean, '
        'f4 real, f8 double precision, d date, t time, ts timestamp, tz timestamptz, iv interval, u uuid, raw bytea, '
        'doc json, ints integer[], names text[])'
    )
    row = (1, 7, 2**50, 'widget', decimal.Decimal('12.345'), True, 0.5, 0.1, datetime.date(2024, 2, 29), datetime.time(13, 14, 15),
           datetime.datetime(2026, 1, 2, 3, 4, 5, 678901), datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc),
           datetime.timedelta(days=1, seconds=3661), uuid.UUID('12345678-1234-5678-1234-567812345678'), b'\x00\x01\xfe',
           json.dumps({'a': [1, 2]}), [1, None, 3], ['x', 'y z'])
    await conn.execute('INSERT INTO apg_items VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)', *row)
    await conn.execute('INSERT INTO apg_items (id) VALUES ($1)', 2)
    out['rows'] = plain(await conn.fetch('SELECT * FROM apg_items ORDER BY id'))
    out['fetchval'] = await conn.fetchval('SELECT count(*) FROM apg_items WHERE id > $1', 0)
    stmt = await conn.prepare('SELECT name FROM apg_items WHERE id = $1')
    out['prepared'] = [await stmt.fetchval(1), await stmt.fetchval(2)]
    out['prepared_types'] = [a.name for a in stmt.get_parameters()]
    out['prepared_columns'] = [(a.name, a.type.name) for a in stmt.get_attributes()]
    # Introspection: a codec for a type by name makes asyncpg look it up in pg_type.
    await conn.set_type_codec('json', encoder=json.dumps, decoder=json.loads, schema='pg_catalog')
    out['json_codec'] = await conn.fetchval("SELECT doc FROM apg_items WHERE id = 1")
    try:
        async with conn.transaction():
            await conn.execute("INSERT INTO apg_items (id, name) VALUES (3, 'gone')")
            raise RuntimeError('roll back')
    except RuntimeError:
        pass
    out['after_rollback'] = await conn.fetchval('SELECT count(*) FROM apg_items')
    errors = {}
    for name, sql in [('unique', 'INSERT INTO apg_items (id) VALUES (1)'), ('undefined_table', 'SELECT * FROM apg_nowhere'), ('syntax', 'SELEC 1')]:
        try:
            await conn.execute(sql)
            errors[name] = 'no error'
        except asyncpg.PostgresError as e:
            errors[name] = e.sqlstate
    out['errors'] = errors
    async with conn.transaction():
        out['cursor'] = [r['g'] async for r in conn.cursor('SELECT g FROM generate_series(1, 5) AS g ORDER BY 1', prefetch=2)]
    await conn.execute('DROP TABLE apg_items')
    if TARGET == 'cotwire':
        out['ledger_returning'] = await conn.fetchval(
            'INSERT INTO _cot_steps (session_id, step_type, content) VALUES ($1, $2, $3) RETURNING step_index', 'apg', 'ToolCall', 'search')
    await conn.close()
    print(json.dumps(out, sort_keys=True))


asyncio.run(main())
