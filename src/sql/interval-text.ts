/**
 * An interval's text as PostgreSQL reads it and DuckDB does not: ISO 8601
 * durations ('P1DT2H', 'PT1.5S', 'P1Y2M', the alternative form
 * 'P0001-02-03T04:05:06') and PostgreSQL's own output with a signed time
 * ('-3 days +04:05:06'). The same interval in a form DuckDB reads ('0 months
 * 1 days 7200000000 microseconds', '-3 days 04:05:06'); null when the text
 * needs nothing, or is not of these shapes (DuckDB's to read or refuse).
 */
export function pgIntervalText(text: string): string | null {
  const trimmed = text.trim();
  if (/^P/i.test(trimmed)) {
    const parts = isoDesignators(trimmed) ?? isoAlternative(trimmed);
    return parts === null ? null : `${parts.months} months ${parts.days} days ${parts.micros} microseconds`;
  }
  // '+04:05:06' after other fields: PostgreSQL prints a positive time so when a negative field comes before it.
  const unsigned = text.replace(/(^|\s)\+(\d+:\d)/g, '$1$2');
  return unsigned === text ? null : unsigned;
}

interface IntervalParts {
  months: number;
  days: number;
  micros: bigint;
}

const MICROS_PER_DAY = 86_400_000_000;
const DAYS_PER_MONTH = 30;

/** A fraction of a day, as microseconds (PostgreSQL's AdjustFractSeconds). */
function fractionOfDay(days: number): bigint {
  return BigInt(Math.round(days * MICROS_PER_DAY));
}

/** 'P1Y2M3W4DT5H6M7.5S' (DecodeISO8601Interval's format with designators): each number may be signed and fractional. */
function isoDesignators(text: string): IntervalParts | null {
  const m =
    /^P(?:([+-]?\d+(?:\.\d+)?)Y)?(?:([+-]?\d+(?:\.\d+)?)M)?(?:([+-]?\d+(?:\.\d+)?)W)?(?:([+-]?\d+(?:\.\d+)?)D)?(?:T(?:([+-]?\d+(?:\.\d+)?)H)?(?:([+-]?\d+(?:\.\d+)?)M)?(?:([+-]?\d+(?:\.\d+)?)S)?)?$/i.exec(
      text,
    );
  if (m === null || m.slice(1).every((x) => x === undefined) || /T$/i.test(text)) return null;
  const [, y, mo, w, d, h, mi, s] = m.map((x) => (x === undefined ? 0 : Number(x)));
  const parts: IntervalParts = { months: 0, days: 0, micros: 0n };
  const whole = (v: number): number => Math.trunc(v);
  // Years: the fraction in whole months; months and weeks: the fraction in whole days, then the rest of a day.
  parts.months += whole(y ?? 0) * 12 + whole(((y ?? 0) - whole(y ?? 0)) * 12);
  const monthDays = ((mo ?? 0) - whole(mo ?? 0)) * DAYS_PER_MONTH;
  const weekDays = (w ?? 0) * 7;
  parts.months += whole(mo ?? 0);
  parts.days += whole(monthDays) + whole(weekDays) + whole(d ?? 0);
  parts.micros += fractionOfDay(monthDays - whole(monthDays)) + fractionOfDay(weekDays - whole(weekDays)) + fractionOfDay((d ?? 0) - whole(d ?? 0));
  parts.micros += BigInt(Math.round(((h ?? 0) * 3600 + (mi ?? 0) * 60 + (s ?? 0)) * 1_000_000));
  return parts;
}

/** 'P0001-02-03T04:05:06' (the alternative format): years, months, days, then a time of day. */
function isoAlternative(text: string): IntervalParts | null {
  const m = /^P(\d+)-(\d{1,2})-(\d{1,2})(?:T(\d{1,2}):(\d{2}):(\d{2}(?:\.\d+)?))?$/i.exec(text);
  if (m === null) return null;
  const [, y, mo, d, h = '0', mi = '0', s = '0'] = m;
  return {
    months: Number(y) * 12 + Number(mo),
    days: Number(d),
    micros: BigInt(Math.round((Number(h) * 3600 + Number(mi) * 60 + Number(s)) * 1_000_000)),
  };
}
