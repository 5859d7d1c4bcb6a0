import { describe, expect, it } from 'vitest';
import {
  civilFromDays,
  daysFromCivil,
  formatDate,
  formatFloat4,
  formatFloat8,
  formatInterval,
  formatTimestamp,
  formatTimestampTz,
  quoteArrayElement,
  TimeZoneOffsets,
} from '../../../src/engine/pg-format.js';
import * as bin from '../../../src/engine/pg-binary.js';

describe('PostgreSQL text formats', () => {
  it.each([
    [0, 0, 0n, '00:00:00'],
    [14, 3, 14_706_000_000n, '1 year 2 mons 3 days 04:05:06'],
    [1, 1, 0n, '1 mon 1 day'],
    [-12, -2, 0n, '-1 years -2 days'],
    [0, -1, 7_200_000_000n, '-1 days +02:00:00'],
    [0, 0, -3_723_500_000n, '-01:02:03.5'],
    [0, 0, 360_000_000_000n, '100:00:00'],
    [-1, 2, 0n, '-1 mons +2 days'],
  ])('interval (%i months, %i days, %s µs) is %s', (months, days, micros, text) => {
    expect(formatInterval(months, days, micros)).toBe(text);
  });

  it.each([
    [0.1, '0.1'],
    [1e21, '1e+21'],
    [1e15, '1e+15'],
    [123456789012345, '123456789012345'],
    [0.0001, '0.0001'],
    [0.00001, '1e-05'],
    [-2.5, '-2.5'],
    [-0, '-0'],
    [NaN, 'NaN'],
    [-Infinity, '-Infinity'],
    [Number.MAX_VALUE, '1.7976931348623157e+308'],
  ])('float8 %d is %s', (v, text) => {
    expect(formatFloat8(v)).toBe(text);
  });

  it.each([
    [Math.fround(0.1), '0.1'],
    [Math.fround(1.5), '1.5'],
    [Math.fround(123456.7), '123456.7'],
    [Math.fround(1234567), '1.234567e+06'],
    [Math.fround(3.4028235e38), '3.4028235e+38'],
  ])('float4 %d is %s', (v, text) => {
    expect(formatFloat4(v)).toBe(text);
  });

  it('writes dates, including BC and infinity, as Postgres does', () => {
    expect(formatDate(0)).toBe('1970-01-01');
    expect(formatDate(daysFromCivil(2024, 2, 29))).toBe('2024-02-29');
    expect(formatDate(daysFromCivil(0, 12, 31))).toBe('0001-12-31 BC');
    expect(formatDate(daysFromCivil(-43, 3, 15))).toBe('0044-03-15 BC');
    expect(formatDate(2147483647)).toBe('infinity');
    expect(formatDate(-2147483647)).toBe('-infinity');
    for (const days of [-1_000_000, -719_529, -1, 0, 59, 10_957, 2_932_896]) {
      const { year, month, day } = civilFromDays(days);
      expect(daysFromCivil(year, month, day)).toBe(days);
    }
  });

  it('writes timestamps with trimmed fractions and timestamptz in a zone', () => {
    expect(formatTimestamp(1_704_164_645_120_000n)).toBe('2024-01-02 03:04:05.12');
    expect(formatTimestamp(-62_135_683_200_000_000n)).toBe('0001-12-31 00:00:00 BC');
    const utc = new TimeZoneOffsets('UTC');
    expect(formatTimestampTz(1_704_164_645_000_000n, utc)).toBe('2024-01-02 03:04:05+00');
    const kolkata = new TimeZoneOffsets('Asia/Kolkata');
    expect(formatTimestampTz(1_704_164_645_000_000n, kolkata)).toBe('2024-01-02 08:34:05+05:30');
    const ny = new TimeZoneOffsets('America/New_York');
    expect(formatTimestampTz(1_720_000_000_000_000n, ny)).toBe('2024-07-03 05:46:40-04');
  });

  it('writes any float8 with the shortest digits that read back, fixed where PostgreSQL writes fixed', () => {
    const bits = new DataView(new ArrayBuffer(8));
    let x = 12345;
    const next = (): number => {
      x = (x * 1103515245 + 12345) % 2 ** 31;
      return x;
    };
    const values: number[] = [];
    for (let i = 0; i < 3_000; i++) {
      bits.setUint32(0, next() * 2 + (next() & 1));
      bits.setUint32(4, next() * 2 + (next() & 1));
      values.push(bits.getFloat64(0));
      // Around the bounds of fixed notation, where the shortcut ends.
      const near = [1e-4, 1e15][i % 2] as number;
      values.push(near * (1 + (next() / 2 ** 31 - 0.5) * 1e-3), -near, near, near * (1 - 2 ** -52));
    }
    for (const v of values) {
      if (!Number.isFinite(v) || v === 0) continue;
      const text = formatFloat8(v);
      expect(Number(text)).toBe(v);
      const exponential = v.toExponential();
      const exp = Number(exponential.slice(exponential.indexOf('e') + 1));
      expect(text.includes('e'), `${v} as ${text}`).toBe(exp < -4 || exp >= 15);
      expect(text.replace(/^-/, '').replace(/e.*$/, '').replace('.', '').replace(/^0+/, '').replace(/0+$/, '')).toBe(
        exponential.replace(/^-/, '').replace(/e.*$/, '').replace('.', '').replace(/0+$/, ''),
      );
    }
  });

  it('writes any timestamp from year 1 to 9999 as the calendar has it, on both sides of the fast path', () => {
    const first = -62_135_596_800_000_000n;
    const last = 253_402_300_799_999_999n;
    let x = 99;
    const next = (): bigint => {
      x = (x * 1103515245 + 12345) % 2 ** 31;
      return BigInt(x);
    };
    const samples: bigint[] = [first, last, 0n, -1n, 2n ** 52n, 2n ** 52n - 1n, -(2n ** 52n), 1n - 2n ** 52n];
    for (let i = 0; i < 5_000; i++) {
      samples.push(first + (((next() * 2n ** 31n + next()) * 2n ** 8n) % (last - first)));
      samples.push(2n ** 52n * (i % 2 === 0 ? 1n : -1n) + (next() - 2n ** 30n));
    }
    const utc = new TimeZoneOffsets('UTC');
    for (const micros of samples) {
      const millis = micros / 1000n - (micros % 1000n < 0n ? 1n : 0n);
      const iso = new Date(Number(millis)).toISOString();
      const frac = ((micros % 1_000_000n) + 1_000_000n) % 1_000_000n;
      const fraction = frac === 0n ? '' : `.${String(frac).padStart(6, '0').replace(/0+$/, '')}`;
      const expected = `${iso.slice(0, 10)} ${iso.slice(11, 19)}${fraction}`;
      expect(formatTimestamp(micros), String(micros)).toBe(expected);
      expect(formatTimestampTz(micros, utc), String(micros)).toBe(`${expected}+00`);
    }
  });

  it('quotes array elements as array_out does', () => {
    expect(quoteArrayElement('abc')).toBe('abc');
    expect(quoteArrayElement('')).toBe('""');
    expect(quoteArrayElement('null')).toBe('"null"');
    expect(quoteArrayElement('a,b')).toBe('"a,b"');
    expect(quoteArrayElement('say "hi"\\')).toBe('"say \\"hi\\"\\\\"');
  });
});

describe('PostgreSQL binary formats', () => {
  it.each(['0', '1', '-1', '12.340', '-0.05', '10000', '123456789012345678901234567.123', '0.0001', '99999999.99999999'])('numeric %s round-trips', (text) => {
    expect(bin.readNumeric(bin.numeric(text))).toBe(text);
  });

  it('reads arrays and rejects truncated ones', () => {
    const encoded = bin.array(23, [2], [bin.int4(1), null]);
    const decoded = bin.readArray(encoded);
    expect(decoded.dims).toEqual([2]);
    expect(decoded.elements.map((e) => (e === null ? null : e.readInt32BE(0)))).toEqual([1, null]);
    expect(() => bin.readArray(encoded.subarray(0, encoded.length - 2))).toThrow(/array/);
  });

  it('writes vectors as the float4[] that array_send makes of their elements', () => {
    const vectors = [Float32Array.of(0.5, -1.25, 3.4028234663852886e38), Float32Array.of(), Float32Array.of(1e-45, Number.NaN)];
    const elements = vectors.flatMap((v) => Array.from(v, (x) => bin.float4(x)));
    expect(bin.float4Array(vectors).equals(bin.array(700, [elements.length], elements))).toBe(true);
    expect(bin.float4Array([]).equals(bin.array(700, [0], []))).toBe(true);
  });
});
