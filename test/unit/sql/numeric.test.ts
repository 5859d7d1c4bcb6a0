import { describe, expect, it } from 'vitest';
import { exactNumericSql, losesDigits, numericDigits, numericLiteralType, numericQuotient, plainNumeric, quotientText } from '../../../src/sql/numeric.js';

describe('numeric literals', () => {
  it('reads the digits before the point and the display scale as PostgreSQL does', () => {
    expect(numericDigits('1.23456789012345678901')).toEqual({ integer: 1, scale: 20 });
    expect(numericDigits('1e-20')).toEqual({ integer: 0, scale: 20 });
    expect(numericDigits(' -1.5e3 ')).toEqual({ integer: 4, scale: 0 });
    expect(numericDigits('001.50')).toEqual({ integer: 1, scale: 2 });
    expect(numericDigits('NaN')).toBeNull();
    expect(numericDigits('1.2.3')).toBeNull();
  });

  it('types a literal with its own digits, and one of more than 38 as a DECIMAL whose cast fails', () => {
    expect(numericLiteralType('1.23456789012345678901')).toBe('DECIMAL(21,20)');
    expect(numericLiteralType('1e-20')).toBe('DECIMAL(20,20)');
    expect(numericLiteralType('0')).toBe('DECIMAL(1,0)');
    expect(numericLiteralType('123456789012345678901234567890123456789012')).toBe('DECIMAL(38,0)');
  });

  it('reads a bare constant exactly where it fits a DECIMAL, and leaves a wider one the double DuckDB reads', () => {
    expect(exactNumericSql('1e-20')).toBe("CAST('0.00000000000000000001' AS DECIMAL(20,20))");
    expect(exactNumericSql('1.5')).toBe('1.5');
    expect(exactNumericSql('1e300')).toBe('1e300');
    expect(exactNumericSql('1e-50')).toBe('1e-50');
    expect(exactNumericSql('1234567890123456789012345678901234567890')).toBe('1234567890123456789012345678901234567890');
  });

  it('writes an exponent out', () => {
    expect(plainNumeric('1e-20')).toBe('0.00000000000000000001');
    expect(plainNumeric('-1.5e3')).toBe('-1500');
    expect(plainNumeric('12.5e-1')).toBe('1.25');
    expect(plainNumeric('1.5')).toBe('1.5');
  });

  it('tells a value that DECIMAL(38, scale) would round', () => {
    expect(losesDigits('0.1234567890123456789', 9)).toBe(true);
    expect(losesDigits('0.123456789000', 9)).toBe(false);
    expect(losesDigits('1e-18', 9)).toBe(true);
    expect(losesDigits('1.5e-9', 9)).toBe(true);
    expect(losesDigits('123456789012345678901234567890', 9)).toBe(true);
    expect(losesDigits('12345678901234567890123456789', 9)).toBe(false);
  });
});

describe('numeric division', () => {
  // Each answer is PostgreSQL 15's for '<a>'::numeric / '<b>'::numeric.
  const cases: ReadonlyArray<readonly [string, string, string]> = [
    ['1', '3', '0.33333333333333333333'],
    ['2', '3', '0.66666666666666666667'],
    ['10', '4', '2.5000000000000000'],
    ['100.00', '3', '33.3333333333333333'],
    ['1e9', '3', '333333333.33333333'],
    ['-7', '2', '-3.5000000000000000'],
    ['0.0001', '3', '0.000033333333333333333333'],
    ['1', '30000', '0.000033333333333333333333'],
    ['123456.789', '0.001', '123456789.00000000'],
    ['5', '-3', '-1.6666666666666667'],
    ['0.5', '0.25', '2.0000000000000000'],
    ['99999', '1', '99999.000000000000'],
    ['1.5000', '3.00', '0.50000000000000000000'],
    ['0', '7', '0.00000000000000000000'],
    ['2', '3.0000000000000000000001', '0.6666666666666666666666'],
  ];
  it.each(cases)('%s / %s is %s', (a, b, answer) => {
    expect(numericQuotient(a, b).text).toBe(answer);
  });

  it('reads a value of numeric without precision without the zeros that pad it', () => {
    expect(quotientText('1000000000.000000000', 'DECIMAL(38,9)', '3', 'INTEGER')).toBe('333333333.33333333');
    expect(quotientText('1000000000.000000000', 'DECIMAL(12,9)', '3', 'INTEGER')).toBe('333333333.333333333');
  });

  it('refuses a quotient whose digits DECIMAL(38,20) would round away', () => {
    expect(() => quotientText('0.0001', 'DECIMAL(4,4)', '3', 'INTEGER')).toThrow(/past the 20th decimal/);
    expect(quotientText('0.0001', 'DECIMAL(4,4)', '4', 'INTEGER')).toBe('0.000025000000000000000000');
  });
});
