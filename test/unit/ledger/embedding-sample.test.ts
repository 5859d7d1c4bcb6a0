import { DuckDBInstance } from '@duckdb/node-api';
import { describe, expect, it } from 'vitest';
import { type EmbeddingSampleRule, samplePoint, selectedForEmbedding } from '../../../src/ledger/chain/embedding-sample.js';
import { STEP_TYPES } from '../../../src/ledger/chain/schema.js';
import { uuidv7 } from '../../../src/ledger/chain/append.js';

const CRITICAL = new Set(['Decision', 'Action', 'Error', 'Correction', 'FinalAnswer']);
const rule = (rate: number, alwaysTypes: ReadonlySet<string> = CRITICAL): EmbeddingSampleRule => ({ rate, alwaysTypes });

/** 10,000 trace ids as the writer makes them, one millisecond apart (deterministic apart from their random bits). */
const ids = Array.from({ length: 10_000 }, (_, i) => uuidv7(1_790_000_000_000 + i));

describe('the embedding sample', () => {
  it('always selects the critical step types, whatever the rate', () => {
    for (const id of ids.slice(0, 200)) {
      for (const type of CRITICAL) expect(selectedForEmbedding(rule(0), type, id)).toBe(true);
      expect(selectedForEmbedding(rule(0), 'Observation', id)).toBe(false);
      expect(selectedForEmbedding(rule(1), 'Observation', id)).toBe(true);
    }
    // The list is the configuration's: without it, a Decision is sampled like any other step.
    const none = rule(0, new Set());
    expect(ids.slice(0, 200).some((id) => selectedForEmbedding(none, 'Decision', id))).toBe(false);
  });

  it('selects the other steps at the configured rate, within statistical bounds over 10,000 steps', () => {
    const others = STEP_TYPES.filter((t) => !CRITICAL.has(t));
    for (const rate of [0.01, 0.1, 0.5]) {
      const selected = ids.filter((id, i) => selectedForEmbedding(rule(rate), others[i % others.length] as string, id)).length;
      // Five standard deviations of a binomial count: a sound rule fails this about once in 3.5 million runs.
      const sd = Math.sqrt(ids.length * rate * (1 - rate));
      expect(Math.abs(selected - ids.length * rate)).toBeLessThan(5 * sd);
    }
  });

  it('is reproducible from the row: DuckDB recomputes every sample point from trace_id alone', async () => {
    const instance = await DuckDBInstance.create(':memory:');
    const conn = await instance.connect();
    try {
      const sample = ids.slice(0, 500);
      const reader = await conn.runAndReadAll(
        `SELECT id, ('0x' || left(sha256('cotwire/embedding-sample/v1:' || lower(id)), 12))::UBIGINT::DOUBLE / 2.0 ^ 48 AS point
         FROM unnest([${sample.map((id) => `'${id.toUpperCase()}'`).join(', ')}]) t(id)`,
      );
      const points = reader.getRows().map(([id, point]) => [String(id).toLowerCase(), Number(point)]);
      expect(points).toEqual(sample.map((id) => [id, samplePoint(id)]));
    } finally {
      conn.closeSync();
      instance.closeSync();
    }
  });

  it('only adds steps when the rate rises', () => {
    for (const id of ids.slice(0, 2000)) {
      if (selectedForEmbedding(rule(0.05), 'Reasoning', id)) expect(selectedForEmbedding(rule(0.2), 'Reasoning', id)).toBe(true);
    }
  });
});
