import { DuckDBEngine } from '../engine/duckdb/engine.js';
import { LedgerCatalog } from '../ledger/catalog.js';
import { ProtectedNames } from '../guard/names.js';
import { verifyLedgers } from '../ledger/verify.js';
import { STEPS_TABLE } from '../ledger/schema.js';

export class UsageError extends Error {}

function option(args: readonly string[], name: string): string | undefined {
  const i = args.indexOf(name);
  if (i < 0) return undefined;
  const v = args[i + 1];
  if (v === undefined || v.startsWith('--')) throw new UsageError(`${name} needs a value`);
  return v;
}

function checkArgs(args: readonly string[], allowed: readonly string[], flags: readonly string[]): void {
  for (let i = 0; i < args.length; i++) {
    const a = args[i] as string;
    if (flags.includes(a)) continue;
    if (allowed.includes(a)) {
      i++;
      continue;
    }
    throw new UsageError(`unknown argument ${a}`);
  }
}

async function openReadOnly(path: string): Promise<DuckDBEngine> {
  try {
    return await DuckDBEngine.open({ path, readOnly: true });
  } catch (err) {
    throw new UsageError(`cannot open the database file ${path}: ${(err as Error).message.split('\n')[0] ?? ''}`);
  }
}

/**
 * `cotwire verify --db FILE [--session ID] [--json]`: offline, on a stopped
 * server's file. Exit 0 when every chain verifies, 1 when any is broken.
 */
export async function verifyCommand(args: readonly string[], out: (s: string) => void): Promise<number> {
  checkArgs(args, ['--db', '--session', '--prefix'], ['--json']);
  const path = option(args, '--db');
  if (path === undefined) throw new UsageError('verify needs --db FILE');
  const session = option(args, '--session') ?? null;
  const json = args.includes('--json');
  const prefix = option(args, '--prefix');
  const engine = await openReadOnly(path);
  try {
    const conn = await engine.connect();
    try {
      const names = new ProtectedNames(prefix === undefined ? [] : [prefix]);
      const verdicts = await verifyLedgers(conn, new LedgerCatalog(conn, (n) => names.isProtected(n)), session);
      const broken = verdicts.filter((v) => !v.valid);
      if (json) {
        out(`${JSON.stringify({ valid: broken.length === 0, chains: verdicts.length, broken }, null, 2)}\n`);
      } else {
        for (const v of broken) {
          out(
            `BROKEN ${v.table} chain "${v.chainKey}": step ${v.firstBrokenIndex ?? '?'} ${v.breakKind ?? ''}; expected ${v.expectedHash ?? ''}, found ${v.actualHash ?? ''}\n`,
          );
        }
        const steps = verdicts.reduce((n, v) => n + v.stepCount, 0);
        out(`${broken.length === 0 ? 'OK' : 'FAILED'}: ${verdicts.length} chains, ${steps} steps, ${broken.length} broken\n`);
      }
      return broken.length === 0 ? 0 : 1;
    } finally {
      conn.close();
    }
  } finally {
    await engine.close();
  }
}

/** `cotwire replay --db FILE --session ID`: a session's steps, readably. */
export async function replayCommand(args: readonly string[], out: (s: string) => void): Promise<number> {
  checkArgs(args, ['--db', '--session'], []);
  const path = option(args, '--db');
  const session = option(args, '--session');
  if (path === undefined || session === undefined) throw new UsageError('replay needs --db FILE --session ID');
  const engine = await openReadOnly(path);
  try {
    const conn = await engine.connect();
    try {
      const rows = await conn.query(
        `SELECT step_index, step_type, CAST(created_at AS VARCHAR), agent_id, confidence, content, current_hash
         FROM main.${STEPS_TABLE} WHERE session_id = $1 ORDER BY step_index`,
        [session],
      );
      if (rows.length === 0) {
        out(`no steps for session "${session}"\n`);
        return 1;
      }
      for (const [index, type, at, agent, confidence, content, hash] of rows) {
        const conf = confidence === null ? '' : ` confidence=${String(confidence)}`;
        out(`#${String(index)} ${String(type)} ${String(at)}${agent === null ? '' : ` agent=${String(agent)}`}${conf} ${String(hash).slice(0, 12)}\n`);
        if (content !== null) out(`    ${String(content).replaceAll('\n', '\n    ')}\n`);
      }
      return 0;
    } finally {
      conn.close();
    }
  } finally {
    await engine.close();
  }
}
