import { COMPAT_CATALOG, type TargetColumns } from '../catalog/compat.js';
import { schemaNamesSql } from '../catalog/snapshot.js';
import { HIDDEN_DB, P } from '../catalog/catalog-sql.js';
import { type KeyDdl, keyDdlOf, tableWriteOf, updateAlias, updateParts } from '../catalog/foreign-keys.js';
import { keepingKeys, keptKeyNamed } from './foreign-keys.js';
import { type KeyWork, keyWork } from './key-registry.js';
import { identifierText, quoteIdentifier } from '../../../sql/identifiers.js';
import { translateAddConstraint, translateColumnAlter, type ColumnAlter, type ConstraintAddition } from '../catalog/alter-table.js';
import { declaredChanges } from '../catalog/declared.js';
import { catalogRelationOid } from '../catalog/pg-catalog.js';
import { translateSerial } from '../catalog/serial.js';
import { translateDrop } from '../catalog/drop.js';
import { advisoryWaits } from '../../../sql/advisory.js';
import { searchArgs } from '../../../sql/search-args.js';
import type { PgNode } from '../../../sql/pg-tree.js';
import { ParsedStatement } from '../../../sql/parsed.js';
import type { EngineCursor, EngineStatement, StatementKind, WireParam } from '../../../engine/port.js';
import { PgError } from '../../../errors/pg-error.js';
import { SqlState } from '../../../errors/sqlstate.js';
import type { FieldDescription } from '../../../protocol/messages.js';
import { ArrayOidOf, TypeOid } from '../../../protocol/type-oids.js';
import type { StatementSource } from '../../../session/handler-port.js';
import { hasComputedNames, nameArrayColumns, postgresColumnNames } from '../../../sql/column-names.js';
import { parseCopyFromStdin, parseCopyToStdout, type CopyToStdout } from '../../../sql/copy.js';
import { withTargetColumns } from '../../../sql/pg-insert.js';
import { lexStatement, splitStatements, type StatementText, type Token } from '../../../sql/lexer.js';
import { recognizeCommand } from './commands.js';
import { appendsVisible, type HandlerContext, type StatementHost, statementRows } from './context.js';
import type { LedgerAppends } from './ledger-append.js';
import { createdLedgerName } from './ledger-create.js';
import { ledgerMacroGroups, type TenantPredicate } from './ledger-macros.js';
import { qualifiedName, type LedgerTable } from '../../../ledger/chain/schema.js';
import { AnsweredStatement, answerable, CatalogStatement, catalogAnswers } from './catalog-mode.js';
import { HandledStatement } from './table-create.js';
import { EstimatesHidden, ServedChainVerify } from './ledger-reads.js';
import { recognizeChainVerify } from '../../../sql/verify-call.js';
import { recognizeStepsRead, ServedStepsRead } from './steps-reads.js';
import { describeSources } from './result-sources.js';
import { erasureFields, erasureParamTypes } from './erasure.js';
import { type ErasureCall, ErasureCallError, erasureCall } from '../../../sql/erasure-call.js';

/** DuckDB's integer and float types, by PostgreSQL's names: text written into such a column is checked as PostgreSQL reads it. */
const NUMBER_INPUTS: Readonly<Record<string, NonNullable<TargetColumns[number]['numberInput']>>> = {
  SMALLINT: 'smallint',
  INTEGER: 'integer',
  BIGINT: 'bigint',
  FLOAT: 'real',
  DOUBLE: 'double precision',
};
import { clientError, READ_KINDS, SAME_POSITION, Statement, type EngineText, LedgerReadCheck } from './plan.js';

/** The erasure call a statement is; one that calls an erasure function in another shape is refused. */
function erasureOf(statement: ParsedStatement): ErasureCall | null {
  try {
    return erasureCall(statement);
  } catch (err) {
    if (err instanceof ErasureCallError) throw new PgError(SqlState.FeatureNotSupported, err.message);
    throw err;
  }
}

/** Rewritten statements that read the connection's settings through the catalog. */
const READS_SETTINGS = /\.(pg_settings|current_setting)\b/;

const textField = (name: string): FieldDescription => ({
  name,
  tableOid: 0,
  columnAttr: 0,
  typeOid: TypeOid.text,
  typeSize: -1,
  typeModifier: -1,
  format: 0,
});

/** name[]: the text form of a text[], under PostgreSQL's type for catalog names. */
const NAME_ARRAY_OID = 1003;

/** PostgreSQL's names for computed columns, when DuckDB's differ. */
function pgNames(statement: ParsedStatement, engineNames: readonly string[]): readonly (string | null)[] | null {
  return hasComputedNames(engineNames) ? postgresColumnNames(statement, engineNames.length) : null;
}

/** A text's one parsed form: `known`'s when the text is the same, else a new one. */
function parsedText(text: string, tokens: readonly Token[], known: ParsedStatement<StatementKind>): ParsedStatement<StatementKind> {
  return text === known.text ? known : new ParsedStatement<StatementKind>(text, tokens);
}

/** Types whose text form DuckDB casts back to the same value (a RETURNING row goes through it into a temporary table). */
const TEXT_SAFE_TYPES: ReadonlySet<number> = new Set([16, 20, 21, 23, 25, 26, 114, 700, 701, 1042, 1043, 1082, 1083, 1114, 1184, 1700, 2950, 3802]);

/** The relation names (lower case) a tree reads or writes, at any depth. */
function relationNames(node: unknown, out: string[] = []): string[] {
  if (Array.isArray(node)) {
    for (const n of node) relationNames(n, out);
  } else if (node !== null && typeof node === 'object') {
    const rv = (node as PgNode).RangeVar as PgNode | undefined;
    if (rv !== undefined && typeof rv.relname === 'string') out.push(rv.relname.toLowerCase());
    for (const v of Object.values(node)) relationNames(v, out);
  }
  return out;
}

/** Where a WITH query's body is in the text (inside its parentheses); null when the WITH list cannot be read. */
function withEntrySpan(tokens: readonly Token[], name: string): { readonly body: readonly [number, number] } | null {
  const word = (k: number): string => (tokens[k]?.kind === 'word' ? (tokens[k] as Token).text.toLowerCase() : '');
  const matching = (open: number): number => {
    let depth = 0;
    for (let k = open; k < tokens.length; k++) {
      if (tokens[k]?.text === '(') depth++;
      else if (tokens[k]?.text === ')' && --depth === 0) return k;
    }
    return -1;
  };
  if (word(0) !== 'with') return null;
  const entries: { body: readonly [number, number]; name: string }[] = [];
  let i = 1;
  for (;;) {
    const head = tokens[i];
    if (head === undefined || (head.kind !== 'word' && head.kind !== 'quoted')) return null;
    let j = i + 1;
    if (tokens[j]?.text === '(') j = matching(j) + 1;
    if (j === 0 || word(j) !== 'as') return null;
    j++;
    if (word(j) === 'not' && word(j + 1) === 'materialized') j += 2;
    else if (word(j) === 'materialized') j++;
    const open = tokens[j];
    const k = open?.text === '(' ? matching(j) : -1;
    const close = tokens[k];
    if (open === undefined || close === undefined) return null;
    const entryName = head.kind === 'quoted' ? head.text.slice(1, -1).replaceAll('""', '"') : head.text.toLowerCase();
    entries.push({ body: [open.end, close.start], name: entryName });
    i = k + 1;
    if (tokens[i]?.text !== ',') break;
    i++;
  }
  const entry = entries.find((e) => e.name === name);
  return tokens[i] === undefined || entry === undefined ? null : { body: entry.body };
}

/**
 * The engine statement of a statement with a data-modifying WITH query
 * (Planner.dataModifyingWith): at Execute, in one transaction, the
 * data-modifying statement runs, its rows fill the temporary table, the
 * statement runs on it (its result read whole) and the table is dropped.
 */
class WithDmlStatement implements EngineStatement {
  readonly paramTypes: readonly number[] = [];

  constructor(
    private readonly ctx: HandlerContext,
    private readonly inner: EngineStatement,
    private readonly outer: EngineStatement,
    private readonly create: string,
    private readonly drop: string,
    private readonly table: string,
    private readonly width: number,
    /** What the data-modifying statement does to the foreign keys' tables. */
    private readonly keys: KeyWork,
  ) {}

  get kind(): StatementKind {
    return this.outer.kind;
  }

  get columns(): EngineStatement['columns'] {
    return this.outer.columns;
  }

  bind(params: readonly WireParam[]): void {
    this.outer.bind(params);
  }

  async execute(): Promise<EngineCursor> {
    const { ctx } = this;
    return ctx.tx.atomically(async () => {
      ctx.tx.wrote();
      this.inner.bind([]);
      const cursor = await keepingKeys(ctx, this.keys, () => this.inner.execute({ materialize: true }));
      const rows: (string | null)[][] = [];
      try {
        const sink = {
          row: (cells: readonly (string | Uint8Array | null)[]) =>
            rows.push(cells.map((c) => (c === null ? null : typeof c === 'string' ? c : Buffer.from(c).toString('utf8')))),
          flushIfFull: async () => undefined,
        };
        await cursor.fetch(0, new Array<0>(this.width).fill(0), sink, { timeZone: ctx.settings.timeZone });
      } finally {
        cursor.close();
      }
      await ctx.engine.run(this.create);
      try {
        for (let i = 0; i < rows.length; i += 100) {
          const batch = rows.slice(i, i + 100);
          const values = batch.map((_, r) => `(${Array.from({ length: this.width }, (_x, c) => `$${r * this.width + c + 1}`).join(', ')})`);
          await ctx.engine.query(`INSERT INTO temp.main.${this.table} VALUES ${values.join(', ')}`, batch.flat());
        }
        this.outer.bind([]);
        return await this.outer.execute({ materialize: true });
      } finally {
        await ctx.engine.run(this.drop).catch(() => undefined);
      }
    });
  }

  close(): void {
    this.inner.close();
    this.outer.close();
  }
}

/**
 * `WITH d AS (DELETE ... RETURNING ...) <statement>` in a shape that
 * Planner.dataModifyingWith does not take: DuckDB's WITH takes queries only.
 * A statement that does not prepare for that reason is refused as
 * unsupported (0A000), not as a syntax error; the guard has had its say
 * first, so one on a ledger table is refused as before (42501).
 */
function dataModifyingCte(statement: ParsedStatement): PgError | null {
  const tree = statement.tree;
  const stmt = tree === null ? undefined : (Object.values(tree)[0] as PgNode | undefined);
  const ctes = ((stmt?.withClause as PgNode | undefined)?.ctes as PgNode[] | undefined) ?? [];
  const modifying = ctes.find((c) => {
    const query = (c.CommonTableExpr as PgNode | undefined)?.ctequery as PgNode | undefined;
    return query?.InsertStmt !== undefined || query?.UpdateStmt !== undefined || query?.DeleteStmt !== undefined;
  });
  if (modifying === undefined) return null;
  const name = String((modifying.CommonTableExpr as PgNode).ctename);
  return new PgError(SqlState.FeatureNotSupported, `data-modifying statements in WITH are not supported (WITH ${name} AS (...))`, {
    hint: 'Run the INSERT, UPDATE or DELETE ... RETURNING first, then the statement that reads its rows, in one transaction.',
  });
}

/**
 * `PREPARE p(int, text) AS query`: DuckDB's PREPARE takes no argument types.
 * Each `$n` of the query becomes `CAST($n AS type)`, its declared type, as
 * PostgreSQL types the parameter (EXECUTE p('2', 3) gives an int and a
 * text); the type list goes. Any other statement is returned as it is.
 */
export function typedPrepare(statement: StatementText): StatementText {
  const tokens = statement.tokens;
  if (tokens[0]?.text.toLowerCase() !== 'prepare' || tokens[2]?.text !== '(') return statement;
  const types: string[] = [];
  let depth = 0;
  let from = 3;
  let i = 3;
  for (; i < tokens.length; i++) {
    const t = tokens[i] as Token;
    if (t.text === '(' || t.text === '[') depth++;
    else if ((t.text === ')' || t.text === ']') && depth > 0) depth--;
    else if (depth === 0 && (t.text === ',' || t.text === ')')) {
      const first = tokens[from];
      const last = tokens[i - 1];
      if (first === undefined || last === undefined || i === from) return statement;
      types.push(statement.text.slice(first.start, last.end));
      from = i + 1;
      if (t.text === ')') break;
    }
  }
  const as = tokens[i + 1];
  if (i >= tokens.length || as?.text.toLowerCase() !== 'as') return statement;
  let text = `${statement.text.slice(0, (tokens[1] as Token).end)} `;
  let at = as.start;
  for (const t of tokens.slice(i + 2)) {
    const type = t.kind === 'param' ? types[Number(t.text.slice(1)) - 1] : undefined;
    if (type === undefined) continue;
    text += `${statement.text.slice(at, t.start)}CAST(${t.text} AS ${type})`;
    at = t.end;
  }
  text += statement.text.slice(at);
  return { ...statement, ...lexStatement(text) };
}

/**
 * `CREATE INDEX ... WHERE predicate`: DuckDB has no partial indexes. A
 * non-unique one is created as a full index on the same columns (it answers
 * the same queries; the catalog shows it without its predicate). A partial
 * UNIQUE index becomes a unique index on each column's value where the
 * predicate holds, and NULL elsewhere (`(CASE WHEN p THEN email END)`):
 * NULLs never collide, so it refuses exactly the rows PostgreSQL's does,
 * in the statement and between transactions alike.
 */
export function partialIndex(statement: StatementText, sent: ParsedStatement): StatementText {
  // Only a CREATE ... INDEX can be one: the tree is not made for other statements here (a batch INSERT's costs 2 ms).
  const words = sent.tokens.filter((t) => t.kind === 'word').slice(0, 4);
  if (!/^create$/i.test(words[0]?.text ?? '') || !words.some((t) => /^index$/i.test(t.text))) return statement;
  const index = sent.tree?.IndexStmt as PgNode | undefined;
  if (index?.whereClause === undefined) return statement;
  let depth = 0;
  const tokens = statement.tokens;
  const where = tokens.findIndex((t) => {
    if (t.text === '(') depth++;
    else if (t.text === ')') depth--;
    return depth === 0 && t.kind === 'word' && t.text.toLowerCase() === 'where';
  });
  if (where < 0) return statement;
  const before = statement.text.slice(0, (tokens[where] as Token).start).trimEnd();
  if (index.unique !== true) return { ...statement, ...lexStatement(before) };
  let last = tokens.length - 1;
  while (tokens[last]?.kind === 'semicolon') last--;
  const predicate = statement.text.slice((tokens[where + 1] as Token).start, (tokens[last] as Token).end);
  // The column list: the last parenthesised list before WHERE (after ON t [USING method]).
  const close = tokens.slice(0, where).findLastIndex((t) => t.text === ')');
  let open = close;
  for (let d = 0; open >= 0; open--) {
    const t = tokens[open] as Token;
    if (t.text === ')') d++;
    else if (t.text === '(' && --d === 0) break;
  }
  if (open < 0 || close < 0) return statement;
  const items: string[] = [];
  let from = open + 1;
  depth = 0;
  for (let i = open + 1; i <= close; i++) {
    const t = tokens[i] as Token;
    if (t.text === '(') depth++;
    else if (t.text === ')' && i < close) depth--;
    else if ((t.text === ',' && depth === 0) || i === close) {
      // An element's ordering (ASC, DESC, NULLS FIRST) orders nothing in a unique check.
      let end = i - 1;
      while (end > from && ['asc', 'desc', 'nulls', 'first', 'last'].includes((tokens[end] as Token).text.toLowerCase())) end--;
      items.push(statement.text.slice((tokens[from] as Token).start, (tokens[end] as Token).end));
      from = i + 1;
    }
  }
  const list = items.map((e) => `(CASE WHEN (${predicate}) THEN ${e} END)`).join(', ');
  const text = `${statement.text.slice(0, (tokens[open] as Token).start)}(${list})`;
  return { ...statement, ...lexStatement(text) };
}

/**
 * `INSERT ... ON CONFLICT (c) WHERE predicate`: the arbiter is a partial
 * unique index, which DuckDB's ON CONFLICT cannot take (its index is on
 * each column's value where the predicate holds): refused, where taking it
 * as the whole column would decide otherwise than PostgreSQL.
 */
function partialConflict(sent: ParsedStatement): void {
  if (!sent.tokens.some((t) => t.kind === 'word' && t.text.toLowerCase() === 'conflict')) return;
  const infer = ((sent.tree?.InsertStmt as PgNode | undefined)?.onConflictClause as PgNode | undefined)?.infer as PgNode | undefined;
  if (infer?.whereClause === undefined) return;
  throw new PgError(SqlState.FeatureNotSupported, 'ON CONFLICT with a partial unique index as its arbiter is not supported', {
    hint: 'Look the row up first in the same transaction, or let the insert fail with 23505 and catch it.',
  });
}

/**
 * The pipeline's first stage: what a statement becomes. A session command
 * is answered by the handler; anything else is rewritten for the engine,
 * then planned as COPY, a ledger append (for the writer) or an engine
 * statement, each with its access decided on the text that will run.
 */
export class Planner {
  /** The ledger catalog's version this connection's macros were defined for. */
  private macrosVersion = -1;
  /** The served reads' own queries, prepared on this connection (readRows). */
  private readonly serverStatements = new Map<string, EngineStatement>();
  private publishedSettings = '';
  /** The queries of this connection's PREPAREs, by name: their select lists name EXECUTE's columns. */
  private readonly preparedQueries = new Map<string, ParsedStatement>();

  constructor(
    private readonly ctx: HandlerContext,
    private readonly appends: LedgerAppends,
    private readonly host: StatementHost,
    /** The columns a FETCH from this cursor returns. */
    private readonly cursorFields: (name: string) => readonly FieldDescription[] | null,
  ) {}

  async prepare(source: string | StatementSource, paramTypes: readonly number[]): Promise<Statement> {
    const { ctx } = this;
    let statement: StatementText;
    if (typeof source === 'string') {
      const parts = splitStatements(source);
      if (parts.length > 1) {
        throw new PgError(SqlState.SyntaxError, 'cannot insert multiple commands into a prepared statement');
      }
      if (parts.length === 0) return new Statement({ kind: 'empty' }, paramTypes, null);
      statement = parts[0] as StatementText;
    } else {
      statement = source as StatementText;
    }
    const command = recognizeCommand(statement.tokens, statement.text);
    if (command !== null) {
      const fields =
        command.kind === 'show'
          ? command.name === 'all'
            ? ['name', 'setting', 'description'].map(textField)
            : [textField(ctx.settings.canonicalName(command.name))]
          : command.kind === 'fetch' && !command.move
            ? this.cursorFields(command.name)
            : command.kind === 'set-config'
              ? [textField('set_config')]
              : null;
      return new Statement({ kind: 'command', command }, [], fields);
    }
    ctx.tx.checkNotFailed();
    // Every rule from here on reads this object (and the rewritten text's), never the text again.
    const sent = new ParsedStatement<StatementKind>(statement.text, statement.tokens);
    this.recordPrepared(sent);
    const erasure = erasureOf(sent);
    if (erasure !== null)
      return new Statement({ kind: 'erasure', call: erasure, text: statement.text }, erasureParamTypes(erasure, paramTypes), erasureFields(erasure));
    statement = this.tempFunctionCall(statement);
    statement = typedPrepare(statement);
    statement = partialIndex(statement, sent);
    partialConflict(sent);
    statement = await this.conflictConstraint(statement, sent);
    await this.refreshLedgerMacros(statement.text, statement.tokens);
    const withDml = await this.dataModifyingWith(statement, sent, paramTypes);
    if (withDml !== null) return withDml;
    const client = parsedText(statement.text, statement.tokens, sent);
    await this.identityAlways(client);
    const engineText = await this.forEngine(statement, client);
    if (engineText.text !== client.text && READS_SETTINGS.test(engineText.text)) await this.publishSettings();
    const copy = parseCopyFromStdin(engineText.text, engineText.tokens);
    if (copy !== null) return new Statement({ kind: 'copy-in', copy, offset: engineText.offset }, [], null);
    const copyOut = parseCopyToStdout(engineText.text, engineText.tokens);
    if (copyOut !== null) return this.prepareCopyOut(engineText, copyOut);
    await this.refreshLedgerMacros(engineText.text, engineText.tokens);
    const ledgerInsert = await this.appends.prepare(engineText, paramTypes);
    if (ledgerInsert !== null) return ledgerInsert;
    try {
      return await this.prepareEngine(engineText, client, paramTypes);
    } catch (err) {
      const listed = await this.withTargetColumns(err, statement);
      if (listed === null) throw err;
      return this.prepare(listed, paramTypes);
    }
  }

  /**
   * An INSERT without a column list that gives fewer values than its table
   * has columns, as PostgreSQL takes it (the rest get their defaults): the
   * statement with its first columns listed, or null for any other error.
   * Known only once the engine refused it, so a complete INSERT costs nothing.
   */
  private async withTargetColumns(err: unknown, statement: StatementText): Promise<StatementText | null> {
    const supplied = err instanceof PgError ? /has (\d+) columns but (\d+) values were supplied/.exec(err.message) : null;
    if (supplied === null || Number(supplied[2]) >= Number(supplied[1])) return null;
    const insert = new ParsedStatement(statement.text, statement.tokens).tree?.InsertStmt as PgNode | undefined;
    const relation = insert?.relation as { relname?: string; schemaname?: string } | undefined;
    if (insert === undefined || typeof relation?.relname !== 'string') return null;
    const schema = relation.schemaname === undefined || relation.schemaname === 'public' ? null : relation.schemaname;
    const columns = await this.tableColumns(schema, relation.relname);
    if (columns === null) return null;
    const text = withTargetColumns(
      statement.text,
      insert,
      columns.slice(0, Number(supplied[2])).map((c) => c.name),
    );
    return text === null ? null : { ...lexStatement(text), offset: statement.offset };
  }

  /**
   * `WITH d AS (DELETE | UPDATE | INSERT ... RETURNING ...) statement`:
   * DuckDB's WITH takes queries only. The data-modifying statement runs
   * first, its RETURNING rows go into a temporary table named as the WITH
   * query, the statement runs on it, and the table is dropped: all in one
   * transaction (its own in autocommit). Taken only where that is what
   * PostgreSQL does: one such WITH query, with RETURNING and no USING or
   * FROM, whose table nothing else in the statement reads (PostgreSQL's
   * statement would see the table as it was before), no parameters and no
   * ledger table (the guard refuses those as before); null otherwise, and
   * the statement is refused as unsupported (dataModifyingCte).
   */
  private async dataModifyingWith(statement: StatementText, sent: ParsedStatement, paramTypes: readonly number[]): Promise<Statement | null> {
    if (paramTypes.length > 0 || !/^with$/i.test(sent.tokens.find((t) => t.kind === 'word')?.text ?? '')) return null;
    const tree = sent.tree;
    const top = tree === null ? undefined : (Object.values(tree)[0] as PgNode | undefined);
    const withClause = top?.withClause as PgNode | undefined;
    const ctes = ((withClause?.ctes as PgNode[] | undefined) ?? []).map((c) => c.CommonTableExpr as PgNode);
    const dml = ctes.filter((c) => {
      const q = c.ctequery as PgNode | undefined;
      return q?.InsertStmt !== undefined || q?.UpdateStmt !== undefined || q?.DeleteStmt !== undefined;
    });
    const cte = dml[0];
    if (cte === undefined || dml.length > 1 || withClause?.recursive === true || paramTypes.length > 0) return null;
    const tokens = statement.tokens;
    if (
      tokens.some(
        (t) => t.kind === 'param' || ((t.kind === 'word' || t.kind === 'quoted') && this.ctx.access.isLedgerName(t.text.replace(/^"|"$/g, '').toLowerCase())),
      )
    ) {
      return null;
    }
    const body = Object.values(cte.ctequery as PgNode)[0] as PgNode;
    const relation = body.relation as PgNode | undefined;
    if (
      (body.returningList ?? body.returningClause) === undefined ||
      body.usingClause !== undefined ||
      body.fromClause !== undefined ||
      typeof relation?.relname !== 'string'
    )
      return null;
    const target = relation.relname.toLowerCase();
    const cteNames = new Set(ctes.map((c) => String(c.ctename).toLowerCase()));
    if (relationNames(body).some((n) => cteNames.has(n))) return null;
    const others = relationNames({ ...top, withClause: { ctes: ctes.filter((c) => c !== cte).map((c) => ({ CommonTableExpr: c })) } } as PgNode);
    if (others.includes(target)) return null;
    const span = withEntrySpan(tokens, String(cte.ctename));
    if (span === null) return null;
    const sub = (text: string, offset: number): StatementText => ({ text, offset: statement.offset + offset, tokens: lexStatement(text).tokens });
    const innerSource = sub(statement.text.slice(span.body[0], span.body[1]), span.body[0]);
    const returning = innerSource.tokens.findIndex((t) => t.kind === 'word' && t.text.toLowerCase() === 'returning');
    const inner = await this.prepare(innerSource, []);
    const columns = inner.fields;
    if (inner.plan.kind !== 'engine' || columns === null || returning < 0 || !columns.every((f) => TEXT_SAFE_TYPES.has(f.typeOid))) {
      this.host.closeStatement(inner);
      return null;
    }
    // The WITH query reads the rows from a temporary table: it keeps its place, its name (which hides a table of that name) and its column names.
    const name = 'cot_with_returning';
    // The temporary table's types are those of the RETURNING list read from the same table.
    const rel = [relation.schemaname, relation.relname]
      .filter((x) => typeof x === 'string')
      .map((x) => quoteIdentifier(String(x)))
      .join('.');
    const aliasName = (relation.alias as PgNode | undefined)?.aliasname;
    const shapeText = `SELECT ${innerSource.text.slice((innerSource.tokens[returning] as Token).end)} FROM ${rel}${typeof aliasName === 'string' ? ` AS ${quoteIdentifier(aliasName)}` : ''}`;
    const shapeSource = sub(shapeText, span.body[0]);
    const shape = await this.forEngine(shapeSource, new ParsedStatement<StatementKind>(shapeText, shapeSource.tokens));
    const create = `CREATE TEMP TABLE ${name} AS SELECT * FROM (${shape.text}) AS cot_returning LIMIT 0`;
    const drop = `DROP TABLE temp.main.${name}`;
    const outerText = `${statement.text.slice(0, span.body[0])}SELECT * FROM temp.main.${name}${statement.text.slice(span.body[1])}`;
    await this.ctx.engine.run(create);
    let outer: Statement;
    try {
      outer = await this.prepare(sub(outerText, 0), []);
    } finally {
      await this.ctx.engine.run(drop);
    }
    if (outer.plan.kind !== 'engine') {
      this.host.closeStatement(inner);
      this.host.closeStatement(outer);
      return null;
    }
    const run = new WithDmlStatement(this.ctx, inner.plan.statement, outer.plan.statement, create, drop, name, columns.length, inner.plan.keys);
    return new Statement({ ...outer.plan, statement: run }, [], outer.fields);
  }

  /**
   * `INSERT ... ON CONFLICT ON CONSTRAINT name`: DuckDB takes only a column
   * list as the conflict target, so the constraint (a primary key or unique
   * constraint of the table, by the name the catalog gives it: the client's
   * or PostgreSQL's default) becomes its columns. An unknown name is
   * PostgreSQL's 42704.
   */
  private async conflictConstraint(statement: StatementText, sent: ParsedStatement): Promise<StatementText> {
    const tokens = statement.tokens;
    const at = tokens.findIndex(
      (t, i) =>
        t.kind === 'word' &&
        t.text.toLowerCase() === 'on' &&
        tokens[i - 1]?.text.toLowerCase() === 'conflict' &&
        tokens[i + 1]?.text.toLowerCase() === 'constraint',
    );
    const nameToken = tokens[at + 2];
    if (at < 0 || nameToken === undefined) return statement;
    const insert = sent.tree?.InsertStmt as PgNode | undefined;
    const conname = ((insert?.onConflictClause as PgNode | undefined)?.infer as PgNode | undefined)?.conname;
    const relation = insert?.relation as PgNode | undefined;
    // A ledger's INSERT ... ON CONFLICT is the guard's to refuse, as it is.
    if (typeof conname !== 'string' || typeof relation?.relname !== 'string' || this.ctx.access.isLedgerName(relation.relname)) return statement;
    const schema = typeof relation.schemaname === 'string' ? (relation.schemaname === 'public' ? 'main' : relation.schemaname) : null;
    const rows = await this.ctx.engine.query(
      `SELECT k.constraint_column_names FROM duckdb_constraints() k
       WHERE lower(k.table_name) = lower($1) AND ($2 IS NULL OR lower(k.schema_name) = lower($2)) AND k.database_name NOT IN ${HIDDEN_DB}
         AND k.constraint_type IN ('PRIMARY KEY', 'UNIQUE')
         AND ${P}.cot_conname(k.database_name, k.schema_name, k.table_name, k.constraint_type, k.constraint_column_names, k.constraint_name) = $3
       ORDER BY k.database_name <> 'temp', k.schema_name <> 'main' LIMIT 1`,
      [relation.relname, schema, conname],
    );
    const columns = rows[0]?.[0];
    if (!Array.isArray(columns)) {
      throw new PgError(SqlState.UndefinedObject, `constraint "${conname}" for table "${relation.relname}" does not exist`);
    }
    const start = (tokens[at] as Token).start;
    const text = `${statement.text.slice(0, start)}(${columns.map((c) => quoteIdentifier(String(c))).join(', ')})${statement.text.slice(nameToken.end)}`;
    return { ...statement, ...lexStatement(text) };
  }

  /**
   * A value for a GENERATED ALWAYS identity column is refused, as PostgreSQL
   * refuses it (DuckDB's column has a default and would take any value):
   * INSERT needs DEFAULT there or OVERRIDING SYSTEM VALUE, UPDATE only DEFAULT.
   */
  private async identityAlways(statement: ParsedStatement): Promise<void> {
    const first = statement.tokens[0]?.text.toLowerCase();
    if ((first !== 'insert' && first !== 'update') || !this.ctx.services.declared.anyIdentityAlways()) return;
    const stmt = statement.tree;
    const target = (stmt?.InsertStmt ?? stmt?.UpdateStmt) as PgNode | undefined;
    const relation = target?.relation as PgNode | undefined;
    if (target === undefined || typeof relation?.relname !== 'string') return;
    const schema = typeof relation.schemaname === 'string' && relation.schemaname !== 'public' ? relation.schemaname : 'main';
    const always = this.ctx.services.declared.identityAlways(schema, relation.relname);
    if (always === undefined) return;
    const refuse = (column: string, update: boolean): never => {
      throw new PgError(
        SqlState.GeneratedAlways,
        update ? `column "${column}" can only be updated to DEFAULT` : `cannot insert a non-DEFAULT value into column "${column}"`,
        {
          detail: `Column "${column}" is an identity column defined as GENERATED ALWAYS.`,
          ...(update ? {} : { hint: 'Use OVERRIDING SYSTEM VALUE to override.' }),
        },
      );
    };
    const isDefault = (e: unknown): boolean => (e as PgNode | undefined)?.SetToDefault !== undefined;
    if (stmt?.UpdateStmt !== undefined) {
      for (const t of (target.targetList as PgNode[] | undefined) ?? []) {
        const res = t.ResTarget as PgNode;
        if (always.has(String(res.name).toLowerCase()) && !isDefault(res.val)) refuse(String(res.name), true);
      }
      return;
    }
    // DEFAULT VALUES gives no value.
    if (target.override === 'OVERRIDING_SYSTEM_VALUE' || target.selectStmt === undefined) return;
    let columns = ((target.cols as PgNode[] | undefined) ?? []).map((c) => String((c.ResTarget as PgNode).name).toLowerCase());
    if (columns.length === 0) {
      const rows = await this.ctx.engine.query(
        `SELECT lower(column_name) FROM system.main.duckdb_columns() WHERE lower(table_name) = lower($1) AND schema_name = $2 AND database_name <> 'temp' ORDER BY column_index`,
        [relation.relname, schema],
      );
      columns = rows.map((r) => String(r[0]));
    }
    const select = (target.selectStmt as PgNode | undefined)?.SelectStmt as PgNode | undefined;
    const rows = select?.valuesLists as PgNode[] | undefined;
    // A query's rows (INSERT ... SELECT) give as many values as its select list has columns (a `*` counts as all).
    const width = (select?.targetList as PgNode[] | undefined)?.length;
    const starred = JSON.stringify(select?.targetList ?? null).includes('"A_Star"');
    columns.forEach((column, k) => {
      if (!always.has(column)) return;
      if (rows === undefined) {
        if (starred || width === undefined || k < width) refuse(column, false);
        return;
      }
      // VALUES may say DEFAULT there, or end before the column (which then takes its default).
      const given = (r: PgNode): unknown => ((r.List as PgNode).items as unknown[])[k];
      if (rows.some((r) => given(r) !== undefined && !isDefault(given(r)))) refuse(column, false);
    });
  }

  /**
   * `SELECT (testfunc.response)."id", ..., testfunc.sequelize_caught_exception
   * FROM pg_temp.testfunc()`: the call of a function the session keeps
   * (commands.ts) is its INSERT, returning the same columns. A unique
   * violation is the error itself, where the function would catch it and
   * answer it in sequelize_caught_exception (docs/compatibility.md).
   */
  private tempFunctionCall(statement: StatementText): StatementText {
    if (this.ctx.tempFunctions.size === 0) return statement;
    const m = /^SELECT\s+([\s\S]+?)\s+FROM\s+pg_temp\.(\w+)\s*\(\s*\)\s*;?\s*$/i.exec(statement.text.trim());
    const insert = m === null ? undefined : this.ctx.tempFunctions.get((m[2] as string).toLowerCase());
    if (m === null || insert === undefined) return statement;
    const name = (m[2] as string).toLowerCase();
    const columns = (m[1] as string).split(',').map((c) => c.trim());
    const returning = columns.map((c) => {
      const field = new RegExp(`^\\(${name}\\.response\\)\\.(.+)$`, 'i').exec(c);
      if (field !== null) return field[1] as string;
      if (c.toLowerCase() === `${name}.sequelize_caught_exception`) return 'CAST(NULL AS VARCHAR) AS sequelize_caught_exception';
      return null;
    });
    if (returning.includes(null)) return statement;
    const scanned = lexStatement(`${insert} RETURNING ${returning.join(', ')}`);
    // One INSERT, as the function's body held: anything more is not Sequelize's function, and is not run.
    if (scanned.tokens.some((t) => t.kind === 'semicolon') || scanned.tokens[0]?.text.toLowerCase() !== 'insert') return statement;
    return { text: scanned.text, tokens: scanned.tokens, offset: statement.offset };
  }

  /**
   * The SQL verification and reading macros, for the ledgers that exist now.
   * A ledger dropped or reshaped behind the server since the catalog was read
   * must not keep a connection from opening: the catalog is read again, and
   * what still fails is left undefined, one ledger at a time.
   */
  async defineLedgerMacros(): Promise<void> {
    const { services, engine } = this.ctx;
    try {
      await engine.run((await this.ledgerMacros()).flat().join(';\n'));
      return;
    } catch {
      services.ledgers.invalidate();
    }
    for (const group of await this.ledgerMacros()) await engine.run(group.join(';\n')).catch(() => undefined);
  }

  private async ledgerMacros(): Promise<string[][]> {
    this.macrosVersion = this.ctx.services.ledgers.version;
    return ledgerMacroGroups(this.ctx.services, await this.tenantScope());
  }

  private async prepareEngine(statement: EngineText, client: ParsedStatement, paramTypes: readonly number[]): Promise<Statement> {
    const { access, engine } = this.ctx;
    const { parsed } = statement;
    let engineStatement: EngineStatement;
    const keyDdl = keyDdlOf(client);
    if (keyDdl !== null && (keyDdl.op === 'add' ? keyDdl.alone : keyDdl.op === 'drop-constraint' && (await keptKeyNamed(this.ctx, keyDdl.at, keyDdl.name)))) {
      return this.prepareHandled(statement, client, { kind: 'ALTER', constraint: null, columnAlter: null, drops: null, keyDdl });
    }
    const constraint = translateAddConstraint(parsed);
    const columnAlter = constraint === null ? translateColumnAlter(parsed) : null;
    if (constraint !== null || columnAlter !== null) return this.prepareHandled(statement, client, { kind: 'ALTER', constraint, columnAlter, drops: null });
    const drops = translateDrop(parsed);
    if (drops !== null) return this.prepareHandled(statement, client, { kind: 'DROP', constraint: null, columnAlter: null, drops });
    const serial = translateSerial(parsed);
    if (serial !== null && createdLedgerName(access, statement.tokens) !== null) {
      throw new PgError(SqlState.FeatureNotSupported, 'serial and identity columns are not supported in a ledger table', {
        hint: "The writer numbers each session's steps (step_index) and the whole ledger (ledger_seq) itself.",
      });
    }
    // A serial column's sequence must exist before its CREATE TABLE can be prepared: the table
    // without the defaults is prepared and checked here, and the real one runs at Execute.
    const text = serial?.probe ?? statement.text;
    const search = searchArgs(parsed);
    try {
      access.beforePrepare(text, statement.tokens);
      // DuckDB folds a literal query text's vector into the plan as it prepares it.
      if (search.searches) await this.ctx.services.search.vectors.prepare(search.literals);
      const { catalog } = this.ctx;
      const snapshotText = catalog.reads(text, statement.tokens) ? await catalog.snapshotText(text, statement.tokens) : null;
      const prepareLive = (): Promise<EngineStatement> => this.ctx.calls.run(() => engine.prepare(text, paramTypes, parsed));
      // A statement the copy cannot prepare is prepared over the views, whose error (and its position) is the client's.
      const prepareSnapshot = (copy: string): Promise<EngineStatement> =>
        this.ctx.calls
          .run(() => engine.prepare(copy, paramTypes, parsed))
          .then(
            (prepared) => new CatalogStatement(prepared, catalog, prepareLive),
            () => prepareLive(),
          );
      engineStatement =
        snapshotText === null
          ? await prepareLive()
          : ((await this.answered(snapshotText, client, () => prepareSnapshot(snapshotText))) ?? (await prepareSnapshot(snapshotText)));
    } catch (err) {
      // A statement that would be refused is refused as such, even when it does not bind either:
      // the client learns the rule, and the attempt is recorded.
      throw access.unprepared(err, parsed) ?? dataModifyingCte(client) ?? clientError(err, statement.offset, statement.clientPosition);
    }
    parsed.recordKind(engineStatement.kind);
    // The statement that the guard classifies is the one that runs: it is
    // already prepared, and only this object is ever executed.
    try {
      await access.engineStatement(parsed);
    } catch (err) {
      engineStatement.close();
      throw err;
    }
    engineStatement = this.served(engineStatement, statement.tokens);
    const columns = engineStatement.columns;
    const names =
      columns === null
        ? null
        : pgNames(
            this.namesFrom(client),
            columns.map((c) => c.name),
          );
    const nameArrays = columns === null ? null : nameArrayColumns(client);
    const engineFields =
      columns?.map((c, i) => ({
        name: names?.[i] ?? c.name,
        tableOid: 0,
        columnAttr: 0,
        typeOid: nameArrays?.has(i) === true && c.typeOid === ArrayOidOf.get(TypeOid.text) ? NAME_ARRAY_OID : c.typeOid,
        typeSize: c.typeSize,
        typeModifier: c.typeModifier,
        format: 0 as const,
      })) ?? null;
    const fields = engineFields === null ? null : await this.ctx.calls.run(() => describeSources(this.ctx, client, engineFields));
    const types = [...engineStatement.paramTypes];
    for (let i = types.length; i < paramTypes.length; i++) types.push(paramTypes[i] as number);
    return new Statement(
      {
        kind: 'engine',
        statement: engineStatement,
        tokens: statement.tokens,
        offset: statement.offset,
        clientPosition: statement.clientPosition ?? SAME_POSITION,
        createsLedger: engineStatement.kind === 'CREATE' ? createdLedgerName(access, statement.tokens) : null,
        createsSequences: engineStatement.kind === 'CREATE' ? serial : null,
        addsConstraint: null,
        altersIndexedColumns: null,
        dropsEach: null,
        declares: engineStatement.kind === 'CREATE' || engineStatement.kind === 'ALTER' || engineStatement.kind === 'DROP' ? declaredChanges(client) : [],
        advisoryWaits: advisoryWaits(parsed),
        searchParams: search.params,
        keys: keyWork(
          keyDdl,
          () => tableWriteOf(client),
          () => updateParts(statement.text, statement.tokens, updateAlias(client)),
        ),
        ledgerReads: engineStatement.kind === 'SELECT' ? new LedgerReadCheck(client) : null,
      },
      types,
      fields,
    );
  }

  /**
   * A catalog read over the snapshot whose answers are kept for every
   * connection until the schema changes (catalog-mode.ts, CatalogAnswers):
   * described from what is kept, or prepared and its description kept. Null
   * when its answers may not be kept.
   */
  private async answered(copy: string, client: ParsedStatement, prepare: () => Promise<EngineStatement>): Promise<EngineStatement | null> {
    const { catalog, services, info, settings, engine } = this.ctx;
    const generation = await catalog.answersGeneration();
    if (generation === null) return null;
    const answers = catalogAnswers(services).at(generation);
    const made = await answers.functionsMade(async () => {
      const read = services.catalogSnapshot.namesAt(generation);
      if (read !== null) return read.functions;
      const rows = await this.ctx.calls.run(() => engine.query(schemaNamesSql(COMPAT_CATALOG).functions));
      return new Set(rows.map((r) => String(r[0])));
    });
    if (!answerable(client.tokens, client.tree, isCatalogRelation, made)) return null;
    const key = [copy, info.user, info.role, JSON.stringify(info.identity), info.database, JSON.stringify(settings.all())].join('\u0000');
    const current = (): Promise<number | null> => catalog.answersGeneration();
    const described = answers.description(key);
    if (described !== undefined) return new AnsweredStatement(answers, key, described, null, prepare, current);
    const prepared = await prepare();
    const description = { kind: prepared.kind, paramTypes: prepared.paramTypes, columns: prepared.columns };
    answers.describe(key, description);
    return new AnsweredStatement(answers, key, description, prepared, prepare, current);
  }

  /**
   * An agent's read of one chain or one step, which the handler answers
   * itself where it can (ledger-reads.ts, steps-reads.ts); the engine's
   * statement stays its description and its fallback.
   */
  private served(engineStatement: EngineStatement, tokens: readonly Token[]): EngineStatement {
    const { services, tx } = this.ctx;
    const scoped = this.ctx.info.identity.org_id !== undefined;
    if (scoped && engineStatement.kind === 'EXPLAIN') return new EstimatesHidden(engineStatement);
    const verify = recognizeChainVerify(tokens);
    if (verify !== null && ServedChainVerify.applies(engineStatement, verify)) {
      return new ServedChainVerify(engineStatement, verify, {
        ledgers: services.ledgers,
        auditReport: services.auditReport,
        lostRanges: services.lostRanges,
        query: (sql, params) => this.readRows(sql, params),
        // An organisation's user verifies its own chains only, as its macro does.
        ...(scoped ? { owns: (table: LedgerTable, key: string) => this.owns(table, key) } : {}),
      });
    }
    // The session cache holds every organisation's steps: an organisation's user reads through the scoped macros.
    if (scoped) return engineStatement;
    const { sessionCache: cache, stepStore: store } = services;
    const stepsTable = cache?.steps ?? store?.steps ?? null;
    const steps = stepsTable === null ? null : recognizeStepsRead(tokens);
    if (stepsTable !== null && steps !== null && ServedStepsRead.applies(engineStatement, stepsTable)) {
      return new ServedStepsRead(engineStatement, steps, {
        cache,
        store,
        steps: stepsTable,
        writer: services.writer,
        autocommit: () => tx.status === 'I' && !tx.implicitOpen,
        appendsVisible: () => appendsVisible(this.ctx),
      });
    }
    return engineStatement;
  }

  /**
   * A server query's rows as text, through a statement prepared once per
   * connection and text (the served reads run the same few queries often,
   * and preparing costs more than running them).
   */
  private async readRows(sql: string, params: readonly string[]): Promise<Array<ReadonlyArray<string | null>>> {
    let statement = this.serverStatements.get(sql);
    if (statement === undefined) {
      statement = await this.ctx.engine.prepare(sql, []);
      this.serverStatements.set(sql, statement);
    }
    return statementRows(
      statement,
      params.map((p) => ({ value: Buffer.from(p, 'utf8'), format: 0 as const, typeOid: 0 })),
    );
  }

  /**
   * ALTER TABLE ... ADD FOREIGN KEY or CHECK, and the column changes an index blocks,
   * which DuckDB cannot prepare or run as they are: the guard and the roles
   * decide on the statement as an ALTER, and the handler carries it out at
   * Execute (table-create.ts).
   */
  private async prepareHandled(
    statement: EngineText,
    client: ParsedStatement,
    handled: {
      readonly kind: 'ALTER' | 'DROP';
      readonly constraint: ConstraintAddition | null;
      readonly columnAlter: ColumnAlter | null;
      readonly drops: readonly string[] | null;
      readonly keyDdl?: KeyDdl;
    },
  ): Promise<Statement> {
    const { access } = this.ctx;
    const { constraint, columnAlter } = handled;
    access.beforePrepare(statement.text, statement.tokens);
    statement.parsed.recordKind(handled.kind);
    await access.engineStatement(statement.parsed);
    return new Statement(
      {
        kind: 'engine',
        statement: new HandledStatement(handled.kind),
        tokens: statement.tokens,
        offset: statement.offset,
        clientPosition: statement.clientPosition ?? SAME_POSITION,
        createsLedger: null,
        createsSequences: null,
        addsConstraint: constraint,
        altersIndexedColumns: columnAlter,
        dropsEach: handled.drops,
        // What the client declared, before the rewrite spelled its types for the engine.
        declares: declaredChanges(client),
        advisoryWaits: [],
        searchParams: [],
        keys: keyWork(handled.keyDdl ?? keyDdlOf(client), () => tableWriteOf(client)),
        ledgerReads: null,
      },
      [],
      null,
    );
  }

  /**
   * The statement with PostgreSQL-only syntax rewritten for the engine
   * (engines/duckdb/catalog/rewrite.ts). Everything after this point, the guard included,
   * sees the rewritten text, so what is checked is what runs.
   */
  private async forEngine(sent: StatementText, sentParsed: ParsedStatement<StatementKind>): Promise<EngineText> {
    this.ctx.access.reservedNames(sent.text, sent.tokens);
    const [statement, client] = await this.scoped(sent, sentParsed);
    const rewriter = this.ctx.services.rewriter;
    const target = rewriter.insertTarget(client);
    const columns = target === null ? null : await this.tableColumns(target.schema, target.table);
    const rewritten = rewriter.rewriteMapped(client, columns, this.jsonbColumns(client));
    if (rewritten.text === statement.text) return { ...statement, parsed: client };
    const scanned = lexStatement(rewritten.text);
    return {
      text: scanned.text,
      tokens: scanned.tokens,
      offset: statement.offset,
      clientPosition: (p) => rewritten.clientPosition(p),
      parsed: parsedText(scanned.text, scanned.tokens, client),
    };
  }

  /** Whether a chain holds a row this connection's organisation reads (the scoped cot_verify's question). */
  private async owns(table: LedgerTable, key: string): Promise<boolean> {
    const where = (await this.tenantScope())?.(table.name, table.schema) ?? 'true';
    if (table.chainKey === null || where === 'false') return false;
    const rows = await this.readRows(`SELECT count(*) FROM ${qualifiedName(table)} WHERE ${quoteIdentifier(table.chainKey)} = $1 AND ${where}`, [key]);
    return Number(rows[0]?.[0] ?? 0) > 0;
  }

  /** How a user with an org_id reads each ledger; null for a user who reads them whole. */
  private async tenantScope(): Promise<TenantPredicate | null> {
    // A user without an org_id costs nothing here: not even the catalog of ledgers is read.
    if (this.ctx.info.identity.org_id === undefined) return null;
    return this.ctx.access.tenantScope(await this.ctx.services.ledgers.all());
  }

  /**
   * A user with an org_id: the statement with every ledger it reads read
   * through the organisation's filter, before any other rule sees it, so
   * what runs is what was scoped (access.ts decides).
   */
  private async scoped(statement: StatementText, client: ParsedStatement<StatementKind>): Promise<[StatementText, ParsedStatement<StatementKind>]> {
    const scope = await this.tenantScope();
    if (scope === null) return [statement, client];
    const { services, engine } = this.ctx;
    const text = await this.ctx.access.scopedReads(client, scope, services.catalogSnapshot.generation, (sql) => this.ctx.calls.run(() => engine.query(sql)));
    if (text === statement.text) return [statement, client];
    const scanned = lexStatement(text);
    return [{ ...statement, text: scanned.text, tokens: scanned.tokens }, new ParsedStatement<StatementKind>(scanned.text, scanned.tokens)];
  }

  /** The statement whose select list names the result's columns: for EXECUTE, the query its PREPARE gave. */
  private namesFrom(client: ParsedStatement): ParsedStatement {
    const name = client.tokens[0]?.text.toLowerCase() === 'execute' ? identifierText(client.tokens, 1) : null;
    return (name === null ? undefined : this.preparedQueries.get(name)) ?? client;
  }

  /**
   * PREPARE name [(types)] AS query: the query as the client wrote it, kept
   * by name, whose select list names EXECUTE's columns as PostgreSQL does
   * (DuckDB names `$1 + 1` by its text, PostgreSQL `?column?`).
   */
  private recordPrepared(sent: ParsedStatement): void {
    const { tokens, text } = sent;
    const name = tokens[0]?.text.toLowerCase() === 'prepare' ? identifierText(tokens, 1) : null;
    if (name === null) return;
    let depth = 0;
    const as = tokens.findIndex((t, i) => {
      if (t.text === '(') depth++;
      else if (t.text === ')') depth--;
      return i > 1 && depth === 0 && t.kind === 'word' && t.text.toLowerCase() === 'as';
    });
    if (as < 0) return;
    const query = text.slice((tokens[as] as Token).end).trim();
    this.preparedQueries.set(name, new ParsedStatement(query, lexStatement(query).tokens));
  }

  /** The jsonb columns of the tables a statement names, by the name or alias it reads them by, where it reads one as jsonb (jsonbTables); null for none. */
  private jsonbColumns(statement: ParsedStatement): Map<string, ReadonlySet<string>> | null {
    const tables = this.ctx.services.rewriter.jsonbTables(statement);
    if (tables === null) return null;
    const found = new Map<string, ReadonlySet<string>>();
    for (const t of tables) {
      const columns = this.ctx.services.declared.jsonbColumns(t.schema, t.table);
      if (columns !== undefined) found.set(t.as, columns);
    }
    return found.size === 0 ? null : found;
  }

  /** A table's columns in order, and which hold lists; the connection's temporary table first, as name lookup does. */
  private async tableColumns(schema: string | null, table: string): Promise<TargetColumns | null> {
    const rows = await this.ctx.engine.query(
      `SELECT database_name, schema_name, column_name, data_type FROM system.main.duckdb_columns()
       WHERE lower(table_name) = lower($1) AND ($2 IS NULL OR lower(schema_name) = lower($2)) AND database_name NOT IN ('system', '${COMPAT_CATALOG}')
       ORDER BY database_name <> 'temp', schema_name <> 'main', database_name, schema_name, column_index`,
      [table, schema],
    );
    const first = rows[0];
    if (first === undefined) return null;
    return rows
      .filter((r) => r[0] === first[0] && r[1] === first[1])
      .map((r) => ({
        name: String(r[2]),
        list: String(r[3]).endsWith(']'),
        temporal: String(r[3]).startsWith('TIMESTAMP'),
        numeric9: r[3] === 'DECIMAL(38,9)',
        ...(NUMBER_INPUTS[String(r[3])] === undefined ? {} : { numberInput: NUMBER_INPUTS[String(r[3])] }),
      }));
  }

  /**
   * The catalog's pg_settings and current_setting() read the connection's
   * PostgreSQL settings, which live in the handler, from an engine variable:
   * it is brought up to date before a statement that reads them is prepared.
   */
  private async publishSettings(): Promise<void> {
    const rows = this.ctx.settings.all();
    const key = JSON.stringify(rows);
    if (key === this.publishedSettings) return;
    const q = (s: string): string => `'${s.replaceAll("'", "''")}'`;
    const list = rows.map(([name, setting, description]) => `{'name': ${q(name)}, 'setting': ${q(setting)}, 'description': ${q(description)}}`);
    const values = rows.map(([name, setting]) => `${q(name.toLowerCase())}: ${q(setting)}`);
    await this.ctx.engine.run(`SET VARIABLE cot_settings = [${list.join(', ')}]`);
    await this.ctx.engine.run(`SET VARIABLE cot_setting_values = MAP {${values.join(', ')}}`);
    this.publishedSettings = key;
  }

  private async prepareCopyOut(statement: StatementText, copy: CopyToStdout): Promise<Statement> {
    if (copy.format === 'binary') {
      throw new PgError(SqlState.FeatureNotSupported, 'COPY TO STDOUT in binary format is not supported', { hint: 'Use FORMAT text or FORMAT csv.' });
    }
    const parts = splitStatements(copy.query);
    const part = parts[0];
    if (part === undefined || parts.length > 1) {
      throw new PgError(SqlState.SyntaxError, 'COPY (query) TO STDOUT takes exactly one query', { position: statement.offset + 1 });
    }
    const query = await this.prepare({ ...part, offset: statement.offset + copy.queryOffset } as StatementText, []);
    if (query.plan.kind !== 'engine' || query.fields === null || !READ_KINDS.has(query.plan.statement.kind)) {
      this.host.closeStatement(query);
      throw new PgError(SqlState.FeatureNotSupported, 'COPY (query) TO STDOUT supports only queries that read rows', {
        hint: 'Use SELECT, VALUES, TABLE or WITH ... SELECT inside the parentheses.',
      });
    }
    return new Statement({ kind: 'copy-out', copy, query }, [], null);
  }

  /**
   * The ledgers' macros (cot_verify, cot_replay, ...), defined before the
   * first statement that may call one or read the catalog (pg_proc lists
   * them), and again for ledgers created since: defining them costs about
   * 70 ms, which a connection that does neither (an application's reads and
   * writes) does not pay. The catalog's own macros are called qualified
   * (cotwire_pg.pg.cot_text): not these.
   */
  private async refreshLedgerMacros(text: string, tokens: readonly Token[]): Promise<void> {
    if (this.macrosVersion === this.ctx.services.ledgers.version) return;
    const calls = tokens.some((t, i) => t.kind === 'word' && t.text.toLowerCase().startsWith('cot_') && tokens[i - 1]?.text !== '.');
    // A catalog read lists the ledgers' macros among the functions (pg_proc); the snapshot's tables, which most
    // catalog reads take, were made on a connection that had them, so only a read of the live views needs this one's.
    if (!calls && (!this.ctx.catalog.reads(text, tokens) || (await this.ctx.catalog.usable()))) return;
    await this.defineLedgerMacros();
  }
}

/** One of the catalog's relations, as a query names it: pg_catalog's (qualified or not) and information_schema's. */
function isCatalogRelation(name: string, schema: string | undefined): boolean {
  return schema === 'information_schema' || ((schema === undefined || schema === 'pg_catalog') && catalogRelationOid(name) !== undefined);
}
