import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api';
import { lexStatement, splitStatements, tokenize } from '../../../src/sql/lexer.js';
import { DUCKDB_UNICODE_SPACES, stripUnicodeSpaces, stripUnicodeSpacesOnce } from '../../../src/sql/unicode-spaces.js';
import { rng, separatorLike } from '../../security/differential/grammar.js';

/**
 * The lexer's token boundaries must be DuckDB's: these tests ask DuckDB
 * itself, character by character, what each character is, and compare.
 */

let instance: DuckDBInstance;
let conn: DuckDBConnection;

beforeAll(async () => {
  instance = await DuckDBInstance.create(':memory:');
  conn = await instance.connect();
});
afterAll(() => {
  conn.closeSync();
  instance.closeSync();
});

type Outcome = { ok: true; rows: unknown[][]; columns: string[] } | { ok: false; error: string };

async function run(sql: string): Promise<Outcome> {
  try {
    const reader = await conn.runAndReadAll(sql);
    return { ok: true, rows: reader.getRowsJS() as unknown[][], columns: reader.columnNames() };
  } catch (err) {
    return { ok: false, error: (err as Error).message.split('\n')[0] ?? '' };
  }
}

const hex = (c: number): string => `U+${c.toString(16).toUpperCase().padStart(4, '0')}`;
const words = (sql: string): string[] => lexStatement(sql).tokens.map((t) => t.text);

describe('character classes, as DuckDB reads them', () => {
  const chars = separatorLike();

  it('sweeps every character of Zs, Zl, Zp, Cc and Cf', () => {
    // Zs 17, Zl 1, Zp 1, Cc 64 without NUL, Cf 170 (Unicode 15.1; U+0085 and U+FEFF are among them).
    expect(chars.length).toBeGreaterThanOrEqual(250);
  });

  it('agrees with DuckDB on which characters separate words, join them or stand alone', async () => {
    const disagreements: string[] = [];
    const seen = { separator: 0, identifier: 0, other: 0 };
    for (const c of chars) {
      const ch = String.fromCodePoint(c);
      // In a gap between two words, and inside a word.
      const gap = await run(`SELECT 42${ch}AS x`);
      const inside = await run(`SELECT 42 AS a${ch}b`);
      const duckdb = gap.ok && gap.columns[0] === 'x' ? 'separator' : inside.ok && inside.columns[0] === `a${ch}b` ? 'identifier' : 'other';
      const gapTokens = words(`SELECT 42${ch}AS x`);
      const insideTokens = words(`SELECT 42 AS a${ch}b`);
      const ours =
        gapTokens.join('|') === 'SELECT|42|AS|x'
          ? 'separator'
          : insideTokens.join('|') === `SELECT|42|AS|a${ch}b`
            ? 'identifier'
            : insideTokens.includes(ch) && !insideTokens.some((t) => t.length > 1 && t.includes(ch))
              ? 'other'
              : 'unclear';
      seen[duckdb]++;
      if (duckdb !== ours) disagreements.push(`${hex(c)}: DuckDB ${duckdb}, lexer ${ours}`);
    }
    expect(disagreements).toEqual([]);
    // DuckDB's own replacement list, the ASCII whitespace, and the rest read as identifier characters.
    expect(seen.separator).toBe(DUCKDB_UNICODE_SPACES.length + 5);
    expect(seen.other).toBeGreaterThan(20);
    expect(seen.identifier).toBeGreaterThan(150);
  });

  it('agrees on separators at the end of a statement, where DuckDB does not replace them', async () => {
    const disagreements: string[] = [];
    for (const c of DUCKDB_UNICODE_SPACES) {
      const ch = String.fromCodePoint(c);
      // The last two bytes are never replaced: there a no-break space (two bytes) is part of the name.
      for (const [sql, name] of [
        [`SELECT 1 AS x${ch}`, c === 0xa0 ? `x${ch}` : 'x'],
        [`SELECT 1 AS x${ch}y`, 'x'],
      ] as const) {
        const duckdb = await run(sql);
        const tokens = lexStatement(sql).tokens.map((t) => t.text);
        const got = duckdb.ok ? duckdb.columns[0] : 'error';
        const joined = sql.endsWith('y');
        if (joined ? got !== 'error' || tokens.length !== 5 : got !== name || tokens[3] !== name || tokens.length !== 4) {
          disagreements.push(`${hex(c)} in ${JSON.stringify(sql)}: DuckDB ${got}, lexer ${tokens.join('|')}`);
        }
      }
    }
    expect(disagreements).toEqual([]);
  });

  it('knows that DuckDB drops a trailing run of non-ASCII characters from a statement it cannot parse', async () => {
    // With a parser extension loaded, DuckDB re-parses a failed statement after StringUtil::RTrim,
    // which also removes bytes from 0x80 up: the lexer still sees the word, and the guard
    // refuses such a statement when it may write (guard tests).
    expect(await run('SELECT 1 AS x \u00e9')).toMatchObject({ ok: true, columns: ['x'] });
    expect(await run('SELECT 1 AS x \u00e9\u00e9 \u4e2d')).toMatchObject({ ok: true, columns: ['x'] });
    expect(await run('SELECT 1 AS x \u00e9 -- c')).toMatchObject({ ok: false });
    expect(lexStatement('SELECT 1 AS x \u00e9').tokens.map((t) => t.text)).toEqual(['SELECT', '1', 'AS', 'x', '\u00e9']);
  });
});

describe('comments, strings and their ends, as DuckDB reads them', () => {
  // Each case: a statement, and the column names DuckDB gives it (null when it is a syntax error).
  const cases: Array<[string, string[] | null]> = [
    ['SELECT 1 --c\rAS y', ['y']],
    ['SELECT 1 --c\nAS y', ['y']],
    ['SELECT 1 --c\r\nAS y', ['y']],
    ['SELECT 1 /* a /* nested */ comment */ AS y', ['y']],
    ["SELECT 'a'\n'b' AS y", ['y']],
    ["SELECT 'a' -- c\n'b' AS y", ['y']],
    ["SELECT 'a'\n-- c\n'b' AS y", ['y']],
    ["SELECT 'a'\r'b' AS y", ['y']],
    ["SELECT E'a'\n'\\'' AS y", ['y']],
    ["SELECT E'it\\'s' AS y", ['y']],
    ["SELECT 'a\\' AS y", ['y']],
    ['SELECT $t$ a $ b $t$ AS y', ['y']],
    ['SELECT $$ $t$ $$ AS y', ['y']],
    ['SELECT 1 AS "a""b"', ['a"b']],
    ['SELECT 1 AS a$b', ['a$b']],
    ['SELECT 1\vAS y', null],
    ['SELECT 1 # 2', null],
  ];

  it.each(cases)('%j', async (sql, columns) => {
    const duckdb = await run(sql);
    expect(duckdb.ok ? duckdb.columns : null).toEqual(columns);
    const tokens = tokenize(sql);
    if (columns !== null) {
      // The lexer sees one expression, then the alias: the name DuckDB gave the column.
      const alias = tokens[tokens.length - 1] as { kind: string; text: string };
      expect(['word', 'quoted']).toContain(alias.kind);
      expect(tokens.filter((t) => t.kind === 'string').length).toBeLessThanOrEqual(1);
    } else {
      expect(tokens.some((t) => t.kind === 'punct' && (t.text === '\v' || t.text === '#'))).toBe(true);
    }
  });

  it('ends a line comment at a bare carriage return, so nothing hides behind one', () => {
    expect(splitStatements('INSERT INTO --\r_cot_x\n VALUES (1)')[0]?.tokens.map((t) => t.text)).toEqual(['INSERT', 'INTO', '_cot_x', 'VALUES', '(', '1', ')']);
  });

  it('continues a string across a newline with its own escapes, as one token', () => {
    expect(tokenize("SELECT E'a'\n'\\'; DROP TABLE t; --'").map((t) => t.kind)).toEqual(['word', 'string']);
    expect(tokenize("SELECT 'a' 'b'").map((t) => t.kind)).toEqual(['word', 'string', 'string']);
  });
});

describe("DuckDB's Unicode space replacement, reproduced", () => {
  const SPACES = [...DUCKDB_UNICODE_SPACES, 0x1680, 0x2028, 0x85, 0x180e].map((c) => String.fromCodePoint(c));
  // Pieces that move DuckDB's pass between its states, or confuse it: quotes it tracks and escapes it does not.
  const PIECES = [
    "'a'",
    "'it''s'",
    "E'\\''",
    "E'x\\'y'",
    '"q"',
    '"a""b"',
    '$$d$$',
    '$t$ x $t$',
    '$a$a$',
    "/* it's */",
    '-- c\n',
    '-- c\r',
    '1',
    'x',
    '+',
    ',',
    '$1',
  ];

  function generate(random: () => number): string {
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)] as T;
    let body = '';
    const n = 2 + Math.floor(random() * 8);
    for (let i = 0; i < n; i++) {
      body += pick(PIECES);
      body += random() < 0.6 ? pick(SPACES) : ' ';
    }
    return `SELECT ${body}`;
  }

  it('replaces exactly what DuckDB replaces, over generated statements', async () => {
    const random = rng(20261124);
    const disagreements: string[] = [];
    let compared = 0;
    for (let i = 0; i < 2000; i++) {
      const sql = generate(random);
      const ours = stripUnicodeSpaces(sql);
      // DuckDB's pass is a no-op on a fixed point; if ours replaced anything DuckDB would not,
      // or missed anything, the two texts would parse into different statements or errors.
      expect(stripUnicodeSpacesOnce(ours)).toBe(ours);
      const [a, b] = [await run(`CREATE OR REPLACE TEMP VIEW v AS ${sql}`), await run(`CREATE OR REPLACE TEMP VIEW v AS ${ours}`)];
      const view = async (): Promise<unknown> => (await run("SELECT sql FROM duckdb_views() WHERE view_name = 'v'")).valueOf();
      const describe = (o: Outcome, stored: unknown): string => (o.ok ? JSON.stringify(stored) : o.error.replace(/\s+/g, ' '));
      const left = describe(a, a.ok ? await view() : null);
      const right = describe(b, b.ok ? await view() : null);
      if (a.ok) compared++;
      if (left !== right) disagreements.push(`${JSON.stringify(sql)}: ${left} / ${right}`);
    }
    expect(disagreements).toEqual([]);
    expect(compared).toBeGreaterThan(60);
  });

  it('keeps every offset: each replaced character is one UTF-16 unit', () => {
    const sql = 'DROP\u00a0TABLE\u3000_cot_steps';
    expect(stripUnicodeSpaces(sql)).toBe('DROP TABLE _cot_steps');
    expect(splitStatements(`SELECT 1;${sql}`)[1]).toMatchObject({ text: 'DROP TABLE _cot_steps', offset: 9 });
  });
});
