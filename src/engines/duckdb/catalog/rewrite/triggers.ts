import type { Token } from '../../../../sql/lexer.js';
import { readAsDouble } from '../../../../sql/numeric.js';
import { CATALOG_FUNCTIONS, CATALOG_RELATIONS } from '../pg-catalog.js';
import { DEFAULTED_ARGUMENTS, FUNCTION_NAMES } from './functions.js';
import { JSON_BUILDERS } from './json-builders.js';
import { JSON_AGGREGATES, JSON_OPERATORS } from './jsonb.js';
import { DUCKDB_ONLY_KEYWORDS } from './keywords.js';
import { SPACED_OFFSET } from './literals.js';
import { LIKE_WORDS, REGEX_OPERATORS } from './operators.js';
import { DIVISION_OPERATORS, DOUBLE_AGGREGATES, INTEGER_FUNCTIONS, NUMERIC_AGGREGATES } from './result-types.js';
import { JSON_FROM_FUNCTIONS, SCALAR_FROM_FUNCTIONS, SCALAR_SET_FUNCTIONS } from './set-functions.js';
import { REG_TYPES, TYPE_NAMES } from './types.js';
import { wordOf } from './walker.js';

/** The words that may start one of the rules' rewrites: a statement without any of them (and without the rules' other marks) is never parsed for the rewrite. */
const TRIGGER_WORDS: ReadonlySet<string> = new Set([
  ...Object.keys(NUMERIC_AGGREGATES),
  ...DOUBLE_AGGREGATES,
  'extract',
  'round',
  'trunc',
  // Branches of numerics of different scales (result-types.ts, scaledBranches).
  'case',
  'coalesce',
  'greatest',
  'least',
  'bool',
  'boolean',
  'date_part',
  'varchar',
  'varying',
  'overriding',
  ...DUCKDB_ONLY_KEYWORDS,
  'to_char',
  'exists',
  'update',
  'share',
  ...INTEGER_FUNCTIONS,
  'bytea',
  'pg_partition_ancestors',
  'using',
  'references',
  'unique',
  'last_value',
  'tableoid',
  'timestamp',
  'timestamptz',
  'time',
  'timetz',
  'numeric',
  'text',
  'concat',
  'date_trunc',
  'sqrt',
  'ceil',
  'ceiling',
  'floor',
  'pg_typeof',
  'substr',
  'int2',
  'int4',
  'int8',
  'int',
  'integer',
  'smallint',
  'bigint',
  'float8',
  'float4',
  'real',
  'double',
  'concat_ws',
  'decimal',
  'dec',
  'pg_catalog',
  'information_schema',
  'public',
  'operator',
  'collate',
  'any',
  'some',
  'current_schema',
  'current_catalog',
  ...REG_TYPES,
  ...Object.keys(TYPE_NAMES),
  ...SCALAR_SET_FUNCTIONS,
  ...SCALAR_FROM_FUNCTIONS,
  ...JSON_AGGREGATES,
  ...JSON_BUILDERS,
  ...JSON_FROM_FUNCTIONS,
  'substring',
  'user',
  ...Object.keys(FUNCTION_NAMES),
  ...Object.keys(DEFAULTED_ARGUMENTS),
  ...CATALOG_RELATIONS,
  ...CATALOG_FUNCTIONS,
]);

/** A LIKE pattern whose escapes matter: a parameter, or a literal holding a backslash. */
const escapablePattern = (t: Token | undefined): boolean => t !== undefined && (t.kind === 'param' || (t.kind === 'string' && t.text.includes('\\')));

/** Whether a statement may need a rewrite: a cheap look at its tokens, so that most statements are never parsed twice. */
export function mayNeedRewrite(tokens: readonly Token[]): boolean {
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i] as Token;
    if (t.kind === 'string' && SPACED_OFFSET.test(t.text.slice(1, -1))) return true;
    // An ISO 8601 duration ('P1DT2H'), or an interval's text with a signed time ('-3 days +04:05:06').
    if (t.kind === 'string' && /^'\s*P[-+\dT.]|\s\+\d+:\d/i.test(t.text)) return true;
    if (LIKE_WORDS.has(wordOf(t) ?? '') && escapablePattern(tokens[i + 1])) return true;
    if (
      t.kind === 'operator' &&
      (REGEX_OPERATORS.has(t.text) || DIVISION_OPERATORS.has(t.text) || JSON_OPERATORS.has(t.text) || t.text === '->' || t.text === '->>')
    ) {
      return true;
    }
    // A binary minus (date - date); a minus after '(' or ',' is a negative literal's.
    if (t.kind === 'operator' && t.text === '-' && i > 0 && !['(', ',', '=', 'values'].includes(tokens[i - 1]?.text.toLowerCase() ?? '')) return true;
    // DuckDB's scanner splits ?| and #>> after a `?` or `#` of their own.
    if (t.kind === 'punct' && (t.text === '?' || t.text === '#')) return true;
    // a[i] with a subscript that is not a positive constant (a[-1] counts from the end in DuckDB).
    if (t.text === '[' && i > 0 && !(tokens[i + 1]?.kind === 'number' && tokens[i + 2]?.text === ']' && Number(tokens[i + 1]?.text) >= 1)) return true;
    // '{a,b}'::text[]: an array literal cast to an array type.
    if (t.kind === 'string' && t.text.startsWith("'{") && tokens[i + 1]?.text === '::') return true;
    // 1e-20, or more digits than DuckDB's DECIMAL: a double to DuckDB, numeric to PostgreSQL.
    if (t.kind === 'number' && readAsDouble(t.text)) return true;
    // `||`: beside an array (rewrite/arrays.ts), jsonb (rewrite/jsonb.ts), or a double or numeric printed as text (rewrite/casts.ts).
    if (t.text === '||') return true;
    const w = wordOf(t);
    // DISTINCT ON without ORDER BY (rewrite/queries.ts).
    if (w === 'distinct' && wordOf(tokens[i + 1]) === 'on') return true;
    if (w !== null && TRIGGER_WORDS.has(w)) return true;
  }
  return false;
}
