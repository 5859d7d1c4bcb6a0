/** What the catalog's SQL is built from: where it lives, fixed OIDs, and small SQL helpers. */

export const COMPAT_CATALOG = 'cotwire_pg';
export const PG_SCHEMA = `${COMPAT_CATALOG}.pg`;
export const INFORMATION_SCHEMA = `${COMPAT_CATALOG}.information`;

/** Fixed OIDs, as in PostgreSQL where PostgreSQL fixes them. */
export const OID = {
  pgCatalog: 11,
  public: 2200,
  informationSchema: 13000,
  pgToast: 99,
  pgTemp: 16300,
  owner: 10,
  database: 5,
  heap: 2,
  btree: 403,
  defaultTablespace: 1663,
} as const;

export const q = (s: string): string => `'${s.replaceAll("'", "''")}'`;

/** The connection's PostgreSQL settings, which the handler publishes in an engine variable (see publishSettings). */
export const SETTINGS = "coalesce(getvariable('cot_settings'), CAST([] AS STRUCT(name VARCHAR, setting VARCHAR, description VARCHAR)[]))";
/** One setting by name, from the same settings as a MAP (a lookup that works inside table functions' arguments too). */
export const SETTING_VALUE = "coalesce(getvariable('cot_setting_values'), CAST(MAP {} AS MAP(VARCHAR, VARCHAR)))[lower(setting_name)]";
export const P = PG_SCHEMA;

/** Our own databases and schemas, which clients never see. */
export const HIDDEN_DB = `('system', ${q(COMPAT_CATALOG)})`;

/** A typed empty relation: the catalogs cotwire has no use for, so that clients' joins bind and return nothing. */
export function empty(columns: string): string {
  const list = columns
    .split(',')
    .map((c) => c.trim())
    .filter((c) => c !== '')
    .map((c) => {
      const space = c.indexOf(' ');
      return `CAST(NULL AS ${c.slice(space + 1)}) AS ${c.slice(0, space)}`;
    });
  return `SELECT ${list.join(', ')} WHERE false`;
}

export function values(rows: ReadonlyArray<ReadonlyArray<string | number | boolean>>): string {
  return rows.map((r) => `(${r.map((v) => (typeof v === 'string' ? q(v) : String(v))).join(', ')})`).join(',\n');
}
