import { identifierText, nameText } from '../sql/identifiers.js';
import type { Token } from '../sql/lexer.js';

export { identifierText };

/**
 * Which names are ledger names. A ledger table is any table whose name
 * starts with one of the protected prefixes, compared without regard to
 * case, in every schema and catalog. The prefixes can be widened by
 * configuration, never narrowed: `_cot` is always protected.
 */
export class ProtectedNames {
  readonly prefixes: readonly string[];

  constructor(extra: readonly string[] = []) {
    this.prefixes = [...new Set(['_cot', ...extra.map((p) => p.toLowerCase())])].filter((p) => p !== '');
  }

  /** Tables only the server writes: the record of refused statements, the signed checkpoints, and the vectors of steps. */
  isServerOnly(name: string | undefined | null): boolean {
    if (name === undefined || name === null) return false;
    const n = name.toLowerCase();
    return n === '_cot_security_events' || n === '_cot_checkpoints' || n === '_cot_embeddings';
  }

  isProtected(name: string | undefined | null): boolean {
    if (name === undefined || name === null) return false;
    const n = name.toLowerCase();
    return this.prefixes.some((p) => n.startsWith(p));
  }

  /**
   * Every name the statement spells, decoded, that is or holds a protected
   * name: identifiers, and string literals too, since DuckDB takes a string
   * where a table name goes (`UPDATE '_cot_steps' ...`).
   */
  mentions(tokens: readonly Token[]): string[] {
    const found: string[] = [];
    for (let i = 0; i < tokens.length; i++) {
      const name = nameText(tokens, i);
      if (name !== null && (this.isProtected(name) || name.split('.').some((part) => this.isProtected(part.trim().replace(/^"|"$/g, ''))))) {
        found.push(name);
      }
    }
    return found;
  }
}
