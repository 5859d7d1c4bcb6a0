import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useCotwireAndPostgres } from '../fixtures/compared.js';

/**
 * BI tools cannot run here, so their catalog queries are reproduced from
 * their public source (each quoted with the file it comes from) and run
 * through node-postgres against cotwire and against PostgreSQL, on the same
 * table. Grafana's time-series macros are expanded as Grafana expands them.
 */

const servers = useCotwireAndPostgres();
let cot: pg.Client;
let real: pg.Client;

const SCHEMA = [
  'CREATE TABLE bi_events (id integer PRIMARY KEY, kind text NOT NULL, at_time timestamptz NOT NULL, value double precision)',
  'CREATE INDEX bi_events_kind ON bi_events (kind)',
  `INSERT INTO bi_events VALUES
     (1, 'Observation', '2026-01-01 00:01:00+00', 1.5), (2, 'Decision', '2026-01-01 00:04:00+00', 2),
     (3, 'Observation', '2026-01-01 00:07:00+00', NULL), (4, 'Action', '2026-01-01 00:16:00+00', 4)`,
];

beforeAll(async () => {
  cot = await servers.cotwire.client();
  real = new pg.Client({ host: '127.0.0.1', port: servers.postgres.port, user: servers.postgres.user, database: 'postgres' });
  await real.connect();
  for (const sql of SCHEMA) {
    await cot.query(sql);
    await real.query(sql);
  }
  await cot.query("INSERT INTO _cot_steps (session_id, step_type, content) VALUES ('bi', 'Observation', 'a'), ('bi', 'Decision', 'b')");
});

afterAll(async () => {
  await real?.end();
});

/**
 * Rows as arrays, numbers compared by value: PostgreSQL's extract() returns
 * numeric (sent as a string), DuckDB's a double (docs/compatibility.md).
 */
const rows = async (c: pg.Client, sql: string, params: unknown[] = []): Promise<unknown[][]> =>
  ((await c.query({ text: sql, values: params, rowMode: 'array' })).rows as unknown[][]).map((r) =>
    r.map((v) => (typeof v === 'string' && /^-?\d+(\.\d+)?$/.test(v) ? Number(v) : v)),
  );

/** The query on both; cotwire's rows must be PostgreSQL's. `only` keeps the rows about the test's own objects. */
async function same(sql: string, params: unknown[] = [], only: (row: unknown[]) => boolean = () => true): Promise<unknown[][]> {
  const [got, want] = await Promise.all([rows(cot, sql, params), rows(real, sql, params)]);
  expect(got.filter(only)).toEqual(want.filter(only));
  return got;
}

const mentionsBi = (row: unknown[]): boolean => row.some((v) => typeof v === 'string' && v.includes('bi_'));

describe('Grafana PostgreSQL data source', () => {
  // public/app/plugins/datasource/grafana-postgresql-datasource/postgresMetaQuery.ts
  const schemaConstraint = `
          quote_ident(table_schema) IN (
          SELECT
            CASE WHEN trim(s[i]) = '"$user"' THEN user ELSE trim(s[i]) END
          FROM
            generate_series(
              array_lower(string_to_array(current_setting('search_path'),','),1),
              array_upper(string_to_array(current_setting('search_path'),','),1)
            ) as i,
            string_to_array(current_setting('search_path'),',') s
          )`;

  it('reads the server version and looks for TimescaleDB', async () => {
    await same("SELECT current_setting('server_version_num')::int/100 as version", [], () => false);
    expect(await rows(cot, "SELECT current_setting('server_version_num')::int/100 as version")).toEqual([[1500]]);
    await same("SELECT extversion FROM pg_extension WHERE extname = 'timescaledb'");
  });

  it('lists schemas, tables and columns', async () => {
    await same(`SELECT schema_name AS "name"
    FROM information_schema.schemata
    WHERE schema_name NOT IN ('information_schema',
                              'pg_catalog',
                              'pg_toast',
                              '_timescaledb_cache',
                              '_timescaledb_catalog',
                              '_timescaledb_internal',
                              '_timescaledb_config',
                              'timescaledb_information',
                              'timescaledb_experimental')
    ORDER BY schema_name`);
    const tables = await same(
      `SELECT
    CASE WHEN ${schemaConstraint}
      THEN quote_ident(table_name)
      ELSE quote_ident(table_schema) || '.' || quote_ident(table_name)
    END AS "table"
    FROM information_schema.tables
    WHERE quote_ident(table_schema) NOT IN ('information_schema',
                             'pg_catalog',
                             '_timescaledb_cache',
                             '_timescaledb_catalog',
                             '_timescaledb_internal',
                             '_timescaledb_config',
                             'timescaledb_information',
                             'timescaledb_experimental')
    ORDER BY CASE WHEN ${schemaConstraint} THEN 0 ELSE 1 END, 1`,
      [],
      mentionsBi,
    );
    expect(tables).toContainEqual(['_cot_steps']);
    await same(
      `SELECT quote_ident(table_name) AS "table"
      FROM information_schema.tables
      WHERE quote_ident(table_schema) = 'public'
      ORDER BY 1`,
      [],
      mentionsBi,
    );
    const columns = `SELECT quote_ident(column_name) AS "column", data_type AS "type"
    FROM information_schema.columns
    WHERE
      CASE WHEN array_length(parse_ident('bi_events'),1) = 2
        THEN quote_ident(table_schema) = (parse_ident('bi_events'))[1]
          AND quote_ident(table_name) = (parse_ident('bi_events'))[2]
        ELSE quote_ident(table_name) = 'bi_events'
          AND ${schemaConstraint}
      END ORDER BY 1`;
    expect(await same(columns)).toEqual([
      ['at_time', 'timestamp with time zone'],
      ['id', 'integer'],
      ['kind', 'text'],
      ['value', 'double precision'],
    ]);
  });

  // pkg/tsdb/grafana-postgresql-datasource/macros.go: $__timeGroup(col, '5m') → floor(extract(epoch from col)/300)*300,
  // $__timeFilter(col) → col BETWEEN '<from>' AND '<to>', $__timeEpoch(col) → extract(epoch from col) as "time".
  it('runs $__timeGroup, $__timeFilter and $__timeEpoch as Grafana expands them', async () => {
    const grouped = await same(`SELECT floor(extract(epoch from at_time)/300)*300 AS "time", kind AS metric, count(*) AS value
      FROM bi_events WHERE at_time BETWEEN '2026-01-01T00:00:00Z' AND '2026-01-02T00:00:00Z' GROUP BY 1, 2 ORDER BY 1, 2`);
    expect(grouped.length).toBe(4);
    await same(`SELECT extract(epoch from at_time) as "time", value FROM bi_events WHERE value IS NOT NULL ORDER BY 1`);
  });

  it('groups the ledger by $__timeGroup(created_at, ...)', async () => {
    const buckets = await rows(
      cot,
      `SELECT floor(extract(epoch from created_at)/60)*60 AS "time", step_type AS metric, count(*) AS value
       FROM _cot_steps WHERE created_at BETWEEN '2020-01-01T00:00:00Z' AND '2100-01-01T00:00:00Z' AND session_id = 'bi' GROUP BY 1, 2 ORDER BY 1, 2`,
    );
    expect(buckets.map((r) => r[1]).sort()).toEqual(['Decision', 'Observation']);
    for (const [time, , count] of buckets) {
      expect(Number(time) % 60).toBe(0);
      expect(Number(count)).toBe(1);
    }
  });
});

describe('Metabase sync', () => {
  // src/metabase/driver/postgres.clj, get-tables-sql, as HoneySQL renders it for schema "public".
  it('lists syncable tables with their descriptions and row estimates', async () => {
    const sql = `SELECT n.nspname AS schema, c.relname AS name, CASE c.relkind WHEN 'r' THEN 'TABLE' WHEN 'p' THEN 'PARTITIONED TABLE' WHEN 'v' THEN 'VIEW' WHEN 'f' THEN 'FOREIGN TABLE' WHEN 'm' THEN 'MATERIALIZED VIEW' ELSE NULL END AS type, d.description AS description, stat.n_live_tup AS estimated_row_count FROM pg_catalog.pg_class AS c INNER JOIN pg_catalog.pg_namespace AS n ON c.relnamespace = n.oid LEFT JOIN pg_catalog.pg_description AS d ON (c.oid = d.objoid) AND (d.objsubid = 0) AND (d.classoid = 'pg_class'::regclass) LEFT JOIN pg_stat_user_tables AS stat ON (n.nspname = stat.schemaname) AND (c.relname = stat.relname) WHERE (c.relnamespace = n.oid) AND (n.nspname !~ '^pg_') AND (n.nspname <> 'information_schema') AND c.relkind in ('r', 'p', 'v', 'f', 'm') AND (n.nspname IN ('public')) ORDER BY type ASC, schema ASC, name ASC`;
    // Row estimates are each engine's own; the rest must agree.
    const [got, want] = await Promise.all([rows(cot, sql), rows(real, sql)]);
    const mine = (r: unknown[][]): unknown[][] => r.filter((x) => x[1] === 'bi_events').map((x) => x.slice(0, 4));
    expect(mine(got)).toEqual(mine(want));
    expect(mine(got)).toEqual([['public', 'bi_events', 'TABLE', null]]);
    expect(got.map((r) => r[1])).toContain('_cot_steps');
  });

  // src/metabase/driver/postgres.clj, describe-fields-sql (its information_schema half) for table bi_events.
  it('describes fields', async () => {
    await same(
      `SELECT "c"."column_name" AS "name", CASE WHEN "c"."udt_schema" IN ('public', 'pg_catalog') THEN FORMAT('%s', "c"."udt_name") ELSE FORMAT('"%s"."%s"', "c"."udt_schema", "c"."udt_name") END AS "database-type", "c"."ordinal_position" - 1 AS "database-position", "c"."table_schema" AS "table-schema", "c"."table_name" AS "table-name", "pk"."column_name" IS NOT NULL AS "pk?", COL_DESCRIPTION(CAST(CAST(FORMAT('%I.%I', CAST("c"."table_schema" AS TEXT), CAST("c"."table_name" AS TEXT)) AS REGCLASS) AS OID), "c"."ordinal_position") AS "field-comment", (("column_default" IS NULL) OR (LOWER("column_default") = 'null')) AND ("is_nullable" = 'NO') AND NOT ((("column_default" IS NOT NULL) AND ("column_default" LIKE '%nextval(%')) OR ("is_identity" <> 'NO')) AS "database-required", (("column_default" IS NOT NULL) AND ("column_default" LIKE '%nextval(%')) OR ("is_identity" <> 'NO') AS "database-is-auto-increment" FROM "information_schema"."columns" AS "c" LEFT JOIN (SELECT "tc"."table_schema", "tc"."table_name", "kc"."column_name" FROM "information_schema"."table_constraints" AS "tc" INNER JOIN "information_schema"."key_column_usage" AS "kc" ON ("tc"."constraint_name" = "kc"."constraint_name") AND ("tc"."table_schema" = "kc"."table_schema") AND ("tc"."table_name" = "kc"."table_name") WHERE "tc"."constraint_type" = 'PRIMARY KEY') AS "pk" ON ("c"."table_schema" = "pk"."table_schema") AND ("c"."table_name" = "pk"."table_name") AND ("c"."column_name" = "pk"."column_name") WHERE c.table_schema !~ '^information_schema|catalog_history|pg_' AND ("c"."table_name" IN ('bi_events')) ORDER BY "table-schema" ASC, "table-name" ASC, "database-position" ASC`,
    );
  });

  // src/metabase/driver/postgres.clj, describe-indexes-sql for table bi_events.
  it('describes indexes', async () => {
    await same(
      `SELECT "tmp"."table-schema", "tmp"."table-name", TRIM(BOTH '"' FROM PG_CATALOG.PG_GET_INDEXDEF("tmp"."ci_oid", "tmp"."pos", FALSE)) AS "field-name" FROM (SELECT "n"."nspname" AS "table-schema", "ct"."relname" AS "table-name", "ci"."oid" AS "ci_oid", (INFORMATION_SCHEMA._PG_EXPANDARRAY("i"."indkey"))."n" AS "pos" FROM "pg_catalog"."pg_class" AS "ct" INNER JOIN "pg_catalog"."pg_namespace" AS "n" ON "ct"."relnamespace" = "n"."oid" INNER JOIN "pg_catalog"."pg_index" AS "i" ON "ct"."oid" = "i"."indrelid" INNER JOIN "pg_catalog"."pg_class" AS "ci" ON "ci"."oid" = "i"."indexrelid" WHERE (PG_CATALOG.PG_GET_EXPR("i"."indpred", "i"."indrelid") IS NULL) AND n.nspname !~ '^information_schema|catalog_history|pg_' AND ("ct"."relname" IN ('bi_events'))) AS "tmp" WHERE "tmp"."pos" = 1 ORDER BY 3`,
    );
  });
});

describe('DBeaver navigator', () => {
  // plugins/org.jkiss.dbeaver.ext.postgresql/src/org/jkiss/dbeaver/ext/postgresql/model/PostgreDataSource.java and PostgreSchema.java
  it('lists databases, schemas and tables', async () => {
    expect((await rows(cot, 'SELECT db.oid,db.* FROM pg_catalog.pg_database db WHERE datallowconn AND NOT datistemplate ORDER BY db.datname')).length).toBe(1);
    const schemas =
      "SELECT n.oid,n.*,d.description FROM pg_catalog.pg_namespace n LEFT OUTER JOIN pg_catalog.pg_description d ON d.objoid=n.oid AND d.objsubid=0 AND d.classoid='pg_namespace'::regclass ORDER BY nspname";
    const names = async (c: pg.Client): Promise<unknown[]> => (await rows(c, schemas)).map((r) => r[2]).filter((n) => !String(n).startsWith('pg_temp'));
    expect(await names(cot)).toEqual(['information_schema', 'pg_catalog', 'pg_toast', 'public']);
    expect(await names(cot)).toEqual(await names(real));
    const tables = await rows(
      cot,
      "SELECT c.oid,c.*,d.description,pg_catalog.pg_get_expr(c.relpartbound, c.oid) as partition_expr, pg_catalog.pg_get_partkeydef(c.oid) as partition_key FROM pg_catalog.pg_class c LEFT OUTER JOIN pg_catalog.pg_description d ON d.objoid=c.oid AND d.objsubid=0 AND d.classoid='pg_class'::regclass WHERE c.relnamespace=$1 AND c.relkind not in ('i','I','c')",
      [2200],
    );
    expect(tables.map((r) => r[2]).sort()).toEqual([
      '_cot_checkpoints',
      '_cot_embeddings',
      '_cot_log_events',
      '_cot_redactions',
      '_cot_retention',
      '_cot_security_events',
      '_cot_steps',
      'bi_events',
    ]);
  });

  it('lists a table’s columns', async () => {
    const sql = `SELECT c.relname,a.attname,a.attnum,a.attnotnull,pg_catalog.pg_get_expr(ad.adbin, ad.adrelid, true) as def_value,dsc.description,dep.objid FROM pg_catalog.pg_attribute a INNER JOIN pg_catalog.pg_class c ON (a.attrelid=c.oid) LEFT OUTER JOIN pg_catalog.pg_attrdef ad ON (a.attrelid=ad.adrelid AND a.attnum = ad.adnum) LEFT OUTER JOIN pg_catalog.pg_description dsc ON (c.oid=dsc.objoid AND a.attnum = dsc.objsubid) LEFT OUTER JOIN pg_depend dep on dep.refobjid = a.attrelid AND dep.deptype = 'i' and dep.refobjsubid = a.attnum and dep.classid = dep.refclassid WHERE NOT a.attisdropped AND c.relkind not in ('i','I','c') AND c.oid='bi_events'::regclass AND a.attnum > 0 ORDER BY a.attnum`;
    expect(await same(sql)).toHaveLength(4);
  });
});
