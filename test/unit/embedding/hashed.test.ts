import { describe, expect, it } from 'vitest';
import { HashedEmbedder, stem } from '../../../src/embedding/hashed.js';

const norm = (v: Float32Array) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));
const dot = (a: Float32Array, b: Float32Array) => a.reduce((s, x, i) => s + x * (b[i] as number), 0);

describe('HashedEmbedder', () => {
  const embedder = new HashedEmbedder();

  it('names its model and sizes its vectors', async () => {
    expect(embedder.model).toBe('cotwire-hashed-v1');
    expect(embedder.dimensions).toBe(384);
    expect(embedder.batchSize).toBe(64);
    const small = new HashedEmbedder({ dimensions: 64 });
    expect(small.dimensions).toBe(64);
    expect(small.embedNow('pricing decision')).toHaveLength(64);
    expect(() => new HashedEmbedder({ dimensions: 0 })).toThrow(RangeError);
  });

  it('is deterministic, across instances and between embed() and embedNow()', async () => {
    const text = 'Tool call: refund_order(order_id=4471, amount=129.00) returned ok';
    const a = embedder.embedNow(text);
    expect(new HashedEmbedder().embedNow(text)).toEqual(a);
    const [b, c] = await embedder.embed([text, 'something else entirely']);
    expect(b).toEqual(a);
    expect(c).not.toEqual(a);
  });

  it('keeps its features stable, since stored vectors depend on them', () => {
    // A change of tokeniser, stemmer, weights or hash orphans every stored vector: when this fails, bump the model name.
    const v = embedder.embedNow('retrying the payment API');
    const nonZero = [...v.entries()].filter(([, x]) => x !== 0).map(([i, x]) => [i, Math.round(x * 1e4) / 1e4]);
    expect(nonZero).toEqual([
      [8, -0.2673],
      [12, 0.2673],
      [20, 0.5345],
      [104, -0.5345],
      [155, 0.5345],
    ]);
  });

  it('returns unit vectors', () => {
    for (const text of ['pricing', 'The payment API returned 502; retrying in 2 s.', 'Ünïcödé ПРИВЕТ 東京 42', 'a b c d e f g '.repeat(50)]) {
      expect(norm(embedder.embedNow(text))).toBeCloseTo(1, 5);
    }
  });

  it('returns the zero vector when there is nothing to match on', () => {
    for (const text of ['', '   ', '?!.,;', 'the of and to it is', 'This is that, and it was with them.']) {
      const v = embedder.embedNow(text);
      expect(v).toHaveLength(384);
      expect(v.every((x) => x === 0)).toBe(true);
    }
  });

  it('lower-cases beyond ASCII', () => {
    expect(embedder.embedNow('ÉCHEC DE CONNEXION')).toEqual(embedder.embedNow('échec de connexion'));
    expect(embedder.embedNow('Pricing Decision')).toEqual(embedder.embedNow('pricing decision'));
  });

  it('stems inflections onto one feature', () => {
    const same = [
      ['prices', 'pricing', 'priced', 'price'],
      ['decision', 'decisions'],
      ['retry', 'retries', 'retried', 'retrying'],
      ['cache', 'caches', 'caching', 'cached'],
      ['run', 'running', 'runs'],
      ['refund', 'refunds', 'refunded', 'refunding'],
    ];
    for (const group of same) expect(new Set(group.map(stem)), group.join('/')).toHaveLength(1);
    // Too short to strip, or not a suffix at all.
    expect(stem('is')).toBe('is');
    expect(stem('status')).toBe('status');
    expect(stem('access')).toBe('access');
    expect(stem('called')).toBe('call');
  });

  it('matches word pairs regardless of order and stop words', () => {
    const q = embedder.embedNow('schema migration');
    const paired = embedder.embedNow('migrations of the schema');
    const unpaired = embedder.embedNow('schema checks, then migration');
    expect(dot(q, paired)).toBeGreaterThan(dot(q, unpaired));
  });
});

// An agent's reasoning steps on a day's work; the distractors share words with the queries, so only the planted step shares enough.
const corpus: Record<string, string> = {
  pricing: 'Decision: keep the Pro plan pricing unchanged this quarter; we decided a price increase needs more churn data first.',
  retryPayment: 'Observation: the payment API returned 502 errors twice; retrying with exponential backoff before giving up.',
  migration: "Tool call: run_migration('2024_06_add_orders_index') applies the database schema migration adding an index on orders.created_at.",
  refund: 'Decision: issue a full refund to the customer for order #4471 because the package arrived damaged.',
  login: 'Observation: auth service logs show 412 login failures in the last hour, most from one IP range; possibly credential stuffing.',
  rollback: 'The deployment of v2.14 was rolled back after health checks failed on two pods.',
  cache: 'Cache invalidation for product pages now runs from the price-update webhook, so stale entries expire immediately.',

  d1: 'Tool call: get_pricing_page() returned 200 with the current plan table.',
  d2: 'Decision: use Postgres advisory locks so only one migration runner executes at a time.',
  d3: 'Decided to cache feature flags in memory for 60 seconds.',
  d4: 'Retrying the search index rebuild after a lock timeout on the primary.',
  d5: 'Payment webhook signature verified for invoice 8812; marking it paid.',
  d6: 'API rate limit is 120 requests per minute for the analytics endpoint.',
  d7: 'Errors in the CSV import: 14 rows had invalid dates and were skipped.',
  d8: 'Database connection pool exhausted; raising max connections from 20 to 50.',
  d9: 'Schema validation of the webhook payload failed on field "amount".',
  d10: 'Migration of the marketing emails to the new template is postponed to next sprint.',
  d11: 'Customer asked about the delivery date of order #5520; replied with the tracking link.',
  d12: 'Refund policy page says refunds take 5 to 10 business days to appear.',
  d13: 'The login page redesign shipped yesterday behind a feature flag.',
  d14: 'Disk failures on node db-3 triggered a replica promotion.',
  d15: 'Deployment pipeline finished in 7 minutes; all stages green.',
  d16: 'Rolled out the new onboarding emails to 10% of users.',
  d17: 'Cache hit rate for the session store is 93% over the last day.',
  d18: 'Plan: compare our pricing with two competitors before the board meeting.',
  d19: 'The customer success team wants a weekly report of open tickets.',
  d20: 'User authentication now requires a second factor for admin accounts.',
  d21: 'Tool call: http_get("https://status.example.com") to check for an outage.',
  d22: 'Observation: the nightly backup of the database completed in 42 minutes.',
  d23: 'Thinking about whether to split the monolith; too risky before the launch.',
  d24: 'Tool call: send_email(to="ops@example.com", subject="Weekly summary").',
  d25: 'Error budget for the checkout service is 60% consumed this month.',
  d26: 'Retried the flaky integration test; it passed on the second run.',
  d27: 'Password reset emails are delayed by about five minutes.',
  d28: 'Decision: move the staging environment to the eu-west region.',
  d29: 'The order export job writes one file per customer segment.',
  d30: 'Tool call: query_metrics("p99_latency", window="1h") returned 840 ms.',
  d31: 'Observation: the API gateway returned 504 for the reports endpoint under load.',
  d32: 'Added an index on users.email; lookup time dropped from 300 ms to 4 ms.',
  d33: 'Decision: the free tier keeps its limit of three projects.',
};

const queries: [query: string, planted: string][] = [
  ['decisions about pricing', 'pricing'],
  ['errors when retrying the payment API', 'retryPayment'],
  ['database schema migration', 'migration'],
  ['refund for a customer', 'refund'],
  ['login failures', 'login'],
  ['rolling back the deployment', 'rollback'],
  ['cache invalidation', 'cache'],
];

describe('HashedEmbedder ranking', () => {
  const embedder = new HashedEmbedder();
  const ids = Object.keys(corpus);
  const vectors = new Map(ids.map((id) => [id, embedder.embedNow(corpus[id] as string)]));

  it.each(queries)('ranks the planted step first for "%s"', (query, planted) => {
    const q = embedder.embedNow(query);
    const ranked = ids.map((id) => ({ id, score: dot(q, vectors.get(id) as Float32Array) })).sort((a, b) => b.score - a.score);
    expect(ranked[0]?.id, JSON.stringify(ranked.slice(0, 3))).toBe(planted);
    expect(ranked[0]?.score).toBeGreaterThan((ranked[1]?.score ?? 0) + 0.01);
  });
});
