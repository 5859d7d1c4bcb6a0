import { describe, expect, it } from 'vitest';
import { makeScramVerifier } from '../../src/session/scram.js';
import { usePgServer } from '../fixtures/pg-server.js';

const verifier = makeScramVerifier('pw');
const ctx = usePgServer({
  users: [
    { name: 'bi', password: verifier, role: 'reader', agentId: null, orgId: null },
    { name: 'boss', password: verifier, role: 'admin', agentId: null, orgId: null },
  ],
});

const code = (p: Promise<unknown>): Promise<string | undefined> =>
  p.then(
    () => undefined,
    (e: { code?: string }) => e.code,
  );

describe("a reader's transactions on a PostgreSQL engine", () => {
  it('stay read-only in PostgreSQL, whatever the reader sets, resets or begins', async () => {
    const admin = await ctx.server.client({ user: 'boss', password: 'pw' });
    await admin.query('CREATE SEQUENCE reader_seq');
    await admin.query('GRANT USAGE, SELECT, UPDATE ON SEQUENCE reader_seq TO PUBLIC');
    const reader = await ctx.server.client({ user: 'bi', password: 'pw' });
    expect(await code(reader.query("SELECT nextval('reader_seq')"))).toBe('25006');
    for (const sql of [
      'SET default_transaction_read_only = off',
      'SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE',
      'BEGIN READ WRITE',
      'SET ROLE cotwire_writer',
    ]) {
      expect(await code(reader.query(sql)), sql).toBe('42501');
    }
    await reader.query('RESET ALL');
    expect(await code(reader.query("SELECT nextval('reader_seq')"))).toBe('25006');
    await reader.query('DISCARD ALL');
    expect(await code(reader.query("SELECT nextval('reader_seq')"))).toBe('25006');
    expect((await reader.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
  });
});
