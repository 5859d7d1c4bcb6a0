import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import postgres from 'postgres';
import { onPostgres, startTestServer, type TestServer } from '../fixtures/server.js';

const run = promisify(execFile);
let server: TestServer;

beforeAll(async () => {
  server = await startTestServer();
});
afterAll(async () => {
  await server[Symbol.asyncDispose]();
});

describe('postgres.js (extended protocol, named statements)', () => {
  it('creates, inserts with parameters and reads back typed values', async () => {
    const sql = postgres({ host: '127.0.0.1', port: server.port, user: 'cotwire', database: 'cotwire', max: 4, onnotice: () => undefined });
    try {
      await sql`CREATE TABLE pj (id INTEGER, name VARCHAR, created TIMESTAMPTZ, n BIGINT, meta JSON)`;
      const at = new Date('2024-03-04T05:06:07.089Z');
      for (let i = 1; i <= 3; i++) {
        await sql`INSERT INTO pj VALUES (${i}, ${'name' + i}, ${at}, ${String(10n ** 12n + BigInt(i))}, ${sql.json({ i })})`;
      }
      const rows = await sql`SELECT * FROM pj WHERE id >= ${2} ORDER BY id`;
      expect(rows.count).toBe(2);
      expect(rows.command).toBe('SELECT');
      expect(rows[0]).toMatchObject({ id: 2, name: 'name2', n: '1000000000002', meta: { i: 2 } });
      expect((rows[0] as { created: Date }).created.toISOString()).toBe(at.toISOString());
      const [{ total }] = (await sql`SELECT sum(id)::INTEGER AS total FROM pj`) as unknown as [{ total: number }];
      expect(total).toBe(6);
      const err = (await sql`SELECT * FROM missing`.catch((e: unknown) => e)) as { code: string };
      expect(err.code).toBe('42P01');
      const inTx = await sql.begin(async (tx) => {
        await tx`INSERT INTO pj (id) VALUES (${4})`;
        return tx`SELECT count(*)::INTEGER AS n FROM pj`;
      });
      expect(inTx[0]?.n).toBe(4);
    } finally {
      await sql.end();
    }
  });
});

describe('postgres.js COPY streams', () => {
  it('loads with .writable() and exports with .readable()', async () => {
    const sql = postgres({ host: '127.0.0.1', port: server.port, user: 'cotwire', database: 'cotwire', max: 1, onnotice: () => undefined });
    try {
      await sql`CREATE TABLE pjcopy (id INTEGER, body VARCHAR)`;
      const writable = await sql`COPY pjcopy FROM STDIN`.writable();
      await new Promise<void>((resolve, reject) => {
        writable.on('error', reject);
        writable.write('1\tone\n2\t\\N\n');
        writable.end('3\tthree\n', resolve);
      });
      const readable = await sql`COPY (SELECT * FROM pjcopy ORDER BY id) TO STDOUT WITH (FORMAT csv, HEADER)`.readable();
      let text = '';
      for await (const chunk of readable) text += String(chunk);
      expect(text).toBe('id,body\n1,one\n2,\n3,three\n');
      expect((await sql`SELECT count(*)::INTEGER AS n FROM pjcopy`)[0]?.n).toBe(3);
    } finally {
      await sql.end();
    }
  });
});

describe('psql', () => {
  const psql = (args: string[]) =>
    run('psql', ['-X', '-v', 'ON_ERROR_STOP=1', '-h', '127.0.0.1', '-p', String(server.port), '-U', 'cotwire', 'cotwire', ...args], {
      env: { ...process.env, PGCONNECT_TIMEOUT: '10' },
    });

  it('runs commands with -c and prints tags and rows', async () => {
    const { stdout } = await psql([
      '-c',
      'CREATE TABLE pc (a INTEGER, b VARCHAR)',
      '-c',
      "INSERT INTO pc VALUES (1, 'x'), (2, NULL)",
      '-c',
      'SELECT * FROM pc ORDER BY a',
    ]);
    expect(stdout).toContain('CREATE TABLE');
    expect(stdout).toContain('INSERT 0 2');
    expect(stdout).toMatch(/ a \| b \n---\+---\n 1 \| x\n 2 \| \n\(2 rows\)/);
  });

  it('runs a script with -f, including a transaction', async () => {
    const file = join(server.dir, 'script.sql');
    writeFileSync(
      file,
      `BEGIN;\nCREATE TABLE pf (x INTEGER);\nINSERT INTO pf SELECT g FROM generate_series(0, 9) t(g);\nCOMMIT;\n\\pset format unaligned\nSELECT sum(x) AS s FROM pf;\n`,
    );
    const { stdout } = await psql(['-f', file]);
    expect(stdout).toContain('BEGIN\nCREATE TABLE\nINSERT 0 10\nCOMMIT');
    expect(stdout).toContain('s\n45\n(1 row)');
  });

  it('exits non-zero with the SQLSTATE message on an error', async () => {
    const err = (await psql(['-c', 'SELECT * FROM nope']).catch((e: unknown) => e)) as { code: number; stderr: string };
    expect(err.code).not.toBe(0);
    // The engine's own message: DuckDB's, or PostgreSQL's.
    expect(err.stderr).toContain(onPostgres ? 'ERROR:  relation "nope" does not exist' : 'ERROR:  Catalog Error: Table with name nope does not exist!');
    expect(err.stderr).toMatch(/LINE 1: SELECT \* FROM nope\n\s+\^/);
  });

  it('connects and reports the server version in \\conninfo-friendly form', async () => {
    const { stdout } = await psql(['-At', '-c', 'SHOW server_version', '-c', 'SELECT 1 AS x']);
    const [version, one] = stdout.trim().split('\n');
    expect(version).toMatch(onPostgres ? /^\d+\.\d+/ : /^15\.0$/);
    expect(one).toBe('1');
  });
});
