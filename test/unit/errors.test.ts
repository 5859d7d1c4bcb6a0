import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { fromDuckDBError, MAPPED_SQLSTATES, sqlStateFor } from '../../src/engines/duckdb/adapter/errors.js';
import { SqlState } from '../../src/errors/sqlstate.js';

const readme = readFileSync(join(import.meta.dirname, '../../README.md'), 'utf8');
const errorsAt = readme.indexOf('## Error codes');
/** The README's "Error codes" section, up to the next section. */
const errorTable = readme.slice(errorsAt, readme.indexOf('\n## ', errorsAt + 5));

describe('error codes', () => {
  it('documents in the README every SQLSTATE that DuckDB errors map to', () => {
    for (const code of MAPPED_SQLSTATES) expect(errorTable, `README lacks ${code}`).toContain(`\`${code}\``);
  });

  it('lists only well-formed SQLSTATEs', () => {
    for (const code of Object.values(SqlState)) expect(code).toMatch(/^[0-9A-Z]{5}$/);
    for (const m of errorTable.matchAll(/^\| `([^`]+)` \|/gm)) expect(m[1]).toMatch(/^[0-9A-Z]{5}$/);
  });

  it.each([
    ['Catalog Error: Table with name nope does not exist!', '42P01'],
    ['Binder Error: Referenced column "x" not found in FROM clause!', '42703'],
    ['Parser Error: syntax error at or near "selec"', '42601'],
    ["Conversion Error: Could not convert string 'x' to INT32", '22P02'],
    ['Constraint Error: Duplicate key "a: 1" violates primary key constraint.', '23505'],
    ['Constraint Error: NOT NULL constraint failed: t.x', '23502'],
    ['Out of Range Error: Overflow in multiplication of INT64', '22003'],
    ['INTERRUPT Error: Interrupted!', '57014'],
    ['Not implemented Error: something', '0A000'],
    ['Something odd happened', 'XX000'],
  ])('maps %s to %s', (message, code) => {
    expect(fromDuckDBError(new Error(message)).code).toBe(code);
  });

  it("gives a unique violation PostgreSQL's message and the detail ORMs parse for the columns at fault", () => {
    const one = fromDuckDBError(new Error('Constraint Error: Duplicate key "email: a@x.io" violates unique constraint.'));
    expect([one.code, one.message, one.detail]).toEqual(['23505', 'duplicate key value violates unique constraint', 'Key (email)=(a@x.io) already exists.']);
    const two = fromDuckDBError(new Error('Constraint Error: Duplicate key "a: 1, b: x, y" violates primary key constraint.'));
    expect(two.detail).toBe('Key (a, b)=(1, x, y) already exists.');
    // A partial unique index's key (its column where the predicate holds), and a COMMIT that two transactions' keys refuse.
    const partial = fromDuckDBError(
      new Error(
        'Constraint Error: Duplicate key "CASE  WHEN ((deleted_at IS NULL)) THEN (email) ELSE CAST(NULL AS VARCHAR) END: a@x.io" violates unique constraint.',
      ),
    );
    expect(partial.detail).toBe('Key (email)=(a@x.io) already exists.');
    const commit = fromDuckDBError(new Error('TransactionContext Error: Failed to commit: PRIMARY KEY or UNIQUE constraint violation: duplicate key "x"'));
    expect([commit.code, commit.message]).toEqual(['23505', 'duplicate key value violates unique constraint']);
  });

  it('recovers the position from the LINE excerpt and moves suggestions to the hint', () => {
    const sql = 'SELECT a,\n       b FROM nope';
    const err = fromDuckDBError(
      new Error('Catalog Error: Table with name nope does not exist!\nDid you mean "pg_enum"?\n\nLINE 2:        b FROM nope\n                      ^'),
      sql,
    );
    expect(err.message).toBe('Catalog Error: Table with name nope does not exist!');
    expect(err.hint).toBe('Did you mean "pg_enum"?');
    expect(err.position).toBe(sql.indexOf('nope') + 1);
  });

  it('says what to cast where a catalog macro cannot choose for an aggregate operand, and names no macro', () => {
    const err = fromDuckDBError(
      new Error(
        'Binder Error: Macro cot_array_cat_or_append() has multiple overloads that match the supplied arguments.\nIn order to select one, please supply all arguments by name, and/or add explicit type casts.\nCandidate macros:\n\tcot_array_cat_or_append(a, x VARCHAR)',
      ),
    );
    expect(err.code).toBe('42725');
    expect(err.message).not.toContain('cot_');
    expect(err.hint).toContain('::text');
  });

  it('falls back to XX000 for an unknown error type', () => {
    expect(sqlStateFor('Brand New', 'x')).toBe('XX000');
  });
});
