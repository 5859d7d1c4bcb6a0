import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';

/** Every text libpg-query parsed, in order: the server runs in this process, so its parses are counted here. */
const parsed: string[] = [];
vi.mock('libpg-query', async (original) => {
  const real = (await original()) as typeof import('libpg-query');
  return {
    ...real,
    parseSync: (text: string) => {
      parsed.push(text);
      return real.parseSync(text);
    },
  };
});

const { startTestServer } = await import('../../fixtures/server.js');
const { ParsedStatement } = await import('../../../src/sql/parsed.js');
type TestServer = Awaited<ReturnType<typeof startTestServer>>;
type Client = Awaited<ReturnType<TestServer['client']>>;

/** The parses one statement cost, its first time through the planner (no cache has seen its text). */
async function parsesOf(client: Client, text: string, values?: unknown[]): Promise<string[]> {
  parsed.length = 0;
  await (values === undefined ? client.query(text) : client.query({ text, values }));
  return [...parsed];
}

describe('one parse of a statement', () => {
  beforeAll(async () => {
    await (await import('libpg-query')).loadModule();
  });

  it('parses a text on first use, once, however many readings ask for its tree', () => {
    parsed.length = 0;
    const statement = new ParsedStatement("SELECT cot_search('q', 3), count(*) FROM t");
    expect(statement.tokens.length).toBeGreaterThan(0);
    expect(parsed).toEqual([]);
    expect(statement.tree).not.toBeNull();
    expect(statement.calls?.map((c) => c.name)).toEqual(['cot_search', 'count']);
    expect(statement.tree).toBe(statement.tree);
    expect(parsed).toHaveLength(1);
  });

  describe('through the planner', () => {
    let server: TestServer;
    let client: Client;
    beforeAll(async () => {
      server = await startTestServer();
      client = await server.client();
    });
    afterAll(async () => {
      await server?.[Symbol.asyncDispose]();
    });

    // Each reads the tree in several rules (rewrite, result names, result sources, DDL declarations,
    // serial, foreign keys, cot_search's arguments, advisory locks, the guard): one parse for all.
    const statements: Array<[string, unknown[]?]> = [
      ['SELECT 1'],
      ['CREATE TABLE items (id INTEGER PRIMARY KEY, name VARCHAR(20), price NUMERIC)'],
      ['CREATE TABLE things (id SERIAL PRIMARY KEY, item INTEGER, name TEXT)'],
      ['ALTER TABLE things ADD FOREIGN KEY (item) REFERENCES items (id)'],
      ["INSERT INTO items VALUES (1, 'a', 1.5)"],
      ["UPDATE items SET name = 'b' WHERE id = 1"],
      ['SELECT id, name FROM items WHERE id = $1', [1]],
      [
        "SELECT n.nspname, c.relname, pg_catalog.pg_get_userbyid(c.relowner) AS owner FROM pg_catalog.pg_class c LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind IN ('r', 'p') AND n.nspname !~ '^pg_toast' AND pg_catalog.pg_table_is_visible(c.oid) ORDER BY 1, 2",
      ],
      ["INSERT INTO _cot_steps (session_id, step_type, content) VALUES ('s1', 'Action', 'hello')"],
      ["SELECT content FROM cot_search('hello', 3)"],
      ['SELECT content FROM cot_search($1, 3)', ['hello']],
      ['SELECT pg_advisory_lock(42), pg_advisory_unlock(42)'],
    ];
    for (const [text, values] of statements) {
      it(`parses ${text.slice(0, 60)} at most once`, async () => {
        expect(await parsesOf(client, text, values)).toEqual([text]);
      });
    }

    it('parses the rewritten text of a statement once more, and no text twice', async () => {
      const text = "UPDATE public.items SET name = 'c' WHERE id = 1";
      const texts = await parsesOf(client, text);
      expect(texts).toEqual([text, "UPDATE main.items SET name = 'c' WHERE id = 1"]);
    });
  });
});
