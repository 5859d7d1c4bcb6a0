import { describe, expect, it } from 'vitest';
import { PostgresConnection } from '../../src/engines/postgres/adapter/connection.js';
import { rowHashFor } from '../../src/ledger/chain/row-hash.js';
import { LedgerCatalog } from '../../src/ledger/chain/catalog.js';
import { leafPrefix, rowLeafHash } from '../../src/ledger/log/leaf.js';
import { consistencyProof, inclusionProof, nodeHash, rootOf } from '../../src/ledger/log/merkle.js';
import { positionOf } from '../../src/ledger/log/leaf.js';
import { readPostgresTables } from '../../src/engines/postgres/ledger/catalog.js';
import { PgLedgerWriter, pgArray } from '../../src/engines/postgres/ledger/writer.js';
import { canonicalPgTextSql } from '../../src/engines/postgres/dialect/verify-sql.js';
import { usePgEngine } from '../fixtures/pg-engine.js';
import type { SqlConnection } from '../../src/engine/port.js';
import { PgError } from '../../src/errors/pg-error.js';
import { SqlState } from '../../src/errors/sqlstate.js';
import type { LedgerTable } from '../../src/ledger/chain/schema.js';

const ctx = usePgEngine();

describe('the ledger writer on PostgreSQL', () => {
  it('three writers appending to shared sessions at once leave every chain whole and the sequence without gaps', async () => {
    const { engine } = ctx;
    const writers: PgLedgerWriter[] = [];
    const conns: PostgresConnection[] = [];
    for (let i = 0; i < 3; i++) {
      const conn = await PostgresConnection.open(engine.serverUrl, 'writer', { pipeline: true });
      conns.push(conn);
      writers.push(await PgLedgerWriter.open(conn));
    }
    const catalog = new LedgerCatalog(conns[0] as PostgresConnection, (n) => n.startsWith('_cot'), null, readPostgresTables('cotwire'));
    const steps = (await catalog.all()).find((t) => t.name === '_cot_steps');
    expect(steps).toBeDefined();
    if (steps === undefined) return;
    const clientColumns = steps.columns.filter((c) => !steps.serverColumns.has(c.name)).map((c) => c.name);
    const row = (session: string, n: number): (string | null)[] =>
      clientColumns.map((c) =>
        c === 'session_id'
          ? session
          : c === 'step_type'
            ? 'Observation'
            : c === 'content'
              ? `step ${n} of ${session}: «é» "q"\n\\`
              : c === 'confidence'
                ? '0.5'
                : null,
      );
    const sessions = ['s-a', 's-b', 's-c', 's-d'];
    const appends: Promise<unknown>[] = [];
    for (let n = 0; n < 300; n++) {
      const w = writers[n % 3] as PgLedgerWriter;
      const s = sessions[n % sessions.length] as string;
      appends.push(w.append([{ table: steps, rows: n % 7 === 0 ? [row(s, n), row(s, n + 1000)] : [row(s, n)] }]));
    }
    await Promise.all(appends);
    const admin = await engine.admin();
    const names = steps.columns.map((c) => c.name);
    const rows = (await admin.query(
      `SELECT ${steps.columns.map((c) => `${canonicalPgTextSql(c.name, c.type)}`).join(', ')} FROM public._cot_steps s ORDER BY s.ledger_seq`,
    )) as Array<Array<string | null>>;
    expect(rows.length).toBe(300 + Math.ceil(300 / 7));
    const at = (name: string): number => names.indexOf(name);
    // Gap-free global sequence.
    expect(rows.map((r) => r[at('ledger_seq')])).toEqual(rows.map((_, i) => String(i + 1)));
    // Every chain: contiguous indexes, each linked to the one before, each hash recomputed from its texts.
    const heads = new Map<string, { index: number; hash: string }>();
    const leaves: Buffer[] = [];
    for (const r of rows) {
      const key = r[at('session_id')] as string;
      const head = heads.get(key);
      expect(r[at('step_index')]).toBe(String(head === undefined ? 0 : head.index + 1));
      expect(r[at('prev_hash')]).toBe(head?.hash ?? '');
      expect(rowHashFor(steps.hashVersion, steps.name, names, r)).toBe(r[at('current_hash')]);
      heads.set(key, { index: Number(r[at('step_index')]), hash: r[at('current_hash')] as string });
      leaves.push(rowLeafHash(leafPrefix('main', '_cot_steps'), key, r[at('current_hash')] as string));
    }
    // The Merkle nodes the writers stored give the root of the leaves computed here.
    const [[size]] = (await admin.query('SELECT size FROM cotwire.log_head')) as [[bigint]];
    expect(Number(size)).toBe(rows.length);
    const nodes = new Map(((await admin.query('SELECT position, hash FROM cotwire.log_nodes')) as Array<[bigint, Buffer]>).map(([p, h]) => [Number(p), h]));
    const stored = rootOf(rows.length, (level, index) => nodes.get(positionOf(level, index)) as Buffer);
    const expected = rootOf(rows.length, (level, index) => {
      // Recompute the subtree from the leaves.
      const sub = (l: number, i: number): Buffer => (l === 0 ? (leaves[i] as Buffer) : nodeHash(sub(l - 1, 2 * i), sub(l - 1, 2 * i + 1)));
      return sub(level, index);
    });
    expect(stored.toString('hex')).toBe(expected.toString('hex'));
    for (const w of writers) await w.close();
    for (const c of conns) c.close();
  });
});

describe('the text arrays the writer sends', () => {
  it('reach PostgreSQL as the values they were made of', async () => {
    const conn = await PostgresConnection.open(ctx.engine.url);
    const values = [
      'plain',
      '',
      'NULL',
      'null',
      ' spaced ',
      'a,b',
      '{braces}',
      'q"uote',
      'back\\slash',
      '\\"',
      '"',
      '\\',
      'new\nline',
      'tab\t',
      'ünï €😀',
      '\u2028sep',
    ];
    const cases = [values, [null, ...values, null], [], [null]];
    for (let n = 0; n < 200; n++)
      cases.push(
        Array.from({ length: 1 + (n % 5) }, (_, i) =>
          String.fromCharCode(...Array.from({ length: (n * 7 + i) % 9 }, (_, k) => 32 + ((n * 31 + i * 17 + k * 13) % 95))),
        ),
      );
    for (const c of cases) {
      const [[got]] = (await conn.query('SELECT $1::text[]', [pgArray(c)])) as [[Array<string | null>]];
      expect(got).toEqual(c);
    }
    conn.close();
  });
});

describe("the global log's proofs in PostgreSQL", () => {
  it('give the roots and proofs the tree code gives, for every size and leaf', async () => {
    const admin = await ctx.engine.admin();
    const [[size]] = (await admin.query('SELECT size FROM cotwire.log_head')) as [[bigint]];
    const n = Number(size);
    expect(n).toBeGreaterThan(100);
    const nodes = new Map(((await admin.query('SELECT position, hash FROM cotwire.log_nodes')) as Array<[bigint, Buffer]>).map(([p, h]) => [Number(p), h]));
    const read = (level: number, index: number): Buffer => nodes.get(positionOf(level, index)) as Buffer;
    const b64 = (hs: readonly Buffer[]): string => hs.map((h) => h.toString('base64')).join(' ');
    for (const size of [1, 2, 3, 7, 8, 64, 100, n]) {
      const [[root]] = (await admin.query('SELECT cot_log_root($1)', [String(size)])) as [[string]];
      expect(root).toBe(rootOf(size, read).toString('base64'));
      for (const index of [0, 1, Math.floor(size / 2), size - 1]) {
        if (index >= size) continue;
        const [[proof]] = (await admin.query('SELECT cot_inclusion_proof($1, $2)', [String(index), String(size)])) as [[string]];
        expect(proof).toBe(b64(inclusionProof(index, size, read)));
      }
      for (const older of [1, Math.floor(size / 3), size]) {
        if (older < 1) continue;
        const [[proof]] = (await admin.query('SELECT cot_consistency_proof($1, $2)', [String(older), String(size)])) as [[string]];
        expect(proof).toBe(b64(consistencyProof(older, size, read)));
      }
    }
    const [[beyond]] = (await admin.query('SELECT cot_log_root($1)', [String(n + 1)])) as [[string | null]];
    expect(beyond).toBeNull();
    await expect(admin.query('SELECT * FROM cot_consistency(5, $1)', [String(n + 1)])).rejects.toMatchObject({ code: '22023' });
  });
});

/**
 * The writer's connection, with a commit's answer lost on demand: `after`
 * commits and then reports the connection gone (the commit landed), `before`
 * rolls back and reports the same (it did not). A commit is COMMIT after
 * BEGIN, or the writer's one statement outside a transaction (its own). The
 * writer cannot tell the two apart from the error: it must ask the log.
 */
class LosingConnection implements SqlConnection {
  losses: Array<'after' | 'before'> = [];
  private inBlock = false;
  constructor(private readonly inner: PostgresConnection) {}
  async run(sql: string): Promise<void> {
    const loss = sql === 'COMMIT' ? this.losses.shift() : undefined;
    if (sql === 'BEGIN') this.inBlock = true;
    if (sql === 'COMMIT' || sql === 'ROLLBACK') this.inBlock = false;
    if (loss === undefined) return this.inner.run(sql);
    await this.inner.run(loss === 'after' ? 'COMMIT' : 'ROLLBACK');
    throw lost();
  }
  async query(sql: string, params?: readonly (string | null)[]): Promise<unknown[][]> {
    const loss = !this.inBlock && sql.startsWith('WITH ') ? this.losses.shift() : undefined;
    if (loss === undefined) return this.inner.query(sql, params);
    if (loss === 'after') await this.inner.query(sql, params);
    throw lost();
  }
  close(): void {
    this.inner.close();
  }
}

const lost = (): PgError => new PgError(SqlState.ConnectionFailure, 'the PostgreSQL engine: Connection terminated unexpectedly');

describe('a commit whose answer the writer never hears', () => {
  it.each([
    ['decided by the writer itself', false],
    ['decided on a connection of its own while the writer goes on', true],
  ])('is acknowledged once if it landed, made again once if it did not, and reported failed (08006) if it cannot be made: %s', async (_, checked) => {
    const conn = new LosingConnection(await PostgresConnection.open(ctx.engine.serverUrl, 'losing writer', { pipeline: true }));
    const checker = checked ? await PostgresConnection.open(ctx.engine.serverUrl, 'writer check') : undefined;
    const writer = await PgLedgerWriter.open(conn, checker === undefined ? {} : { checker });
    const session = checked ? 'lost-commit-checked' : 'lost-commit';
    const catalog = new LedgerCatalog(await ctx.engine.admin(), (n) => n.startsWith('_cot'), null, readPostgresTables('cotwire'));
    const steps = (await catalog.all()).find((t) => t.name === '_cot_steps') as LedgerTable;
    const clientColumns = steps.columns.filter((c) => !steps.serverColumns.has(c.name)).map((c) => c.name);
    const row = (content: string): (string | null)[] =>
      clientColumns.map((c) => (c === 'session_id' ? session : c === 'step_type' ? 'Action' : c === 'content' ? content : null));
    const admin = await ctx.engine.admin();
    const stored = async (content: string): Promise<number> =>
      ((await admin.query('SELECT count(*)::int FROM public._cot_steps WHERE content = $1 AND session_id = $2', [content, session])) as [[number]])[0][0];

    conn.losses = ['after'];
    const landed = await writer.append([{ table: steps, rows: [row('landed')] }]);
    expect(landed[0]?.count).toBe(1);
    expect(await stored('landed')).toBe(1);

    conn.losses = ['before'];
    const retried = await writer.append([{ table: steps, rows: [row('retried')] }]);
    expect(retried[0]?.count).toBe(1);
    expect(await stored('retried')).toBe(1);

    conn.losses = ['before', 'before'];
    await expect(writer.append([{ table: steps, rows: [row('failed')] }])).rejects.toMatchObject({ code: '08006' });
    expect(await stored('failed')).toBe(0);

    // The chain goes on from what the log holds: landed, then retried, and nothing of the failed one.
    await writer.append([{ table: steps, rows: [row('after')] }]);
    const chain = (await admin.query('SELECT content, step_index FROM public._cot_steps WHERE session_id = $1 ORDER BY step_index', [session])) as Array<
      [string, number]
    >;
    expect(chain).toEqual([
      ['landed', 0],
      ['retried', 1],
      ['after', 2],
    ]);
    const [[valid]] = (await admin.query('SELECT valid FROM cot_verify($1)', [session])) as [[boolean]];
    expect(valid).toBe(true);
    await writer.close();
    conn.close();
    checker?.close();
  });
});
