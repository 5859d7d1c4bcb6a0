import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Config } from '../../src/config/schema.js';
import { buildReceipt } from '../../src/engines/duckdb/log/receipt.js';
import { lp } from '../../src/ledger/chain/canonical.js';
import { writeKeyFile } from '../../src/ledger/log/signing-key.js';
import { makeScramVerifier } from '../../src/session/scram.js';
import { DuckDBInstance } from '@duckdb/node-api';
import { serveSigned } from '../fixtures/signed-server.js';

/**
 * Redaction under cotwire/v3 (issue 36): a reader who can read every
 * column, every redaction record and every hash cannot tell which of 1,000
 * guesses was the erased value, where under cotwire/v2 the same reader
 * finds it at once; the admin's opening proves the value to a third party,
 * and the chain, the log, checkpoints and receipts all verify.
 */
const CLI = join(import.meta.dirname, '../../dist/cli.js');
const root = mkdtempSync(join(tmpdir(), 'cotwire-redact-v3-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const keyFile = join(root, 'signing.key');
let verifierKey = '';
beforeAll(() => {
  verifierKey = writeKeyFile(keyFile, 'audit.example/redaction-v3');
});

const password = makeScramVerifier('pw');
const users = [
  { name: 'bi', password, role: 'reader', agentId: null, orgId: null },
  { name: 'agent', password, role: 'writer', agentId: null, orgId: null },
  { name: 'dpo', password, role: 'admin', agentId: null, orgId: null },
] as Config['users'];

const SECRET = 'deny the refund';
const STEP = "INSERT INTO _cot_steps (session_id, step_type, content, confidence) VALUES ($1, 'Decision', $2, $3) RETURNING trace_id::text AS t";

const sha = (b: Buffer): Buffer => createHash('sha256').update(b).digest();

/** 1,000 guesses of what an agent decided, the true one among them. */
const GUESSES = Array.from({ length: 999 }, (_, i) => ['approve', 'deny', 'escalate', 'hold'][i % 4] + ` the refund ${i}`).concat(SECRET);

/** Steps with the secret, redacted by the admin; what a reader can then read of them. */
async function redactedFor(version: 'cotwire/v2' | 'cotwire/v3', db: string) {
  const server = await serveSigned(db, keyFile, users, 0, { hashVersion: version });
  const [admin, agent, reader] = await Promise.all([server.as('dpo'), server.as('agent'), server.as('bi')]);
  await agent.query(STEP, ['s', 'read the order', 0.5]);
  const target = (await agent.query(STEP, ['s', SECRET, 0.8])).rows[0].t as string;
  await agent.query(STEP, ['s', 'told the customer', 0.9]);
  await server.running.writer.visible();
  const salt =
    version === 'cotwire/v3' ? ((await reader.query('SELECT row_salt FROM _cot_steps WHERE trace_id = $1::uuid', [target])).rows[0]?.row_salt as string) : null;
  const redacted = await admin.query('SELECT * FROM cot_redact($1, $2, $3)', [target, 'content', 'erasure request']);
  const row = (await reader.query('SELECT * FROM _cot_steps WHERE trace_id = $1::uuid', [target])).rows[0] as Record<string, unknown>;
  const records = (await reader.query('SELECT column_name, value_digest FROM _cot_redactions')).rows as Array<{ column_name: string; value_digest: string }>;
  return { server, admin, reader, target, row, records, salt, record: redacted.rows[0] as Record<string, string | null> };
}

/** Whether any guess matches anything the reader holds: a digest of it, or a commitment to it under any key the row lists. */
function guessed(row: Record<string, unknown>, records: ReadonlyArray<{ value_digest: string }>): string[] {
  const digests = new Set(records.map((r) => r.value_digest));
  const salt = String(row.row_salt ?? '');
  const keys: Buffer[] = [];
  if (/^[0-9a-f]{32}$/.test(salt)) keys.push(Buffer.from(salt, 'hex'));
  else if (salt.startsWith('{')) for (const k of Object.values(JSON.parse(salt) as Record<string, string>)) keys.push(Buffer.from(k, 'hex'));
  return GUESSES.filter((g) => digests.has(sha(lp(g)).toString('hex')) || keys.some((k) => digests.has(sha(Buffer.concat([k, lp(g)])).toString('hex'))));
}

describe('redaction under cotwire/v3', () => {
  it('under cotwire/v2, a reader finds the erased value among 1,000 guesses by hashing them (the attack)', async () => {
    const { server, row, records } = await redactedFor('cotwire/v2', join(root, 'v2.duckdb'));
    try {
      expect(row.content).toBe('[redacted]');
      expect(guessed(row, records)).toEqual([SECRET]);
    } finally {
      await server.stop();
    }
  });

  it('under cotwire/v3, no guess matches anything a reader holds; the chain, log, checkpoints and receipts verify; the opening proves the value', async () => {
    const db = join(root, 'v3.duckdb');
    const { server, admin, reader, target, row, records, salt, record } = await redactedFor('cotwire/v3', db);
    expect(salt).toMatch(/^[0-9a-f]{32}$/);
    try {
      expect((await admin.query("SELECT comment FROM duckdb_tables() WHERE table_name = '_cot_steps'")).rows).toEqual([{ comment: 'cotwire/v3' }]);
      expect(row.content).toBe('[redacted]');
      // The salt is gone from the row: what is left lists the other committed columns' keys, and none of content's.
      expect(Object.keys(JSON.parse(String(row.row_salt)) as object)).not.toContain('content');
      expect(Object.keys(JSON.parse(String(row.row_salt)) as object)).toContain('confidence');
      // The row's hash (the second oracle) covers the value only through that commitment, which no guess
      // under any key the reader holds reproduces.
      expect(guessed(row, records)).toEqual([]);

      expect((await reader.query("SELECT valid, step_count FROM cot_verify('s')")).rows).toEqual([{ valid: true, step_count: '3' }]);
      expect((await reader.query('SELECT count(*)::int AS n FROM cot_verify_all() WHERE NOT valid')).rows).toEqual([{ n: 0 }]);
      expect((await reader.query('SELECT valid FROM cot_verify_redactions_all()')).rows).toEqual([{ valid: true }]);
      expect((await server.running.auditor.audit()).findings).toEqual([]);
      await server.running.checkpoints.issue();

      // The opening: the value and its key, which prove the commitment the row's hash covers.
      const opening = JSON.parse(String(record.opening)) as { column: string; text: string; key: string; commitment: string };
      expect(opening).toMatchObject({ column: 'content', text: SECRET, commitment: record.value_digest });
      expect(sha(Buffer.concat([Buffer.from(opening.key, 'hex'), lp(opening.text)])).toString('hex')).toBe(record.value_digest);
      // Asked again, the record is the same and no opening is given a second time.
      const again = (await admin.query('SELECT * FROM cot_redact($1, $2, $3)', [target, 'content', 'again'])).rows[0];
      expect(again).toMatchObject({ redaction_id: record.redaction_id, applied: 'false', opening: null });

      // A receipt after the redaction stands the commitment in for the value, and checks.
      await server.running.writer.visible();
      const conn = await server.running.engine.connect();
      try {
        const receipt = await buildReceipt(conn, await server.running.ledgers.all(), target, server.running.merkle);
        expect(receipt.redacted).toEqual({ content: record.value_digest });
        writeFileSync(join(root, 'receipt.json'), JSON.stringify(receipt));
      } finally {
        conn.close();
      }
    } finally {
      await server.stop();
    }
    const check = spawnSync(process.execPath, [CLI, 'check-receipt', join(root, 'receipt.json'), '--key', verifierKey], { encoding: 'utf8' });
    expect(check.status, check.stdout + check.stderr).toBe(0);
    // And so does the independent checker in Python, from the published formats alone.
    const python = spawnSync('python3', [join(import.meta.dirname, '../../tools/check_receipt.py'), join(root, 'receipt.json'), verifierKey], {
      encoding: 'utf8',
    });
    expect(python.stdout, python.stderr).toMatch(/^OK leaf/);
    const verified = spawnSync(process.execPath, [CLI, 'verify', '--db', db, '--json'], { encoding: 'utf8' });
    expect(verified.status, verified.stdout + verified.stderr).toBe(0);
    // Neither the value nor the salt that derived its key is left in any file beside the database.
    for (const file of readdirSync(root).filter((f) => f.startsWith('v3.duckdb'))) {
      const path = join(root, file);
      if (!statSync(path).isFile()) continue;
      expect(readFileSync(path).includes(Buffer.from(SECRET)), file).toBe(false);
      expect(readFileSync(path).includes(Buffer.from(String(salt))), file).toBe(false);
    }

    // Behind the server: another committed value of the row changed, or a guess put in the marker's place, breaks it.
    for (const change of ['confidence = 0.1 WHERE confidence = 0.8', `content = '${SECRET}' WHERE content = '[redacted]'`]) {
      const copy = join(root, `tampered-${change.length}.duckdb`);
      writeFileSync(copy, readFileSync(db));
      const instance = await DuckDBInstance.create(copy);
      const conn = await instance.connect();
      await conn.run(`UPDATE _cot_steps SET ${change}`);
      conn.closeSync();
      instance.closeSync();
      const tampered = spawnSync(process.execPath, [CLI, 'verify', '--db', copy, '--json'], { encoding: 'utf8' });
      expect(tampered.status, change).not.toBe(0);
      expect(tampered.stdout, change).toMatch(/edited/);
    }
  });
});
