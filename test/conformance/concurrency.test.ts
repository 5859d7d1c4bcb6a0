import type pg from 'pg';
import postgres from 'postgres';
import { describe, expect, it } from 'vitest';
import { chainOf, chainProblems, useConformanceServer } from '../fixtures/conformance.js';

/**
 * Many connections appending to one session at once: the server serialises
 * every chain, so the steps come out without gaps, repeats or forks, and
 * each connection's steps keep the order it sent them in.
 */
const s = useConformanceServer();

const CONNECTIONS = 8;

let opened: Promise<pg.Client[]> | null = null;
/** The connections that append at once, the same ones for every test. */
function writers(): Promise<pg.Client[]> {
  opened ??= Promise.all(Array.from({ length: CONNECTIONS }, () => s.fresh()));
  return opened;
}

/** The contents of a session, in chain order. */
async function contents(c: pg.Client, session: string): Promise<string[]> {
  return (await c.query('SELECT content FROM _cot_steps WHERE session_id = $1 ORDER BY step_index', [session])).rows.map((r) => r.content as string);
}

/** Whether each writer's items appear in the order it sent them. */
function inSendingOrder(order: readonly string[], writer: string): boolean {
  const mine = order.filter((x) => x.startsWith(`${writer}-`)).map((x) => Number(x.split('-')[1]));
  return mine.every((n, i) => i === 0 || n > (mine[i - 1] as number));
}

describe('concurrent appends to one session', () => {
  it('from several connections, one row at a time, leave one chain without gaps or forks', async () => {
    const perConnection = 25;
    const clients = await writers();
    await Promise.all(
      clients.map(async (c, w) => {
        for (let i = 0; i < perConnection; i++) {
          await c.query('INSERT INTO _cot_steps (session_id, step_type, content) VALUES ($1, $2, $3)', ['shared', 'Action', `w${w}-${i}`]);
        }
      }),
    );
    const reader = await s.as();
    const links = await chainOf(reader, 'shared');
    expect(links).toHaveLength(CONNECTIONS * perConnection);
    expect(chainProblems(links)).toEqual([]);
    // No fork: one step per index, and every hash appears once.
    expect(new Set(links.map((l) => l.current_hash)).size).toBe(links.length);
    const order = await contents(reader, 'shared');
    expect(new Set(order).size).toBe(order.length);
    for (let w = 0; w < CONNECTIONS; w++) expect(inSendingOrder(order, `w${w}`), `w${w}`).toBe(true);
    expect((await reader.query("SELECT valid, step_count FROM cot_verify('shared')")).rows).toEqual([{ valid: true, step_count: String(links.length) }]);
  });

  it('in multi-row statements from several connections keep each statement’s rows in order, and the chain whole', async () => {
    const clients = await writers();
    await Promise.all(
      clients.map(async (c, w) => {
        for (let i = 0; i < 5; i++) {
          await c.query('INSERT INTO _cot_steps (session_id, step_type, content) VALUES ($1, $2, $3), ($1, $2, $4), ($1, $2, $5)', [
            'batched',
            'Reasoning',
            `b${w}-${3 * i}`,
            `b${w}-${3 * i + 1}`,
            `b${w}-${3 * i + 2}`,
          ]);
        }
      }),
    );
    const reader = await s.as();
    const links = await chainOf(reader, 'batched');
    expect(links).toHaveLength(CONNECTIONS * 15);
    expect(chainProblems(links)).toEqual([]);
    const order = await contents(reader, 'batched');
    for (let w = 0; w < CONNECTIONS; w++) expect(inSendingOrder(order, `b${w}`), `b${w}`).toBe(true);
  });

  it('in transaction blocks committed at once are chained whole, each block’s rows in order', async () => {
    const clients = await writers();
    await Promise.all(
      clients.map(async (c, w) => {
        await c.query('BEGIN');
        for (let i = 0; i < 4; i++) {
          await c.query('INSERT INTO _cot_steps (session_id, step_type, content) VALUES ($1, $2, $3)', ['blocks', 'Observation', `t${w}-${i}`]);
        }
        await c.query('COMMIT');
      }),
    );
    const reader = await s.as();
    const links = await chainOf(reader, 'blocks');
    expect(links).toHaveLength(CONNECTIONS * 4);
    expect(chainProblems(links)).toEqual([]);
    const order = await contents(reader, 'blocks');
    for (let w = 0; w < CONNECTIONS; w++) expect(inSendingOrder(order, `t${w}`), `t${w}`).toBe(true);
  });

  it('through a postgres.js pool, to many sessions at once, give each its own whole chain', async () => {
    const sql = postgres({ host: '127.0.0.1', port: s.server.port, user: 'cotwire', database: 'cotwire', max: CONNECTIONS, onnotice: () => undefined });
    try {
      await Promise.all(
        Array.from({ length: 80 }, (_, i) => sql`INSERT INTO _cot_steps (session_id, step_type, content) VALUES (${`pool-${i % 5}`}, 'Action', ${String(i)})`),
      );
    } finally {
      await sql.end();
    }
    const reader = await s.as();
    for (let k = 0; k < 5; k++) {
      const links = await chainOf(reader, `pool-${k}`);
      expect(links, `pool-${k}`).toHaveLength(16);
      expect(chainProblems(links), `pool-${k}`).toEqual([]);
    }
  });
});

describe('the global sequence under concurrency', () => {
  it('gives every row of every ledger its own ledger_seq, 1..n without gaps, once the appends are done', async () => {
    const reader = await s.as();
    const ledgers = (
      await reader.query("SELECT table_name FROM information_schema.columns WHERE column_name = 'ledger_seq' AND table_schema = 'public' ORDER BY 1")
    ).rows.map((r) => r.table_name as string);
    expect(ledgers).toContain('_cot_steps');
    const union = ledgers.map((t) => `SELECT ledger_seq FROM ${t}`).join(' UNION ALL ');
    // The server appends records of its own (checkpoints) meanwhile: wait until what is visible is whole.
    await expect
      .poll(
        async () => {
          const seqs = (await reader.query(`SELECT ledger_seq FROM (${union}) t ORDER BY 1`)).rows.map((r) => Number(r.ledger_seq));
          return seqs.every((v, i) => v === i + 1) ? seqs.length : -seqs.length;
        },
        { timeout: 10_000 },
      )
      .toBeGreaterThan(CONNECTIONS * (25 + 15 + 4));
  });
});
