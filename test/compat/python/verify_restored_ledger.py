"""Verifies a cotwire ledger restored into PostgreSQL (pg_dump, then pg_restore):
recomputes every row's current_hash from the README's hash specification and
checks each session's chain. Prints JSON: rows, sessions, and the first fault.

Usage: verify_restored_ledger.py <table>   (connection from PGHOST, PGPORT, PGUSER, PGDATABASE)
"""
import hashlib
import json
import struct
import sys

import psycopg2


# cotwire/v3 enters these as text; every other column but current_hash and row_salt is committed to.
V3_PLAIN = {"step_index", "prev_hash", "created_at", "ledger_seq", "session_id", "trace_id", "has_embedding"}


def lp(x):
    if x is None:
        return b"\xff" * 8
    b = x.encode("utf-8")
    return struct.pack(">Q", len(b)) + b


def text_of(value, data_type):
    """The text of a value as the specification has it, from PostgreSQL's text output."""
    if value is None:
        return None
    if data_type == "boolean":
        # Selected as ::text, PostgreSQL spells a boolean true/false (its output format alone says t/f).
        if value not in ("true", "t", "false", "f"):
            raise ValueError("not a boolean: %r" % value)
        return "true" if value in ("true", "t") else "false"
    if data_type == "double precision":
        return repr(float(value))
    return value


def main():
    table = sys.argv[1]
    conn = psycopg2.connect("")
    cur = conn.cursor()
    cur.execute(
        "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = %s ORDER BY ordinal_position",
        (table,),
    )
    columns = cur.fetchall()
    # The ledger's hash version is its table comment; none means cotwire/v1.
    cur.execute("SELECT obj_description(%s::regclass, 'pg_class')", ('"' + table + '"',))
    version = cur.fetchone()[0] or "cotwire/v1"
    if version not in ("cotwire/v1", "cotwire/v2", "cotwire/v3"):
        raise ValueError("unknown hash version %r" % version)
    selected = []
    for name, data_type in columns:
        quoted = '"' + name.replace('"', '""') + '"'
        if data_type == "timestamp with time zone":
            selected.append("(extract(epoch FROM %s) * 1000000)::bigint::text" % quoted)
        else:
            selected.append(quoted + "::text")
    cur.execute("SELECT %s FROM %s ORDER BY session_id, step_index" % (", ".join(selected), '"' + table + '"'))
    names = [c[0] for c in columns]
    types = [c[1] for c in columns]
    rows = 0
    sessions = set()
    fault = None
    previous = {}
    for row in cur.fetchall():
        record = dict(zip(names, row))
        pre = lp(version) + lp(table)
        salt = bytes.fromhex(record["row_salt"]) if version == "cotwire/v3" else b""
        m = 0
        for name, data_type in zip(names, types):
            if name == "current_hash" or (version == "cotwire/v3" and name == "row_salt"):
                continue
            value = lp(text_of(record[name], data_type))
            if version == "cotwire/v1":
                pre += lp(name) + value
            elif version == "cotwire/v2":
                pre += lp(name) + hashlib.sha256(value).digest()
            elif name in V3_PLAIN:
                pre += lp(name) + value
            else:
                # The committed value under its key: 16 bytes of SHA-256(lp("cotwire/v3 keys") || salt || u32(m // 2)).
                block = hashlib.sha256(lp("cotwire/v3 keys") + salt + struct.pack(">I", m // 2)).digest()
                key = block[16 * (m % 2):16 * (m % 2) + 16]
                pre += lp(name) + hashlib.sha256(key + value).digest()
                m += 1
        session = record["session_id"]
        expected_prev = previous.get(session, "")
        if fault is None and hashlib.sha256(pre).hexdigest() != record["current_hash"]:
            fault = {"session": session, "step_index": record["step_index"], "kind": "edited"}
        if fault is None and record["prev_hash"] != expected_prev:
            fault = {"session": session, "step_index": record["step_index"], "kind": "unlinked"}
        previous[session] = record["current_hash"]
        sessions.add(session)
        rows += 1
    print(json.dumps({"rows": rows, "sessions": len(sessions), "fault": fault}))


if __name__ == "__main__":
    main()
