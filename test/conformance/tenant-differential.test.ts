import type pg from 'pg';
import { beforeAll, describe, expect, it } from 'vitest';
import { rng } from '../fixtures/rng.js';
import { useConformanceServer, user } from '../fixtures/conformance.js';

/**
 * The differential test of tenants: generated queries over two
 * organisations' steps, each run by a reader with an org_id on `_cot_steps`
 * and by an admin on a plain table that holds that organisation's rows
 * only. The two answers must be equal, and the reader's must hold nothing
 * of the other organisation. `npm test` runs a seeded sample of
 * COTWIRE_TENANT_COUNT queries (2,000 by default) on each engine; `npm run
 * fuzz` runs COTWIRE_FUZZ_COUNT of them.
 */
const COUNT = Number(process.env['COTWIRE_FUZZ_COUNT'] ?? process.env['COTWIRE_TENANT_COUNT'] ?? 2000);
const SEED = Number(process.env['COTWIRE_FUZZ_SEED'] ?? 20261130);
const TIMEOUT_MS = Math.max(600_000, COUNT * 60);

const s = useConformanceServer({
  users: [user('ra', 'reader', { orgId: 'a' }), user('rb', 'reader', { orgId: 'b' }), user('boss', 'admin')],
});

const ORGS = ['a', 'b'] as const;
/** What only each organisation's rows hold: a reader's answer must never show the other's. */
const secret = (org: string, n: number): string => `zq-${org}-secret-${n}`;
const traceIds = new Map<string, Set<string>>();

beforeAll(async () => {
  const boss = await s.as('boss');
  for (const org of ORGS) traceIds.set(org, new Set());
  const types = ['Observation', 'Reasoning', 'ToolCall', 'Decision', 'FinalAnswer'];
  let n = 0;
  for (let session = 0; session < 4; session++) {
    for (const org of ORGS) {
      const rows: string[] = [];
      const values: unknown[] = [];
      for (let i = 0; i < 3 + session; i++) {
        n++;
        const p = values.length;
        rows.push(`($${p + 1}, $${p + 2}, $${p + 3}, $${p + 4}, $${p + 5}, $${p + 6})`);
        values.push(org, `agent-${org}${i % 2}`, `${org}-${session}`, types[(i + session) % types.length], secret(org, n), (i % 5) / 4);
      }
      const r = await boss.query(
        `INSERT INTO _cot_steps (org_id, agent_id, session_id, step_type, content, confidence) VALUES ${rows.join(', ')} RETURNING trace_id`,
        values,
      );
      for (const row of r.rows) traceIds.get(org)?.add(row.trace_id as string);
    }
  }
  // Rows of no organisation: no scoped reader reads them either.
  await boss.query(
    "INSERT INTO _cot_steps (session_id, step_type, content) VALUES ('none-0', 'Observation', 'zq-none-secret'), ('none-0', 'Decision', 'zq-none-secret')",
  );
  for (const org of ORGS) await boss.query(`CREATE TABLE steps_${org} AS SELECT * FROM _cot_steps WHERE org_id = '${org}'`);
});

/** Generated queries over a table named {T}, and the parameters each takes. */
class TenantQueries {
  private readonly random: () => number;
  constructor(seed: number) {
    this.random = rng(seed);
  }

  private pick<T>(xs: readonly T[]): T {
    return xs[Math.floor(this.random() * xs.length)] as T;
  }

  private where(alias: string): string {
    const q = alias === '' ? '' : `${alias}.`;
    return this.pick([
      '',
      ` WHERE ${q}org_id = 'b'`,
      ` WHERE ${q}org_id <> 'a'`,
      ` WHERE ${q}org_id IS NULL`,
      ` WHERE ${q}org_id IS DISTINCT FROM 'a'`,
      ` WHERE ${q}session_id LIKE 'b%'`,
      ` WHERE ${q}step_index > 1 OR true`,
      ` WHERE NOT (${q}org_id = 'a')`,
      ` WHERE ${q}content LIKE '%secret%'`,
      ` WHERE ${q}session_id IN (SELECT session_id FROM {T} WHERE step_type = 'Decision')`,
      ` WHERE EXISTS (SELECT 1 FROM {T} e WHERE e.org_id = 'b')`,
      ` WHERE ${q}confidence >= $1`,
      ` WHERE ${q}session_id = $1 OR ${q}session_id = 'a-1'`,
    ]);
  }

  private from(): { text: string; alias: string } {
    return this.pick([
      { text: '{T}', alias: '' },
      { text: '{T} t', alias: 't' },
      { text: 'public.{T} t', alias: 't' },
      { text: '(SELECT * FROM {T}) t', alias: 't' },
      { text: '{T} t JOIN {T} u ON u.session_id = t.session_id AND u.step_index = t.step_index', alias: 't' },
      { text: '{T} t LEFT JOIN {T} u ON u.session_id = t.session_id AND u.step_index = t.step_index + 1', alias: 't' },
      { text: '{T} t, LATERAL (SELECT count(*) AS n FROM {T} z WHERE z.session_id = t.session_id) l', alias: 't' },
      { text: '{T} t CROSS JOIN (SELECT max(content) AS top FROM {T}) m', alias: 't' },
    ]);
  }

  private select(alias: string): string {
    const q = alias === '' ? '' : `${alias}.`;
    return this.pick([
      `${q}session_id, ${q}content`,
      `${q}trace_id, ${q}org_id, ${q}step_index`,
      'count(*) AS n',
      `${q}org_id, count(*) AS n`,
      `max(${q}content) AS c, min(${q}session_id) AS s`,
      `string_agg(${q}content, ',' ORDER BY ${q}content) AS all_content`,
      `${q}agent_id, sum(${q}confidence) AS total`,
      `${q}*`,
    ]);
  }

  /** One query over {T}: its text, its parameters, and whether to send it over the extended protocol. */
  next(): { text: string; params: unknown[]; extended: boolean } {
    const from = this.from();
    const select = this.select(from.alias);
    const where = this.where(from.alias);
    const q = from.alias === '' ? '' : `${from.alias}.`;
    const grouped = /count\(|max\(|sum\(|string_agg\(/.test(select) && /org_id,|agent_id,/.test(select) ? ` GROUP BY ${select.split(',')[0]}` : '';
    let text = `SELECT ${select} FROM ${from.text}${where}${grouped}`;
    if (grouped === '' && /count\(|max\(|sum\(|string_agg\(/.test(select) && /\*|session_id,|trace_id,/.test(select))
      text = `SELECT count(*) AS n FROM ${from.text}${where}`;
    text = this.pick([
      text,
      text,
      `WITH w AS (${text}) SELECT * FROM w`,
      `${text} UNION ALL ${text}`,
      `SELECT * FROM (${text}) sub`,
      `SELECT (SELECT count(*) FROM {T} WHERE org_id = 'b') AS b_rows, (SELECT count(*) FROM {T}) AS rows`,
      `TABLE {T}`,
      `SELECT ${q === '' ? '' : ''}count(*) AS n FROM {T} WHERE trace_id IN (SELECT trace_id FROM {T})`,
    ]);
    const params = text.includes('$1') ? [text.includes('confidence') ? this.pick([0, 0.5, 1]) : this.pick(['b-1', 'a-2', 'none-0'])] : [];
    return { text, params, extended: params.length > 0 || this.random() < 0.5 };
  }
}

/** An answer as comparable text: its rows sorted, or its SQLSTATE. */
async function answer(c: pg.Client, text: string, params: unknown[], extended: boolean): Promise<string> {
  try {
    const r = extended ? await c.query({ text, values: params }) : await c.query(text);
    return r.rows
      .map((row) => JSON.stringify(row))
      .sort()
      .join('\n');
  } catch (err) {
    return `error ${(err as { code?: string }).code}`;
  }
}

describe('a reader with an org_id, against a table of its organisation’s rows', () => {
  it(
    `answers ${COUNT} generated queries as the filtered table does, and never with the other organisation’s rows`,
    async () => {
      const queries = new TenantQueries(SEED);
      const boss = await s.as('boss');
      const readers = { a: await s.as('ra'), b: await s.as('rb') };
      const mismatches: string[] = [];
      let answered = 0;
      for (let i = 0; i < COUNT; i++) {
        const { text, params, extended } = queries.next();
        const org = i % 2 === 0 ? 'a' : 'b';
        const other = org === 'a' ? 'b' : 'a';
        const scoped = await answer(readers[org], text.replaceAll('{T}', '_cot_steps'), params, extended);
        // The admin's tables are not in the ledgers' schema on every engine: the copy is read by its name alone.
        const filtered = await answer(boss, text.replaceAll('public.{T}', '{T}').replaceAll('{T}', `steps_${org}`), params, extended);
        if (!scoped.startsWith('error')) answered++;
        const leaked =
          scoped.includes(`zq-${other}-secret`) || scoped.includes('zq-none-secret') || [...(traceIds.get(other) ?? [])].some((t) => scoped.includes(t));
        if (leaked || scoped !== filtered)
          mismatches.push(
            `${org} ${extended ? 'extended' : 'simple'}: ${text}${leaked ? ' LEAKED' : ''}\n  scoped:   ${scoped.slice(0, 200)}\n  filtered: ${filtered.slice(0, 200)}`,
          );
        if (mismatches.length >= 5) break;
      }
      expect(mismatches).toEqual([]);
      // The generator's queries mostly run: a sample of refusals would prove nothing.
      expect(answered).toBeGreaterThan(COUNT * 0.9);
    },
    TIMEOUT_MS,
  );
});
