import type { StatementKind } from '../../../engine/port.js';
import type { Token } from '../../../sql/lexer.js';

const word = (t: Token | undefined): string => (t?.kind === 'word' ? t.text.toUpperCase() : '');

/** Words that may stand between CREATE and the kind of object it creates. */
const CREATE_MODIFIERS = new Set(['OR', 'REPLACE', 'TEMP', 'TEMPORARY', 'UNLOGGED', 'UNIQUE', 'GLOBAL', 'LOCAL', 'PERSISTENT', 'RECURSIVE']);

/** DuckDB object names that PostgreSQL calls something else. */
const OBJECT_ALIASES: Readonly<Record<string, string>> = { MACRO: 'FUNCTION' };

/** The object kind of CREATE/DROP/ALTER: "TABLE", "MATERIALIZED VIEW", "FUNCTION" ... */
function objectKind(tokens: readonly Token[]): string {
  let i = 1;
  while (CREATE_MODIFIERS.has(word(tokens[i]))) i++;
  let kind = word(tokens[i]);
  if (kind === 'MATERIALIZED' || kind === 'FOREIGN') kind = `${kind} ${word(tokens[i + 1])}`;
  // DROP MACRO TABLE is a table macro, still a function to PostgreSQL.
  return OBJECT_ALIASES[kind] ?? kind;
}

/** CREATE TABLE ... AS: an AS at parenthesis depth 0 after the object kind. */
function isCreateTableAs(tokens: readonly Token[]): boolean {
  let depth = 0;
  for (let i = 2; i < tokens.length; i++) {
    const t = tokens[i] as Token;
    if (t.text === '(') depth++;
    else if (t.text === ')') depth--;
    else if (depth === 0 && word(t) === 'AS') return true;
  }
  return false;
}

/**
 * The CommandComplete tag PostgreSQL would send for a statement that ran on
 * the engine. `rows` is the number of rows sent (or affected, for DML without
 * RETURNING).
 */
export function commandTag(kind: StatementKind, tokens: readonly Token[], rows: number): string {
  const first = word(tokens[0]);
  switch (kind) {
    case 'SELECT':
    case 'RELATION':
      return `SELECT ${rows}`;
    case 'INSERT':
      return `INSERT 0 ${rows}`;
    case 'UPDATE':
      return `UPDATE ${rows}`;
    case 'DELETE':
      return `DELETE ${rows}`;
    case 'MERGE_INTO':
      return `MERGE ${rows}`;
    case 'COPY':
      return `COPY ${rows}`;
    case 'EXPLAIN':
      return 'EXPLAIN';
    case 'PRAGMA':
      return first === 'PRAGMA' ? 'PRAGMA' : `SELECT ${rows}`;
    case 'CREATE': {
      const obj = objectKind(tokens);
      if (obj === 'TABLE' && isCreateTableAs(tokens)) return `SELECT ${rows}`;
      return `CREATE ${obj}`;
    }
    case 'CREATE_FUNC':
      return 'CREATE FUNCTION';
    case 'DROP':
      if (first === 'DEALLOCATE') return word(tokens[1]) === 'ALL' || word(tokens[2]) === 'ALL' ? 'DEALLOCATE ALL' : 'DEALLOCATE';
      return `DROP ${objectKind(tokens)}`;
    case 'ALTER':
      // DuckDB runs COMMENT ON as an ALTER.
      return first === 'COMMENT' ? 'COMMENT' : `ALTER ${objectKind(tokens)}`;
    case 'VARIABLE_SET':
    case 'SET':
      return first === 'RESET' ? 'RESET' : 'SET';
    case 'CALL':
      return first === 'CHECKPOINT' || first === 'FORCE' ? 'CHECKPOINT' : rows > 0 ? `SELECT ${rows}` : 'CALL';
    case 'EXECUTE':
      return `SELECT ${rows}`;
    default:
      return first === '' ? kind : first;
  }
}
