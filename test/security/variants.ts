/** Spellings of the default ledger's name that DuckDB resolves to the same table. */
const SPELLINGS = ['"_cot_steps"', '_COT_STEPS', '"_COT_STEPS"', 'main._cot_steps', '"main"."_cot_steps"', 'test.main._cot_steps', 'test.main."_Cot_Steps"'];

/** Puts `insert` into every gap between words of a statement, outside quotes. */
function fillGaps(sql: string, insert: string): string {
  let out = '';
  let quote: string | null = null;
  for (const ch of sql) {
    if (quote !== null) {
      out += ch;
      if (ch === quote) quote = null;
    } else if (ch === "'" || ch === '"') {
      quote = ch;
      out += ch;
    } else if (ch === ' ') {
      out += insert;
    } else {
      out += ch;
    }
  }
  return out;
}

/** Upper- or lower-cases everything outside string literals. */
function recase(sql: string, up: boolean): string {
  return sql
    .split(/('[^']*')/)
    .map((part, i) => (i % 2 === 1 ? part : up ? part.toUpperCase() : part.toLowerCase()))
    .join('');
}

/** Variants of one attack: other spellings of the table, comments and whitespace in every gap, case. */
export function variantsOf(sql: string): string[] {
  const out = new Set<string>();
  for (const spelling of SPELLINGS) out.add(sql.replace(/\b_cot_steps\b/g, (m, offset: number) => (sql[offset - 1] === '.' ? m : spelling)));
  out.add(fillGaps(sql, ' /* gap */ '));
  out.add(fillGaps(sql, '\n\t  '));
  out.add(`-- leading comment\n${fillGaps(sql, ' -- gap\n ')}`);
  out.add(recase(sql, true));
  out.add(recase(sql, false));
  out.delete(sql);
  return [...out];
}
