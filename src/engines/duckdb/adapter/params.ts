import {
  BIGINT,
  BLOB,
  BOOLEAN,
  DATE,
  DOUBLE,
  DECIMAL,
  DuckDBBlobValue,
  DuckDBDecimalValue,
  DuckDBDateValue,
  DuckDBIntervalValue,
  DuckDBListValue,
  DuckDBTimestampTZValue,
  DuckDBTimestampValue,
  DuckDBTimeValue,
  DuckDBTypeId,
  FLOAT,
  INTEGER,
  INTERVAL,
  LIST,
  TIME,
  TIMESTAMP,
  TIMESTAMPTZ,
  VARCHAR,
  type DuckDBDecimalType,
  type DuckDBPreparedStatement,
  type DuckDBType,
  type DuckDBValue,
} from '@duckdb/node-api';
import { parseArrayLiteral, type ArrayItem } from '../../../sql/array-literal.js';
import { PgError } from '../../../errors/pg-error.js';
import { SqlState } from '../../../errors/sqlstate.js';
import { ElementOidOf, TypeOid } from '../../../protocol/type-oids.js';
import { isUnconstrainedDecimal, losesDigits } from '../../../sql/numeric.js';
import { pgTimestampText } from '../../../sql/timestamp-text.js';
import * as bin from '../../../engine/pg-binary.js';
import type { WireParam } from '../../../engine/port.js';

interface TypedValue {
  readonly value: DuckDBValue;
  readonly type: DuckDBType;
}

const DATE_INF_DAYS = 2147483647;
const TS_INF = 9223372036854775807n;

/** Binds Bind's parameters to a DuckDB statement (1-based), converting PostgreSQL formats. */
export function bindParams(prepared: DuckDBPreparedStatement, paramTypes: readonly (DuckDBType | null)[], params: readonly WireParam[]): void {
  prepared.clearBindings();
  params.forEach((p, i) => {
    const index = i + 1;
    if (p.value === null) {
      prepared.bindNull(index);
      return;
    }
    const target = paramTypes[i] ?? null;
    const typed = p.format === 1 ? fromBinary(p.value, p.typeOid, i + 1) : fromText(p.value.toString('utf8'), target, i + 1);
    if (p.format === 1 && p.typeOid === TypeOid.numeric && target?.typeId === DuckDBTypeId.DECIMAL)
      exactNumeric(String(typed.value), target as DuckDBDecimalType, index);
    try {
      prepared.bindValue(index, typed.value, typed.type);
    } catch (err) {
      throw new PgError(SqlState.InvalidParameterValue, `could not bind parameter $${index}: ${(err as Error).message}`);
    }
  });
}

function fromText(text: string, target: DuckDBType | null, index: number): TypedValue {
  switch (target?.typeId) {
    case DuckDBTypeId.BOOLEAN:
      return { value: parseBool(text, index), type: BOOLEAN };
    case DuckDBTypeId.BLOB:
      return { value: new DuckDBBlobValue(parseBytea(text, index)), type: BLOB };
    case DuckDBTypeId.LIST:
    case DuckDBTypeId.ARRAY:
      if (text.startsWith('{')) return arrayFromText(text, index, target);
      return { value: text, type: VARCHAR };
    case DuckDBTypeId.TIMESTAMP_TZ:
    case DuckDBTypeId.TIMESTAMP:
      // PostgreSQL's forms DuckDB reads otherwise: a space before a numeric offset ('2024-07-01
      // 00:00:00.000 +00:00', as Sequelize writes them), ' Z', a time without seconds.
      return { value: pgTimestampText(text) ?? text, type: VARCHAR };
    case DuckDBTypeId.DECIMAL:
      exactNumeric(text, target as DuckDBDecimalType, index);
      return { value: text, type: VARCHAR };
    case DuckDBTypeId.SMALLINT:
    case DuckDBTypeId.INTEGER:
    case DuckDBTypeId.BIGINT:
      return { value: String(integerInput(text, target.typeId, index)), type: VARCHAR };
    case DuckDBTypeId.FLOAT:
      return { value: floatInput(text, 'real', index), type: FLOAT };
    case DuckDBTypeId.DOUBLE:
      return { value: floatInput(text, 'double precision', index), type: DOUBLE };
    default:
      // DuckDB casts VARCHAR to the parameter's type with PostgreSQL-compatible input syntax.
      return { value: text, type: VARCHAR };
  }
}

/**
 * A numeric parameter bound for numeric without precision (DECIMAL(38,9)):
 * PostgreSQL keeps every digit, DuckDB's cast would round past the ninth
 * decimal. Refused instead (22003), as a number too wide for it is. A
 * declared scale (numeric(10,2)) rounds in PostgreSQL too, and is left to.
 */
function exactNumeric(text: string, target: DuckDBDecimalType, index: number): void {
  if (!isUnconstrainedDecimal(target.width, target.scale) || !losesDigits(text, target.scale)) return;
  throw new PgError(SqlState.NumericValueOutOfRange, `numeric value of parameter $${index} has more digits than numeric without a precision holds here`, {
    detail: `cotwire holds numeric without a precision as DECIMAL(38,${target.scale}): ${38 - target.scale} digits before the point and ${target.scale} after, and would round ${text.length > 60 ? `${text.slice(0, 60)}...` : text}.`,
    hint: 'Declare the column or cast the parameter as numeric(p,s) with the scale it needs (p up to 38), or send it as float8.',
  });
}

const INTEGER_RANGES: Readonly<Partial<Record<DuckDBTypeId, readonly [string, bigint]>>> = {
  [DuckDBTypeId.SMALLINT]: ['smallint', 1n << 15n],
  [DuckDBTypeId.INTEGER]: ['integer', 1n << 31n],
  [DuckDBTypeId.BIGINT]: ['bigint', 1n << 63n],
};

/**
 * int2in, int4in, int8in (PostgreSQL 15): an optional sign and decimal
 * digits, with spaces around. DuckDB's cast also reads '1.5' (rounded to 2),
 * '1e5', '0x10' and '1_000', which PostgreSQL refuses.
 */
export function integerInput(text: string, typeId: DuckDBTypeId, index: number): bigint {
  const [name, limit] = INTEGER_RANGES[typeId] ?? ['bigint', 1n << 63n];
  if (!/^[ \t\n\r\v\f]*[+-]?\d+[ \t\n\r\v\f]*$/.test(text)) {
    throw new PgError(SqlState.InvalidTextRepresentation, `invalid input syntax for type ${name}: "${text}"`, { detail: `in parameter $${index}` });
  }
  const value = BigInt(text.trim());
  if (value >= limit || value < -limit) {
    throw new PgError(SqlState.NumericValueOutOfRange, `value "${text}" is out of range for type ${name}`, { detail: `in parameter $${index}` });
  }
  return value;
}

/**
 * float4in, float8in: what strtod reads (decimal, hexadecimal integers,
 * NaN, Infinity, inf), with spaces around. A value too large or too small
 * for the type is PostgreSQL's 22003; DuckDB's cast reads '1e400' as
 * Infinity and '1_000' as 1000.
 */
export function floatInput(text: string, name: 'real' | 'double precision', index: number): number {
  const s = text.replace(/^[ \t\n\r\v\f]+|[ \t\n\r\v\f]+$/g, '').toLowerCase();
  const fail = (code: string, message: string): PgError => new PgError(code, message, { detail: `in parameter $${index}` });
  const word = /^([+-]?)(nan|inf|infinity)$/.exec(s);
  if (word !== null) return word[2] === 'nan' ? Number.NaN : word[1] === '-' ? Number.NEGATIVE_INFINITY : Number.POSITIVE_INFINITY;
  const hex = /^([+-]?)0x([0-9a-f]+)$/.exec(s);
  let value: number;
  if (hex !== null) value = (hex[1] === '-' ? -1 : 1) * Number.parseInt(hex[2] as string, 16);
  else if (/^[+-]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$/.test(s)) value = Number(s);
  else throw fail(SqlState.InvalidTextRepresentation, `invalid input syntax for type ${name}: "${text}"`);
  const narrowed = name === 'real' ? Math.fround(value) : value;
  const zeroText = /^[+-]?(0x)?[0.]*(e|$)/.test(s);
  if (!Number.isFinite(narrowed) || (narrowed === 0 && !zeroText)) throw fail(SqlState.NumericValueOutOfRange, `"${text}" is out of range for type ${name}`);
  return value;
}

const TRUE_WORDS = ['true', 'yes', 'on'];
const FALSE_WORDS = ['false', 'no', 'off'];

/** boolin: t/f, true/false, yes/no, on/off, 1/0, and unique prefixes, case-insensitively. */
export function parseBool(text: string, index: number): boolean {
  const s = text.trim().toLowerCase();
  if (s === '1') return true;
  if (s === '0') return false;
  if (s.length > 0) {
    const isPrefix = (words: string[]): boolean => words.some((w) => w.startsWith(s) && (s.length > 1 || (w !== 'on' && w !== 'off')));
    if (s !== 'o' && isPrefix(TRUE_WORDS)) return true;
    if (s !== 'o' && isPrefix(FALSE_WORDS)) return false;
  }
  throw new PgError(SqlState.InvalidTextRepresentation, `invalid input syntax for type boolean: "${text}"`, {
    detail: `in parameter $${index}`,
  });
}

/** byteain: the hex format (\x0102) or the escape format (a\\b\001). */
export function parseBytea(text: string, index: number): Uint8Array {
  const bad = (): PgError =>
    new PgError(SqlState.InvalidTextRepresentation, 'invalid input syntax for type bytea', {
      detail: `in parameter $${index}`,
    });
  if (text.startsWith('\\x')) {
    const hex = text.slice(2).replace(/\s+/g, '');
    if (hex.length % 2 !== 0 || /[^0-9a-fA-F]/.test(hex)) throw bad();
    return Buffer.from(hex, 'hex');
  }
  const out: number[] = [];
  const raw = Buffer.from(text, 'utf8');
  for (let i = 0; i < raw.length; i++) {
    const c = raw[i] as number;
    if (c !== 0x5c) {
      out.push(c);
      continue;
    }
    if (raw[i + 1] === 0x5c) {
      out.push(0x5c);
      i++;
      continue;
    }
    const oct = raw.subarray(i + 1, i + 4).toString('latin1');
    if (!/^[0-3][0-7][0-7]$/.test(oct)) throw bad();
    out.push(parseInt(oct, 8));
    i += 3;
  }
  return Uint8Array.from(out);
}

/** Element types a text array's items are converted to here, so the list binds with the statement's own type. */
const ELEMENT_PARSERS: Partial<Record<DuckDBTypeId, { type: DuckDBType; parse: (s: string) => DuckDBValue | undefined }>> = {
  [DuckDBTypeId.SMALLINT]: { type: INTEGER, parse: (s) => (/^\s*[+-]?\d+\s*$/.test(s) && Math.abs(Number(s)) <= 32768 ? Number(s) : undefined) },
  [DuckDBTypeId.INTEGER]: { type: INTEGER, parse: (s) => (/^\s*[+-]?\d+\s*$/.test(s) && Math.abs(Number(s)) <= 2147483648 ? Number(s) : undefined) },
  [DuckDBTypeId.BIGINT]: { type: BIGINT, parse: (s) => (/^\s*[+-]?\d+\s*$/.test(s) ? BigInt(s.trim()) : undefined) },
  [DuckDBTypeId.FLOAT]: { type: DOUBLE, parse: (s) => (s.trim() !== '' && !Number.isNaN(Number(s)) ? Number(s) : undefined) },
  [DuckDBTypeId.DOUBLE]: { type: DOUBLE, parse: (s) => (s.trim() !== '' && !Number.isNaN(Number(s)) ? Number(s) : undefined) },
  [DuckDBTypeId.VARCHAR]: { type: VARCHAR, parse: (s) => s },
};

/**
 * An element of a numeric array: PostgreSQL types the parameter numeric[] without the column's
 * scale, so its items are not rounded to it (38 digits, at least 9 after the point, rounded half
 * away from zero past that).
 */
function decimalElement(t: DuckDBType): { type: DuckDBType; parse: (s: string) => DuckDBValue | undefined } {
  const width = 38;
  const scale = Math.max((t as DuckDBDecimalType).scale, 9);
  return {
    type: DECIMAL(width, scale),
    parse: (s) => {
      const m = /^\s*([+-]?)(\d*)(?:\.(\d*))?\s*$/.exec(s);
      if (m === null || `${m[2] ?? ''}${m[3] ?? ''}` === '') return undefined;
      const frac = m[3] ?? '';
      let scaled = BigInt(`${m[2] || '0'}${frac.slice(0, scale).padEnd(scale, '0')}`);
      if ((frac[scale] ?? '0') >= '5') scaled += 1n;
      return new DuckDBDecimalValue(m[1] === '-' ? -scaled : scaled, width, scale);
    },
  };
}

function arrayFromText(text: string, index: number, target: DuckDBType): TypedValue {
  const items = parseArrayLiteral(text);
  if (items === null) {
    throw new PgError(SqlState.InvalidTextRepresentation, `malformed array literal: "${text}"`, { detail: `in parameter $${index}` });
  }
  const depth = (xs: ArrayItem[]): number => {
    const first = xs.find((x) => x !== null);
    return Array.isArray(first) ? 1 + depth(first) : 1;
  };
  const levels = depth(items);
  // `id = ANY($1)`: DuckDB types the list from the value bound, so a list of strings would make
  // list_contains(VARCHAR[], INTEGER) fail. A one-level list of a plain element type binds as that type.
  const child = (target as { valueType?: DuckDBType }).valueType;
  const element =
    levels === 1 && child !== undefined ? (child.typeId === DuckDBTypeId.DECIMAL ? decimalElement(child) : ELEMENT_PARSERS[child.typeId]) : undefined;
  if (element !== undefined) {
    const values = (items as Array<string | null>).map((x) => {
      if (x === null) return null;
      const v = element.parse(x);
      if (v === undefined) {
        throw new PgError(SqlState.InvalidTextRepresentation, `invalid input syntax for type ${element.type.toString().toLowerCase()}: "${x}"`, {
          detail: `in parameter $${index}`,
        });
      }
      return v;
    });
    return { value: new DuckDBListValue(values), type: LIST(element.type) };
  }
  let type: DuckDBType = VARCHAR;
  for (let d = levels; d > 0; d--) type = LIST(type);
  const toValue = (xs: ArrayItem[]): DuckDBListValue => new DuckDBListValue(xs.map((x) => (Array.isArray(x) ? toValue(x) : x)));
  return { value: toValue(items), type };
}

function fromBinary(b: Buffer, oid: number, index: number): TypedValue {
  switch (oid) {
    case TypeOid.bool:
      return { value: bin.readBool(b), type: BOOLEAN };
    case TypeOid.int2:
      return { value: bin.readInt2(b), type: INTEGER };
    case TypeOid.int4:
      return { value: bin.readInt4(b), type: INTEGER };
    case TypeOid.int8:
      return { value: bin.readInt8(b), type: BIGINT };
    case TypeOid.oid:
      return { value: BigInt(b.length === 4 ? b.readUInt32BE(0) : 0), type: BIGINT };
    case TypeOid.float4:
      return { value: bin.readFloat4(b), type: FLOAT };
    case TypeOid.float8:
      return { value: bin.readFloat8(b), type: DOUBLE };
    case TypeOid.numeric:
      return { value: bin.readNumeric(b), type: VARCHAR };
    case TypeOid.text:
    case TypeOid.varchar:
    case TypeOid.bpchar:
    case TypeOid.name:
    case TypeOid.json:
    case TypeOid.unknown:
    case TypeOid.char:
      return { value: b.toString('utf8'), type: VARCHAR };
    case TypeOid.jsonb:
      if (b[0] !== 1) throw unsupportedBinary(oid, index, 'unsupported jsonb version number');
      return { value: b.subarray(1).toString('utf8'), type: VARCHAR };
    case TypeOid.bytea:
      return { value: new DuckDBBlobValue(Uint8Array.from(b)), type: BLOB };
    case TypeOid.uuid:
      return { value: bin.readUuid(b), type: VARCHAR };
    case TypeOid.date: {
      const days = bin.readDate(b);
      const v = days === Infinity ? DATE_INF_DAYS : days === -Infinity ? -DATE_INF_DAYS : days;
      return { value: new DuckDBDateValue(v), type: DATE };
    }
    case TypeOid.timestamp:
    case TypeOid.timestamptz: {
      const t = bin.readTimestamp(b);
      const micros = t === 'infinity' ? TS_INF : t === '-infinity' ? -TS_INF : t;
      return oid === TypeOid.timestamp
        ? { value: new DuckDBTimestampValue(micros), type: TIMESTAMP }
        : { value: new DuckDBTimestampTZValue(micros), type: TIMESTAMPTZ };
    }
    case TypeOid.time:
      return { value: new DuckDBTimeValue(bin.readInt8(b)), type: TIME };
    case TypeOid.interval: {
      const iv = bin.readInterval(b);
      return { value: new DuckDBIntervalValue(iv.months, iv.days, iv.micros), type: INTERVAL };
    }
    default: {
      const elementOid = ElementOidOf.get(oid);
      if (elementOid !== undefined) return arrayFromBinary(b, elementOid, index);
      throw unsupportedBinary(oid, index);
    }
  }
}

function arrayFromBinary(b: Buffer, elementOid: number, index: number): TypedValue {
  const arr = bin.readArray(b);
  if (arr.elementOid !== elementOid) {
    throw new PgError(SqlState.DatatypeMismatch, `wrong element type in binary array parameter $${index}: ${arr.elementOid}, expected ${elementOid}`);
  }
  const elements = arr.elements.map((e) => (e === null ? null : fromBinary(e, elementOid, index)));
  const elementType = elements.find((e) => e !== null)?.type ?? VARCHAR;
  const values = elements.map((e) => (e === null ? null : e.value));
  // Rebuild the dimensions as nested lists, innermost first.
  let level: DuckDBValue[] = values;
  let type: DuckDBType = elementType;
  for (let d = arr.dims.length - 1; d >= 0; d--) {
    const size = arr.dims[d] as number;
    type = LIST(type);
    if (d === 0) break;
    const grouped: DuckDBValue[] = [];
    for (let i = 0; i < level.length; i += size) grouped.push(new DuckDBListValue(level.slice(i, i + size)));
    level = grouped;
  }
  if (arr.dims.length === 0) type = LIST(elementType);
  return { value: new DuckDBListValue(level), type };
}

function unsupportedBinary(oid: number, index: number, detail?: string): PgError {
  return new PgError(SqlState.FeatureNotSupported, `binary format is not supported for parameter $${index} of type oid ${oid}`, {
    hint: detail ?? 'Send this parameter in text format.',
  });
}
