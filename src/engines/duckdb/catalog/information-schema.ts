import { empty, INFORMATION_SCHEMA, P } from './catalog-sql.js';

/** A foreign key's action as information_schema spells it. */
const rule = (column: string): string =>
  `CASE coalesce(${column}, 'a') WHEN 'r' THEN 'RESTRICT' WHEN 'c' THEN 'CASCADE' WHEN 'n' THEN 'SET NULL' WHEN 'd' THEN 'SET DEFAULT' ELSE 'NO ACTION' END`;

/** The information_schema views cotwire presents. */
export const INFORMATION_RELATIONS: ReadonlySet<string> = new Set([
  'schemata',
  'tables',
  'columns',
  'views',
  'table_constraints',
  'key_column_usage',
  'referential_constraints',
  'constraint_column_usage',
  'check_constraints',
  'routines',
  'parameters',
  'character_sets',
  'sequences',
  'triggers',
  'table_privileges',
  'column_privileges',
  'role_table_grants',
  'enabled_roles',
  'applicable_roles',
]);

/** information_schema, with PostgreSQL's names for schemas and types. */
export function informationViews(): string[] {
  const I = INFORMATION_SCHEMA;
  const db = 'current_database()';
  return [
    `CREATE VIEW ${I}.schemata AS
       SELECT ${db} AS catalog_name, n.nspname AS schema_name, current_user() AS schema_owner,
         CAST(NULL AS VARCHAR) AS default_character_set_catalog, CAST(NULL AS VARCHAR) AS default_character_set_schema,
         CAST(NULL AS VARCHAR) AS default_character_set_name, CAST(NULL AS VARCHAR) AS sql_path
       FROM ${P}.pg_namespace n`,
    `CREATE VIEW ${I}.tables AS
       SELECT ${db} AS table_catalog, n.nspname AS table_schema, c.relname AS table_name,
         CASE WHEN c.relkind = 'v' THEN 'VIEW' WHEN c.relpersistence = 't' THEN 'LOCAL TEMPORARY' ELSE 'BASE TABLE' END AS table_type,
         CAST(NULL AS VARCHAR) AS self_referencing_column_name, CAST(NULL AS VARCHAR) AS reference_generation,
         CAST(NULL AS VARCHAR) AS user_defined_type_catalog, CAST(NULL AS VARCHAR) AS user_defined_type_schema,
         CAST(NULL AS VARCHAR) AS user_defined_type_name, CASE WHEN c.relkind = 'r' THEN 'YES' ELSE 'NO' END AS is_insertable_into,
         'NO' AS is_typed, CAST(NULL AS VARCHAR) AS commit_action
       FROM ${P}.pg_class c JOIN ${P}.pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind IN ('r', 'v')`,
    `CREATE VIEW ${I}.columns AS
       SELECT ${db} AS table_catalog, n.nspname AS table_schema, c.relname AS table_name, a.attname AS column_name,
         CAST(a.attnum AS INTEGER) AS ordinal_position, d.adbin AS column_default, CASE WHEN a.attnotnull THEN 'NO' ELSE 'YES' END AS is_nullable,
         CASE WHEN t.typcategory = 'A' THEN 'ARRAY' WHEN a.atttypid = 1700 THEN 'numeric' ELSE t.display END AS data_type,
         CAST(CASE WHEN a.atttypid IN (1043, 1042) AND a.atttypmod > 4 THEN a.atttypmod - 4 END AS INTEGER) AS character_maximum_length, CAST(CASE WHEN t.typcategory = 'S' THEN 1073741824 END AS INTEGER) AS character_octet_length,
         CAST(CASE a.atttypid WHEN 21 THEN 16 WHEN 23 THEN 32 WHEN 20 THEN 64 WHEN 700 THEN 24 WHEN 701 THEN 53
           WHEN 1700 THEN CASE WHEN a.atttypmod > 4 THEN (a.atttypmod - 4) // 65536 END END AS INTEGER) AS numeric_precision,
         CAST(CASE WHEN a.atttypid IN (21, 23, 20, 700, 701) THEN 2 WHEN a.atttypid = 1700 THEN 10 END AS INTEGER) AS numeric_precision_radix,
         CAST(CASE WHEN a.atttypid IN (21, 23, 20) THEN 0 WHEN a.atttypid = 1700 AND a.atttypmod > 4 THEN (a.atttypmod - 4) % 65536 END AS INTEGER) AS numeric_scale,
         CAST(CASE WHEN a.atttypid IN (1082) THEN 0 WHEN a.atttypid IN (1083, 1114, 1184, 1266, 1186) THEN 6 END AS INTEGER) AS datetime_precision,
         CAST(NULL AS VARCHAR) AS interval_type, CAST(NULL AS INTEGER) AS interval_precision,
         CAST(NULL AS VARCHAR) AS character_set_catalog, CAST(NULL AS VARCHAR) AS character_set_schema, CAST(NULL AS VARCHAR) AS character_set_name,
         CAST(NULL AS VARCHAR) AS collation_catalog, CAST(NULL AS VARCHAR) AS collation_schema, CAST(NULL AS VARCHAR) AS collation_name,
         ${db} AS domain_catalog, CAST(NULL AS VARCHAR) AS domain_schema, CAST(NULL AS VARCHAR) AS domain_name,
         ${db} AS udt_catalog, 'pg_catalog' AS udt_schema, t.typname AS udt_name,
         CAST(NULL AS VARCHAR) AS scope_catalog, CAST(NULL AS VARCHAR) AS scope_schema, CAST(NULL AS VARCHAR) AS scope_name,
         CAST(NULL AS INTEGER) AS maximum_cardinality, CAST(a.attnum AS VARCHAR) AS dtd_identifier, 'NO' AS is_self_referencing,
         CASE WHEN a.attidentity <> '' THEN 'YES' ELSE 'NO' END AS is_identity,
         CASE a.attidentity WHEN 'a' THEN 'ALWAYS' WHEN 'd' THEN 'BY DEFAULT' END AS identity_generation,
         CASE WHEN a.attidentity <> '' THEN '1' END AS identity_start, CASE WHEN a.attidentity <> '' THEN '1' END AS identity_increment,
         CASE WHEN a.attidentity <> '' THEN CASE a.atttypid WHEN 21 THEN '32767' WHEN 23 THEN '2147483647' ELSE '9223372036854775807' END END AS identity_maximum,
         CASE WHEN a.attidentity <> '' THEN '1' END AS identity_minimum, 'NO' AS identity_cycle, 'NEVER' AS is_generated, CAST(NULL AS VARCHAR) AS generation_expression,
         CASE WHEN c.relkind = 'r' THEN 'YES' ELSE 'NO' END AS is_updatable
       FROM ${P}.pg_attribute a JOIN ${P}.pg_class c ON c.oid = a.attrelid JOIN ${P}.pg_namespace n ON n.oid = c.relnamespace
         LEFT JOIN ${P}.cot_types t ON t.oid = a.atttypid LEFT JOIN ${P}.pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
       WHERE c.relkind IN ('r', 'v')
       -- PostgreSQL scans its catalog in this order, and clients that do not sort (Knex's columnInfo) rely on it.
       ORDER BY c.oid, a.attnum`,
    `CREATE VIEW ${I}.views AS
       SELECT ${db} AS table_catalog, v.schemaname AS table_schema, v.viewname AS table_name, v.definition AS view_definition,
         'NONE' AS check_option, 'NO' AS is_updatable, 'NO' AS is_insertable_into, 'NO' AS is_trigger_updatable,
         'NO' AS is_trigger_deletable, 'NO' AS is_trigger_insertable_into
       FROM ${P}.pg_views v`,
    `CREATE VIEW ${I}.table_constraints AS
       SELECT ${db} AS constraint_catalog, n.nspname AS constraint_schema, k.conname AS constraint_name,
         ${db} AS table_catalog, n.nspname AS table_schema, c.relname AS table_name,
         CASE k.contype WHEN 'p' THEN 'PRIMARY KEY' WHEN 'u' THEN 'UNIQUE' WHEN 'c' THEN 'CHECK' ELSE 'FOREIGN KEY' END AS constraint_type,
         'NO' AS is_deferrable, 'NO' AS initially_deferred, 'YES' AS enforced, CAST(NULL AS VARCHAR) AS nulls_distinct
       FROM ${P}.cot_constraints k JOIN ${P}.pg_class c ON c.oid = k.conrelid JOIN ${P}.pg_namespace n ON n.oid = k.connamespace`,
    `CREATE VIEW ${I}.key_column_usage AS
       SELECT ${db} AS constraint_catalog, n.nspname AS constraint_schema, k.conname AS constraint_name,
         ${db} AS table_catalog, n.nspname AS table_schema, c.relname AS table_name, u.column_name,
         CAST(u.pos AS INTEGER) AS ordinal_position, CAST(CASE WHEN k.contype = 'f' THEN u.pos END AS INTEGER) AS position_in_unique_constraint
       FROM ${P}.cot_constraints k JOIN ${P}.pg_class c ON c.oid = k.conrelid JOIN ${P}.pg_namespace n ON n.oid = k.connamespace,
         LATERAL (SELECT unnest(k.constraint_column_names) AS column_name, generate_subscripts(k.constraint_column_names, 1) AS pos) u
       WHERE k.contype IN ('p', 'u', 'f')`,
    `CREATE VIEW ${I}.referential_constraints AS
       SELECT ${db} AS constraint_catalog, n.nspname AS constraint_schema, k.conname AS constraint_name,
         ${db} AS unique_constraint_catalog, n.nspname AS unique_constraint_schema,
         (SELECT first(p.conname) FROM ${P}.cot_constraints p WHERE p.conrelid = k.confrelid AND p.contype IN ('p', 'u')) AS unique_constraint_name,
         'NONE' AS match_option, ${rule('k.on_update')} AS update_rule, ${rule('k.on_delete')} AS delete_rule
       FROM ${P}.cot_constraints k JOIN ${P}.pg_namespace n ON n.oid = k.connamespace WHERE k.contype = 'f'`,
    `CREATE VIEW ${I}.constraint_column_usage AS
       SELECT ${db} AS table_catalog, n.nspname AS table_schema, coalesce(k.referenced_table, c.relname) AS table_name, u.column_name,
         ${db} AS constraint_catalog, n.nspname AS constraint_schema, k.conname AS constraint_name
       FROM ${P}.cot_constraints k JOIN ${P}.pg_class c ON c.oid = k.conrelid JOIN ${P}.pg_namespace n ON n.oid = k.connamespace,
         LATERAL (SELECT unnest(CASE WHEN k.contype = 'f' THEN k.referenced_column_names ELSE k.constraint_column_names END) AS column_name) u`,
    `CREATE VIEW ${I}.check_constraints AS
       SELECT ${db} AS constraint_catalog, n.nspname AS constraint_schema, k.conname AS constraint_name, k.expression AS check_clause
       FROM ${P}.cot_constraints k JOIN ${P}.pg_namespace n ON n.oid = k.connamespace WHERE k.contype = 'c'`,
    `CREATE VIEW ${I}.routines AS
       SELECT ${db} AS specific_catalog, n.nspname AS specific_schema, p.proname || '_' || p.oid AS specific_name,
         ${db} AS routine_catalog, n.nspname AS routine_schema, p.proname AS routine_name, 'FUNCTION' AS routine_type,
         ${P}.format_type(p.prorettype, -1) AS data_type, CASE WHEN p.prolang = 14 THEN 'SQL' ELSE 'INTERNAL' END AS routine_body,
         p.prosrc AS routine_definition, CASE WHEN p.prolang = 14 THEN 'SQL' ELSE 'C' END AS external_language
       FROM ${P}.pg_proc p JOIN ${P}.pg_namespace n ON n.oid = p.pronamespace`,
    `CREATE VIEW ${I}.parameters AS ${empty('specific_catalog VARCHAR, specific_schema VARCHAR, specific_name VARCHAR, ordinal_position INTEGER, parameter_mode VARCHAR, parameter_name VARCHAR, data_type VARCHAR, udt_name VARCHAR')}`,
    `CREATE VIEW ${I}.character_sets AS SELECT CAST(NULL AS VARCHAR) AS character_set_catalog, CAST(NULL AS VARCHAR) AS character_set_schema,
       'UTF8' AS character_set_name, 'UCS' AS character_repertoire, 'UTF8' AS form_of_use, ${db} AS default_collate_catalog,
       'pg_catalog' AS default_collate_schema, 'C.UTF-8' AS default_collate_name`,
    `CREATE VIEW ${I}.sequences AS
       SELECT ${db} AS sequence_catalog, s.schemaname AS sequence_schema, s.sequencename AS sequence_name, 'bigint' AS data_type,
         64 AS numeric_precision, 2 AS numeric_precision_radix, 0 AS numeric_scale, CAST(s.start_value AS VARCHAR) AS start_value,
         CAST(s.min_value AS VARCHAR) AS minimum_value, CAST(s.max_value AS VARCHAR) AS maximum_value,
         CAST(s.increment_by AS VARCHAR) AS increment, CASE WHEN s.cycle THEN 'YES' ELSE 'NO' END AS cycle_option
       FROM ${P}.pg_sequences s`,
    `CREATE VIEW ${I}.triggers AS ${empty('trigger_catalog VARCHAR, trigger_schema VARCHAR, trigger_name VARCHAR, event_manipulation VARCHAR, event_object_catalog VARCHAR, event_object_schema VARCHAR, event_object_table VARCHAR, action_order INTEGER, action_condition VARCHAR, action_statement VARCHAR, action_orientation VARCHAR, action_timing VARCHAR')}`,
    `CREATE VIEW ${I}.table_privileges AS
       SELECT current_user() AS grantor, current_user() AS grantee, ${db} AS table_catalog, t.table_schema, t.table_name,
         p.privilege_type, 'YES' AS is_grantable, 'NO' AS with_hierarchy
       FROM ${I}.tables t, (VALUES ('SELECT'), ('INSERT')) p(privilege_type)`,
    `CREATE VIEW ${I}.role_table_grants AS SELECT * FROM ${I}.table_privileges`,
    `CREATE VIEW ${I}.column_privileges AS
       SELECT current_user() AS grantor, current_user() AS grantee, ${db} AS table_catalog, c.table_schema, c.table_name, c.column_name,
         'SELECT' AS privilege_type, 'YES' AS is_grantable
       FROM ${I}.columns c`,
    `CREATE VIEW ${I}.enabled_roles AS SELECT current_user() AS role_name`,
    `CREATE VIEW ${I}.applicable_roles AS SELECT current_user() AS grantee, current_user() AS role_name, 'YES' AS is_grantable`,
  ];
}
