import { identifierText } from './identifiers.js';
import type { Token } from './lexer.js';

/** The format options of COPY, with PostgreSQL's defaults filled in. */
export interface CopyOptions {
  readonly format: 'text' | 'csv' | 'binary';
  readonly header: boolean;
  readonly delimiter: string;
  readonly nullString: string;
  readonly quote: string;
  readonly escape: string;
}

/** COPY name [(columns)] FROM STDIN [options], as psql's \copy and drivers' bulk loaders send it. */
export interface CopyFromStdin extends CopyOptions {
  readonly target: readonly string[];
  /** The target as written, for statements cotwire builds from it. */
  readonly targetText: string;
  readonly columns: readonly string[] | null;
}

/** COPY name [(columns)] | (query) TO STDOUT [options], as psql's \copy ... to and pg_dump-style exports send it. */
export interface CopyToStdout extends CopyOptions {
  /** The SELECT whose rows are copied out, as cotwire runs it. */
  readonly query: string;
  /** Where the query starts in the statement, for error positions; 0 when cotwire built it. */
  readonly queryOffset: number;
}

const upper = (t: Token | undefined): string => (t?.kind === 'word' ? t.text.toUpperCase() : '');
const stringValue = (t: Token | undefined): string | null =>
  t?.kind === 'string' && t.text.startsWith("'")
    ? t.text.slice(1, -1).replaceAll("''", "'")
    : t?.kind === 'string' && /^[eE]'/.test(t.text)
      ? t.text.slice(2, -1).replace(/\\(.)/g, (_, c: string) => (c === 't' ? '\t' : c === 'n' ? '\n' : c))
      : null;

interface CopySource {
  readonly target: string[];
  readonly targetText: string;
  readonly columns: string[] | null;
  readonly columnsText: string | null;
  /** The index of the token after the source. */
  readonly next: number;
}

function parseCopySource(text: string, tokens: readonly Token[]): CopySource | null {
  if (upper(tokens[0]) !== 'COPY') return null;
  let i = 1;
  const target: string[] = [];
  const nameStart = tokens[i]?.start ?? 0;
  for (;;) {
    const part = identifierText(tokens, i);
    if (part === null) return null;
    target.push(part);
    i++;
    if (tokens[i]?.text !== '.') break;
    i++;
  }
  const targetText = text.slice(nameStart, tokens[i - 1]?.end ?? nameStart);
  let columns: string[] | null = null;
  let columnsText: string | null = null;
  if (tokens[i]?.text === '(') {
    const open = tokens[i]?.end ?? 0;
    columns = [];
    i++;
    while (tokens[i] !== undefined && tokens[i]?.text !== ')') {
      const c = identifierText(tokens, i);
      if (c === null) return null;
      columns.push(c);
      i++;
      if (tokens[i]?.text === ',') i++;
    }
    columnsText = text.slice(open, tokens[i]?.start ?? open);
    i++;
  }
  return { target, targetText, columns, columnsText, next: i };
}

/** Returns null when the statement is not a COPY ... FROM STDIN. */
export function parseCopyFromStdin(text: string, tokens: readonly Token[]): CopyFromStdin | null {
  const source = parseCopySource(text, tokens);
  if (source === null) return null;
  const i = source.next;
  if (upper(tokens[i]) !== 'FROM' || upper(tokens[i + 1]) !== 'STDIN') return null;
  const options = parseCopyOptions(tokens, i + 2);
  if (options === null) return null;
  return { target: source.target, targetText: source.targetText, columns: source.columns, ...options };
}

/** Returns null when the statement is not a COPY ... TO STDOUT. */
export function parseCopyToStdout(text: string, tokens: readonly Token[]): CopyToStdout | null {
  if (upper(tokens[0]) !== 'COPY') return null;
  let i: number;
  let query: string;
  let queryOffset = 0;
  if (tokens[1]?.text === '(') {
    // The query runs through the guard like any other read, so finding its
    // closing parenthesis is all the analysis needed here.
    let depth = 0;
    i = 1;
    for (; i < tokens.length; i++) {
      const t = tokens[i]?.text;
      if (t === '(') depth++;
      else if (t === ')' && --depth === 0) break;
    }
    if (i >= tokens.length) return null;
    queryOffset = tokens[2]?.start ?? 0;
    query = text.slice(queryOffset, tokens[i]?.start ?? 0).trimEnd();
    i++;
  } else {
    const source = parseCopySource(text, tokens);
    if (source === null) return null;
    i = source.next;
    query = `SELECT ${source.columnsText ?? '*'} FROM ${source.targetText}`;
  }
  if (upper(tokens[i]) !== 'TO' || upper(tokens[i + 1]) !== 'STDOUT') return null;
  const options = parseCopyOptions(tokens, i + 2);
  if (options === null) return null;
  return { query, queryOffset, ...options };
}

/** WITH (option value, ...) or the older bare keywords; null on an option cotwire does not know. */
function parseCopyOptions(tokens: readonly Token[], start: number): CopyOptions | null {
  let i = start;
  const options = { format: 'text' as CopyOptions['format'], header: false, delimiter: '', nullString: '', quote: '"', escape: '' };
  let nullSet = false;
  if (upper(tokens[i]) === 'WITH') i++;
  const parenthesised = tokens[i]?.text === '(';
  if (parenthesised) i++;
  while (i < tokens.length && tokens[i]?.text !== ')') {
    const word = upper(tokens[i]);
    i++;
    if (upper(tokens[i]) === 'AS') i++;
    const value = tokens[i];
    const takeString = (): string => {
      const v = stringValue(value);
      if (v !== null) i++;
      return v ?? '';
    };
    switch (word) {
      case 'FORMAT': {
        const f = (value?.kind === 'word' ? value.text : (stringValue(value) ?? '')).toLowerCase();
        // Another format (parquet, json) is DuckDB's own COPY, which the guard refuses.
        if (f !== 'text' && f !== 'csv' && f !== 'binary') return null;
        options.format = f;
        i++;
        break;
      }
      case 'CSV':
        options.format = 'csv';
        break;
      case 'BINARY':
        options.format = 'binary';
        break;
      case 'HEADER': {
        const v = upper(value);
        if (['TRUE', 'ON', 'FALSE', 'OFF', 'MATCH'].includes(v) || value?.kind === 'number') {
          options.header = !['FALSE', 'OFF', '0'].includes(v === '' ? (value?.text ?? '') : v);
          i++;
        } else {
          options.header = true;
        }
        break;
      }
      case 'DELIMITER':
        options.delimiter = takeString();
        break;
      case 'NULL':
        options.nullString = takeString();
        nullSet = true;
        break;
      case 'QUOTE':
        options.quote = takeString();
        break;
      case 'ESCAPE':
        options.escape = takeString();
        break;
      case 'ENCODING':
        takeString();
        break;
      default:
        return null;
    }
    if (tokens[i]?.text === ',') i++;
  }
  const csv = options.format === 'csv';
  return {
    format: options.format,
    header: options.header,
    delimiter: options.delimiter !== '' ? options.delimiter : csv ? ',' : '\t',
    nullString: nullSet ? options.nullString : csv ? '' : '\\N',
    quote: options.quote,
    escape: options.escape !== '' ? options.escape : options.quote,
  };
}

/** One row of COPY TO output in text format: backslash escapes, nullString for NULL. */
export function formatCopyTextRow(cells: readonly (string | null)[], delimiter: string, nullString: string): string {
  return (
    cells
      .map((c) => (c === null ? nullString : c.replace(/[\\\n\r\t]/g, (ch) => TEXT_ESCAPES[ch] ?? ch).replaceAll(delimiter, `\\${delimiter}`)))
      .join(delimiter) + '\n'
  );
}

const TEXT_ESCAPES: Record<string, string> = { '\\': '\\\\', '\n': '\\n', '\r': '\\r', '\t': '\\t' };

/**
 * One row of COPY TO output in CSV: a value is quoted when it holds the
 * delimiter, the quote, a line break, or would read back as NULL.
 */
export function formatCopyCsvRow(cells: readonly (string | null)[], delimiter: string, nullString: string, quote: string, escapeChar: string): string {
  return (
    cells
      .map((c) => {
        if (c === null) return nullString;
        const needsQuotes =
          c === nullString || c.includes(delimiter) || c.includes(quote) || c.includes('\n') || c.includes('\r') || (nullString === '' && c === '');
        if (!needsQuotes) return c;
        let body = '';
        for (const ch of c) body += ch === quote || ch === escapeChar ? escapeChar + ch : ch;
        return quote + body + quote;
      })
      .join(delimiter) + '\n'
  );
}

/** The rows of COPY text format: one line per row, backslash escapes, \N for NULL. */
export function parseCopyText(data: string, delimiter: string, nullString: string): (string | null)[][] {
  const rows: (string | null)[][] = [];
  const lines = data.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  for (let line of lines) {
    if (line.endsWith('\r')) line = line.slice(0, -1);
    if (line === '\\.') break;
    const fields: (string | null)[] = [];
    let raw = '';
    let value = '';
    for (let i = 0; i <= line.length; i++) {
      const c = line[i];
      if (c === undefined || c === delimiter) {
        fields.push(raw === nullString ? null : value);
        raw = '';
        value = '';
        continue;
      }
      if (c === '\\' && i + 1 < line.length) {
        const n = line[i + 1] as string;
        raw += c + n;
        i++;
        const simple: Record<string, string> = { b: '\b', f: '\f', n: '\n', r: '\r', t: '\t', v: '\v' };
        if (simple[n] !== undefined) value += simple[n];
        else if (/[0-7]/.test(n)) {
          const oct = /^[0-7]{1,3}/.exec(line.slice(i))?.[0] ?? n;
          value += String.fromCharCode(parseInt(oct, 8));
          i += oct.length - 1;
          raw += oct.slice(1);
        } else if (n === 'x' && /^[0-9a-fA-F]/.test(line[i + 1] ?? '')) {
          const hex = /^[0-9a-fA-F]{1,2}/.exec(line.slice(i + 1))?.[0] ?? '';
          value += String.fromCharCode(parseInt(hex, 16));
          i += hex.length;
          raw += hex;
        } else value += n;
        continue;
      }
      raw += c;
      value += c;
    }
    rows.push(fields);
  }
  return rows;
}

/** The rows of COPY CSV format (RFC 4180 with PostgreSQL's NULL rule: an unquoted empty field). */
export function parseCopyCsv(data: string, delimiter: string, nullString: string, quote: string, escapeChar: string): (string | null)[][] {
  const rows: (string | null)[][] = [];
  let fields: (string | null)[] = [];
  let value = '';
  let quoted = false;
  let inQuotes = false;
  let atStart = true;
  const endField = (): void => {
    fields.push(!quoted && value === nullString ? null : value);
    value = '';
    quoted = false;
    atStart = true;
  };
  for (let i = 0; i < data.length; i++) {
    const c = data[i] as string;
    if (inQuotes) {
      if (c === escapeChar && data[i + 1] === quote) {
        value += quote;
        i++;
      } else if (c === quote) {
        inQuotes = false;
      } else value += c;
      continue;
    }
    if (c === quote && atStart) {
      inQuotes = true;
      quoted = true;
      atStart = false;
    } else if (c === delimiter) {
      endField();
    } else if (c === '\n' || c === '\r') {
      if (c === '\r' && data[i + 1] === '\n') i++;
      endField();
      if (!(fields.length === 1 && fields[0] === '\\.')) rows.push(fields);
      fields = [];
    } else {
      value += c;
      atStart = false;
    }
  }
  if (value !== '' || quoted || fields.length > 0) {
    endField();
    rows.push(fields);
  }
  return rows;
}
