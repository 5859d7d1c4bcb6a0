import { PgError } from '../../../errors/pg-error.js';
import { SqlState } from '../../../errors/sqlstate.js';

/**
 * DuckDB reports errors as text: "<Type> Error: <message>", optionally
 * followed by suggestions and a "LINE n:" excerpt with a caret. This table
 * maps the type (and, where one type covers several PostgreSQL conditions,
 * the message) to a SQLSTATE. XX000 is the last resort.
 */
interface Rule {
  readonly type: string;
  readonly match?: RegExp;
  readonly code: string;
}

const RULES: readonly Rule[] = [
  // A full disk, whichever layer noticed it: the message names the file.
  { type: 'IO', match: /No space left on device|disk is full|not enough space/i, code: SqlState.DiskFull },
  { type: 'TransactionContext', match: /No space left on device|disk is full|not enough space/i, code: SqlState.DiskFull },
  { type: 'Catalog', match: /^(Table|View) with name .* does not exist/i, code: SqlState.UndefinedTable },
  { type: 'Catalog', match: /^Schema with name .* does not exist/i, code: SqlState.InvalidSchemaName },
  { type: 'Catalog', match: /^Catalog .* does not exist/i, code: SqlState.InvalidCatalogName },
  { type: 'Catalog', match: /Function with name .* does not exist/i, code: SqlState.UndefinedFunction },
  { type: 'Catalog', match: /^Schema with name .* already exists/i, code: SqlState.DuplicateSchema },
  { type: 'Catalog', match: /^(Table|View) with name .* already exists/i, code: SqlState.DuplicateTable },
  { type: 'Catalog', match: /already exists/i, code: SqlState.DuplicateObject },
  { type: 'Catalog', match: /unrecognized configuration parameter/i, code: SqlState.UndefinedObject },
  { type: 'Catalog', code: SqlState.UndefinedObject },
  {
    type: 'Binder',
    match: /Referenced column .* not found|column .* (does not exist|not found)|Referenced table .* not found|does not have a column/i,
    code: SqlState.UndefinedColumn,
  },
  { type: 'Binder', match: /Ambiguous reference to column/i, code: SqlState.AmbiguousColumn },
  { type: 'Binder', match: /conflict target are not referenced by a UNIQUE\/PRIMARY KEY CONSTRAINT or INDEX/i, code: '42P10' },
  { type: 'Binder', match: /No function matches|does not exist/i, code: SqlState.UndefinedFunction },
  { type: 'Binder', match: /Could not choose a best candidate/i, code: SqlState.AmbiguousFunction },
  { type: 'Binder', match: /UNNEST not supported here/i, code: SqlState.FeatureNotSupported },
  { type: 'Binder', match: /GROUP BY|aggregate/i, code: '42803' },
  { type: 'Binder', match: /columns but \d+ values were supplied|expressions than target columns/i, code: SqlState.SyntaxError },
  { type: 'Binder', match: /Cannot compare values|cannot be cast|Cannot mix/i, code: SqlState.DatatypeMismatch },
  { type: 'Binder', match: /Cannot change the value of|read-only|in read-only mode/i, code: SqlState.InsufficientPrivilege },
  // A catalog macro chosen by an operand's type (array ||, typed by a witness) given an aggregate, which DuckDB cannot type while it binds the macro.
  { type: 'Binder', match: /Macro cot_\w+\(\) has multiple overloads/i, code: SqlState.AmbiguousFunction },
  { type: 'Binder', code: '42000' },
  { type: 'Parser', code: SqlState.SyntaxError },
  { type: 'Syntax', code: SqlState.SyntaxError },
  { type: 'Conversion', match: /^invalid (date|timestamp)\S* field format/i, code: SqlState.InvalidDatetimeFormat },
  { type: 'Conversion', match: /^time field value out of range: "(?!\s*\d{1,2}:\d{2})/i, code: SqlState.InvalidDatetimeFormat },
  { type: 'Conversion', match: /^Could not convert string '.*' to INTERVAL\b/i, code: SqlState.InvalidDatetimeFormat },
  { type: 'Conversion', match: /(date|time|timestamp)\S* field value out of range/i, code: SqlState.DatetimeFieldOverflow },
  { type: 'Conversion', match: /^Could not convert string '\s*[+-]?\d+\s*' to U?INT(8|16|32|64)\b/i, code: SqlState.NumericValueOutOfRange },
  { type: 'Conversion', match: /out of range|overflow/i, code: SqlState.NumericValueOutOfRange },
  // A number with more digits than DECIMAL(38, s) holds: PostgreSQL's numeric field overflow.
  { type: 'Conversion', match: /Could not cast value \S+ to DECIMAL\(/i, code: SqlState.NumericValueOutOfRange },
  { type: 'Conversion', match: /^Could not convert string "\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*" to DECIMAL\(/, code: SqlState.NumericValueOutOfRange },
  { type: 'Conversion', code: SqlState.InvalidTextRepresentation },
  { type: 'Constraint', match: /duplicate key|primary key|unique/i, code: SqlState.UniqueViolation },
  { type: 'Constraint', match: /NOT NULL/i, code: SqlState.NotNullViolation },
  { type: 'Constraint', match: /CHECK constraint/i, code: SqlState.CheckViolation },
  { type: 'Constraint', match: /foreign key/i, code: SqlState.ForeignKeyViolation },
  { type: 'Constraint', code: SqlState.IntegrityConstraintViolation },
  { type: 'Out of Range', code: SqlState.NumericValueOutOfRange },
  { type: 'Invalid Input', match: /division by zero/i, code: SqlState.DivisionByZero },
  { type: 'Invalid Input', match: /^numeric (quotient|value) .* (past the|more digits than)/, code: SqlState.NumericValueOutOfRange },
  { type: 'Invalid Input', match: /^(value )?".*" is out of range for type /, code: SqlState.NumericValueOutOfRange },
  { type: 'Invalid Input', match: /could not obtain lock/i, code: '55P03' },
  { type: 'Invalid Input', match: /Cannot prepare multiple statements/i, code: SqlState.SyntaxError },
  { type: 'Invalid Input', match: /configuration has been locked|Cannot change configuration/i, code: SqlState.InsufficientPrivilege },
  {
    type: 'Invalid Input',
    match: /Could not (parse|convert)|invalid .*(format|syntax)|Malformed JSON|malformed array literal/i,
    code: SqlState.InvalidTextRepresentation,
  },
  { type: 'Invalid Input', code: SqlState.InvalidParameterValue },
  { type: 'INTERRUPT', code: SqlState.QueryCanceled },
  { type: 'Interrupt', code: SqlState.QueryCanceled },
  { type: 'Not implemented', code: SqlState.FeatureNotSupported },
  { type: 'Permission', code: SqlState.InsufficientPrivilege },
  { type: 'IO', code: SqlState.IoError },
  { type: 'Transaction', match: /aborted/i, code: SqlState.InFailedSqlTransaction },
  { type: 'Transaction', match: /conflict/i, code: SqlState.SerializationFailure },
  { type: 'Transaction', code: SqlState.InvalidTransactionState },
  { type: 'TransactionContext', match: /launched in read-only mode/i, code: SqlState.ReadOnlySqlTransaction },
  { type: 'TransactionContext', match: /aborted/i, code: SqlState.InFailedSqlTransaction },
  { type: 'TransactionContext', match: /within a transaction/i, code: SqlState.ActiveSqlTransaction },
  { type: 'TransactionContext', match: /no transaction is active/i, code: SqlState.NoActiveSqlTransaction },
  // Two transactions that added one key: the second's COMMIT is refused, as PostgreSQL refuses its INSERT.
  { type: 'TransactionContext', match: /UNIQUE constraint violation|duplicate key/i, code: SqlState.UniqueViolation },
  { type: 'TransactionContext', match: /conflict/i, code: SqlState.SerializationFailure },
  { type: 'TransactionContext', code: SqlState.InvalidTransactionState },
  { type: 'Dependency', code: '2BP01' },
  { type: 'Out of Memory', code: SqlState.OutOfMemory },
  { type: 'Mismatch Type', code: SqlState.DatatypeMismatch },
  { type: 'Type Mismatch', code: SqlState.DatatypeMismatch },
  { type: 'Invalid type', code: SqlState.DatatypeMismatch },
  { type: 'Parameter Not Resolved', code: '42P18' },
  { type: 'Parameter Not Allowed', code: SqlState.FeatureNotSupported },
  { type: 'Sequence', code: SqlState.ObjectNotInPrerequisiteState },
  { type: 'Missing Extension', code: SqlState.FeatureNotSupported },
  { type: 'Extension Autoloading', code: SqlState.FeatureNotSupported },
  { type: 'Invalid Configuration', code: SqlState.InvalidParameterValue },
];

/** Every SQLSTATE the table can produce; the README documents each. */
export const MAPPED_SQLSTATES: readonly string[] = [...new Set(RULES.map((r) => r.code).concat(SqlState.InternalError))];

const HEADER = /^([A-Za-z][A-Za-z -]*?) Error: ([\s\S]*)$/;

/** The SQLSTATE for a DuckDB error type and message, per the table above. */
export function sqlStateFor(type: string, message: string): string {
  for (const rule of RULES) {
    if (rule.type.toLowerCase() === type.toLowerCase() && (rule.match === undefined || rule.match.test(message))) {
      return rule.code;
    }
  }
  return SqlState.InternalError;
}

/** Errors of these types mean something is wrong inside DuckDB, not in the statement. */
export function isEngineFault(code: string): boolean {
  return code === SqlState.InternalError;
}

/**
 * Turns a DuckDB error into a PgError. `sql` is the statement text that was
 * given to DuckDB and `offset` its start inside the client's query string,
 * so that the position points into what the client sent.
 */
export function fromDuckDBError(err: unknown, sql?: string, offset = 0): PgError {
  if (err instanceof PgError) return err;
  const raw = err instanceof Error ? err.message : String(err);
  const text = raw.replace(/^Failed to (extract statements|prepare|execute[^:]*): /, '');
  const m = HEADER.exec(text);
  const type = m?.[1] ?? '';
  let body = m === null ? text : text;
  let position: number | undefined;
  const lineAt = body.search(/\n+LINE \d+: /);
  if (lineAt >= 0) {
    position = caretPosition(body.slice(lineAt), sql);
    body = body.slice(0, lineAt);
  }
  let hint: string | undefined;
  const suggestion = body.search(/\n(Did you mean|Candidate)/);
  if (suggestion >= 0) {
    hint = body.slice(suggestion + 1).trim();
    body = body.slice(0, suggestion);
  }
  const code = m === null ? SqlState.InternalError : sqlStateFor(type, m[2] as string);
  let message = body.trim();
  if (code === SqlState.QueryCanceled) message = 'canceling statement due to user request';
  if (code === SqlState.OutOfMemory) {
    // DuckDB's "Possible solutions" are settings no client may change: the ceiling is the server's.
    return new PgError(SqlState.OutOfMemory, message.split('\n')[0] ?? 'out of memory', {
      hint: 'The statement needs more memory than the server gives its engine (limits.memoryMB, and limits.spillMB on disk). Reduce what it holds at once, or ask the administrator.',
      cause: err,
    });
  }
  if (code === SqlState.SyntaxError && /Cannot prepare multiple statements/i.test(message)) {
    // DuckDB turns a PIVOT without an IN list into several statements (one
    // reads the pivoted values first); the client sent one.
    if (sql !== undefined && /\bPIVOT\b/i.test(sql)) {
      return new PgError(SqlState.FeatureNotSupported, 'PIVOT without an IN list is not supported', {
        hint: "Name the values to pivot on: PIVOT t ON col IN ('a', 'b') USING count(*) ...",
        cause: err,
      });
    }
    message = 'cannot insert multiple commands into a prepared statement';
  }
  const fields: { hint?: string; position?: number; detail?: string; cause: unknown } = { cause: err };
  const input = /^(conversion|invalid input)$/i.test(type) ? inputError(m?.[2]?.split('\n', 1)[0] ?? '') : null;
  if (input !== null) {
    message = input.message;
    if (input.detail !== undefined) fields.detail = input.detail;
  }
  if (hint !== undefined) fields.hint = hint;
  // CHECK (length(col) <= n), the rewrite's stand-in for varchar(n): PostgreSQL's error for a value too long.
  const tooLong = code === SqlState.CheckViolation ? /with expression CHECK\(\(length\((rtrim\()?[^()]*\)?\) <= (\d+)\)\)/.exec(message) : null;
  if (tooLong !== null) {
    // char(n)'s check reads rtrim(col): PostgreSQL names the type character(n).
    return new PgError('22001', `value too long for type ${tooLong[1] === undefined ? 'character varying' : 'character'}(${tooLong[2]})`, { cause: err });
  }
  const duplicate = code === SqlState.UniqueViolation ? duplicateKeyDetail(message) : null;
  // Two rows of one statement with one key: DuckDB names the value, not the columns.
  if (code === SqlState.UniqueViolation && duplicate === null && /constraint violation: duplicate key/i.test(message)) {
    message = 'duplicate key value violates unique constraint';
  }
  if (duplicate !== null) {
    // PostgreSQL's wording, and its detail, which ORMs parse for the columns at fault (Sequelize's UniqueConstraintError).
    message = 'duplicate key value violates unique constraint';
    fields.detail = duplicate;
  }
  if (code === '42P10') message = 'there is no unique or exclusion constraint matching the ON CONFLICT specification';
  if (code === SqlState.FeatureNotSupported && /UNNEST not supported here/i.test(message)) {
    // PostgreSQL groups the rows a set-returning function makes; DuckDB cannot in the same query level.
    message = 'a set-returning function (unnest, generate_series) cannot be used here together with GROUP BY or an aggregate';
    fields.hint = 'Expand it in a subquery and group the subquery: SELECT tag, count(*) FROM (SELECT unnest(tags) AS tag FROM t) s GROUP BY tag';
  }
  if (code === SqlState.AmbiguousFunction && /Macro cot_\w+\(\)/.test(message)) {
    // The macro is cotwire's, not the client's: say what to do about the operand.
    message = 'operator is not unique: the type of an aggregate operand is known only once it is computed';
    fields.hint = 'Cast the aggregate to its type where it is used, for example (array_agg(x))[1]::text.';
  }
  if (position !== undefined) fields.position = position + offset;
  return new PgError(code, message, fields);
}

/** PostgreSQL's names of the types DuckDB names in a conversion error. */
const INPUT_TYPE_NAMES: Readonly<Record<string, string>> = {
  INT8: 'smallint',
  INT16: 'smallint',
  INT32: 'integer',
  INT64: 'bigint',
  UINT8: 'smallint',
  UINT16: 'integer',
  UINT32: 'bigint',
  UINT64: 'numeric',
  // A UUID is an INT128 inside DuckDB, and no PostgreSQL type is a HUGEINT: text that fails as one was given for a uuid.
  INT128: 'uuid',
  DOUBLE: 'double precision',
  FLOAT: 'real',
  BOOL: 'boolean',
  INTERVAL: 'interval',
};

/**
 * A value's text that its type's input refuses, in PostgreSQL's words
 * (`invalid input syntax for type integer: "abc"`): clients and people
 * read these, and DuckDB's name the engine's types (INT32, INT128 for a
 * uuid). The cast-checking macros raise PostgreSQL's words already; only
 * DuckDB's "Invalid Input Error: " is taken off them.
 */
function inputError(body: string): { readonly message: string; readonly detail?: string } | null {
  if (/^(invalid input syntax for type |(value )?".*" is out of range for type |malformed array literal)/.test(body)) return { message: body };
  let m = /^Could not convert string (?:'(.*)'|"(.*)") to ([A-Z0-9]+|DECIMAL\(\d+,\d+\))$/.exec(body);
  if (m !== null) {
    const text = m[1] ?? m[2] ?? '';
    const duck = m[3] as string;
    const name = duck.startsWith('DECIMAL') ? 'numeric' : INPUT_TYPE_NAMES[duck];
    if (name === undefined) return null;
    if (/^U?INT(8|16|32|64)$/.test(duck) && /^\s*[+-]?\d+\s*$/.test(text)) return { message: `value "${text}" is out of range for type ${name}` };
    const decimal = /^DECIMAL\((\d+),(\d+)\)$/.exec(duck);
    if (decimal !== null && /^\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*$/.test(text)) {
      const [p, sc] = [Number(decimal[1]), Number(decimal[2])];
      return {
        message: 'numeric field overflow',
        detail:
          p === 38 && sc === 9
            ? 'cotwire holds numeric without a precision as DECIMAL(38,9): 29 digits before the point and 9 after.'
            : `A field with precision ${p}, scale ${sc} must round to an absolute value less than ${p === sc ? '1' : `10^${p - sc}`}.`,
      };
    }
    return { message: `invalid input syntax for type ${name}: "${text}"` };
  }
  m = /^invalid (date|timestamp) field format: "(.*)", expected format is/.exec(body);
  if (m !== null) return { message: `invalid input syntax for type ${m[1]}: "${m[2]}"` };
  m = /^(?:date|time|timestamp) field value out of range: "(.*?)"(?:, expected format is|$)/.exec(body);
  if (m !== null) {
    const text = m[1] as string;
    if (body.startsWith('time ') && !/^\s*\d{1,2}:\d{2}/.test(text)) return { message: `invalid input syntax for type time: "${text}"` };
    return { message: `date/time field value out of range: "${text}"` };
  }
  m = /^Type VARCHAR with value '(.*)' can't be cast to the destination type \w+\[\]$/.exec(body);
  if (m !== null) return { message: `malformed array literal: "${m[1]}"`, detail: 'Array value must start with "{" or dimension information.' };
  if (/^Malformed JSON/.test(body)) return { message: 'invalid input syntax for type json', detail: body };
  return null;
}

/** `Duplicate key "a: 1, b: x" violates ...` as PostgreSQL's detail, `Key (a, b)=(1, x) already exists.` */
function duplicateKeyDetail(message: string): string | null {
  const m = /Duplicate key "(.*)" violates (?:unique|primary key) constraint/i.exec(message);
  if (m === null) return null;
  // A partial unique index's key is each column's value where its predicate holds (planner.ts, partialIndex): the column.
  const keys = (m[1] as string).replace(/CASE\s+WHEN \(\(.*?\)\) THEN \((.*?)\) ELSE CAST\(NULL AS [^)]*\) END/g, '$1');
  const pairs = keys.split(/, (?=[^\s:,]+: )/).map((p) => {
    const at = p.indexOf(': ');
    return at < 0 ? null : ([p.slice(0, at), p.slice(at + 2)] as const);
  });
  if (pairs.some((p) => p === null)) return null;
  const kv = pairs as Array<readonly [string, string]>;
  return `Key (${kv.map(([k]) => k).join(', ')})=(${kv.map(([, v]) => v).join(', ')}) already exists.`;
}

/**
 * DuckDB prints the offending line (shortened with "..." when long) and a
 * caret under the error. The 1-based character position is recovered by
 * finding that excerpt in the statement text.
 */
function caretPosition(context: string, sql: string | undefined): number | undefined {
  const m = /LINE (\d+): (.*)\n( *)\^/.exec(context);
  if (m === null || sql === undefined) return undefined;
  const lineNo = Number(m[1]);
  let excerpt = m[2] as string;
  const prefix = `LINE ${lineNo}: `.length;
  let caret = (m[3] as string).length - prefix;
  if (excerpt.startsWith('...')) {
    excerpt = excerpt.slice(3);
    caret -= 3;
  }
  if (excerpt.endsWith('...')) excerpt = excerpt.slice(0, -3);
  const lines = sql.split('\n');
  let lineStart = 0;
  for (let i = 0; i < lineNo - 1 && i < lines.length; i++) lineStart += (lines[i] as string).length + 1;
  const line = lines[lineNo - 1] ?? '';
  const at = line.indexOf(excerpt);
  if (at < 0 || caret < 0) return undefined;
  return lineStart + at + caret + 1;
}
