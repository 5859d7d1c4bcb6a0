"""psycopg2's connect, browse, query, parameter, transaction, cursor and error flows.

Prints one JSON object: each flow's results, as Python sees them, so that the
same script run against cotwire and against PostgreSQL can be compared.
Connection settings come from the PG* environment variables.
"""
import datetime
import decimal
import json
import sys

import psycopg2
import psycopg2.errors
import psycopg2.extras

from flows_common import plain

TARGET = sys.argv[1] if len(sys.argv) > 1 else 'postgres'
out = {}


conn = psycopg2.connect(connect_timeout=10)
cur = conn.cursor()

# connect
out['autocommit'] = conn.autocommit
out['server_version'] = conn.server_version >= 150000
cur.execute('SELECT current_schema()')
out['current_schema'] = cur.fetchone()[0]
cur.execute('SHOW standard_conforming_strings')
out['standard_conforming_strings'] = cur.fetchone()[0]
conn.commit()

# schema and parameters (psycopg2 interpolates them client-side)
cur.execute('DROP TABLE IF EXISTS py2_notes')
cur.execute('CREATE TABLE py2_notes (id integer PRIMARY KEY, body text NOT NULL, score double precision, amount numeric(10,2), made timestamptz, tags text[], doc json)')
rows = [
    (1, "it's", 0.5, decimal.Decimal('12.34'), datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc), ['a', 'b'], json.dumps({'k': 1})),
    (2, 'second', None, None, None, [], None),
    (3, 'x\ny', -1.25, decimal.Decimal('-0.01'), datetime.datetime(1999, 12, 31, 23, 59, 59, tzinfo=datetime.timezone.utc), ['with space', 'q"uote'], json.dumps([1, 2])),
]
cur.executemany('INSERT INTO py2_notes VALUES (%s, %s, %s, %s, %s, %s, %s)', rows)
out['executemany_rowcount'] = cur.rowcount
conn.commit()
cur.execute('SELECT id, body, score, amount, made, tags, doc FROM py2_notes WHERE id >= %s ORDER BY id', (1,))
out['select'] = plain(cur.fetchall())
out['description'] = [d.name for d in cur.description]
cur.execute('SELECT %s::int + 1 AS n, %s AS s, %s AS nothing, %s::date AS d', (41, 'text', None, datetime.date(2024, 2, 29)))
out['literals'] = plain(cur.fetchone())
conn.commit()

# browse
cur.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_name LIKE 'py2%' ORDER BY 1")
out['tables'] = cur.fetchall()
cur.execute("SELECT column_name, data_type, is_nullable FROM information_schema.columns WHERE table_name = 'py2_notes' ORDER BY ordinal_position")
out['columns'] = cur.fetchall()
conn.commit()

# transactions: autocommit is off, so psycopg2 sends BEGIN before the first statement
cur.execute("INSERT INTO py2_notes (id, body) VALUES (10, 'rolled back')")
conn.rollback()
cur.execute("INSERT INTO py2_notes (id, body) VALUES (11, 'committed')")
conn.commit()
cur.execute('SELECT id FROM py2_notes WHERE id >= 10 ORDER BY id')
out['after_transactions'] = cur.fetchall()
conn.commit()

# errors, each followed by a rollback that leaves the connection usable
errors = {}
for name, sql in [
    ('unique', "INSERT INTO py2_notes (id, body) VALUES (1, 'dup')"),
    ('not_null', 'INSERT INTO py2_notes (id) VALUES (99)'),
    ('syntax', 'SELEC 1'),
    ('undefined_table', 'SELECT * FROM py2_nowhere'),
    ('undefined_column', 'SELECT nope FROM py2_notes'),
]:
    try:
        cur.execute(sql)
        errors[name] = 'no error'
    except psycopg2.Error as e:
        errors[name] = e.pgcode
        conn.rollback()
out['errors'] = errors
try:
    cur.execute("SELECT 1/0")
    out['in_failed'] = 'no error'
except psycopg2.Error:
    try:
        cur.execute('SELECT 1')
        out['in_failed'] = 'no error'
    except psycopg2.Error as e:
        out['in_failed'] = e.pgcode
conn.rollback()

# client-side cursor, fetchmany
cur.execute('SELECT id FROM py2_notes ORDER BY id')
out['fetchmany'] = [cur.fetchmany(2), cur.fetchmany(2)]
conn.commit()

# named (server-side) cursor: DECLARE / FETCH FORWARD itersize / CLOSE
named = conn.cursor(name='py2_named')
named.itersize = 2
named.execute('SELECT g AS n FROM generate_series(1, 5) AS g ORDER BY 1')
out['named_cursor'] = [r[0] for r in named]
named.close()
conn.commit()

# dict cursor
dcur = conn.cursor(cursor_factory=psycopg2.extras.RealDictCursor)
dcur.execute('SELECT id, body FROM py2_notes WHERE id = %(id)s', {'id': 2})
out['dict_cursor'] = dcur.fetchall()
conn.commit()

# autocommit
conn.autocommit = True
cur.execute("INSERT INTO py2_notes (id, body) VALUES (12, 'autocommit')")
cur.execute('SELECT count(*) FROM py2_notes')
out['count'] = cur.fetchone()[0]

if TARGET == 'cotwire':
    # The ledger: the chain columns come back from RETURNING in autocommit.
    cur.execute(
        "INSERT INTO _cot_steps (session_id, step_type, content, confidence) VALUES (%s, %s, %s, %s) RETURNING step_index, length(current_hash)",
        ('py2-session', 'Observation', 'the user asked', 0.9),
    )
    out['ledger_returning'] = cur.fetchone()
    try:
        cur.execute("UPDATE _cot_steps SET content = 'changed'")
        out['ledger_update'] = 'no error'
    except psycopg2.Error as e:
        out['ledger_update'] = e.pgcode

cur.execute('DROP TABLE py2_notes')
conn.close()
print(json.dumps(out, sort_keys=True))
