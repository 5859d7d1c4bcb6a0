import { parseArrayLiteral, type ArrayItem } from '../../../sql/array-literal.js';
import type { Token } from '../../../sql/lexer.js';
import { ParsedStatement } from '../../../sql/parsed.js';
import { parseOne, strings } from '../../../sql/pg-tree.js';
import { UNCONSTRAINED_NUMERIC } from '../../../sql/numeric.js';
import { toCharSql } from './to-char.js';
import { lengthCheck } from './alter-table.js';
import { typeWitness } from './type-witness.js';
import { CATALOG_FUNCTIONS, CATALOG_RELATIONS, catalogRelationOid, INFORMATION_RELATIONS, INFORMATION_SCHEMA, PG_SCHEMA } from './pg-catalog.js';
import { quoteIdentifier, quoteLiteral } from '../../../sql/identifiers.js';

/**
 * PostgreSQL-only syntax rewritten onto DuckDB, on the statement as
 * PostgreSQL's own parser (libpg-query) reads it. Each rewrite replaces
 * the source text of one parse-tree node, found by the node's location,
 * and leaves every other byte of the statement as the client wrote it.
 * docs/compatibility.md lists each rule and why it exists.
 */

type Node = Record<string, unknown>;

interface Edit {
  readonly start: number;
  readonly end: number;
  readonly text: string;
}

/** Names of reg* types: a cast to one becomes a catalog lookup. */
const REG_TYPES = new Set(['regclass', 'regtype', 'regproc', 'regprocedure', 'regnamespace', 'regrole']);

/** Time types whose fractional-second precision DuckDB does not take. */
const PRECISION_TYPES = new Set(['timestamp', 'timestamptz', 'time', 'timetz', 'interval']);

/** PostgreSQL type names DuckDB does not know, and the DuckDB type that holds their values. */
const TYPE_NAMES: Readonly<Record<string, string>> = {
  jsonb: 'JSON',
  name: 'VARCHAR',
  char: 'VARCHAR',
  oid: 'UINTEGER',
  int2vector: 'SMALLINT[]',
  oidvector: 'UINTEGER[]',
  pg_node_tree: 'VARCHAR',
  xid: 'UINTEGER',
  cid: 'UINTEGER',
  regoper: 'UINTEGER',
  regoperator: 'UINTEGER',
  regconfig: 'UINTEGER',
  regdictionary: 'UINTEGER',
  aclitem: 'VARCHAR',
};

/** PostgreSQL functions DuckDB has under another name, with the same arguments and meaning. */
const FUNCTION_NAMES: Readonly<Record<string, string>> = {
  json_build_object: 'json_object',
  jsonb_build_object: 'json_object',
  json_build_array: 'json_array',
  jsonb_build_array: 'json_array',
  json_object_agg: 'json_group_object',
  jsonb_object_agg: 'json_group_object',
  to_jsonb: 'to_json',
  row_to_json: 'to_json',
  every: 'bool_and',
  btrim: 'trim',
};

/** Catalog columns PostgreSQL types int2vector or oidvector, whose text form is '1 2' (DuckDB lists print as [1, 2]). */
const VECTOR_COLUMNS = new Set(['indkey', 'indoption', 'indclass', 'indcollation', 'proargtypes', 'stxkeys', 'partattrs']);

/** Functions whose result is text: a cast of their result to a reg* type looks a name up. */
const TEXT_FUNCTIONS = new Set(['pg_get_serial_sequence', 'quote_ident', 'format', 'concat', 'lower', 'upper', 'current_schema']);

/** Comparison operators: a timestamp literal compared with a column is read as a timestamp. */
const COMPARISONS = new Set(['=', '<>', '!=', '<', '>', '<=', '>=']);

/** Functions whose result is integer in PostgreSQL and bigint in DuckDB. */
const INTEGER_FUNCTIONS = new Set([
  'length',
  'char_length',
  'character_length',
  'octet_length',
  'bit_length',
  'strpos',
  'position',
  'array_length',
  'ascii',
  'ntile',
]);

/** Fields below the second, read as microseconds: the factor to numeric (extract) and the divisor to double (date_part). */
const SUBSECOND_FIELDS: Readonly<Record<string, { readonly numeric: string; readonly divisor: number }>> = Object.fromEntries([
  ...['second', 'seconds', 'sec', 'secs', 's'].map((f) => [f, { numeric: '0.000001', divisor: 1_000_000 }]),
  ...['millisecond', 'milliseconds', 'ms', 'msec', 'msecs', 'mseconds'].map((f) => [f, { numeric: '0.001', divisor: 1_000 }]),
]);

/** Aggregates whose result is double precision in PostgreSQL and has the ordering column's type in DuckDB. */
const DOUBLE_AGGREGATES = new Set(['percentile_cont']);

/** JSON aggregates, which DuckDB has only as macros that take no ORDER BY. */
const JSON_AGGREGATES = new Set(['json_agg', 'jsonb_agg']);

/** jsonb's key-existence operators, and the macro each becomes. */
const JSON_EXISTS_OPERATORS: Readonly<Record<string, string>> = {
  '?': 'cot_jsonb_exists',
  '?|': 'cot_jsonb_exists_any',
  '?&': 'cot_jsonb_exists_all',
};

/** Operators rewritten for JSON operands (and `?`, which DuckDB reads as a parameter). */
const JSON_OPERATORS = new Set(['?', '?|', '?&', '@>', '<@', '#>', '#>>']);

/** Set-returning JSON functions, as (key, value) rows; whether the value is text (else json). */
const JSON_EACH_FUNCTIONS: Readonly<Record<string, boolean>> = {
  json_each: false,
  jsonb_each: false,
  json_each_text: true,
  jsonb_each_text: true,
};

/** Aggregates whose result type PostgreSQL derives otherwise than DuckDB (int8 sums, numeric averages), and the macro that corrects it. */
const NUMERIC_AGGREGATES: Readonly<Record<string, string>> = { sum: 'cot_sum_as', avg: 'cot_avg_as' };

/** Division and modulo: PostgreSQL raises division_by_zero (22012) where DuckDB returns NULL or Infinity. */
const DIVISION_OPERATORS = new Set(['/', '%']);

/** Statements whose expressions may be rewritten to call the catalog's functions: queries and DML, never DDL that persists them. */
const EXPRESSION_STATEMENTS = new Set(['SelectStmt', 'InsertStmt', 'UpdateStmt', 'DeleteStmt', 'ExplainStmt']);

/** PostgreSQL's regular-expression match operators: a match anywhere in the string. */
const REGEX_OPERATORS = new Set(['~', '!~', '~*', '!~*']);

/** Functions that return a scalar per row and, in FROM with an alias, name their column after the alias. */
const SCALAR_SET_FUNCTIONS = new Set(['generate_series', 'unnest', 'generate_subscripts']);

/** Set-returning functions that DuckDB has as scalars returning a list: in a select list they are unnested. */
const SELECT_LIST_SET_FUNCTIONS = new Set(['generate_series']);

/** Functions that return one value, which PostgreSQL lets FROM use as a one-row table (Grafana's string_to_array(...) s). */
const SCALAR_FROM_FUNCTIONS = new Set([
  'string_to_array',
  'regexp_split_to_array',
  'parse_ident',
  'current_schemas',
  'array_append',
  'array_cat',
  'current_schema',
  'current_database',
]);

/** Collations every PostgreSQL client may name and DuckDB does not have; the engine compares bytes, as C does. */
const IGNORED_COLLATIONS = new Set(['default', 'c', 'posix', 'ucs_basic']);

/** Fields whose RangeVar is the statement's target (INSERT INTO, CREATE TABLE ...): never sent to the catalog's views. */
const TARGET_FIELDS = new Set(['relation', 'relations', 'rel', 'view', 'into', 'objects']);

/** Words DuckDB's grammar reserves (fully, or from column names) that PostgreSQL takes as column names. */
const DUCKDB_ONLY_KEYWORDS = new Set([
  'anti',
  'asof',
  'at',
  'by',
  'columns',
  'generated',
  'glob',
  'map',
  'positional',
  'semi',
  'struct',
  'try_cast',
  'unpack',
  'describe',
  'lambda',
  'pivot',
  'pivot_longer',
  'pivot_wider',
  'qualify',
  'show',
  'summarize',
  'unpivot',
]);

const TRIGGER_WORDS: ReadonlySet<string> = new Set([
  ...Object.keys(NUMERIC_AGGREGATES),
  ...DOUBLE_AGGREGATES,
  'extract',
  'round',
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
  ...Object.keys(JSON_EACH_FUNCTIONS),
  'user',
  ...Object.keys(FUNCTION_NAMES),
  ...CATALOG_RELATIONS,
  ...CATALOG_FUNCTIONS,
]);

const wordOf = (t: Token | undefined): string | null =>
  t === undefined ? null : t.kind === 'word' ? t.text.toLowerCase() : t.kind === 'quoted' ? t.text.slice(1, -1).replaceAll('""', '"') : null;

/** LIKE and its spellings, whose pattern has `\` as its escape character in PostgreSQL and none in DuckDB. */
const LIKE_WORDS = new Set(['like', 'ilike']);

/** A LIKE pattern whose escapes matter: a parameter, or a literal holding a backslash. */
const escapablePattern = (t: Token | undefined): boolean => t !== undefined && (t.kind === 'param' || (t.kind === 'string' && t.text.includes('\\')));

/** Whether a statement may need a rewrite: a cheap look at its tokens, so that most statements are never parsed twice. */
export function mayNeedRewrite(tokens: readonly Token[]): boolean {
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i] as Token;
    if (t.kind === 'string' && SPACED_OFFSET.test(t.text.slice(1, -1))) return true;
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
    // '{a,b}'::text[]: an array literal cast to an array type.
    if (t.kind === 'string' && t.text.startsWith("'{") && tokens[i + 1]?.text === '::') return true;
    const w = wordOf(t);
    if (w !== null && TRIGGER_WORDS.has(w)) return true;
  }
  return false;
}

/** A timestamp whose numeric offset follows a space: the date and time, and the offset. */
const SPACED_OFFSET = /^(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?) +([+-]\d{2}(?::?\d{2})?)$/;

/** Index methods DuckDB's ordered index (ART) stands for. */
const ORDERED_INDEX_METHODS = new Set(['btree', 'hash']);

/** The columns of a sequence read as a relation. */
const SEQUENCE_COLUMNS = new Set(['last_value', 'is_called', 'log_cnt']);

/**
 * A PostgreSQL regular expression as a DuckDB full-match pattern: `~` in
 * PostgreSQL matches anywhere, DuckDB's `~` matches the whole string.
 */
export function partialPattern(pattern: string, caseInsensitive: boolean): string {
  return `(?s:.*)(?${caseInsensitive ? 'i' : ''}:${pattern})(?s:.*)`;
}

/**
 * A PostgreSQL array literal ('{a,"b c",NULL}', nested '{{1,2},{3}}') as a
 * DuckDB list expression (['a', 'b c', NULL]); null when the text is not
 * one. DuckDB casts a list of strings to the target's element type.
 */
export function pgArrayToList(text: string): string | null {
  const items = parseArrayLiteral(text);
  const list = (xs: ArrayItem[]): string => `[${xs.map((x) => (x === null ? 'NULL' : Array.isArray(x) ? list(x) : quoteLiteral(x))).join(', ')}]`;
  return items === null ? null : list(items);
}

/** The columns of an INSERT's target table, in order, and whether each holds a list. */
export type TargetColumns = ReadonlyArray<{ readonly name: string; readonly list: boolean; readonly temporal?: boolean }>;

class Rewriter {
  private readonly edits: Edit[] = [];
  /** `x = ANY(list)` rewrites, which move the list's text: applied only when nothing inside the list is rewritten too. */
  private readonly moves: Array<{ readonly from: number; readonly to: number; readonly edits: readonly Edit[] }> = [];
  private readonly ctes = new Set<string>();
  /** Byte offset (libpg-query's locations) → UTF-16 offset; null when the text is ASCII and the two agree. */
  private readonly charAt: Int32Array | null;
  private readonly tokenAt = new Map<number, number>();

  constructor(
    private readonly text: string,
    private readonly tokens: readonly Token[],
    private readonly target: TargetColumns | null = null,
    /** The database name clients connect to, which they may put before a schema (cotwire.public.orders). */
    private readonly database: string = 'cotwire',
  ) {
    tokens.forEach((t, i) => {
      this.tokenAt.set(t.start, i);
    });
    // biome-ignore lint/suspicious/noControlCharactersInRegex: the test is for ASCII, control characters included
    if (/^[\x00-\x7f]*$/.test(text)) {
      this.charAt = null;
    } else {
      const bytes = Buffer.byteLength(text, 'utf8');
      const map = new Int32Array(bytes + 1);
      let b = 0;
      for (let i = 0; i < text.length; i++) {
        const c = text.codePointAt(i) as number;
        const n = c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
        for (let k = 0; k < n; k++) map[b + k] = i;
        b += n;
        if (c >= 0x10000) i++;
      }
      map[bytes] = text.length;
      this.charAt = map;
    }
  }

  /** Whether expressions may call the catalog's functions (not inside CREATE VIEW, whose text is stored). */
  private expressions = true;

  /** The edits applied by run(), in order: where positions in the rewritten text came from. */
  readonly applied: Edit[] = [];

  /** Catalog relations read by the statement, by the name or alias their columns are qualified with: their OIDs. */
  private readonly catalogTables = new Map<string, number>();

  run(stmt: Node): string {
    this.expressions = EXPRESSION_STATEMENTS.has(Object.keys(stmt)[0] ?? '');
    this.collectCtes(stmt);
    this.collectCatalogTables(stmt);
    // What the client receives: the outermost query's columns (a subquery's stay lists, for the query around it).
    const root = stmt.SelectStmt as Node | undefined;
    const outermost = (select: Node | undefined): void => {
      if (select === undefined) return;
      if (select.op !== undefined && select.op !== 'SETOP_NONE') {
        outermost(select.larg as Node | undefined);
        outermost(select.rarg as Node | undefined);
      } else {
        this.vectorTargets(select);
      }
    };
    outermost(root);
    this.walk(stmt, null, false);
    for (const move of this.moves) {
      if (!this.edits.some((e) => e.start >= move.from && e.start < move.to)) this.edits.push(...move.edits);
    }
    if (this.edits.length === 0) return this.text;
    // By position; at one position, insertions before replacements.
    const edits = [...this.edits].sort((a, b) => a.start - b.start || a.end - a.start - (b.end - b.start));
    let out = '';
    let at = 0;
    for (const e of edits) {
      if (e.start < at) continue; // inside a span another rewrite already replaced
      out += this.text.slice(at, e.start) + e.text;
      at = e.end;
      this.applied.push(e);
    }
    return out + this.text.slice(at);
  }

  private collectCatalogTables(value: unknown): void {
    if (Array.isArray(value)) for (const v of value) this.collectCatalogTables(v);
    else if (value !== null && typeof value === 'object') {
      const node = value as Node;
      if (typeof node.relname === 'string' && (node.schemaname === undefined || node.schemaname === 'pg_catalog') && !this.ctes.has(node.relname)) {
        const oid = catalogRelationOid(node.relname);
        const alias = (node.alias as { aliasname?: string } | undefined)?.aliasname ?? node.relname;
        if (oid !== undefined) this.catalogTables.set(alias, oid);
      }
      for (const v of Object.values(node)) this.collectCatalogTables(v);
    }
  }

  /**
   * `c.tableoid`: the system column PostgreSQL gives every row, the OID of
   * its catalog table (pg_dump reads it from each catalog it queries).
   */
  /** For each SELECT being walked, the catalog relations of its own FROM (an unqualified tableoid is theirs). */
  private readonly fromScopes: number[][] = [];

  private fromCatalogOids(select: Node): number[] {
    const out: number[] = [];
    const visit = (item: Node | undefined): void => {
      if (item === undefined) return;
      const rv = item.RangeVar as Node | undefined;
      if (rv !== undefined) {
        const oid = typeof rv.relname === 'string' && !this.ctes.has(rv.relname) ? catalogRelationOid(rv.relname) : undefined;
        out.push(oid ?? -1);
      }
      const join = item.JoinExpr as Node | undefined;
      if (join !== undefined) {
        visit(join.larg as Node | undefined);
        visit(join.rarg as Node | undefined);
      }
      if (item.RangeSubselect !== undefined || item.RangeFunction !== undefined) out.push(-1);
    };
    for (const item of (select.fromClause as Node[] | undefined) ?? []) visit(item);
    return out.includes(-1) ? [] : out;
  }

  private columnRef(node: Node): void {
    const fields = strings(node.fields);
    // pg_catalog.pg_class.relname (SQLAlchemy): the relation is in the catalog's schema, and is named pg_class there.
    if (
      fields.length === 3 &&
      ((fields[0] === 'pg_catalog' && CATALOG_RELATIONS.has(fields[1] as string)) ||
        (fields[0] === 'information_schema' && INFORMATION_RELATIONS.has(fields[1] as string)))
    ) {
      const at = this.index(node.location);
      const name = at === null ? null : this.dotted(at);
      if (at !== null && name !== null && name.parts.length === 3) this.replaceTokens(at, at + 2, '');
    }
    if (fields[fields.length - 1] !== 'tableoid' || fields.length > 2) return;
    const scope = this.fromScopes[this.fromScopes.length - 1];
    const oid = fields.length === 2 ? this.catalogTables.get(fields[0] as string) : scope?.length === 1 ? scope[0] : undefined;
    const i = this.index(node.location);
    if (oid === undefined || i === null) return;
    const name = this.dotted(i);
    if (name !== null && name.parts.length === fields.length) this.replaceTokens(i, name.next, `CAST(${oid} AS BIGINT)`);
  }

  /** Names of WITH queries: an unqualified reference to one is the query, not a catalog relation. */
  private collectCtes(value: unknown): void {
    if (Array.isArray(value)) for (const v of value) this.collectCtes(v);
    else if (value !== null && typeof value === 'object') {
      for (const [k, v] of Object.entries(value as Node)) {
        if (k === 'ctename' && typeof v === 'string') this.ctes.add(v.toLowerCase());
        else this.collectCtes(v);
      }
    }
  }

  private index(location: unknown): number | null {
    if (typeof location !== 'number' || location < 0) return null;
    const char = this.charAt === null ? location : this.charAt[location];
    if (char === undefined) return null;
    return this.tokenAt.get(char) ?? null;
  }

  /** The dotted name (a.b.c) that starts at token i: its parts, lower-cased unless quoted, and the index after it. */
  private dotted(i: number): { parts: string[]; next: number } | null {
    const parts: string[] = [];
    let j = i;
    for (;;) {
      const w = wordOf(this.tokens[j]);
      if (w === null) return null;
      parts.push(w);
      if (this.tokens[j + 1]?.text !== '.') return { parts, next: j + 1 };
      j += 2;
    }
  }

  /** The index of the token that closes the bracket at token i. */
  private closing(i: number): number | null {
    let depth = 0;
    for (let j = i; j < this.tokens.length; j++) {
      const t = this.tokens[j] as Token;
      if (t.text === '(' || t.text === '[') depth++;
      else if (t.text === ')' || t.text === ']') {
        depth--;
        if (depth === 0) return j;
      }
    }
    return null;
  }

  /** The call whose name starts at token i: the '(' after its name and the ')' that closes its arguments. */
  private callSpan(i: number | null): { readonly i: number; readonly open: number; readonly close: number } | null {
    const name = i === null ? null : this.dotted(i);
    if (i === null || name === null || this.tokens[name.next]?.text !== '(') return null;
    const close = this.closing(name.next);
    return close === null ? null : { i, open: name.next, close };
  }

  /** The text between a call's parentheses. */
  private argumentsText(span: { readonly open: number; readonly close: number }): string {
    return this.text.slice((this.tokens[span.open] as Token).end, (this.tokens[span.close] as Token).start);
  }

  private replaceTokens(from: number, to: number, text: string): void {
    const a = this.tokens[from];
    const b = this.tokens[to - 1];
    if (a === undefined || b === undefined) return;
    this.edits.push({ start: a.start, end: b.end, text });
  }

  private insertBefore(i: number, text: string): void {
    const t = this.tokens[i];
    if (t !== undefined) this.edits.push({ start: t.start, end: t.start, text });
  }

  private insertAfter(i: number, text: string): void {
    const t = this.tokens[i];
    if (t !== undefined) this.edits.push({ start: t.end, end: t.end, text });
  }

  private walk(value: unknown, key: string | null, target: boolean): void {
    if (Array.isArray(value)) {
      for (const v of value) this.walk(v, key, target);
      return;
    }
    if (value === null || typeof value !== 'object') return;
    const node = value as Node;
    // Typed fields (InsertStmt.relation, TypeCast.typeName) hold their node without a wrapper.
    if ('relname' in node) this.rangeVar(node, target);
    if (key === 'typeName' || (Array.isArray(node.names) && 'typemod' in node)) this.typeName(node);
    for (const [k, v] of Object.entries(node)) {
      switch (k) {
        case 'FuncCall':
          this.funcCall(v as Node);
          break;
        case 'ColumnRef':
          this.columnRef(v as Node);
          this.quoteKeywordParts(v as Node);
          break;
        case 'ColumnDef':
          this.quoteKeywordAt((v as Node).location);
          break;
        case 'CreateStmt':
          this.varcharLengths(v as Node);
          break;
        case 'SubLink':
          this.emptySelectList(v as Node);
          break;
        case 'A_Expr':
          this.aExpr(v as Node);
          break;
        case 'CollateClause':
          this.collate(v as Node);
          break;
        case 'TypeCast':
          this.typeCast(v as Node);
          break;
        case 'RangeFunction':
          this.rangeFunction(v as Node);
          break;
        case 'SQLValueFunction':
          this.sqlValueFunction(v as Node);
          break;
        case 'InsertStmt':
          this.overriding(v as Node);
          this.insertValues(v as Node);
          for (const c of ((v as Node).cols as Node[] | undefined) ?? []) this.quoteKeywordAt((c.ResTarget as Node | undefined)?.location);
          break;
        case 'UpdateStmt':
          this.updateValues(v as Node);
          for (const c of ((v as Node).targetList as Node[] | undefined) ?? []) this.quoteKeywordAt((c.ResTarget as Node | undefined)?.location);
          break;
        case 'IndexStmt':
          this.indexMethod(v as Node);
          break;
        case 'Constraint':
          this.foreignKeyActions(v as Node);
          break;
        case 'AlterTableStmt':
          this.addUniqueConstraint(v as Node);
          break;
        case 'SelectStmt':
          this.lockingClause(v as Node);
          this.setReturningTargets(v as Node);
          this.sequenceRelation(v as Node);
          this.regTargets(v as Node);
          break;
      }
      // A target's subtree stays a target until a query inside it (INSERT ... SELECT) begins.
      const childTarget = TARGET_FIELDS.has(k) ? true : k === 'selectStmt' || k === 'query' || k === 'SelectStmt' ? false : target;
      if (k === 'SelectStmt') this.fromScopes.push(this.fromCatalogOids(v as Node));
      this.walk(v, k, childTarget);
      if (k === 'SelectStmt') this.fromScopes.pop();
    }
  }

  /**
   * `SELECT generate_series(1, 3)` → `SELECT unnest(generate_series(1, 3))`:
   * in PostgreSQL a set-returning function in the select list returns one
   * row per element (several are zipped, the shorter padded with NULLs, as
   * DuckDB's unnest does); DuckDB's scalar version returns one list.
   */
  private setReturningTargets(select: Node): void {
    for (const target of (select.targetList as Node[] | undefined) ?? []) {
      const val = (target.ResTarget as Node | undefined)?.val as Node | undefined;
      // Directly, or under a cast: generate_series(1, 3)::int.
      const call = (val?.FuncCall ?? ((val?.TypeCast as Node | undefined)?.arg as Node | undefined)?.FuncCall) as Node | undefined;
      if (call === undefined) continue;
      const parts = strings(call.funcname);
      const fn = parts[parts.length - 1];
      if (fn === undefined || !SELECT_LIST_SET_FUNCTIONS.has(fn) || (parts.length === 2 && parts[0] !== 'pg_catalog') || parts.length > 2) continue;
      const span = this.callSpan(this.index(call.location));
      if (span === null) continue;
      // Integer arguments give integer values in PostgreSQL; DuckDB's are bigint.
      const integers = integerArguments(call);
      this.insertBefore(span.i, integers ? 'unnest(CAST(' : 'unnest(');
      this.insertAfter(span.close, integers ? ' AS INTEGER[]))' : ')');
    }
  }

  /**
   * `SELECT i.indkey FROM pg_index i`: an int2vector or oidvector column read
   * as a result is text, '1 2' (pg_dump parses it so); in expressions it
   * stays the list it is in the catalog's views.
   */
  private vectorTargets(select: Node): void {
    if (this.catalogTables.size === 0) return;
    for (const target of (select.targetList as Node[] | undefined) ?? []) {
      const res = target.ResTarget as Node | undefined;
      const ref = (res?.val as Node | undefined)?.ColumnRef as Node | undefined;
      const fields = strings(ref?.fields);
      const column = fields[fields.length - 1];
      if (ref === undefined || column === undefined || !VECTOR_COLUMNS.has(column)) continue;
      const i = this.index(ref.location);
      const name = i === null ? null : this.dotted(i);
      if (i === null || name === null || name.parts.length !== fields.length) continue;
      this.insertBefore(i, 'array_to_string(');
      this.insertAfter(name.next - 1, `, ' ')${res?.name === undefined ? ` AS ${column}` : ''}`);
    }
  }

  /**
   * `SELECT last_value, is_called FROM s`: a sequence read as a one-row
   * relation (pg_dump's data for a sequence). DuckDB's sequences are not
   * relations; their state is in duckdb_sequences().
   */
  private sequenceRelation(select: Node): void {
    const from = select.fromClause as Node[] | undefined;
    const rv = from?.length === 1 ? (from[0]?.RangeVar as Node | undefined) : undefined;
    const targets = (select.targetList as Node[] | undefined) ?? [];
    if (rv === undefined || typeof rv.relname !== 'string' || rv.alias !== undefined || targets.length === 0) return;
    for (const t of targets) {
      const fields = strings((((t.ResTarget as Node | undefined)?.val as Node | undefined)?.ColumnRef as Node | undefined)?.fields);
      if (fields.length !== 1 || !SEQUENCE_COLUMNS.has(fields[0] as string)) return;
    }
    const i = this.index(rv.location);
    const name = i === null ? null : this.dotted(i);
    if (i === null || name === null) return;
    const schema = typeof rv.schemaname === 'string' ? (rv.schemaname === 'public' ? 'main' : rv.schemaname) : null;
    this.replacedRelations.add(rv.location as number);
    this.replaceTokens(
      i,
      name.next,
      `(SELECT coalesce(s.last_value, s.start_value) AS last_value, s.last_value IS NOT NULL AS is_called, CAST(0 AS BIGINT) AS log_cnt
        FROM duckdb_sequences() s WHERE s.sequence_name = ${quoteLiteral(rv.relname)}${schema === null ? '' : ` AND s.schema_name = ${quoteLiteral(schema)}`}
        ORDER BY s.database_name = 'temp' DESC LIMIT 1) AS ${quoteIdentifier(rv.relname)}`,
    );
  }

  /** RangeVars and FROM function calls whose whole text another rule replaced, by location. */
  private readonly replacedRelations = new Set<number>();

  /**
   * `SELECT ... FOR UPDATE [OF t] [NOWAIT]` (and FOR SHARE ...): DuckDB has
   * no row locks and refuses the clause. Without it, a transaction that then
   * changes a row another changed first fails at that write (40001) instead
   * of waiting: the same rows are never silently overwritten. SKIP LOCKED,
   * which cannot be kept, is refused before this (engines/duckdb/handler/commands.ts).
   */
  private lockingClause(select: Node): void {
    if (!Array.isArray(select.lockingClause)) return;
    for (let i = 0; i < this.tokens.length; i++) {
      if (wordOf(this.tokens[i]) !== 'for') continue;
      let j = i + 1;
      const w = (k: number): string => wordOf(this.tokens[k]) ?? '';
      if (w(j) === 'update' || w(j) === 'share') j += 1;
      else if (w(j) === 'no' && w(j + 1) === 'key' && w(j + 2) === 'update') j += 3;
      else if (w(j) === 'key' && w(j + 1) === 'share') j += 2;
      else continue;
      if (w(j) === 'of') {
        j++;
        for (;;) {
          const name = this.dotted(j);
          if (name === null) break;
          j = name.next;
          if (this.tokens[j]?.text !== ',') break;
          j++;
        }
      }
      if (w(j) === 'nowait') j++;
      this.replaceTokens(i, j, '');
      i = j - 1;
    }
  }

  /**
   * A column named by a word DuckDB's grammar keeps for itself and PostgreSQL
   * does not (`at`, `by`, `show`, ...: pandas' to_sql writes such names
   * bare): quoted, as DuckDB then reads it as a name.
   */
  private quoteKeywordAt(location: unknown): void {
    const i = this.index(location);
    const t = i === null ? undefined : this.tokens[i];
    if (i !== null && t?.kind === 'word' && DUCKDB_ONLY_KEYWORDS.has(t.text.toLowerCase())) this.replaceTokens(i, i + 1, `"${t.text.toLowerCase()}"`);
  }

  private quoteKeywordParts(ref: Node): void {
    const i = this.index(ref.location);
    const name = i === null ? null : this.dotted(i);
    if (i === null || name === null) return;
    for (let k = i; k < name.next; k += 2) {
      const t = this.tokens[k];
      if (t?.kind === 'word' && DUCKDB_ONLY_KEYWORDS.has(t.text.toLowerCase())) this.replaceTokens(k, k + 1, `"${t.text.toLowerCase()}"`);
    }
  }

  /**
   * `varchar(n)` in CREATE TABLE: DuckDB keeps no length, so the column gets
   * CHECK (length(col) <= n), whose violation reads as PostgreSQL's 22001
   * (engines/duckdb/adapter/errors.ts) and which the catalog does not list (the
   * column shows as varchar(n), engines/duckdb/catalog/declared.ts). Not for ledgers, whose
   * rows the writer appends, nor for ALTER TABLE ADD COLUMN, which DuckDB
   * does not take with a constraint.
   */
  private varcharLengths(create: Node): void {
    const relname = (create.relation as Node | undefined)?.relname;
    if (typeof relname !== 'string' || /^_cot/i.test(relname)) return;
    for (const e of (create.tableElts as Node[] | undefined) ?? []) {
      const def = e.ColumnDef as Node | undefined;
      const typeName = def?.typeName as Node | undefined;
      const names = strings(typeName?.names);
      const n = (((typeName?.typmods as Node[] | undefined)?.[0]?.A_Const as Node | undefined)?.ival as { ival?: number } | undefined)?.ival;
      const type = names[names.length - 1];
      if (typeof def?.colname !== 'string' || (type !== 'varchar' && type !== 'bpchar') || n === undefined || Array.isArray(typeName?.arrayBounds)) continue;
      let j = this.index(typeName?.location);
      if (j === null) continue;
      while (['character', 'char', 'varying', 'varchar', 'national', 'pg_catalog', '.'].includes(wordOf(this.tokens[j]) ?? this.tokens[j]?.text ?? '')) j++;
      const close = this.tokens[j]?.text === '(' ? this.closing(j) : null;
      if (close === null) continue;
      this.insertAfter(close, ` ${lengthCheck(def.colname, n, type === 'bpchar')}`);
    }
  }

  /** `EXISTS (SELECT FROM t WHERE ...)`: PostgreSQL allows an empty select list (drizzle-kit writes one); DuckDB wants a column. */
  private emptySelectList(link: Node): void {
    const select = (link.subselect as Node | undefined)?.SelectStmt as Node | undefined;
    if (link.subLinkType !== 'EXISTS_SUBLINK' || select === undefined || select.targetList !== undefined || select.fromClause === undefined) return;
    const i = this.index(link.location);
    if (i === null || wordOf(this.tokens[i]) !== 'exists' || this.tokens[i + 1]?.text !== '(' || wordOf(this.tokens[i + 2]) !== 'select') return;
    this.insertAfter(i + 2, ' 1');
  }

  /** `CREATE INDEX ... USING btree`: DuckDB's one index (ART) is ordered, as btree is; it takes no method name. */
  private indexMethod(node: Node): void {
    const method = typeof node.accessMethod === 'string' ? node.accessMethod.toLowerCase() : null;
    if (method === null || !ORDERED_INDEX_METHODS.has(method)) return;
    const from = this.index((node.relation as Node | undefined)?.location) ?? 0;
    for (let i = from; i < this.tokens.length - 1; i++) {
      if (wordOf(this.tokens[i]) === 'using' && wordOf(this.tokens[i + 1]) === method) {
        this.replaceTokens(i, i + 2, '');
        return;
      }
    }
  }

  /**
   * A foreign key's ON DELETE / ON UPDATE action (Sequelize writes ON DELETE
   * CASCADE ON UPDATE CASCADE by default), which DuckDB does not take: the
   * key is kept as NO ACTION, so a delete that would cascade is refused
   * (23503) rather than done (docs/compatibility.md).
   */
  private foreignKeyActions(node: Node): void {
    if (node.contype !== 'CONSTR_FOREIGN') return;
    const start = this.index(node.location);
    if (start === null) return;
    let depth = 0;
    for (let i = start; i < this.tokens.length; i++) {
      const t = this.tokens[i] as Token;
      if (t.text === '(') depth++;
      else if (t.text === ')') {
        if (depth === 0) return;
        depth--;
      } else if (depth === 0 && (t.text === ',' || t.kind === 'semicolon')) return;
      else if (depth === 0 && wordOf(t) === 'on' && ['delete', 'update'].includes(wordOf(this.tokens[i + 1]) ?? '')) {
        const action = wordOf(this.tokens[i + 2]);
        let end = i + 3;
        if (action === 'no' || action === 'set') end = i + 4;
        else if (action !== 'cascade' && action !== 'restrict') return;
        if (this.tokens[end]?.text === '(') end = (this.closing(end) ?? end) + 1;
        this.replaceTokens(i, end, '');
        i = end - 1;
      } else if (depth === 0 && wordOf(t) === 'match' && ['simple', 'full'].includes(wordOf(this.tokens[i + 1]) ?? '')) {
        this.replaceTokens(i, i + 2, '');
      }
    }
  }

  /**
   * `ALTER TABLE t ADD [CONSTRAINT name] UNIQUE (a, b)` → `CREATE UNIQUE INDEX
   * name ON t (a, b)`: DuckDB adds no constraint to an existing table, and a
   * unique index enforces the same rule (Knex's .unique(), TypeORM's UQ_).
   */
  private addUniqueConstraint(node: Node): void {
    const cmds = node.cmds as Node[] | undefined;
    const cmd = cmds?.length === 1 ? (cmds[0]?.AlterTableCmd as Node | undefined) : undefined;
    const constraint = (cmd?.def as Node | undefined)?.Constraint as Node | undefined;
    const relation = node.relation as Node | undefined;
    if (cmd?.subtype !== 'AT_AddConstraint' || constraint?.contype !== 'CONSTR_UNIQUE' || typeof relation?.relname !== 'string') return;
    const keys = strings(constraint.keys);
    const i = this.index(relation.location);
    const name = i === null ? null : this.dotted(i);
    if (keys.length === 0 || i === null || name === null || constraint.options !== undefined || constraint.indexname !== undefined) return;
    const table = this.text.slice((this.tokens[i] as Token).start, (this.tokens[name.next - 1] as Token).end);
    const index = typeof constraint.conname === 'string' ? constraint.conname : `${relation.relname}_${keys.join('_')}_key`;
    this.replaceTokens(0, this.tokens.length, `CREATE UNIQUE INDEX ${quoteIdentifier(index)} ON ${table} (${keys.map(quoteIdentifier).join(', ')})`);
  }

  private rangeVar(node: Node, target: boolean): void {
    if (this.replacedRelations.has(node.location as number)) return;
    const relname = typeof node.relname === 'string' ? node.relname : null;
    const i = this.index(node.location);
    if (relname === null || i === null) return;
    if (typeof node.catalogname === 'string') {
      // database.schema.table, with the database clients connect to: the schema in this database.
      if (node.catalogname !== this.database || this.tokens[i + 1]?.text !== '.' || this.dotted(i)?.parts.length !== 3) return;
      this.replaceTokens(i, i + 3, node.schemaname === 'public' ? 'main' : (this.tokens[i + 2]?.text ?? ''));
      return;
    }
    const name = this.dotted(i);
    if (name === null) return;
    const schema = typeof node.schemaname === 'string' ? node.schemaname : null;
    if (schema === 'public' && name.parts.length === 2) {
      this.replaceTokens(i, i + 1, 'main');
    } else if (target) {
      return;
    } else if (schema === 'pg_catalog' || (schema === null && !this.ctes.has(relname))) {
      if (CATALOG_RELATIONS.has(relname)) this.replaceTokens(i, name.next, `${PG_SCHEMA}.${relname}`);
    } else if (schema === 'information_schema') {
      if (INFORMATION_RELATIONS.has(relname)) this.replaceTokens(i, name.next, `${INFORMATION_SCHEMA}.${relname}`);
    }
  }

  private funcCall(node: Node): void {
    if (this.replacedRelations.has(node.location as number)) return;
    const parts = strings(node.funcname);
    const i = this.index(node.location);
    if (i === null || parts.length === 0) return;
    if (this.toChar(node, parts, i)) return;
    this.integerResult(parts, i);
    this.datePartResult(node, parts, i);
    const name = this.dotted(i);
    // COERCE_SQL_SYNTAX calls (EXTRACT, SUBSTRING ... FROM) carry a name that is not in the text.
    if (name === null || name.parts.join('.') !== parts.join('.')) return;
    const fn = parts[parts.length - 1] as string;
    if ((parts.length === 1 || parts[0] === 'pg_catalog') && this.expressions && this.tokens[name.next]?.text === '(') {
      if (NUMERIC_AGGREGATES[fn] !== undefined) this.numericAggregate(node, fn, i, name.next);
      if (fn === 'round') this.roundHalfEven(node, i, name.next);
      this.doubleResult(node, fn, i, name.next);
    }
    // format('%s ...') is PostgreSQL's; DuckDB's own format() takes '{}'.
    const first = ((node.args as Node[] | undefined)?.[0]?.A_Const as Node | undefined)?.sval as { sval?: string } | undefined;
    if (fn === 'format' && !(first?.sval?.includes('%') ?? false)) return;
    if (JSON_AGGREGATES.has(fn) && (parts.length === 1 || parts[0] === 'pg_catalog') && this.expressions) {
      // json_agg(x ORDER BY y) → a JSON array of list(x ORDER BY y), NULL over no rows as in PostgreSQL.
      const close = this.tokens[name.next]?.text === '(' ? this.closing(name.next) : null;
      if (close === null) return;
      this.replaceTokens(i, name.next, 'nullif(to_json(list');
      this.insertAfter(close, "), 'null')");
      return;
    }
    const renamed = FUNCTION_NAMES[fn];
    if (renamed !== undefined && (parts.length === 1 || parts[0] === 'pg_catalog')) {
      this.replaceTokens(i, name.next, renamed);
    } else if (parts.length === 2 && (parts[0] === 'pg_catalog' || parts[0] === 'information_schema')) {
      this.replaceTokens(i, name.next, CATALOG_FUNCTIONS.has(fn) ? `${PG_SCHEMA}.${fn}` : fn);
      // _pg_expandarray returns a set of (x, n) rows; the macro returns a list of them, unnested here (pgjdbc's metadata).
      const close = this.tokens[name.next]?.text === '(' ? this.closing(name.next) : null;
      if (fn === '_pg_expandarray' && close !== null) {
        this.insertBefore(i, 'unnest(');
        this.insertAfter(close, ')');
      }
    } else if (parts.length === 1 && CATALOG_FUNCTIONS.has(fn)) {
      this.replaceTokens(i, name.next, `${PG_SCHEMA}.${fn}`);
    }
  }

  /** to_char(value, 'format') with a literal format (engines/duckdb/catalog/to-char.ts). */
  private toChar(node: Node, parts: readonly string[], i: number): boolean {
    const fn = parts[parts.length - 1];
    const args = node.args as Node[] | undefined;
    if (fn !== 'to_char' || args?.length !== 2 || parts.length > 2 || (parts.length === 2 && parts[0] !== 'pg_catalog') || !this.expressions) return false;
    const format = ((args[1]?.A_Const as Node | undefined)?.sval as { sval?: string } | undefined)?.sval;
    const span = this.callSpan(i);
    const formatAt = this.index((args[1]?.A_Const as Node | undefined)?.location);
    if (format === undefined || span === null || formatAt === null || this.tokens[formatAt - 1]?.text !== ',' || formatAt !== span.close - 1) return false;
    const value = this.text.slice((this.tokens[span.open] as Token).end, (this.tokens[formatAt - 1] as Token).start);
    const sql = toCharSql(value, format);
    if (sql === null) return false;
    // The value is taken as written: a rewrite inside it (rare in a to_char argument) is not applied.
    this.replaceTokens(i, span.close + 1, sql);
    return true;
  }

  /**
   * `length(s)`, `position(a IN b)` ...: integer in PostgreSQL, bigint in
   * DuckDB, which drivers read as another type (a string in node-postgres).
   */
  private integerResult(parts: readonly string[], i: number): void {
    const fn = parts[parts.length - 1] as string;
    if (!INTEGER_FUNCTIONS.has(fn) || !this.expressions || (parts.length === 2 && parts[0] !== 'pg_catalog') || parts.length > 2) return;
    const name = this.dotted(i);
    if (name === null || name.parts[name.parts.length - 1] !== fn || this.tokens[name.next]?.text !== '(') return;
    this.castCall(i, name.next, 'INTEGER');
  }

  /** The call whose name starts at token i and whose arguments open at `open`, its window and ordering included, cast to `type`. */
  private castCall(i: number, open: number, type: string): void {
    const close = this.closing(open);
    const end = close === null ? null : this.callEnd(close);
    if (end === null) return;
    this.insertBefore(i, 'CAST(');
    this.insertAfter(end, ` AS ${type})`);
  }

  /**
   * extract(field FROM x) is numeric in PostgreSQL 14 and later, date_part
   * double precision; DuckDB's are bigint, and its seconds and milliseconds
   * drop the fraction (45 where PostgreSQL has 45.500000). A sub-second field
   * is read as microseconds and scaled, so it keeps PostgreSQL's digits.
   */
  private datePartResult(node: Node, parts: readonly string[], i: number): void {
    const fn = parts[parts.length - 1];
    if ((fn !== 'extract' && fn !== 'date_part') || parts.length > 2 || (parts.length === 2 && parts[0] !== 'pg_catalog') || !this.expressions) return;
    const field = (((node.args as Node[] | undefined)?.[0]?.A_Const as Node | undefined)?.sval as { sval?: string } | undefined)?.sval?.toLowerCase();
    const span = this.callSpan(i);
    if (field === undefined || span === null) return;
    const fieldAt = span.open + 1;
    const spelled = this.tokens[fieldAt];
    if (spelled === undefined || (wordOf(spelled) ?? spelled.text.slice(1, -1).toLowerCase()) !== field) return;
    const scale = SUBSECOND_FIELDS[field];
    const numeric = fn === 'extract';
    if (scale !== undefined) {
      this.replaceTokens(fieldAt, fieldAt + 1, numeric ? 'microseconds' : "'microseconds'");
      this.insertBefore(i, '(CAST(');
      this.insertAfter(span.close, numeric ? ` AS DECIMAL(38,0)) * ${scale.numeric})` : ` AS DOUBLE) / ${scale.divisor})`);
    } else if (numeric && field === 'epoch') {
      // A double of seconds: its digits past the microsecond are noise.
      this.insertBefore(i, 'round(CAST(');
      this.insertAfter(span.close, ` AS ${UNCONSTRAINED_NUMERIC}), 6)`);
    } else {
      this.insertBefore(i, 'CAST(');
      this.insertAfter(span.close, ` AS ${numeric ? UNCONSTRAINED_NUMERIC : 'DOUBLE'})`);
    }
  }

  /** The last token of a call whose arguments close at `close`: its WITHIN GROUP, FILTER and OVER clauses included. */
  private callEnd(close: number): number | null {
    let end: number | null = close;
    if (wordOf(this.tokens[end + 1]) === 'within' && wordOf(this.tokens[end + 2]) === 'group' && this.tokens[end + 3]?.text === '(')
      end = this.closing(end + 3);
    if (end !== null && wordOf(this.tokens[end + 1]) === 'filter' && this.tokens[end + 2]?.text === '(') end = this.closing(end + 2);
    if (end !== null && wordOf(this.tokens[end + 1]) === 'over') end = this.tokens[end + 2]?.text === '(' ? this.closing(end + 2) : end + 2;
    return end === null || this.tokens[end] === undefined ? null : end;
  }

  /** round(x) of a double rounds half to even in PostgreSQL (rint), half away from zero in DuckDB: chosen by x's witness. */
  private roundHalfEven(node: Node, i: number, open: number): void {
    const args = node.args as Node[] | undefined;
    const witness = args?.length === 1 ? typeWitness(args[0]) : null;
    const close = this.closing(open);
    if (witness === null || close === null) return;
    this.replaceTokens(i, open, `${PG_SCHEMA}.cot_round`);
    this.insertBefore(close, `, ${witness}`);
  }

  /** percentile_cont(f) WITHIN GROUP (ORDER BY x): double precision in PostgreSQL, x's type in DuckDB. */
  private doubleResult(node: Node, fn: string, i: number, open: number): void {
    const first = (node.args as Node[] | undefined)?.[0];
    if (!DOUBLE_AGGREGATES.has(fn) || first?.A_ArrayExpr !== undefined || !this.expressions) return;
    this.castCall(i, open, 'DOUBLE');
  }

  private sqlValueFunction(node: Node): void {
    const i = this.index(node.location);
    if (i === null || this.tokens[i + 1]?.text === '(') return;
    if (node.op === 'SVFOP_CURRENT_SCHEMA') this.replaceTokens(i, i + 1, `${PG_SCHEMA}.current_schema()`);
    else if (node.op === 'SVFOP_USER' && wordOf(this.tokens[i]) === 'user') this.replaceTokens(i, i + 1, 'current_user()');
    else if (node.op === 'SVFOP_CURRENT_CATALOG') this.replaceTokens(i, i + 1, 'current_database()');
  }

  private aExpr(node: Node): void {
    const parts = strings(node.name);
    const op = parts[parts.length - 1];
    if (op === undefined) return;
    const i = this.index(node.location);
    if (i === null) return;
    if (node.kind === 'AEXPR_LIKE' || node.kind === 'AEXPR_ILIKE') {
      this.likeEscape(node, i);
      return;
    }
    if ((node.kind === 'AEXPR_OP_ANY' && op === '=') || (node.kind === 'AEXPR_OP_ALL' && op === '<>')) {
      // The operator may be spelled OPERATOR(pg_catalog.=), as psql and pg_dump write it.
      const spelled = wordOf(this.tokens[i]) === 'operator' && this.tokens[i + 1]?.text === '(' ? this.closing(i + 1) : i;
      if (spelled !== null) this.anyOfList(node, i, spelled, op === '<>');
      return;
    }
    if (node.kind === 'AEXPR_OP' && parts.length === 1 && (op === '->' || op === '->>') && this.expressions) {
      // PostgreSQL's -> binds tighter than = and AND; DuckDB's binds looser (a = 1 AND j->>'k' = 'v' would
      // read as (a = 1 AND j) ->> ...): the operator's own operands are parenthesised.
      const start = this.argStart(node.lexpr as Node | undefined, i);
      const end = this.tokens[i]?.text === op ? this.exprEnd(node.rexpr as Node | undefined, i + 1) : null;
      if (start !== null && end !== null) {
        this.insertBefore(start, '(');
        this.insertAfter(end, ')');
      }
      return;
    }
    if (node.kind === 'AEXPR_OP' && parts.length === 1 && JSON_OPERATORS.has(op) && this.expressions) {
      this.jsonOperator(node, op, i);
      return;
    }
    if (node.kind === 'AEXPR_OP' && parts.length === 1 && op === '-' && node.lexpr !== undefined && this.expressions) {
      this.typedOperation(node, i, 'cot_minus');
      return;
    }
    if (node.kind === 'AEXPR_OP' && parts.length === 1 && DIVISION_OPERATORS.has(op) && this.expressions) {
      if (op !== '/' || !this.typedOperation(node, i, 'cot_div')) this.checkedDivisor(node.rexpr as Node | undefined, i);
      return;
    }
    if ((node.kind === 'AEXPR_OP' && COMPARISONS.has(op)) || node.kind === 'AEXPR_BETWEEN' || node.kind === 'AEXPR_NOT_BETWEEN' || node.kind === 'AEXPR_IN') {
      const l = node.lexpr as Node | undefined;
      const r = node.rexpr as Node | undefined;
      const items = (x: Node | undefined): Node[] => {
        if (x === undefined) return [];
        if (Array.isArray(x)) return x as Node[];
        const list = (x.List as Node | undefined)?.items;
        return Array.isArray(list) ? (list as Node[]) : [x];
      };
      if (l?.ColumnRef !== undefined) for (const item of items(r)) this.spacedOffset(item.A_Const as Node | undefined);
      if (r?.ColumnRef !== undefined) this.spacedOffset(l?.A_Const as Node | undefined);
    }
    const isRegex = node.kind === 'AEXPR_OP' && REGEX_OPERATORS.has(op);
    const engineOp = isRegex ? op.replace('*', '') : op;
    const t = this.tokens[i];
    if (wordOf(t) === 'operator' && this.tokens[i + 1]?.text === '(') {
      // OPERATOR(pg_catalog.~) → ~
      const close = this.closing(i + 1);
      if (close !== null) this.replaceTokens(i, close + 1, ` ${engineOp} `);
    } else if (isRegex && engineOp !== op && t?.text === op) {
      this.replaceTokens(i, i + 1, engineOp);
    }
    if (isRegex) this.regexOperand(node.rexpr as Node | undefined, op.endsWith('*'));
  }

  /**
   * `x LIKE 'a\_b'` → `x LIKE 'a\_b' ESCAPE '\'`: PostgreSQL's LIKE takes a
   * backslash as its escape character unless told otherwise, DuckDB's none.
   * Applied where the pattern holds a parameter or a literal with a
   * backslash, after the whole pattern (`$1::text || '%'`); a pattern with
   * its own ESCAPE (like_escape in PostgreSQL's tree) is left alone.
   */
  private likeEscape(node: Node, at: number): void {
    const pattern = node.rexpr as Node | undefined;
    const call = pattern?.FuncCall as Node | undefined;
    if (call !== undefined && strings(call.funcname).at(-1) === 'like_escape') return;
    if (!escapableExpression(pattern)) return;
    const like = [at, at + 1].find((i) => LIKE_WORDS.has(wordOf(this.tokens[i]) ?? ''));
    if (like === undefined) return;
    const end = this.exprEnd(pattern, like + 1);
    if (end === null) return;
    const only = this.tokens[like + 1] as Token;
    if (end === like + 1 && only.kind === 'string') {
      // DuckDB notices a trailing escape only when matching reaches it; PostgreSQL always refuses it.
      const trailing = (/\\+'$/.exec(only.text)?.[0].length ?? 1) - 1;
      if (trailing % 2 === 1) {
        this.replaceTokens(like + 1, like + 2, "CAST(system.main.error('LIKE pattern must not end with escape character') AS VARCHAR)");
        return;
      }
    }
    this.insertAfter(end, " ESCAPE '\\'");
  }

  /**
   * `x = ANY(list)` → `list_contains(list, x)`: DuckDB cannot unnest a list
   * that comes from the outer query (psql's \d asks pg_policy this way).
   */
  private anyOfList(node: Node, i: number, opEnd: number, negated: boolean): void {
    if (this.tokens[opEnd]?.text !== (negated ? '<>' : opEnd === i ? '=' : ')') || this.tokens[opEnd + 2]?.text !== '(') return;
    const close = this.closing(opEnd + 2);
    const start = this.argStart(node.lexpr as Node | undefined, i);
    const first = this.tokens[opEnd + 3];
    const last = close === null ? undefined : this.tokens[close - 1];
    if (close === null || start === null || first === undefined || last === undefined) return;
    const list = this.text.slice(first.start, last.end);
    const left = this.tokens[start] as Token;
    const closing = this.tokens[close] as Token;
    this.moves.push({
      from: first.start,
      to: last.end,
      edits: [
        { start: left.start, end: left.start, text: `${negated ? 'NOT ' : ''}list_contains(${list}, ` },
        { start: (this.tokens[i - 1] ?? (this.tokens[i] as Token)).end, end: closing.end, text: ')' },
      ],
    });
  }

  /**
   * jsonb's operators on DuckDB's JSON: `j ? k` → cot_jsonb_exists(j, k)
   * (DuckDB reads `?` as a parameter), `j @> '{"a":1}'` → json_contains,
   * `j #>> '{a,0}'` → json_extract_string(j, '$.a[0]'). `@>` and `<@` are
   * rewritten only where an operand is JSON by its text (a JSON literal or a
   * cast to json): on arrays they are DuckDB's own.
   */
  private jsonOperator(node: Node, op: string, i: number): void {
    // The operator's tokens: DuckDB's scanner makes #>> two (# and >>), PostgreSQL's one.
    let opEnd = i;
    let spelled = this.tokens[i]?.text ?? '';
    while (spelled !== op && spelled.length < op.length && this.tokens[opEnd + 1]?.start === this.tokens[opEnd]?.end) {
      opEnd++;
      spelled += this.tokens[opEnd]?.text ?? '';
    }
    if (spelled !== op) return;
    const lexpr = node.lexpr as Node | undefined;
    const rexpr = node.rexpr as Node | undefined;
    const start = this.argStart(lexpr, i);
    const end = this.exprEnd(rexpr, opEnd + 1);
    if (start === null || end === null) return;
    const call = (fn: string): void => {
      this.insertBefore(start, `${fn}(`);
      this.replaceTokens(i, opEnd + 1, ',');
      this.insertAfter(end, ')');
    };
    const exists = JSON_EXISTS_OPERATORS[op];
    if (exists !== undefined) {
      call(`${PG_SCHEMA}.${exists}`);
    } else if (op === '@>' || op === '<@') {
      if (isJsonOperand(lexpr) || isJsonOperand(rexpr)) call(op === '@>' ? 'json_contains' : `${PG_SCHEMA}.cot_json_contained`);
    } else {
      const path = jsonPath(rexpr);
      if (path === null) return;
      this.insertBefore(start, `${op === '#>>' ? 'json_extract_string' : 'json_extract'}(`);
      this.replaceTokens(i, end + 1, `, ${quoteLiteral(path)})`);
    }
  }

  /** The last token of an expression that starts at token `first`: the first end at which the text parses to the same tree. */
  private exprEnd(expr: Node | undefined, first: number): number | null {
    const from = this.tokens[first];
    if (expr === undefined || from === undefined) return null;
    let last = first;
    const visit = (v: unknown): void => {
      if (Array.isArray(v)) v.forEach(visit);
      else if (v !== null && typeof v === 'object') {
        for (const [k, x] of Object.entries(v as Node)) {
          if (k === 'location') last = Math.max(last, this.index(x) ?? last);
          else visit(x);
        }
      }
    };
    visit(expr);
    const want = shape(expr);
    for (let j = last; j < Math.min(this.tokens.length, last + 64); j++) {
      const probe = parseOne(`SELECT ${this.text.slice(from.start, (this.tokens[j] as Token).end)}`);
      const targets = (probe?.SelectStmt as Node | undefined)?.targetList as Node[] | undefined;
      if (targets?.length === 1 && shape((targets[0]?.ResTarget as Node | undefined)?.val) === want) return j;
    }
    return null;
  }

  /**
   * `a / b` → `a / cot_divisor(b)`, which raises division_by_zero when b is 0.
   * The parse tree gives where b starts, not where it ends: the end is the
   * first token after which the text, parsed alone, is b again.
   */
  private checkedDivisor(rexpr: Node | undefined, op: number): void {
    if (this.tokens[op]?.kind !== 'operator') return;
    const end = this.exprEnd(rexpr, op + 1);
    if (end === null) return;
    this.insertBefore(op + 1, `${PG_SCHEMA}.cot_divisor(`);
    this.insertAfter(end, ')');
  }

  /**
   * `a / b` → `cot_div(a, b, wa, wb)`, `a - b` → `cot_minus(a, b, wa, wb)`:
   * the operator as PostgreSQL types it (numeric division of integers and
   * numerics mixed, an integer count of days between two dates), chosen by
   * the operands' type witnesses (engines/duckdb/catalog/type-witness.ts). False, and the
   * operator left as it is, when an operand's type is not certain.
   */
  private typedOperation(node: Node, op: number, macro: 'cot_div' | 'cot_minus'): boolean {
    const spelled = this.tokens[op];
    if (spelled?.kind !== 'operator' || spelled.text !== (macro === 'cot_div' ? '/' : '-')) return false;
    const lexpr = node.lexpr as Node | undefined;
    const rexpr = node.rexpr as Node | undefined;
    const wa = typeWitness(lexpr);
    const wb = wa === null ? null : typeWitness(rexpr);
    if (wa === null || wb === null) return false;
    const start = this.argStart(lexpr, op);
    const end = this.exprEnd(rexpr, op + 1);
    if (start === null || end === null) return false;
    this.insertBefore(start, `${PG_SCHEMA}.${macro}(`);
    this.replaceTokens(op, op + 1, ',');
    this.insertAfter(end, `, ${wa}, ${wb})`);
    return true;
  }

  /**
   * `sum(x)` → `cot_sum_as(sum(x), wx)`, `avg(x)` → `cot_avg_as(avg(x), wx)`:
   * int8 sums of int2 and int4, numeric averages of integers and numerics,
   * chosen by the type witness of x. The call keeps its DISTINCT, ORDER BY,
   * FILTER and OVER.
   */
  private numericAggregate(node: Node, fn: string, i: number, open: number): void {
    const args = node.args as Node[] | undefined;
    if (args?.length !== 1 || node.agg_star === true || node.agg_within_group === true) return;
    const witness = typeWitness(args[0]);
    const close = this.closing(open);
    const end = close === null ? null : this.callEnd(close);
    if (witness === null || end === null) return;
    this.insertBefore(i, `${PG_SCHEMA}.${NUMERIC_AGGREGATES[fn]}(`);
    this.insertAfter(end, `, ${witness})`);
  }

  /** The pattern of a regex match, made a partial match (see partialPattern). */
  private regexOperand(rexpr: Node | undefined, caseInsensitive: boolean): void {
    let operand = rexpr;
    while (operand !== undefined) {
      const inner = (operand.CollateClause ?? operand.TypeCast) as Node | undefined;
      if (inner === undefined) break;
      operand = inner.arg as Node | undefined;
    }
    if (operand === undefined) return;
    const constant = operand.A_Const as Node | undefined;
    if (constant !== undefined) {
      const sval = (constant.sval as { sval?: string } | undefined)?.sval;
      const i = this.index(constant.location);
      if (typeof sval === 'string' && i !== null) this.replaceTokens(i, i + 1, quoteLiteral(partialPattern(sval, caseInsensitive)));
      return;
    }
    const param = operand.ParamRef as Node | undefined;
    const column = operand.ColumnRef as Node | undefined;
    const i = this.index((param ?? column)?.location);
    if (i === null) return;
    const next = param !== undefined ? i + 1 : (this.dotted(i)?.next ?? null);
    if (next === null) return;
    const [before, after] = partialPattern('\u0000', caseInsensitive).split('\u0000') as [string, string];
    this.insertBefore(i, `(${quoteLiteral(before)} || `);
    this.insertAfter(next - 1, ` || ${quoteLiteral(after)})`);
  }

  private collate(node: Node): void {
    const parts = strings(node.collname);
    const last = parts[parts.length - 1]?.toLowerCase();
    if (last === undefined || !IGNORED_COLLATIONS.has(last)) return;
    if (parts.length === 2 && parts[0] !== 'pg_catalog') return;
    const i = this.index(node.location);
    if (i === null || wordOf(this.tokens[i]) !== 'collate') return;
    const name = this.dotted(i + 1);
    if (name !== null) this.replaceTokens(i, name.next, '');
  }

  /** The end of a type name at token i: its dotted name, type modifiers and array bounds. */
  private typeNameEnd(i: number): number | null {
    const name = this.dotted(i);
    if (name === null) return null;
    let j = name.next;
    while (this.tokens[j]?.text === '(' || this.tokens[j]?.text === '[') {
      const close = this.closing(j);
      if (close === null) return null;
      j = close + 1;
    }
    return j;
  }

  private typeName(node: Node): void {
    const names = strings(node.names);
    const type = names[names.length - 1];
    const i = this.index(node.location);
    if (type === undefined || i === null || REG_TYPES.has(type)) return;
    const name = this.dotted(i);
    if (name === null) return;
    if (PRECISION_TYPES.has(type) && names[0] === 'pg_catalog' && node.typmods !== undefined && this.tokens[i + 1]?.text === '(') {
      // timestamp(3) with time zone: DuckDB keeps microseconds and takes no precision (docs/compatibility.md).
      const close = this.closing(i + 1);
      if (close !== null) this.replaceTokens(i + 1, close + 1, '');
      return;
    }
    if (type === 'numeric' && (names.length === 1 || names[0] === 'pg_catalog') && node.typmods === undefined) {
      // numeric, decimal, dec: the spellings of one type, which DuckDB would make DECIMAL(18,3).
      const spelled = name.parts[name.parts.length - 1] ?? '';
      if (['numeric', 'decimal', 'dec'].includes(spelled) && name.parts.length <= 2) this.replaceTokens(i, name.next, UNCONSTRAINED_NUMERIC);
      return;
    }
    // SQL-standard spellings (integer, double precision) parse to pg_catalog names that are not in the text.
    if (name.parts.join('.') !== names.join('.')) return;
    const mapped = TYPE_NAMES[type];
    if (mapped !== undefined && (names.length === 1 || names[0] === 'pg_catalog')) {
      this.replaceTokens(i, name.next, mapped);
    } else if (names.length === 2 && names[0] === 'pg_catalog') {
      this.replaceTokens(i, name.next, type);
    }
  }

  /** A PostgreSQL array literal where a list is expected: the literal becomes a DuckDB list. */
  private arrayLiteral(constant: Node | undefined): void {
    const sval = (constant?.sval as { sval?: string } | undefined)?.sval;
    const i = this.index(constant?.location);
    if (typeof sval !== 'string' || i === null || this.tokens[i]?.kind !== 'string') return;
    const list = pgArrayToList(sval);
    if (list !== null) this.replaceTokens(i, i + 1, list);
  }

  /** INSERT ... VALUES ('{a,b}'): array literals bound for list columns (the handler says which columns are lists). */
  /** `INSERT ... OVERRIDING SYSTEM VALUE`: the handler has allowed the identity's value (planner.ts); DuckDB does not parse the clause. */
  private overriding(insert: Node): void {
    if (insert.override !== 'OVERRIDING_SYSTEM_VALUE') return;
    const i = this.tokens.findIndex((t, k) => wordOf(t) === 'overriding' && wordOf(this.tokens[k + 1]) === 'system' && wordOf(this.tokens[k + 2]) === 'value');
    if (i >= 0) this.replaceTokens(i, i + 3, '');
  }

  /** UPDATE ... SET col = '2024-07-01 00:00:00 +00:00' into a timestamp column (Sequelize's increment, save). */
  private updateValues(node: Node): void {
    if (this.target === null) return;
    const temporal = new Set(this.target.filter((c) => c.temporal === true).map((c) => c.name.toLowerCase()));
    for (const t of (node.targetList as Node[] | undefined) ?? []) {
      const res = t.ResTarget as Node | undefined;
      if (typeof res?.name === 'string' && temporal.has(res.name.toLowerCase())) this.spacedOffset((res.val as Node | undefined)?.A_Const as Node | undefined);
    }
  }

  private insertValues(node: Node): void {
    if (this.target === null) return;
    const named = Array.isArray(node.cols) ? (node.cols as Node[]).map((c) => String((c.ResTarget as Node | undefined)?.name ?? '')) : null;
    const lists = new Set(this.target.filter((c) => c.list).map((c) => c.name.toLowerCase()));
    const temporal = new Set(this.target.filter((c) => c.temporal === true).map((c) => c.name.toLowerCase()));
    const order = named ?? this.target.map((c) => c.name.toLowerCase());
    const rows = ((node.selectStmt as Node | undefined)?.SelectStmt as Node | undefined)?.valuesLists;
    if (!Array.isArray(rows)) return;
    for (const row of rows as Node[]) {
      const items = (row.List as Node | undefined)?.items;
      if (!Array.isArray(items)) continue;
      items.forEach((item, k) => {
        const column = order[k];
        if (column !== undefined && lists.has(column.toLowerCase())) this.arrayLiteral((item as Node).A_Const as Node | undefined);
        if (column !== undefined && temporal.has(column.toLowerCase())) this.spacedOffset((item as Node).A_Const as Node | undefined);
      });
    }
  }

  /**
   * `'2024-07-01 00:00:00.000 +00:00'` (Sequelize writes dates so): PostgreSQL
   * reads the offset after a space, DuckDB takes it for a zone name and
   * fails. Applied where the literal is a timestamp: inserted into a
   * timestamp column, or compared with a column.
   */
  private spacedOffset(constant: Node | undefined): void {
    const sval = (constant?.sval as { sval?: string } | undefined)?.sval;
    const i = this.index(constant?.location);
    if (sval === undefined || i === null || this.tokens[i]?.kind !== 'string' || !SPACED_OFFSET.test(sval)) return;
    this.replaceTokens(i, i + 1, quoteLiteral(sval.replace(SPACED_OFFSET, '$1$2')));
  }

  /** `x::regclass`: a name becomes the relation's OID, and an OID becomes its name. */
  /** `SELECT 'int8'::regtype`: a reg* value of a name as a result is shown as the object's name. */
  private regTargets(select: Node): void {
    for (const target of (select.targetList as Node[] | undefined) ?? []) {
      const val = (target.ResTarget as Node | undefined)?.val as Node | undefined;
      const cast = val?.TypeCast as Node | undefined;
      if (cast === undefined || this.regNameCast(val) === null) continue;
      const typeAt = this.index((cast.typeName as Node | undefined)?.location);
      const typeEnd = typeAt === null ? null : this.typeNameEnd(typeAt);
      if (typeEnd === null || this.tokens[this.index(cast.location) ?? -1]?.text !== '::') continue;
      this.regNameShown(val as Node, (this.tokens[typeEnd - 1] as Token).end);
    }
  }

  /**
   * `'\xdeadbeef'::bytea`: PostgreSQL's hex format. DuckDB reads `\x` as
   * the escape of one byte, so the literal would store other bytes.
   */
  private hexBytea(node: Node): void {
    const constant = (node.arg as Node | undefined)?.A_Const as Node | undefined;
    const sval = (constant?.sval as { sval?: string } | undefined)?.sval;
    const i = this.index(constant?.location);
    if (sval === undefined || i === null || !/^\\x([0-9a-fA-F]{2}|\s)*$/.test(sval) || this.tokens[i]?.kind !== 'string') return;
    this.replaceTokens(i, i + 1, `unhex(${quoteLiteral(sval.slice(2).replace(/\s+/g, ''))})`);
  }

  /** The reg* type a cast names an object of by its name ('bool'::regtype), or null. */
  private regNameCast(node: Node | undefined): string | null {
    const cast = node?.TypeCast as Node | undefined;
    const names = strings((cast?.typeName as Node | undefined)?.names);
    const type = names[names.length - 1];
    const arg = cast?.arg as Node | undefined;
    if (type === undefined || !REG_TYPES.has(type) || arg === undefined) return null;
    return isNameExpression(arg) ? type : null;
  }

  /**
   * A reg* value shown as text is the object's name: `'bool'::regtype::text`
   * (TypeORM) and `SELECT 'int8'::regtype` read `boolean` and `bigint`,
   * where the catalog's functions hold the OID.
   */
  private regNameShown(expr: Node | undefined, at: number): void {
    const type = this.regNameCast(expr);
    const cast = expr?.TypeCast as Node | undefined;
    if (type === null || cast === undefined) return;
    const castAt = this.index(cast.location);
    const start = castAt === null ? null : this.argStart(cast.arg as Node | undefined, castAt);
    if (start === null) return;
    this.insertBefore(start, `${PG_SCHEMA}.cot_${type === 'regprocedure' ? 'regproc' : type}_out(`);
    this.edits.push({ start: at, end: at, text: ')' });
  }

  private typeCast(node: Node): void {
    const typeName = node.typeName as Node | undefined;
    const names = strings(typeName?.names);
    const type = names[names.length - 1];
    if (Array.isArray(typeName?.arrayBounds) && !REG_TYPES.has(type ?? '')) this.arrayLiteral((node.arg as Node | undefined)?.A_Const as Node | undefined);
    if (type === 'varchar' || type === 'text') this.vectorText(node);
    if (type === 'bytea') this.hexBytea(node);
    if (type === 'bool' || type === 'boolean') this.booleanLiteral(node.arg as Node | undefined);
    if ((type === 'varchar' || type === 'text' || type === 'name') && this.tokens[this.index(node.location) ?? -1]?.text === '::') {
      this.regNameShown(node.arg as Node, (this.tokens[this.index(node.location) as number] as Token).start);
    }
    if (type === undefined || !REG_TYPES.has(type) || (names.length === 2 && names[0] !== 'pg_catalog')) return;
    const arg = node.arg as Node | undefined;
    if (Array.isArray(typeName?.arrayBounds)) {
      this.regArrayLiteral(node, type);
      return;
    }
    const isName = isNameExpression(arg);
    const fn = `${PG_SCHEMA}.cot_${type === 'regprocedure' ? 'regproc' : type}_${isName ? 'in' : 'out'}`;
    const castAt = this.index(node.location);
    const typeAt = this.index(typeName?.location);
    if (castAt === null || typeAt === null) return;
    const typeEnd = this.typeNameEnd(typeAt);
    if (typeEnd === null) return;
    const castToken = this.tokens[castAt] as Token;
    if (castToken.text === '::') {
      const start = this.argStart(arg, castAt);
      if (start === null) return;
      this.insertBefore(start, `${fn}(`);
      this.replaceTokens(castAt, typeEnd, ')');
    } else if (wordOf(castToken) === 'cast' && this.tokens[castAt + 1]?.text === '(' && wordOf(this.tokens[typeAt - 1]) === 'as') {
      this.replaceTokens(castAt, castAt + 2, `${fn}(`);
      const argEnd = this.tokens[typeAt - 2] as Token;
      this.edits.push({ start: argEnd.end, end: (this.tokens[typeEnd - 1] as Token).end, text: '' });
    }
  }

  /** `'off'::boolean`: PostgreSQL's spellings of a boolean (on, off, yes, no and their prefixes) as DuckDB's. */
  private booleanLiteral(arg: Node | undefined): void {
    const constant = arg?.A_Const as Node | undefined;
    const sval = (constant?.sval as { sval?: string } | undefined)?.sval;
    const at = this.index(constant?.location);
    if (sval === undefined || at === null || this.tokens[at]?.kind !== 'string') return;
    const value = pgBoolean(sval);
    if (value !== null) this.replaceTokens(at, at + 1, `'${value}'`);
  }

  /** `'{int,int8}'::regtype[]` (drizzle-kit): each name looked up, a list of OIDs. */
  private regArrayLiteral(node: Node, type: string): void {
    const constant = (node.arg as Node | undefined)?.A_Const as Node | undefined;
    const sval = (constant?.sval as { sval?: string } | undefined)?.sval;
    const list = sval === undefined ? null : pgArrayToList(sval);
    const start = this.index(constant?.location);
    const castAt = this.index(node.location);
    const typeAt = this.index((node.typeName as Node | undefined)?.location);
    const typeEnd = typeAt === null ? null : this.typeNameEnd(typeAt);
    if (list === null || start === null || castAt === null || typeEnd === null || this.tokens[castAt]?.text !== '::') return;
    const lookup = `${PG_SCHEMA}.cot_${type === 'regprocedure' ? 'regproc' : type}_in(cot_n)`;
    // coalesce: a list expression, not a subquery, for = ANY(...) to read as a list.
    this.replaceTokens(start, typeEnd, `coalesce((SELECT list(${lookup}) FROM unnest(${list}) AS cot_u(cot_n)), [])`);
  }

  /** `ix.indkey::varchar`: a vector column's text form, space-separated as in PostgreSQL (SQLAlchemy splits it). */
  private vectorText(node: Node): void {
    const fields = strings((node.arg as Node | undefined)?.ColumnRef ? ((node.arg as Node).ColumnRef as Node).fields : undefined);
    const column = fields[fields.length - 1];
    const castAt = this.index(node.location);
    const typeAt = this.index((node.typeName as Node | undefined)?.location);
    if (column === undefined || !VECTOR_COLUMNS.has(column) || castAt === null || typeAt === null) return;
    if (this.tokens[castAt]?.text !== '::') return;
    const start = this.argStart(node.arg as Node, castAt);
    const typeEnd = this.typeNameEnd(typeAt);
    if (start === null || typeEnd === null) return;
    this.insertBefore(start, 'array_to_string(');
    this.replaceTokens(castAt, typeEnd, ", ' ')");
  }

  /** The first token of an operand that ends just before token `before`: the leftmost location in its subtree, with its parentheses. */
  private argStart(arg: Node | undefined, before: number): number | null {
    let min = Infinity;
    const visit = (v: unknown): void => {
      if (Array.isArray(v)) v.forEach(visit);
      else if (v !== null && typeof v === 'object') {
        for (const [k, x] of Object.entries(v as Node)) {
          if (k === 'location') {
            const i = this.index(x);
            if (i !== null && i < min) min = i;
          } else visit(x);
        }
      }
    };
    visit(arg);
    if (min === Infinity) return null;
    let start = min;
    // (expr)::regclass: take the parentheses that close just before the cast.
    while (this.tokens[start - 1]?.text === '(' && this.tokens[before - 1]?.text === ')' && this.closing(start - 1) === before - 1) start--;
    return start;
  }

  /**
   * `jsonb_each_text(j)` in FROM → a lateral query over DuckDB's json_each,
   * with PostgreSQL's two columns (key, value) and JSON null as SQL NULL.
   */
  private jsonEach(node: Node, alias: { aliasname?: string } | undefined): boolean {
    const call = rangeCall(node);
    const parts = strings(call?.funcname);
    const fn = parts[parts.length - 1] ?? '';
    const text = JSON_EACH_FUNCTIONS[fn];
    if (call === undefined || text === undefined || node.ordinality === true || (parts.length === 2 && parts[0] !== 'pg_catalog')) return false;
    const span = this.callSpan(this.index(call.location));
    if (span === null) return false;
    const value = text ? `CASE WHEN type = 'NULL' THEN NULL ELSE json_extract_string(value, '$') END` : 'CAST(value AS JSON)';
    this.replacedRelations.add(call.location as number);
    this.replaceTokens(
      span.i,
      span.close + 1,
      `LATERAL (SELECT key, ${value} AS value FROM json_each(${this.argumentsText(span)}))${alias === undefined ? ` AS ${fn}` : ''}`,
    );
    return true;
  }

  /**
   * `pg_partition_ancestors(rel) [WITH ORDINALITY] AS a(relid, depth)` in
   * FROM: no table is partitioned, so the relation is its only ancestor
   * (psql 15's \d asks for triggers and foreign keys this way).
   */
  private partitionAncestors(node: Node, alias: { aliasname?: string } | undefined): boolean {
    const call = rangeCall(node);
    const parts = strings(call?.funcname);
    if (call === undefined || parts[parts.length - 1] !== 'pg_partition_ancestors') return false;
    const span = this.callSpan(this.index(call.location));
    if (span === null) return false;
    let end = span.close;
    if (wordOf(this.tokens[end + 1]) === 'with' && wordOf(this.tokens[end + 2]) === 'ordinality') end += 2;
    const arg = this.argumentsText(span);
    const columns = node.ordinality === true ? `CAST(${arg} AS BIGINT) AS relid, CAST(1 AS BIGINT) AS ordinality` : `CAST(${arg} AS BIGINT) AS relid`;
    this.replacedRelations.add(call.location as number);
    this.replaceTokens(span.i, end + 1, `LATERAL (SELECT ${columns})${alias === undefined ? ' AS pg_partition_ancestors' : ''}`);
    return true;
  }

  private rangeFunction(node: Node): void {
    const alias = node.alias as { aliasname?: string; colnames?: unknown } | undefined;
    if (this.jsonEach(node, alias) || this.partitionAncestors(node, alias)) return;
    if (node.ordinality === true) return;
    const call = rangeCall(node);
    const parts = strings(call?.funcname);
    const fn = parts[parts.length - 1];
    if (fn === undefined || !(SCALAR_SET_FUNCTIONS.has(fn) || SCALAR_FROM_FUNCTIONS.has(fn))) return;
    const span = this.callSpan(this.index(call?.location));
    if (span === null) return;
    const { i, close } = span;
    if (fn === 'generate_series' && call !== undefined && integerArguments(call) && (parts.length === 1 || parts[0] === 'pg_catalog')) {
      // Integer arguments give an integer column in PostgreSQL; DuckDB's table function's is bigint.
      this.insertBefore(i, '(SELECT CAST(generate_series AS INTEGER) AS generate_series FROM ');
      this.insertAfter(close, alias === undefined ? ') AS generate_series' : ')');
    }
    if (alias?.colnames !== undefined) return;
    if (alias?.aliasname === undefined) {
      // Without an alias PostgreSQL names the table and its column after the function (TypeORM's SELECT * FROM current_schema()).
      if (SCALAR_FROM_FUNCTIONS.has(fn)) {
        this.insertBefore(i, '(SELECT ');
        this.insertAfter(close, ` AS ${fn}) AS ${fn}`);
      }
      return;
    }
    let a = close + 1;
    if (wordOf(this.tokens[a]) === 'as') a++;
    const aliasToken = this.tokens[a];
    if (aliasToken === undefined || wordOf(aliasToken) !== alias.aliasname.toLowerCase()) return;
    if (SCALAR_FROM_FUNCTIONS.has(fn)) {
      // f(...) s → (SELECT f(...) AS s) s
      this.insertBefore(i, '(SELECT ');
      this.insertAfter(close, ` AS ${aliasToken.text})`);
    } else {
      this.insertAfter(a, `(${aliasToken.text})`);
    }
  }
}

/** A boolean as PostgreSQL's boolin reads it (any unique prefix of true, false, yes, no, on, off; 1 and 0), or null. */
export function pgBoolean(text: string): 'true' | 'false' | null {
  const t = text.trim().toLowerCase();
  if (t === '') return null;
  const prefix = (word: string, min = 1): boolean => t.length >= min && word.startsWith(t);
  if (prefix('true') || prefix('yes') || prefix('on', 2) || t === '1') return 'true';
  if (prefix('false') || prefix('no') || prefix('off', 2) || t === '0') return 'false';
  return null;
}

/** Whether a LIKE pattern's escapes matter: it holds a parameter, or a literal with a backslash. */
function escapableExpression(e: unknown): boolean {
  if (Array.isArray(e)) return e.some(escapableExpression);
  if (e === null || typeof e !== 'object') return false;
  const n = e as Node;
  if (n.ParamRef !== undefined) return true;
  const sval = ((n.A_Const as Node | undefined)?.sval as { sval?: string } | undefined)?.sval;
  if (sval?.includes('\\') === true) return true;
  return Object.values(n).some(escapableExpression);
}

/** Whether every argument of a call is an integer literal or a cast to integer: PostgreSQL's int4. */
function integerArguments(call: Node): boolean {
  const args = (call.args as Node[] | undefined) ?? [];
  const int4 = (a: Node): boolean => {
    const ival = (a.A_Const as Node | undefined)?.ival as { ival?: number } | undefined;
    if (ival !== undefined) return Math.abs(ival.ival ?? 0) <= 2147483647;
    const cast = a.TypeCast as Node | undefined;
    const type = strings((cast?.typeName as Node | undefined)?.names).at(-1);
    return cast !== undefined && (cast.typeName as Node).arrayBounds === undefined && (type === 'int4' || type === 'int' || type === 'integer');
  };
  return args.length >= 2 && args.every(int4);
}

/** A RangeFunction's one function call (`FROM f(...)`), or undefined for ROWS FROM of several. */
function rangeCall(node: Node): Node | undefined {
  const functions = node.functions as unknown[] | undefined;
  if (functions?.length !== 1) return undefined;
  return ((functions[0] as { List?: { items?: unknown[] } }).List?.items?.[0] as Node | undefined)?.FuncCall as Node | undefined;
}

/**
 * Whether the operand of a reg* cast names the object (a string, a
 * parameter, a cast, a concatenation, a text function); anything else is
 * its OID.
 */
function isNameExpression(arg: Node | undefined): boolean {
  if (arg === undefined) return false;
  const call = strings((arg.FuncCall as Node | undefined)?.funcname);
  const op = strings((arg.A_Expr as Node | undefined)?.name);
  return (
    (arg.A_Const as Node | undefined)?.sval !== undefined ||
    arg.ParamRef !== undefined ||
    arg.TypeCast !== undefined ||
    op[op.length - 1] === '||' ||
    TEXT_FUNCTIONS.has(call[call.length - 1] ?? '')
  );
}

/** Whether an operand is JSON by its text: a literal that parses as a JSON object or array, or a cast to json or jsonb. */
function isJsonOperand(e: Node | undefined): boolean {
  const cast = e?.TypeCast as Node | undefined;
  if (cast !== undefined) {
    const names = strings((cast.typeName as Node | undefined)?.names);
    if (['json', 'jsonb'].includes(names[names.length - 1] ?? '')) return true;
    return isJsonOperand(cast.arg as Node | undefined);
  }
  const sval = ((e?.A_Const as Node | undefined)?.sval as { sval?: string } | undefined)?.sval;
  if (sval === undefined || !/^\s*[[{]/.test(sval)) return false;
  try {
    return typeof JSON.parse(sval) === 'object';
  } catch {
    return false;
  }
}

/** A text-array path literal ('{a,0,b}') as a JSON path ($.a[0].b); null when the path is not a literal. */
function jsonPath(e: Node | undefined): string | null {
  const sval = ((e?.A_Const as Node | undefined)?.sval as { sval?: string } | undefined)?.sval;
  const items = sval === undefined ? null : parseArrayLiteral(sval);
  if (items === null || items.some((x) => typeof x !== 'string')) return null;
  return `$${(items as string[]).map((k) => (/^\d+$/.test(k) ? `[${k}]` : `.${JSON.stringify(k)}`)).join('')}`;
}

/** A parse-tree node without its locations, for comparing two parses of the same expression. */
function shape(node: unknown): string {
  return JSON.stringify(node, (key, value: unknown) => (key === 'location' || key === 'list_start' || key === 'list_end' ? undefined : value));
}

/** A statement as the engine runs it, and how to find a position of it in the client's text. */
export interface Rewritten {
  readonly text: string;
  /** A 1-based position in `text` (an error's) as a position in the statement the client sent. */
  clientPosition(position: number): number;
}

const UNCHANGED = (text: string): Rewritten => ({ text, clientPosition: (p) => p });

function withEdits(text: string, edits: readonly Edit[]): Rewritten {
  if (edits.length === 0) return UNCHANGED(text);
  return {
    text,
    clientPosition(position) {
      const p = position - 1;
      let delta = 0;
      for (const e of edits) {
        const start = e.start + delta;
        if (p < start) break;
        // Inside replaced text: the position of what it replaced.
        if (p < start + e.text.length) return e.start + 1;
        delta += e.text.length - (e.end - e.start);
      }
      return p - delta + 1;
    },
  };
}

const CACHE_LIMIT = 10_000;

/**
 * Rewrites statements for the engine, caching by statement text (catalog
 * queries repeat: every psql \d, every driver's type lookup).
 */
export class CompatRewriter {
  private readonly cache = new Map<string, Rewritten>();

  /** `database`: the name clients connect to, which they may use to qualify a schema. */
  constructor(private readonly database = 'cotwire') {}

  /** The statement as DuckDB should run it; the same text when nothing needs rewriting. */
  rewrite(text: string, tokens: readonly Token[], target: TargetColumns | null = null): string {
    return this.rewriteMapped(new ParsedStatement(text, tokens), target).text;
  }

  /**
   * The statement as DuckDB should run it, with the map from its positions
   * back to the client's. `target` describes an INSERT's table (see insertTarget).
   */
  rewriteMapped(statement: ParsedStatement, target: TargetColumns | null = null): Rewritten {
    const { text, tokens } = statement;
    if (target === null && !mayNeedRewrite(tokens)) return UNCHANGED(text);
    const hit = target === null ? this.cache.get(text) : undefined;
    if (hit !== undefined) return hit;
    let out = UNCHANGED(text);
    const stmt = statement.tree;
    if (stmt !== null) {
      const rewriter = new Rewriter(text, tokens, target, this.database);
      try {
        out = withEdits(rewriter.run(stmt), rewriter.applied);
      } catch {
        // A parse tree no rule foresaw: the engine reads the statement as written, and answers for it.
        out = UNCHANGED(text);
      }
    }
    if (target !== null) return out;
    if (this.cache.size >= CACHE_LIMIT) this.cache.clear();
    this.cache.set(text, out);
    return out;
  }

  /**
   * For INSERT ... VALUES with a PostgreSQL array literal among its values
   * ('{a,b}', which is how psycopg2 sends an empty list): the target table,
   * whose column types decide which literals are arrays. Null otherwise.
   */
  insertTarget(statement: ParsedStatement): { readonly schema: string | null; readonly table: string } | null {
    const { tokens } = statement;
    // A JSON object ('{"k": 1}') is not an array literal; '{}' may be either, and the column decides.
    const arrayLike = (t: Token): boolean =>
      t.kind === 'string' && t.text.startsWith("'{") && pgArrayToList(t.text.slice(1, -1).replaceAll("''", "'")) !== null;
    const spaced = (t: Token): boolean => t.kind === 'string' && SPACED_OFFSET.test(t.text.slice(1, -1));
    const first = wordOf(tokens[0]);
    if (!((first === 'insert' && tokens.some((t) => arrayLike(t) || spaced(t))) || (first === 'update' && tokens.some(spaced)))) return null;
    const stmt = statement.tree;
    const relation = ((stmt?.InsertStmt ?? stmt?.UpdateStmt) as Node | undefined)?.relation as Node | undefined;
    if (typeof relation?.relname !== 'string') return null;
    const schema = typeof relation.schemaname === 'string' ? relation.schemaname : null;
    return { schema: schema === 'public' ? 'main' : schema, table: relation.relname };
  }
}
