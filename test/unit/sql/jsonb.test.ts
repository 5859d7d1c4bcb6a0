import { describe, expect, it } from 'vitest';
import { jsonbAt, jsonbContains, jsonbText, numericText } from '../../../src/sql/jsonb.js';

describe('jsonb text, as PostgreSQL prints it', () => {
  // Each expected text was read from PostgreSQL 15 (SELECT $x$...$x$::jsonb::text).
  it.each([
    ['{"b":1, "a":2}', '{"a": 2, "b": 1}'],
    ['{"aa":1,"b":2,"a":3,"ab":4}', '{"a": 3, "b": 2, "aa": 1, "ab": 4}'],
    ['{"a":1,"a":2}', '{"a": 2}'],
    ['[1,2 , 3]', '[1, 2, 3]'],
    ['{"x":[1,{"z":true,"y":null}],"é":"ü"}', '{"x": [1, {"y": null, "z": true}], "é": "ü"}'],
    ['1e2', '100'],
    ['1.50', '1.50'],
    ['1.50e1', '15.0'],
    ['1E-2', '0.01'],
    ['-0', '0'],
    ['-0.0', '0.0'],
    ['0.000', '0.000'],
    ['123456789012345678901234567890', '123456789012345678901234567890'],
    ['"a\\"b\\\\c\\/d\\n\\t\\u0001\\u00e9"', '"a\\"b\\\\c/d\\n\\t\\u0001é"'],
    ['{"k": "\\ud83d\\ude00"}', '{"k": "😀"}'],
    ['[]', '[]'],
    ['{}', '{}'],
    ['  {  "a"  :  [ ]  }', '{"a": []}'],
    ['true', 'true'],
    ['null', 'null'],
    ['-12.5e-3', '-0.0125'],
  ])('%s', (input, expected) => {
    expect(jsonbText(input)).toBe(expected);
  });

  it('is null for what is not JSON', () => {
    expect(['{', '{"a" 1}', '[1,]', 'tru', '1 2', "{'a': 1}", ''].map(jsonbText)).toEqual([null, null, null, null, null, null, null]);
  });

  it('prints numbers as numeric does', () => {
    expect(['0', '10', '1e0', '2.5E+2', '0.10e-1', '-1'].map(numericText)).toEqual(['0', '10', '1', '250', '0.010', '-1']);
  });
});

describe('jsonb containment', () => {
  // Each answer is PostgreSQL 15's for '<left>'::jsonb @> '<right>'::jsonb.
  const cases: ReadonlyArray<readonly [string, string, boolean]> = [
    ['{"a": 1, "b": [1, 2, {"c": "x"}]}', '[1]', false],
    ['{"a": 1, "b": [1, 2, {"c": "x"}]}', '[]', false],
    ['{"a": 1, "b": [1, 2, {"c": "x"}]}', '{"b": [{"c": "x"}]}', true],
    ['{"a": 1, "b": [1, 2, {"c": "x"}]}', '{"c": "x"}', false],
    ['{"a": 1.0}', '{"a": 1}', true],
    ['[1, 2.50, "x", null]', '[1]', true],
    ['[1, 2.50, "x", null]', '[2.5, null]', true],
    ['[1, 2.50, "x", null]', '"x"', true],
    ['["x"]', '[["x"]]', false],
    ['"str"', '"str"', true],
    ['"str"', '["str"]', false],
    ['[]', '[]', true],
    ['{}', '{}', true],
    ['[]', '{}', false],
    ['{"a": {"k": true}, "n": 1.10}', '{"a": {}}', true],
    ['{"a": [1, 2]}', '{"a": 1}', false],
    ['[[1,2],3]', '[1]', false],
    ['[[1,2],3]', '[[1]]', true],
    ['{"a":[1,[2]]}', '{"a":[[2]]}', true],
    ['1', '1.0', true],
    ['null', 'null', true],
    ['[null]', 'null', true],
  ];
  it.each(cases)('%s @> %s is %s', (left, right, answer) => {
    expect(jsonbContains(left, right)).toBe(answer);
  });
});

describe('jsonb -> and #>, as PostgreSQL 15 answers them', () => {
  const doc = '{"n": 1.10, "e": 1e2, "b": [1, 2.50, {"c": "x"}], "s": "a\\"b", "z": null, "k": {"y": 1, "x": [3.0]}, "n": 7.00}';
  it('keep numeric text, print containers as jsonb, and find nothing where a step does not fit', () => {
    expect(jsonbAt(doc, [{ key: 'n' }], false)).toBe('7.00');
    expect(jsonbAt(doc, [{ key: 'e' }], true)).toBe('100');
    expect(jsonbAt(doc, [{ key: 'b' }], true)).toBe('[1, 2.50, {"c": "x"}]');
    expect(jsonbAt(doc, [{ key: 'k' }], false)).toBe('{"x": [3.0], "y": 1}');
    expect(jsonbAt(doc, [{ key: 's' }], true)).toBe('a"b');
    expect(jsonbAt(doc, [{ key: 's' }], false)).toBe('"a\\"b"');
    expect(jsonbAt(doc, [{ key: 'z' }], false)).toBe('null');
    expect(jsonbAt(doc, [{ key: 'z' }], true)).toBeNull();
    expect(jsonbAt(doc, [{ key: 'missing' }], false)).toBeNull();
    expect(jsonbAt(doc, [{ index: 0 }], false)).toBeNull();
    expect(jsonbAt('[1, 2.50, 3]', [{ index: -2 }], false)).toBe('2.50');
    expect(jsonbAt('[1, 2.50, 3]', [{ key: '1' }], false)).toBeNull();
    expect(jsonbAt(doc, [{ path: 'b' }, { path: '1' }], true)).toBe('2.50');
    expect(jsonbAt(doc, [{ path: 'b' }, { path: 'x' }], true)).toBeNull();
    expect(() => jsonbAt('{', [{ key: 'a' }], false)).toThrow();
    expect(jsonbAt('true', [{ index: 0 }], false)).toBe('true');
    expect(jsonbAt('"s"', [{ index: -1 }], true)).toBe('s');
    expect(jsonbAt('5', [{ path: '0' }], false)).toBeNull();
    expect(jsonbAt('{"a": 1}', [], false)).toBe('{"a": 1}');
  });
});
