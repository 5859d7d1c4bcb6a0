import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { checkpointConfig, until, useConformanceServer } from '../fixtures/conformance.js';

/**
 * Evidence for an auditor: a session's bundle from the HTTP listener, checked by the Python in tools/ with the
 * standard library alone, and refused once any byte of it changes.
 */
const s = useConformanceServer({ checkpoint: checkpointConfig({ intervalSeconds: 1 }) });
const dir = mkdtempSync(join(tmpdir(), 'cotwire-evidence-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const TOOLS = join(import.meta.dirname, '../../tools');
const base = (): string => `http://127.0.0.1:${s.server.running.httpAddress?.port}`;

interface Bundle {
  format: string;
  session: string;
  verifier_key: string;
  checkpoint: string;
  tree_size: number;
  receipts: Array<{ columns: Array<[string, string | null]>; checkpoint: string }>;
  pending: unknown[];
  check: string;
}

/** The bundle once a checkpoint covers every step of the session. */
async function bundleOf(session: string, since?: number): Promise<{ text: string; bundle: Bundle }> {
  let text = '';
  await until(
    `a checkpoint covering ${session}`,
    async () => {
      const res = await fetch(`${base()}/sessions/${session}/evidence${since === undefined ? '' : `?since=${since}`}`);
      if (res.status !== 200) return false;
      text = await res.text();
      return (JSON.parse(text) as Bundle).pending.length === 0;
    },
    30_000,
  );
  return { text, bundle: JSON.parse(text) as Bundle };
}

function check(script: string, file: string, key: string, ...extra: string[]): { status: number | null; out: string } {
  const r = spawnSync('python3', [join(TOOLS, script), file, key, ...extra], { encoding: 'utf8' });
  return { status: r.status, out: `${r.stdout}${r.stderr}`.trim() };
}

async function appendSteps(session: string, n: number): Promise<void> {
  const c = await s.as();
  for (let i = 0; i < n; i++) {
    await c.query("INSERT INTO _cot_steps (session_id, step_type, content, input_data) VALUES ($1, 'Reasoning', $2, $3)", [
      session,
      `thought ${i} of ${session}: ünïcødé and "quotes"`,
      JSON.stringify({ i }),
    ]);
  }
}

describe('evidence bundles', () => {
  it('verifies with the Python in tools/, redacted values included, and fails for any changed byte', async () => {
    await appendSteps('ev-1', 5);
    const c = await s.as();
    const [redact] = (await c.query("SELECT CAST(trace_id AS text) AS t FROM _cot_steps WHERE session_id = 'ev-1' AND step_index = 2")).rows;
    await c.query('SELECT cot_redact($1, $2, $3)', [redact.t, 'content', 'an erasure request']);
    const { text, bundle } = await bundleOf('ev-1');
    expect(bundle.format).toBe('cotwire-evidence/v1');
    expect(bundle.receipts).toHaveLength(5);
    expect(bundle.check).toContain('python3 check_evidence.py');
    const file = join(dir, 'ev-1.json');
    writeFileSync(file, text);
    const ok = check('check_evidence.py', file, bundle.verifier_key);
    expect(ok).toEqual({ status: 0, out: expect.stringMatching(/^OK session ev-1: 5 steps, each in the log of \d+ leaves under /) });

    // Another key than the bundle's: refused before anything else.
    const other = bundle.verifier_key.replace(/\+[0-9a-f]{8}\+/, '+00000000+');
    expect(check('check_evidence.py', file, other).status).not.toBe(0);

    // One changed byte, wherever it falls in the steps' texts, the proofs or the signature, is refused.
    const places = [
      text.indexOf('thought 3'),
      text.indexOf('"inclusion_proof"') + 25,
      text.lastIndexOf('— ') + 20,
      text.indexOf('"step_index"'),
      text.indexOf('ünïcødé'),
    ];
    for (const at of places) {
      expect(at).toBeGreaterThan(0);
      const bytes = Buffer.from(text, 'utf8');
      const pos = Buffer.byteLength(text.slice(0, at), 'utf8') + 2;
      bytes[pos] = (bytes[pos] as number) ^ 0x01;
      const tampered = join(dir, `tampered-${at}.json`);
      writeFileSync(tampered, bytes);
      const r = check('check_evidence.py', tampered, bundle.verifier_key);
      expect(r.status, `a byte changed at ${pos}: ${r.out}`).not.toBe(0);
    }
    // A step left out breaks the sequence even though every other receipt verifies.
    const shorter = { ...bundle, receipts: bundle.receipts.filter((_, i) => i !== 1) };
    writeFileSync(join(dir, 'shorter.json'), JSON.stringify(shorter));
    expect(check('check_evidence.py', join(dir, 'shorter.json'), bundle.verifier_key).out).toMatch(/^FAIL: .*step 1/);
  });

  it('carries a consistency proof from a checkpoint the auditor kept, and the check holds it against that checkpoint', async () => {
    await appendSteps('ev-2', 2);
    const first = await bundleOf('ev-2');
    const old = join(dir, 'old-checkpoint.txt');
    writeFileSync(old, first.bundle.checkpoint);
    await appendSteps('ev-2', 2);
    await appendSteps('ev-other', 3);
    let later = first;
    await until(
      'a newer checkpoint',
      async () => {
        later = await bundleOf('ev-2', first.bundle.tree_size);
        return later.bundle.tree_size > first.bundle.tree_size;
      },
      30_000,
    );
    const file = join(dir, 'ev-2.json');
    writeFileSync(file, later.text);
    const ok = check('check_evidence.py', file, later.bundle.verifier_key, '--old-checkpoint', old);
    expect(ok.out).toMatch(new RegExp(`^OK session ev-2: 4 steps, .* which extends the old checkpoint of ${first.bundle.tree_size} leaves$`));
    // Without the proof it asks for, the check does not pass.
    const { consistency: _dropped, ...bare } = JSON.parse(later.text) as Record<string, unknown>;
    writeFileSync(join(dir, 'bare.json'), JSON.stringify(bare));
    expect(check('check_evidence.py', join(dir, 'bare.json'), later.bundle.verifier_key, '--old-checkpoint', old).out).toMatch(/^FAIL: .*consistency/);
  });

  it('serves one step receipt, which tools/check_receipt.py verifies', async () => {
    await appendSteps('ev-3', 1);
    const { bundle } = await bundleOf('ev-3');
    const c = await s.as();
    const [row] = (await c.query("SELECT CAST(trace_id AS text) AS t FROM _cot_steps WHERE session_id = 'ev-3'")).rows;
    const res = await fetch(`${base()}/receipts/${row.t}`);
    expect(res.status).toBe(200);
    const file = join(dir, 'receipt.json');
    writeFileSync(file, await res.text());
    expect(check('check_receipt.py', file, bundle.verifier_key)).toEqual({ status: 0, out: expect.stringMatching(/^OK leaf \d+ of \d+ under /) });
    expect((await fetch(`${base()}/receipts/00000000-0000-7000-8000-000000000000`)).status).toBe(404);
    expect((await fetch(`${base()}/sessions/no-such-session/evidence`)).status).toBe(404);
  });
});
