import { viewDefinitionSql } from './view-definition.js';
import { PG_CHAR_VALUES } from '../../../protocol/type-oids.js';
import { COMPAT_CATALOG, empty, HIDDEN_DB, INFORMATION_SCHEMA, OID, P, PG_SCHEMA, q, SETTINGS, values } from './catalog-sql.js';
import { AVAILABLE_EXTENSIONS, DECLARED_COLUMNS, DECLARED_CONSTRAINTS, DECLARED_EXTENSIONS, DECLARED_SETUP } from './declared.js';
import { KEYS_MIRROR, KEYS_MIRROR_SETUP, KEYS_SCHEMA } from './foreign-keys.js';
import { informationViews } from './information-schema.js';
import { createMacro, MACROS, readsViews } from './pg-functions.js';
import { ARRAY_OIDS, BTREE_OPCLASSES, BTREE_OPFAMILIES, DUCKDB_TYPE_OIDS, PG_TYPES, pgTypeLength } from './pg-types.js';
import { PG_KEYWORDS } from './pg-keywords.js';

export { CATALOG_FUNCTIONS } from './pg-functions.js';
export { INFORMATION_RELATIONS } from './information-schema.js';
export { COMPAT_CATALOG, INFORMATION_SCHEMA, PG_SCHEMA } from './catalog-sql.js';

/**
 * The PostgreSQL catalog that clients query, as DuckDB views over DuckDB's
 * own catalog (duckdb_tables(), duckdb_columns(), ...). DuckDB reserves the
 * names pg_catalog and information_schema in every database, so the views
 * live in a small in-memory database attached at start-up, and the rewriter
 * (rewrite.ts) points clients' references at them. The views are bound when
 * a query runs, so each client sees its own temporary objects and every
 * change to the schema at once. A copy of them reads tables that hold the
 * costly ones' rows between changes to the schema (snapshot.ts), which a
 * connection reads when the tables show what the views would.
 */

/** Relations of pg_catalog, with PostgreSQL's OIDs where clients use them (`'pg_class'::regclass`). */
const CATALOG_RELATION_OIDS: Readonly<Record<string, number>> = {
  pg_type: 1247,
  pg_attribute: 1249,
  pg_proc: 1255,
  pg_class: 1259,
  pg_attrdef: 2604,
  pg_constraint: 2606,
  pg_index: 2610,
  pg_namespace: 2615,
  pg_description: 2609,
  pg_database: 1262,
  pg_authid: 1260,
  pg_am: 2601,
  pg_extension: 3079,
  pg_trigger: 2620,
  pg_inherits: 2611,
  pg_policy: 3256,
  pg_collation: 3456,
  pg_enum: 3501,
  pg_range: 3541,
  pg_depend: 2608,
  pg_tablespace: 1213,
  pg_auth_members: 1261,
  pg_language: 2612,
  pg_operator: 2617,
  pg_rewrite: 2618,
  pg_statistic_ext: 3381,
  pg_publication: 6104,
  pg_publication_rel: 6106,
  pg_publication_namespace: 6237,
  pg_foreign_table: 3118,
  pg_foreign_server: 1417,
  pg_foreign_data_wrapper: 2328,
  pg_event_trigger: 3466,
  pg_partitioned_table: 3350,
  pg_cast: 2605,
  pg_shdescription: 2396,
  pg_init_privs: 3394,
  pg_default_acl: 826,
  pg_sequence: 2224,
  pg_transform: 3576,
  pg_conversion: 2607,
  pg_opclass: 2616,
  pg_opfamily: 2753,
  pg_amop: 2602,
  pg_amproc: 2603,
  pg_ts_parser: 3601,
  pg_ts_template: 3764,
  pg_ts_dict: 3600,
  pg_ts_config: 3602,
  pg_aggregate: 2600,
  pg_largeobject_metadata: 2995,
  pg_subscription: 6100,
  pg_user_mapping: 1418,
  pg_seclabel: 3596,
  pg_seclabels: 12030,
  pg_shseclabel: 3592,
  pg_roles: 12001,
  pg_user: 12002,
  pg_tables: 12003,
  pg_views: 12004,
  pg_indexes: 12005,
  pg_settings: 12006,
  pg_sequences: 12007,
  pg_matviews: 12008,
  pg_stat_activity: 12009,
  pg_stat_user_tables: 12010,
  pg_statio_user_tables: 12011,
  pg_stat_all_tables: 12031,
  pg_statio_all_tables: 12032,
  pg_policies: 12033,
  pg_locks: 12012,
  pg_prepared_statements: 12013,
  pg_stat_database: 12014,
  pg_shdepend: 1214,
  pg_db_role_setting: 2964,
  pg_timezone_names: 12015,
  pg_available_extensions: 12016,
  pg_stat_user_indexes: 12017,
};

/** Every pg_catalog relation cotwire presents. */
export const CATALOG_RELATIONS: ReadonlySet<string> = new Set(Object.keys(CATALOG_RELATION_OIDS));

/** The OID of a pg_catalog relation: what its rows' tableoid system column holds. */
export const catalogRelationOid = (name: string): number | undefined => CATALOG_RELATION_OIDS[name];

/** pg_get_keywords()'s catdesc of each category. */
const KEYWORD_CATEGORIES = {
  U: 'unreserved',
  C: 'unreserved (cannot be function or type name)',
  T: 'reserved (can be function or type name)',
  R: 'reserved',
} as const;

/** A partial unique index's element as DuckDB prints it: `(CASE  WHEN (predicate) THEN (column) ELSE NULL END)`. */
const PARTIAL_ELEMENT = q('^\\(CASE\\s+WHEN \\((.*)\\) THEN \\((.*)\\) ELSE NULL END\\)$');

/** A foreign key's action, as pg_get_constraintdef prints it after the key (nothing for NO ACTION). */
const keyAction = (column: string, on: string): string =>
  `CASE coalesce(${column}, 'a') WHEN 'r' THEN ' ON ${on} RESTRICT' WHEN 'c' THEN ' ON ${on} CASCADE' WHEN 'n' THEN ' ON ${on} SET NULL' WHEN 'd' THEN ' ON ${on} SET DEFAULT' ELSE '' END`;

/**
 * DuckDB's constraints with their names as cot_conname gives them, the declared names joined once
 * (the macro's subquery, run per constraint, cost a scan of the declarations per constraint).
 */
function namedKeys(): string {
  // DuckDB numbers constraints across every table it lists (a table's come after all earlier tables'), so its
  // constraint_index changes with other tables and, past 500, met the foreign keys' numbers below (two constraints of
  // one OID, and pg_dump's scalar subqueries failed): each table's own are numbered from 0 here.
  return `CREATE VIEW ${P}.cot_keys AS
       SELECT k.* EXCLUDE (constraint_index),
         CAST(row_number() OVER (PARTITION BY k.table_oid ORDER BY k.constraint_index) - 1 AS BIGINT) AS constraint_index, coalesce(CASE WHEN k.database_name <> 'temp' THEN dn.name END,
           CASE k.constraint_type WHEN 'PRIMARY KEY' THEN k.table_name || '_pkey'
             WHEN 'FOREIGN KEY' THEN k.table_name || '_' || array_to_string(k.constraint_column_names, '_') || '_fkey'
             WHEN 'UNIQUE' THEN k.table_name || '_' || array_to_string(k.constraint_column_names, '_') || '_key'
             ELSE k.constraint_name END) AS conname
       FROM duckdb_constraints() k
         LEFT JOIN (SELECT lower(dc.schema_name) AS sch, lower(dc.table_name) AS tbl, dc.contype, dc.columns, first(dc.name) AS name
                    FROM ${DECLARED_CONSTRAINTS} dc GROUP BY ALL) dn
           ON dn.sch = lower(k.schema_name) AND dn.tbl = lower(k.table_name)
             AND dn.columns = lower(array_to_string(CASE WHEN k.constraint_type = 'CHECK' THEN list_sort(list_transform(k.constraint_column_names, cot_c -> lower(cot_c))) ELSE k.constraint_column_names END, ','))
             AND dn.contype = CASE k.constraint_type WHEN 'PRIMARY KEY' THEN 'p' WHEN 'UNIQUE' THEN 'u' WHEN 'FOREIGN KEY' THEN 'f' WHEN 'CHECK' THEN 'c' END
       WHERE k.database_name NOT IN ${HIDDEN_DB} AND k.schema_name <> ${q(KEYS_SCHEMA)}
       UNION ALL BY NAME
       -- The foreign keys the server keeps (foreign-keys.ts), shaped as DuckDB's, with their actions.
       SELECT t.database_name, t.database_oid, t.schema_name, t.schema_oid, t.table_name, t.table_oid,
         CAST(500 + f.ordinal AS BIGINT) AS constraint_index, 'FOREIGN KEY' AS constraint_type,
         CAST(NULL AS VARCHAR) AS constraint_text, CAST(NULL AS VARCHAR) AS expression,
         list_transform(f.columns, cot_x -> CAST(list_position(tc.names, lower(cot_x)) - 1 AS BIGINT)) AS constraint_column_indexes,
         f.columns AS constraint_column_names, f.name AS constraint_name, f.ref_table AS referenced_table,
         f.ref_columns AS referenced_column_names, f.name AS conname, f.on_update, f.on_delete
       FROM ${KEYS_MIRROR} f
         JOIN duckdb_tables() t ON t.database_name = f.database_name AND lower(t.schema_name) = lower(f.schema_name) AND lower(t.table_name) = lower(f.table_name)
         LEFT JOIN (SELECT c.table_oid, list(lower(c.column_name) ORDER BY c.column_index) AS names FROM duckdb_columns() c GROUP BY c.table_oid) tc
           ON tc.table_oid = t.table_oid`;
}

/**
 * Indexes: DuckDB's own, and the ones that back PRIMARY KEY and UNIQUE
 * constraints (as in PostgreSQL).
 */
function indexesView(): string {
  return `CREATE VIEW ${P}.cot_indexes AS
       WITH raw AS (
         SELECT i.*, CAST(i.expressions AS VARCHAR[]) AS raw_exprs FROM duckdb_indexes() i
         WHERE i.database_name NOT IN ${HIDDEN_DB} AND i.schema_name <> ${q(KEYS_SCHEMA)}),
       -- A partial unique index is each column's value where its predicate holds (planner.ts, partialIndex):
       -- its columns and its predicate, as PostgreSQL keeps them.
       ix AS (
         SELECT raw.*, list_transform(raw_exprs, e -> coalesce(nullif(regexp_extract(e, ${PARTIAL_ELEMENT}, 2), ''), e)) AS exprs,
           nullif(regexp_extract(raw_exprs[1], ${PARTIAL_ELEMENT}, 1), '') AS predicate
         FROM raw),
       cols AS (
         SELECT e.index_oid, list(coalesce(c.column_index, 0) ORDER BY e.pos) AS indkey
         FROM (SELECT ix.index_oid, ix.table_oid, unnest(ix.exprs) AS expr, generate_subscripts(ix.exprs, 1) AS pos FROM ix) e
         LEFT JOIN duckdb_columns() c ON c.table_oid = e.table_oid AND c.column_name = trim(e.expr, '"')
         GROUP BY e.index_oid)
       SELECT ix.index_oid AS indexrelid, ix.table_oid AS indrelid, ix.index_name AS relname, ns.oid AS relnamespace,
         ix.is_unique AS indisunique, false AS indisprimary, cols.indkey,
         'CREATE ' || CASE WHEN ix.is_unique THEN 'UNIQUE ' ELSE '' END || 'INDEX ' || ix.index_name || ' ON '
           || ns.nspname || '.' || ix.table_name || ' USING btree ('
           || array_to_string(list_transform(ix.exprs, e -> CASE WHEN regexp_full_match(e, '"[a-z_][a-z0-9_$]*"') THEN trim(e, '"') ELSE e END), ', ')
           || ')' || coalesce(' WHERE ' || ix.predicate, '') AS indexdef, ix.predicate
       FROM ix JOIN ${P}.cot_namespaces ns USING (database_name, schema_name) LEFT JOIN cols USING (index_oid)
       UNION ALL
       SELECT CAST(3000000000 + k.table_oid * 1000 + k.constraint_index AS BIGINT), k.table_oid, k.conname,
         ns.oid, true, k.constraint_type = 'PRIMARY KEY',
         list_transform(k.constraint_column_indexes, x -> CAST(x + 1 AS BIGINT)),
         'CREATE UNIQUE INDEX ' || k.conname
           || ' ON ' || ns.nspname || '.' || k.table_name || ' USING btree (' || array_to_string(k.constraint_column_names, ', ') || ')',
         CAST(NULL AS VARCHAR)
       FROM ${P}.cot_keys k JOIN ${P}.cot_namespaces ns USING (database_name, schema_name)
       WHERE k.constraint_type IN ('PRIMARY KEY', 'UNIQUE')`;
}

/** Views, with their query as PostgreSQL prints it (pg_views, pg_get_viewdef): read once per view, not per call. */
function views(): string {
  return `CREATE VIEW ${P}.cot_views AS
       SELECT v.view_oid, v.view_name, v.database_name, v.schema_name, ${viewDefinitionSql('v.sql')} AS definition
       FROM duckdb_views() v WHERE NOT v.internal AND v.database_name NOT IN ${HIDDEN_DB} AND v.schema_name <> ${q(KEYS_SCHEMA)}`;
}

/** Rows that only change with cotwire: extensions, keywords, operator classes. */
function fixedTables(): string[] {
  return [
    // The extensions CREATE EXTENSION takes (declared.ts).
    `CREATE TABLE ${P}.cot_extensions (oid BIGINT, name VARCHAR, version VARCHAR, comment VARCHAR)`,
    `INSERT INTO ${P}.cot_extensions VALUES ${values(Object.entries(AVAILABLE_EXTENSIONS).map(([name, e]) => [e.oid, name, e.version, e.comment]))}`,
    // PostgreSQL's keywords, for pg_get_keywords(), in PostgreSQL's order (n).
    `CREATE TABLE ${P}.cot_keywords (n INTEGER, word VARCHAR, catcode ${CHAR_TYPE}, barelabel BOOLEAN, catdesc VARCHAR, baredesc VARCHAR)`,
    `INSERT INTO ${P}.cot_keywords VALUES ${values(PG_KEYWORDS.map(([word, catcode, bare], n) => [n, word, catcode, bare, KEYWORD_CATEGORIES[catcode], bare ? 'can be bare label' : 'requires AS']))}`,
    // The default btree operator classes and their families (pg_opclass, pg_opfamily, pg_index.indclass).

    `CREATE TABLE ${P}.cot_opclasses (oid BIGINT, opcname VARCHAR, opcfamily BIGINT, opcintype BIGINT)`,
    `INSERT INTO ${P}.cot_opclasses VALUES ${values(BTREE_OPCLASSES.map((o) => [...o]))}`,
    `CREATE TABLE ${P}.cot_opfamilies (oid BIGINT, opfname VARCHAR)`,
    `INSERT INTO ${P}.cot_opfamilies VALUES ${values(BTREE_OPFAMILIES.map((o) => [...o]))}`,
  ];
}

/** Internal building blocks, named `cot_*` so that they never collide with a PostgreSQL name. */
function internals(): string[] {
  const typeRows = PG_TYPES.map((t) => [
    t.oid,
    t.name,
    t.display,
    t.category,
    t.type,
    t.elem,
    t.array,
    t.input,
    t.output,
    t.category === 'A' ? -1 : pgTypeLength(t.oid),
  ]);
  return [
    `CREATE TYPE ${CHAR_TYPE} AS ENUM (${PG_CHAR_VALUES.map(q).join(', ')})`,
    ...fixedTables(),
    `CREATE TABLE ${P}.cot_types (oid BIGINT, typname VARCHAR, display VARCHAR, typcategory VARCHAR, typtype VARCHAR, typelem BIGINT, typarray BIGINT, typinput VARCHAR, typoutput VARCHAR, typlen SMALLINT)`,
    `INSERT INTO ${P}.cot_types VALUES ${values(typeRows)}`,
    // The PostgreSQL OID of each DuckDB type name; agrees with the engine's codecs. Looked up by
    // join (a macro with one WHEN per type costs milliseconds to bind at every use).
    `CREATE TABLE ${P}.cot_type_map (type_key VARCHAR, oid BIGINT, array_oid BIGINT)`,
    `INSERT INTO ${P}.cot_type_map VALUES ${values(
      [...DUCKDB_TYPE_OIDS, ['DECIMAL', 1700] as const, ['STRUCT', 114] as const].map(([n, o]) => [n, o, ARRAY_OIDS.find(([e]) => e === o)?.[1] ?? 114]),
    )}`,
    // The key of a DuckDB type name in cot_type_map: DECIMAL(p,s) → DECIMAL; STRUCT, MAP and UNION travel as json.
    `CREATE MACRO ${P}.cot_type_key(t) AS CASE
       WHEN t LIKE 'DECIMAL(%' THEN 'DECIMAL' WHEN t LIKE 'STRUCT(%' OR t LIKE 'MAP(%' OR t LIKE 'UNION(%' THEN 'STRUCT' ELSE t END`,
    `CREATE MACRO ${P}.cot_element_type(t) AS regexp_replace(t, '(\\[[0-9]*\\])+$', '')`,
    // DECIMAL(38, 9 or more) is unconstrained numeric (see sql/numeric.ts): no type modifier.
    `CREATE MACRO ${P}.cot_typmod(t) AS CASE
       WHEN t LIKE 'DECIMAL(38,%' AND CAST(regexp_extract(t, ',(\\d+)\\)', 1) AS INTEGER) >= 9 THEN -1
       WHEN t LIKE 'DECIMAL(%' THEN (CAST(regexp_extract(t, 'DECIMAL\\((\\d+),', 1) AS INTEGER) * 65536
         + CAST(regexp_extract(t, ',(\\d+)\\)', 1) AS INTEGER) + 4)
       ELSE -1 END`,
    // Columns with their PostgreSQL type: a list is the array of its innermost element's type.
    // ... or the type the client declared where DuckDB keeps only its own (varchar(n), char(n), jsonb: see declared.ts).
    `CREATE VIEW ${P}.cot_columns AS
       SELECT c.*,
         CAST(CASE WHEN d.pg_type = 'varchar' AND c.data_type = 'VARCHAR' THEN 1043 WHEN d.pg_type = 'bpchar' AND c.data_type = 'VARCHAR' THEN 1042
           WHEN d.pg_type = 'jsonb' AND c.data_type = 'JSON' THEN 3802
           WHEN c.data_type LIKE '%]' THEN coalesce(m.array_oid, 114) ELSE coalesce(m.oid, 25) END AS BIGINT) AS type_oid,
         -- A ledger's numeric keeps its DuckDB scale: a dump restored elsewhere prints its values as the hashes read them.
         CAST(CASE WHEN d.pg_type IN ('varchar', 'bpchar') AND c.data_type = 'VARCHAR' THEN d.typmod
           WHEN c.table_name ILIKE '\\_cot%' ESCAPE '\\' AND c.data_type LIKE 'DECIMAL(%' THEN
             CAST(regexp_extract(c.data_type, 'DECIMAL\\((\\d+),', 1) AS INTEGER) * 65536 + CAST(regexp_extract(c.data_type, ',(\\d+)\\)', 1) AS INTEGER) + 4
           ELSE ${P}.cot_typmod(c.data_type) END AS INTEGER) AS typmod,
         -- An identity column (declared.ts): its sequence's default is the identity's, not a default of its own.
         CASE d.pg_type WHEN 'identity always' THEN 'a' WHEN 'identity by default' THEN 'd' ELSE '' END AS identity
       FROM duckdb_columns() c LEFT JOIN ${P}.cot_type_map m ON m.type_key = ${P}.cot_type_key(${P}.cot_element_type(c.data_type))
         LEFT JOIN ${DECLARED_COLUMNS} d ON c.database_name <> 'temp' AND lower(d.schema_name) = lower(c.schema_name)
           AND lower(d.table_name) = lower(c.table_name) AND lower(d.column_name) = lower(c.column_name)
       WHERE c.database_name NOT IN ${HIDDEN_DB} AND c.schema_name <> ${q(KEYS_SCHEMA)}`,
    // Each serial column's sequence, by 'schema.table.column' and by 'table.column' (a temporary table's first), for
    // pg_get_serial_sequence: kept as a table in the snapshot, so that a call plans a lookup, not this query.
    `CREATE VIEW ${P}.cot_serials AS
       WITH cot_q AS (SELECT c.schema_name AS cot_s, lower(c.table_name) || '.' || c.column_name AS cot_k, c.database_name = 'temp' AS cot_t,
           CASE WHEN strpos(regexp_extract(c.column_default, '^nextval\\(''(.*)''\\)$', 1), '.') > 0
             THEN regexp_extract(c.column_default, '^nextval\\(''(.*)''\\)$', 1)
             ELSE CASE WHEN c.schema_name = 'main' THEN 'public' ELSE c.schema_name END || '.' || regexp_extract(c.column_default, '^nextval\\(''(.*)''\\)$', 1) END AS cot_v
         FROM ${P}.cot_columns c WHERE c.column_default LIKE 'nextval(%')
       SELECT cot_k, first(cot_v ORDER BY cot_t DESC) AS cot_v FROM (
         SELECT cot_s || '.' || cot_k AS cot_k, cot_v, cot_t FROM cot_q UNION ALL SELECT cot_k, cot_v, cot_t FROM cot_q) GROUP BY cot_k`,
    // Schemas: DuckDB's main is PostgreSQL's public; temporary objects live in pg_temp.
    `CREATE VIEW ${P}.cot_namespaces AS
       SELECT database_name, schema_name,
         CAST(CASE WHEN database_name = 'temp' THEN ${OID.pgTemp} WHEN schema_name = 'main' THEN ${OID.public} ELSE oid END AS BIGINT) AS oid,
         CASE WHEN database_name = 'temp' THEN 'pg_temp_3' WHEN schema_name = 'main' THEN 'public' ELSE schema_name END AS nspname,
         comment
       FROM duckdb_schemas()
       WHERE database_name NOT IN ${HIDDEN_DB} AND schema_name NOT IN ('pg_catalog', 'information_schema', ${q(KEYS_SCHEMA)})
         -- PostgreSQL creates a connection's pg_temp schema with its first temporary object.
         AND (database_name <> 'temp' OR EXISTS (SELECT 1 FROM duckdb_tables() WHERE database_name = 'temp')
              OR EXISTS (SELECT 1 FROM duckdb_views() WHERE database_name = 'temp' AND NOT internal))`,
    views(),
    // Indexes: DuckDB's own, and the ones that back PRIMARY KEY and UNIQUE constraints (as in PostgreSQL).
    // A constraint's name, and its index's: the one the client gave (declared.ts), else PostgreSQL's
    // default, as DuckDB keeps no constraint names of its own.
    `CREATE MACRO ${P}.cot_conname(db, sch, tbl, kind, cols, own) AS coalesce(
       (SELECT first(dc.name) FROM ${DECLARED_CONSTRAINTS} dc WHERE db <> 'temp' AND lower(dc.schema_name) = lower(sch) AND lower(dc.table_name) = lower(tbl)
          AND dc.contype = CASE kind WHEN 'PRIMARY KEY' THEN 'p' WHEN 'UNIQUE' THEN 'u' WHEN 'FOREIGN KEY' THEN 'f' END
          AND dc.columns = lower(array_to_string(cols, ','))),
       CASE kind WHEN 'PRIMARY KEY' THEN tbl || '_pkey'
         WHEN 'FOREIGN KEY' THEN tbl || '_' || array_to_string(cols, '_') || '_fkey'
         WHEN 'UNIQUE' THEN tbl || '_' || array_to_string(cols, '_') || '_key'
         ELSE own END)`,
    namedKeys(),
    indexesView(),
    // The referenced table and key of a foreign key are joined, not looked up per constraint.
    `CREATE VIEW ${P}.cot_constraints AS
       WITH tabs AS (SELECT t.table_oid, t.database_name, t.schema_name, t.table_name FROM duckdb_tables() t),
       keys AS (SELECT rt.database_name, rt.schema_name, rt.table_name, r.constraint_column_names,
           first(3000000000 + r.table_oid * 1000 + r.constraint_index) AS index_oid
         FROM ${P}.cot_keys r JOIN tabs rt ON rt.table_oid = r.table_oid
         WHERE r.constraint_type IN ('PRIMARY KEY', 'UNIQUE') GROUP BY ALL)
       SELECT CAST(2000000000 + k.table_oid * 1000 + k.constraint_index AS BIGINT) AS oid, k.conname,
         ns.oid AS connamespace,
         CASE k.constraint_type WHEN 'PRIMARY KEY' THEN 'p' WHEN 'UNIQUE' THEN 'u' WHEN 'CHECK' THEN 'c' ELSE 'f' END AS contype,
         k.table_oid AS conrelid,
         -- A foreign key's index is the referenced key's, as in PostgreSQL (pgjdbc's getExportedKeys joins on it).
         CAST(CASE WHEN k.constraint_type IN ('PRIMARY KEY', 'UNIQUE') THEN 3000000000 + k.table_oid * 1000 + k.constraint_index
           WHEN k.constraint_type = 'FOREIGN KEY' THEN coalesce(rk.index_oid, 0)
           ELSE 0 END AS BIGINT) AS conindid,
         coalesce(rt.table_oid, 0) AS confrelid,
         list_transform(k.constraint_column_indexes, x -> CAST(x + 1 AS SMALLINT)) AS conkey,
         k.referenced_table, k.referenced_column_names, k.constraint_column_names, k.expression,
         CASE k.constraint_type
           WHEN 'PRIMARY KEY' THEN 'PRIMARY KEY (' || array_to_string(k.constraint_column_names, ', ') || ')'
           WHEN 'UNIQUE' THEN 'UNIQUE (' || array_to_string(k.constraint_column_names, ', ') || ')'
           WHEN 'CHECK' THEN 'CHECK (' || k.expression || ')'
           ELSE 'FOREIGN KEY (' || array_to_string(k.constraint_column_names, ', ') || ') REFERENCES '
             || k.referenced_table || '(' || array_to_string(k.referenced_column_names, ', ') || ')'
             || ${keyAction('k.on_update', 'UPDATE')} || ${keyAction('k.on_delete', 'DELETE')} END AS condef,
         k.on_update, k.on_delete
       FROM ${P}.cot_keys k JOIN ${P}.cot_namespaces ns USING (database_name, schema_name)
         LEFT JOIN tabs rt ON k.constraint_type = 'FOREIGN KEY' AND rt.database_name = k.database_name AND rt.schema_name = k.schema_name
           AND rt.table_name = k.referenced_table
         LEFT JOIN keys rk ON k.constraint_type = 'FOREIGN KEY' AND rk.database_name = k.database_name AND rk.schema_name = k.schema_name
           AND rk.table_name = k.referenced_table AND rk.constraint_column_names = k.referenced_column_names
       WHERE k.constraint_type IN ('PRIMARY KEY', 'UNIQUE', 'CHECK', 'FOREIGN KEY')
         -- The length check that stands in for varchar(n) and char(n) (rewrite.ts) is the type, not a constraint.
         AND NOT (k.constraint_type = 'CHECK' AND regexp_full_match(k.expression, '\\(length\\((rtrim\\()?"?[^()"]*"?\\)?\\) <= \\d+\\)')
           AND len(k.constraint_column_names) = 1 AND EXISTS (SELECT 1 FROM ${DECLARED_COLUMNS} d
             WHERE lower(d.schema_name) = lower(k.schema_name) AND lower(d.table_name) = lower(k.table_name)
               AND lower(d.column_name) = lower(k.constraint_column_names[1]) AND d.pg_type IN ('varchar', 'bpchar')
               AND k.expression LIKE '%<= ' || CAST(d.typmod - 4 AS VARCHAR) || ')'))`,
    `CREATE VIEW ${P}.cot_functions AS
       SELECT CAST(f.function_oid * 64 + row_number() OVER (PARTITION BY f.function_oid ORDER BY f.parameters) AS BIGINT) AS oid, f.*,
         CAST(CASE WHEN f.internal OR f.database_name IN ('system', 'temp', ${q(COMPAT_CATALOG)}) THEN ${OID.pgCatalog}
           ELSE coalesce((SELECT ns.oid FROM ${P}.cot_namespaces ns WHERE ns.database_name = f.database_name AND ns.schema_name = f.schema_name), ${OID.public}) END AS BIGINT) AS nspoid
       FROM duckdb_functions() f
       WHERE f.function_type <> 'pragma' AND f.function_name <> 'cot_role'
         AND NOT (f.database_name = ${q(COMPAT_CATALOG)} AND f.function_name LIKE 'cot\\_%' ESCAPE '\\')
         -- A connection's macro that stands in for a built-in (version(), current_user()) is listed once, as the built-in.
         AND NOT (f.database_name = 'temp' AND f.function_name IN (SELECT b.function_name FROM duckdb_functions() b WHERE b.internal))`,
  ];
}

/**
 * The columns PostgreSQL types oid (or oid[]), per catalog. They are sent as
 * oid, which is UINTEGER in the engine: drivers look types up by OID and
 * some (asyncpg) decode an oid[] without asking the catalog, but not an int8[].
 */
const OID_COLUMNS: Readonly<Record<string, readonly string[]>> = {
  pg_namespace: ['oid', 'nspowner'],
  pg_class: ['oid', 'relnamespace', 'reltype', 'reloftype', 'relowner', 'relam', 'relfilenode', 'reltablespace', 'reltoastrelid', 'relrewrite'],
  pg_attribute: ['attrelid', 'atttypid', 'attcollation'],
  pg_attrdef: ['oid', 'adrelid'],
  pg_type: ['oid', 'typnamespace', 'typowner', 'typrelid', 'typelem', 'typarray', 'typbasetype', 'typcollation'],
  pg_index: ['indexrelid', 'indrelid', 'indcollation[]', 'indclass[]'],
  pg_constraint: ['oid', 'connamespace', 'conrelid', 'contypid', 'conindid', 'conparentid', 'confrelid'],
  pg_description: ['objoid', 'classoid'],
  pg_proc: ['oid', 'pronamespace', 'proowner', 'prolang', 'provariadic', 'prorettype', 'proargtypes[]', 'proallargtypes[]'],
  pg_database: ['oid', 'datdba', 'dattablespace'],
  pg_roles: ['oid'],
  pg_authid: ['oid'],
  pg_am: ['oid'],
  pg_tablespace: ['oid', 'spcowner'],
  pg_collation: ['oid', 'collnamespace', 'collowner'],
  pg_language: ['oid', 'lanowner'],
  pg_extension: ['oid', 'extowner', 'extnamespace'],
  pg_inherits: ['inhrelid', 'inhparent'],
  pg_opclass: ['oid', 'opcmethod', 'opcnamespace', 'opcowner', 'opcfamily', 'opcintype', 'opckeytype'],
  pg_opfamily: ['oid', 'opfmethod', 'opfnamespace', 'opfowner'],
  pg_trigger: ['oid', 'tgrelid', 'tgfoid'],
  pg_range: ['rngtypid', 'rngsubtype', 'rngmultitypid', 'rngcollation', 'rngsubopc'],
  pg_enum: ['oid', 'enumtypid'],
  pg_depend: ['classid', 'objid', 'refclassid', 'refobjid'],
  pg_sequence: ['seqrelid', 'seqtypid'],
  pg_policy: ['oid', 'polrelid', 'polroles[]'],
  pg_statistic_ext: ['oid', 'stxrelid', 'stxnamespace', 'stxowner'],
  pg_stat_activity: ['datid', 'usesysid'],
};

/** The columns PostgreSQL types "char" (sent as OID 18; see PG_CHAR_VALUES). */
const CHAR_COLUMNS: Readonly<Record<string, readonly string[]>> = {
  pg_class: ['relpersistence', 'relkind', 'relreplident'],
  pg_attribute: ['attstorage', 'attalign', 'attidentity', 'attgenerated', 'attcompression'],
  pg_type: ['typtype', 'typcategory', 'typdelim', 'typalign', 'typstorage'],
  pg_constraint: ['contype', 'confupdtype', 'confdeltype', 'confmatchtype'],
  pg_proc: ['prokind', 'provolatile', 'proparallel'],
  pg_am: ['amtype'],
  pg_collation: ['collprovider'],
  pg_database: ['datlocprovider'],
  pg_policy: ['polcmd'],
  pg_depend: ['deptype'],
  pg_trigger: ['tgenabled'],
  pg_rewrite: ['ev_type', 'ev_enabled'],
};

const CHAR_TYPE = `${PG_SCHEMA}.cot_char`;

/** A catalog view with PostgreSQL's oid and "char" columns typed as such. */
function oidTyped(statement: string): string {
  const head = /^CREATE VIEW (\S+)\.(\w+) AS\s+/.exec(statement);
  const name = head?.[2] ?? '';
  const oids = OID_COLUMNS[name] ?? [];
  const chars = CHAR_COLUMNS[name] ?? [];
  if (head === null || oids.length + chars.length === 0) return statement;
  const casts = [
    ...oids.map((c) => (c.endsWith('[]') ? `CAST(${c.slice(0, -2)} AS UINTEGER[]) AS ${c.slice(0, -2)}` : `CAST(${c} AS UINTEGER) AS ${c}`)),
    ...chars.map((c) => `CAST(${c} AS ${CHAR_TYPE}) AS ${c}`),
  ];
  return `CREATE VIEW ${head[1] as string}.${head[2] as string} AS SELECT * REPLACE (${casts.join(', ')}) FROM (${statement.slice(head[0].length)})`;
}

/** pg_catalog, as views. Columns follow PostgreSQL 15's catalogs. */
function catalogViews(): string[] {
  const relationRows = Object.entries(CATALOG_RELATION_OIDS).map(([name, oid]) => [oid, name]);
  return [
    `CREATE VIEW ${P}.pg_namespace AS
       SELECT oid, nspname, CAST(${OID.owner} AS BIGINT) AS nspowner, CAST(NULL AS VARCHAR[]) AS nspacl FROM ${P}.cot_namespaces
       UNION ALL SELECT * FROM (VALUES (CAST(${OID.pgCatalog} AS BIGINT), 'pg_catalog', CAST(${OID.owner} AS BIGINT), CAST(NULL AS VARCHAR[])),
         (${OID.informationSchema}, 'information_schema', ${OID.owner}, NULL), (${OID.pgToast}, 'pg_toast', ${OID.owner}, NULL))`,
    `CREATE TABLE ${P}.cot_catalog_relations (oid BIGINT, relname VARCHAR)`,
    `INSERT INTO ${P}.cot_catalog_relations VALUES ${values(relationRows)}`,
    `CREATE VIEW ${P}.pg_class AS
       -- The constraints are read once, and joined (a subquery per table costs a scan of them per table).
       WITH kc AS MATERIALIZED (SELECT k.conrelid, k.contype, k.confrelid FROM ${P}.cot_constraints k WHERE k.contype IN ('c', 'f')),
       checks AS (SELECT kc.conrelid, count(*) AS n FROM kc WHERE kc.contype = 'c' GROUP BY kc.conrelid),
       -- A foreign key is kept by triggers in PostgreSQL (pg_dump reads a table's foreign keys only when it has some).
       triggered AS (SELECT DISTINCT x AS oid FROM (SELECT kc.conrelid AS x FROM kc WHERE kc.contype = 'f'
         UNION ALL SELECT kc.confrelid FROM kc WHERE kc.contype = 'f')),
       rel AS (
         SELECT t.table_oid AS oid, t.table_name AS relname, t.database_name, t.schema_name, 'r' AS relkind, ${OID.heap} AS relam,
           CAST(t.estimated_size AS REAL) AS reltuples, t.index_count > 0 OR t.has_primary_key AS relhasindex,
           t.temporary, t.column_count AS relnatts, coalesce(checks.n, 0) AS relchecks, tr.oid IS NOT NULL AS relhastriggers
         FROM duckdb_tables() t LEFT JOIN checks ON checks.conrelid = t.table_oid LEFT JOIN triggered tr ON tr.oid = t.table_oid
         WHERE t.database_name NOT IN ${HIDDEN_DB} AND t.schema_name <> ${q(KEYS_SCHEMA)}
         UNION ALL
         SELECT v.view_oid, v.view_name, v.database_name, v.schema_name, 'v', 0, 0, false, v.temporary, v.column_count, 0, false
         FROM duckdb_views() v WHERE NOT v.internal AND v.database_name NOT IN ${HIDDEN_DB} AND v.schema_name <> ${q(KEYS_SCHEMA)}
         UNION ALL
         SELECT s.sequence_oid, s.sequence_name, s.database_name, s.schema_name, 'S', 0, 0, false, s.temporary, 3, 0, false
         FROM duckdb_sequences() s WHERE s.database_name NOT IN ${HIDDEN_DB} AND s.schema_name <> ${q(KEYS_SCHEMA)})
       SELECT rel.oid, rel.relname, ns.oid AS relnamespace, CAST(0 AS BIGINT) AS reltype, CAST(0 AS BIGINT) AS reloftype,
         CAST(${OID.owner} AS BIGINT) AS relowner, CAST(rel.relam AS BIGINT) AS relam, rel.oid AS relfilenode, CAST(0 AS BIGINT) AS reltablespace,
         0 AS relpages,
         -- A ledger's rows are every organisation's: a user with an org_id is not told how many (-1: never counted).
         CASE WHEN cot_org_id() IS NOT NULL AND starts_with(lower(rel.relname), '_cot') THEN CAST(-1 AS REAL) ELSE rel.reltuples END AS reltuples, 0 AS relallvisible, CAST(0 AS BIGINT) AS reltoastrelid, rel.relhasindex, false AS relisshared,
         CASE WHEN rel.temporary THEN 't' ELSE 'p' END AS relpersistence, rel.relkind, CAST(rel.relnatts AS SMALLINT) AS relnatts,
         CAST(rel.relchecks AS SMALLINT) AS relchecks, false AS relhasrules, rel.relhastriggers, false AS relhassubclass,
         false AS relrowsecurity, false AS relforcerowsecurity, true AS relispopulated, 'd' AS relreplident, false AS relispartition,
         CAST(0 AS BIGINT) AS relrewrite, CAST(0 AS BIGINT) AS relfrozenxid, CAST(0 AS BIGINT) AS relminmxid,
         CAST(NULL AS VARCHAR[]) AS relacl, CAST(NULL AS VARCHAR[]) AS reloptions, CAST(NULL AS VARCHAR) AS relpartbound
       FROM rel JOIN ${P}.cot_namespaces ns USING (database_name, schema_name)
       UNION ALL
       SELECT i.indexrelid, i.relname, i.relnamespace, 0, 0, ${OID.owner}, ${OID.btree}, i.indexrelid, 0, 0, 0, 0, 0, false, false,
         'p', 'i', CAST(len(i.indkey) AS SMALLINT), 0, false, false, false, false, false, true, 'n', false, 0, 0, 0, NULL, NULL, NULL
       FROM ${P}.cot_indexes i
       UNION ALL
       SELECT r.oid, r.relname, ${OID.pgCatalog}, 0, 0, ${OID.owner}, 0, r.oid, 0, 0, 0, 0, 0, false, false,
         'p', 'v', 0, 0, false, false, false, false, false, true, 'n', false, 0, 0, 0, NULL, NULL, NULL
       FROM ${P}.cot_catalog_relations r`,
    // A relation's OID, name and schema's name: what regclass reads and prints (pg-functions.ts), without
    // pg_class's other columns (a regclass cast per row of a query would compute them per row). The schema
    // is named as cot_namespaces names it.
    `CREATE VIEW ${P}.cot_relnames AS
       SELECT rel.oid, rel.relname,
         CASE WHEN rel.database_name = 'temp' THEN 'pg_temp_3' WHEN rel.schema_name = 'main' THEN 'public' ELSE rel.schema_name END AS nspname
       FROM (SELECT t.table_oid AS oid, t.table_name AS relname, t.database_name, t.schema_name FROM duckdb_tables() t
           UNION ALL SELECT v.view_oid, v.view_name, v.database_name, v.schema_name FROM duckdb_views() v WHERE NOT v.internal
           UNION ALL SELECT s.sequence_oid, s.sequence_name, s.database_name, s.schema_name FROM duckdb_sequences() s
           UNION ALL SELECT i.index_oid, i.index_name, i.database_name, i.schema_name FROM duckdb_indexes() i
           UNION ALL SELECT CAST(3000000000 + k.table_oid * 1000 + k.constraint_index AS BIGINT), k.conname, k.database_name, k.schema_name
             FROM ${P}.cot_keys k WHERE k.constraint_type IN ('PRIMARY KEY', 'UNIQUE')) rel
       WHERE rel.database_name NOT IN ${HIDDEN_DB} AND rel.schema_name <> ${q(KEYS_SCHEMA)} AND rel.schema_name NOT IN ('pg_catalog', 'information_schema')
       UNION ALL SELECT r.oid, r.relname, 'pg_catalog' FROM ${P}.cot_catalog_relations r`,
    `CREATE VIEW ${P}.pg_attribute AS
       SELECT c.table_oid AS attrelid, c.column_name AS attname, c.type_oid AS atttypid,
         CAST(-1 AS INTEGER) AS attstattarget, coalesce(t.typlen, -1) AS attlen, CAST(c.column_index AS SMALLINT) AS attnum,
         CAST(CASE WHEN c.data_type LIKE '%]' THEN 1 ELSE 0 END AS INTEGER) AS attndims, -1 AS attcacheoff,
         c.typmod AS atttypmod, coalesce(t.typlen BETWEEN 1 AND 8, false) AS attbyval,
         CASE WHEN coalesce(t.typlen, -1) = -1 THEN 'x' ELSE 'p' END AS attstorage, 'i' AS attalign,
         NOT c.is_nullable OR c.identity <> '' AS attnotnull, c.column_default IS NOT NULL AND c.identity = '' AS atthasdef, false AS atthasmissing,
         c.identity AS attidentity, '' AS attgenerated, false AS attisdropped, true AS attislocal, 0 AS attinhcount,
         CAST(CASE WHEN c.type_oid IN (25, 1043, 1042) THEN 100 ELSE 0 END AS BIGINT) AS attcollation,
         '' AS attcompression, CAST(NULL AS VARCHAR[]) AS attacl, CAST(NULL AS VARCHAR[]) AS attoptions,
         CAST(NULL AS VARCHAR[]) AS attfdwoptions, CAST(NULL AS VARCHAR) AS attmissingval
       FROM ${P}.cot_columns c LEFT JOIN ${P}.cot_types t ON t.oid = c.type_oid`,
    `CREATE VIEW ${P}.pg_attrdef AS
       SELECT CAST(1000000000 + c.table_oid * 1000 + c.column_index AS BIGINT) AS oid, c.table_oid AS adrelid,
         CAST(c.column_index AS SMALLINT) AS adnum,
         -- DuckDB prints boolean constants as casts; PostgreSQL as the keyword.
         -- and a sequence's default as nextval('s'::regclass), as serial columns show in psql's \\d.
         -- (Knex writes a boolean default as '0' or '1'.)
         CASE WHEN c.column_default IN ('CAST(''t'' AS BOOLEAN)', 'CAST(''1'' AS BOOLEAN)', 'CAST(''true'' AS BOOLEAN)')
             OR (c.data_type = 'BOOLEAN' AND lower(c.column_default) IN ('''1''', '''t''', '''true''', '''y''', '''yes''', '''on''')) THEN 'true'
           WHEN c.column_default IN ('CAST(''f'' AS BOOLEAN)', 'CAST(''0'' AS BOOLEAN)', 'CAST(''false'' AS BOOLEAN)')
             OR (c.data_type = 'BOOLEAN' AND lower(c.column_default) IN ('''0''', '''f''', '''false''', '''n''', '''no''', '''off''')) THEN 'false'
           WHEN c.column_default LIKE 'nextval(''%'')' THEN regexp_replace(c.column_default, '^nextval\\(''(.*)''\\)$', 'nextval(''\\1''::regclass)')
           ELSE c.column_default END AS adbin
       FROM ${P}.cot_columns c WHERE c.column_default IS NOT NULL AND c.identity = ''`,
    `CREATE VIEW ${P}.pg_type AS
       SELECT t.oid, t.typname, CAST(${OID.pgCatalog} AS BIGINT) AS typnamespace, CAST(${OID.owner} AS BIGINT) AS typowner, t.typlen,
         t.typlen BETWEEN 1 AND 8 AS typbyval, t.typtype, t.typcategory, t.oid IN (16, 25, 701, 1184, 1186) AS typispreferred,
         true AS typisdefined, ',' AS typdelim, CAST(0 AS BIGINT) AS typrelid,
         CASE WHEN t.typelem <> 0 THEN 'array_subscript_handler' ELSE '-' END AS typsubscript,
         t.typelem, t.typarray, t.typinput, t.typoutput,
         CASE WHEN t.typelem <> 0 THEN 'array_recv' ELSE t.typname || 'recv' END AS typreceive,
         CASE WHEN t.typelem <> 0 THEN 'array_send' ELSE t.typname || 'send' END AS typsend,
         '-' AS typmodin, '-' AS typmodout, '-' AS typanalyze,
         CASE WHEN t.typlen = 8 THEN 'd' WHEN t.typlen = 2 THEN 's' WHEN t.typlen = 1 THEN 'c' ELSE 'i' END AS typalign,
         CASE WHEN t.typlen = -1 THEN 'x' ELSE 'p' END AS typstorage, false AS typnotnull, CAST(0 AS BIGINT) AS typbasetype,
         -1 AS typtypmod, 0 AS typndims, CAST(CASE WHEN t.typcategory = 'S' THEN 100 ELSE 0 END AS BIGINT) AS typcollation,
         CAST(NULL AS VARCHAR) AS typdefaultbin, CAST(NULL AS VARCHAR) AS typdefault, CAST(NULL AS VARCHAR[]) AS typacl
       FROM ${P}.cot_types t`,
    `CREATE VIEW ${P}.pg_index AS
       -- Each key column's default operator class, by its type (varchar's is text's, as in PostgreSQL).
       WITH k AS (SELECT i.indexrelid, i.indrelid, unnest(i.indkey) AS attnum, generate_subscripts(i.indkey, 1) AS pos FROM ${P}.cot_indexes i),
       oc AS (SELECT k.indexrelid, list(CAST(coalesce(CASE WHEN c.data_type LIKE '%]' THEN 10000 ELSE o.oid END, 0) AS BIGINT) ORDER BY k.pos) AS indclass
         FROM k LEFT JOIN ${P}.cot_columns c ON c.table_oid = k.indrelid AND c.column_index = k.attnum
           LEFT JOIN ${P}.cot_opclasses o ON o.opcintype = CASE c.type_oid WHEN 1043 THEN 25 ELSE c.type_oid END
         GROUP BY k.indexrelid)
       SELECT i.indexrelid, i.indrelid, CAST(len(i.indkey) AS SMALLINT) AS indnatts, CAST(len(i.indkey) AS SMALLINT) AS indnkeyatts,
         i.indisunique, false AS indnullsnotdistinct, i.indisprimary, false AS indisexclusion, true AS indimmediate,
         false AS indisclustered, true AS indisvalid, false AS indcheckxmin, true AS indisready, true AS indislive,
         false AS indisreplident, list_transform(i.indkey, x -> CAST(x AS SMALLINT)) AS indkey,
         list_transform(i.indkey, x -> CAST(0 AS BIGINT)) AS indcollation, coalesce(oc.indclass, list_transform(i.indkey, x -> CAST(0 AS BIGINT))) AS indclass,
         list_transform(i.indkey, x -> CAST(0 AS SMALLINT)) AS indoption, CAST(NULL AS VARCHAR) AS indexprs, i.predicate AS indpred
       FROM ${P}.cot_indexes i LEFT JOIN oc ON oc.indexrelid = i.indexrelid`,
    `CREATE VIEW ${P}.pg_constraint AS
       SELECT k.oid, k.conname, k.connamespace, k.contype, false AS condeferrable, false AS condeferred, true AS convalidated,
         k.conrelid, CAST(0 AS BIGINT) AS contypid, k.conindid, CAST(0 AS BIGINT) AS conparentid, k.confrelid,
         CASE WHEN k.contype = 'f' THEN coalesce(k.on_update, 'a') ELSE ' ' END AS confupdtype,
         CASE WHEN k.contype = 'f' THEN coalesce(k.on_delete, 'a') ELSE ' ' END AS confdeltype,
         CASE WHEN k.contype = 'f' THEN 's' ELSE ' ' END AS confmatchtype, true AS conislocal, 0 AS coninhcount, true AS connoinherit,
         k.conkey,
         -- The referenced columns' numbers, in the referenced table's order (joined: a subquery per constraint scans the columns per constraint).
         CASE WHEN k.contype = 'f' THEN nullif(list_transform(list_filter(list_zip(rc.names, rc.nums), cot_p -> list_contains(k.referenced_column_names, cot_p[1])),
           cot_p -> CAST(cot_p[2] AS SMALLINT)), []) END AS confkey,
         CAST(NULL AS BIGINT[]) AS conpfeqop, CAST(NULL AS BIGINT[]) AS conppeqop, CAST(NULL AS BIGINT[]) AS conffeqop,
         CAST(NULL AS SMALLINT[]) AS confdelsetcols, CAST(NULL AS BIGINT[]) AS conexclop, k.expression AS conbin
       FROM ${P}.cot_constraints k
         LEFT JOIN (SELECT c.table_oid, list(c.column_name ORDER BY c.column_index) AS names, list(c.column_index ORDER BY c.column_index) AS nums
                    FROM duckdb_columns() c GROUP BY c.table_oid) rc ON k.contype = 'f' AND rc.table_oid = k.confrelid`,
    `CREATE VIEW ${P}.pg_description AS
       SELECT t.table_oid AS objoid, CAST(1259 AS BIGINT) AS classoid, 0 AS objsubid, t.comment AS description
       FROM duckdb_tables() t WHERE t.comment IS NOT NULL AND t.database_name NOT IN ${HIDDEN_DB} AND t.schema_name <> ${q(KEYS_SCHEMA)}
       UNION ALL SELECT v.view_oid, 1259, 0, v.comment FROM duckdb_views() v WHERE v.comment IS NOT NULL AND NOT v.internal AND v.database_name NOT IN ${HIDDEN_DB} AND v.schema_name <> ${q(KEYS_SCHEMA)}
       UNION ALL SELECT c.table_oid, 1259, c.column_index, c.comment FROM duckdb_columns() c WHERE c.comment IS NOT NULL AND c.database_name NOT IN ${HIDDEN_DB} AND c.schema_name <> ${q(KEYS_SCHEMA)}
       UNION ALL SELECT ns.oid, 2615, 0, ns.comment FROM ${P}.cot_namespaces ns WHERE ns.comment IS NOT NULL AND ns.comment <> ''
       -- public's comment in a new PostgreSQL 15 database (pg_dump writes COMMENT ON SCHEMA public only when it differs).
       UNION ALL SELECT ns.oid, 2615, 0, 'standard public schema' FROM ${P}.cot_namespaces ns
         WHERE ns.nspname = 'public' AND coalesce(ns.comment, '') = ''
       -- and each extension's, as its control file gives it (psql's \\dx shows it).
       UNION ALL SELECT x.oid, 3079, 0, x.comment FROM ${P}.cot_extensions x JOIN ${DECLARED_EXTENSIONS} d ON d.name = x.name`,
    `CREATE VIEW ${P}.pg_proc AS
       SELECT f.oid, f.function_name AS proname, f.nspoid AS pronamespace, CAST(${OID.owner} AS BIGINT) AS proowner,
         CAST(CASE WHEN f.function_type LIKE '%macro' THEN 14 ELSE 12 END AS BIGINT) AS prolang, 1.0 AS procost,
         CASE WHEN f.function_type LIKE 'table%' THEN 1000.0 ELSE 0.0 END AS prorows, CAST(0 AS BIGINT) AS provariadic,
         '-' AS prosupport, CASE WHEN f.function_type = 'aggregate' THEN 'a' ELSE 'f' END AS prokind,
         false AS prosecdef, false AS proleakproof, false AS proisstrict, f.function_type LIKE 'table%' AS proretset,
         CASE WHEN f.stability = 'CONSISTENT' THEN 'i' ELSE 'v' END AS provolatile, 's' AS proparallel,
         CAST(len(f.parameters) AS SMALLINT) AS pronargs, CAST(0 AS SMALLINT) AS pronargdefaults,
         CAST(CASE WHEN f.function_type LIKE 'table%' THEN 2249 WHEN f.return_type IS NULL THEN 2283 ELSE coalesce(m.oid, 2283) END AS BIGINT) AS prorettype,
         list_transform(f.parameter_types, t -> CAST(CASE WHEN t IS NULL OR t = 'ANY' THEN 2283 WHEN t LIKE '%]' THEN 2277
           WHEN t = 'VARCHAR' THEN 25 WHEN t = 'INTEGER' THEN 23 WHEN t = 'BIGINT' THEN 20 WHEN t = 'DOUBLE' THEN 701
           WHEN t = 'BOOLEAN' THEN 16 ELSE 2283 END AS BIGINT)) AS proargtypes,
         CAST(NULL AS BIGINT[]) AS proallargtypes, CAST(NULL AS VARCHAR[]) AS proargmodes, f.parameters AS proargnames,
         CAST(NULL AS VARCHAR) AS proargdefaults, CAST(NULL AS BIGINT[]) AS protrftypes,
         coalesce(f.macro_definition, f.function_name) AS prosrc, CAST(NULL AS VARCHAR) AS probin, CAST(NULL AS VARCHAR) AS prosqlbody,
         CAST(NULL AS VARCHAR[]) AS proconfig, CAST(NULL AS VARCHAR[]) AS proacl,
         f.return_type AS cot_return_type, f.parameter_types AS cot_parameter_types, f.function_type AS cot_function_type
       FROM ${P}.cot_functions f LEFT JOIN ${P}.cot_type_map m ON m.type_key = ${P}.cot_type_key(f.return_type)`,
    `CREATE VIEW ${P}.pg_database AS
       SELECT CAST(${OID.database} AS BIGINT) AS oid, current_database() AS datname, CAST(${OID.owner} AS BIGINT) AS datdba, 6 AS encoding,
         'c' AS datlocprovider, false AS datistemplate, true AS datallowconn, -1 AS datconnlimit, CAST(0 AS BIGINT) AS datfrozenxid,
         CAST(0 AS BIGINT) AS datminmxid, CAST(${OID.defaultTablespace} AS BIGINT) AS dattablespace, 'C.UTF-8' AS datcollate,
         'C.UTF-8' AS datctype, CAST(NULL AS VARCHAR) AS daticulocale, CAST(NULL AS VARCHAR) AS datcollversion, CAST(NULL AS VARCHAR[]) AS datacl`,
    `CREATE VIEW ${P}.pg_roles AS
       SELECT current_user() AS rolname, cot_role() = 'admin' AS rolsuper, true AS rolinherit, cot_role() = 'admin' AS rolcreaterole,
         cot_role() = 'admin' AS rolcreatedb, true AS rolcanlogin, cot_role() = 'admin' AS rolreplication, -1 AS rolconnlimit,
         '********' AS rolpassword, CAST(NULL AS TIMESTAMPTZ) AS rolvaliduntil, cot_role() = 'admin' AS rolbypassrls,
         CAST(NULL AS VARCHAR[]) AS rolconfig, CAST(${OID.owner} AS BIGINT) AS oid`,
    `CREATE VIEW ${P}.pg_authid AS
       SELECT r.oid, r.rolname, r.rolsuper, r.rolinherit, r.rolcreaterole, r.rolcreatedb, r.rolcanlogin, r.rolreplication,
         r.rolbypassrls, r.rolconnlimit, CAST(NULL AS VARCHAR) AS rolpassword, r.rolvaliduntil FROM ${P}.pg_roles r`,
    `CREATE VIEW ${P}.pg_user AS
       SELECT r.rolname AS usename, r.oid AS usesysid, r.rolcreatedb AS usecreatedb, r.rolsuper AS usesuper, false AS userepl,
         r.rolbypassrls AS usebypassrls, '********' AS passwd, r.rolvaliduntil AS valuntil, r.rolconfig AS useconfig FROM ${P}.pg_roles r`,
    `CREATE VIEW ${P}.pg_auth_members AS ${empty('oid BIGINT, roleid BIGINT, member BIGINT, grantor BIGINT, admin_option BOOLEAN')}`,
    `CREATE VIEW ${P}.pg_am AS SELECT * FROM (VALUES (CAST(${OID.heap} AS BIGINT), 'heap', 'heap_tableam_handler', 't'),
       (${OID.btree}, 'btree', 'bthandler', 'i')) AS am(oid, amname, amhandler, amtype)`,
    `CREATE VIEW ${P}.pg_tablespace AS SELECT * FROM (VALUES (CAST(${OID.defaultTablespace} AS BIGINT), 'pg_default', CAST(${OID.owner} AS BIGINT), CAST(NULL AS VARCHAR[]), CAST(NULL AS VARCHAR[])),
       (1664, 'pg_global', ${OID.owner}, NULL, NULL)) AS t(oid, spcname, spcowner, spcacl, spcoptions)`,
    `CREATE VIEW ${P}.pg_collation AS SELECT * FROM (VALUES (CAST(100 AS BIGINT), 'default', CAST(${OID.pgCatalog} AS BIGINT), CAST(${OID.owner} AS BIGINT), 'd', true, -1, CAST(NULL AS VARCHAR), CAST(NULL AS VARCHAR), CAST(NULL AS VARCHAR), CAST(NULL AS VARCHAR)),
       (950, 'C', ${OID.pgCatalog}, ${OID.owner}, 'c', true, -1, 'C', 'C', NULL, NULL))
       AS c(oid, collname, collnamespace, collowner, collprovider, collisdeterministic, collencoding, collcollate, collctype, colliculocale, collversion)`,
    `CREATE VIEW ${P}.pg_language AS SELECT * FROM (VALUES (CAST(12 AS BIGINT), 'internal', CAST(${OID.owner} AS BIGINT), false, false, CAST(0 AS BIGINT), CAST(0 AS BIGINT), CAST(0 AS BIGINT), CAST(NULL AS VARCHAR[])),
       (13, 'c', ${OID.owner}, false, false, 0, 0, 0, NULL), (14, 'sql', ${OID.owner}, false, true, 0, 0, 0, NULL))
       AS l(oid, lanname, lanowner, lanispl, lanpltrusted, lanplcallfoid, laninline, lanvalidator, lanacl)`,
    // The extensions created with CREATE EXTENSION (declared.ts), among those cotwire has the functions of (cot_extensions).
    `CREATE VIEW ${P}.pg_extension AS
       SELECT x.oid, x.name AS extname, CAST(${OID.owner} AS BIGINT) AS extowner,
         CAST(coalesce((SELECT first(n.oid) FROM ${P}.pg_namespace n WHERE n.nspname = d.schema_name), ${OID.public}) AS BIGINT) AS extnamespace,
         true AS extrelocatable, x.version AS extversion, CAST(NULL AS BIGINT[]) AS extconfig, CAST(NULL AS VARCHAR[]) AS extcondition
       FROM ${DECLARED_EXTENSIONS} d JOIN ${P}.cot_extensions x ON x.name = d.name`,
    `CREATE VIEW ${P}.pg_available_extensions AS
       SELECT x.name, x.version AS default_version, CASE WHEN d.name IS NOT NULL THEN x.version END AS installed_version, x.comment
       FROM ${P}.cot_extensions x LEFT JOIN ${DECLARED_EXTENSIONS} d ON d.name = x.name`,
    `CREATE VIEW ${P}.pg_inherits AS ${empty('inhrelid BIGINT, inhparent BIGINT, inhseqno INTEGER, inhdetachpending BOOLEAN')}`,
    `CREATE VIEW ${P}.pg_trigger AS ${empty('oid BIGINT, tgrelid BIGINT, tgparentid BIGINT, tgname VARCHAR, tgfoid BIGINT, tgtype SMALLINT, tgenabled VARCHAR, tgisinternal BOOLEAN, tgconstrrelid BIGINT, tgconstrindid BIGINT, tgconstraint BIGINT, tgdeferrable BOOLEAN, tginitdeferred BOOLEAN, tgnargs SMALLINT, tgattr SMALLINT[], tgargs BLOB, tgqual VARCHAR, tgoldtable VARCHAR, tgnewtable VARCHAR')}`,
    `CREATE VIEW ${P}.pg_policy AS ${empty('oid BIGINT, polname VARCHAR, polrelid BIGINT, polcmd VARCHAR, polpermissive BOOLEAN, polroles BIGINT[], polqual VARCHAR, polwithcheck VARCHAR')}`,
    `CREATE VIEW ${P}.pg_rewrite AS ${empty('oid BIGINT, rulename VARCHAR, ev_class BIGINT, ev_type VARCHAR, ev_enabled VARCHAR, is_instead BOOLEAN, ev_qual VARCHAR, ev_action VARCHAR')}`,
    `CREATE VIEW ${P}.pg_statistic_ext AS ${empty('oid BIGINT, stxrelid BIGINT, stxname VARCHAR, stxnamespace BIGINT, stxowner BIGINT, stxstattarget INTEGER, stxkeys SMALLINT[], stxkind VARCHAR[], stxexprs VARCHAR')}`,
    `CREATE VIEW ${P}.pg_publication AS ${empty('oid BIGINT, pubname VARCHAR, pubowner BIGINT, puballtables BOOLEAN, pubinsert BOOLEAN, pubupdate BOOLEAN, pubdelete BOOLEAN, pubtruncate BOOLEAN, pubviaroot BOOLEAN')}`,
    `CREATE VIEW ${P}.pg_publication_rel AS ${empty('oid BIGINT, prpubid BIGINT, prrelid BIGINT, prqual VARCHAR, prattrs SMALLINT[]')}`,
    `CREATE VIEW ${P}.pg_publication_namespace AS ${empty('oid BIGINT, pnpubid BIGINT, pnnspid BIGINT')}`,
    `CREATE VIEW ${P}.pg_foreign_table AS ${empty('ftrelid BIGINT, ftserver BIGINT, ftoptions VARCHAR[]')}`,
    `CREATE VIEW ${P}.pg_foreign_server AS ${empty('oid BIGINT, srvname VARCHAR, srvowner BIGINT, srvfdw BIGINT, srvtype VARCHAR, srvversion VARCHAR, srvacl VARCHAR[], srvoptions VARCHAR[]')}`,
    `CREATE VIEW ${P}.pg_foreign_data_wrapper AS ${empty('oid BIGINT, fdwname VARCHAR, fdwowner BIGINT, fdwhandler BIGINT, fdwvalidator BIGINT, fdwacl VARCHAR[], fdwoptions VARCHAR[]')}`,
    `CREATE VIEW ${P}.pg_event_trigger AS ${empty('oid BIGINT, evtname VARCHAR, evtevent VARCHAR, evtowner BIGINT, evtfoid BIGINT, evtenabled VARCHAR, evttags VARCHAR[]')}`,
    `CREATE VIEW ${P}.pg_partitioned_table AS ${empty('partrelid BIGINT, partstrat VARCHAR, partnatts SMALLINT, partdefid BIGINT, partattrs SMALLINT[], partclass BIGINT[], partcollation BIGINT[], partexprs VARCHAR')}`,
    `CREATE VIEW ${P}.pg_range AS ${empty('rngtypid BIGINT, rngsubtype BIGINT, rngmultitypid BIGINT, rngcollation BIGINT, rngsubopc BIGINT, rngcanonical VARCHAR, rngsubdiff VARCHAR')}`,
    `CREATE VIEW ${P}.pg_enum AS ${empty('oid BIGINT, enumtypid BIGINT, enumsortorder REAL, enumlabel VARCHAR')}`,
    // A serial column's sequence depends on the column (deptype 'a'): pg_dump then writes OWNED BY,
    // and the column's default after the sequence it draws from. See engines/duckdb/catalog/serial.ts.
    // An identity column's sequence is its internal part (deptype 'i'), and the column has no default: pg_dump then
    // writes ADD GENERATED ... AS IDENTITY (SEQUENCE NAME ...).
    `CREATE VIEW ${P}.pg_depend AS
       SELECT CAST(1259 AS BIGINT) AS classid, s.sequence_oid AS objid, 0 AS objsubid, CAST(1259 AS BIGINT) AS refclassid,
         c.table_oid AS refobjid, CAST(c.column_index AS INTEGER) AS refobjsubid, CASE WHEN c.identity = '' THEN 'a' ELSE 'i' END AS deptype
       FROM duckdb_sequences() s JOIN ${P}.cot_columns c ON c.database_name = s.database_name AND c.schema_name = s.schema_name
         AND c.column_default IN ('nextval(''' || s.sequence_name || ''')', 'nextval(''' || s.schema_name || '.' || s.sequence_name || ''')')
       WHERE s.comment LIKE 'owned by %' AND s.database_name NOT IN ${HIDDEN_DB} AND s.schema_name <> ${q(KEYS_SCHEMA)}
       UNION ALL
       -- and the default depends on the sequence (the loop pg_dump breaks by writing the default apart).
       SELECT CAST(2604 AS BIGINT), CAST(1000000000 + c.table_oid * 1000 + c.column_index AS BIGINT), 0, CAST(1259 AS BIGINT),
         s.sequence_oid, 0, 'n'
       FROM duckdb_sequences() s JOIN ${P}.cot_columns c ON c.database_name = s.database_name AND c.schema_name = s.schema_name
         AND c.column_default IN ('nextval(''' || s.sequence_name || ''')', 'nextval(''' || s.schema_name || '.' || s.sequence_name || ''')')
       WHERE c.identity = '' AND s.database_name NOT IN ${HIDDEN_DB} AND s.schema_name <> ${q(KEYS_SCHEMA)}`,
    `CREATE VIEW ${P}.pg_shdepend AS ${empty('dbid BIGINT, classid BIGINT, objid BIGINT, objsubid INTEGER, refclassid BIGINT, refobjid BIGINT, deptype VARCHAR')}`,
    `CREATE VIEW ${P}.pg_operator AS ${empty('oid BIGINT, oprname VARCHAR, oprnamespace BIGINT, oprowner BIGINT, oprkind VARCHAR, oprcanmerge BOOLEAN, oprcanhash BOOLEAN, oprleft BIGINT, oprright BIGINT, oprresult BIGINT, oprcom BIGINT, oprnegate BIGINT, oprcode VARCHAR, oprrest VARCHAR, oprjoin VARCHAR')}`,
    // Catalogs of objects cotwire has none of (pg_dump reads each).
    `CREATE VIEW ${P}.pg_transform AS ${empty('oid BIGINT, trftype BIGINT, trflang BIGINT, trffromsql BIGINT, trftosql BIGINT')}`,
    `CREATE VIEW ${P}.pg_conversion AS ${empty('oid BIGINT, conname VARCHAR, connamespace BIGINT, conowner BIGINT, conforencoding INTEGER, contoencoding INTEGER, conproc BIGINT, condefault BOOLEAN')}`,
    `CREATE VIEW ${P}.pg_opclass AS
       SELECT o.oid, CAST(${OID.btree} AS BIGINT) AS opcmethod, o.opcname, CAST(${OID.pgCatalog} AS BIGINT) AS opcnamespace,
         CAST(${OID.owner} AS BIGINT) AS opcowner, o.opcfamily, o.opcintype, true AS opcdefault, CAST(0 AS BIGINT) AS opckeytype
       FROM ${P}.cot_opclasses o`,
    `CREATE VIEW ${P}.pg_opfamily AS
       SELECT f.oid, CAST(${OID.btree} AS BIGINT) AS opfmethod, f.opfname, CAST(${OID.pgCatalog} AS BIGINT) AS opfnamespace, CAST(${OID.owner} AS BIGINT) AS opfowner
       FROM ${P}.cot_opfamilies f`,
    `CREATE VIEW ${P}.pg_amop AS ${empty('oid BIGINT, amopfamily BIGINT, amoplefttype BIGINT, amoprighttype BIGINT, amopstrategy SMALLINT, amoppurpose VARCHAR, amopopr BIGINT, amopmethod BIGINT, amopsortfamily BIGINT')}`,
    `CREATE VIEW ${P}.pg_amproc AS ${empty('oid BIGINT, amprocfamily BIGINT, amproclefttype BIGINT, amprocrighttype BIGINT, amprocnum SMALLINT, amproc BIGINT')}`,
    `CREATE VIEW ${P}.pg_ts_parser AS ${empty('oid BIGINT, prsname VARCHAR, prsnamespace BIGINT, prsstart BIGINT, prstoken BIGINT, prsend BIGINT, prsheadline BIGINT, prslextype BIGINT')}`,
    `CREATE VIEW ${P}.pg_ts_template AS ${empty('oid BIGINT, tmplname VARCHAR, tmplnamespace BIGINT, tmplinit BIGINT, tmpllexize BIGINT')}`,
    `CREATE VIEW ${P}.pg_ts_dict AS ${empty('oid BIGINT, dictname VARCHAR, dictnamespace BIGINT, dictowner BIGINT, dicttemplate BIGINT, dictinitoption VARCHAR')}`,
    `CREATE VIEW ${P}.pg_ts_config AS ${empty('oid BIGINT, cfgname VARCHAR, cfgnamespace BIGINT, cfgowner BIGINT, cfgparser BIGINT')}`,
    `CREATE VIEW ${P}.pg_aggregate AS ${empty('aggfnoid BIGINT, aggkind VARCHAR, aggnumdirectargs SMALLINT, aggtransfn BIGINT, aggfinalfn BIGINT, aggcombinefn BIGINT, aggserialfn BIGINT, aggdeserialfn BIGINT, aggmtransfn BIGINT, aggminvtransfn BIGINT, aggmfinalfn BIGINT, aggfinalextra BOOLEAN, aggmfinalextra BOOLEAN, aggfinalmodify VARCHAR, aggmfinalmodify VARCHAR, aggsortop BIGINT, aggtranstype BIGINT, aggtransspace INTEGER, aggmtranstype BIGINT, aggmtransspace INTEGER, agginitval VARCHAR, aggminitval VARCHAR')}`,
    `CREATE VIEW ${P}.pg_largeobject_metadata AS ${empty('oid BIGINT, lomowner BIGINT, lomacl VARCHAR[]')}`,
    `CREATE VIEW ${P}.pg_subscription AS ${empty('oid BIGINT, subdbid BIGINT, subskiplsn VARCHAR, subname VARCHAR, subowner BIGINT, subenabled BOOLEAN, subbinary BOOLEAN, substream VARCHAR, subtwophasestate VARCHAR, subdisableonerr BOOLEAN, subconninfo VARCHAR, subslotname VARCHAR, subsynccommit VARCHAR, subpublications VARCHAR[]')}`,
    `CREATE VIEW ${P}.pg_user_mapping AS ${empty('oid BIGINT, umuser BIGINT, umserver BIGINT, umoptions VARCHAR[]')}`,
    `CREATE VIEW ${P}.pg_seclabel AS ${empty('objoid BIGINT, classoid BIGINT, objsubid INTEGER, provider VARCHAR, label VARCHAR')}`,
    `CREATE VIEW ${P}.pg_shseclabel AS ${empty('objoid BIGINT, classoid BIGINT, provider VARCHAR, label VARCHAR')}`,
    `CREATE VIEW ${P}.pg_seclabels AS ${empty('objoid BIGINT, classoid BIGINT, objsubid INTEGER, objtype VARCHAR, objnamespace BIGINT, objname VARCHAR, provider VARCHAR, label VARCHAR')}`,
    `CREATE VIEW ${P}.pg_cast AS ${empty('oid BIGINT, castsource BIGINT, casttarget BIGINT, castfunc BIGINT, castcontext VARCHAR, castmethod VARCHAR')}`,
    `CREATE VIEW ${P}.pg_shdescription AS ${empty('objoid BIGINT, classoid BIGINT, description VARCHAR')}`,
    `CREATE VIEW ${P}.pg_init_privs AS ${empty('objoid BIGINT, classoid BIGINT, objsubid INTEGER, privtype VARCHAR, initprivs VARCHAR[]')}`,
    `CREATE VIEW ${P}.pg_default_acl AS ${empty('oid BIGINT, defaclrole BIGINT, defaclnamespace BIGINT, defaclobjtype VARCHAR, defaclacl VARCHAR[]')}`,
    `CREATE VIEW ${P}.pg_db_role_setting AS ${empty('setdatabase BIGINT, setrole BIGINT, setconfig VARCHAR[]')}`,
    `CREATE VIEW ${P}.pg_locks AS ${empty('locktype VARCHAR, database BIGINT, relation BIGINT, pid INTEGER, mode VARCHAR, granted BOOLEAN')}`,
    `CREATE VIEW ${P}.pg_prepared_statements AS ${empty('name VARCHAR, statement VARCHAR, prepare_time TIMESTAMPTZ, parameter_types VARCHAR[], from_sql BOOLEAN')}`,
    `CREATE VIEW ${P}.pg_sequence AS
       -- DuckDB keeps a sequence's next value as its start: the start PostgreSQL would default to is shown.
       SELECT s.sequence_oid AS seqrelid, CAST(20 AS BIGINT) AS seqtypid,
         CASE WHEN s.increment_by > 0 THEN s.min_value ELSE s.max_value END AS seqstart, s.increment_by AS seqincrement,
         s.max_value AS seqmax, s.min_value AS seqmin, CAST(1 AS BIGINT) AS seqcache, s.cycle AS seqcycle
       FROM duckdb_sequences() s WHERE s.database_name NOT IN ${HIDDEN_DB} AND s.schema_name <> ${q(KEYS_SCHEMA)}`,
    `CREATE VIEW ${P}.pg_sequences AS
       SELECT ns.nspname AS schemaname, s.sequence_name AS sequencename, current_user() AS sequenceowner, 'bigint' AS data_type,
         s.start_value, s.min_value, s.max_value, s.increment_by, s.cycle, CAST(1 AS BIGINT) AS cache_size, s.last_value
       FROM duckdb_sequences() s JOIN ${P}.cot_namespaces ns USING (database_name, schema_name)`,
    `CREATE VIEW ${P}.pg_tables AS
       SELECT n.nspname AS schemaname, c.relname AS tablename, current_user() AS tableowner, CAST(NULL AS VARCHAR) AS tablespace,
         c.relhasindex AS hasindexes, false AS hasrules, false AS hastriggers, false AS rowsecurity
       FROM ${P}.pg_class c JOIN ${P}.pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind = 'r'`,
    `CREATE VIEW ${P}.pg_views AS
       SELECT ns.nspname AS schemaname, v.view_name AS viewname, current_user() AS viewowner, v.definition
       FROM ${P}.cot_views v JOIN ${P}.cot_namespaces ns USING (database_name, schema_name)`,
    `CREATE VIEW ${P}.pg_matviews AS ${empty('schemaname VARCHAR, matviewname VARCHAR, matviewowner VARCHAR, tablespace VARCHAR, hasindexes BOOLEAN, ispopulated BOOLEAN, definition VARCHAR')}`,
    `CREATE VIEW ${P}.pg_indexes AS
       SELECT n.nspname AS schemaname, t.relname AS tablename, i.relname AS indexname, CAST(NULL AS VARCHAR) AS tablespace, i.indexdef
       FROM ${P}.cot_indexes i JOIN ${P}.pg_class t ON t.oid = i.indrelid JOIN ${P}.pg_namespace n ON n.oid = t.relnamespace`,
    // Every session (engines/duckdb/handler/backends.ts), with what it does shown to a superuser and to its own user.
    `CREATE VIEW ${P}.pg_stat_activity AS
       SELECT CAST(${OID.database} AS BIGINT) AS datid, current_database() AS datname, a.pid, CAST(NULL AS INTEGER) AS leader_pid,
         CAST(${OID.owner} AS BIGINT) AS usesysid, a.usename, a.application_name, a.client_addr, CAST(NULL AS VARCHAR) AS client_hostname,
         CAST(NULL AS INTEGER) AS client_port, CAST(make_timestamp(a.backend_start) AS TIMESTAMPTZ) AS backend_start,
         CAST(NULL AS TIMESTAMPTZ) AS xact_start, CAST(make_timestamp(a.query_start) AS TIMESTAMPTZ) AS query_start,
         CAST(NULL AS TIMESTAMPTZ) AS state_change, CAST(NULL AS VARCHAR) AS wait_event_type, CAST(NULL AS VARCHAR) AS wait_event,
         a.state, CAST(NULL AS BIGINT) AS backend_xid, CAST(NULL AS BIGINT) AS backend_xmin, CAST(NULL AS BIGINT) AS query_id, a.query,
         'client backend' AS backend_type
       FROM (SELECT unnest(from_json(coalesce(cot_backend_call('activity', '', '', ''), '[]'),
         '[{"pid": "INTEGER", "usename": "VARCHAR", "application_name": "VARCHAR", "client_addr": "VARCHAR", "backend_start": "BIGINT",
            "query_start": "BIGINT", "state": "VARCHAR", "query": "VARCHAR"}]')) AS a)`,
    // PostgreSQL 15's columns; cotwire counts none of these (pgAdmin's dashboard sums them).
    `CREATE VIEW ${P}.pg_stat_database AS
       SELECT CAST(${OID.database} AS BIGINT) AS datid, current_database() AS datname, CAST((SELECT count(*) FROM ${P}.pg_stat_activity) AS INTEGER) AS numbackends,
         ${['xact_commit', 'xact_rollback', 'blks_read', 'blks_hit', 'tup_returned', 'tup_fetched', 'tup_inserted', 'tup_updated', 'tup_deleted', 'conflicts', 'temp_files', 'temp_bytes', 'deadlocks', 'checksum_failures'].map((c) => `CAST(0 AS BIGINT) AS ${c}`).join(', ')},
         CAST(NULL AS TIMESTAMPTZ) AS checksum_last_failure,
         ${['blk_read_time', 'blk_write_time', 'session_time', 'active_time', 'idle_in_transaction_time'].map((c) => `CAST(0 AS DOUBLE) AS ${c}`).join(', ')},
         ${['sessions', 'sessions_abandoned', 'sessions_fatal', 'sessions_killed'].map((c) => `CAST(0 AS BIGINT) AS ${c}`).join(', ')},
         CAST(NULL AS TIMESTAMPTZ) AS stats_reset`,
    `CREATE VIEW ${P}.pg_stat_user_tables AS
       SELECT c.oid AS relid, n.nspname AS schemaname, c.relname, CAST(0 AS BIGINT) AS seq_scan, CAST(0 AS BIGINT) AS idx_scan,
         CAST(0 AS BIGINT) AS n_tup_ins, CAST(0 AS BIGINT) AS n_tup_upd, CAST(0 AS BIGINT) AS n_tup_del,
         CAST(greatest(c.reltuples, 0) AS BIGINT) AS n_live_tup, CAST(0 AS BIGINT) AS n_dead_tup,
         CAST(NULL AS TIMESTAMPTZ) AS last_vacuum, CAST(NULL AS TIMESTAMPTZ) AS last_autovacuum,
         CAST(NULL AS TIMESTAMPTZ) AS last_analyze, CAST(NULL AS TIMESTAMPTZ) AS last_autoanalyze
       FROM ${P}.pg_class c JOIN ${P}.pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind = 'r' AND c.relnamespace <> ${OID.pgCatalog}`,
    `CREATE VIEW ${P}.pg_statio_user_tables AS
       SELECT relid, schemaname, relname, CAST(0 AS BIGINT) AS heap_blks_read, CAST(0 AS BIGINT) AS heap_blks_hit FROM ${P}.pg_stat_user_tables`,
    // Every table is a user table: the catalog's own are views over DuckDB's (Sequelize's describeTable reads pg_statio_all_tables).
    `CREATE VIEW ${P}.pg_stat_all_tables AS SELECT * FROM ${P}.pg_stat_user_tables`,
    `CREATE VIEW ${P}.pg_statio_all_tables AS
       SELECT relid, schemaname, relname, heap_blks_read, heap_blks_hit, CAST(0 AS BIGINT) AS idx_blks_read, CAST(0 AS BIGINT) AS idx_blks_hit,
         CAST(0 AS BIGINT) AS toast_blks_read, CAST(0 AS BIGINT) AS toast_blks_hit, CAST(0 AS BIGINT) AS tidx_blks_read, CAST(0 AS BIGINT) AS tidx_blks_hit
       FROM ${P}.pg_statio_user_tables`,
    `CREATE VIEW ${P}.pg_policies AS ${empty('schemaname VARCHAR, tablename VARCHAR, policyname VARCHAR, permissive VARCHAR, roles VARCHAR[], cmd VARCHAR, qual VARCHAR, with_check VARCHAR')}`,
    `CREATE VIEW ${P}.pg_stat_user_indexes AS
       SELECT i.indrelid AS relid, i.indexrelid, n.nspname AS schemaname, t.relname, i.relname AS indexrelname, CAST(0 AS BIGINT) AS idx_scan
       FROM ${P}.cot_indexes i JOIN ${P}.pg_class t ON t.oid = i.indrelid JOIN ${P}.pg_namespace n ON n.oid = t.relnamespace`,
    `CREATE VIEW ${P}.pg_timezone_names AS SELECT name, abbrev, utc_offset, is_dst FROM pg_timezone_names()`,
    `CREATE VIEW ${P}.pg_settings AS
       SELECT s.name, s.setting, CAST(NULL AS VARCHAR) AS unit, 'Ungrouped' AS category, s.description AS short_desc,
         CAST(NULL AS VARCHAR) AS extra_desc, 'user' AS context, 'string' AS vartype, 'session' AS source,
         CAST(NULL AS VARCHAR) AS min_val, CAST(NULL AS VARCHAR) AS max_val, CAST(NULL AS VARCHAR[]) AS enumvals,
         s.setting AS boot_val, s.setting AS reset_val, CAST(NULL AS VARCHAR) AS sourcefile, CAST(NULL AS INTEGER) AS sourceline,
         false AS pending_restart
       FROM (SELECT unnest(${SETTINGS}, recursive := true)) s`,
  ];
}

/**
 * The statements that build the catalog, run once at start-up before the
 * engine is locked down. They refer to per-connection macros
 * (current_user(), current_database(), cot_role()) that each connection
 * defines for itself.
 */
export function catalogSetup(): string[] {
  return [
    `ATTACH ':memory:' AS ${COMPAT_CATALOG}`,
    `CREATE SCHEMA ${PG_SCHEMA}`,
    `CREATE SCHEMA ${INFORMATION_SCHEMA}`,
    ...DECLARED_SETUP,
    KEYS_MIRROR_SETUP,
    ...internals(),
    ...MACROS.filter((m) => !readsViews(m)).map(createMacro),
    ...catalogViews().map(oidTyped),
    ...MACROS.filter(readsViews).map(createMacro),
    ...informationViews(),
  ];
}
