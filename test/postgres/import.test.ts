import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { writeKeyFile } from '../../src/ledger/log/signing-key.js';
import { startPgEngine } from '../fixtures/pg-engine.js';
import { startPgTestServer } from '../fixtures/pg-server.js';
import { start } from '../fixtures/stoppable.js';

const dir = mkdtempSync(join(tmpdir(), 'cotwire-import-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const cli = (...args: string[]): { code: number; out: string } => {
  const r = spawnSync(process.execPath, [join(import.meta.dirname, '../../dist/cli.js'), ...args], { encoding: 'utf8' });
  return { code: r.status ?? -1, out: r.stdout + r.stderr };
};

describe('moving from an embedded DuckDB file to a PostgreSQL engine', () => {
  it('keeps every hash, the log under the signed checkpoints, and the chains going', async () => {
    const db = join(dir, 'embedded.duckdb');
    const keyFile = join(dir, 'signing.key');
    const verifierKey = writeKeyFile(keyFile, 'cotwire.local/import-test');
    const sinks = join(dir, 'checkpoints');
    const duck = await start(db, {
      checkpoint: { keyFile, intervalSeconds: 3600, maxLeaves: 1_000_000, sinks: [`${sinks}/`] },
    });
    const c = await duck.connect();
    for (const s of ['a', 'b']) {
      await c.query(
        "INSERT INTO _cot_steps (session_id, step_type, content, confidence, metadata, duration_ms) VALUES ($1, 'Observation', 'é\nline', 0.1, '{\"k\": [1, 2.50]}', 12), ($1, 'Decision', NULL, 1e-7, NULL, NULL)",
        [s],
      );
    }
    await c.query('CREATE TABLE _cot_notes (session_id VARCHAR, n INTEGER, ok BOOLEAN, at TIMESTAMPTZ, amount DOUBLE)');
    await c.query("INSERT INTO _cot_notes VALUES ('n1', 7, true, '2024-05-06 07:08:09.123456+00', CAST('-0' AS DOUBLE)), ('n1', NULL, false, NULL, 1e300)");
    await duck.running.checkpoints.issue();
    await c.query("INSERT INTO _cot_steps (session_id, step_type, content) VALUES ('a', 'FinalAnswer', 'done')");
    await duck.running.checkpoints.issue();
    await duck.stop();

    const engine = await startPgEngine();
    try {
      const imported = cli('import', '--db', db, '--url', engine.url);
      expect(imported.out).toMatch(/^OK: \d+ leaves, log root \S+; \d+ chains verified by PostgreSQL, 0 broken$/m);
      // The key that signed the file's checkpoints is kept elsewhere: the instances are told to use it.
      expect(imported.out).toMatch(
        /the checkpoints were signed by cotwire\.local\/import-test\+[0-9a-f]{8}: start every instance with checkpoint\.keyFile set to that key/,
      );
      expect(imported.code).toBe(0);
      // The checkpoints the embedded server signed verify against the PostgreSQL engine's rebuilt log.
      const verified = cli('verify', '--url', engine.url, '--checkpoint', sinks, '--key', verifierKey);
      expect(verified.out).toMatch(/^OK: .* 0 broken; log intact$/m);
      expect(verified.out).toMatch(/2 signed checkpoints, 2 reproduced/);
      expect(verified.code).toBe(0);
      // A second import would give the log two orders: refused, nothing changed.
      const again = cli('import', '--db', db, '--url', engine.url);
      expect(again.code).toBe(1);
      expect(again.out).toMatch(/already holds \d+ ledger rows/);

      // cotwire on the engine goes on from where the file left each chain.
      const server = await startPgTestServer(engine, { checkpoint: { keyFile, intervalSeconds: 3600, maxLeaves: 1_000_000, sinks: [] } });
      try {
        const p = await server.client();
        const r = await p.query(
          "INSERT INTO _cot_steps (session_id, step_type, content) VALUES ('a', 'Summary', 'after the move') RETURNING step_index, prev_hash",
        );
        const last = await p.query("SELECT current_hash FROM _cot_steps WHERE session_id = 'a' AND step_index = 2");
        expect(r.rows[0]).toEqual({ step_index: 3, prev_hash: last.rows[0].current_hash });
        expect((await p.query("SELECT valid, step_count FROM cot_verify('a')")).rows).toEqual([{ valid: true, step_count: '4' }]);
        expect((await p.query('SELECT bool_and(valid) AS ok FROM cot_verify_notes_all()')).rows).toEqual([{ ok: true }]);
        expect((await p.query("SELECT n, ok, amount FROM _cot_notes WHERE session_id = 'n1' ORDER BY step_index")).rows).toEqual([
          { n: 7, ok: true, amount: -0 },
          { n: null, ok: false, amount: 1e300 },
        ]);
      } finally {
        await server.close();
      }

      // And back: the engine into a new DuckDB file, whose log the first checkpoints still vouch for.
      const back = join(dir, 'back.duckdb');
      const returned = cli('import', '--url', engine.url, '--into', back);
      expect(returned.out).toMatch(/^OK: \d+ leaves in .*back\.duckdb\.merkle; \d+ chains verified by DuckDB, 0 broken$/m);
      expect(returned.code).toBe(0);
      const offline = cli('verify', '--db', back, '--checkpoint', sinks, '--key', verifierKey);
      expect(offline.out).toMatch(/^OK: .* 0 broken; log intact$/m);
      expect(offline.code).toBe(0);
      const home = await start(back, { checkpoint: { keyFile, intervalSeconds: 3600, maxLeaves: 1_000_000, sinks: [`${sinks}/`] } });
      try {
        const d = await home.connect();
        const r = await d.query("INSERT INTO _cot_steps (session_id, step_type, content) VALUES ('a', 'Summary', 'back home') RETURNING step_index");
        expect(r.rows).toEqual([{ step_index: 4 }]);
        expect((await d.query("SELECT valid, step_count FROM cot_verify('a')")).rows).toEqual([{ valid: true, step_count: '5' }]);
        expect((await d.query('SELECT bool_and(valid) AS ok FROM cot_verify_notes_all()')).rows).toEqual([{ ok: true }]);
      } finally {
        await home.stop();
      }
    } finally {
      engine.stop();
    }
  }, 120_000);

  it('carries the key beside the file to the engine, and back beside the new file', async () => {
    const db = join(dir, 'default-key.duckdb');
    const duck = await start(db);
    const c = await duck.connect();
    await c.query("INSERT INTO _cot_steps (session_id, step_type, content) VALUES ('k', 'Observation', 'before the move')");
    await duck.stop();
    const engine = await startPgEngine();
    try {
      const imported = cli('import', '--db', db, '--url', engine.url);
      expect(imported.out).toContain(`the checkpoint key beside the file (${db}.key) is now the engine's shared key`);
      expect(imported.code).toBe(0);
      // Instances without checkpoint.keyFile sign on with it.
      const server = await startPgTestServer(engine);
      try {
        const p = await server.client();
        await p.query("INSERT INTO _cot_steps (session_id, step_type, content) VALUES ('k', 'Observation', 'on the engine')");
      } finally {
        await server.close();
      }
      const back = join(dir, 'default-key-back.duckdb');
      const returned = cli('import', '--url', engine.url, '--into', back);
      expect(returned.out).toContain(`the engine's shared checkpoint key is in ${back}.key`);
      expect(returned.code).toBe(0);
      const home = await start(back);
      try {
        const d = await home.connect();
        expect((await d.query("INSERT INTO _cot_steps (session_id, step_type, content) VALUES ('k', 'Summary', 'home') RETURNING step_index")).rows).toEqual([
          { step_index: 2 },
        ]);
      } finally {
        await home.stop();
      }
    } finally {
      engine.stop();
    }
  }, 120_000);
});
