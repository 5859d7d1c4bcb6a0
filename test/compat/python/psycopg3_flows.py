"""psycopg 3: binary parameters and results, server-side cursors, prepared
statements and DEALLOCATE, transactions and errors. Prints one JSON object
(see psycopg2_flows.py)."""
import datetime
import decimal
import json
import sys
import uuid

import psycopg

from flows_common import plain

TARGET = sys.argv[1] if len(sys.argv) > 1 else 'postgres'
out = {}


with psycopg.connect(connect_timeout=10) as conn:
    out['server_version'] = conn.info.server_version >= 150000
    with conn.cursor() as cur:
        cur.execute('DROP TABLE IF EXISTS py3_items')
        cur.execute('CREATE TABLE py3_items (id integer PRIMARY KEY, name text, price numeric(10,2), qty bigint, ok boolean, made timestamptz, u uuid, raw bytea, tags text[], ratio double precision)')
        conn.commit()
        row = (1, 'widget', decimal.Decimal('9.99'), 2**40, True, datetime.datetime(2026, 5, 6, 7, 8, 9, 123456, tzinfo=datetime.timezone.utc),
               uuid.UUID('12345678-1234-5678-1234-567812345678'), b'\x00\xff', ['a', 'b'], 0.25)
        # Binary parameters (psycopg sends them with format 1).
        cur.execute('INSERT INTO py3_items VALUES (%b, %b, %b, %b, %b, %b, %b, %b, %b, %b)', row)
        cur.execute('INSERT INTO py3_items (id, name) VALUES (%s, %s)', (2, None))
        conn.commit()
        # Binary results.
        cur.execute('SELECT * FROM py3_items ORDER BY id', binary=True)
        out['binary_select'] = plain(cur.fetchall())
        cur.execute('SELECT * FROM py3_items ORDER BY id')
        out['text_select'] = plain(cur.fetchall())
        conn.commit()
        # Prepared statements: psycopg prepares a query it has seen prepare_threshold times.
        for i in range(3):
            cur.execute('SELECT id, name FROM py3_items WHERE id = %s', (1,), prepare=True)
        out['prepared'] = cur.fetchall()
        cur.execute('DEALLOCATE ALL')
        cur.execute('SELECT id FROM py3_items WHERE id = %s', (2,), prepare=True)
        out['after_deallocate'] = cur.fetchall()
        conn.commit()
    # Server-side cursor.
    with conn.cursor(name='py3_server') as ss:
        ss.itersize = 2
        ss.execute('SELECT g FROM generate_series(1, 5) AS g ORDER BY 1')
        out['server_cursor'] = [r[0] for r in ss]
    conn.commit()
    # Transactions and errors.
    with conn.cursor() as cur:
        try:
            with conn.transaction():
                cur.execute("INSERT INTO py3_items (id, name) VALUES (3, 'gone')")
                raise RuntimeError('roll back')
        except RuntimeError:
            pass
        cur.execute('SELECT count(*) FROM py3_items')
        out['count_after_rollback'] = cur.fetchone()[0]
        errors = {}
        for name, sql in [('unique', "INSERT INTO py3_items (id) VALUES (1)"), ('undefined_table', 'SELECT * FROM py3_nowhere')]:
            try:
                cur.execute(sql)
                errors[name] = 'no error'
            except psycopg.Error as e:
                errors[name] = e.sqlstate
                conn.rollback()
        out['errors'] = errors
        cur.execute('DROP TABLE py3_items')
        conn.commit()
    if TARGET == 'cotwire':
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute('INSERT INTO _cot_steps (session_id, step_type, content) VALUES (%s, %s, %s) RETURNING step_index', ('py3', 'Decision', 'go'))
            out['ledger_returning'] = cur.fetchone()[0]

print(json.dumps(out, sort_keys=True))
