/**
 * PostgreSQL's text output formats, computed from plain numbers so that any
 * engine can use them: DateStyle ISO, IntervalStyle postgres, bytea_output
 * hex, extra_float_digits 1 (shortest exact floats).
 */

const MICROS_PER_DAY = 86_400_000_000n;

const pad2 = (n: number): string => (n < 10 ? `0${n}` : String(n));
const pad4 = (n: number): string => String(n).padStart(4, '0');

/** Civil date from days since 1970-01-01 (proleptic Gregorian; year 0 = 1 BC). */
export function civilFromDays(days: number): { year: number; month: number; day: number } {
  const z = days + 719468;
  const era = Math.floor(z / 146097);
  const doe = z - era * 146097;
  const yoe = Math.floor((doe - Math.floor(doe / 1460) + Math.floor(doe / 36524) - Math.floor(doe / 146096)) / 365);
  const doy = doe - (365 * yoe + Math.floor(yoe / 4) - Math.floor(yoe / 100));
  const mp = Math.floor((5 * doy + 2) / 153);
  const day = doy - Math.floor((153 * mp + 2) / 5) + 1;
  const month = mp < 10 ? mp + 3 : mp - 9;
  const year = yoe + era * 400 + (month <= 2 ? 1 : 0);
  return { year, month, day };
}

/** Days since 1970-01-01 from a civil date. */
export function daysFromCivil(year: number, month: number, day: number): number {
  const y = month <= 2 ? year - 1 : year;
  const era = Math.floor(y / 400);
  const yoe = y - era * 400;
  const mp = month > 2 ? month - 3 : month + 9;
  const doy = Math.floor((153 * mp + 2) / 5) + day - 1;
  const doe = yoe * 365 + Math.floor(yoe / 4) - Math.floor(yoe / 100) + doy;
  return era * 146097 + doe - 719468;
}

function datePart(days: number): { text: string; bc: boolean } {
  const { year, month, day } = civilFromDays(days);
  const bc = year <= 0;
  return { text: `${pad4(bc ? 1 - year : year)}-${pad2(month)}-${pad2(day)}`, bc };
}

/** HH:MM:SS[.ffffff] with trailing zeros of the fraction removed. */
export function formatTimeOfDay(micros: number): string {
  const totalSeconds = Math.floor(micros / 1_000_000);
  const frac = micros - totalSeconds * 1_000_000;
  const h = Math.floor(totalSeconds / 3600);
  const m = Math.floor((totalSeconds % 3600) / 60);
  const s = totalSeconds % 60;
  return `${pad2(h)}:${pad2(m)}:${pad2(s)}${fraction(frac)}`;
}

function fraction(micros: number): string {
  if (micros === 0) return '';
  let digits = 6;
  let f = micros;
  while (f % 10 === 0) {
    f /= 10;
    digits--;
  }
  return `.${String(f).padStart(digits, '0')}`;
}

export const DATE_POS_INFINITY = 2147483647;
export const DATE_NEG_INFINITY = -2147483647;

export function formatDate(days: number): string {
  if (days >= DATE_POS_INFINITY) return 'infinity';
  if (days <= DATE_NEG_INFINITY) return '-infinity';
  const { text, bc } = datePart(days);
  return bc ? `${text} BC` : text;
}

export const TIMESTAMP_POS_INFINITY = 9223372036854775807n;
export const TIMESTAMP_NEG_INFINITY = -9223372036854775807n;

function splitMicros(micros: bigint): { days: number; timeMicros: number } {
  let days = micros / MICROS_PER_DAY;
  let rem = micros % MICROS_PER_DAY;
  if (rem < 0n) {
    rem += MICROS_PER_DAY;
    days -= 1n;
  }
  return { days: Number(days), timeMicros: Number(rem) };
}

/**
 * Instants within this many microseconds of the epoch (about 140 years) are
 * split in floating point, exactly, and with room for any zone's offset:
 * BigInt division cost a streamed timestamp more than the rest of its text.
 */
const EXACT_MICROS = 2 ** 52;
const MICROS_PER_DAY_NUMBER = 86_400_000_000;

/** Days and time of day of `micros` (since the epoch) moved by `offsetSeconds`. */
function splitShifted(micros: bigint, offsetSeconds: number): { days: number; timeMicros: number } {
  if (micros > -EXACT_MICROS && micros < EXACT_MICROS) {
    const m = Number(micros) + offsetSeconds * 1_000_000;
    const days = Math.floor(m / MICROS_PER_DAY_NUMBER);
    return { days, timeMicros: m - days * MICROS_PER_DAY_NUMBER };
  }
  return splitMicros(offsetSeconds === 0 ? micros : micros + BigInt(offsetSeconds) * 1_000_000n);
}

/** timestamp without time zone, micros since 1970-01-01 00:00:00. */
export function formatTimestamp(micros: bigint): string {
  if (micros >= TIMESTAMP_POS_INFINITY) return 'infinity';
  if (micros <= TIMESTAMP_NEG_INFINITY) return '-infinity';
  const { days, timeMicros } = splitShifted(micros, 0);
  const { text, bc } = datePart(days);
  return `${text} ${formatTimeOfDay(timeMicros)}${bc ? ' BC' : ''}`;
}

/** "+HH", "+HH:MM" or "+HH:MM:SS", for an offset in seconds east of UTC. */
export function formatOffset(offsetSeconds: number): string {
  const sign = offsetSeconds < 0 ? '-' : '+';
  const abs = Math.abs(offsetSeconds);
  const h = Math.floor(abs / 3600);
  const m = Math.floor((abs % 3600) / 60);
  const s = abs % 60;
  let out = `${sign}${pad2(h)}`;
  if (m !== 0 || s !== 0) out += `:${pad2(m)}`;
  if (s !== 0) out += `:${pad2(s)}`;
  return out;
}

/** timestamptz rendered in `zone`: micros since the epoch in UTC. */
export function formatTimestampTz(micros: bigint, zone: TimeZoneOffsets): string {
  if (micros >= TIMESTAMP_POS_INFINITY) return 'infinity';
  if (micros <= TIMESTAMP_NEG_INFINITY) return '-infinity';
  const offset = zone.offsetAt(micros);
  const { days, timeMicros } = splitShifted(micros, offset);
  const { text, bc } = datePart(days);
  return `${text} ${formatTimeOfDay(timeMicros)}${formatOffset(offset)}${bc ? ' BC' : ''}`;
}

export function formatTimeTz(micros: number, offsetSeconds: number): string {
  return `${formatTimeOfDay(micros)}${formatOffset(offsetSeconds)}`;
}

/** IntervalStyle postgres, as EncodeInterval writes it. */
export function formatInterval(months: number, days: number, micros: bigint): string {
  const parts: string[] = [];
  let isBefore = false;
  const add = (value: number, unit: string): void => {
    if (value === 0) return;
    parts.push(`${isBefore && value > 0 ? '+' : ''}${value} ${unit}${value === 1 ? '' : 's'}`);
    isBefore = value < 0;
  };
  const years = Math.trunc(months / 12);
  add(years, 'year');
  add(months - years * 12, 'mon');
  add(days, 'day');
  if (parts.length === 0 || micros !== 0n) {
    const minus = micros < 0n;
    const abs = minus ? -micros : micros;
    const totalSeconds = abs / 1_000_000n;
    const frac = Number(abs % 1_000_000n);
    const h = totalSeconds / 3600n;
    const m = Number((totalSeconds % 3600n) / 60n);
    const s = Number(totalSeconds % 60n);
    const hours = h < 10n ? `0${h}` : String(h);
    parts.push(`${minus ? '-' : isBefore ? '+' : ''}${hours}:${pad2(m)}:${pad2(s)}${fraction(frac)}`);
  }
  return parts.join(' ');
}

/**
 * float8out with extra_float_digits > 0: the shortest digits that read back
 * exactly, in fixed notation when the decimal exponent is in [-4, 15), else
 * in scientific notation with at least two exponent digits.
 */
export function formatFloat8(v: number): string {
  // Where PostgreSQL writes fixed notation JavaScript does too, with the same shortest digits.
  const abs = Math.abs(v);
  if (abs >= 1e-4 && abs < 1e15) return String(v);
  return formatShortest(v, v.toExponential(), 15);
}

/** float4out: the shortest digits that read back to the same float4. */
export function formatFloat4(v: number): string {
  if (!Number.isFinite(v) || v === 0) return formatShortest(v, v.toExponential(), 6);
  for (let p = 1; p <= 9; p++) {
    const candidate = v.toExponential(p - 1);
    if (Math.fround(Number(candidate)) === v) return formatShortest(v, candidate, 6);
  }
  return formatShortest(v, v.toExponential(8), 6);
}

function formatShortest(v: number, exponential: string, fixedLimit: number): string {
  if (Number.isNaN(v)) return 'NaN';
  if (v === Infinity) return 'Infinity';
  if (v === -Infinity) return '-Infinity';
  if (v === 0) return Object.is(v, -0) ? '-0' : '0';
  const negative = exponential.startsWith('-');
  const body = negative ? exponential.slice(1) : exponential;
  const e = body.indexOf('e');
  const digits = body.slice(0, e).replace('.', '');
  const exp = Number(body.slice(e + 1));
  let out: string;
  if (exp >= -4 && exp < fixedLimit) {
    if (exp < 0) {
      out = `0.${'0'.repeat(-exp - 1)}${digits}`;
    } else if (digits.length <= exp + 1) {
      out = digits + '0'.repeat(exp + 1 - digits.length);
    } else {
      out = `${digits.slice(0, exp + 1)}.${digits.slice(exp + 1)}`;
    }
  } else {
    const mantissa = digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits;
    const absExp = Math.abs(exp);
    out = `${mantissa}e${exp < 0 ? '-' : '+'}${absExp < 10 ? `0${absExp}` : absExp}`;
  }
  return negative ? `-${out}` : out;
}

export function formatBytea(bytes: Uint8Array): string {
  return `\\x${Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('hex')}`;
}

/** Quotes an array element as array_out does. */
export function quoteArrayElement(text: string): string {
  if (text === '' || /[{},"\\\s]/.test(text) || text.toUpperCase() === 'NULL') {
    return `"${text.replace(/[\\"]/g, (c) => `\\${c}`)}"`;
  }
  return text;
}

/** Computes UTC offsets for one IANA time zone, caching by quarter hour. */
export class TimeZoneOffsets {
  private readonly format: Intl.DateTimeFormat | null;
  private readonly cache = new Map<number, number>();
  readonly name: string;

  constructor(name: string) {
    this.name = name;
    this.format = isUtc(name)
      ? null
      : new Intl.DateTimeFormat('en-US', {
          timeZone: name,
          hourCycle: 'h23',
          year: 'numeric',
          month: 'numeric',
          day: 'numeric',
          hour: 'numeric',
          minute: 'numeric',
          second: 'numeric',
          era: 'short',
        });
  }

  /** Offset in seconds east of UTC at the instant `micros` (since the epoch). */
  offsetAt(micros: bigint): number {
    if (this.format === null) return 0;
    const ms = Number(micros / 1000n);
    if (!(ms > -8.64e15 && ms < 8.64e15)) return 0;
    // Zone transitions in the tz database fall on quarter hours in UTC, so
    // the offset is constant inside each quarter-hour bucket.
    const bucket = Math.floor(ms / 900_000);
    const cached = this.cache.get(bucket);
    if (cached !== undefined) return cached;
    const offset = this.compute(bucket * 900_000);
    if (this.cache.size > 10_000) this.cache.clear();
    this.cache.set(bucket, offset);
    return offset;
  }

  private compute(ms: number): number {
    const parts = (this.format as Intl.DateTimeFormat).formatToParts(new Date(ms));
    const get = (type: string): number => Number(parts.find((p) => p.type === type)?.value ?? 0);
    const era = parts.find((p) => p.type === 'era')?.value;
    let year = get('year');
    if (era === 'BC' || era === 'B') year = 1 - year;
    const localMs = Date.UTC(2000, get('month') - 1, get('day'), get('hour'), get('minute'), get('second'));
    const localDays = daysFromCivil(year, get('month'), get('day'));
    const local = localDays * 86_400_000 + (((localMs % 86_400_000) + 86_400_000) % 86_400_000);
    return Math.round((local - ms) / 1000);
  }
}

/** Whether `name` is UTC under one of its names: timestamps print the same in all of them. */
export function isUtc(name: string): boolean {
  const n = name.toUpperCase();
  return n === 'UTC' || n === 'ETC/UTC' || n === 'GMT' || n === 'ETC/GMT' || n === 'Z' || n === 'UCT' || n === 'ZULU';
}

/** Whether `name` is a time zone this runtime knows; returns its canonical spelling, or null. */
export function resolveTimeZone(name: string): string | null {
  if (isUtc(name)) return name.toUpperCase() === 'ETC/UTC' ? 'Etc/UTC' : name.toUpperCase();
  try {
    return new Intl.DateTimeFormat('en-US', { timeZone: name }).resolvedOptions().timeZone;
  } catch {
    return null;
  }
}
