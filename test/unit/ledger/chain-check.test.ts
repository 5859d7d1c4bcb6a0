import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DuckDBEngine } from '../../../src/engines/duckdb/adapter/engine.js';
import type { EngineConnection } from '../../../src/engine/port.js';
import { chainRowsSql, checkChain, storedLinks } from '../../../src/ledger/chain/chain-check.js';
import { STEPS_DDL, type LedgerTable } from '../../../src/ledger/chain/schema.js';
import { verifySql } from '../../../src/engines/duckdb/dialect/verify-sql.js';
import { LedgerWriter } from '../../../src/engines/duckdb/ledger/writer.js';
import { duckdbLedgers } from '../../../src/engines/duckdb/ledger/catalog-source.js';

/**
 * The server's verification of one chain against the SQL verification it
 * replaces, on chains damaged at random in the database itself (rows
 * deleted, duplicated, forged, edited, renumbered or relinked, alone and
 * combined): both must give the same verdict, break kind, position and
 * hashes for every chain.
 */

let engine: DuckDBEngine;
let conn: EngineConnection;
let table: LedgerTable;

const SESSIONS = 160;
const STEPS = 8;

beforeAll(async () => {
  engine = await DuckDBEngine.open({ path: ':memory:' });
  conn = await engine.connect();
  await conn.run(STEPS_DDL);
  const catalog = duckdbLedgers(conn, (name) => name.startsWith('_cot'));
  table = (await catalog.find(['_cot_steps'])) as LedgerTable;
  const writer = await LedgerWriter.open(engine, catalog, { journalPath: null });
  const rows: Array<Array<string | null>> = [];
  for (let s = 0; s < SESSIONS; s++) {
    for (let i = 0; i < STEPS; i++) {
      rows.push([null, 'agent', `s${s}`, 'Reasoning', `thought ${s}.${i}`, `{"i": ${i}}`, null, String(i / 10), String(i), null, null, null, null]);
    }
  }
  await writer.append([{ table, rows }]);
  await writer.close();
  let seed = 7;
  const random = (n: number): number => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed % n;
  };
  const step = (s: number): string => `session_id = 's${s}' AND step_index = ${random(STEPS)}`;
  const other = (s: number): string => `(SELECT current_hash FROM _cot_steps WHERE session_id = 's${s}' AND step_index = ${random(STEPS)} LIMIT 1)`;
  const mutations: Array<(s: number) => string> = [
    (s) => `DELETE FROM _cot_steps WHERE ${step(s)}`,
    (s) => `DELETE FROM _cot_steps WHERE session_id = 's${s}' AND step_index >= ${random(STEPS)}`,
    (s) => `UPDATE _cot_steps SET content = 'forged' WHERE ${step(s)}`,
    (s) => `UPDATE _cot_steps SET step_index = step_index + ${1 + random(3)} WHERE ${step(s)}`,
    (s) => `UPDATE _cot_steps SET step_index = step_index - 1 WHERE ${step(s)} AND step_index > 0`,
    (s) => `UPDATE _cot_steps SET prev_hash = ${other(s)} WHERE ${step(s)}`,
    (s) => `UPDATE _cot_steps SET prev_hash = '' WHERE ${step(s)}`,
    (s) => `UPDATE _cot_steps SET current_hash = ${other(s)} WHERE ${step(s)}`,
    (s) => `INSERT INTO _cot_steps SELECT * REPLACE (ledger_seq + 100000 AS ledger_seq) FROM _cot_steps WHERE ${step(s)}`,
    (s) => `INSERT INTO _cot_steps SELECT * REPLACE ('forged' AS content, ledger_seq + 200000 AS ledger_seq) FROM _cot_steps WHERE ${step(s)}`,
    (s) => {
      const [a, b] = [random(STEPS), random(STEPS)];
      return `UPDATE _cot_steps SET step_index = CASE step_index WHEN ${a} THEN ${b} ELSE ${a} END WHERE session_id = 's${s}' AND step_index IN (${a}, ${b})`;
    },
  ];
  // Every tenth session is left intact; the others get one to three damages.
  for (let s = 0; s < SESSIONS; s++) {
    if (s % 10 === 0) continue;
    for (let k = 0; k <= random(3); k++) await conn.run((mutations[random(mutations.length)] as (s: number) => string)(s));
  }
});

afterAll(async () => {
  conn.close();
  await engine.close();
});

describe('verifying one chain in the server', () => {
  it('gives the SQL verification’s verdict on every damaged and intact chain', async () => {
    const kinds = new Set<string>();
    for (let s = 0; s < SESSIONS; s++) {
      const key = `s${s}`;
      const [expected] = await conn.query(verifySql(table, 'session_id = $1'), [key]);
      const check = checkChain(storedLinks(table, await conn.query(chainRowsSql(table), [key])));
      const b = check.firstBreak;
      const got = [key, b === null, BigInt(check.stepCount), b?.firstBrokenIndex ?? null, b?.kind ?? null, b?.expectedHash ?? null, b?.actualHash ?? null];
      expect(got, key).toEqual(expected ?? [key, true, 0n, null, null, null, null]);
      kinds.add(String(b?.kind ?? 'valid'));
    }
    // The damages reached every kind of break, so each branch was compared.
    expect([...kinds].sort()).toEqual(['deleted', 'edited', 'inserted', 'reordered', 'valid']);
  });
});
