import { tokenize, type Token } from './lexer.js';
import { callsIn, type FunctionCall, onlyStatement, type PgNode, type PgParse, parseStatements } from './pg-tree.js';

/**
 * One statement's text and what the server reads of it: its tokens, the
 * engine's kind for it, and PostgreSQL's parse tree (libpg-query). Parsing
 * costs far more than anything a rule then does with the tree, and a
 * statement passes a dozen rules on its way to the engine, so each reading
 * is made on first use and kept: a text is parsed once at most, and not at
 * all when no rule needs its tree. The planner makes one per text (the
 * client's, and the rewritten one when the rewrite changed it) and hands it
 * to every rule.
 */
export class ParsedStatement<Kind extends string = string> {
  private lexed: readonly Token[] | undefined;
  private parse: PgParse | null | undefined;
  private functionCalls: readonly FunctionCall[] | null | undefined;
  private engineKind: Kind | undefined;

  /** `tokens`: the lexer's tokens of `text`, when the caller has them already. */
  constructor(
    readonly text: string,
    tokens?: readonly Token[],
  ) {
    this.lexed = tokens;
  }

  get tokens(): readonly Token[] {
    this.lexed ??= tokenize(this.text);
    return this.lexed;
  }

  /** PostgreSQL's tree of the statement; null when the text is not one PostgreSQL statement (DuckDB-only syntax, several). */
  get tree(): PgNode | null {
    return onlyStatement(this.parsed());
  }

  /** Every function call at any depth of every statement PostgreSQL reads in the text; null when it cannot parse it. */
  get calls(): readonly FunctionCall[] | null {
    if (this.functionCalls === undefined) this.functionCalls = callsIn(this.parsed());
    return this.functionCalls;
  }

  /** What the engine's parser says the statement is; undefined until the engine has prepared it. */
  get kind(): Kind | undefined {
    return this.engineKind;
  }

  /** The engine's kind, once it has prepared the text: a text has one kind, so a second, different one is a bug. */
  recordKind(kind: Kind): void {
    if (this.engineKind !== undefined && this.engineKind !== kind) throw new Error(`statement kind ${kind} recorded over ${this.engineKind}`);
    this.engineKind = kind;
  }

  private parsed(): PgParse | null {
    if (this.parse === undefined) this.parse = parseStatements(this.text);
    return this.parse;
  }
}

/** A statement's text, or its parsed form when the caller has one (whose readings are then shared). */
export type SqlSource = string | ParsedStatement;

/** The parsed form of a statement: the caller's, or a new one for a bare text. */
export function parsedOf(sql: SqlSource): ParsedStatement {
  return typeof sql === 'string' ? new ParsedStatement(sql) : sql;
}

export function textOf(sql: SqlSource): string {
  return typeof sql === 'string' ? sql : sql.text;
}
