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

  /**
   * Tables only the server writes: the record of refused statements, the
   * signed checkpoints, the vectors of steps, and the records of redaction
   * and retention.
   */
  isServerOnly(name: string | undefined | null): boolean {
    if (name === undefined || name === null) return false;
    return SERVER_ONLY.has(name.toLowerCase());
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

const SERVER_ONLY = new Set(['_cot_security_events', '_cot_checkpoints', '_cot_embeddings', '_cot_redactions', '_cot_retention', '_cot_log_events']);
