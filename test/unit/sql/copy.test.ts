import { describe, expect, it } from 'vitest';
import { formatCopyCsvRow, formatCopyTextRow, parseCopyCsv, parseCopyFromStdin, parseCopyText, parseCopyToStdout } from '../../../src/sql/copy.js';
import { tokenize } from '../../../src/sql/lexer.js';

const toStdout = (sql: string) => parseCopyToStdout(sql, tokenize(sql));
const fromStdin = (sql: string) => parseCopyFromStdin(sql, tokenize(sql));

describe('parseCopyToStdout', () => {
  it('turns a table and column list into the SELECT it runs', () => {
    expect(toStdout('COPY public."My Table" (a, "B") TO STDOUT')).toMatchObject({
      query: 'SELECT a, "B" FROM public."My Table"',
      format: 'text',
      delimiter: '\t',
      nullString: '\\N',
    });
    expect(toStdout('COPY t TO STDOUT')?.query).toBe('SELECT * FROM t');
  });

  it('keeps a parenthesised query whole, nested parentheses included', () => {
    expect(toStdout("COPY (SELECT f(x) FROM (SELECT 1 AS x) s WHERE ')' <> '(') TO STDOUT WITH CSV HEADER")).toMatchObject({
      query: "SELECT f(x) FROM (SELECT 1 AS x) s WHERE ')' <> '('",
      format: 'csv',
      header: true,
      delimiter: ',',
      nullString: '',
    });
  });

  it('reads the options of both syntaxes', () => {
    expect(toStdout("COPY t TO STDOUT (FORMAT csv, DELIMITER ';', NULL 'NA', QUOTE '''', ESCAPE '\\')")).toMatchObject({
      delimiter: ';',
      nullString: 'NA',
      quote: "'",
      escape: '\\',
    });
    expect(toStdout('COPY t TO STDOUT BINARY')?.format).toBe('binary');
  });

  it('is null for everything else', () => {
    for (const sql of [
      "COPY t TO '/tmp/x'",
      'COPY t FROM STDIN',
      'COPY (SELECT 1 TO STDOUT',
      'COPY t TO STDOUT (COMPRESSION gzip)',
      'COPY t TO STDOUT (FORMAT parquet)',
      'SELECT 1',
    ]) {
      expect(toStdout(sql), sql).toBeNull();
    }
    expect(fromStdin('COPY t TO STDOUT')).toBeNull();
  });
});

describe('COPY row formats', () => {
  it('text rows escape what the text parser unescapes', () => {
    const cells = ['a\tb', 'back\\slash', 'line\nbreak\r', null, ''];
    const line = formatCopyTextRow(cells, '\t', '\\N');
    expect(line).toBe('a\\tb\tback\\\\slash\tline\\nbreak\\r\t\\N\t\n');
    expect(parseCopyText(line, '\t', '\\N')).toEqual([cells]);
  });

  it('CSV rows quote only where needed and read back the same', () => {
    const cells = ['plain', 'a,b', 'say "hi"', 'two\nlines', '', null];
    const line = formatCopyCsvRow(cells, ',', '', '"', '"');
    expect(line).toBe('plain,"a,b","say ""hi""","two\nlines","",\n');
    expect(parseCopyCsv(line, ',', '', '"', '"')).toEqual([cells]);
  });
});
