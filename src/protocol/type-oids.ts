/** PostgreSQL type OIDs (pg_type.oid), as fixed in PostgreSQL's catalog. */
export const TypeOid = {
  unspecified: 0,
  bool: 16,
  bytea: 17,
  char: 18,
  name: 19,
  int8: 20,
  int2: 21,
  int4: 23,
  regproc: 24,
  text: 25,
  oid: 26,
  json: 114,
  xml: 142,
  float4: 700,
  float8: 701,
  unknown: 705,
  bpchar: 1042,
  varchar: 1043,
  date: 1082,
  time: 1083,
  timestamp: 1114,
  timestamptz: 1184,
  interval: 1186,
  timetz: 1266,
  bit: 1560,
  varbit: 1562,
  numeric: 1700,
  regclass: 2205,
  regtype: 2206,
  record: 2249,
  uuid: 2950,
  jsonb: 3802,
} as const;

/** Element OID → array OID. */
export const ArrayOidOf: ReadonlyMap<number, number> = new Map([
  [TypeOid.bool, 1000],
  [TypeOid.bytea, 1001],
  [TypeOid.char, 1002],
  [TypeOid.name, 1003],
  [TypeOid.int2, 1005],
  [TypeOid.int4, 1007],
  [TypeOid.text, 1009],
  [TypeOid.bpchar, 1014],
  [TypeOid.varchar, 1015],
  [TypeOid.int8, 1016],
  [TypeOid.float4, 1021],
  [TypeOid.float8, 1022],
  [TypeOid.oid, 1028],
  [TypeOid.timestamp, 1115],
  [TypeOid.date, 1182],
  [TypeOid.time, 1183],
  [TypeOid.timestamptz, 1185],
  [TypeOid.interval, 1187],
  [TypeOid.numeric, 1231],
  [TypeOid.timetz, 1270],
  [TypeOid.bit, 1561],
  [TypeOid.varbit, 1563],
  [TypeOid.uuid, 2951],
  [TypeOid.json, 199],
  [TypeOid.jsonb, 3807],
]);

/** Array OID → element OID. */
export const ElementOidOf: ReadonlyMap<number, number> = new Map([...ArrayOidOf].map(([e, a]) => [a, e]));

/** pg_type.typlen for the fixed-size types; -1 (varlena) otherwise. */
export function typeSize(oid: number): number {
  switch (oid) {
    case TypeOid.bool:
    case TypeOid.char:
      return 1;
    case TypeOid.int2:
      return 2;
    case TypeOid.int4:
    case TypeOid.float4:
    case TypeOid.date:
    case TypeOid.oid:
    case TypeOid.regproc:
    case TypeOid.regclass:
    case TypeOid.regtype:
      return 4;
    case TypeOid.int8:
    case TypeOid.float8:
    case TypeOid.time:
    case TypeOid.timestamp:
    case TypeOid.timestamptz:
      return 8;
    case TypeOid.timetz:
      return 12;
    case TypeOid.interval:
    case TypeOid.uuid:
      return 16;
    case TypeOid.name:
      return 64;
    default:
      return -1;
  }
}

/**
 * The values of PostgreSQL's one-byte "char" type that the catalog uses
 * (typtype, relkind, contype ...). The catalog keeps them in a DuckDB ENUM
 * of exactly these values, in this order, which the engine sends as "char"
 * (OID 18): asyncpg, for one, compares them as bytes.
 */
export const PG_CHAR_VALUES: readonly string[] = ['', ...' ,;.-_', ...'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789'];

/** PostgreSQL's names of the types above (as format_type and pg_typeof give them), and their OIDs. */
export const TYPE_OID_BY_NAME: ReadonlyMap<string, number> = new Map([
  ['boolean', TypeOid.bool],
  ['bytea', TypeOid.bytea],
  ['"char"', TypeOid.char],
  ['name', TypeOid.name],
  ['bigint', TypeOid.int8],
  ['smallint', TypeOid.int2],
  ['integer', TypeOid.int4],
  ['text', TypeOid.text],
  ['oid', TypeOid.oid],
  ['json', TypeOid.json],
  ['real', TypeOid.float4],
  ['double precision', TypeOid.float8],
  ['unknown', TypeOid.unknown],
  ['character', TypeOid.bpchar],
  ['character varying', TypeOid.varchar],
  ['date', TypeOid.date],
  ['time without time zone', TypeOid.time],
  ['timestamp without time zone', TypeOid.timestamp],
  ['timestamp with time zone', TypeOid.timestamptz],
  ['interval', TypeOid.interval],
  ['time with time zone', TypeOid.timetz],
  ['numeric', TypeOid.numeric],
  ['uuid', TypeOid.uuid],
  ['jsonb', TypeOid.jsonb],
]);
