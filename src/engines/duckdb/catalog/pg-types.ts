import { ArrayOidOf, TypeOid, typeSize } from '../../../protocol/type-oids.js';

/** One row of the pg_type that cotwire presents. */
export interface PgTypeRow {
  readonly oid: number;
  readonly name: string;
  /** What format_type() prints (PostgreSQL's SQL-standard spelling). */
  readonly display: string;
  readonly category: string;
  readonly input: string;
  readonly output: string;
  readonly elem: number;
  readonly array: number;
  readonly type: 'b' | 'p';
}

const BASE: ReadonlyArray<readonly [keyof typeof TypeOid, string, string, string]> = [
  // name in TypeOid, typname, format_type() display, typcategory
  ['bool', 'bool', 'boolean', 'B'],
  ['bytea', 'bytea', 'bytea', 'U'],
  ['char', 'char', '"char"', 'Z'],
  ['name', 'name', 'name', 'S'],
  ['int8', 'int8', 'bigint', 'N'],
  ['int2', 'int2', 'smallint', 'N'],
  ['int4', 'int4', 'integer', 'N'],
  ['regproc', 'regproc', 'regproc', 'N'],
  ['text', 'text', 'text', 'S'],
  ['oid', 'oid', 'oid', 'N'],
  ['json', 'json', 'json', 'U'],
  ['xml', 'xml', 'xml', 'U'],
  ['float4', 'float4', 'real', 'N'],
  ['float8', 'float8', 'double precision', 'N'],
  ['unknown', 'unknown', 'unknown', 'X'],
  ['bpchar', 'bpchar', 'character', 'S'],
  ['varchar', 'varchar', 'character varying', 'S'],
  ['date', 'date', 'date', 'D'],
  ['time', 'time', 'time without time zone', 'D'],
  ['timestamp', 'timestamp', 'timestamp without time zone', 'D'],
  ['timestamptz', 'timestamptz', 'timestamp with time zone', 'D'],
  ['interval', 'interval', 'interval', 'T'],
  ['timetz', 'timetz', 'time with time zone', 'D'],
  ['bit', 'bit', 'bit', 'V'],
  ['varbit', 'varbit', 'bit varying', 'V'],
  ['numeric', 'numeric', 'numeric', 'N'],
  ['regclass', 'regclass', 'regclass', 'N'],
  ['record', 'record', 'record', 'P'],
  ['uuid', 'uuid', 'uuid', 'U'],
  ['jsonb', 'jsonb', 'jsonb', 'U'],
];

/** Types PostgreSQL clients look up by OID that have no TypeOid constant (pseudo-types, reg* types, vectors). */
const EXTRA: ReadonlyArray<readonly [number, string, string, string, 'b' | 'p']> = [
  [22, 'int2vector', 'int2vector', 'A', 'b'],
  [30, 'oidvector', 'oidvector', 'A', 'b'],
  [2206, 'regtype', 'regtype', 'N', 'b'],
  [4089, 'regnamespace', 'regnamespace', 'N', 'b'],
  [4096, 'regrole', 'regrole', 'N', 'b'],
  [2202, 'regprocedure', 'regprocedure', 'N', 'b'],
  [2275, 'cstring', 'cstring', 'P', 'p'],
  [2276, 'any', '"any"', 'P', 'p'],
  [2277, 'anyarray', 'anyarray', 'P', 'p'],
  [2278, 'void', 'void', 'P', 'p'],
  [2283, 'anyelement', 'anyelement', 'P', 'p'],
  [2279, 'trigger', 'trigger', 'P', 'p'],
];

function ioName(name: string, suffix: 'in' | 'out'): string {
  return `${name}${suffix}`;
}

/** Every type in cotwire's pg_type: the base types, their arrays (`_name`), and the pseudo-types clients ask about. */
export const PG_TYPES: readonly PgTypeRow[] = (() => {
  const rows: PgTypeRow[] = [];
  for (const [key, name, display, category] of BASE) {
    const oid = TypeOid[key];
    const array = ArrayOidOf.get(oid) ?? 0;
    rows.push({ oid, name, display, category, input: ioName(name, 'in'), output: ioName(name, 'out'), elem: 0, array, type: category === 'P' ? 'p' : 'b' });
    if (array !== 0) {
      rows.push({
        oid: array,
        name: `_${name}`,
        display: `${display}[]`,
        category: 'A',
        input: 'array_in',
        output: 'array_out',
        elem: oid,
        array: 0,
        type: 'b',
      });
    }
  }
  for (const [oid, name, display, category, type] of EXTRA) {
    rows.push({ oid, name, display, category, input: ioName(name, 'in'), output: ioName(name, 'out'), elem: 0, array: 0, type });
  }
  return rows;
})();

export const pgTypeLength = (oid: number): number => typeSize(oid);

/**
 * DuckDB type names (as duckdb_columns().data_type spells them) and the
 * PostgreSQL type each travels as. It must agree with the engine's codecs
 * (engines/duckdb/adapter/pg-types.ts); a test checks RowDescription against pg_attribute.
 */
export const DUCKDB_TYPE_OIDS: ReadonlyArray<readonly [string, number]> = [
  ['BOOLEAN', TypeOid.bool],
  ['TINYINT', TypeOid.int2],
  ['UTINYINT', TypeOid.int2],
  ['SMALLINT', TypeOid.int2],
  ['INTEGER', TypeOid.int4],
  ['USMALLINT', TypeOid.int4],
  ['BIGINT', TypeOid.int8],
  ['UINTEGER', TypeOid.oid],
  ['UBIGINT', TypeOid.numeric],
  ['HUGEINT', TypeOid.numeric],
  ['UHUGEINT', TypeOid.numeric],
  ['BIGNUM', TypeOid.numeric],
  ['VARINT', TypeOid.numeric],
  ['FLOAT', TypeOid.float4],
  ['DOUBLE', TypeOid.float8],
  ['VARCHAR', TypeOid.text],
  ['JSON', TypeOid.json],
  ['BLOB', TypeOid.bytea],
  ['DATE', TypeOid.date],
  ['TIME', TypeOid.time],
  ['TIME_NS', TypeOid.time],
  ['TIME WITH TIME ZONE', TypeOid.timetz],
  ['TIMESTAMP', TypeOid.timestamp],
  ['TIMESTAMP_S', TypeOid.timestamp],
  ['TIMESTAMP_MS', TypeOid.timestamp],
  ['TIMESTAMP_NS', TypeOid.timestamp],
  ['TIMESTAMP WITH TIME ZONE', TypeOid.timestamptz],
  ['INTERVAL', TypeOid.interval],
  ['UUID', TypeOid.uuid],
  ['BIT', TypeOid.bit],
];

/** Element OID → array OID, for lists; PostgreSQL has no array of json-encoded structs but _json. */
export const ARRAY_OIDS: ReadonlyArray<readonly [number, number]> = [...ArrayOidOf];

/**
 * PostgreSQL 15's default btree operator classes for the types cotwire
 * stores, with their OIDs: [oid, name, family, input type]. An index's
 * pg_index.indclass names them, and tools read an index's columns through
 * them (drizzle-kit joins pg_opclass to list an index at all).
 */
export const BTREE_OPCLASSES: ReadonlyArray<readonly [number, string, number, number]> = [
  [1978, 'int4_ops', 1976, 23],
  [1979, 'int2_ops', 1976, 21],
  [1981, 'oid_ops', 1989, 26],
  [3122, 'date_ops', 434, 1082],
  [3123, 'float8_ops', 1970, 701],
  [3124, 'int8_ops', 1976, 20],
  [3125, 'numeric_ops', 1988, 1700],
  [3126, 'text_ops', 1994, 25],
  [3127, 'timestamptz_ops', 434, 1184],
  [3128, 'timestamp_ops', 434, 1114],
  [10000, 'array_ops', 397, 2277],
  [10003, 'bool_ops', 424, 16],
  [10004, 'bpchar_ops', 426, 1042],
  [10006, 'bytea_ops', 428, 17],
  [10007, 'char_ops', 429, 18],
  [10012, 'float4_ops', 1970, 700],
  [10022, 'interval_ops', 1982, 1186],
  [10038, 'time_ops', 1996, 1083],
  [10041, 'timetz_ops', 2000, 1266],
  [10065, 'uuid_ops', 2968, 2950],
  [10088, 'jsonb_ops', 4033, 3802],
];

/** The families of BTREE_OPCLASSES: [oid, name]. */
export const BTREE_OPFAMILIES: ReadonlyArray<readonly [number, string]> = [
  [397, 'array_ops'],
  [424, 'bool_ops'],
  [426, 'bpchar_ops'],
  [428, 'bytea_ops'],
  [429, 'char_ops'],
  [434, 'datetime_ops'],
  [1970, 'float_ops'],
  [1976, 'integer_ops'],
  [1982, 'interval_ops'],
  [1988, 'numeric_ops'],
  [1989, 'oid_ops'],
  [1994, 'text_ops'],
  [1996, 'time_ops'],
  [2000, 'timetz_ops'],
  [2968, 'uuid_ops'],
  [4033, 'jsonb_ops'],
];
