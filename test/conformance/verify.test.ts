import { createHash } from 'node:crypto';
import type pg from 'pg';
import { beforeAll, describe, expect, it } from 'vitest';
import { freePort, useConformanceServer } from '../fixtures/conformance.js';

/**
 * Verification: the server's own (cot_verify, cot_verify_all, the
 * per-ledger functions, the background audit) and an independent one, the
 * README's hash specification recomputed here from the rows as a client
 * reads them.
 */
let metricsPort = 0;
const s = useConformanceServer(async () => {
  metricsPort = await freePort();
  return { http: { host: '127.0.0.1', port: metricsPort } };
});

beforeAll(async () => {
  const c = await s.as();
  await c.query(
    `INSERT INTO _cot_steps (session_id, agent_id, step_type, content, confidence, duration_ms, token_count, model, metadata, input_data) VALUES
     ('v1', 'a', 'Observation', 'é\n"quoted"', 0.25, 10, 3, 'm', '{"k": [1, 2.5]}', NULL),
     ('v1', 'a', 'Decision', NULL, 1, NULL, NULL, NULL, NULL, '["x"]'),
     ('v2', 'a', 'FinalAnswer', 'done', 0.5, 5, 1, 'm', NULL, NULL)`,
  );
  await c.query("INSERT INTO _cot_steps (session_id, step_type, content) VALUES ('v1', 'Action', 'third')");
  await c.query('CREATE TABLE _cot_notes (session_id VARCHAR, note VARCHAR, n INTEGER)');
  await c.query("INSERT INTO _cot_notes VALUES ('n1', 'a', 1), ('n2', NULL, NULL), ('n1', 'ü', -3)");
});

const VERDICT = ['chain_key', 'valid', 'step_count', 'first_broken_index', 'break_kind', 'expected_hash', 'actual_hash'];
const intact = (key: string, steps: number) => ({
  chain_key: key,
  valid: true,
  step_count: String(steps),
  first_broken_index: null,
  break_kind: null,
  expected_hash: null,
  actual_hash: null,
});

describe('cot_verify and cot_verify_all', () => {
  it('report an intact chain valid, with its step count, and nothing broken', async () => {
    const c = await s.as();
    const r = await c.query("SELECT * FROM cot_verify('v1')");
    expect(r.fields.map((f) => f.name)).toEqual(VERDICT);
    expect(r.rows).toEqual([intact('v1', 3)]);
  });

  it('give no verdict for a session that has no steps', async () => {
    const c = await s.as();
    expect((await c.query("SELECT * FROM cot_verify('no-such-session')")).rows).toEqual([]);
  });

  it('cover every session of _cot_steps, with the counts the table holds', async () => {
    const c = await s.as();
    const all = (await c.query('SELECT chain_key, valid, step_count FROM cot_verify_all() ORDER BY chain_key')).rows;
    const counts = (await c.query('SELECT session_id AS chain_key, count(*) AS n FROM _cot_steps GROUP BY session_id ORDER BY session_id')).rows;
    expect(all.map((v) => [v.chain_key, v.step_count])).toEqual(counts.map((r) => [r.chain_key, String(r.n)]));
    expect(all.every((v) => v.valid === true)).toBe(true);
  });

  it('exist for every ledger, created ones and the server’s own, as cot_verify_<name> and cot_verify_<name>_all', async () => {
    const c = await s.as();
    expect((await c.query("SELECT * FROM cot_verify_notes('n1')")).rows).toEqual([intact('n1', 2)]);
    expect((await c.query('SELECT chain_key, valid FROM cot_verify_notes_all() ORDER BY chain_key')).rows).toEqual([
      { chain_key: 'n1', valid: true },
      { chain_key: 'n2', valid: true },
    ]);
    for (const ledger of ['checkpoints', 'security_events', 'redactions', 'retention']) {
      const verdicts = (await c.query(`SELECT valid FROM cot_verify_${ledger}_all()`)).rows;
      expect(
        verdicts.every((v) => v.valid === true),
        ledger,
      ).toBe(true);
    }
  });
});

/** Every value as the server sent it, unparsed: the independent check reads the texts the hash covers. */
const raw = { getTypeParser: () => (v: string) => v } as unknown as pg.CustomTypesConfig;
const OID = { bool: 16, float8: 701, timestamptz: 1184 };

function lp(text: string | null): Buffer {
  if (text === null) return Buffer.alloc(8, 0xff);
  const bytes = Buffer.from(text, 'utf8');
  const len = Buffer.alloc(8);
  len.writeBigUInt64BE(BigInt(bytes.length));
  return Buffer.concat([len, bytes]);
}

const sha256 = (b: Buffer): Buffer => createHash('sha256').update(b).digest();

/** A timestamptz as PostgreSQL's text format writes it, as microseconds since the epoch (the hash's text for it). */
function epochMicros(text: string): string {
  const m = /^(\d{4})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,6}))?([+-])(\d{2})(?::(\d{2}))?$/.exec(text);
  if (m === null) throw new Error(`not a timestamptz: ${text}`);
  const [, y, mo, d, h, mi, sec, frac, sign, oh, om] = m as unknown as string[];
  const utcMs = Date.UTC(Number(y), Number(mo) - 1, Number(d), Number(h), Number(mi), Number(sec));
  const offsetMin = (sign === '-' ? -1 : 1) * (Number(oh) * 60 + Number(om ?? 0));
  return String(BigInt(utcMs - offsetMin * 60_000) * 1000n + BigInt((frac ?? '').padEnd(6, '0')));
}

/** The hash's text of a value, from its text on the wire: the README's rules per type. */
function canonical(value: string | null, oid: number): string | null {
  if (value === null) return null;
  if (oid === OID.bool) return value === 't' ? 'true' : 'false';
  if (oid === OID.timestamptz) return epochMicros(value);
  // A double is written as Python's repr() writes it: a whole number keeps its ".0".
  if (oid === OID.float8 && /^-?\d+$/.test(value)) return `${value}.0`;
  return value;
}

/** Columns cotwire/v3 enters as text: the server's own and the chain key (README, "cotwire/v3"); every other is committed to. */
const V3_PLAIN = new Set(['step_index', 'prev_hash', 'created_at', 'ledger_seq', 'session_id', 'trace_id', 'has_embedding']);

/** A row's cotwire/v3 hash from the README: each committed value as SHA-256(key || lp(text)), its key from the row's salt. */
function v3Hash(table: string, fields: ReadonlyArray<{ name: string; dataTypeID: number }>, row: ReadonlyArray<string | null>): string {
  const salt = Buffer.from(row[fields.findIndex((f) => f.name === 'row_salt')] ?? '', 'hex');
  const u32 = (n: number): Buffer => {
    const b = Buffer.alloc(4);
    b.writeUInt32BE(n);
    return b;
  };
  const parts = [lp('cotwire/v3'), lp(table)];
  let m = 0;
  fields.forEach((f, i) => {
    if (f.name === 'current_hash' || f.name === 'row_salt') return;
    const text = lp(canonical(row[i] ?? null, f.dataTypeID));
    if (V3_PLAIN.has(f.name)) parts.push(lp(f.name), text);
    else {
      const key = sha256(Buffer.concat([lp('cotwire/v3 keys'), salt, u32(Math.floor(m / 2))])).subarray(16 * (m % 2), 16 * (m % 2) + 16);
      parts.push(lp(f.name), sha256(Buffer.concat([key, text])));
      m++;
    }
  });
  return sha256(Buffer.concat(parts)).toString('hex');
}

/** Recomputes every row's cotwire/v3 hash and link from the README alone; returns the rows that disagree. */
async function independentlyVerified(c: pg.Client, table: string, chainKey: string | null): Promise<{ rows: number; problems: string[] }> {
  const r = await c.query({ text: `SELECT * FROM ${table} ORDER BY ledger_seq`, rowMode: 'array', types: raw } as pg.QueryConfig);
  const names = r.fields.map((f) => f.name);
  const at = (name: string): number => names.indexOf(name);
  const heads = new Map<string, { index: number; hash: string }>();
  const problems: string[] = [];
  for (const row of r.rows as Array<Array<string | null>>) {
    const key = chainKey === null ? '' : (row[at(chainKey)] ?? '');
    const hash = v3Hash(table, r.fields, row);
    const head = heads.get(key);
    const where = `${table} ${key}#${row[at('step_index')]}`;
    if (hash !== row[at('current_hash')]) problems.push(`${where}: hash ${row[at('current_hash')]}, recomputed ${hash}`);
    if (row[at('prev_hash')] !== (head?.hash ?? '')) problems.push(`${where}: does not link`);
    if (Number(row[at('step_index')]) !== (head === undefined ? 0 : head.index + 1)) problems.push(`${where}: out of sequence`);
    heads.set(key, { index: Number(row[at('step_index')]), hash: row[at('current_hash')] as string });
  }
  return { rows: r.rows.length, problems };
}

describe('the hash specification, recomputed by a client', () => {
  it('holds for every row of _cot_steps: each current_hash is the cotwire/v3 hash of its values, and links to the one before', async () => {
    const c = await s.as();
    const { rows, problems } = await independentlyVerified(c, '_cot_steps', 'session_id');
    expect(problems).toEqual([]);
    expect(rows).toBeGreaterThanOrEqual(4);
  });

  it('holds for a ledger a client created', async () => {
    const c = await s.as();
    const { rows, problems } = await independentlyVerified(c, '_cot_notes', 'session_id');
    expect(problems).toEqual([]);
    expect(rows).toBe(3);
  });

  it('is not satisfied by a row whose value differs from what was hashed (the check can fail)', async () => {
    const c = await s.as();
    const r = await c.query({ text: "SELECT * FROM _cot_notes WHERE session_id = 'n1' ORDER BY step_index", rowMode: 'array', types: raw } as pg.QueryConfig);
    const row = [...(r.rows[0] as Array<string | null>)];
    const hash = row[r.fields.findIndex((f) => f.name === 'current_hash')];
    expect(v3Hash('_cot_notes', r.fields, row)).toBe(hash);
    row[r.fields.findIndex((f) => f.name === 'note')] = 'b';
    expect(v3Hash('_cot_notes', r.fields, row)).not.toBe(hash);
  });
});

describe('the background audit', () => {
  it('lists no findings in cot_audit() for an intact log', async () => {
    const c = await s.as();
    const r = await c.query('SELECT * FROM cot_audit()');
    expect(r.fields.map((f) => f.name)).toEqual(expect.arrayContaining(['kind', 'ledger', 'chain_key', 'first_seq', 'last_seq', 'row_count']));
    expect(r.rows).toEqual([]);
  });

  it('runs at start-up, and /metrics says when it completed', async () => {
    const completed = async (): Promise<number> => {
      const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
      return Number(/^cotwire_audit_last_completed_seconds (\S+)$/m.exec(text)?.[1] ?? 0);
    };
    await expect.poll(completed, { timeout: 15_000 }).toBeGreaterThan(0);
    expect(await completed()).toBeLessThanOrEqual(Date.now() / 1000 + 1);
  }, 30_000);
});
