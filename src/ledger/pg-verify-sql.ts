import { PgError } from '../errors/pg-error.js';
import { SqlState } from '../errors/sqlstate.js';
import { PG_SCHEMA } from './pg-names.js';
import { quoteIdent } from './schema.js';

/**
 * The README's hash specification in PostgreSQL's SQL: each column's
 * canonical text (the text DuckDB's CAST(... AS VARCHAR) gives, which the
 * writer hashes), so that PostgreSQL recomputes every hash with its own
 * sha256() and a chain verifies the same on either engine.
 */

/**
 * A double as Python's repr() writes it, from PostgreSQL's shortest exact
 * text (extra_float_digits = 1, fixed for the function): the same digits,
 * placed by repr()'s rule (scientific below 1e-4 and from 1e16, `.0` on
 * whole numbers, at least two exponent digits).
 */
export const DOUBLE_TEXT_FUNCTION = `CREATE OR REPLACE FUNCTION ${PG_SCHEMA}.double_text(x float8) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT SET extra_float_digits = 1 AS $$
DECLARE
  s text := x::text;
  sign text := '';
  mant text;
  e int := 0;
  ip text;
  fp text;
  digits text;
  point int;
  exp10 int;
BEGIN
  IF s = 'NaN' THEN RETURN 'nan'; END IF;
  IF s = 'Infinity' THEN RETURN 'inf'; END IF;
  IF s = '-Infinity' THEN RETURN '-inf'; END IF;
  IF left(s, 1) = '-' THEN sign := '-'; s := substr(s, 2); END IF;
  IF position('e' IN s) > 0 THEN
    mant := split_part(s, 'e', 1);
    e := split_part(s, 'e', 2)::int;
  ELSE
    mant := s;
  END IF;
  ip := split_part(mant, '.', 1);
  fp := split_part(mant, '.', 2);
  digits := ip || fp;
  point := length(ip) + e;
  WHILE length(digits) > 1 AND left(digits, 1) = '0' LOOP
    digits := substr(digits, 2);
    point := point - 1;
  END LOOP;
  digits := rtrim(digits, '0');
  IF digits = '' THEN RETURN sign || '0.0'; END IF;
  exp10 := point - 1;
  IF exp10 < -4 OR exp10 >= 16 THEN
    RETURN sign || left(digits, 1) || CASE WHEN length(digits) > 1 THEN '.' || substr(digits, 2) ELSE '' END
      || 'e' || CASE WHEN exp10 < 0 THEN '-' ELSE '+' END || lpad(abs(exp10)::text, 2, '0');
  ELSIF point <= 0 THEN
    RETURN sign || '0.' || repeat('0', -point) || digits;
  ELSIF point >= length(digits) THEN
    RETURN sign || digits || repeat('0', point - length(digits)) || '.0';
  ELSE
    RETURN sign || left(digits, point) || '.' || substr(digits, point + 1);
  END IF;
END
$$`;

/** The SQL expression of a column's canonical text (NULL stays NULL), from its DuckDB type name. */
export function canonicalPgTextSql(column: string, type: string, alias = ''): string {
  return canonicalPgExprSql(`${alias}${quoteIdent(column)}`, type);
}

/** PostgreSQL's name of a ledger column type given by its DuckDB name. */
export function pgTypeName(type: string): string {
  const name = PG_TYPE[type];
  if (name === undefined) throw new PgError(SqlState.FeatureNotSupported, `a ledger on PostgreSQL cannot hold a column of type ${type}`);
  return name;
}

const PG_TYPE: Readonly<Record<string, string>> = {
  VARCHAR: 'text',
  JSON: 'json',
  UUID: 'uuid',
  SMALLINT: 'int2',
  INTEGER: 'int4',
  BIGINT: 'int8',
  DOUBLE: 'float8',
  BOOLEAN: 'boolean',
  'TIMESTAMP WITH TIME ZONE': 'timestamptz',
};

/** The canonical text of a value expression of a ledger column's type. */
export function canonicalPgExprSql(ref: string, type: string): string {
  switch (type) {
    case 'VARCHAR':
      return ref;
    case 'JSON':
    case 'UUID':
    case 'SMALLINT':
    case 'INTEGER':
    case 'BIGINT':
      return `${ref}::text`;
    case 'DOUBLE':
      return `${PG_SCHEMA}.double_text(${ref})`;
    case 'BOOLEAN':
      return `CASE WHEN ${ref} THEN 'true' WHEN NOT ${ref} THEN 'false' END`;
    case 'TIMESTAMP WITH TIME ZONE':
      // extract() is exact (numeric) from PostgreSQL 14.
      return `(EXTRACT(epoch FROM ${ref}) * 1000000)::int8::text`;
    default:
      throw new PgError(SqlState.FeatureNotSupported, `a ledger on PostgreSQL cannot hash a column of type ${type}`);
  }
}
