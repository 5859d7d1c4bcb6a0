import type http from 'node:http';
import type { Authenticated, HttpContext } from './listener.js';
import type { WireLease } from './wire-clients.js';

/**
 * A session's evidence bundle (`cotwire-evidence/v1`): every step's receipt, all against one signed checkpoint
 * (cot_receipts answers them in one statement, one snapshot), the verifier key that signs now, and, with
 * `?since=N`, the consistency proof from the auditor's checkpoint of N leaves. Read as the signed-in user, so a
 * user of one organisation gets bundles of its own sessions only. tools/check_evidence.py checks one with
 * Python's standard library.
 */

export const EVIDENCE_FORMAT = 'cotwire-evidence/v1';

export async function evidenceBundle(ctx: HttpContext, who: Authenticated, session: string, since: string | null, res: http.ServerResponse): Promise<void> {
  if (since !== null && !/^\d{1,15}$/.test(since)) {
    res.writeHead(400, { 'content-type': 'text/plain' }).end('since must be the tree size of a checkpoint you hold (an integer)\n');
    return;
  }
  await asUser(ctx, who, res, async (client) => {
    const answer = await build(client, ctx.verifierKey(), session, since === null ? null : Number(since));
    if (typeof answer === 'string') {
      const pending = answer.startsWith('no checkpoint');
      res.writeHead(pending ? 503 : 404, { 'content-type': 'text/plain', ...(pending ? { 'retry-after': '10' } : {}) }).end(`${answer}\n`);
      return;
    }
    res
      .writeHead(200, { 'content-type': 'application/json', 'content-disposition': `attachment; filename="${fileName(session)}"`, 'cache-control': 'no-store' })
      .end(`${JSON.stringify(answer, null, 1)}\n`);
  });
}

/** Runs `work` on a connection of the wire as the user; an error of its SQL is the answer (403 for a refusal, else 400). */
async function asUser(ctx: HttpContext, who: Authenticated, res: http.ServerResponse, work: (client: WireLease['client']) => Promise<void>): Promise<void> {
  const lease = await ctx.clients.acquire(who.user, who.address);
  let broken = true;
  try {
    await work(lease.client);
    broken = false;
  } catch (err) {
    const e = err as { message?: string; code?: string };
    if (typeof e.code !== 'string') throw err;
    broken = false;
    res.writeHead(e.code === '42501' ? 403 : 400, { 'content-type': 'text/plain' }).end(`${e.message ?? ''} (SQLSTATE ${e.code})\n`);
  } finally {
    lease.release(broken);
  }
}

async function build(c: WireLease['client'], verifierKey: string, session: string, since: number | null): Promise<object | string> {
  const r = await c.query('SELECT step_index, CAST(trace_id AS text) AS trace_id, receipt FROM cot_receipts($1)', [session]);
  const rows = r.rows as Array<{ step_index: number; trace_id: string; receipt: string | object | null }>;
  if (rows.length === 0) return `no session ${JSON.stringify(session)} that you may read`;
  const receipts = rows
    .filter((x) => x.receipt !== null)
    .map((x) => (typeof x.receipt === 'string' ? (JSON.parse(x.receipt) as Record<string, unknown>) : x.receipt));
  const first = receipts[0] as { checkpoint?: string; tree_size?: number } | undefined;
  if (first === undefined) return 'no checkpoint covers this session yet: the server signs one within checkpoint.intervalSeconds; ask again then';
  const pending = rows.filter((x) => x.receipt === null).map((x) => ({ step_index: Number(x.step_index), trace_id: x.trace_id }));
  let consistency: object | undefined;
  if (since !== null) {
    const p = await c.query('SELECT old_size, new_size, old_root, new_root, consistency_proof FROM cot_consistency($1, $2)', [since, first.tree_size]);
    const row = (p.rows[0] ?? {}) as Record<string, unknown>;
    consistency = {
      old_size: Number(row['old_size']),
      new_size: Number(row['new_size']),
      old_root: row['old_root'],
      new_root: row['new_root'],
      proof: row['consistency_proof'],
    };
  }
  return {
    format: EVIDENCE_FORMAT,
    session,
    generated_at: new Date().toISOString(),
    verifier_key: verifierKey,
    checkpoint: first.checkpoint,
    tree_size: first.tree_size,
    ...(consistency === undefined ? {} : { consistency }),
    receipts,
    pending,
    check: checkText(session, since),
  };
}

/** What the bundle tells its reader to run, with nothing of cotwire installed. */
function checkText(session: string, since: number | null): string {
  return [
    `This is the evidence of session ${JSON.stringify(session)}: each step's canonical texts, its inclusion proof in the global log and the signed checkpoint the proofs lead to.`,
    "To check it, with Python 3 and nothing else: take check_evidence.py and check_receipt.py from cotwire's repository (the tools/ folder; the README says what they check), not from whoever sent this file, and run",
    '  python3 check_evidence.py bundle.json "<the verifier key>"' + (since === null ? '' : ' --old-checkpoint <your checkpoint>'),
    'giving the checkpoint verifier key you obtained from the operator apart from this file (verifier_key here must be the same key).',
    since === null
      ? 'If you kept a signed checkpoint from before, ask for the bundle with ?since=<its tree size> and add --old-checkpoint <that file>: the check then proves that the log only grew since.'
      : `The bundle carries a consistency proof from your checkpoint of ${since} leaves: --old-checkpoint checks that the log only grew since.`,
    "It prints OK and exits 0 when every step is in the log under the checkpoint, the steps link in order, and the signature is the key's; it prints FAIL and the reason otherwise.",
  ].join('\n');
}

function fileName(session: string): string {
  return `evidence-${session.replace(/[^A-Za-z0-9._-]/g, '_').slice(0, 100)}.json`;
}

/** One step's receipt, as `cotwire prove` writes it: 404 for a step the user cannot read, 503 before a checkpoint covers it. */
export async function stepReceipt(ctx: HttpContext, who: Authenticated, traceId: string, res: http.ServerResponse): Promise<void> {
  await asUser(ctx, who, res, async (client) => {
    const r = await client.query('SELECT receipt FROM cot_receipt($1)', [traceId]);
    const receipt = (r.rows[0] as { receipt: string | object | null } | undefined)?.receipt;
    if (receipt === undefined) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end(`no step ${traceId} that you may read\n`);
      return;
    }
    if (receipt === null) {
      res.writeHead(503, { 'content-type': 'text/plain', 'retry-after': '10' }).end('no checkpoint covers this step yet; ask again after the next one\n');
      return;
    }
    const text = typeof receipt === 'string' ? receipt : JSON.stringify(receipt);
    res
      .writeHead(200, {
        'content-type': 'application/json',
        'content-disposition': `attachment; filename="receipt-${traceId}.json"`,
        'cache-control': 'no-store',
      })
      .end(text);
  });
}
