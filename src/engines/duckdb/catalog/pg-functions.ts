import { OID, P, SETTING_VALUE } from './catalog-sql.js';
import { RESULT_TYPE_MACROS } from './result-types.js';
import { LIST_MACROS } from './list-functions.js';
import { TYPE_NAME_MACROS } from './type-names.js';
import { TO_CHAR_MACROS } from './to-char.js';

/**
 * A predicate as pg_get_indexdef(..., true) prints it: without its outer
 * parentheses, nor those around each comparison (`deleted_at IS NULL AND
 * org > 0` for `((deleted_at IS NULL) AND (org > 0))`).
 */
const prettyPredicate = (p: string): string =>
  `regexp_replace(regexp_replace(${p}, '^\\((.*)\\)$', '\\1'), '\\(([^()]+ (?:IS NULL|IS NOT NULL|[<>=!]+ [^()]+))\\)', '\\1', 'g')`;

/** DuckDB's integer types, which make `j -> n` an array's index. */
const INTEGER_TYPES = ['TINYINT', 'SMALLINT', 'INTEGER', 'BIGINT', 'HUGEINT', 'UTINYINT', 'USMALLINT', 'UINTEGER', 'UBIGINT'].map((t) => `'${t}'`).join(', ');

/** cot_jsonb_arrow(j, k) and cot_jsonb_path(j, path, texts) for -> and #>, and their _text forms for ->> and #>>. */
function arrowMacros(): Array<[string, Array<[string, string]>]> {
  const mode = `CASE WHEN typeof(k) IN (${INTEGER_TYPES}) THEN 'index' ELSE 'key' END`;
  const get = (text: boolean): string => `cot_jsonb_get(CAST(j AS VARCHAR), CAST(k AS VARCHAR), ${mode}${text ? " || '_text'" : ''})`;
  const path = (text: boolean): string => `cot_jsonb_path(CAST(j AS VARCHAR), texts, '${text ? 'text' : ''}')`;
  // The value DuckDB finds decides which reads it.
  // So is a scalar's: jsonb reads one as an array of one (`'true'::jsonb -> 0` is true), DuckDB finds nothing.
  const pick = (found: string, again: string, own: string): string =>
    `CASE WHEN json_type(${found}) IN ('DOUBLE', 'OBJECT', 'ARRAY') OR ((${found}) IS NULL AND json_type(CAST(j AS JSON)) NOT IN ('OBJECT', 'ARRAY'))
       THEN ${again} ELSE ${own} END`;
  // DuckDB's -> binds looser than IS NULL and AND: the operator's call stands in parentheses.
  const arrow = '(CAST(j AS JSON) -> k)';
  const at = 'json_extract(CAST(j AS JSON), path)';
  return [
    ['cot_jsonb_arrow', [['j, k', pick(arrow, `CAST(${get(false)} AS JSON)`, arrow)]]],
    ['cot_jsonb_arrow_text', [['j, k', pick(arrow, get(true), '(CAST(j AS JSON) ->> k)')]]],
    ['cot_jsonb_path', [['j, path, texts', pick(at, `CAST(${path(false)} AS JSON)`, at)]]],
    ['cot_jsonb_path_text', [['j, path, texts', pick(at, path(true), 'json_extract_string(CAST(j AS JSON), path)')]]],
  ];
}

/** pg_cancel_backend(pid) and pg_terminate_backend(pid): true once signalled, false (with a WARNING) for no such backend. */
const signalBackend = (signal: 'cancel' | 'terminate'): string =>
  `CASE WHEN pid IS NULL THEN NULL ELSE CAST(coalesce(cot_backend_call('${signal}', CAST(pid AS VARCHAR), '', ''),
     error('permission denied to signal backend ' || pid)) AS BOOLEAN) END`;

/** `x`, a text timestamp, as DuckDB reads it (see pgTimestampText in sql/timestamp-text.ts, which does the same for literals). */
const TIMESTAMP_TEXT = `regexp_replace(regexp_replace(regexp_replace(trim(x),
  '^(\\d+-\\d+-\\d+[ T]\\d+:\\d+)(\\s*(?:[+-]\\d|[zZ]$|$))', '\\1:00\\2'),
  '\\s+([+-]\\d{1,2}(?::?\\d{2}){0,2})$', '\\1'), '\\s*[zZ]$', '+00')`;

/** uuid-ossp's functions. A version 1 UUID's node is random (with the multicast bit), not the host's MAC address. */
const UUID_FUNCTIONS: readonly MacroDef[] = [
  ['uuid_nil', [['', `CAST('00000000-0000-0000-0000-000000000000' AS UUID)`]]],
  ['uuid_ns_dns', [['', `CAST('6ba7b810-9dad-11d1-80b4-00c04fd430c8' AS UUID)`]]],
  ['uuid_ns_url', [['', `CAST('6ba7b811-9dad-11d1-80b4-00c04fd430c8' AS UUID)`]]],
  ['uuid_ns_oid', [['', `CAST('6ba7b812-9dad-11d1-80b4-00c04fd430c8' AS UUID)`]]],
  ['uuid_ns_x500', [['', `CAST('6ba7b814-9dad-11d1-80b4-00c04fd430c8' AS UUID)`]]],
  // A name-based UUID from a hash's hex digits: its version, and RFC 4122's variant bits.
  [
    'cot_uuid_of_hash',
    [
      [
        'h, version',
        `CAST(substr(h, 1, 8) || '-' || substr(h, 9, 4) || '-' || version || substr(h, 14, 3) || '-'
           || substr('89ab', ((strpos('0123456789abcdef', substr(h, 17, 1)) - 1) & 3) + 1, 1) || substr(h, 18, 3) || '-' || substr(h, 21, 12) AS UUID)`,
      ],
    ],
  ],
  ['uuid_generate_v3', [['namespace, name', `${P}.cot_uuid_of_hash(md5(unhex(replace(CAST(namespace AS VARCHAR), '-', '')) || encode(name)), '3')`]]],
  ['uuid_generate_v5', [['namespace, name', `${P}.cot_uuid_of_hash(sha1(unhex(replace(CAST(namespace AS VARCHAR), '-', '')) || encode(name)), '5')`]]],
  // Version 1: 100-nanosecond intervals since 1582-10-15, a random clock sequence and node.
  [
    'cot_uuid_v1',
    [
      [
        't',
        `CAST(lpad(lower(hex(t & 4294967295)), 8, '0') || '-' || lpad(lower(hex((t >> 32) & 65535)), 4, '0') || '-'
           || lpad(lower(hex(((t >> 48) & 4095) | 4096)), 4, '0') || '-' || lpad(lower(hex(32768 | CAST(floor(random() * 16384) AS BIGINT))), 4, '0')
           || '-' || lpad(lower(hex(1099511627776 | CAST(floor(random() * 281474976710656) AS BIGINT))), 12, '0') AS UUID)`,
      ],
    ],
  ],
  ['uuid_generate_v1', [['', `${P}.cot_uuid_v1(CAST(system.main.cot_clock_micros() AS BIGINT) * 10 + 122192928000000000)`]]],
  ['uuid_generate_v1mc', [['', `${P}.cot_uuid_v1(CAST(system.main.cot_clock_micros() AS BIGINT) * 10 + 122192928000000000)`]]],
];

/** A macro and its overloads: [parameters, body]. */
/**
 * Every comment, as one map from 'objoid:objsubid', which a query builds once: a lookup per row is then a
 * function of the row, where a subquery per row became a join that put the rows out of their order (clients
 * read information_schema.columns with col_description() and no ORDER BY, and expect columns by number).
 */
const DESCRIPTIONS = `(SELECT map_from_entries(list((cot_k, cot_v))) FROM (SELECT CAST(cot_d.objoid AS VARCHAR) || ':' || CAST(cot_d.objsubid AS VARCHAR) AS cot_k,
    first(cot_d.description) AS cot_v FROM ${P}.pg_description cot_d GROUP BY ALL))`;

export type MacroDef = readonly [name: string, overloads: ReadonlyArray<readonly [params: string, body: string]>];

/** The functions clients call, by the name they call them (with or without pg_catalog.). */
export const MACROS: readonly MacroDef[] = [
  ['pg_get_userbyid', [['roleid', `current_user()`]]],
  [
    'format_type',
    [
      [
        'type_oid, typemod',
        `CASE
       WHEN type_oid IS NULL THEN NULL
       WHEN type_oid = 1700 AND typemod > 4 THEN 'numeric(' || ((typemod - 4) // 65536) || ',' || ((typemod - 4) % 65536) || ')'
       WHEN type_oid = 1043 AND typemod > 4 THEN 'character varying(' || (typemod - 4) || ')'
       WHEN type_oid = 1042 AND typemod > 4 THEN 'character(' || (typemod - 4) || ')'
       ELSE coalesce((SELECT cot_t.display FROM ${P}.cot_types cot_t WHERE cot_t.oid = type_oid), '???') END`,
      ],
    ],
  ],
  [
    'pg_get_expr',
    [
      ['expr, relid', `expr`],
      ['expr, relid, pretty', `expr`],
    ],
  ],
  [
    'pg_get_indexdef',
    [
      ['index_oid', `(SELECT cot_i.indexdef FROM ${P}.cot_indexes cot_i WHERE cot_i.indexrelid = index_oid)`],
      [
        'index_oid, col, pretty',
        `CASE WHEN col = 0 OR col IS NULL
       THEN (SELECT CASE WHEN pretty AND cot_i.predicate IS NOT NULL
               THEN replace(cot_i.indexdef, ' WHERE ' || cot_i.predicate, ' WHERE ' || ${prettyPredicate('cot_i.predicate')}) ELSE cot_i.indexdef END
             FROM ${P}.cot_indexes cot_i WHERE cot_i.indexrelid = index_oid)
       ELSE (SELECT cot_c.column_name FROM ${P}.cot_indexes cot_i JOIN ${P}.cot_columns cot_c ON cot_c.table_oid = cot_i.indrelid AND cot_c.column_index = cot_i.indkey[col]
             WHERE cot_i.indexrelid = index_oid) END`,
      ],
    ],
  ],
  [
    'pg_get_constraintdef',
    [
      ['constraint_oid', `(SELECT cot_k.condef FROM ${P}.cot_constraints cot_k WHERE cot_k.oid = constraint_oid)`],
      ['constraint_oid, pretty', `(SELECT cot_k.condef FROM ${P}.cot_constraints cot_k WHERE cot_k.oid = constraint_oid)`],
    ],
  ],
  [
    'pg_get_viewdef',
    [
      ['v_oid', `(SELECT cot_v.definition FROM ${P}.cot_views cot_v WHERE cot_v.view_oid = v_oid)`],
      ['v_oid, pretty', `(SELECT cot_v.definition FROM ${P}.cot_views cot_v WHERE cot_v.view_oid = v_oid)`],
    ],
  ],
  // A relation is visible where its schema is on the search path (the engine's, as SET search_path applied it:
  // public as main), or is pg_catalog, information_schema or a temporary one; one of an unknown OID is not.
  [
    'pg_table_is_visible',
    [
      [
        'rel_oid',
        `coalesce((SELECT cot_n.nspname IN ('pg_catalog', 'information_schema') OR cot_n.nspname LIKE 'pg\\_temp%' ESCAPE '\\'
             OR list_contains(list_transform(string_split(coalesce(nullif(current_setting('search_path'), ''), 'main'), ','),
               cot_s -> CASE split_part(trim(cot_s), '.', -1) WHEN 'main' THEN 'public' ELSE split_part(trim(cot_s), '.', -1) END), cot_n.nspname)
           FROM ${P}.pg_class cot_c JOIN ${P}.pg_namespace cot_n ON cot_n.oid = cot_c.relnamespace WHERE cot_c.oid = rel_oid), false)`,
      ],
    ],
  ],
  ['pg_type_is_visible', [['type_oid', `true`]]],
  ['pg_function_is_visible', [['fn_oid', `true`]]],
  [
    'obj_description',
    [
      ['obj_oid', `${DESCRIPTIONS}[CAST(obj_oid AS VARCHAR) || ':0']`],
      ['obj_oid, catalog_name', `${DESCRIPTIONS}[CAST(obj_oid AS VARCHAR) || ':0']`],
    ],
  ],
  ['col_description', [['table_oid, column_number', `${DESCRIPTIONS}[CAST(table_oid AS VARCHAR) || ':' || CAST(column_number AS VARCHAR)]`]]],
  ['shobj_description', [['obj_oid, catalog_name', `CAST(NULL AS VARCHAR)`]]],
  ['pg_encoding_to_char', [['encoding', `CASE WHEN encoding = 6 THEN 'UTF8' ELSE 'SQL_ASCII' END`]]],
  [
    'pg_get_function_result',
    [
      [
        'fn_oid',
        `(SELECT CASE WHEN cot_f.function_type LIKE 'table%' THEN 'SETOF record'
       WHEN cot_f.return_type IS NULL THEN 'anyelement' ELSE coalesce(cot_t.display, lower(cot_f.return_type)) END
       FROM ${P}.cot_functions cot_f LEFT JOIN ${P}.cot_type_map cot_m ON cot_m.type_key = ${P}.cot_type_key(cot_f.return_type)
         LEFT JOIN ${P}.cot_types cot_t ON cot_t.oid = cot_m.oid WHERE cot_f.oid = fn_oid)`,
      ],
    ],
  ],
  [
    'pg_get_function_arguments',
    [
      [
        'fn_oid',
        `(SELECT array_to_string(list_transform(list_zip(cot_f.parameters, cot_f.parameter_types),
       p -> p[1] || CASE WHEN p[2] IS NULL THEN '' ELSE ' ' || lower(p[2]) END), ', ') FROM ${P}.cot_functions cot_f WHERE cot_f.oid = fn_oid)`,
      ],
    ],
  ],
  ['pg_get_function_identity_arguments', [['fn_oid', `${P}.pg_get_function_arguments(fn_oid)`]]],
  ['pg_get_statisticsobjdef_columns', [['stat_oid', `CAST(NULL AS VARCHAR)`]]],
  ['pg_relation_is_publishable', [['rel_oid', `false`]]],
  // PostgreSQL's units and rounding (bytes, kB, MB, GB, TB; each step taken at 10 units of the next).
  // The divisor of / and %: zero raises division_by_zero (22012), as in PostgreSQL.
  // jsonb's ? ?| ?& operators: a key of an object, or a string in an array, or the string itself.
  [
    'cot_jsonb_exists',
    [
      [
        'j, k',
        `CASE WHEN j IS NULL OR k IS NULL THEN NULL ELSE CASE json_type(CAST(j AS JSON)) WHEN 'OBJECT' THEN list_contains(json_keys(CAST(j AS JSON)), k)
           WHEN 'ARRAY' THEN list_contains(list_transform(CAST(CAST(j AS JSON) AS JSON[]), cot_e -> CASE json_type(cot_e) WHEN 'VARCHAR' THEN json_extract_string(cot_e, '$') END), k)
           WHEN 'VARCHAR' THEN json_extract_string(CAST(j AS JSON), '$') = k ELSE false END END`,
      ],
    ],
  ],
  // SELECT set_config(...) on its own is a session command (engines/duckdb/handler/commands.ts). Inside a larger
  // query it reaches the session's settings through cot_backend_call (engines/duckdb/handler/backends.ts): NULL
  // is the setting's default, an is_local of NULL is false. A refusal's SQLSTATE is the handler's to report.
  [
    'set_config',
    [
      [
        'setting_name, new_value, is_local',
        `CASE WHEN setting_name IS NULL THEN CAST(error('SET requires parameter name') AS VARCHAR)
           ELSE coalesce(cot_backend_call('set_config', CAST(setting_name AS VARCHAR), coalesce(CAST(new_value AS VARCHAR), ''),
             CASE WHEN coalesce(is_local, false) THEN 'true' ELSE 'false' END || CASE WHEN new_value IS NULL THEN ':null' ELSE '' END),
             error('set_config() could not change the setting')) END`,
      ],
    ],
  ],
  // The start of the session's current statement (cot_backend_call), never before the transaction's start (now()).
  [
    'statement_timestamp',
    [['', `greatest(get_current_timestamp(), CAST(make_timestamp(CAST(cot_backend_call('statement_start', '', '', '') AS BIGINT)) AS TIMESTAMPTZ))`]],
  ],
  // Signals to another session, as PostgreSQL allows them (engines/duckdb/handler/backends.ts).
  ['pg_cancel_backend', [['pid', signalBackend('cancel')]]],
  [
    'pg_terminate_backend',
    [
      ['pid', signalBackend('terminate')],
      ['pid, timeout', signalBackend('terminate')],
    ],
  ],
  // jsonb's @> and <@ (rewrite/jsonb.ts), decided as PostgreSQL does (cot_jsonb_contains_text, sql/jsonb.ts), which
  // costs microseconds a row. DuckDB's json_contains searches every depth, so it holds whatever PostgreSQL's holds,
  // except where numbers equal by value are written otherwise (1.0 and 1): its false is the answer when the right
  // side has no digit, and only the rest is decided exactly.
  [
    'cot_jsonb_contains',
    [
      [
        'a, b',
        `CASE WHEN a IS NULL OR b IS NULL THEN NULL
          WHEN json_contains(CAST(a AS JSON), CAST(b AS JSON)) OR regexp_matches(CAST(b AS VARCHAR), '[0-9]')
          THEN cot_jsonb_contains_text(CAST(a AS VARCHAR), CAST(b AS VARCHAR)) ELSE false END`,
      ],
    ],
  ],
  ['cot_json_contained', [['a, b', `${P}.cot_jsonb_contains(b, a)`]]],
  // jsonb || jsonb: two objects merge, the right's keys winning; otherwise arrays concatenate, a scalar or object as one
  // element. Joined as text, so that numbers keep the digits they were written with (DuckDB's JSON lists and maps
  // print 2.50 as 2.5). A merge's text is jsonb's (cot_jsonb_text: each key once, the last one kept), so that ->, #> and
  // the rest read the right's value of a key both have, where DuckDB's JSON functions find the first.
  ['cot_json_items', [['t', `CASE WHEN left(t, 1) IN ('[', '{') THEN trim(t[2:-2]) ELSE t END`]]],
  [
    'cot_jsonb_concat',
    [
      [
        'a, b',
        // a and b are named once each, outside the lambda: DuckDB copies a macro's argument wherever its body names
        // it, and a JSON builder's text given here was copied a dozen times (seconds of binding when nested).
        `list_transform([{'a': CAST(a AS JSON), 'b': CAST(b AS JSON)}], cot_p -> CASE WHEN cot_p.a IS NULL OR cot_p.b IS NULL THEN NULL
          WHEN json_type(cot_p.a) = 'OBJECT' AND json_type(cot_p.b) = 'OBJECT'
            THEN CAST(cot_jsonb_text('{' || concat_ws(', ', nullif(${P}.cot_json_items(trim(CAST(cot_p.a AS VARCHAR))), ''),
              nullif(${P}.cot_json_items(trim(CAST(cot_p.b AS VARCHAR))), '')) || '}') AS JSON)
          ELSE CAST('[' || concat_ws(', ',
            nullif(CASE WHEN json_type(cot_p.a) = 'ARRAY' THEN ${P}.cot_json_items(trim(CAST(cot_p.a AS VARCHAR))) ELSE trim(CAST(cot_p.a AS VARCHAR)) END, ''),
            nullif(CASE WHEN json_type(cot_p.b) = 'ARRAY' THEN ${P}.cot_json_items(trim(CAST(cot_p.b AS VARCHAR))) ELSE trim(CAST(cot_p.b AS VARCHAR)) END, '')) || ']' AS JSON) END)[1]`,
      ],
    ],
  ],
  // jsonb's -> and ->>, #> and #>> (rewrite/jsonb.ts): DuckDB's own where the value is a string, an integer, a boolean
  // or null, which it gives as jsonb does; a double (1.10 would come back 1.1), an object or an array are read again as
  // jsonb reads them (cot_jsonb_get and cot_jsonb_path, sql/jsonb.ts), at microseconds a row.
  ...arrowMacros(),
  ['cot_jsonb_exists_any', [['j, ks', `len(list_filter(ks, cot_k -> ${P}.cot_jsonb_exists(j, cot_k))) > 0`]]],
  ['cot_jsonb_exists_all', [['j, ks', `len(list_filter(ks, cot_k -> ${P}.cot_jsonb_exists(j, cot_k))) = len(ks)`]]],
  ['cot_upper', [['s', `replace(ucase(replace(s, 'ß', chr(1114111))), chr(1114111), 'ß')`]]],
  // A divisor of 0 is division_by_zero, unless the dividend is NULL: PostgreSQL's division is strict, so NULL / 0 is NULL.
  [
    'cot_divisor',
    [
      ['divisor', `CASE WHEN divisor = 0 THEN error('division by zero') ELSE divisor END`],
      ['divisor, dividend', `CASE WHEN divisor = 0 AND dividend IS NOT NULL THEN error('division by zero') ELSE divisor END`],
    ],
  ],
  ...RESULT_TYPE_MACROS,
  ...TYPE_NAME_MACROS,
  ...LIST_MACROS,
  ...TO_CHAR_MACROS,
  [
    'pg_size_pretty',
    [
      [
        'size_bytes',
        `CASE
       WHEN abs(size_bytes) < 10240 THEN CAST(size_bytes AS BIGINT) || ' bytes'
       WHEN abs(size_bytes // 512) < 20479 THEN CAST(((size_bytes // 512) + CASE WHEN size_bytes < 0 THEN -1 ELSE 1 END) // 2 AS BIGINT) || ' kB'
       WHEN abs(size_bytes // 524288) < 20479 THEN CAST(((size_bytes // 524288) + CASE WHEN size_bytes < 0 THEN -1 ELSE 1 END) // 2 AS BIGINT) || ' MB'
       WHEN abs(size_bytes // 536870912) < 20479 THEN CAST(((size_bytes // 536870912) + CASE WHEN size_bytes < 0 THEN -1 ELSE 1 END) // 2 AS BIGINT) || ' GB'
       ELSE CAST(((size_bytes // 549755813888) + CASE WHEN size_bytes < 0 THEN -1 ELSE 1 END) // 2 AS BIGINT) || ' TB' END`,
      ],
    ],
  ],
  ['pg_table_size', [['rel_oid', `CAST(0 AS BIGINT)`]]],
  ['pg_total_relation_size', [['rel_oid', `CAST(0 AS BIGINT)`]]],
  ['pg_relation_size', [['rel_oid', `CAST(0 AS BIGINT)`]]],
  ['pg_database_size', [['db', `CAST((SELECT sum(total_blocks * block_size) FROM pragma_database_size()) AS BIGINT)`]]],
  // DuckDB cannot tell the size of an index: as pg_relation_size, 0.
  ['pg_indexes_size', [['rel_oid', `CAST(0 AS BIGINT)`]]],
  // The session's process ID, as BackendKeyData gave it (a per-connection macro: engines/duckdb/catalog/compat.ts).
  ['pg_backend_pid', [['', `cot_backend_pid()`]]],
  [
    'has_database_privilege',
    [
      ['db, priv', `true`],
      ['u, db, priv', `true`],
    ],
  ],
  [
    'has_schema_privilege',
    [
      ['s, priv', `true`],
      ['u, s, priv', `true`],
    ],
  ],
  [
    'has_table_privilege',
    [
      ['t, priv', `true`],
      ['u, t, priv', `true`],
    ],
  ],
  [
    'has_column_privilege',
    [
      ['t, c, priv', `true`],
      ['u, t, c, priv', `true`],
    ],
  ],
  [
    'has_function_privilege',
    [
      ['f, priv', `true`],
      ['u, f, priv', `true`],
    ],
  ],
  ['has_sequence_privilege', [['s, priv', `true`]]],
  ['has_any_column_privilege', [['t, priv', `true`]]],
  [
    'pg_has_role',
    [
      ['r, priv', `true`],
      ['u, r, priv', `true`],
    ],
  ],
  ['array_upper', [['arr, dim', `CASE WHEN dim = 1 AND len(arr) > 0 THEN len(arr) END`]]],
  ['array_lower', [['arr, dim', `CASE WHEN dim = 1 AND len(arr) > 0 THEN 1 END`]]],
  ['array_length', [['arr, dim', `CASE WHEN dim = 1 AND len(arr) > 0 THEN len(arr) END`]]],
  // Lower-case hex digits, and an integer's 32 bits (DuckDB's hex() prints upper case and sign-extends to 64).
  [
    'to_hex',
    [
      ['x INTEGER', `lower(hex(CAST(x AS BIGINT) & 4294967295))`],
      ['x BIGINT', `lower(hex(x))`],
    ],
  ],
  // A string's bytes; DuckDB's octet_length() takes only blobs and bit strings.
  [
    'octet_length',
    [
      ['x VARCHAR', `strlen(x)`],
      ['x BLOB', `system.main.octet_length(x)`],
    ],
  ],
  // Every element of a (one-dimensional) array; DuckDB's cardinality() takes only maps.
  ['cardinality', [['arr', `CAST(len(arr) AS INTEGER)`]]],
  ['current_schema', [['', `(SELECT CASE WHEN cot_s = 'main' THEN 'public' ELSE cot_s END FROM (SELECT system.main.current_schema() AS cot_s))`]]],
  [
    'current_schemas',
    [
      [
        'include_implicit',
        `list_transform(CASE WHEN include_implicit THEN system.main.current_schemas(true) ELSE system.main.current_schemas(false) END, s -> CASE WHEN s = 'main' THEN 'public' ELSE s END)`,
      ],
    ],
  ],
  // No subquery: clients call it inside table functions' arguments (Grafana's generate_series over the search_path).
  [
    'current_setting',
    [
      ['setting_name', SETTING_VALUE],
      ['setting_name, missing_ok', SETTING_VALUE],
    ],
  ],
  ['pg_postmaster_start_time', [['', `CAST(get_current_timestamp() AS TIMESTAMPTZ)`]]],
  ['txid_current', [['', `CAST(1 AS BIGINT)`]]],
  ['pg_is_in_recovery', [['', `false`]]],
  ['quote_ident', [['s', `CASE WHEN regexp_full_match(s, '[a-z_][a-z0-9_$]*') THEN s ELSE '"' || replace(s, '"', '""') || '"' END`]]],
  // PostgreSQL's format(): %s, %I (identifier) and %L (literal), for up to four arguments (Metabase's %I.%I).
  [
    'cot_format_arg',
    [
      [
        'fmt, k, v',
        `CASE regexp_extract_all(fmt, '%([sIL])', 1)[k]
       WHEN 'I' THEN ${P}.quote_ident(CAST(v AS VARCHAR))
       WHEN 'L' THEN CASE WHEN v IS NULL THEN 'NULL' ELSE '''' || replace(CAST(v AS VARCHAR), '''', '''''') || '''' END
       ELSE coalesce(CAST(v AS VARCHAR), '') END`,
      ],
    ],
  ],
  [
    'format',
    [
      ['fmt', 'fmt'],
      ['fmt, a1', `printf(regexp_replace(fmt, '%[sIL]', '%s', 'g'), ${P}.cot_format_arg(fmt, 1, a1))`],
      ['fmt, a1, a2', `printf(regexp_replace(fmt, '%[sIL]', '%s', 'g'), ${P}.cot_format_arg(fmt, 1, a1), ${P}.cot_format_arg(fmt, 2, a2))`],
      [
        'fmt, a1, a2, a3',
        `printf(regexp_replace(fmt, '%[sIL]', '%s', 'g'), ${P}.cot_format_arg(fmt, 1, a1), ${P}.cot_format_arg(fmt, 2, a2), ${P}.cot_format_arg(fmt, 3, a3))`,
      ],
      [
        'fmt, a1, a2, a3, a4',
        `printf(regexp_replace(fmt, '%[sIL]', '%s', 'g'), ${P}.cot_format_arg(fmt, 1, a1), ${P}.cot_format_arg(fmt, 2, a2), ${P}.cot_format_arg(fmt, 3, a3), ${P}.cot_format_arg(fmt, 4, a4))`,
      ],
    ],
  ],
  [
    'parse_ident',
    [['qualified', `list_transform(string_split(qualified, '.'), cot_p -> CASE WHEN cot_p LIKE '"%' THEN trim(cot_p, '"') ELSE lower(cot_p) END)`]],
  ],
  [
    // The sequence a column's default draws from (a serial or identity column), schema-qualified.
    'pg_get_serial_sequence',
    [
      [
        'tbl, col',
        // The map of every serial column's sequence (cot_serials), and a key that names each argument once: DuckDB
        // copies a macro's argument into every place that names it.
        `(SELECT map_from_entries(list((cot_k, cot_v))) FROM ${P}.cot_serials)[
         list_transform([${P}.parse_ident(tbl)], cot_p -> CASE WHEN len(cot_p) = 1 THEN '' ELSE CASE cot_p[-2] WHEN 'public' THEN 'main' ELSE cot_p[-2] END || '.' END
           || lower(cot_p[-1]))[1] || '.' || col]`,
      ],
    ],
  ],
  ['pg_get_partkeydef', [['rel_oid', `CAST(NULL AS VARCHAR)`]]],
  // cotwire keeps no ACLs: every object has its owner's default privileges, which pg_dump then leaves out.
  [
    'pg_options_to_table',
    [
      [
        'opts',
        `TABLE SELECT split_part(cot_o, '=', 1) AS option_name, substr(cot_o, strpos(cot_o, '=') + 1) AS option_value FROM (SELECT unnest(opts) AS cot_o)`,
      ],
    ],
  ],
  // quote_literal: E'' when the text holds a backslash, as PostgreSQL writes it.
  [
    'quote_literal',
    [
      [
        'v',
        `CASE WHEN CAST(v AS VARCHAR) IS NULL THEN NULL WHEN strpos(CAST(v AS VARCHAR), '\\') > 0
           THEN 'E''' || replace(replace(CAST(v AS VARCHAR), '\\', '\\\\'), '''', '''''') || ''''
           ELSE '''' || replace(CAST(v AS VARCHAR), '''', '''''') || '''' END`,
      ],
    ],
  ],
  // No table is partitioned: a relation's only ancestor is itself (psql 15's \d asks for foreign keys this way).
  ['pg_partition_ancestors', [['rel', `CAST(rel AS BIGINT)`]]],
  ['pg_partition_root', [['rel', `CAST(rel AS BIGINT)`]]],
  ['array_remove', [['arr, elem', `list_filter(arr, cot_x -> cot_x IS DISTINCT FROM elem)`]]],
  ['acldefault', [['objtype, owner_oid', `CAST(NULL AS VARCHAR[])`]]],
  [
    'pg_get_triggerdef',
    [
      ['trigger_oid', `CAST(NULL AS VARCHAR)`],
      ['trigger_oid, pretty', `CAST(NULL AS VARCHAR)`],
    ],
  ],
  [
    'pg_get_ruledef',
    [
      ['rule_oid', `CAST(NULL AS VARCHAR)`],
      ['rule_oid, pretty', `CAST(NULL AS VARCHAR)`],
    ],
  ],
  ['pg_tablespace_location', [['ts_oid', `''`]]],
  // Relations by name and by OID, as maps a query builds once: a lookup per row is then a function of the row
  // (a subquery per row cost DuckDB a join to plan and run, per use, and put the rows out of their order).
  [
    'cot_regclass_in',
    [
      [
        'rel',
        `(SELECT map_from_entries(list((cot_k, cot_o))) FROM (SELECT cot_k, first(cot_o) AS cot_o FROM (
           SELECT cot_n.nspname || '.' || cot_c.relname AS cot_k, cot_c.oid AS cot_o FROM ${P}.pg_class cot_c JOIN ${P}.pg_namespace cot_n ON cot_n.oid = cot_c.relnamespace
           UNION ALL SELECT cot_c.relname, cot_c.oid FROM ${P}.pg_class cot_c) GROUP BY cot_k))[
         list_transform([CAST(rel AS VARCHAR)], cot_r -> CASE WHEN contains(cot_r, '.')
           THEN lower(trim(split_part(cot_r, '.', 1), '"')) || '.' || trim(split_part(cot_r, '.', 2), '"')
           WHEN cot_r LIKE '"%' THEN trim(cot_r, '"') ELSE lower(cot_r) END)[1]]`,
      ],
    ],
  ],
  [
    'cot_regclass_out',
    [
      [
        'rel_oid',
        `(SELECT map_from_entries(list((cot_o, cot_r))) FROM (SELECT oid AS cot_o, first(relname) AS cot_r FROM ${P}.cot_relnames GROUP BY oid))[CAST(rel_oid AS BIGINT)]`,
      ],
    ],
  ],
  // A type's name as regtype reads it: pg_catalog. and quotes dropped ('"pg_catalog"."bool"', TypeORM's), the grammar's aliases resolved.
  [
    'cot_type_name',
    [
      [
        't',
        `CASE replace(regexp_replace(lower(trim(CAST(t AS VARCHAR))), '^"?pg_catalog"?\\s*\\.\\s*', ''), '"', '')
           WHEN 'int' THEN 'int4' WHEN 'smallint' THEN 'int2' WHEN 'bigint' THEN 'int8' WHEN 'decimal' THEN 'numeric'
           WHEN 'float' THEN 'float8' WHEN 'float4' THEN 'float4' WHEN 'char' THEN 'bpchar'
           ELSE replace(regexp_replace(lower(trim(CAST(t AS VARCHAR))), '^"?pg_catalog"?\\s*\\.\\s*', ''), '"', '') END`,
      ],
    ],
  ],
  [
    'jsonb_typeof',
    [
      [
        'j',
        `CASE WHEN j IS NULL THEN NULL ELSE CASE json_type(CAST(j AS JSON)) WHEN 'OBJECT' THEN 'object' WHEN 'ARRAY' THEN 'array'
           WHEN 'VARCHAR' THEN 'string' WHEN 'BOOLEAN' THEN 'boolean' WHEN 'NULL' THEN 'null' ELSE 'number' END END`,
      ],
    ],
  ],
  ['json_typeof', [['j', `${P}.jsonb_typeof(j)`]]],
  [
    'cot_regtype_in',
    [
      [
        'type_name',
        `(SELECT first(cot_t.oid) FROM ${P}.cot_types cot_t WHERE cot_t.typname = ${P}.cot_type_name(type_name) OR cot_t.display = ${P}.cot_type_name(type_name))`,
      ],
    ],
  ],
  ['cot_regtype_out', [['type_oid', `${P}.format_type(type_oid, -1)`]]],
  // pg_type's regproc columns (typinput ...) hold function names, so a regproc is compared as its name.
  ['cot_regproc_in', [['fn', `lower(CAST(fn AS VARCHAR))`]]],
  [
    'cot_regproc_out',
    [
      [
        'fn_oid',
        `CASE WHEN try_cast(fn_oid AS BIGINT) IS NULL THEN CAST(fn_oid AS VARCHAR)
       ELSE (SELECT first(cot_f.function_name) FROM ${P}.cot_functions cot_f WHERE cot_f.oid = try_cast(fn_oid AS BIGINT)) END`,
      ],
    ],
  ],
  ['cot_regnamespace_in', [['nsp', `(SELECT first(cot_n.oid) FROM ${P}.pg_namespace cot_n WHERE cot_n.nspname = CAST(nsp AS VARCHAR))`]]],
  ['cot_regnamespace_out', [['nsp_oid', `(SELECT first(cot_n.nspname) FROM ${P}.pg_namespace cot_n WHERE cot_n.oid = nsp_oid)`]]],
  ['cot_regrole_in', [['r', `CAST(${OID.owner} AS BIGINT)`]]],
  ['cot_regrole_out', [['r', `current_user()`]]],
  ['_pg_expandarray', [['arr', `list_transform(generate_series(1, len(arr)), i -> {'x': arr[i], 'n': i})`]]],
  // PostgreSQL's: each word's first letter upper case, the rest lower; words are runs of letters and digits.
  [
    'initcap',
    [
      [
        's',
        `CASE WHEN s IS NULL THEN NULL ELSE array_to_string(list_transform(range(length(CAST(s AS VARCHAR))), cot_i ->
         CASE WHEN cot_i = 0 OR NOT regexp_matches(CAST(s AS VARCHAR)[cot_i], '^[\\pL\\pN]$')
           THEN upper(CAST(s AS VARCHAR)[cot_i + 1]) ELSE lower(CAST(s AS VARCHAR)[cot_i + 1]) END), '') END`,
      ],
    ],
  ],
  // The wall clock, read at each call (now() and current_timestamp are the transaction's start);
  // cot_clock_micros is registered by the engine (engines/duckdb/adapter/engine.ts).
  ['clock_timestamp', [['', `CAST(system.main.make_timestamp(CAST(system.main.cot_clock_micros() AS BIGINT)) AS TIMESTAMPTZ)`]]],
  // date_bin(stride, source, origin): DuckDB's time_bucket bins the same way from the same origin (without one, from 2001-01-01, as time_bucket does).
  [
    'date_bin',
    [
      ['stride, source', `time_bucket(stride, source, TIMESTAMP '2001-01-01 00:00:00')`],
      ['stride, source, origin', `time_bucket(stride, source, origin)`],
    ],
  ],
  // PostgreSQL 15's keywords (pg-keywords.ts), as pg_get_keywords() lists them.
  ['pg_get_keywords', [['', `TABLE SELECT word, catcode, barelabel, catdesc, baredesc FROM ${P}.cot_keywords ORDER BY n`]]],
  ...UUID_FUNCTIONS,
  // pgcrypto's digest() for the hashes DuckDB has.
  [
    'digest',
    [
      [
        'data, hash_type',
        `unhex(CASE lower(hash_type) WHEN 'md5' THEN md5(data) WHEN 'sha1' THEN sha1(data) WHEN 'sha256' THEN sha256(data)
           ELSE CAST(error('Cannot use "' || hash_type || '": No such hash algorithm') AS VARCHAR) END)`,
      ],
    ],
  ],
  // substring(s FROM 'pattern'): the first match of a POSIX regular expression, or of its first parenthesised
  // part (rewrite/functions.ts chooses which by the pattern); NULL when nothing matches, as in PostgreSQL.
  ['cot_substring_match', [['s, pattern', `CASE WHEN regexp_matches(s, pattern) THEN regexp_extract(s, pattern, 0) END`]]],
  ['cot_substring_group', [['s, pattern', `CASE WHEN regexp_matches(s, pattern) THEN regexp_extract(s, pattern, 1) END`]]],
  // A text cast to a timestamp, with what PostgreSQL reads and DuckDB does not (rewrite/literals.ts): an offset after
  // a space, Z after a space, and a time without seconds before an offset. Other types are cast as they are.
  [
    'cot_timestamptz',
    [
      ['x VARCHAR', `CAST(${TIMESTAMP_TEXT} AS TIMESTAMPTZ)`],
      ['x', 'CAST(x AS TIMESTAMPTZ)'],
    ],
  ],
  [
    'cot_timestamp',
    [
      ['x VARCHAR', `CAST(${TIMESTAMP_TEXT} AS TIMESTAMP)`],
      ['x', 'CAST(x AS TIMESTAMP)'],
    ],
  ],
];

export function createMacro([name, overloads]: MacroDef): string {
  return `CREATE MACRO ${P}.${name}${overloads.map(([params, body]) => `(${params}) AS ${body}`).join(', ')}`;
}

/** Macros whose bodies read catalog views are created after the views; the rest before, for the views to use. */
export const readsViews = (m: MacroDef): boolean =>
  m[1].some(([, body]) => [`${P}.pg_`, `${P}.cot_functions`, `${P}.cot_indexes`, `${P}.cot_constraints`, `${P}.cot_relnames`].some((v) => body.includes(v)));

/** Functions of the catalog layer, by name: a client's call to one of them (qualified or not) reaches cotwire's. */
export const CATALOG_FUNCTIONS: ReadonlySet<string> = new Set(MACROS.map(([name]) => name).filter((n) => !n.startsWith('cot_')));
