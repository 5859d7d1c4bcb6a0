import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { serialize } from 'pg-protocol';
import { onPostgres, psql as psqlAt, useTestServer } from '../fixtures/server.js';
import { errorFields, WireClient } from '../fixtures/wire.js';

const ctx = useTestServer();

const psql = (...commands: string[]) => psqlAt(ctx.server.port, ...commands);

describe('COPY FROM STDIN', () => {
  it('appends CSV with a header to _cot_steps through the writer (psql \\copy)', async () => {
    const file = join(ctx.server.dir, 'steps.csv');
    writeFileSync(file, 'session_id,step_type,content,confidence\ncp,Observation,"hello, world",0.5\ncp,Reasoning,"two\nlines",\ncp,Decision,"say ""hi""",1\n');
    const { stdout } = await psql(`\\copy _cot_steps (session_id, step_type, content, confidence) from '${file}' with (format csv, header)`);
    expect(stdout.trim()).toBe('COPY 3');
    const rows = (await ctx.client.query("SELECT step_index, content, confidence FROM _cot_steps WHERE session_id = 'cp' ORDER BY step_index")).rows;
    expect(rows).toEqual([
      { step_index: 0, content: 'hello, world', confidence: 0.5 },
      { step_index: 1, content: 'two\nlines', confidence: null },
      { step_index: 2, content: 'say "hi"', confidence: 1 },
    ]);
    expect((await ctx.client.query("SELECT valid FROM cot_verify('cp')")).rows).toEqual([{ valid: true }]);
  });

  it('copies text format into an ordinary table', async () => {
    await ctx.client.query('CREATE TABLE copied (id INTEGER, body VARCHAR)');
    const file = join(ctx.server.dir, 'rows.txt');
    writeFileSync(file, '1\tone\n2\t\\N\n3\ttab\\there\n');
    const { stdout } = await psql(`\\copy copied from '${file}'`);
    expect(stdout.trim()).toBe('COPY 3');
    expect((await ctx.client.query('SELECT * FROM copied ORDER BY id')).rows).toEqual([
      { id: 1, body: 'one' },
      { id: 2, body: null },
      { id: 3, body: 'tab\there' },
    ]);
  });

  it('writes nothing when one row is wrong', async () => {
    const file = join(ctx.server.dir, 'bad.csv');
    writeFileSync(file, 'bad,Observation\nbad,Musing\n');
    const err = (await psql(`\\copy _cot_steps (session_id, step_type) from '${file}' with (format csv)`).catch((e: unknown) => e)) as { stderr: string };
    expect(err.stderr).toContain('invalid step_type "Musing"');
    expect((await ctx.client.query("SELECT count(*)::INTEGER AS n FROM _cot_steps WHERE session_id = 'bad'")).rows[0].n).toBe(0);
    const short = join(ctx.server.dir, 'short.csv');
    writeFileSync(short, 'bad,Observation,extra\n');
    const e2 = (await psql(`\\copy _cot_steps (session_id, step_type) from '${short}' with (format csv)`).catch((e: unknown) => e)) as { stderr: string };
    expect(e2.stderr).toContain('extra data after last expected column');
  });

  it('answers CopyFail with 57014 and keeps the connection usable', async () => {
    const c = await WireClient.startup(ctx.server.port);
    c.write(serialize.query('COPY _cot_steps (session_id, step_type) FROM STDIN WITH (FORMAT csv)'));
    const [response] = await c.until('G');
    expect(response?.body.readInt16BE(1)).toBe(2);
    c.write(serialize.copyData(Buffer.from('failed,Observation\n')));
    c.write(serialize.copyFail('client gave up'));
    const msgs = await c.until('Z');
    expect(errorFields(msgs.find((m) => m.type === 'E')?.body as Buffer).C).toBe('57014');
    c.write(serialize.query("SELECT count(*) FROM _cot_steps WHERE session_id = 'failed'"));
    const after = await c.until('Z');
    expect(after.map((m) => m.type).join('')).toBe('TDCZ');
    c.end();
    expect((await ctx.client.query("SELECT count(*)::INTEGER AS n FROM _cot_steps WHERE session_id = 'failed'")).rows[0].n).toBe(0);
  });

  it('runs the rest of a query string after the COPY', async () => {
    const c = await WireClient.startup(ctx.server.port);
    c.write(serialize.query('COPY copied FROM STDIN; SELECT count(*) FROM copied'));
    await c.until('G');
    c.write(serialize.copyData(Buffer.from('10\tten\n')));
    c.write(serialize.copyDone());
    const msgs = await c.until('Z');
    expect(msgs.map((m) => m.type).join('')).toBe('CTDCZ');
    c.end();
  });
});

describe('COPY TO STDOUT', () => {
  it('writes text format with escapes and \\N for NULL (psql)', async () => {
    await ctx.client.query('CREATE TABLE exported (id INTEGER, body VARCHAR)');
    await ctx.client.query("INSERT INTO exported VALUES (1, 'one'), (2, NULL), (3, E'tab\\there'), (4, E'back\\\\slash\\nnewline')");
    const { stdout } = await psql('COPY (SELECT * FROM exported ORDER BY id) TO STDOUT');
    expect(stdout).toBe('1\tone\n2\t\\N\n3\ttab\\there\n4\tback\\\\slash\\nnewline\n');
  });

  it('writes CSV with a header, quoting only where needed, through psql \\copy', async () => {
    await ctx.client.query('CREATE TABLE quoted (id INTEGER, body VARCHAR)');
    await ctx.client.query(`INSERT INTO quoted VALUES (1, 'a,b'), (2, 'say "hi"'), (3, E'two\\nlines'), (4, ''), (5, NULL), (6, 'plain')`);
    const file = join(ctx.server.dir, 'out.csv');
    const { stdout } = await psql(`\\copy (SELECT id, body AS text FROM quoted ORDER BY id) to '${file}' with (format csv, header)`);
    expect(stdout.trim()).toBe('COPY 6');
    const { readFileSync } = await import('node:fs');
    expect(readFileSync(file, 'utf8')).toBe('id,text\n1,"a,b"\n2,"say ""hi"""\n3,"two\nlines"\n4,""\n5,\n6,plain\n');
  });

  it('round-trips a ledger session out and into a plain table', async () => {
    await ctx.client.query("INSERT INTO _cot_steps (session_id, step_type, content) VALUES ('rt', 'Observation', E'x\\ty'), ('rt', 'Decision', 'z')");
    const file = join(ctx.server.dir, 'rt.txt');
    await psql(`\\copy (SELECT step_index, content FROM _cot_steps WHERE session_id = 'rt' ORDER BY step_index) to '${file}'`);
    await ctx.client.query('CREATE TABLE rt (step_index INTEGER, content VARCHAR)');
    await psql(`\\copy rt from '${file}'`);
    expect((await ctx.client.query('SELECT * FROM rt ORDER BY step_index')).rows).toEqual([
      { step_index: 0, content: 'x\ty' },
      { step_index: 1, content: 'z' },
    ]);
  });

  it('sends CopyOutResponse, CopyData per row, CopyDone and COPY n on the wire', async () => {
    const c = await WireClient.startup(ctx.server.port);
    c.write(serialize.query('COPY (SELECT 1 AS a, NULL AS b UNION ALL SELECT 2, 3 ORDER BY a) TO STDOUT WITH (FORMAT csv)'));
    const msgs = await c.until('Z');
    expect(msgs.map((m) => m.type).join('')).toBe('HddcCZ');
    const response = msgs[0]?.body as Buffer;
    expect([response.readInt8(0), response.readInt16BE(1)]).toEqual([0, 2]);
    expect(msgs.filter((m) => m.type === 'd').map((m) => m.body.toString())).toEqual(['1,\n', '2,3\n']);
    expect(msgs[4]?.body.toString('utf8', 0, msgs[4].body.length - 1)).toBe('COPY 2');
    c.end();
  });

  it('copies a whole table by name, with a column list', async () => {
    const { stdout } = await psql('COPY _cot_steps (session_id, step_type) TO STDOUT WITH (FORMAT csv)');
    expect(stdout.split('\n')).toContain('rt,Decision');
  });

  // Over PostgreSQL, COPY (INSERT ... RETURNING) TO STDOUT and binary COPY are PostgreSQL's to run, and it runs them.
  it.skipIf(onPostgres)('refuses what is not a read, and binary format, keeping the connection', async () => {
    const c = await WireClient.startup(ctx.server.port);
    for (const [sql, code] of [
      ['COPY (INSERT INTO exported VALUES (9, 9) RETURNING id) TO STDOUT', '0A000'],
      ["COPY (DELETE FROM _cot_steps WHERE session_id = 'rt' RETURNING 1) TO STDOUT", '42501'],
      ['COPY exported TO STDOUT (FORMAT binary)', '0A000'],
      ['COPY no_such_table TO STDOUT', '42P01'],
    ] as const) {
      c.write(serialize.query(sql));
      const msgs = await c.until('Z');
      expect(msgs.map((m) => m.type).join(''), sql).toBe('EZ');
      expect(errorFields(msgs[0]?.body as Buffer).C, sql).toBe(code);
    }
    c.end();
    expect((await ctx.client.query('SELECT count(*)::INTEGER AS n FROM exported WHERE id = 9')).rows[0].n).toBe(0);
    expect((await ctx.client.query("SELECT count(*)::INTEGER AS n FROM _cot_steps WHERE session_id = 'rt'")).rows[0].n).toBe(2);
  });
});
