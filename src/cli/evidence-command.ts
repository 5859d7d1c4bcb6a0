import { writeFileSync } from 'node:fs';
import { UsageError } from './usage.js';

type Out = (s: string) => void;

/**
 * `cotwire evidence`: the bundle as the server's HTTP listener makes it for the viewer's download, fetched as
 * the token's user, so that it is the same bundle, read with the same rights.
 */
export async function evidenceCommand(
  opts: { session: string; since?: string; url?: string; token?: string | undefined; out?: string },
  out: Out,
): Promise<number> {
  if (opts.since !== undefined && !/^\d+$/.test(opts.since)) throw new UsageError('--since must be the tree size of a checkpoint you hold (an integer)');
  const base = (opts.url ?? 'http://127.0.0.1:4318').replace(/\/+$/, '');
  if (!/^https?:\/\//.test(base) || !URL.canParse(base)) throw new UsageError(`--url must be the HTTP listener's http:// or https:// address, not ${base}`);
  const url = `${base}/sessions/${encodeURIComponent(opts.session)}/evidence${opts.since === undefined ? '' : `?since=${opts.since}`}`;
  let res: Response;
  try {
    res = await fetch(url, { headers: opts.token === undefined || opts.token === '' ? {} : { authorization: `Bearer ${opts.token}` } });
  } catch (err) {
    throw new UsageError(`cannot reach ${base}: ${(err as Error).cause instanceof Error ? ((err as Error).cause as Error).message : (err as Error).message}`);
  }
  const text = await res.text();
  if (res.status !== 200) {
    process.stderr.write(`cotwire: ${res.status} from ${base}: ${text.trim()}\n`);
    return 1;
  }
  if (opts.out === undefined) out(text);
  else {
    writeFileSync(opts.out, text);
    const bundle = JSON.parse(text) as { receipts: unknown[]; tree_size: number; pending: unknown[] };
    out(
      `wrote the evidence of session ${opts.session} to ${opts.out}: ${bundle.receipts.length} steps against the checkpoint of ${bundle.tree_size} leaves` +
        `${bundle.pending.length > 0 ? ` (${bundle.pending.length} newer steps have no receipt yet)` : ''}; check it with tools/check_evidence.py\n`,
    );
  }
  return 0;
}
