import { bench, describe } from 'vitest';
import { Guard } from '../src/engines/duckdb/guard/guard.js';
import type { StatementKind } from '../src/engine/port.js';
import { splitStatements } from '../src/sql/lexer.js';

/**
 * The guard's cost per statement: warm (the decision is cached by text, the
 * path every repeated statement takes) and cold (a text never seen before:
 * lexing, PostgreSQL parsing where the statement may write, classification).
 */
const guard = await Guard.create({ prefixes: ['_cot'], reservedFunctions: new Set(['sha256']), engineSettings: new Set(['threads']) });

function input(sql: string, kind: StatementKind) {
  const [statement] = splitStatements(sql);
  return { text: sql, tokens: statement?.tokens ?? [], kind };
}

const pointSelect = input('SELECT * FROM _cot_steps WHERE trace_id = $1', 'SELECT');
const append = input("INSERT INTO _cot_steps (session_id, step_type, content) VALUES ($1, 'Observation', $2)", 'INSERT');
guard.decide(pointSelect);
guard.decide(append);

let n = 0;

describe('guard, per statement', () => {
  bench('warm: cached point SELECT', () => {
    guard.decide(pointSelect);
  });
  bench('warm: cached INSERT into a ledger', () => {
    guard.decide(append);
  });
  bench('cold: new SELECT text (lex + classify)', () => {
    guard.decide(input(`SELECT * FROM _cot_steps WHERE id = ${n++}`, 'SELECT'));
  });
  bench('cold: new INSERT text (lex + PostgreSQL parse + classify)', () => {
    guard.decide(input(`INSERT INTO _cot_steps (session_id, content) VALUES ('s', 'c${n++}')`, 'INSERT'));
  });
  bench('cold: new UPDATE of an ordinary table reading a ledger', () => {
    guard.decide(input(`UPDATE notes SET body = 'x' WHERE id IN (SELECT id FROM _cot_steps WHERE id > ${n++})`, 'UPDATE'));
  });
});
