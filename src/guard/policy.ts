/**
 * The lists the guard allows from, and the functions it refuses. Each list
 * is documented in docs/security.md; a test keeps the two in step.
 */

/** PRAGMAs that only read, and expose nothing about the host. */
export const READ_ONLY_PRAGMAS: ReadonlySet<string> = new Set([
  'table_info',
  'show',
  'show_tables',
  'show_tables_expanded',
  'version',
  'platform',
  'functions',
  'collations',
  'storage_info',
]);

/** Table functions that may be CALLed: catalog reads only. */
export const READ_ONLY_CALLS: ReadonlySet<string> = new Set([
  'pragma_table_info',
  'pragma_show',
  'pragma_show_tables',
  'pragma_version',
  'pragma_platform',
  'pragma_storage_info',
  'duckdb_tables',
  'duckdb_columns',
  'duckdb_views',
  'duckdb_schemas',
  'duckdb_types',
  'duckdb_indexes',
  'duckdb_constraints',
  'duckdb_functions',
  'duckdb_keywords',
  'duckdb_sequences',
]);

/**
 * Functions that read or write files or reach the network. The engine is
 * locked down against them too; the guard refuses them first, with a clear
 * message, so that the refusal never rests on one layer.
 */
export const HOST_FUNCTIONS: ReadonlySet<string> = new Set([
  'read_csv',
  'read_csv_auto',
  'read_text',
  'read_blob',
  'read_parquet',
  'parquet_scan',
  'parquet_metadata',
  'parquet_schema',
  'parquet_file_metadata',
  'parquet_kv_metadata',
  'parquet_bloom_probe',
  'read_json',
  'read_json_auto',
  'read_json_objects',
  'read_json_objects_auto',
  'read_ndjson',
  'read_ndjson_auto',
  'read_ndjson_objects',
  'sniff_csv',
  'glob',
  'read_xlsx',
  'read_duckdb',
  'iceberg_scan',
  'iceberg_metadata',
  'iceberg_snapshots',
  'delta_scan',
  'st_read',
  'sqlite_scan',
  'sqlite_attach',
  'postgres_scan',
  'postgres_attach',
  'postgres_query',
  'mysql_scan',
  'mysql_query',
  'httpfs',
  'load_aws_credentials',
  'duckdb_secrets',
  'which_secret',
  'enable_logging',
  'disable_logging',
  'truncate_duckdb_logs',
  'duckdb_logs',
  'duckdb_log_contexts',
  'checkpoint',
  'force_checkpoint',
  'install_extension',
  'load_extension',
  // These read no file, but show where the server keeps its files.
  'duckdb_settings',
  'duckdb_databases',
  'duckdb_extensions',
  'duckdb_temporary_files',
  'pragma_database_list',
]);

/**
 * Relations and table functions whose rows show where the server keeps its files (the database file,
 * the temp and secret directories, extensions, cached files), refused however they are written: with
 * or without parentheses, quoted, qualified, or named in a string that query_table() or query() reads.
 */
export const HOST_INFORMATION: ReadonlySet<string> = new Set([
  'duckdb_databases',
  'duckdb_settings',
  'duckdb_extensions',
  'duckdb_temporary_files',
  'duckdb_secrets',
  'duckdb_external_file_cache',
  'pragma_database_list',
  'which_secret',
]);

/** Functions that run SQL given to them as a value: the guard can judge a constant, never a value computed at run time. */
export const DYNAMIC_SQL_FUNCTIONS: ReadonlySet<string> = new Set(['query', 'query_table', 'json_execute_serialized_sql']);

/**
 * Settings whose value is a place on the host, which current_setting() would show: DuckDB's settings that
 * hold a directory, a file or a repository. `search_path` and the like are not places and stay readable.
 */
export const HOST_PATH_SETTINGS: ReadonlySet<string> = new Set([
  'temp_directory',
  'secret_directory',
  'home_directory',
  'extension_directory',
  'extension_directories',
  'allowed_directories',
  'allowed_paths',
  'file_search_path',
  'log_query_path',
  'profile_output',
  'profiling_output',
  'http_logging_output',
  'custom_extension_repository',
  'autoinstall_extension_repository',
  'data_directory',
  'config_file',
  'hba_file',
  'ident_file',
]);
