import { userInfo } from 'node:os';
import type { Config } from '../config/schema.js';
import { createLogger } from '../log/logger.js';
import { compactDatabaseFile, startServer } from '../engines/duckdb/start.js';
import { UsageError } from './usage.js';

type Out = (s: string) => void;

/**
 * `cotwire retain`: retention by whole sessions, with the server stopped. It
 * runs the server's own ledger stack on the file (no client can connect: it
 * listens on a loopback port nobody is told), so the records are chained,
 * logged and covered by a checkpoint as the job's are, and the file is
 * rewritten at the end.
 */
export async function retainCommand(config: Config, opts: { days?: string; dryRun?: boolean; json?: boolean }, out: Out): Promise<number> {
  const days = opts.days === undefined ? config.ledger.retentionDays : Number(opts.days);
  if (!Number.isInteger(days) || days < 1) {
    throw new UsageError(`--days must be a whole number of days, at least 1${opts.days === undefined ? ' (ledger.retentionDays is 0)' : ''}`);
  }
  // Refused before the file is opened: starting the server on it would already write to it.
  const floor = config.ledger.retentionFloorDays;
  if (floor > 0 && days < floor) {
    throw new UsageError(
      `--days ${days} is shorter than ledger.retentionFloorDays = ${floor} (the EU AI Act, Articles 19(1) and 26(6), keeps a high-risk AI system's logs at least six months); ` +
        `give --days ${floor} or more, or set ledger.retentionFloorDays: 0 in --config if the system is not a high-risk AI system under the Act`,
    );
  }
  const running = await startServer(
    {
      ...config,
      listen: { ...config.listen, host: '127.0.0.1', port: 0 },
      http: { ...config.http, port: null },
      ledger: { ...config.ledger, retentionDays: 0 },
      embedding: { ...config.embedding, enabled: false },
    },
    // Its warnings go to stderr, apart from what the command prints.
    createLogger('warn', false, process.stderr),
  );
  let removed: Awaited<ReturnType<typeof running.retain>>;
  try {
    removed = await running.retain(days, opts.dryRun === true, `cotwire retain (${userInfo().username})`);
  } finally {
    await running.close();
  }
  const steps = removed.reduce((n, r) => n + r.stepCount, 0);
  if (opts.json === true) {
    out(`${JSON.stringify({ dryRun: opts.dryRun === true, days, sessions: removed.length, steps, removed }, null, 2)}\n`);
  } else {
    for (const r of removed)
      out(
        `${opts.dryRun === true ? 'would remove' : 'removed'} ${r.ledger} session "${r.chainKey}": ${r.stepCount} steps, the last at ${r.lastStepAt.toISOString()}\n`,
      );
    out(`${opts.dryRun === true ? 'would remove' : 'removed'} ${removed.length} sessions (${steps} steps) whose last step is older than ${days} days\n`);
  }
  return 0;
}

/** `cotwire compact`: rewrites a stopped server's database file, so that nothing erased survives in its free blocks. */
export async function compactCommand(config: Config, out: Out): Promise<number> {
  const { bytesBefore, bytesAfter } = await compactDatabaseFile(config.database.path, config.database.compression);
  out(`rewrote ${config.database.path}: ${bytesBefore} bytes before, ${bytesAfter} after\n`);
  return 0;
}
