import { describe, expect, it } from 'vitest';
import { DuckDBEngine } from '../../../src/engines/duckdb/adapter/engine.js';
import { CHAIN_COLUMNS } from '../../../src/ledger/chain/schema.js';
import { chainVerifier } from '../../../src/engines/duckdb/dialect/verify.js';
import { hashSql } from '../../../src/engines/duckdb/dialect/verify-sql.js';
import { duckdbLedgers } from '../../../src/engines/duckdb/ledger/catalog-source.js';

describe('verifying a ledger of many chains', () => {
  it('returns one verdict per chain past the 120,000 a call can take as arguments, whole or in slices', async () => {
    const engine = await DuckDBEngine.open({ path: ':memory:' });
    const conn = await engine.connect();
    try {
      await conn.run(`CREATE TABLE _cot_many (session_id VARCHAR, note VARCHAR, ${CHAIN_COLUMNS.map((c) => `${c.name} ${c.type}`).join(', ')})`);
      const chains = 130_000;
      await conn.run(`INSERT INTO _cot_many SELECT 's' || i, 'n', 0, '', '', TIMESTAMPTZ '2026-01-01' + to_microseconds(i), i + 1 FROM range(${chains}) t(i)`);
      const catalog = duckdbLedgers(conn, (n) => n.startsWith('_cot'));
      const table = await catalog.find(['_cot_many']);
      if (table === null) throw new Error('not a ledger');
      await conn.run(`UPDATE _cot_many SET current_hash = ${hashSql(table)}`);
      const whole = await chainVerifier(conn, catalog).verify(null);
      expect(whole).toHaveLength(chains);
      expect(whole.every((v) => v.valid)).toBe(true);
      const sliced = await chainVerifier(conn, catalog, { rowsPerSlice: 50_000, pause: async () => undefined }).verify(null);
      expect(sliced).toHaveLength(chains);
    } finally {
      conn.close();
      await engine.close();
    }
  }, 120_000);
});
