/** DuckDB's text of a view: `CREATE VIEW name [(columns)] AS query;`, the name possibly qualified and quoted. */
const CREATE_VIEW =
  '^CREATE (?:OR REPLACE )?(?:TEMP(?:ORARY)? )?VIEW (?:"(?:[^"]|"")*"|[^ ."(]+)(?:[.](?:"(?:[^"]|"")*"|[^ ."(]+))* (?:[(]((?:"(?:[^"]|"")*"|[^)"])*)[)] )?AS (.*)$';

/**
 * A view's definition as PostgreSQL gives it (pg_get_viewdef,
 * pg_views.definition): the query alone, after a space and ending with a
 * semicolon, which pg_dump writes after `CREATE VIEW name AS`. DuckDB keeps
 * the whole CREATE VIEW statement, which pg_dump then wrote twice. A view
 * that names its columns keeps them, as a query over its own query.
 */
export function viewDefinitionSql(sql: string): string {
  const part = (n: number): string => `regexp_extract(${sql}, '${CREATE_VIEW}', ${n}, 's')`;
  return `CASE WHEN NOT regexp_matches(${sql}, '${CREATE_VIEW}', 's') THEN ${sql}
    WHEN ${part(1)} = '' THEN ' ' || ${part(2)}
    ELSE ' SELECT * FROM (' || rtrim(${part(2)}, ';') || ') AS cot_view(' || ${part(1)} || ');' END`;
}
