/**
 * Which column types a DuckDB ledger may have. The writer chains each row
 * from its values' texts (CAST AS VARCHAR), journals those texts, and the
 * applier hands them to DuckDB's appender, which casts them back. A type
 * whose text does not read back as the same value, or that the appender
 * cannot cast from text, would leave acknowledged rows that never reach the
 * table (the applier retries them for ever, and every later statement waits
 * behind them) or that reach it changed and then fail verification.
 * Measured on DuckDB's own casts (test/unit/engine/ledger-column-types.test.ts):
 *
 * - INTERVAL: the appender has no cast from text to it;
 * - a string (VARCHAR, JSON, ENUM, BLOB) inside a fixed-size array or inside
 *   a container inside a container: DuckDB prints it unquoted there
 *   (`['NULL', ' x']::VARCHAR[2]` prints `[NULL,  x]`, read back as a NULL and
 *   'x'), or prints a text its cast refuses (`[['b]']]`);
 * - JSON in any container: printed without its quotes;
 * - UNION: its text names no member, and reads back as another.
 */

type DuckType =
  | { readonly kind: 'scalar'; readonly name: string }
  | { readonly kind: 'list'; readonly of: DuckType; readonly fixed: boolean }
  | { readonly kind: 'struct'; readonly fields: readonly DuckType[] }
  | { readonly kind: 'map'; readonly key: DuckType; readonly value: DuckType }
  | { readonly kind: 'union' };

/** Splits at `sep` outside parentheses, brackets and quotes. */
function splitTop(s: string, sep: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let quote: string | null = null;
  let from = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s[i] as string;
    if (quote !== null) {
      // A doubled quote is one quote inside the string.
      if (c === quote && s[i + 1] === quote) i++;
      else if (c === quote) quote = null;
    } else if (c === "'" || c === '"') quote = c;
    else if (c === '(' || c === '[') depth++;
    else if (c === ')' || c === ']') depth--;
    else if (c === sep && depth === 0) {
      parts.push(s.slice(from, i).trim());
      from = i + 1;
    }
  }
  parts.push(s.slice(from).trim());
  return parts;
}

/** DuckDB's printed type (duckdb_columns().data_type) as a tree. */
export function parseDuckType(text: string): DuckType {
  const s = text.trim();
  const suffix = /\[(\d*)\]$/.exec(s);
  if (suffix !== null) {
    // The outermost suffix is the last: INTEGER[][3] is a 3-array of lists. Its bracket must close at the end.
    const open = s.length - suffix[0].length;
    return { kind: 'list', of: parseDuckType(s.slice(0, open)), fixed: suffix[1] !== '' };
  }
  const call = /^([A-Z_]+)\s*\(([\s\S]*)\)$/i.exec(s);
  const head = call?.[1]?.toUpperCase();
  if (call !== null && head === 'STRUCT') {
    const fields = splitTop(call[2] as string, ',').map((f) => {
      const name = /^("(?:[^"]|"")*"|\S+)\s+([\s\S]+)$/.exec(f);
      return parseDuckType(name?.[2] ?? f);
    });
    return { kind: 'struct', fields };
  }
  if (call !== null && head === 'MAP') {
    const [key = '', value = ''] = splitTop(call[2] as string, ',');
    return { kind: 'map', key: parseDuckType(key), value: parseDuckType(value) };
  }
  if (call !== null && head === 'UNION') return { kind: 'union' };
  return { kind: 'scalar', name: (head ?? s).toUpperCase() };
}

const STRING_LIKE = new Set(['VARCHAR', 'JSON', 'ENUM', 'BLOB']);

/** The first of a ledger's columns it cannot have, and why (the detail of the refusal), or null. */
export function unchainableColumn(
  columns: Iterable<{ readonly name: string; readonly type: string }>,
): { readonly name: string; readonly type: string; readonly detail: string } | null {
  for (const c of columns) {
    const problem = ledgerColumnTypeProblem(c.type);
    if (problem !== null) return { name: c.name, type: c.type, detail: `Every ledger value is chained and stored as its text, and ${problem}.` };
  }
  return null;
}

/** Why a ledger cannot have a column of this DuckDB type, or null when it can. */
export function ledgerColumnTypeProblem(dataType: string): string | null {
  return problem(parseDuckType(dataType), 0, false);
}

function problem(t: DuckType, depth: number, fixedAround: boolean): string | null {
  switch (t.kind) {
    case 'union':
      return 'a UNION does not read back from its text as the member it was';
    case 'scalar':
      if (t.name === 'INTERVAL' && depth === 0) return 'the engine cannot append an INTERVAL from its text';
      if (!STRING_LIKE.has(t.name) || depth === 0) return null;
      if (t.name === 'JSON') return 'JSON inside a list, struct or map is printed without its quotes and does not read back';
      if (depth > 1 || fixedAround) return 'a string inside a fixed-size array or a nested container is printed unquoted and does not read back';
      return null;
    case 'list':
      return problem(t.of, depth + 1, fixedAround || t.fixed);
    case 'struct':
      for (const f of t.fields) {
        const p = problem(f, depth + 1, fixedAround);
        if (p !== null) return p;
      }
      return null;
    case 'map':
      return problem(t.key, depth + 1, fixedAround) ?? problem(t.value, depth + 1, fixedAround);
  }
}
