import { beforeAll, describe, expect, it } from 'vitest';
import { countOf, ledgerConfig, sqlstate, until, useConformanceServer } from '../fixtures/conformance.js';

/**
 * Semantic search over reasoning (cot_search, cot_similar) with the built-in
 * embedder: the steps selected for an embedding are embedded in the
 * background, and searched by the words they share with a text.
 */
// Sample rate 0: only the critical step types are selected, so which steps have vectors is known.
const s = useConformanceServer({ ledger: ledgerConfig({ embeddingSampleRate: 0 }) });

const STEPS: ReadonlyArray<readonly [session: string, agent: string, type: string, content: string]> = [
  ['s-price', 'pricer', 'Decision', 'Raise the price of the premium plan to 49 dollars after comparing competitor pricing'],
  ['s-price', 'pricer', 'Observation', 'The premium plan page had 1200 visits yesterday'],
  ['s-price', 'pricer', 'Action', 'Call the billing API to update the plan'],
  ['s-db', 'migrator', 'Decision', 'Run the database schema migration during the maintenance window'],
  ['s-db', 'migrator', 'Error', 'Migration failed: column user_email already exists in table accounts'],
  ['s-db', 'migrator', 'Correction', 'Skip the existing column and rerun the migration'],
  ['s-pay', 'payer', 'Error', 'Payment API returned 503 while retrying the card charge'],
  ['s-pay', 'payer', 'Decision', 'Refund the customer for the duplicated order'],
  ['s-pay', 'payer', 'FinalAnswer', 'The customer was refunded and the order closed'],
];
const SELECTED = STEPS.filter(([, , type]) => type !== 'Observation').length;

beforeAll(async () => {
  const c = await s.as();
  for (const [session, agent, type, content] of STEPS) {
    await c.query('INSERT INTO _cot_steps (session_id, agent_id, step_type, content) VALUES ($1, $2, $3, $4)', [session, agent, type, content]);
  }
});

/** Waits for the background embedder to have embedded every selected step. */
async function embedded(): Promise<void> {
  const c = await s.as();
  await until('every selected step to have its vector', async () => (await countOf(c, 'SELECT count(*) FROM _cot_embeddings')) >= SELECTED);
}

const contents = async (sql: string, values: unknown[] = []): Promise<string[]> =>
  (await (await s.as()).query(sql, values)).rows.map((r) => r.content as string);

describe('which steps are embedded', () => {
  it('is decided at append, in has_embedding: the critical types when the sample rate is 0', async () => {
    const c = await s.as();
    const rows = (await c.query('SELECT step_type, has_embedding FROM _cot_steps ORDER BY ledger_seq')).rows;
    expect(rows.map((r) => r.has_embedding)).toEqual(STEPS.map(([, , type]) => type !== 'Observation'));
  });

  it('gets each selected step one vector of the configured model, in the background', async () => {
    await embedded();
    const c = await s.as();
    const vectors = await c.query('SELECT e.model, e.dimensions, s.has_embedding FROM _cot_embeddings e JOIN _cot_steps s USING (trace_id)');
    expect(vectors.rows).toHaveLength(SELECTED);
    expect(vectors.rows.every((r) => r.model === 'cotwire-hashed-v1' && r.dimensions === 384 && r.has_embedding === true)).toBe(true);
  });
});

describe('cot_search', () => {
  it('ranks steps by the words they share with the text, best first, with every step column and the similarity', async () => {
    await embedded();
    expect((await contents("SELECT content FROM cot_search('decisions about pricing', 3)"))[0]).toMatch(/^Raise the price/);
    expect((await contents("SELECT content FROM cot_search('why did the migration fail', 1)"))[0]).toMatch(/^Migration failed/);
    expect(await contents('SELECT content FROM cot_search($1, $2)', ['refund the customer', 1])).toEqual(['Refund the customer for the duplicated order']);
    const r = await (await s.as()).query("SELECT * FROM cot_search('the customer', 10)");
    const sims = r.rows.map((x) => Number(x.similarity));
    expect([...sims].sort((a, b) => b - a)).toEqual(sims);
    expect(r.fields.map((f) => f.name).slice(0, 3)).toEqual(['trace_id', 'org_id', 'agent_id']);
    expect(r.fields.at(-1)?.name).toBe('similarity');
  });

  it('filters by step types, agent, session, time and a similarity floor', async () => {
    await embedded();
    const c = await s.as();
    const decisions = await c.query("SELECT step_type FROM cot_search('the customer', 10, step_types := ARRAY['Decision'])");
    expect(decisions.rows.map((r) => r.step_type)).toEqual(['Decision', 'Decision', 'Decision']);
    expect(await contents("SELECT content FROM cot_search('the customer', 10, agent_id := 'migrator')")).toHaveLength(3);
    expect(await contents("SELECT content FROM cot_search('the customer', 10, session_id := 's-pay', step_types := ARRAY['Error'])")).toEqual([
      'Payment API returned 503 while retrying the card charge',
    ]);
    expect(await contents("SELECT content FROM cot_search('refund the customer', 10, min_similarity := 0.99)")).toEqual([]);
    expect(await contents("SELECT content FROM cot_search('the customer', 10, since := '2999-01-01T00:00:00Z')")).toEqual([]);
  });
});

describe('cot_similar', () => {
  it('finds the steps most like a given one, leaving it out', async () => {
    await embedded();
    const c = await s.as();
    const { rows } = await c.query("SELECT trace_id FROM _cot_steps WHERE content LIKE 'Migration failed%'");
    const similar = await c.query('SELECT content FROM cot_similar($1, 2)', [rows[0].trace_id]);
    expect(similar.rows).toHaveLength(2);
    expect(similar.rows[0].content).toMatch(/migration/i);
    expect(similar.rows.some((r) => /^Migration failed/.test(r.content))).toBe(false);
  });

  it('refuses a step that has no vector with 22023, saying why', async () => {
    const c = await s.as();
    const observation = (await c.query("SELECT trace_id FROM _cot_steps WHERE step_type = 'Observation'")).rows[0].trace_id as string;
    const err = (await c.query('SELECT * FROM cot_similar($1, 2)', [observation]).catch((e: unknown) => e)) as { code?: string; message?: string };
    expect(err.code).toBe('22023');
    expect(err.message).toMatch(/has no vector: it was not selected for an embedding/);
  });
});

describe('the vectors', () => {
  it('are the server’s alone: clients read them, every write is refused with 42501, and nothing changes', async () => {
    await embedded();
    const c = await s.as();
    for (const sql of [
      'INSERT INTO _cot_embeddings SELECT * FROM _cot_embeddings LIMIT 1',
      "UPDATE _cot_embeddings SET model = 'forged'",
      'DELETE FROM _cot_embeddings',
      'TRUNCATE _cot_embeddings',
      'DROP TABLE _cot_embeddings',
      'ALTER TABLE _cot_embeddings ADD COLUMN x INTEGER',
    ]) {
      expect(await sqlstate(c.query(sql)), sql).toBe('42501');
    }
    expect((await c.query('SELECT count(*) AS n, min(model) AS m FROM _cot_embeddings')).rows.map((r) => [Number(r.n), r.m])).toEqual([
      [SELECTED, 'cotwire-hashed-v1'],
    ]);
  });
});
