import { DuckDBInstance } from '@duckdb/node-api';
import { describe, expect, it } from 'vitest';
import { DEFAULTS } from '../../src/config/schema.js';
import type pg from 'pg';
import { makeScramVerifier } from '../../src/session/scram.js';
import { startTestServer, type TestServer } from '../fixtures/server.js';

/** A small agent history: the steps a search should find, among others that share some of their words. */
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

async function seeded(overrides: Record<string, unknown> = {}, as: pg.ClientConfig = {}): Promise<TestServer> {
  const server = await startTestServer({ ledger: { ...DEFAULTS.ledger, embeddingSampleRate: 0 }, ...overrides });
  const c = await server.client(as);
  for (const [session, agent, type, content] of STEPS) {
    await c.query('INSERT INTO _cot_steps (session_id, agent_id, step_type, content) VALUES ($1, $2, $3, $4)', [session, agent, type, content]);
  }
  await waitForVectors(server, STEPS.filter(([, , type]) => type !== 'Observation').length, as);
  return server;
}

async function waitForVectors(server: TestServer, n: number, as: pg.ClientConfig = {}): Promise<void> {
  const c = await server.client(as);
  for (let i = 0; i < 200; i++) {
    const { rows } = await c.query('SELECT count(*)::int AS n FROM _cot_embeddings');
    if (rows[0].n >= n) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`fewer than ${n} vectors after 10 s`);
}

describe('semantic search over the ledger (built-in embedder)', () => {
  it('embeds the selected steps in the background, and cot_search() ranks them by meaning of their words', async () => {
    await using server = await seeded();
    const c = await server.client();
    const vectors = await c.query(
      'SELECT e.model, e.dimensions, s.step_type, s.has_embedding FROM _cot_embeddings e JOIN _cot_steps s USING (trace_id) ORDER BY s.ledger_seq',
    );
    // The rate is 0 here: only the critical types are embedded, each once.
    expect(vectors.rows).toHaveLength(8);
    expect(vectors.rows.every((r) => r.model === 'cotwire-hashed-v1' && r.dimensions === 384 && r.has_embedding === true)).toBe(true);
    const top = async (sql: string, params: unknown[] = []) => (await c.query(sql, params)).rows.map((r) => r.content as string);
    expect((await top("SELECT content FROM cot_search('decisions about pricing', 3)"))[0]).toMatch(/^Raise the price/);
    expect((await top("SELECT content FROM cot_search('why did the migration fail', 1)"))[0]).toMatch(/^Migration failed/);
    // A parameter as the query text, and k as a parameter.
    expect(await top('SELECT content FROM cot_search($1, $2)', ['refund the customer', 1])).toEqual(['Refund the customer for the duplicated order']);
    // Filters: step types, agent, session, minimum similarity; best first, with the similarity.
    const decisions = await c.query("SELECT step_type, agent_id, similarity FROM cot_search('the customer', 10, step_types := ['Decision'])");
    expect(decisions.rows.map((r) => r.step_type)).toEqual(['Decision', 'Decision', 'Decision']);
    const sims = decisions.rows.map((r) => Number(r.similarity));
    expect([...sims].sort((a, b) => b - a)).toEqual(sims);
    expect(await top("SELECT content FROM cot_search('the customer', 10, agent_id := 'migrator')")).toHaveLength(3);
    expect(await top("SELECT content FROM cot_search('the customer', 10, session_id := 's-pay', step_types := ['Error'])")).toEqual([
      'Payment API returned 503 while retrying the card charge',
    ]);
    expect(await top("SELECT content FROM cot_search('refund the customer', 10, min_similarity := 0.3)")).toContain(
      'Refund the customer for the duplicated order',
    );
    expect(await top("SELECT content FROM cot_search('refund the customer', 10, min_similarity := 0.99)")).toEqual([]);
    const future = await top("SELECT content FROM cot_search('the customer', 10, since := now() + INTERVAL 1 DAY)");
    expect(future).toEqual([]);
    // docs/analytics.md's Grafana panel, as Grafana expands its macros and variables.
    const panel = await c.query(
      `SELECT created_at, agent_id, session_id, step_type, content, round(similarity, 3) AS similarity
       FROM cot_search('refund the customer''s order', 50,
                       since := '2000-01-01T00:00:00Z', until := '2999-01-01T00:00:00Z', min_similarity := 0.2,
                       step_types := ['Decision','FinalAnswer'])`,
    );
    expect(panel.rows[0].content).toBe('Refund the customer for the duplicated order');
    expect(panel.rows.every((r) => ['Decision', 'FinalAnswer'].includes(r.step_type))).toBe(true);
    // A query text of megabytes is embedded by its first 8,000 characters, as a step's would be.
    expect((await top("SELECT content FROM cot_search(repeat('refund the customer ', 500000), 1)"))[0]).toBe('Refund the customer for the duplicated order');
    // Every step column, then the similarity.
    const columns = (await c.query("SELECT * FROM cot_search('price', 1)")).fields.map((f) => f.name);
    expect(columns.slice(0, 3)).toEqual(['trace_id', 'org_id', 'agent_id']);
    expect(columns[columns.length - 1]).toBe('similarity');
  });

  it('cot_similar() finds steps like a given one, and says when a step has no vector', async () => {
    await using server = await seeded();
    const c = await server.client();
    const { rows } = await c.query("SELECT trace_id::text AS id, step_type FROM _cot_steps WHERE content LIKE 'Migration failed%'");
    const similar = await c.query('SELECT content, similarity FROM cot_similar($1, 2)', [rows[0].id]);
    expect(similar.rows).toHaveLength(2);
    expect(similar.rows[0].content).toMatch(/migration/i);
    expect(similar.rows.some((r) => /^Migration failed/.test(r.content))).toBe(false);
    const observation = await c.query("SELECT trace_id::text AS id FROM _cot_steps WHERE step_type = 'Observation'");
    await expect(c.query('SELECT * FROM cot_similar($1, 2)', [observation.rows[0].id])).rejects.toThrow(/has no vector: it was not selected for an embedding/);
  });

  it('keeps the vector table for the server alone: clients of every role read it, every write is refused over both protocols (bare DuckDB takes them all)', async () => {
    const verifier = makeScramVerifier('pw');
    const users = ['reader', 'writer', 'admin'].map((role) => ({ name: role, password: verifier, role, agentId: null, orgId: null }));
    await using server = await seeded({ users }, { user: 'admin', password: 'pw' });
    const writes = [
      'INSERT INTO _cot_embeddings SELECT trace_id, session_id, agent_id, step_type, step_created_at, model, dimensions, vector, now() FROM _cot_embeddings LIMIT 1',
      "UPDATE _cot_embeddings SET model = 'forged'",
      'DELETE FROM _cot_embeddings',
      'TRUNCATE _cot_embeddings',
      'DROP TABLE _cot_embeddings',
      'ALTER TABLE _cot_embeddings ADD COLUMN x INTEGER',
      'DELETE FROM main."_COT_EMBEDDINGS" WHERE true',
    ];
    // Each really changes the table in DuckDB itself.
    for (const sql of writes) {
      const db = await DuckDBInstance.create(':memory:');
      const bare = await db.connect();
      await bare.run(
        'CREATE TABLE _cot_embeddings (trace_id UUID, session_id VARCHAR, agent_id VARCHAR, step_type VARCHAR, step_created_at TIMESTAMPTZ, model VARCHAR, dimensions INTEGER, vector FLOAT[2], created_at TIMESTAMPTZ)',
      );
      await bare.run("INSERT INTO _cot_embeddings VALUES (uuid(), 's', 'a', 'Decision', now(), 'm', 2, [1, 0], now())");
      const before = (await bare.runAndReadAll('SELECT count(*), min(model) FROM _cot_embeddings')).getRowsJS();
      await bare.run(sql);
      const after = await bare
        .runAndReadAll("SELECT count(*), min(model), (SELECT count(*) FROM duckdb_columns() WHERE table_name = '_cot_embeddings') FROM _cot_embeddings")
        .then((r) => r.getRowsJS())
        .catch(() => 'dropped');
      expect(after, sql).not.toEqual([[...(before[0] as unknown[]), 9]]);
      bare.closeSync();
      db.closeSync();
    }
    const admin = await server.client({ user: 'admin', password: 'pw' });
    const count = async () => (await admin.query('SELECT count(*)::int AS n, min(model) AS m FROM _cot_embeddings')).rows[0];
    const before = await count();
    expect(before.n).toBe(8);
    for (const role of ['reader', 'writer', 'admin']) {
      const c = await server.client({ user: role, password: 'pw' });
      expect((await c.query('SELECT count(*)::int AS n FROM _cot_embeddings')).rows[0].n, role).toBe(8);
      for (const [i, sql] of writes.entries()) {
        // The simple protocol, then the extended one (a named statement: Parse, Bind, Execute).
        await expect(c.query(sql), `${role}: ${sql}`).rejects.toMatchObject({ code: expect.stringMatching(/^42501$|^0A000$|^25006$/) });
        await expect(c.query({ name: `w${i}`, text: sql }), `${role}, extended: ${sql}`).rejects.toMatchObject({
          code: expect.stringMatching(/^42501$|^0A000$|^25006$/),
        });
      }
      await expect(c.query('COPY _cot_embeddings FROM STDIN'), role).rejects.toMatchObject({ code: '42501' });
    }
    expect(await count()).toEqual(before);
  });
});
