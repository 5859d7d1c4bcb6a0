import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer } from 'node:http';
import { describe, expect, it } from 'vitest';
import { startTestServer } from '../fixtures/server.js';

const STEP = `INSERT INTO _cot_steps (session_id, step_type, content) VALUES ($1, 'Observation', $2) RETURNING trace_id, ledger_seq`;

describe('the global Merkle log over SQL', () => {
  it('returns ledger_seq on insert, signs checkpoints and proves steps against them', async () => {
    await using server = await startTestServer();
    const c = await server.client();
    const seqs: bigint[] = [];
    let trace = '';
    for (let i = 0; i < 5; i++) {
      const r = await c.query(STEP, [`s${i % 2}`, `step ${i}`]);
      seqs.push(BigInt(r.rows[0].ledger_seq));
      trace = r.rows[0].trace_id;
    }
    // Gapless and increasing, across sessions.
    expect(seqs.map((s) => s - (seqs[0] as bigint))).toEqual([0n, 1n, 2n, 3n, 4n]);
    const before = await c.query('SELECT * FROM cot_prove($1)', [trace]);
    const issued = await server.running.checkpoints.issue();
    expect(issued?.size).toBe(Number(seqs[4]));
    const cp = await c.query('SELECT * FROM cot_checkpoint()');
    expect(cp.rows[0].tree_size).toBe(String(issued?.size));
    expect(cp.rows[0].checkpoint).toBe(issued?.note);
    expect(cp.rows[0].checkpoint).toMatch(/^cotwire\.local\/cotwire\n\d+\n[A-Za-z0-9+/]{43}=\n\n\u2014 cotwire\.local\/cotwire /);
    const proof = await c.query('SELECT * FROM cot_prove($1)', [trace]);
    expect(proof.rows).toHaveLength(1);
    expect(proof.rows[0].leaf_index).toBe(String((seqs[4] as bigint) - 1n));
    expect(Array.isArray(proof.rows[0].inclusion_proof)).toBe(true);
    expect(proof.rows[0].checkpoint).toBe(issued?.note);
    void before;
    const cons = await c.query('SELECT * FROM cot_consistency(2, $1::BIGINT)', [issued?.size]);
    expect(cons.rows[0].new_root).toBe(issued?.root.toString('base64'));
    await expect(c.query('SELECT * FROM cot_consistency(9, 3)')).rejects.toThrow(/no consistency proof from 9 to 3/);
  });

  it('will not start with a key file it cannot read, or one that holds no signer key', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cotwire-key-'));
    try {
      await expect(startTestServer({ checkpoint: { keyFile: join(dir, 'absent.key'), intervalSeconds: 10, maxLeaves: 10_000, sinks: [] } })).rejects.toThrow(
        /cannot read the checkpoint key file .*absent\.key/,
      );
      writeFileSync(join(dir, 'bad.key'), 'example.com+12345678+AQ==\n');
      await expect(startTestServer({ checkpoint: { keyFile: join(dir, 'bad.key'), intervalSeconds: 10, maxLeaves: 10_000, sinks: [] } })).rejects.toThrow(
        /does not hold a signer key from `cotwire keygen`/,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses client writes to the checkpoint ledger', async () => {
    await using server = await startTestServer();
    const c = await server.client();
    await expect(c.query(`INSERT INTO _cot_checkpoints (origin, tree_size, root_hash, checkpoint) VALUES ('x', 1, 'y', 'z')`)).rejects.toMatchObject({
      code: '42501',
    });
  });

  it('writes checkpoints to a directory, a file and a webhook, retrying a failing one', async () => {
    const received: string[] = [];
    let failures = 1;
    const hook = createServer((req, res) => {
      let body = '';
      req.on('data', (d: Buffer) => (body += d.toString()));
      req.on('end', () => {
        if (failures-- > 0) {
          res.writeHead(503).end();
          return;
        }
        received.push(body);
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((r) => hook.listen(0, '127.0.0.1', r));
    const port = (hook.address() as { port: number }).port;
    const dir = mkdtempSync(join(tmpdir(), 'cotwire-sinks-'));
    try {
      await using server = await startTestServer({
        checkpoint: {
          keyFile: null,
          intervalSeconds: 3600,
          maxLeaves: 3,
          sinks: [`${dir}/notes/`, join(dir, 'all.log'), `http://127.0.0.1:${port}/cp?token=secret`],
        },
      });
      const c = await server.client();
      for (let i = 0; i < 3; i++) await c.query(STEP, ['s', `x${i}`]);
      // maxLeaves = 3 issues one without waiting for the interval.
      await expect.poll(() => readdirSync(join(dir, 'notes')).length, { timeout: 5000 }).toBeGreaterThanOrEqual(1);
      await expect.poll(() => received.length, { timeout: 10_000 }).toBeGreaterThanOrEqual(1);
      const file = readdirSync(join(dir, 'notes'))[0] as string;
      expect(file).toMatch(/^\d{20}\.checkpoint$/);
      const note = readFileSync(join(dir, 'notes', file), 'utf8');
      expect(readFileSync(join(dir, 'all.log'), 'utf8').startsWith(note)).toBe(true);
      expect(received[0]).toBe(note);
    } finally {
      hook.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
