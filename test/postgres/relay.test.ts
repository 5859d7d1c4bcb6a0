import pg from 'pg';
import { serialize } from 'pg-protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { usePgServer } from '../fixtures/pg-server.js';
import { rng } from '../fixtures/rng.js';
import { bindFormats, errorFields, type RawMessage, WireClient } from '../fixtures/wire.js';

/**
 * What cotwire relays to a client's backend, it answers as PostgreSQL does,
 * message for message: sent to cotwire and to the same PostgreSQL directly,
 * each exchange gets the same messages back, rows byte for byte. The
 * exchanges are generated: statements of 0 to 2,500 rows (across cotwire's
 * batches), NULLs, notices among the rows, errors at Bind and after some
 * rows, ranges and records, in text, in binary and in both (a format per
 * column), whole or a few rows per Execute, one or two statements per Sync,
 * named statements bound again and again, an unnamed one bound again in the
 * next exchange, statements PostgreSQL refuses at their Parse, and as simple
 * queries.
 */

const ctx = usePgServer();
let superuser: pg.Client;

beforeAll(async () => {
  superuser = new pg.Client({ connectionString: ctx.engine.url });
  await superuser.connect();
  // A function that speaks among the rows, made by the operator where any role can call it.
  await superuser.query(
    `CREATE FUNCTION public.relay_noisy(i int) RETURNS int LANGUAGE plpgsql AS $$ BEGIN IF i % 400 = 0 THEN RAISE NOTICE 'row %', i; END IF; RETURN i; END $$`,
  );
  await superuser.query('GRANT EXECUTE ON FUNCTION public.relay_noisy(int) TO PUBLIC');
});
afterAll(async () => {
  await superuser?.end();
});

interface Case {
  readonly name: string;
  /** Sent after startup, in one write. */
  readonly messages: Buffer;
  /** The message type that ends the exchange's answer. */
  readonly ends: 'Z';
  /** How many of them: one per Sync. */
  readonly syncs?: number;
}

const pick = <T>(r: () => number, xs: readonly T[]): T => xs[Math.floor(r() * xs.length)] as T;

/** A SELECT of `n` rows, with the shapes and failures a relay must carry. */
function statement(r: () => number, n: number): { sql: string; params: string[]; columns: number } {
  const failAt = r() < 0.25 ? 1 + Math.floor(r() * Math.max(n, 1)) : null;
  const value = failAt === null ? 'i' : `(i / (i - ${failAt}) * 0 + i)`;
  const shape = pick(r, [
    `SELECT ${value} AS i, repeat('x', i % 97) AS body, CASE WHEN i % 3 = 0 THEN NULL ELSE i * 0.5 END AS half`,
    `SELECT public.relay_noisy(${value}) AS i, timestamptz '2026-01-01 12:00:00+00' - interval '1 day 1 second' * i AS at, ARRAY[i, NULL, i + 1] AS a`,
    `SELECT ${value} AS i, (i % 2 = 0) AS even, 'é€' || i::text AS u, '\\x00ff'::bytea AS b, '{"k": 1}'::jsonb AS j`,
    // Ranges, a multirange, records and composite arrays: no text conversion can give their binary form.
    `SELECT int4range(${value}, i + 5) AS r, numrange(i / 3.0, NULL) AS n, tstzrange('2026-01-01', '2026-01-01'::date + i) AS t, int4multirange(int4range(1, i + 2)) AS m, ROW(i, 'x' || i, NULL::int) AS rec, ARRAY[ROW(i, true)] AS recs`,
  ]);
  const columns = shape.match(/ AS \w+/g)?.length ?? 0;
  // A table that is not there: PostgreSQL refuses the statement at its Parse.
  if (r() < 0.05) return { sql: `${shape} FROM generate_series(1, $1::int) i, relay_missing`, params: [String(n)], columns };
  if (r() < 0.15) return { sql: `${shape} FROM generate_series(1, $1::int) i`, params: [pick(r, ['x', '-', '1e3'])], columns }; // fails at Bind
  return { sql: `${shape} FROM generate_series(1, $1::int) i`, params: [String(n)], columns };
}

function generate(seed: number): Case {
  const r = rng(seed);
  const rows = () => pick(r, [0, 1, 2, 999, 1000, 1001, 2500]);
  const kind = pick(r, ['extended', 'extended', 'portion', 'binary', 'mixed', 'named', 'two', 'simple'] as const);
  if (kind === 'simple') {
    const a = statement(r, rows());
    const b = statement(r, rows());
    const inline = (s: { sql: string; params: string[] }) => s.sql.replace('$1::int', `'${s.params[0]}'::int`);
    // One statement alone is passed to PostgreSQL whole, its answer back as it came.
    const text = r() < 0.5 ? inline(a) : `${inline(a)}; ${inline(b)}`;
    return { name: `${seed} simple: ${text}`, messages: serialize.query(text), ends: 'Z' };
  }
  const parts: Buffer[] = [];
  const names: string[] = [];
  if (kind === 'mixed') {
    // A format per column, text and binary mixed: PostgreSQL's own binary for every type, ranges and records too.
    const s = statement(r, rows());
    const formats = Array.from({ length: s.columns }, () => (r() < 0.5 ? 1 : 0));
    parts.push(
      serialize.parse({ text: s.sql, types: [] }),
      bindFormats(formats, s.params),
      serialize.describe({ type: 'P' }),
      serialize.execute({}),
      serialize.sync(),
    );
    return { name: `${seed} mixed [${formats.join('')}]: ${s.sql} [${s.params.join(', ')}]`, messages: Buffer.concat(parts), ends: 'Z' };
  }
  if (kind === 'named') {
    // A named statement bound again and again (cotwire parses it once), then closed.
    const s = statement(r, rows());
    const name = `relay_${seed}`;
    parts.push(serialize.parse({ name, text: s.sql, types: [] }), serialize.describe({ type: 'S', name }));
    for (let e = 0; e < 3; e++) parts.push(serialize.bind({ statement: name, values: s.params }), serialize.describe({ type: 'P' }), serialize.execute({}));
    // A Sync between two binds of it: the statement outlives the exchange.
    parts.push(
      serialize.sync(),
      serialize.bind({ statement: name, values: s.params }),
      serialize.execute({}),
      serialize.close({ type: 'S', name }),
      serialize.sync(),
    );
    return { name: `${seed} named: ${s.sql} [${s.params.join(', ')}]`, messages: Buffer.concat(parts), ends: 'Z' };
  }
  for (let k = 0; k < (kind === 'two' ? 2 : 1); k++) {
    const s = statement(r, rows());
    names.push(`${s.sql} [${s.params.join(', ')}]`);
    const binary = kind === 'binary';
    parts.push(serialize.parse({ text: s.sql, types: [] }), serialize.bind({ values: s.params, binary }), serialize.describe({ type: 'P' }));
    if (kind === 'portion') {
      // A client that takes a few rows at a time (a cursor): Execute with a limit, and again.
      for (let e = 0; e < 3; e++) parts.push(serialize.execute({ rows: 1 + Math.floor(r() * 700) }));
    } else parts.push(serialize.execute({}));
  }
  parts.push(serialize.sync());
  if (kind === 'extended' && r() < 0.5) {
    // The unnamed statement again, in the next exchange: described, then bound without a Parse.
    parts.push(
      serialize.describe({ type: 'S' }),
      serialize.bind({ values: [String(rows())] }),
      serialize.describe({ type: 'P' }),
      serialize.execute({}),
      serialize.sync(),
    );
    return { name: `${seed} ${kind}: ${names.join(' | ')}, then again`, messages: Buffer.concat(parts), ends: 'Z', syncs: 2 };
  }
  return { name: `${seed} ${kind}: ${names.join(' | ')}`, messages: Buffer.concat(parts), ends: 'Z' };
}

/** The answer as a client compares it: every message after startup, errors by SQLSTATE and text. */
function answer(messages: readonly RawMessage[]): string[] {
  return messages.map((m) => {
    if (m.type === 'E' || m.type === 'N') {
      const f = errorFields(m.body);
      return `${m.type} ${f.S} ${f.C} ${f.M}`;
    }
    return `${m.type} ${m.body.toString('hex')}`;
  });
}

async function exchange(client: WireClient, c: Case): Promise<string[]> {
  client.write(c.messages);
  // A simple query of two statements that fails in its first ends at its first ReadyForQuery, as any does.
  const got = await client.until(c.ends);
  for (let k = 1; k < (c.syncs ?? 1); k++) got.push(...(await client.until(c.ends)));
  return answer(got);
}

describe('the relay to a client backend', () => {
  it('answers each generated exchange with the messages PostgreSQL gives, rows byte for byte', async () => {
    const viaCotwire = await WireClient.startup(ctx.server.port);
    const direct = await WireClient.startup(ctx.engine.pg.port, { user: 'postgres', database: 'postgres' });
    // Both sessions format dates alike; the superuser's own session needs nothing else.
    for (const c of [viaCotwire, direct]) {
      c.write(serialize.query("SET TimeZone = 'UTC'; SET DateStyle = 'ISO, MDY'"));
      await c.until('Z');
    }
    viaCotwire.drain();
    direct.drain();
    const kinds = new Map<string, number>();
    for (let seed = 1; seed <= 120; seed++) {
      const c = generate(seed);
      const kind = c.name.split(' ')[1] as string;
      kinds.set(kind, (kinds.get(kind) ?? 0) + 1);
      const theirs = await exchange(direct, c);
      const ours = await exchange(viaCotwire, c);
      expect(ours, c.name).toEqual(theirs);
    }
    // Every kind of exchange was among them.
    expect([...kinds.keys()].sort()).toEqual(['binary:', 'extended:', 'mixed', 'named:', 'portion:', 'simple:', 'two:']);
    viaCotwire.end();
    direct.end();
  });

  it.each([
    // Parse, Bind, Execute and Sync in one write: the Execute and the Sync go to the backend with the Bind.
    [
      'an extended exchange',
      Buffer.concat([
        serialize.parse({ text: "SELECT i, repeat('x', 200) AS body FROM generate_series(1, $1::int) i", types: [] }),
        serialize.bind({ values: ['300000'] }),
        serialize.execute({}),
        serialize.sync(),
      ]),
    ],
    // A simple query of one statement, passed to PostgreSQL whole and its answer back as it came.
    ['a simple query', serialize.query("SELECT i, repeat('x', 200) AS body FROM generate_series(1, 300000) i")],
  ])('holds PostgreSQL back while a client reads slowly, rather than the result in memory, and then sends it all: %s', async (_, request) => {
    const rows = 300_000;
    const slow = await WireClient.startup(ctx.server.port, { application_name: 'relay-slow-reader' });
    slow.socket.pause();
    slow.write(request);
    // PostgreSQL's backend waits to write to cotwire, which waits for the client: nothing in between holds the result.
    // Seen twenty times in a row, a second apart end to end: a relay that kept reading would let the backend finish.
    const waitEvent = async (): Promise<string> => {
      const { rows: seen } = await superuser.query<{ state: string; wait_event: string | null }>(
        "SELECT state, wait_event FROM pg_catalog.pg_stat_activity WHERE application_name = 'relay-slow-reader'",
      );
      return `${seen[0]?.state} ${seen[0]?.wait_event}`;
    };
    const deadline = Date.now() + 30_000;
    let inARow = 0;
    while (inARow < 20) {
      const now = await waitEvent();
      if (now === 'active ClientWrite') inARow++;
      else if (inARow > 0) throw new Error(`the backend went on to "${now}" while the client read nothing`);
      if (Date.now() > deadline) throw new Error(`the backend never waited for cotwire to read: ${now}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    const received = slow.drain();
    expect(received.filter((m) => m.type === 'D').length).toBeLessThan(rows);
    slow.socket.resume();
    const got = [...received, ...(await slow.until('Z', 60_000))];
    expect(got.filter((m) => m.type === 'D')).toHaveLength(rows);
    expect(got.find((m) => m.type === 'C')?.body.toString('utf8')).toBe(`SELECT ${rows}\0`);
    slow.end();
  });
});
