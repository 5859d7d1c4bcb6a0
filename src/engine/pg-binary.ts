import { PgError } from '../errors/pg-error.js';
import { SqlState } from '../errors/sqlstate.js';
import { TypeOid } from '../protocol/type-oids.js';

/**
 * PostgreSQL's binary send/receive formats for the types cotwire speaks in
 * binary. Dates count days and timestamps microseconds from 2000-01-01.
 */

export const PG_EPOCH_DAYS = 10_957; // 2000-01-01 - 1970-01-01
export const PG_EPOCH_MICROS = 946_684_800_000_000n;
const DATE_INF = 0x7fffffff;
const DATE_NEG_INF = -0x80000000;
const TS_INF = 0x7fffffffffffffffn;
const TS_NEG_INF = -0x8000000000000000n;

export function int2(v: number): Buffer {
  const b = Buffer.allocUnsafe(2);
  b.writeInt16BE(v);
  return b;
}
export function int4(v: number): Buffer {
  const b = Buffer.allocUnsafe(4);
  b.writeInt32BE(v);
  return b;
}
export function uint4(v: number): Buffer {
  const b = Buffer.allocUnsafe(4);
  b.writeUInt32BE(v, 0);
  return b;
}

export function int8(v: bigint): Buffer {
  const b = Buffer.allocUnsafe(8);
  b.writeBigInt64BE(v);
  return b;
}
export function float4(v: number): Buffer {
  const b = Buffer.allocUnsafe(4);
  b.writeFloatBE(v);
  return b;
}
export function float8(v: number): Buffer {
  const b = Buffer.allocUnsafe(8);
  b.writeDoubleBE(v);
  return b;
}

/** Date from days since 1970, with DuckDB's infinities mapped to PostgreSQL's. */
export function date(days: number, posInf: boolean, negInf: boolean): Buffer {
  return int4(posInf ? DATE_INF : negInf ? DATE_NEG_INF : days - PG_EPOCH_DAYS);
}

export function timestamp(micros: bigint, posInf: boolean, negInf: boolean): Buffer {
  return int8(posInf ? TS_INF : negInf ? TS_NEG_INF : micros - PG_EPOCH_MICROS);
}

export function interval(months: number, days: number, micros: bigint): Buffer {
  const b = Buffer.allocUnsafe(16);
  b.writeBigInt64BE(micros, 0);
  b.writeInt32BE(days, 8);
  b.writeInt32BE(months, 12);
  return b;
}

export function timetz(micros: bigint, offsetSecondsEast: number): Buffer {
  const b = Buffer.allocUnsafe(12);
  b.writeBigInt64BE(micros, 0);
  // PostgreSQL stores the zone as seconds west of UTC.
  b.writeInt32BE(-offsetSecondsEast, 8);
  return b;
}

export function uuid(text: string): Buffer {
  return Buffer.from(text.replaceAll('-', ''), 'hex');
}

/** numeric_send, from a decimal string such as "-123.4500", "NaN", "Infinity". */
export function numeric(text: string): Buffer {
  if (text === 'NaN') return numericHeader(0, 0, 0xc000, 0);
  if (text === 'Infinity') return numericHeader(0, 0, 0xd000, 0);
  if (text === '-Infinity') return numericHeader(0, 0, 0xf000, 0);
  const negative = text.startsWith('-');
  const body = negative ? text.slice(1) : text;
  const dot = body.indexOf('.');
  const intPart = (dot < 0 ? body : body.slice(0, dot)).replace(/^0+/, '');
  const fracPart = dot < 0 ? '' : body.slice(dot + 1);
  const dscale = fracPart.length;
  const intPadded = intPart.padStart(Math.ceil(intPart.length / 4) * 4, '0');
  const fracPadded = fracPart.padEnd(Math.ceil(fracPart.length / 4) * 4, '0');
  const groups: number[] = [];
  for (let i = 0; i < intPadded.length; i += 4) groups.push(Number(intPadded.slice(i, i + 4)));
  let weight = groups.length - 1;
  for (let i = 0; i < fracPadded.length; i += 4) groups.push(Number(fracPadded.slice(i, i + 4)));
  let first = 0;
  while (first < groups.length && groups[first] === 0) {
    first++;
    weight--;
  }
  let last = groups.length;
  while (last > first && groups[last - 1] === 0) last--;
  const digits = groups.slice(first, last);
  if (digits.length === 0) return numericHeader(0, 0, 0, dscale);
  const b = numericHeader(digits.length, weight, negative ? 0x4000 : 0, dscale, digits.length * 2);
  digits.forEach((d, i) => {
    b.writeInt16BE(d, 8 + i * 2);
  });
  return b;
}

function numericHeader(ndigits: number, weight: number, sign: number, dscale: number, extra = 0): Buffer {
  const b = Buffer.alloc(8 + extra);
  b.writeInt16BE(ndigits, 0);
  b.writeInt16BE(weight, 2);
  b.writeUInt16BE(sign, 4);
  b.writeInt16BE(dscale, 6);
  return b;
}

/** array_send for a one- or multi-dimensional array of already-encoded elements. */
export function array(elementOid: number, dims: readonly number[], elements: readonly (Uint8Array | null)[]): Buffer {
  let size = 12 + dims.length * 8;
  let hasNull = 0;
  for (const e of elements) {
    size += 4 + (e === null ? 0 : e.length);
    if (e === null) hasNull = 1;
  }
  const b = Buffer.allocUnsafe(size);
  b.writeInt32BE(dims.length, 0);
  b.writeInt32BE(hasNull, 4);
  b.writeUInt32BE(elementOid, 8);
  let o = 12;
  for (const d of dims) {
    b.writeInt32BE(d, o);
    b.writeInt32BE(1, o + 4);
    o += 8;
  }
  for (const e of elements) {
    if (e === null) {
      b.writeInt32BE(-1, o);
      o += 4;
    } else {
      b.writeInt32BE(e.length, o);
      b.set(e, o + 4);
      o += 4 + e.length;
    }
  }
  return b;
}

/**
 * array_send for a one-dimensional float4[] of every value of `vectors`, one
 * after another: written in place, where an element Buffer each (array())
 * cost the embedding worker most of its time and garbage.
 */
export function float4Array(vectors: readonly Float32Array[]): Buffer {
  let count = 0;
  for (const v of vectors) count += v.length;
  const b = Buffer.allocUnsafe(20 + count * 8);
  b.writeInt32BE(1, 0);
  b.writeInt32BE(0, 4);
  b.writeUInt32BE(TypeOid.float4, 8);
  b.writeInt32BE(count, 12);
  b.writeInt32BE(1, 16);
  let o = 20;
  for (const v of vectors) {
    for (let i = 0; i < v.length; i++) {
      b.writeInt32BE(4, o);
      b.writeFloatBE(v[i] as number, o + 4);
      o += 8;
    }
  }
  return b;
}

// ---- receive: binary parameters --------------------------------------------------------------

function invalid(what: string, detail?: string): PgError {
  return new PgError(SqlState.InvalidBinaryRepresentation, `incorrect binary data format in bind parameter: ${what}`, detail === undefined ? {} : { detail });
}

function expectLength(b: Buffer, n: number, what: string): void {
  if (b.length !== n) throw invalid(what, `expected ${n} bytes, got ${b.length}`);
}

export function readInt2(b: Buffer): number {
  expectLength(b, 2, 'int2');
  return b.readInt16BE(0);
}
export function readInt4(b: Buffer): number {
  expectLength(b, 4, 'int4');
  return b.readInt32BE(0);
}
export function readInt8(b: Buffer): bigint {
  expectLength(b, 8, 'int8');
  return b.readBigInt64BE(0);
}
export function readFloat4(b: Buffer): number {
  expectLength(b, 4, 'float4');
  return b.readFloatBE(0);
}
export function readFloat8(b: Buffer): number {
  expectLength(b, 8, 'float8');
  return b.readDoubleBE(0);
}
export function readBool(b: Buffer): boolean {
  expectLength(b, 1, 'bool');
  return b[0] !== 0;
}
export function readUuid(b: Buffer): string {
  expectLength(b, 16, 'uuid');
  const h = b.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}
/** Days since 1970, or ±Infinity. */
export function readDate(b: Buffer): number {
  const v = readInt4(b);
  if (v === DATE_INF) return Infinity;
  if (v === DATE_NEG_INF) return -Infinity;
  return v + PG_EPOCH_DAYS;
}
/** Micros since 1970, or null for ±infinity (returned as the sign). */
export function readTimestamp(b: Buffer): bigint | 'infinity' | '-infinity' {
  const v = readInt8(b);
  if (v === TS_INF) return 'infinity';
  if (v === TS_NEG_INF) return '-infinity';
  return v + PG_EPOCH_MICROS;
}
export function readInterval(b: Buffer): { months: number; days: number; micros: bigint } {
  expectLength(b, 16, 'interval');
  return { micros: b.readBigInt64BE(0), days: b.readInt32BE(8), months: b.readInt32BE(12) };
}

/** numeric_recv, to a decimal string. */
export function readNumeric(b: Buffer): string {
  if (b.length < 8) throw invalid('numeric');
  const ndigits = b.readInt16BE(0);
  const weight = b.readInt16BE(2);
  const sign = b.readUInt16BE(4);
  const dscale = b.readInt16BE(6);
  if (ndigits < 0 || b.length !== 8 + ndigits * 2 || dscale < 0) throw invalid('numeric');
  if (sign === 0xc000) return 'NaN';
  if (sign === 0xd000) return 'Infinity';
  if (sign === 0xf000) return '-Infinity';
  if (sign !== 0 && sign !== 0x4000) throw invalid('numeric', 'invalid sign');
  const digits: number[] = [];
  for (let i = 0; i < ndigits; i++) {
    const d = b.readInt16BE(8 + i * 2);
    if (d < 0 || d > 9999) throw invalid('numeric', 'invalid digit');
    digits.push(d);
  }
  let intPart = '';
  for (let w = weight, i = 0; w >= 0; w--, i++) intPart += String(digits[i] ?? 0).padStart(4, '0');
  let frac = '';
  for (let i = weight + 1; frac.length < dscale; i++) {
    frac += i < 0 ? '0000' : String(digits[i] ?? 0).padStart(4, '0');
  }
  intPart = intPart.replace(/^0+/, '') || '0';
  const text = dscale > 0 ? `${intPart}.${frac.slice(0, dscale)}` : intPart;
  return sign === 0x4000 ? `-${text}` : text;
}

export interface BinaryArray {
  readonly elementOid: number;
  readonly dims: readonly number[];
  readonly elements: readonly (Buffer | null)[];
}

/** array_recv: the element values stay undecoded. */
export function readArray(b: Buffer): BinaryArray {
  if (b.length < 12) throw invalid('array');
  const ndim = b.readInt32BE(0);
  const elementOid = b.readUInt32BE(8);
  if (ndim < 0 || ndim > 6 || b.length < 12 + ndim * 8) throw invalid('array', 'invalid number of dimensions');
  const dims: number[] = [];
  let total = ndim === 0 ? 0 : 1;
  for (let i = 0; i < ndim; i++) {
    const d = b.readInt32BE(12 + i * 8);
    if (d < 0) throw invalid('array', 'invalid dimension');
    dims.push(d);
    total *= d;
  }
  let o = 12 + ndim * 8;
  if (total * 4 > b.length - o) throw invalid('array', 'element count does not fit');
  const elements: (Buffer | null)[] = [];
  for (let i = 0; i < total; i++) {
    if (o + 4 > b.length) throw invalid('array');
    const len = b.readInt32BE(o);
    o += 4;
    if (len === -1) {
      elements.push(null);
      continue;
    }
    if (len < 0 || o + len > b.length) throw invalid('array');
    elements.push(b.subarray(o, o + len));
    o += len;
  }
  if (o !== b.length) throw invalid('array', 'trailing bytes');
  return { elementOid, dims, elements };
}
