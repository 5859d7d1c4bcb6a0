import {
  DuckDBTypeId,
  type DuckDBArrayType,
  type DuckDBBitValue,
  type DuckDBBlobValue,
  type DuckDBDateValue,
  type DuckDBDecimalType,
  type DuckDBEnumType,
  type DuckDBIntervalValue,
  type DuckDBListType,
  type DuckDBListValue,
  type DuckDBMapType,
  type DuckDBMapValue,
  type DuckDBStructType,
  type DuckDBStructValue,
  type DuckDBTimestampMillisecondsValue,
  type DuckDBTimestampNanosecondsValue,
  type DuckDBTimestampSecondsValue,
  type DuckDBTimestampTZValue,
  type DuckDBTimestampValue,
  type DuckDBTimeTZValue,
  type DuckDBTimeValue,
  type DuckDBType,
  type DuckDBUnionType,
  type DuckDBUnionValue,
  type DuckDBValue,
} from '@duckdb/node-api';
import { PgError } from '../../../errors/pg-error.js';
import { SqlState } from '../../../errors/sqlstate.js';
import { ArrayOidOf, PG_CHAR_VALUES, TypeOid, typeSize } from '../../../protocol/type-oids.js';
import * as bin from '../../../engine/pg-binary.js';
import { isUnconstrainedDecimal, trimDecimalZeros } from '../../../sql/numeric.js';
import {
  formatBytea,
  formatDate,
  formatFloat4,
  formatFloat8,
  formatInterval,
  formatTimeOfDay,
  formatTimestamp,
  formatTimestampTz,
  formatTimeTz,
  quoteArrayElement,
  TIMESTAMP_NEG_INFINITY,
  TIMESTAMP_POS_INFINITY,
  DATE_NEG_INFINITY,
  DATE_POS_INFINITY,
  type TimeZoneOffsets,
} from '../../../engine/pg-format.js';

export interface RenderContext {
  readonly zone: TimeZoneOffsets;
}

/** How one DuckDB type travels as a PostgreSQL type, in text and in binary. */
export interface PgCodec {
  readonly oid: number;
  readonly size: number;
  readonly typmod: number;
  /** Renders a non-null value in PostgreSQL's text format. */
  text(v: DuckDBValue, ctx: RenderContext): string;
  /** Renders a non-null value in PostgreSQL's binary format. */
  binary(v: DuckDBValue, ctx: RenderContext): Uint8Array;
  /** Renders a value nested in JSON (inside a STRUCT or MAP). */
  json(v: DuckDBValue, ctx: RenderContext): string;
}

const utf8 = (s: string): Buffer => Buffer.from(s, 'utf8');

function codec(
  oid: number,
  text: PgCodec['text'],
  binary: PgCodec['binary'],
  json: PgCodec['json'] = (v, ctx) => JSON.stringify(text(v, ctx)),
  typmod = -1,
): PgCodec {
  return { oid, size: typeSize(oid), typmod, text, binary, json };
}

const numberJson = (s: string): string => (/^-?\d/.test(s) ? s : 'null');

const BOOL = codec(
  TypeOid.bool,
  (v) => (v ? 't' : 'f'),
  (v) => Buffer.from([v ? 1 : 0]),
  (v) => (v ? 'true' : 'false'),
);
const INT2 = codec(
  TypeOid.int2,
  (v) => String(v),
  (v) => bin.int2(v as number),
  (v) => String(v),
);
const INT4 = codec(
  TypeOid.int4,
  (v) => String(v),
  (v) => bin.int4(v as number),
  (v) => String(v),
);
const INT8 = codec(
  TypeOid.int8,
  (v) => String(v),
  (v) => bin.int8(BigInt(v as number | bigint)),
  (v) => String(v),
);
// PostgreSQL's oid is an unsigned 32-bit integer: UINTEGER is exactly its domain, and the catalog's OID columns use it.
const OID = codec(
  TypeOid.oid,
  (v) => String(v),
  (v) => bin.uint4(Number(v)),
  (v) => String(v),
);
const BIG_NUMERIC = codec(
  TypeOid.numeric,
  (v) => String(v),
  (v) => bin.numeric(String(v)),
  (v) => String(v),
);
const FLOAT4 = codec(
  TypeOid.float4,
  (v) => formatFloat4(v as number),
  (v) => bin.float4(v as number),
  (v) => numberJson(formatFloat4(v as number)),
);
const FLOAT8 = codec(
  TypeOid.float8,
  (v) => formatFloat8(v as number),
  (v) => bin.float8(v as number),
  (v) => numberJson(formatFloat8(v as number)),
);
// DuckDB has one unbounded string type; PostgreSQL calls that text, and
// gives it to string literals and to parameters without a type.
const VARCHAR = codec(
  TypeOid.text,
  (v) => v as string,
  (v) => utf8(v as string),
  (v) => JSON.stringify(v),
);
const TEXT = codec(
  TypeOid.text,
  (v) => String(v),
  (v) => utf8(String(v)),
  (v) => JSON.stringify(String(v)),
);
const CHAR = codec(
  TypeOid.char,
  (v) => String(v),
  (v) => Buffer.from(String(v), 'latin1'),
  (v) => JSON.stringify(String(v)),
);

/** The catalog's "char" columns: an ENUM of exactly PG_CHAR_VALUES. */
function isPgChar(t: DuckDBEnumType): boolean {
  return t.values.length === PG_CHAR_VALUES.length && t.values.every((v, i) => v === PG_CHAR_VALUES[i]);
}
const JSON_CODEC = codec(
  TypeOid.json,
  (v) => v as string,
  (v) => utf8(v as string),
  (v) => v as string,
);
const BYTEA = codec(
  TypeOid.bytea,
  (v) => formatBytea((v as DuckDBBlobValue).bytes),
  (v) => (v as DuckDBBlobValue).bytes,
);
const DATE = codec(
  TypeOid.date,
  (v) => formatDate((v as DuckDBDateValue).days),
  (v) => {
    const days = (v as DuckDBDateValue).days;
    return bin.date(days, days >= DATE_POS_INFINITY, days <= DATE_NEG_INFINITY);
  },
);
const TIME = codec(
  TypeOid.time,
  (v) => formatTimeOfDay(Number((v as DuckDBTimeValue).micros)),
  (v) => bin.int8((v as DuckDBTimeValue).micros),
);
const TIME_NS = codec(
  TypeOid.time,
  (v) => formatTimeOfDay(Number((v as unknown as { nanos: bigint }).nanos / 1000n)),
  (v) => bin.int8((v as unknown as { nanos: bigint }).nanos / 1000n),
);
const TIMETZ = codec(
  TypeOid.timetz,
  (v) => formatTimeTz(Number((v as DuckDBTimeTZValue).micros), (v as DuckDBTimeTZValue).offset),
  (v) => bin.timetz((v as DuckDBTimeTZValue).micros, (v as DuckDBTimeTZValue).offset),
);

function timestampCodec(oid: number, micros: (v: DuckDBValue) => bigint, tz: boolean): PgCodec {
  return codec(oid, tz ? (v, ctx) => formatTimestampTz(micros(v), ctx.zone) : (v) => formatTimestamp(micros(v)), (v) => {
    const m = micros(v);
    return bin.timestamp(m, m >= TIMESTAMP_POS_INFINITY, m <= TIMESTAMP_NEG_INFINITY);
  });
}

/** Keeps DuckDB's infinities infinite when changing units. */
function scaleMicros(value: bigint, factor: bigint, divide: boolean): bigint {
  if (value >= TIMESTAMP_POS_INFINITY) return TIMESTAMP_POS_INFINITY;
  if (value <= TIMESTAMP_NEG_INFINITY) return TIMESTAMP_NEG_INFINITY;
  return divide ? value / factor : value * factor;
}

const TIMESTAMP = timestampCodec(TypeOid.timestamp, (v) => (v as DuckDBTimestampValue).micros, false);
const TIMESTAMP_S = timestampCodec(TypeOid.timestamp, (v) => scaleMicros((v as DuckDBTimestampSecondsValue).seconds, 1_000_000n, false), false);
const TIMESTAMP_MS = timestampCodec(TypeOid.timestamp, (v) => scaleMicros((v as DuckDBTimestampMillisecondsValue).millis, 1000n, false), false);
const TIMESTAMP_NS = timestampCodec(TypeOid.timestamp, (v) => scaleMicros((v as DuckDBTimestampNanosecondsValue).nanos, 1000n, true), false);
const TIMESTAMPTZ = timestampCodec(TypeOid.timestamptz, (v) => (v as DuckDBTimestampTZValue).micros, true);
const INTERVAL = codec(
  TypeOid.interval,
  (v) => {
    const i = v as DuckDBIntervalValue;
    return formatInterval(i.months, i.days, i.micros);
  },
  (v) => {
    const i = v as DuckDBIntervalValue;
    return bin.interval(i.months, i.days, i.micros);
  },
);
const UUID = codec(
  TypeOid.uuid,
  (v) => String(v),
  (v) => bin.uuid(String(v)),
);
const BIT = codec(
  TypeOid.varbit,
  (v) => (v as DuckDBBitValue).toString(),
  (v) => {
    const bits = (v as DuckDBBitValue).toString();
    const b = Buffer.alloc(4 + Math.ceil(bits.length / 8));
    b.writeInt32BE(bits.length, 0);
    for (let i = 0; i < bits.length; i++) {
      if (bits[i] === '1') b[4 + (i >> 3)] = (b[4 + (i >> 3)] as number) | (0x80 >> (i & 7));
    }
    return b;
  },
);

function decimalCodec(t: DuckDBDecimalType): PgCodec {
  if (isUnconstrainedDecimal(t.width, t.scale)) {
    return codec(
      TypeOid.numeric,
      (v) => trimDecimalZeros(String(v)),
      (v) => bin.numeric(trimDecimalZeros(String(v))),
      (v) => trimDecimalZeros(String(v)),
    );
  }
  return codec(
    TypeOid.numeric,
    (v) => String(v),
    (v) => bin.numeric(String(v)),
    (v) => String(v),
    ((t.width << 16) | t.scale) + 4,
  );
}

/** STRUCT, MAP and UNION have no PostgreSQL counterpart; they travel as json. */
function jsonCodec(render: (v: DuckDBValue, ctx: RenderContext) => string): PgCodec {
  return codec(TypeOid.json, render, (v, ctx) => utf8(render(v, ctx)), render);
}

function structCodec(t: DuckDBStructType): PgCodec {
  const fields = t.entryNames.map((name, i) => ({ name, key: JSON.stringify(name), codec: codecFor(t.entryTypes[i] as DuckDBType) }));
  return jsonCodec((v, ctx) => {
    const entries = (v as DuckDBStructValue).entries;
    const parts = fields.map((f) => {
      const value = entries[f.name];
      return `${f.key}:${value === null || value === undefined ? 'null' : f.codec.json(value, ctx)}`;
    });
    return `{${parts.join(',')}}`;
  });
}

function mapCodec(t: DuckDBMapType): PgCodec {
  const key = codecFor(t.keyType);
  const value = codecFor(t.valueType);
  return jsonCodec((v, ctx) => {
    const parts = (v as DuckDBMapValue).entries.map((e) => {
      const k = e.key === null ? 'null' : typeof e.key === 'string' ? e.key : key.text(e.key, ctx);
      return `${JSON.stringify(k)}:${e.value === null ? 'null' : value.json(e.value, ctx)}`;
    });
    return `{${parts.join(',')}}`;
  });
}

function unionCodec(t: DuckDBUnionType): PgCodec {
  const members = new Map(t.memberTags.map((tag, i) => [tag, codecFor(t.memberTypes[i] as DuckDBType)]));
  return jsonCodec((v, ctx) => {
    const u = v as DuckDBUnionValue;
    const c = members.get(u.tag);
    return u.value === null || c === undefined ? 'null' : c.json(u.value, ctx);
  });
}

function listCodec(elementType: DuckDBType): PgCodec {
  const element = codecFor(elementType);
  const isNested = elementType.typeId === DuckDBTypeId.LIST || elementType.typeId === DuckDBTypeId.ARRAY;
  const arrayOid = isNested ? element.oid : ArrayOidOf.get(element.oid);
  if (arrayOid === undefined) {
    // No array type in PostgreSQL for the element: send the list as json.
    return jsonCodec((v, ctx) => listJson(v, element, ctx));
  }
  const innermost = isNested ? innermostElement(elementType) : element;
  const text = (v: DuckDBValue, ctx: RenderContext): string => {
    const items = (v as DuckDBListValue).items;
    const parts = items.map((item) => {
      if (item === null) return 'NULL';
      return isNested ? element.text(item, ctx) : quoteArrayElement(element.text(item, ctx));
    });
    return `{${parts.join(',')}}`;
  };
  const binary = (v: DuckDBValue, ctx: RenderContext): Uint8Array => {
    const dims: number[] = [];
    const flat: (Uint8Array | null)[] = [];
    collect(v as DuckDBListValue, 0, dims, flat, innermost, ctx);
    return bin.array(innermost.oid, dims[0] === 0 ? [] : dims, flat);
  };
  return codec(arrayOid, text, binary, (v, ctx) => listJson(v, element, ctx));
}

function listJson(v: DuckDBValue, element: PgCodec, ctx: RenderContext): string {
  return `[${(v as DuckDBListValue).items.map((i) => (i === null ? 'null' : element.json(i, ctx))).join(',')}]`;
}

function innermostElement(t: DuckDBType): PgCodec {
  let inner: DuckDBType = t;
  while (inner.typeId === DuckDBTypeId.LIST || inner.typeId === DuckDBTypeId.ARRAY) {
    inner = (inner as DuckDBListType | DuckDBArrayType).valueType;
  }
  return codecFor(inner);
}

/** Flattens nested lists into PostgreSQL's rectangular array layout. */
function collect(list: DuckDBListValue, depth: number, dims: number[], flat: (Uint8Array | null)[], innermost: PgCodec, ctx: RenderContext): void {
  const n = list.items.length;
  if (dims.length === depth) dims.push(n);
  else if (dims[depth] !== n) {
    throw new PgError(SqlState.FeatureNotSupported, 'multidimensional arrays must have sub-arrays with matching dimensions to be sent in binary format');
  }
  for (const item of list.items) {
    if (item !== null && typeof item === 'object' && 'items' in item && innermost.oid !== TypeOid.json) {
      collect(item as DuckDBListValue, depth + 1, dims, flat, innermost, ctx);
    } else {
      flat.push(item === null ? null : innermost.binary(item, ctx));
    }
  }
}

const cache = new WeakMap<DuckDBType, PgCodec>();

/** A codec whose text form is the engine's string itself, byte for byte (text and json). */
export function isVerbatimText(codec: PgCodec): boolean {
  return codec === VARCHAR || codec === JSON_CODEC;
}

/** The PostgreSQL face of a DuckDB type. Unknown types travel as text. */
export function codecFor(t: DuckDBType): PgCodec {
  const hit = cache.get(t);
  if (hit !== undefined) return hit;
  const c = computeCodec(t);
  cache.set(t, c);
  return c;
}

function computeCodec(t: DuckDBType): PgCodec {
  switch (t.typeId) {
    case DuckDBTypeId.BOOLEAN:
      return BOOL;
    case DuckDBTypeId.TINYINT:
    case DuckDBTypeId.UTINYINT:
    case DuckDBTypeId.SMALLINT:
      return INT2;
    case DuckDBTypeId.INTEGER:
    case DuckDBTypeId.USMALLINT:
      return INT4;
    case DuckDBTypeId.UINTEGER:
      return OID;
    case DuckDBTypeId.BIGINT:
      return INT8;
    case DuckDBTypeId.UBIGINT:
    case DuckDBTypeId.HUGEINT:
    case DuckDBTypeId.UHUGEINT:
    case DuckDBTypeId.BIGNUM:
      return BIG_NUMERIC;
    case DuckDBTypeId.FLOAT:
      return FLOAT4;
    case DuckDBTypeId.DOUBLE:
      return FLOAT8;
    case DuckDBTypeId.DECIMAL:
      return decimalCodec(t as DuckDBDecimalType);
    case DuckDBTypeId.VARCHAR:
      return t.alias === 'JSON' ? JSON_CODEC : VARCHAR;
    case DuckDBTypeId.BLOB:
      return BYTEA;
    case DuckDBTypeId.DATE:
      return DATE;
    case DuckDBTypeId.TIME:
      return TIME;
    case DuckDBTypeId.TIME_NS:
      return TIME_NS;
    case DuckDBTypeId.TIME_TZ:
      return TIMETZ;
    case DuckDBTypeId.TIMESTAMP:
      return TIMESTAMP;
    case DuckDBTypeId.TIMESTAMP_S:
      return TIMESTAMP_S;
    case DuckDBTypeId.TIMESTAMP_MS:
      return TIMESTAMP_MS;
    case DuckDBTypeId.TIMESTAMP_NS:
      return TIMESTAMP_NS;
    case DuckDBTypeId.TIMESTAMP_TZ:
      return TIMESTAMPTZ;
    case DuckDBTypeId.INTERVAL:
      return INTERVAL;
    case DuckDBTypeId.UUID:
      return UUID;
    case DuckDBTypeId.BIT:
      return BIT;
    case DuckDBTypeId.LIST:
    case DuckDBTypeId.ARRAY:
      return listCodec((t as DuckDBListType | DuckDBArrayType).valueType);
    case DuckDBTypeId.STRUCT:
      return structCodec(t as DuckDBStructType);
    case DuckDBTypeId.MAP:
      return mapCodec(t as DuckDBMapType);
    case DuckDBTypeId.UNION:
      return unionCodec(t as DuckDBUnionType);
    default:
      if (t.typeId === DuckDBTypeId.ENUM && isPgChar(t as DuckDBEnumType)) return CHAR;
      // ENUM, NULL, GEOMETRY, VARIANT ...: their text form is exact enough.
      return TEXT;
  }
}

/** The codec of a column whose type the engine could not resolve before execution. */
export const UNRESOLVED_CODEC: PgCodec = TEXT;
