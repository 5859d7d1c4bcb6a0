import type { StatementKind } from '../../../engine/port.js';
import { tokenize, type Token } from '../../../sql/lexer.js';
import { ParsedStatement } from '../../../sql/parsed.js';
import { identifierText, type ProtectedNames } from '../../../guard/names.js';
import { nameText, stringText } from '../../../sql/identifiers.js';
import { serverOnlyRefusal as serverOnly, type Refusal } from '../../../guard/refusal.js';
import { DYNAMIC_SQL_FUNCTIONS, HOST_FUNCTIONS, HOST_INFORMATION, HOST_PATH_SETTINGS, READ_ONLY_CALLS, READ_ONLY_PRAGMAS } from '../../../guard/policy.js';

/** A question about the catalog that a verdict depends on; answered at each execution, never cached. */
export type CatalogCheck =
  | { readonly kind: 'schema-holds-ledger'; readonly schema: string; readonly operation: string }
  | { readonly kind: 'index-on-ledger'; readonly index: string; readonly operation: string }
  | { readonly kind: 'ledger-name-elsewhere'; readonly name: string; readonly schema: string | null };

export type Decision =
  | {
      readonly allow: true;
      readonly checks: readonly CatalogCheck[];
      /**
       * The ledger the statement appends to, as written, or null. Such a
       * statement may run only as the ledger writer's append, never on the
       * engine: the writer alone computes a ledger row's chain columns.
       */
      readonly appendsTo?: string | null;
    }
  | { readonly allow: false; readonly refusal: Refusal };

export interface ClassifyInput {
  readonly text: string;
  readonly tokens: readonly Token[];
  /** What DuckDB's parser says the statement is. */
  readonly kind: StatementKind;
  /** The statement's parsed form, when the caller has one for `text`: its tree is then read once for every rule. */
  readonly parsed?: ParsedStatement;
}

export interface GuardPolicy {
  readonly names: ProtectedNames;
  /** Names of built-in functions and of cotwire's own SQL functions, lower case. */
  readonly reservedFunctions: ReadonlySet<string>;
}

const ALLOW: Decision = { allow: true, checks: [] };
const LEDGER_HINT = 'Ledger tables accept SELECT and INSERT only: rows are appended and chained by the server, and are never changed or removed.';
const HOST_HINT = 'cotwire does not access files, the network or extensions on behalf of clients.';

function refuse(reason: Refusal['reason'], operation: string, target: string, message: string, hint: string): Decision {
  return { allow: false, refusal: { reason, operation, target, message, hint } };
}

function ledgerRefusal(operation: string, table: string): Decision {
  return refuse('ledger', operation, table, `cannot ${operation} ledger table "${table}": ledger tables are append-only`, LEDGER_HINT);
}

function hostRefusal(operation: string, target: string): Decision {
  return refuse('host', operation, target, `cannot ${operation}: the server does not access files or extensions for clients`, HOST_HINT);
}

/** Where the server keeps its files is not shown to clients. */
function hostPlaceRefusal(operation: string, target: string): Decision {
  return refuse('host', operation, target, `cannot ${operation}: where the server keeps its files is not shown to clients`, HOST_HINT);
}

function uncertain(operation: string, names: readonly string[]): Decision {
  return refuse(
    'uncertain',
    operation,
    names[0] ?? '',
    `cannot ${operation} here: the statement names ledger table "${names[0] ?? ''}" in a form cotwire cannot analyse with certainty`,
    'Write this statement in PostgreSQL syntax (for example INSERT ... ON CONFLICT instead of INSERT OR REPLACE), so that the guard can tell which table it writes.',
  );
}

// ---- PostgreSQL parse trees (libpg-query) -----------------------------------------------------

type Node = Record<string, unknown>;
interface RangeVar {
  readonly relname?: string;
  readonly schemaname?: string;
  readonly catalogname?: string;
  readonly relpersistence?: string;
}

const rangeName = (r: RangeVar | undefined): string => [r?.catalogname, r?.schemaname, r?.relname].filter((x) => x !== undefined).join('.');

/** The statement's tree in PostgreSQL's own grammar; null when it is not PostgreSQL (DuckDB-only syntax). */
function parsePostgres(input: ClassifyInput): Node | null {
  const parsed = input.parsed?.text === input.text ? input.parsed : new ParsedStatement(input.text, input.tokens);
  return parsed.tree;
}

/** The single key of a parse-tree node ({ InsertStmt: {...} } → ['InsertStmt', {...}]). */
function unwrap(node: Node | undefined): [string, Node] | null {
  if (node === undefined || node === null) return null;
  const key = Object.keys(node)[0];
  return key === undefined ? null : [key, node[key] as Node];
}

function strings(list: unknown): string[] {
  if (!Array.isArray(list)) return [];
  return list.map((x) => ((x as { String?: { sval?: string } }).String?.sval ?? '') as string);
}

/** The names in a DropStmt's objects: each is a dotted name; the last part is the object. */
function droppedNames(objects: unknown): string[][] {
  if (!Array.isArray(objects)) return [];
  return objects.map((o) => {
    const n = o as { List?: { items?: unknown }; String?: { sval?: string }; TypeName?: { names?: unknown } };
    if (n.List !== undefined) return strings(n.List.items);
    if (n.String !== undefined) return [n.String.sval ?? ''];
    if (n.TypeName !== undefined) return strings(n.TypeName.names);
    return [''];
  });
}

const OBJECT_WORDS: Readonly<Record<string, string>> = {
  OBJECT_TABLE: 'table',
  OBJECT_VIEW: 'view',
  OBJECT_MATVIEW: 'materialized view',
  OBJECT_INDEX: 'index',
  OBJECT_SEQUENCE: 'sequence',
  OBJECT_TYPE: 'type',
  OBJECT_SCHEMA: 'schema',
  OBJECT_FUNCTION: 'function',
  OBJECT_COLUMN: 'column',
};

/**
 * Decides a statement that PostgreSQL's grammar parsed. `kind` is DuckDB's
 * view of the same text; where the two disagree about whether it writes,
 * the stricter one wins.
 */
function classifyTree(stmt: Node, policy: GuardPolicy): Decision {
  const u = unwrap(stmt);
  if (u === null) return refuse('uncertain', 'run this statement', '', 'cannot analyse this statement', 'Check its syntax.');
  const [type, body] = u;
  const names = policy.names;
  switch (type) {
    case 'SelectStmt': {
      const into = (body.intoClause as { rel?: RangeVar } | undefined)?.rel;
      if (into !== undefined && names.isProtected(into.relname)) {
        return ledgerRefusal('SELECT INTO', rangeName(into));
      }
      return ALLOW;
    }
    case 'InsertStmt': {
      const rel = body.relation as RangeVar;
      if (!names.isProtected(rel.relname)) return ALLOW;
      if (names.isServerOnly(rel.relname)) return serverOnlyRefusal(rangeName(rel));
      const conflict = body.onConflictClause as { action?: string } | undefined;
      if (conflict !== undefined) {
        return ledgerRefusal(conflict.action === 'ONCONFLICT_UPDATE' ? 'upsert into' : 'INSERT ... ON CONFLICT into', rangeName(rel));
      }
      return { allow: true, checks: [], appendsTo: rangeName(rel) };
    }
    case 'UpdateStmt':
    case 'DeleteStmt':
    case 'MergeStmt': {
      const rel = body.relation as RangeVar;
      const op = type === 'UpdateStmt' ? 'UPDATE' : type === 'DeleteStmt' ? 'DELETE FROM' : 'MERGE INTO';
      return names.isProtected(rel.relname) ? ledgerRefusal(op, rangeName(rel)) : ALLOW;
    }
    case 'TruncateStmt': {
      for (const r of (body.relations as Array<{ RangeVar: RangeVar }>) ?? []) {
        if (names.isProtected(r.RangeVar.relname)) return ledgerRefusal('TRUNCATE', rangeName(r.RangeVar));
      }
      return ALLOW;
    }
    case 'ExplainStmt': {
      // EXPLAIN ANALYZE runs the statement it explains. DuckDB lower-cases each option's name,
      // so ("ANALYZE") counts; ANALYSE is PostgreSQL's other spelling.
      const options = ((body.options as Array<{ DefElem?: { defname?: string } }>) ?? []).map((o) => (o.DefElem?.defname ?? '').toLowerCase());
      if (!options.some((o) => ANALYZE_SPELLINGS.has(o))) return ALLOW;
      return classifyTree(body.query as Node, policy);
    }
    case 'PrepareStmt':
      return classifyTree(body.query as Node, policy);
    case 'ExecuteStmt':
    case 'DeallocateStmt':
    case 'VariableShowStmt':
      return ALLOW;
    default:
      return (
        classifyDefinition(type, body, names) ??
        refuse(
          'unsupported',
          'run this statement',
          '',
          'cannot run this statement: cotwire does not allow it for clients',
          'See the security model in the README for what clients may run.',
        )
      );
  }
}

/** DDL: creating, renaming, altering, commenting on and dropping objects; null for any other kind of statement. */
function classifyDefinition(type: string, body: Record<string, unknown>, names: ProtectedNames): Decision | null {
  switch (type) {
    case 'CreateStmt': {
      const rel = body.relation as RangeVar;
      if (!names.isProtected(rel.relname)) return ALLOW;
      if (rel.relpersistence === 't') {
        return refuse(
          'shadow',
          'CREATE TEMP TABLE',
          rangeName(rel),
          `cannot create temporary table "${rangeName(rel)}": ledger names are reserved for ledger tables`,
          'Create the ledger as a permanent table.',
        );
      }
      return { allow: true, checks: [{ kind: 'ledger-name-elsewhere', name: rel.relname ?? '', schema: rel.schemaname ?? null }] };
    }
    case 'CreateTableAsStmt': {
      const rel = (body.into as { rel?: RangeVar } | undefined)?.rel;
      if (rel !== undefined && names.isProtected(rel.relname)) {
        return refuse(
          'ledger',
          'CREATE TABLE AS',
          rangeName(rel),
          `cannot create ledger table "${rangeName(rel)}" from a query: ledger rows are appended one INSERT at a time by the server`,
          'CREATE TABLE the ledger, then INSERT INTO it ... SELECT.',
        );
      }
      return ALLOW;
    }
    case 'ViewStmt': {
      const rel = body.view as RangeVar;
      return names.isProtected(rel.relname) ? shadowRefusal('view', rangeName(rel)) : ALLOW;
    }
    case 'CreateSeqStmt': {
      const rel = body.sequence as RangeVar;
      return names.isProtected(rel.relname) ? shadowRefusal('sequence', rangeName(rel)) : ALLOW;
    }
    case 'CompositeTypeStmt':
    case 'CreateEnumStmt':
    case 'CreateDomainStmt': {
      const n = type === 'CompositeTypeStmt' ? [(body.typevar as RangeVar).relname ?? ''] : strings(body.typeName ?? body.domainname);
      const last = n[n.length - 1];
      return names.isProtected(last) ? shadowRefusal('type', n.join('.')) : ALLOW;
    }
    case 'IndexStmt': {
      const rel = body.relation as RangeVar;
      if (names.isProtected(rel.relname)) {
        return refuse(
          'ledger',
          'CREATE INDEX on',
          rangeName(rel),
          `cannot create an index on ledger table "${rangeName(rel)}": it could make appends fail or change how the ledger is stored`,
          LEDGER_HINT,
        );
      }
      return ALLOW;
    }
    case 'DropStmt': {
      const removeType = body.removeType as string;
      const what = OBJECT_WORDS[removeType] ?? 'object';
      const checks: CatalogCheck[] = [];
      for (const parts of droppedNames(body.objects)) {
        const last = parts[parts.length - 1] ?? '';
        if (removeType === 'OBJECT_SCHEMA') {
          checks.push({ kind: 'schema-holds-ledger', schema: last, operation: 'DROP SCHEMA' });
          continue;
        }
        if (removeType === 'OBJECT_INDEX') checks.push({ kind: 'index-on-ledger', index: last, operation: 'DROP INDEX' });
        if (names.isProtected(last)) return ledgerRefusal(`DROP ${what.toUpperCase()}`, parts.join('.'));
      }
      return { allow: true, checks };
    }
    case 'RenameStmt': {
      const rel = body.relation as RangeVar | undefined;
      const renameType = body.renameType as string;
      if (renameType === 'OBJECT_SCHEMA') {
        return { allow: true, checks: [{ kind: 'schema-holds-ledger', schema: String(body.subname ?? ''), operation: 'rename schema' }] };
      }
      if (rel !== undefined && names.isProtected(rel.relname)) return ledgerRefusal('ALTER', rangeName(rel));
      if (names.isProtected(body.newname as string | undefined) && renameType !== 'OBJECT_COLUMN') {
        return refuse(
          'ledger',
          'rename into',
          String(body.newname),
          `cannot rename "${rangeName(rel)}" to "${String(body.newname)}": a table cannot be swapped in for a ledger`,
          LEDGER_HINT,
        );
      }
      return ALLOW;
    }
    case 'AlterTableStmt':
    case 'AlterObjectSchemaStmt':
    case 'AlterSeqStmt': {
      const rel = (body.relation ?? body.sequence) as RangeVar | undefined;
      if (rel !== undefined && names.isProtected(rel.relname)) return ledgerRefusal('ALTER', rangeName(rel));
      return ALLOW;
    }
    case 'CommentStmt': {
      // A comment on a column names its table too: any protected part refuses.
      const parts = droppedNames([body.object])[0] ?? [];
      return parts.some((p) => names.isProtected(p)) ? ledgerRefusal('COMMENT ON', parts.join('.')) : ALLOW;
    }
    case 'CreateSchemaStmt':
      return ALLOW;
    default:
      return null;
  }
}

function serverOnlyRefusal(table: string): Decision {
  return { allow: false, refusal: serverOnly(table) };
}

function shadowRefusal(what: string, name: string): Decision {
  return refuse(
    'shadow',
    `CREATE ${what.toUpperCase()}`,
    name,
    `cannot create ${what} "${name}": ledger names are reserved for ledger tables`,
    'Choose a name without the ledger prefix.',
  );
}

/** The PostgreSQL statement types that match each DuckDB statement kind. */
const EXPECTED_TREES: Partial<Record<StatementKind, readonly string[]>> = {
  INSERT: ['InsertStmt'],
  UPDATE: ['UpdateStmt'],
  DELETE: ['DeleteStmt', 'TruncateStmt'],
  MERGE_INTO: ['MergeStmt'],
  CREATE: [
    'CreateStmt',
    'CreateTableAsStmt',
    'ViewStmt',
    'IndexStmt',
    'CreateSchemaStmt',
    'CreateSeqStmt',
    'CompositeTypeStmt',
    'CreateEnumStmt',
    'CreateDomainStmt',
    'SelectStmt',
  ],
  CREATE_FUNC: [],
  DROP: ['DropStmt', 'DeallocateStmt'],
  ALTER: ['AlterTableStmt', 'RenameStmt', 'AlterObjectSchemaStmt', 'AlterSeqStmt', 'CommentStmt'],
  PREPARE: ['PrepareStmt'],
  EXPLAIN: ['ExplainStmt'],
};

// ---- EXPLAIN ------------------------------------------------------------------------------------

const ANALYZE_SPELLINGS: ReadonlySet<string> = new Set(['analyze', 'analyse']);

/**
 * Whether an EXPLAIN runs the statement it explains, read from its header:
 * `EXPLAIN ANALYZE|ANALYSE [VERBOSE]`, or an option list in parentheses
 * naming analyze in any case or quoting (DuckDB ignores an option's value:
 * `(ANALYZE false)` still runs the statement). The one answer the guard,
 * the roles and the read-only check all use. An option list that does not
 * close counts as executing: the answer fails closed.
 */
export function explainExecutes(tokens: readonly Token[]): boolean {
  if (upper(tokens[0]) !== 'EXPLAIN') return false;
  let i = 1;
  for (;;) {
    const t = tokens[i];
    if (t === undefined) return false;
    if (t.kind === 'word' && ANALYZE_SPELLINGS.has(t.text.toLowerCase())) return true;
    if (upper(t) === 'VERBOSE') {
      i++;
      continue;
    }
    if (t.text !== '(') return false;
    let depth = 0;
    for (let j = i; j < tokens.length; j++) {
      const u = tokens[j] as Token;
      if (u.text === '(') depth++;
      else if (u.text === ')' && --depth === 0) return false;
      const name = nameText(tokens, j);
      if (name !== null && ANALYZE_SPELLINGS.has(name.toLowerCase())) return true;
    }
    return true;
  }
}

/**
 * Where the statement an EXPLAIN explains starts, by DuckDB's grammar:
 * `EXPLAIN (options) stmt`, `EXPLAIN ANALYZE|ANALYSE [VERBOSE] stmt` or
 * `EXPLAIN VERBOSE stmt`; -1 when an option list does not close.
 */
function explainBodyStart(tokens: readonly Token[]): number {
  if (tokens[1]?.text === '(') {
    let depth = 0;
    for (let i = 1; i < tokens.length; i++) {
      const t = tokens[i] as Token;
      if (t.text === '(') depth++;
      else if (t.text === ')' && --depth === 0) return i + 1;
    }
    return -1;
  }
  let i = 1;
  const word = (t: Token | undefined): string => (t?.kind === 'word' ? t.text.toLowerCase() : '');
  if (ANALYZE_SPELLINGS.has(word(tokens[i]))) i++;
  if (word(tokens[i]) === 'verbose') i++;
  return i;
}

/** Where the statement a PREPARE holds starts: after `PREPARE name [(types)] AS`, or -1. */
function prepareBodyStart(tokens: readonly Token[]): number {
  let depth = 0;
  for (let i = 2; i < tokens.length; i++) {
    const t = tokens[i] as Token;
    if (t.text === '(') depth++;
    else if (t.text === ')') depth--;
    else if (depth === 0 && upper(t) === 'AS') return i + 1;
  }
  return -1;
}

/** The kind DuckDB gives a statement by its first word (a WITH by the write it leads to, if any). */
function kindOf(tokens: readonly Token[]): StatementKind {
  const first = upper(tokens[0]);
  if (first === 'WITH') {
    let depth = 0;
    for (const t of tokens) {
      if (t.text === '(') depth++;
      else if (t.text === ')') depth--;
      else if (depth === 0) {
        const w = upper(t);
        if (w === 'INSERT' || w === 'UPDATE' || w === 'DELETE') return w;
        if (w === 'MERGE') return 'MERGE_INTO';
      }
    }
    return 'SELECT';
  }
  return FIRST_WORD_KINDS[first] ?? (tokens[0]?.text === '(' ? 'SELECT' : 'INVALID');
}

const FIRST_WORD_KINDS: Readonly<Record<string, StatementKind>> = {
  SELECT: 'SELECT',
  FROM: 'SELECT',
  VALUES: 'SELECT',
  TABLE: 'SELECT',
  PIVOT: 'SELECT',
  UNPIVOT: 'SELECT',
  DESCRIBE: 'SELECT',
  SHOW: 'SELECT',
  SUMMARIZE: 'SELECT',
  INSERT: 'INSERT',
  UPDATE: 'UPDATE',
  DELETE: 'DELETE',
  TRUNCATE: 'DELETE',
  MERGE: 'MERGE_INTO',
  CREATE: 'CREATE',
  DROP: 'DROP',
  ALTER: 'ALTER',
  COMMENT: 'ALTER',
  EXPLAIN: 'EXPLAIN',
  PREPARE: 'PREPARE',
  EXECUTE: 'EXECUTE',
  PRAGMA: 'PRAGMA',
  CALL: 'CALL',
  SET: 'SET',
  RESET: 'SET',
  COPY: 'COPY',
  ATTACH: 'ATTACH',
  DETACH: 'DETACH',
  USE: 'SET',
  CHECKPOINT: 'CALL',
  VACUUM: 'VACUUM',
  ANALYZE: 'ANALYZE',
  EXPORT: 'EXPORT',
  IMPORT: 'EXPORT',
  INSTALL: 'LOAD',
  LOAD: 'LOAD',
};

/** The statement a wrapper (EXPLAIN ANALYZE, PREPARE) runs, as a statement of its own, or null. */
function wrappedStatement(input: ClassifyInput, start: number): ClassifyInput | null {
  const first = input.tokens[start];
  if (start < 0 || first === undefined) return null;
  const offset = first.start;
  const tokens = input.tokens.slice(start).map((t) => ({ ...t, start: t.start - offset, end: t.end - offset }));
  return { text: input.text.slice(offset), tokens, kind: kindOf(tokens) };
}

function uncertainWrapper(operation: string): Decision {
  return refuse('uncertain', operation, '', `cannot ${operation} here: cotwire cannot find the statement it runs`, 'Check the statement after the keyword.');
}

/** Both decisions allow: the catalog questions of both, and the ledger either appends to. */
function combine(a: Extract<Decision, { allow: true }>, b: Decision): Decision {
  if (!b.allow) return b;
  return { allow: true, checks: [...a.checks, ...b.checks], appendsTo: a.appendsTo ?? b.appendsTo ?? null };
}

// ---- Characters the lexer cannot vouch for -------------------------------------------------------

/** Separators, controls and invisible formatting characters, wherever DuckDB would read them as code. */
const UNPROVABLE = /[\p{Zs}\p{Zl}\p{Zp}\p{Cc}\p{Cf}]/u;

/**
 * A statement that may write must be read by cotwire exactly as DuckDB
 * reads it. After DuckDB's own Unicode-space replacement the lexer's
 * boundaries are DuckDB's, but a separator-like character left inside a
 * word (where the replacement does not reach) or a trailing run of
 * non-ASCII characters (which DuckDB drops when it re-parses a statement
 * it could not parse) is where a reading could still differ: such a
 * statement is refused, naming the character and where it is.
 */
function unprovableCharacter(tokens: readonly Token[]): Decision | null {
  for (const t of tokens) {
    if (t.kind === 'string' || t.kind === 'quoted') continue;
    const m = UNPROVABLE.exec(t.text);
    if (m === null) continue;
    const c = m[0].codePointAt(0) as number;
    return unprovable(
      c,
      t.start + m.index,
      'a separator or control character outside quotes',
      'Use plain ASCII spaces between words, and quote any name that holds such a character.',
    );
  }
  const last = tokens[tokens.length - 1];
  if (last?.kind === 'word' && (last.text.codePointAt(last.text.length - 1) ?? 0) >= 0x80) {
    const c = last.text.codePointAt(last.text.length - 1) as number;
    return unprovable(
      c,
      last.end - 1,
      'a non-ASCII character at the end of the statement, which DuckDB may drop',
      `Quote the name: "${last.text.replaceAll('"', '""')}".`,
    );
  }
  return null;
}

function unprovable(c: number, at: number, what: string, hint: string): Decision {
  const code = `U+${c.toString(16).toUpperCase().padStart(4, '0')}`;
  return refuse('uncertain', 'run this statement', code, `cannot run this statement: it holds ${code}, ${what}, at position ${at + 1}`, hint);
}

// ---- DuckDB-only forms --------------------------------------------------------------------------

const upper = (t: Token | undefined): string => (t?.kind === 'word' ? t.text.toUpperCase() : '');

/** A dotted name starting at token i: its parts and the index after it. */
function dottedName(tokens: readonly Token[], i: number): { parts: string[]; next: number } | null {
  // DuckDB takes a string literal as a name part: `CREATE MACRO 'lower'(x) ...`.
  const first = nameText(tokens, i);
  if (first === null) return null;
  const parts = [first];
  let j = i + 1;
  if (tokens[i]?.text.startsWith('U&') && upper(tokens[j]) === 'UESCAPE') j += 2;
  while (tokens[j]?.text === '.') {
    const part = nameText(tokens, j + 1);
    if (part === null) return null;
    parts.push(part);
    j += 2;
  }
  return { parts, next: j };
}

const RESERVED_SCHEMAS = new Set(['pg_catalog', 'information_schema', 'system', 'temp']);

const CREATE_MODIFIERS = new Set(['OR', 'REPLACE', 'TEMP', 'TEMPORARY', 'PERSISTENT', 'GLOBAL', 'LOCAL', 'UNLOGGED', 'UNIQUE']);

/**
 * The header of a CREATE statement in DuckDB's grammar: CREATE [OR REPLACE]
 * [TEMP] <object> [IF NOT EXISTS] <name>. DuckDB-only statements (CREATE OR
 * REPLACE TABLE, CREATE MACRO) are decided from it.
 */
function createHeader(tokens: readonly Token[]): { replace: boolean; temp: boolean; object: string; name: string[] } | null {
  let i = 1;
  let replace = false;
  let temp = false;
  while (CREATE_MODIFIERS.has(upper(tokens[i]))) {
    const w = upper(tokens[i]);
    if (w === 'REPLACE') replace = true;
    if (w === 'TEMP' || w === 'TEMPORARY') temp = true;
    i++;
  }
  let object = upper(tokens[i]);
  i++;
  if (object === 'MACRO' && upper(tokens[i]) === 'TABLE') i++;
  if (object === 'MATERIALIZED') {
    object = 'VIEW';
    i++;
  }
  if (upper(tokens[i]) === 'IF' && upper(tokens[i + 1]) === 'NOT' && upper(tokens[i + 2]) === 'EXISTS') i += 3;
  const name = dottedName(tokens, i);
  if (object === '' || name === null) return null;
  return { replace, temp, object, name: name.parts };
}

/** CREATE TABLE ... AS: an AS at parenthesis depth 0 after the table name. */
function isCreateTableAs(tokens: readonly Token[], from: number): boolean {
  let depth = 0;
  for (let i = from; i < tokens.length; i++) {
    const t = tokens[i] as Token;
    if (t.text === '(') depth++;
    else if (t.text === ')') depth--;
    else if (depth === 0 && upper(t) === 'AS') return true;
  }
  return false;
}

/**
 * CREATE statements are decided from their header, which is the same in
 * both grammars: the object created is named right there, and creating a
 * view, type, macro or table cannot write an existing table. Only CREATE
 * INDEX (whose table comes later) goes on to the PostgreSQL parser.
 */
function classifyCreate(input: ClassifyInput, policy: GuardPolicy): Decision | null {
  const header = createHeader(input.tokens);
  if (header === null) {
    // A function whose name cannot be read could replace a built-in one for every connection.
    if (input.kind === 'CREATE_FUNC' || input.tokens.slice(1, 6).some((t) => upper(t) === 'MACRO' || upper(t) === 'FUNCTION')) {
      return refuse(
        'uncertain',
        'CREATE MACRO',
        '',
        'cannot create this macro: cotwire cannot read its name with certainty',
        'Name the macro with a plain identifier.',
      );
    }
    return null;
  }
  const last = header.name[header.name.length - 1] ?? '';
  const full = header.name.join('.');
  const isProtected = policy.names.isProtected(last);
  switch (header.object) {
    case 'SECRET':
      return hostRefusal('create a secret', full);
    case 'MACRO':
    case 'FUNCTION':
      // cot_ names are cotwire's own SQL functions (cot_verify, cot_replay ...), present and future.
      if (policy.reservedFunctions.has(last.toLowerCase()) || isProtected || last.toLowerCase().startsWith('cot_')) {
        return refuse(
          'shadow',
          `CREATE ${header.object}`,
          full,
          `cannot create ${header.object.toLowerCase()} "${full}": it would replace a built-in function for every connection`,
          'Choose a name that no built-in or cotwire function uses.',
        );
      }
      return ALLOW;
    case 'TABLE': {
      if (!isProtected) return ALLOW;
      if (header.replace) return ledgerRefusal('CREATE OR REPLACE', full);
      if (header.temp) return shadowRefusal('temporary table', full);
      if (isCreateTableAs(input.tokens, 2)) {
        return refuse(
          'ledger',
          'CREATE TABLE AS',
          full,
          `cannot create ledger table "${full}" from a query: ledger rows are appended one INSERT at a time by the server`,
          'CREATE TABLE the ledger, then INSERT INTO it ... SELECT.',
        );
      }
      return {
        allow: true,
        checks: [{ kind: 'ledger-name-elsewhere', name: last, schema: header.name.length > 1 ? (header.name[header.name.length - 2] as string) : null }],
      };
    }
    case 'VIEW':
    case 'SEQUENCE':
    case 'TYPE':
      return isProtected ? shadowRefusal(header.object.toLowerCase(), full) : ALLOW;
    case 'SCHEMA':
      // A user schema named like a catalog schema would change what every
      // client's catalog queries see.
      if (RESERVED_SCHEMAS.has(last.toLowerCase())) {
        return refuse(
          'shadow',
          'CREATE SCHEMA',
          full,
          `cannot create schema "${full}": the name is reserved for the system catalog`,
          'Choose another schema name.',
        );
      }
      return header.replace ? { allow: true, checks: [{ kind: 'schema-holds-ledger', schema: last, operation: 'CREATE OR REPLACE SCHEMA' }] } : ALLOW;
    default:
      return null;
  }
}

/**
 * INSERT in DuckDB's own syntax (list and struct literals, BY NAME, OR
 * REPLACE): its target is named in the header, `INSERT [OR ...] INTO
 * <name>`. Into a ledger, only a plain append passes: any OR REPLACE, OR
 * IGNORE or ON CONFLICT is refused.
 */
function classifyDuckDBInsert(tokens: readonly Token[], policy: GuardPolicy): Decision | null {
  let i = 1;
  let modifier = '';
  if (upper(tokens[i]) === 'OR') {
    modifier = upper(tokens[i + 1]);
    i += 2;
  }
  if (upper(tokens[i]) !== 'INTO') return null;
  const name = dottedName(tokens, i + 1);
  if (name === null) return null;
  const last = name.parts[name.parts.length - 1] ?? '';
  const full = name.parts.join('.');
  if (!policy.names.isProtected(last)) {
    // The target is ordinary; ledgers named later are only read.
    return ALLOW;
  }
  if (policy.names.isServerOnly(last)) return serverOnlyRefusal(full);
  if (modifier !== '') return ledgerRefusal(`INSERT OR ${modifier} into`, full);
  let depth = 0;
  for (let j = name.next; j < tokens.length; j++) {
    const t = tokens[j] as Token;
    if (t.text === '(') depth++;
    else if (t.text === ')') depth--;
    else if (depth === 0 && upper(t) === 'ON' && upper(tokens[j + 1]) === 'CONFLICT') return ledgerRefusal('INSERT ... ON CONFLICT into', full);
  }
  return { allow: true, checks: [], appendsTo: full };
}

function pragmaName(tokens: readonly Token[]): string {
  return (identifierText(tokens, 1) ?? '').toLowerCase();
}

/**
 * The SQL-syntax functions whose argument list holds a FROM of its own
 * (`extract(year FROM '2024-05-17'::date)`, `substring(s FROM 2)`): the
 * grammar reads what follows as an expression, never as a table.
 */
const FROM_ARGUMENT_FUNCTIONS = new Set(['EXTRACT', 'SUBSTRING', 'TRIM', 'OVERLAY']);

/** Whether the FROM at token i is in the argument list of one of those functions, directly (not in a query inside it). */
function isArgumentFrom(tokens: readonly Token[], i: number): boolean {
  let depth = 0;
  for (let j = i - 1; j >= 0; j--) {
    const t = tokens[j] as Token;
    if (t.text === ')') depth++;
    else if (t.text === '(') {
      if (depth === 0) {
        const before = tokens[j - 1];
        return before?.kind === 'word' && FROM_ARGUMENT_FUNCTIONS.has(before.text.toUpperCase());
      }
      depth--;
    }
  }
  return false;
}

/** Words that follow FROM/JOIN/USING and take a string as a file in DuckDB (`FROM 'data.csv'`). */
function readsFileLiteral(tokens: readonly Token[]): boolean {
  for (let i = 0; i < tokens.length - 1; i++) {
    const w = upper(tokens[i]);
    if ((w === 'FROM' || w === 'JOIN') && tokens[i + 1]?.kind === 'string' && !(w === 'FROM' && isArgumentFrom(tokens, i))) return true;
  }
  return false;
}

function hostFunction(tokens: readonly Token[]): string | null {
  for (let i = 0; i < tokens.length - 1; i++) {
    const t = tokens[i] as Token;
    if ((t.kind === 'word' || t.kind === 'quoted') && tokens[i + 1]?.text === '(') {
      const name = identifierText(tokens, i);
      if (name !== null && HOST_FUNCTIONS.has(name.toLowerCase())) return name.toLowerCase();
    }
  }
  return null;
}

/** The tokens between the parenthesis at `open` and the one that closes it, or null when it is not closed. */
function argumentTokens(tokens: readonly Token[], open: number): Token[] | null {
  let depth = 0;
  for (let j = open; j < tokens.length; j++) {
    const text = tokens[j]?.text;
    if (text === '(') depth++;
    else if (text === ')' && --depth === 0) return tokens.slice(open + 1, j);
  }
  return null;
}

/** The strings of an argument list made of string constants only (a list of them included), or null when anything else is in it. */
function constantStrings(args: readonly Token[]): string[] | null {
  const out: string[] = [];
  for (let j = 0; j < args.length; j++) {
    const t = args[j] as Token;
    if (t.kind === 'string') out.push(stringText(args, j) ?? '');
    else if (t.text === ',' || t.text === '[' || t.text === ']') continue;
    else if (t.kind === 'word' && /^(true|false)$/i.test(t.text)) continue;
    else return null;
  }
  return out.length === 0 ? null : out;
}

/**
 * Where the statement would show where the server keeps its files: a relation or function of
 * HOST_INFORMATION however it is spelt, a path setting through current_setting(), or SQL given to
 * query()/query_table() as a value the guard cannot read (a computed string, a parameter); a constant
 * given to them is judged as the statement it names. Null when none.
 */
function hostInformation(tokens: readonly Token[], depth = 0): Decision | null {
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i] as Token;
    if (t.kind !== 'word' && t.kind !== 'quoted') continue;
    const name = identifierText(tokens, i)?.toLowerCase();
    if (name === undefined) continue;
    if (HOST_INFORMATION.has(name)) return hostPlaceRefusal(`read ${name}`, name);
    if (tokens[i + 1]?.text !== '(') continue;
    if (name !== 'current_setting' && !DYNAMIC_SQL_FUNCTIONS.has(name)) continue;
    const args = argumentTokens(tokens, i + 1);
    const strings = args === null ? null : constantStrings(args);
    if (name === 'json_execute_serialized_sql' || strings === null || depth > 8) {
      return refuse(
        'host',
        `call ${name}()`,
        name,
        `cannot call ${name}() with SQL or a name computed when it runs: the guard judges only what it can read in the statement`,
        'Write the statement, or the table name, as a constant.',
      );
    }
    if (name === 'current_setting') {
      if (strings.some((n) => HOST_PATH_SETTINGS.has(n.trim().toLowerCase())))
        return hostPlaceRefusal(`read the setting ${strings[0] ?? ''}`, 'current_setting');
      continue;
    }
    for (const text of strings) {
      // query() runs a statement, query_table() reads relations by name: each is judged as it would be written out.
      const inner = name === 'query' ? tokenize(text) : [{ kind: 'quoted', text: `"${text.replaceAll('"', '""')}"`, start: 0, end: 0 } as unknown as Token];
      const found = hostInformation(inner, depth + 1) ?? (name === 'query' ? preclassify(inner) : null);
      if (found !== null) return found;
    }
  }
  return null;
}

/**
 * Decisions that need no engine at all, taken before DuckDB prepares the
 * statement: DuckDB binds a statement while preparing it, and binding a
 * file reader or a COPY already touches the host (where the locked-down
 * engine refuses it, without saying why). Null when the statement needs
 * the full classification.
 */
export function preclassify(tokens: readonly Token[]): Decision | null {
  const fn = hostFunction(tokens);
  if (fn !== null) return hostRefusal(`call ${fn}()`, fn);
  const information = hostInformation(tokens);
  if (information !== null) return information;
  const w0 = upper(tokens[0]);
  const w1 = upper(tokens[1]);
  switch (w0) {
    case 'COPY':
      return hostRefusal(w1 === 'FROM' && upper(tokens[2]) === 'DATABASE' ? 'COPY FROM DATABASE' : 'COPY to or from a file', '');
    case 'ATTACH':
      return hostRefusal('ATTACH a database', '');
    case 'INSTALL':
    case 'LOAD':
      return hostRefusal('install or load extensions', '');
    case 'FORCE':
      return w1 === 'INSTALL' ? hostRefusal('install or load extensions', '') : null;
    case 'EXPORT':
    case 'IMPORT':
      return w1 === 'DATABASE' ? hostRefusal(`${w0} DATABASE`, '') : null;
    default:
      return readsFileLiteral(tokens) ? hostRefusal('read a file', 'FROM') : null;
  }
}

/**
 * The guard's decision for one statement. It is a pure function of the
 * statement text and DuckDB's statement kind, so it can be cached by text;
 * questions about the catalog are returned as checks to run each time.
 */
export function classify(input: ClassifyInput, policy: GuardPolicy): Decision {
  const { tokens } = input;
  // Host access first: it is refused whatever else the statement does.
  const fn = hostFunction(tokens);
  if (fn !== null) return hostRefusal(`call ${fn}()`, fn);
  // DuckDB rewrites a PRAGMA that returns rows into a SELECT, so the kind
  // alone would let any such pragma through.
  const kind: StatementKind = upper(tokens[0]) === 'PRAGMA' ? 'PRAGMA' : input.kind;
  const executes = kind === 'EXPLAIN' && explainExecutes(tokens);
  if (kind !== 'SELECT' && kind !== 'RELATION' && (kind !== 'EXPLAIN' || executes)) {
    const character = unprovableCharacter(tokens);
    if (character !== null) return character;
  }
  switch (kind) {
    case 'SELECT':
    case 'RELATION':
      return readsFileLiteral(tokens) ? hostRefusal('read a file', 'FROM') : ALLOW;
    case 'EXPLAIN': {
      if (!executes) return ALLOW;
      // EXPLAIN ANALYZE runs its statement: that statement is decided as if it came alone,
      // and so must also pass the PostgreSQL reading of the whole.
      const inner = wrappedStatement(input, explainBodyStart(tokens));
      if (inner === null) return uncertainWrapper('EXPLAIN ANALYZE');
      const alone = classify(inner, policy);
      return alone.allow ? combine(alone, classifyWrite(input, policy, 'EXPLAIN ANALYZE')) : alone;
    }
    case 'PREPARE': {
      // EXECUTE runs what PREPARE holds: it is decided now, as if it came alone.
      const inner = wrappedStatement(input, prepareBodyStart(tokens));
      if (inner === null) return uncertainWrapper('PREPARE');
      const alone = classify(inner, policy);
      return alone.allow ? combine(alone, classifyWrite(input, policy, kind)) : alone;
    }
    case 'INSERT':
    case 'UPDATE':
    case 'DELETE':
    case 'MERGE_INTO':
    case 'ALTER':
    case 'DROP':
      return classifyWrite(input, policy, kind);
    case 'CREATE':
    case 'CREATE_FUNC':
      return classifyCreate(input, policy) ?? classifyWrite(input, policy, 'CREATE');
    case 'EXECUTE':
    case 'ANALYZE':
    case 'TRANSACTION':
      return ALLOW;
    case 'PRAGMA': {
      const name = pragmaName(tokens);
      const isAssignment = tokens.some((t) => t.text === '=');
      if (READ_ONLY_PRAGMAS.has(name) && !isAssignment) return ALLOW;
      return refuse(
        'setting',
        'PRAGMA',
        name,
        `cannot run PRAGMA ${name}: clients may run only read-only pragmas`,
        `Allowed: ${[...READ_ONLY_PRAGMAS].join(', ')}.`,
      );
    }
    case 'CALL': {
      const first = upper(tokens[0]);
      if (first === 'CHECKPOINT' || first === 'FORCE') {
        return refuse('setting', 'CHECKPOINT', '', 'cannot CHECKPOINT: the server checkpoints the database itself', 'Nothing to do: commits are durable.');
      }
      const name = (identifierText(tokens, 1) ?? '').toLowerCase();
      if (READ_ONLY_CALLS.has(name)) return ALLOW;
      return refuse(
        'setting',
        'CALL',
        name,
        `cannot CALL ${name}: clients may call only read-only catalog functions`,
        `Allowed: ${[...READ_ONLY_CALLS].join(', ')}.`,
      );
    }
    case 'SET':
    case 'VARIABLE_SET': {
      if (upper(tokens[0]) === 'SET' && upper(tokens[1]) === 'VARIABLE') return ALLOW;
      if (upper(tokens[0]) === 'USE') {
        return refuse('setting', 'USE', '', 'cannot USE: cotwire resolves names through search_path', 'Use SET search_path TO <schema>.');
      }
      if (upper(tokens[0]) === 'RESET' && upper(tokens[1]) === 'VARIABLE') return ALLOW;
      return refuse(
        'setting',
        'SET',
        '',
        'cannot change engine settings: they are shared by every connection',
        'Per-connection settings are the PostgreSQL parameters listed by SHOW ALL, and SET VARIABLE.',
      );
    }
    case 'COPY':
      return hostRefusal('COPY to or from a file', '');
    case 'COPY_DATABASE':
      return hostRefusal('COPY FROM DATABASE', '');
    case 'EXPORT':
      return hostRefusal(upper(tokens[0]) === 'IMPORT' ? 'IMPORT DATABASE' : 'EXPORT DATABASE', '');
    case 'ATTACH':
      return hostRefusal('ATTACH a database', '');
    case 'DETACH':
      return refuse('ledger', 'DETACH', '', 'cannot DETACH: the database holds the ledgers', LEDGER_HINT);
    case 'LOAD':
    case 'EXTENSION':
    case 'UPDATE_EXTENSIONS':
      return hostRefusal('install or load extensions', '');
    case 'VACUUM':
      // DuckDB types ANALYZE as a VACUUM; it only refreshes statistics.
      if (upper(tokens[0]) === 'ANALYZE') return ALLOW;
      return refuse('setting', 'VACUUM', '', 'cannot VACUUM: the server maintains the database itself', 'Nothing to do.');
    default:
      return refuse(
        'unsupported',
        kind,
        '',
        `cannot run this ${kind} statement: cotwire does not allow it for clients`,
        'See the security model in the README.',
      );
  }
}

/**
 * Statements that may write. When they name no ledger at all, they cannot
 * reach one: DuckDB writes only to tables it is given by name (views and
 * macros cannot be written through, and dynamic SQL runs only SELECTs).
 * When they do name one, PostgreSQL's grammar must say exactly where it
 * stands; if it cannot parse the statement, the guard refuses (fail closed).
 */
function classifyWrite(input: ClassifyInput, policy: GuardPolicy, operation: string): Decision {
  const tree = parsePostgres(input);
  const mentioned = policy.names.mentions(input.tokens);
  if (tree === null && input.kind === 'INSERT') {
    const insert = classifyDuckDBInsert(input.tokens, policy);
    if (insert !== null) return insert;
  }
  if (tree !== null) {
    // Both grammars must agree on what the statement is before the tree is trusted.
    const type = unwrap(tree)?.[0] ?? '';
    if (EXPECTED_TREES[input.kind]?.includes(type) === true) return classifyTree(tree, policy);
    if (mentioned.length > 0) return uncertain(operation, mentioned);
  }
  if (mentioned.length > 0) return uncertain(operation === 'CREATE' ? 'CREATE' : operation.replace('_', ' '), mentioned);
  // DuckDB-only statements on ordinary objects; schema-level ones still need the catalog.
  const w0 = upper(input.tokens[0]);
  const w1 = upper(input.tokens[1]);
  if ((w0 === 'DROP' || w0 === 'ALTER') && w1 === 'SCHEMA') {
    const n = dottedName(input.tokens, upper(input.tokens[2]) === 'IF' ? 4 : 2);
    const schema = n?.parts[n.parts.length - 1] ?? '';
    return { allow: true, checks: [{ kind: 'schema-holds-ledger', schema, operation: `${w0} SCHEMA` }] };
  }
  if (w0 === 'CREATE' && upper(input.tokens[3]) === 'SCHEMA' && upper(input.tokens[2]) === 'REPLACE') {
    const n = dottedName(input.tokens, 4);
    return { allow: true, checks: [{ kind: 'schema-holds-ledger', schema: n?.parts[n.parts.length - 1] ?? '', operation: 'CREATE OR REPLACE SCHEMA' }] };
  }
  return ALLOW;
}
