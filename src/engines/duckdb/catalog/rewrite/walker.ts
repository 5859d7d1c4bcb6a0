import type { Token } from '../../../../sql/lexer.js';
import { strings } from '../../../../sql/pg-tree.js';
import { catalogRelationOid } from '../pg-catalog.js';
import { type Node, Spans } from '../../../../sql/spans.js';

/**
 * The catalog rewrite's walk over PostgreSQL's parse tree of a statement
 * (libpg-query), and the edits its rules make. A rule replaces the source
 * text of a parse-tree node, which it finds among the tokens by the node's
 * location (spans.ts), and leaves every other byte of the statement as the
 * client wrote it. The rules live one family to a file beside this one;
 * rules.ts says which node kinds each is given, and in what order.
 */

export { type Node, wordOf } from '../../../../sql/spans.js';

export interface Edit {
  readonly start: number;
  readonly end: number;
  readonly text: string;
}

/** An edit that moves text (`x = ANY(list)`): applied only when nothing inside `from`..`to` is rewritten too. */
export interface Move {
  readonly from: number;
  readonly to: number;
  readonly edits: readonly Edit[];
}

/** Columns declared jsonb, by the table's name or alias in the statement (lower case): DuckDB's JSON does not say which are. */
export type JsonbColumns = ReadonlyMap<string, ReadonlySet<string>>;

/** The columns of an INSERT's target table, in order, and whether each holds a list. */
export type TargetColumns = ReadonlyArray<{
  readonly name: string;
  readonly list: boolean;
  readonly temporal?: boolean;
  /** DECIMAL(38,9): numeric without a precision, which holds 9 digits after the point. */
  readonly numeric9?: boolean;
  /** An integer or float column, by PostgreSQL's name of its type: text written into it is read as that type's input reads it. */
  readonly numberInput?: 'smallint' | 'integer' | 'bigint' | 'real' | 'double precision';
}>;

/**
 * A rule: given a node of the kind it is registered for, it records its
 * edits on the walker. Returning true ends the node's rewrites: the rules
 * after it in the node kind's list are not asked (any other result, or
 * none, lets them run).
 */
export type NodeRule = (w: Walker, node: Node) => unknown;

/** Which rules each node is given, in order (the order matters: edits at one position are applied in the order they were made). */
export interface Rules {
  /** Each SELECT whose columns the client receives (every arm of a set operation), before the walk. */
  readonly results: readonly NodeRule[];
  /** Every range variable (FROM t, INSERT INTO t, ...); `w.inTarget` tells a statement's own target. */
  readonly relations: readonly NodeRule[];
  /** Every type name (casts, column definitions). */
  readonly typeNames: readonly NodeRule[];
  /** By node kind, the key of the node's wrapper (FuncCall, A_Expr, SelectStmt, ...). */
  readonly nodes: Readonly<Record<string, readonly NodeRule[]>>;
}

/** Statements whose expressions may be rewritten to call the catalog's functions: queries and DML, never DDL that persists them. */
const EXPRESSION_STATEMENTS = new Set(['SelectStmt', 'InsertStmt', 'UpdateStmt', 'DeleteStmt', 'ExplainStmt']);

/** Fields whose RangeVar is the statement's target (INSERT INTO, CREATE TABLE ...): never sent to the catalog's views. */
const TARGET_FIELDS = new Set(['relation', 'relations', 'rel', 'view', 'into', 'objects']);

export class Walker extends Spans {
  private readonly edits: Edit[] = [];
  /** The insertions made after a token (insertAfter): what closes a node. */
  private readonly closings = new Set<Edit>();
  private readonly moves: Move[] = [];

  /** Names of WITH queries: an unqualified reference to one is the query, not a catalog relation. */
  readonly ctes = new Set<string>();
  /** Catalog relations read by the statement, by the name or alias their columns are qualified with: their OIDs. */
  readonly catalogTables = new Map<string, number>();
  /** For each SELECT being walked, the catalog relations of its own FROM (an unqualified tableoid is theirs). */
  readonly fromScopes: number[][] = [];
  /** RangeVars and FROM function calls whose whole text another rule replaced, by location. */
  readonly replacedRelations = new Set<number>();
  /** Constants that a cast around them types (`1e300::float8`), by location: a constant's own rules leave them as written. */
  readonly castConstants = new Set<number>();
  /** jsonb `->>` / `#>>` cast to a binary number (`(j ->> 'n')::float8`), by location: DuckDB's reading gives the same value. */
  readonly binaryNumberTexts = new Set<number>();
  /** NULL operands a scalar subquery keeps DuckDB from folding (rewrite/null-constants.ts), by location. */
  readonly unfoldedOperands = new Set<number>();
  /** Nodes inside what a macro puts in a lambda, where DuckDB takes no subquery (rewrite/null-constants.ts), by location. */
  readonly inLambdas = new Set<number>();
  /** Arguments of avg() computed exactly from copies of their text (rewrite/result-types.ts), as character ranges: no rule may edit inside. */
  readonly copiedArguments: Array<{ readonly from: number; readonly to: number }> = [];
  /** Whether expressions may call the catalog's functions (not inside CREATE VIEW, whose text is stored). */
  expressions = true;
  /** While a range variable's rules run: whether it is the statement's target. */
  inTarget = false;
  /** The edits applied by run(), in order: where positions in the rewritten text came from. */
  readonly applied: Edit[] = [];

  constructor(
    text: string,
    tokens: readonly Token[],
    private readonly rules: Rules,
    readonly target: TargetColumns | null = null,
    /** The database name clients connect to, which they may put before a schema (cotwire.public.orders). */
    readonly database: string = 'cotwire',
    /** The columns declared jsonb of the tables the statement names, by the name or alias it reads them by (lower case). */
    readonly jsonbColumns: JsonbColumns | null = null,
  ) {
    super(text, tokens);
  }

  /** The statement with every rule's edits applied. */
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
        for (const rule of this.rules.results) rule(this, select);
      }
    };
    outermost(root);
    this.walk(stmt, null, false);
    for (const move of this.moves) {
      if (!this.edits.some((e) => e.start >= move.from && e.start < move.to)) this.edits.push(...move.edits);
    }
    if (this.edits.length === 0) return this.text;
    // By position; at one position, insertions before replacements, and of the insertions, the text
    // that closes what a token ends before the text that opens what the next begins. Closings were made
    // outermost first (a rule wraps a node before the walk reaches its children), so they go in reverse.
    const order = new Map(this.edits.map((e, k) => [e, k]));
    const rank = (e: Edit): number => (e.end > e.start ? 2 : this.closings.has(e) ? 0 : 1);
    const edits = [...this.edits].sort((a, b) => {
      const byPlace = a.start - b.start || rank(a) - rank(b);
      if (byPlace !== 0) return byPlace;
      const k = (order.get(a) ?? 0) - (order.get(b) ?? 0);
      return rank(a) === 0 ? -k : k;
    });
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

  private walk(value: unknown, key: string | null, target: boolean): void {
    if (Array.isArray(value)) {
      for (const v of value) this.walk(v, key, target);
      return;
    }
    if (value === null || typeof value !== 'object') return;
    const node = value as Node;
    // Typed fields (InsertStmt.relation, TypeCast.typeName) hold their node without a wrapper.
    if ('relname' in node) {
      this.inTarget = target;
      for (const rule of this.rules.relations) if (rule(this, node) === true) break;
    }
    if (key === 'typeName' || (Array.isArray(node.names) && 'typemod' in node)) {
      for (const rule of this.rules.typeNames) if (rule(this, node) === true) break;
    }
    for (const [k, v] of Object.entries(node)) {
      for (const rule of this.rules.nodes[k] ?? []) if (rule(this, v as Node) === true) break;
      // A target's subtree stays a target until a query inside it (INSERT ... SELECT) begins.
      const childTarget = TARGET_FIELDS.has(k) ? true : k === 'selectStmt' || k === 'query' || k === 'SelectStmt' ? false : target;
      if (k === 'SelectStmt') this.fromScopes.push(this.fromCatalogOids(v as Node));
      this.walk(v, k, childTarget);
      if (k === 'SelectStmt') this.fromScopes.pop();
    }
  }

  private collectCtes(value: unknown): void {
    if (Array.isArray(value)) for (const v of value) this.collectCtes(v);
    else if (value !== null && typeof value === 'object') {
      for (const [k, v] of Object.entries(value as Node)) {
        if (k === 'ctename' && typeof v === 'string') this.ctes.add(v.toLowerCase());
        else this.collectCtes(v);
      }
    }
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

  // ---- Edits -----------------------------------------------------------------------------------

  /** Tokens `from` up to (not including) `to` replaced by `text`. */
  replaceTokens(from: number, to: number, text: string): void {
    const a = this.tokens[from];
    const b = this.tokens[to - 1];
    if (a === undefined || b === undefined) return;
    this.edits.push({ start: a.start, end: b.end, text });
  }

  insertBefore(i: number, text: string): void {
    const t = this.tokens[i];
    if (t !== undefined) this.edits.push({ start: t.start, end: t.start, text });
  }

  insertAfter(i: number, text: string): void {
    const t = this.tokens[i];
    if (t === undefined) return;
    const e = { start: t.end, end: t.end, text };
    this.closings.add(e);
    this.edits.push(e);
  }

  /** An edit by character offsets, where no token boundary serves. */
  edit(e: Edit): void {
    this.edits.push(e);
  }

  move(m: Move): void {
    this.moves.push(m);
  }
}

/** A RangeFunction's one function call (`FROM f(...)`), or undefined for ROWS FROM of several. */
export function rangeCall(node: Node): Node | undefined {
  const functions = node.functions as unknown[] | undefined;
  if (functions?.length !== 1) return undefined;
  return ((functions[0] as { List?: { items?: unknown[] } }).List?.items?.[0] as Node | undefined)?.FuncCall as Node | undefined;
}

/** A function call as the tree names it, and the token its name starts at. */
export interface Call {
  readonly parts: readonly string[];
  /** The function's own name, without its schema. */
  readonly fn: string;
  readonly i: number;
}

/** A FuncCall node's call; null when its text cannot be found, or another rule replaced the whole relation it is in. */
export function callOf(w: Walker, node: Node): Call | null {
  if (w.replacedRelations.has(node.location as number)) return null;
  const parts = strings(node.funcname);
  const i = w.index(node.location);
  if (i === null || parts.length === 0) return null;
  return { parts, fn: parts[parts.length - 1] as string, i };
}

/** The call's name as written, with the token after it; null for COERCE_SQL_SYNTAX calls (EXTRACT, SUBSTRING ... FROM), whose name is not in the text. */
export function spelledName(w: Walker, call: Call): { readonly parts: readonly string[]; readonly next: number } | null {
  const name = w.dotted(call.i);
  return name === null || name.parts.join('.') !== call.parts.join('.') ? null : name;
}

/** An A_Expr node's operator (its last name part, the whole name, and the token where it is spelled); null when not found in the text. */
export function operatorOf(w: Walker, node: Node): { readonly op: string; readonly parts: readonly string[]; readonly i: number } | null {
  const parts = strings(node.name);
  const op = parts[parts.length - 1];
  if (op === undefined) return null;
  const i = w.index(node.location);
  return i === null ? null : { op, parts, i };
}
