import { loadModule } from 'libpg-query';
import { beforeAll, describe, expect, it } from 'vitest';
import { ErasureCallError, erasureCall } from '../../../src/sql/erasure-call.js';

beforeAll(async () => {
  await loadModule();
});

describe('erasureCall', () => {
  it('reads both forms, with constants and parameters through casts', () => {
    expect(erasureCall("SELECT cot_redact('0190-x', 'content', 'why')")).toEqual({
      fn: 'cot_redact',
      args: [{ text: '0190-x' }, { text: 'content' }, { text: 'why' }],
      asTable: false,
      column: 'cot_redact',
    });
    expect(erasureCall('select * from COT_REDACT_ROW($1::text, 42, $2, CAST($3 AS varchar));')).toEqual({
      fn: 'cot_redact_row',
      args: [{ param: 1 }, { text: '42' }, { param: 2 }, { param: 3 }],
      asTable: true,
      column: 'cot_redact_row',
    });
    expect(erasureCall('SELECT pg_catalog.cot_redact($1, $2, $3) AS id')?.column).toBe('id');
    expect(erasureCall('SELECT cot_redact(NULL, $2, $3)')?.args[0]).toEqual({ text: null });
  });

  it('leaves statements that call none alone', () => {
    expect(erasureCall('SELECT 1')).toBeNull();
    expect(erasureCall("SELECT 'cot_redact(x)'")).toBeNull();
    expect(erasureCall('SELECT * FROM _cot_redactions')).toBeNull();
  });

  it('refuses any other shape rather than sending it to the engine', () => {
    for (const sql of [
      "SELECT cot_redact('a', 'b', 'c'), 1",
      "SELECT upper(cot_redact('a', 'b', 'c'))",
      "SELECT cot_redact('a', 'b', 'c') FROM _cot_steps",
      "SELECT cot_redact(trace_id::text, 'content', 'x')",
      "SELECT cot_redact('a' || 'b', 'content', 'x')",
      "SELECT cot_redact('a', 'b')",
      "SELECT * FROM cot_redact('a', 'b', 'c') AS r",
      "WITH x AS (SELECT 1) SELECT cot_redact('a', 'b', 'c')",
      "SELECT cot_redact('a', 'b', 'c') UNION SELECT 'x'",
      "SELECT cot_redact('a', 'b', 'c') WHERE true",
      "SELECT other.cot_redact('a', 'b', 'c')",
    ]) {
      expect(() => erasureCall(sql), sql).toThrow(ErasureCallError);
    }
  });
});
