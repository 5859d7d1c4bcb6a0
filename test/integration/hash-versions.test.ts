import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { rowHash, rowHashV2 } from '../../src/ledger/chain/canonical.js';
import { rowHashV3, SaltKeys } from '../../src/ledger/chain/commitments.js';
import { committedOf } from '../../src/ledger/chain/row-hash.js';
import { CHECKPOINTS_DDL } from '../../src/ledger/log/checkpoint-schema.js';
import { STEPS_DDL } from '../../src/ledger/chain/schema.js';
import { SECURITY_EVENTS_DDL } from '../../src/ledger/security-events.js';
import { sqlstate } from '../fixtures/errors.js';
import { checkChains, recomputeSql, versionSql } from '../fixtures/independent-verifier.js';
import { offline, start } from '../fixtures/stoppable.js';

/**
 * A ledger's hash version is its table comment: ledgers of a database made
 * before versions were recorded (no comment) stay cotwire/v1, ledgers made
 * now are cotwire/v3 (salted commitments), and both verify side by side in
 * one database.
 */
const root = mkdtempSync(join(tmpdir(), 'cotwire-versions-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const CLI = join(import.meta.dirname, '../../dist/cli.js');

/** Each row's stored hash against the row hashed under v1, v2 and v3. */
async function hashedAs(db: string, table: string): Promise<string[]> {
  const columns = (await offline(db, `SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = '${table}' ORDER BY column_index`)) as Array<
    [string, string]
  >;
  const texts = columns.map(([n, t]) => (t === 'TIMESTAMP WITH TIME ZONE' ? `CAST(epoch_us("${n}") AS VARCHAR)` : `CAST("${n}" AS VARCHAR)`));
  const rows = (await offline(db, `SELECT ${texts.join(', ')} FROM ${table}`)) as Array<Array<string | null>>;
  const names = columns.map(([n]) => n);
  const stored = names.indexOf('current_hash');
  const salt = names.indexOf('row_salt');
  const v3 = (r: Array<string | null>): string | null =>
    salt < 0 ? null : rowHashV3(table, names, r, committedOf(names), SaltKeys.of(Buffer.from(r[salt] ?? '', 'hex')));
  return rows.map((r) =>
    r[stored] === rowHash(table, names, r) ? 'v1' : r[stored] === rowHashV2(table, names, r) ? 'v2' : r[stored] === v3(r) ? 'v3' : 'neither',
  );
}

async function independently(db: string, table: string, chainKey: string | null): Promise<string[]> {
  const [[version]] = (await offline(db, versionSql(table))) as [['cotwire/v1' | 'cotwire/v2' | 'cotwire/v3']];
  const columns = (await offline(db, `SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = '${table}' ORDER BY column_index`)).map((r) => ({
    name: String(r[0]),
    type: String(r[1]),
  }));
  return checkChains(await offline(db, recomputeSql(table, columns, chainKey, version))).problems;
}

describe('hash versions', () => {
  it('keeps a v1 database v1, chains new ledgers in it with v3, and verifies both', async () => {
    const db = join(root, 'old.duckdb');
    // The server's own ledgers as a release before versions made them: no table comment.
    await offline(db, STEPS_DDL, CHECKPOINTS_DDL, SECURITY_EVENTS_DDL);
    const s = await start(db);
    try {
      const c = await s.connect();
      await c.query('CREATE TABLE _cot_tool_calls (session_id VARCHAR, tool VARCHAR)');
      for (let i = 0; i < 3; i++) {
        await c.query("INSERT INTO _cot_steps (session_id, step_type, content) VALUES ('s', 'Reasoning', $1)", [`thought ${i}`]);
        await c.query("INSERT INTO _cot_tool_calls (session_id, tool) VALUES ('s', $1)", [`tool ${i}`]);
      }
      expect((await c.query('SELECT chain_key, valid, step_count FROM cot_verify_all()')).rows).toEqual([{ chain_key: 's', valid: true, step_count: '3' }]);
      expect((await c.query('SELECT chain_key, valid, step_count FROM cot_verify_tool_calls_all()')).rows).toEqual([
        { chain_key: 's', valid: true, step_count: '3' },
      ]);
      // A client cannot change what a ledger is verified with.
      expect(await sqlstate(c.query("COMMENT ON TABLE _cot_steps IS 'cotwire/v2'"))).toBe('42501');
      expect(await sqlstate(c.query('COMMENT ON TABLE _cot_tool_calls IS NULL'))).toBe('42501');
    } finally {
      await s.stop();
    }
    expect(await hashedAs(db, '_cot_steps')).toEqual(['v1', 'v1', 'v1']);
    expect(await hashedAs(db, '_cot_tool_calls')).toEqual(['v3', 'v3', 'v3']);
    expect(await offline(db, "SELECT table_name, comment FROM duckdb_tables() WHERE table_name IN ('_cot_steps', '_cot_tool_calls') ORDER BY 1")).toEqual([
      ['_cot_steps', null],
      ['_cot_tool_calls', 'cotwire/v3'],
    ]);
    expect(await independently(db, '_cot_steps', 'session_id')).toEqual([]);
    expect(await independently(db, '_cot_tool_calls', 'session_id')).toEqual([]);
    const cli = spawnSync(process.execPath, [CLI, 'verify', '--db', db, '--json'], { encoding: 'utf8' });
    expect(cli.status, cli.stdout + cli.stderr).toBe(0);
  });

  it('chains a new database with v3 and fails closed when the recorded version is changed behind the server', async () => {
    const db = join(root, 'new.duckdb');
    let s = await start(db);
    try {
      const c = await s.connect();
      await c.query("INSERT INTO _cot_steps (session_id, step_type, content) VALUES ('s', 'Reasoning', 'a thought')");
    } finally {
      await s.stop();
    }
    expect(await hashedAs(db, '_cot_steps')).toEqual(['v3']);
    expect(await independently(db, '_cot_steps', 'session_id')).toEqual([]);
    // Someone with the file claims the rows are v1.
    await offline(db, "COMMENT ON TABLE _cot_steps IS 'cotwire/v1'");
    s = await start(db);
    try {
      const c = await s.connect();
      await expect(c.query("INSERT INTO _cot_steps (session_id, step_type) VALUES ('s', 'Summary')")).rejects.toMatchObject({
        code: 'XX001',
        message: expect.stringMatching(/hash version changed behind the server/),
      });
      await s.running.auditor.audit();
      expect((await c.query('SELECT kind, ledger FROM cot_audit()')).rows).toContainEqual({ kind: 'ledger_changed', ledger: 'main._cot_steps' });
    } finally {
      await s.stop();
    }
  });
});
