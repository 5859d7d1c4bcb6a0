import { P } from './catalog-sql.js';
import type { MacroDef } from './pg-functions.js';

/**
 * Arrays as PostgreSQL answers for them where DuckDB's lists answer
 * otherwise: `x = ANY(a)` with a NULL element, and string_to_array of ''.
 */
/** The element types `||` appends to an array: a value of another type is taken for an array to concatenate. */
const ELEMENT_TYPES = [
  'VARCHAR',
  'SMALLINT',
  'INTEGER',
  'BIGINT',
  'HUGEINT',
  'DOUBLE',
  'FLOAT',
  'DECIMAL(38,9)',
  'BOOLEAN',
  'DATE',
  'TIMESTAMP',
  'TIMESTAMPTZ',
  'INTERVAL',
  'UUID',
];

/**
 * A macro over an array `a` and an array literal's texts `l` (rewrite/arrays.ts) that calls cot_array_contains with
 * `args`, where {l} is the texts cast to the array's type: an overload for each element type, and one that leaves
 * the texts as they are.
 */
function literalMacro(name: string, params: 'a, l' | 'l, a', args: string): MacroDef {
  const typed = (t: string): string => (params === 'a, l' ? `a ${t}[], l` : `l, a ${t}[]`);
  return [
    name,
    [
      ...ELEMENT_TYPES.map((t) => [typed(t), `${P}.cot_array_contains(${args.replace('{l}', `CAST(l AS ${t}[])`)})`] as const),
      [params, `${P}.cot_array_contains(${args.replace('{l}', 'l')})`],
    ],
  ];
}

export const LIST_MACROS: readonly MacroDef[] = [
  // a || b of arrays (rewrite/arrays.ts): a NULL array is an empty one, and NULL only when both are.
  ['cot_array_cat', [['a, b', 'CASE WHEN a IS NULL AND b IS NULL THEN NULL ELSE list_concat(a, b) END']]],
  // array || element and element || array: a NULL array is an empty one.
  ['cot_array_append', [['a, x', 'list_append(a, x)']]],
  ['cot_array_prepend', [['x, a', 'list_prepend(x, a)']]],
  // array || b and b || array where only the engine knows b's type: an element type appends (prepends), a list concatenates.
  ['cot_array_cat_or_append', [...ELEMENT_TYPES.map((t) => [`a, x ${t}`, 'list_append(a, x)'] as const), ['a, b', `${P}.cot_array_cat(a, b)`]]],
  ['cot_array_cat_or_prepend', [...ELEMENT_TYPES.map((t) => [`x ${t}, a`, 'list_prepend(x, a)'] as const), ['b, a', `${P}.cot_array_cat(b, a)`]]],
  // array_to_string(a, sep, null_text) (rewrite/functions.ts): each element as its output function prints it (t and f
  // for booleans), a NULL one as null_text, or left out when that is NULL; an array of NULLs only is '' (DuckDB: NULL).
  [
    'cot_array_to_string',
    [
      [
        'a, sep, null_text',
        `CASE WHEN a IS NOT NULL AND sep IS NOT NULL
          THEN coalesce(array_to_string(list_transform(a, cot_e -> coalesce(${P}.cot_concat_text(cot_e), null_text)), sep), '') END`,
      ],
    ],
  ],
  // jsonb_array_length of an array; of anything else, PostgreSQL's error (DuckDB's json_array_length answers 0).
  [
    'jsonb_array_length',
    [
      [
        'j',
        `CASE WHEN j IS NULL THEN NULL WHEN json_type(CAST(j AS JSON)) = 'ARRAY' THEN CAST(json_array_length(CAST(j AS JSON)) AS INTEGER)
          WHEN json_type(CAST(j AS JSON)) = 'OBJECT' THEN error('cannot get array length of a non-array')
          ELSE error('cannot get array length of a scalar') END`,
      ],
    ],
  ],
  // array || '{...}' and '{...}' || array: the literal's texts (rewrite/arrays.ts) cast to the array's element type.
  ['cot_array_cat_literal', [...ELEMENT_TYPES.map((t) => [`a ${t}[], l`, `list_concat(a, CAST(l AS ${t}[]))`] as const), ['a, l', 'list_concat(a, l)']]],
  ['cot_literal_cat_array', [...ELEMENT_TYPES.map((t) => [`l, a ${t}[]`, `list_concat(CAST(l AS ${t}[]), a)`] as const), ['l, a', 'list_concat(l, a)']]],
  // a @> b and a <@ b of arrays: every element of the one equal to an element of the other, a NULL to none.
  ['cot_array_contains', [['a, b', 'CASE WHEN a IS NULL OR b IS NULL THEN NULL WHEN list_count(b) < len(b) THEN false ELSE list_has_all(a, b) END']]],
  ['cot_array_contained', [['a, b', `${P}.cot_array_contains(b, a)`]]],
  // array @> '{...}', '{...}' @> array and the same of <@: the literal's texts cast to the array's element type.
  literalMacro('cot_array_contains_literal', 'a, l', 'a, {l}'),
  literalMacro('cot_literal_contains_array', 'l, a', '{l}, a'),
  literalMacro('cot_array_contained_literal', 'a, l', '{l}, a'),
  literalMacro('cot_literal_contained_array', 'l, a', 'a, {l}'),
  // x = ANY(a): true if an element equals x; otherwise NULL if an element (or x) is NULL; false for an empty array.
  [
    'cot_any_eq',
    [
      [
        'l, x',
        `CASE WHEN l IS NULL THEN NULL WHEN len(l) = 0 THEN false WHEN x IS NULL THEN NULL
          WHEN list_contains(l, x) THEN true WHEN list_count(l) < len(l) THEN NULL ELSE false END`,
      ],
    ],
  ],
  // substr(s, start [, n]) counts from position `start` even when it is below 1 (DuckDB's counts from the end).
  [
    'substr',
    [
      ['s, a', 'CASE WHEN a < 1 THEN s ELSE substring(s, a) END'],
      [
        's, a, n',
        `CASE WHEN n < 0 THEN error('negative substring length not allowed')
          WHEN a < 1 THEN substring(s, 1, greatest(n + a - 1, 0)) ELSE substring(s, a, n) END`,
      ],
    ],
  ],
  // a[i]: a subscript below 1 is NULL in PostgreSQL (rewrite/operators.ts, arraySubscript). As 0, which DuckDB
  // answers NULL of the element's type: a NULL subscript would make the element an untyped NULL.
  ['cot_subscript', [['i', 'CASE WHEN i >= 1 THEN i ELSE 0 END']]],
  // string_to_array('', d) is an empty array in PostgreSQL (DuckDB's holds one empty string); a third argument's matches are NULL.
  [
    'string_to_array',
    [
      ['s, d', `CASE WHEN s = '' THEN CAST([] AS VARCHAR[]) ELSE string_split(s, d) END`],
      ['s, d, n', `CASE WHEN s = '' THEN CAST([] AS VARCHAR[]) ELSE list_transform(string_split(s, d), e -> CASE WHEN e = n THEN NULL ELSE e END) END`],
    ],
  ],
];
