/**
 * PostgreSQL's `numeric` without a precision holds any number of digits;
 * DuckDB's DECIMAL without one is DECIMAL(18,3), which rounds '1.23456' to
 * 1.235 without a word. cotwire spells an unconstrained numeric as
 * DECIMAL(38,9): 29 digits before the point, 9 after. Arithmetic on it keeps
 * DuckDB's widest precision (38) and a scale of at least 9 (a product of two
 * has scale 18), which is how such a value is recognised on the way out: it
 * is described as `numeric` without a type modifier and printed without the
 * trailing zeros its DuckDB scale pads it with.
 */
export const UNCONSTRAINED_NUMERIC = 'DECIMAL(38,9)';

/** Whether a DuckDB DECIMAL(width, scale) stands for PostgreSQL's unconstrained numeric. */
export function isUnconstrainedDecimal(width: number, scale: number): boolean {
  return width === 38 && scale >= 9;
}

/** '1.500000000' → '1.5', '2.000000000' → '2': the digits PostgreSQL would print for the value. */
export function trimDecimalZeros(text: string): string {
  if (!text.includes('.')) return text;
  const trimmed = text.replace(/0+$/, '');
  return trimmed.endsWith('.') ? trimmed.slice(0, -1) : trimmed;
}
