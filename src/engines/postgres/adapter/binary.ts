import { PgError } from '../../../errors/pg-error.js';
import { SqlState } from '../../../errors/sqlstate.js';
import { TypeOid } from '../../../protocol/type-oids.js';
import * as bin from '../../../engine/pg-binary.js';
import { daysFromCivil } from '../../../engine/pg-format.js';

/**
 * Binary results on a PostgreSQL engine. node-postgres reads results in
 * text only, so a column a client asks for in binary is converted here from
 * PostgreSQL's text output, for the types drivers ask binary for. The date
 * and time types are read in the ISO DateStyle (PostgreSQL's default, which
 * ParameterStatus reports); under another, a binary request for them is
 * refused rather than guessed.
 */

export type BinaryEncoder = (text: string) => Buffer;

const utf8: BinaryEncoder = (t) => Buffer.from(t, 'utf8');

/** bytea's text output: hex (`\x...`, the default) or escape. */
function bytea(t: string): Buffer {
  if (t.startsWith('\\x')) return Buffer.from(t.slice(2), 'hex');
  const out: number[] = [];
  for (let i = 0; i < t.length; i++) {
    const c = t.charCodeAt(i);
    if (c !== 0x5c) out.push(c);
    else if (t[i + 1] === '\\') {
      out.push(0x5c);
      i++;
    } else {
      out.push(Number.parseInt(t.slice(i + 1, i + 4), 8));
      i += 3;
    }
  }
  return Buffer.from(out);
}

function float(t: string): number {
  if (t === 'NaN') return Number.NaN;
  if (t === 'Infinity') return Number.POSITIVE_INFINITY;
  if (t === '-Infinity') return Number.NEGATIVE_INFINITY;
  return Number(t);
}

const DATE_RE = /^(\d{4,})-(\d{2})-(\d{2})( BC)?$/;
const TS_RE = /^(\d{4,})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,6}))?(?:([+-])(\d{2})(?::(\d{2}))?(?::(\d{2}))?)?( BC)?$/;

function days(year: number, month: number, day: number, bc: boolean): number {
  // 1 BC is year 0 of the proleptic calendar.
  return daysFromCivil(bc ? 1 - year : year, month, day);
}

function date(t: string): Buffer {
  if (t === 'infinity') return bin.date(0, true, false);
  if (t === '-infinity') return bin.date(0, false, true);
  const m = DATE_RE.exec(t);
  if (m === null) throw unreadable(t, 'date');
  return bin.date(days(Number(m[1]), Number(m[2]), Number(m[3]), m[4] !== undefined), false, false);
}

function timestamp(t: string): Buffer {
  if (t === 'infinity') return bin.timestamp(0n, true, false);
  if (t === '-infinity') return bin.timestamp(0n, false, true);
  const m = TS_RE.exec(t);
  if (m === null) throw unreadable(t, 'timestamp');
  const d = days(Number(m[1]), Number(m[2]), Number(m[3]), m[12] !== undefined);
  let seconds = BigInt(d) * 86_400n + BigInt(Number(m[4]) * 3600 + Number(m[5]) * 60 + Number(m[6]));
  if (m[8] !== undefined) {
    const offset = Number(m[9]) * 3600 + Number(m[10] ?? 0) * 60 + Number(m[11] ?? 0);
    seconds -= BigInt(m[8] === '-' ? -offset : offset);
  }
  const micros = seconds * 1_000_000n + BigInt((m[7] ?? '').padEnd(6, '0') || '0');
  return bin.timestamp(micros, false, false);
}

function time(t: string): Buffer {
  const m = /^(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,6}))?$/.exec(t);
  if (m === null) throw unreadable(t, 'time');
  const micros = BigInt(Number(m[1]) * 3600 + Number(m[2]) * 60 + Number(m[3])) * 1_000_000n + BigInt((m[4] ?? '').padEnd(6, '0') || '0');
  return bin.int8(micros);
}

/** interval in IntervalStyle postgres: `1 year 2 mons -3 days 04:05:06.5`. */
function interval(t: string): Buffer {
  let months = 0;
  let dayCount = 0;
  let micros = 0n;
  const re = /(-?\d+) (years?|mons?|days?)|([+-]?)(\d+):(\d{2}):(\d{2})(?:\.(\d{1,6}))?/g;
  let consumed = 0;
  for (let m = re.exec(t); m !== null; m = re.exec(t)) {
    consumed += m[0].length;
    if (m[2] !== undefined) {
      const n = Number(m[1]);
      if (m[2].startsWith('year')) months += n * 12;
      else if (m[2].startsWith('mon')) months += n;
      else dayCount += n;
    } else {
      const v = BigInt(Number(m[4]) * 3600 + Number(m[5]) * 60 + Number(m[6])) * 1_000_000n + BigInt((m[7] ?? '').padEnd(6, '0') || '0');
      micros += m[3] === '-' ? -v : v;
    }
  }
  if (consumed === 0 && t !== '00:00:00') throw unreadable(t, 'interval');
  return bin.interval(months, dayCount, micros);
}

function unreadable(t: string, type: string): PgError {
  return new PgError(
    SqlState.FeatureNotSupported,
    `cannot send ${type} value "${t}" in binary: cotwire reads it from PostgreSQL's text, in the ISO DateStyle`,
    {
      hint: 'Ask for this column in text format, or keep DateStyle ISO and IntervalStyle postgres.',
    },
  );
}

const ENCODERS: ReadonlyMap<number, BinaryEncoder> = new Map<number, BinaryEncoder>([
  [TypeOid.bool, (t) => Buffer.from([t === 't' ? 1 : 0])],
  [TypeOid.int2, (t) => bin.int2(Number(t))],
  [TypeOid.int4, (t) => bin.int4(Number(t))],
  [TypeOid.oid, (t) => bin.uint4(Number(t))],
  [TypeOid.int8, (t) => bin.int8(BigInt(t))],
  [TypeOid.float4, (t) => bin.float4(float(t))],
  [TypeOid.float8, (t) => bin.float8(float(t))],
  [TypeOid.numeric, (t) => bin.numeric(t)],
  [TypeOid.text, utf8],
  [TypeOid.varchar, utf8],
  [TypeOid.bpchar, utf8],
  [TypeOid.name, utf8],
  [TypeOid.char, utf8],
  [TypeOid.json, utf8],
  [TypeOid.xml, utf8],
  [TypeOid.unknown, utf8],
  [TypeOid.jsonb, (t) => Buffer.concat([Buffer.from([1]), Buffer.from(t, 'utf8')])],
  [TypeOid.bytea, bytea],
  [TypeOid.uuid, (t) => bin.uuid(t)],
]);

const DATE_TIME: ReadonlyMap<number, BinaryEncoder> = new Map<number, BinaryEncoder>([
  [TypeOid.date, date],
  [TypeOid.timestamp, timestamp],
  [TypeOid.timestamptz, timestamp],
  [TypeOid.time, time],
]);

/** PostgreSQL's array types of the element types above: array OID → element OID (pg_type.typelem). */
const ARRAYS: ReadonlyMap<number, number> = new Map([
  [1000, TypeOid.bool],
  [1005, TypeOid.int2],
  [1007, TypeOid.int4],
  [1028, TypeOid.oid],
  [1016, TypeOid.int8],
  [1021, TypeOid.float4],
  [1022, TypeOid.float8],
  [1231, TypeOid.numeric],
  [1009, TypeOid.text],
  [1015, TypeOid.varchar],
  [1014, TypeOid.bpchar],
  [1003, TypeOid.name],
  [1002, TypeOid.char],
  [199, TypeOid.json],
  [143, TypeOid.xml],
  [3807, TypeOid.jsonb],
  [1001, TypeOid.bytea],
  [2951, TypeOid.uuid],
  [1182, TypeOid.date],
  [1115, TypeOid.timestamp],
  [1185, TypeOid.timestamptz],
  [1183, TypeOid.time],
  [1187, TypeOid.interval],
]);

/**
 * An array's text output (`{1,2,NULL}`, `{{"a b",c},{d,e}}`, `[0:1]={5,6}`):
 * its dimensions, their lower bounds, and its elements in order, NULL as
 * null. The delimiter is a comma for every element type above.
 */
export function parseArrayText(t: string): { readonly dims: number[]; readonly lbounds: number[]; readonly items: Array<string | null> } {
  let i = 0;
  let lbounds: number[] | null = null;
  const decoration = /^((?:\[-?\d+:-?\d+\])+)=/.exec(t);
  if (decoration !== null) {
    lbounds = [...(decoration[1] as string).matchAll(/\[(-?\d+):/g)].map((m) => Number(m[1]));
    i = decoration[0].length;
  }
  const dims: number[] = [];
  const items: Array<string | null> = [];
  const bad = (): PgError =>
    new PgError(SqlState.FeatureNotSupported, `cannot read the array "${t}" to send it in binary`, { hint: 'Ask for this column in text format.' });
  const level = (depth: number): void => {
    if (t[i] !== '{') throw bad();
    i++;
    let count = 0;
    if (t[i] === '}') {
      i++;
      dims[depth] = 0;
      return;
    }
    for (;;) {
      if (t[i] === '{') level(depth + 1);
      else if (t[i] === '"') {
        let v = '';
        for (i++; i < t.length && t[i] !== '"'; i++) v += t[i] === '\\' ? (t[++i] ?? '') : t[i];
        i++;
        items.push(v);
      } else {
        const start = i;
        while (i < t.length && t[i] !== ',' && t[i] !== '}') i++;
        const raw = t.slice(start, i);
        items.push(raw.toUpperCase() === 'NULL' ? null : raw);
      }
      count++;
      if (t[i] === ',') i++;
      else if (t[i] === '}') {
        i++;
        break;
      } else throw bad();
    }
    dims[depth] = count;
  };
  level(0);
  if (i !== t.length) throw bad();
  if (dims[0] === 0) return { dims: [], lbounds: [], items: [] };
  return { dims, lbounds: lbounds ?? dims.map(() => 1), items };
}

/** array_send's layout: dimensions, a has-nulls flag, the element type, each dimension's size and lower bound, then each element. */
function arrayEncoder(elementOid: number, element: BinaryEncoder): BinaryEncoder {
  return (t) => {
    const { dims, lbounds, items } = parseArrayText(t);
    const head = Buffer.alloc(12 + dims.length * 8);
    head.writeInt32BE(dims.length, 0);
    head.writeInt32BE(items.some((v) => v === null) ? 1 : 0, 4);
    head.writeUInt32BE(elementOid, 8);
    dims.forEach((d, k) => {
      head.writeInt32BE(d, 12 + k * 8);
      head.writeInt32BE(lbounds[k] ?? 1, 16 + k * 8);
    });
    const parts: Buffer[] = [head];
    for (const v of items) {
      const len = Buffer.alloc(4);
      if (v === null) {
        len.writeInt32BE(-1);
        parts.push(len);
        continue;
      }
      const bytes = element(v);
      len.writeInt32BE(bytes.length);
      parts.push(len, bytes);
    }
    return Buffer.concat(parts);
  };
}

/**
 * The encoder for a binary result column of this type, given the session's
 * DateStyle and IntervalStyle; throws 0A000 for a type it cannot convert.
 */
export function binaryEncoder(typeOid: number, dateStyle: string, intervalStyle: string): BinaryEncoder {
  const elementOid = ARRAYS.get(typeOid);
  if (elementOid !== undefined) return arrayEncoder(elementOid, binaryEncoder(elementOid, dateStyle, intervalStyle));
  const plain = ENCODERS.get(typeOid);
  if (plain !== undefined) return plain;
  const dt = DATE_TIME.get(typeOid);
  if (dt !== undefined && dateStyle.toUpperCase().startsWith('ISO')) return dt;
  if (typeOid === TypeOid.interval && intervalStyle === 'postgres') return interval;
  throw new PgError(SqlState.FeatureNotSupported, `binary format for type ${typeOid} is not supported by cotwire on a PostgreSQL engine`, {
    hint: 'Ask for this column in text format (result format 0).',
  });
}
