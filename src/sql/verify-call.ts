import type { Token } from './lexer.js';

/**
 * `SELECT * | col, ... FROM cot_verify[_ledger](arg)`: the one shape of a
 * chain's verification that the server answers itself on either engine,
 * reading the chain's rows and recomputing their hashes in its own process
 * (ledger/chain/chain-check.ts). Any other shape runs in the engine.
 */

/** The call's one argument: a parameter ($n, 1-based) or a string literal. */
export type ReadArg = { readonly param: number } | { readonly literal: string };

/** A parameter or a plain string literal token as a ReadArg, or null. */
export function readArg(token: Token | undefined): ReadArg | null {
  if (token?.kind === 'param') return { param: Number(token.text.slice(1)) };
  const literal = token?.kind === 'string' ? STRING_LITERAL.exec(token.text) : null;
  return literal === null || literal === undefined ? null : { literal: (literal[1] as string).replaceAll("''", "'") };
}

export interface ChainVerifyRead {
  /** The verification macro called: cot_verify, or cot_verify_<ledger>. */
  readonly macro: string;
  /** The output columns selected, in order. */
  readonly columns: readonly string[];
  readonly arg: ReadArg;
}

/** The columns of a chain verification, in order, as both engines' SQL answers them. */
export const VERIFY_COLUMNS = ['chain_key', 'valid', 'step_count', 'first_broken_index', 'break_kind', 'expected_hash', 'actual_hash'] as const;

const STRING_LITERAL = /^'((?:[^']|'')*)'$/;

/**
 * `SELECT * | col, ... FROM cot_verify[_ledger](arg)`, nothing more: the
 * statement shape the handler answers itself, or null.
 */
export function recognizeChainVerify(tokens: readonly Token[]): ChainVerifyRead | null {
  const t = tokens.length > 0 && tokens[tokens.length - 1]?.kind === 'semicolon' ? tokens.slice(0, -1) : tokens;
  const word = (i: number): string | null => (t[i]?.kind === 'word' ? (t[i] as Token).text.toLowerCase() : null);
  if (word(0) !== 'select') return null;
  let i = 1;
  const columns: string[] = [];
  if (t[i]?.text === '*') {
    columns.push(...VERIFY_COLUMNS);
    i++;
  } else {
    for (;;) {
      const name = word(i);
      if (name === null || !(VERIFY_COLUMNS as readonly string[]).includes(name)) return null;
      columns.push(name);
      i++;
      if (t[i]?.text !== ',') break;
      i++;
    }
  }
  if (word(i) !== 'from') return null;
  const macro = word(i + 1);
  if (macro === null || !/^cot_verify(_[a-z0-9_]+)?$/.test(macro) || macro.endsWith('_all')) return null;
  if (t[i + 2]?.text !== '(' || t[i + 4]?.text !== ')' || t.length !== i + 5) return null;
  const arg = readArg(t[i + 3]);
  return arg === null ? null : { macro, columns, arg };
}
