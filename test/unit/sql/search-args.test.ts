import { loadModule } from 'libpg-query';
import { beforeAll, describe, expect, it } from 'vitest';
import { searchArgs } from '../../../src/sql/search-args.js';

describe("cot_search()'s query texts, from PostgreSQL's parse tree", () => {
  // The server loads PostgreSQL's parser before it serves anything (guard.ts).
  beforeAll(() => loadModule());

  it.each([
    ["SELECT * FROM cot_search('decisions about pricing', 10)", { searches: true, literals: ['decisions about pricing'], params: [] }],
    ["SELECT * FROM cot_search('it''s late', 3)", { searches: true, literals: ["it's late"], params: [] }],
    ['SELECT * FROM cot_search($2, $1)', { searches: true, literals: [], params: [2] }],
    ['SELECT * FROM cot_search($1::text, 5)', { searches: true, literals: [], params: [1] }],
    ["SELECT * FROM cot_search(k := 5, query := 'named')", { searches: true, literals: ['named'], params: [] }],
    [
      "SELECT a.content FROM cot_search('one', 5) a JOIN cot_search($3, 5) b USING (trace_id) WHERE a.step_type IN (SELECT step_type FROM cot_search('two', 1))",
      { searches: true, literals: ['one', 'two'], params: [3] },
    ],
    ["SELECT * FROM COT_SEARCH('upper', 1)", { searches: true, literals: ['upper'], params: [] }],
    // Computed in the statement: found to be a search, with no text to fetch ahead.
    ["SELECT * FROM cot_search('a' || 'b', 1)", { searches: true, literals: [], params: [] }],
    ["SELECT 'cot_search' AS word", { searches: false, literals: [], params: [] }],
    ['SELECT 1', { searches: false, literals: [], params: [] }],
  ])('%s', (sql, expected) => {
    expect(searchArgs(sql)).toEqual(expected);
  });
});
