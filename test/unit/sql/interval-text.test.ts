import { describe, expect, it } from 'vitest';
import { pgIntervalText } from '../../../src/sql/interval-text.js';

// Each interval is PostgreSQL 15's reading of the text (its output in the comment); DuckDB reads the form given back.
describe('interval texts PostgreSQL reads and DuckDB does not', () => {
  it.each([
    ['P1Y2M', '14 months 0 days 0 microseconds'], // 1 year 2 mons
    ['P1DT2H', '0 months 1 days 7200000000 microseconds'], // 1 day 02:00:00
    ['PT1.5S', '0 months 0 days 1500000 microseconds'], // 00:00:01.5
    ['P0001-02-03T04:05:06', '14 months 3 days 14706000000 microseconds'], // 1 year 2 mons 3 days 04:05:06
    ['P2W', '0 months 14 days 0 microseconds'], // 14 days
    ['P-1D', '0 months -1 days 0 microseconds'], // -1 days
    ['PT36H', '0 months 0 days 129600000000 microseconds'], // 36:00:00
    ['P1.5D', '0 months 1 days 43200000000 microseconds'], // 1 day 12:00:00
    ['P1.5Y', '18 months 0 days 0 microseconds'], // 1 year 6 mons
    ['P1.5M', '1 months 15 days 0 microseconds'], // 1 mon 15 days
    ['P0.5W', '0 months 3 days 43200000000 microseconds'], // 3 days 12:00:00
    ['-3 days +04:05:06', '-3 days 04:05:06'], // -3 days +04:05:06
    ['1 year 2 mons -3 days +04:05:06', '1 year 2 mons -3 days 04:05:06'],
  ])('%s', (text, duck) => {
    expect(pgIntervalText(text)).toBe(duck);
  });

  it('leaves what DuckDB reads, and what is not an interval, to DuckDB', () => {
    expect(pgIntervalText('1 day 02:00:00')).toBeNull();
    expect(pgIntervalText('P')).toBeNull();
    expect(pgIntervalText('Pizza')).toBeNull();
  });
});
