import { describe, expect, it } from 'vitest';
import { splitStatements, tokenize } from '../../../src/sql/lexer.js';

const texts = (sql: string): string[] => splitStatements(sql).map((s) => s.text);

describe('statement splitting', () => {
  it('splits at top-level semicolons and drops empty statements', () => {
    expect(texts('SELECT 1; SELECT 2;; ')).toEqual(['SELECT 1', 'SELECT 2']);
    expect(texts(' ; -- only a comment\n /* and another */ ')).toEqual([]);
  });

  it('never splits inside strings, identifiers, dollar quotes or comments', () => {
    expect(texts('SELECT \'a;b\', "c;d", $$e;f$$, $tag$g;$$;h$tag$ /* i; /* nested; */ j; */ -- k;\n; SELECT 2')).toEqual([
      'SELECT \'a;b\', "c;d", $$e;f$$, $tag$g;$$;h$tag$',
      'SELECT 2',
    ]);
    expect(texts("SELECT E'it\\'s;', 'it''s;'; SELECT U&\"a;b\"")).toEqual(["SELECT E'it\\'s;', 'it''s;'", 'SELECT U&"a;b"']);
  });

  it('records where each statement starts', () => {
    const parts = splitStatements('SELECT 1;\n  SELECT 2');
    expect(parts.map((p) => p.offset)).toEqual([0, 12]);
  });

  it('tells parameters from dollar quotes', () => {
    expect(tokenize('SELECT $1, $2::int, $a$x$a$').map((t) => t.kind)).toEqual(['word', 'param', 'punct', 'param', 'punct', 'word', 'punct', 'string']);
  });
});
