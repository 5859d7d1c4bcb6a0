import { keepingKeys } from './foreign-keys.js';
import { keyWork } from './key-registry.js';
import { PgError } from '../../../errors/pg-error.js';
import { SqlState } from '../../../errors/sqlstate.js';
import { quoteIdent, type LedgerTable } from '../../../ledger/chain/schema.js';
import type { CopyIn, ResultSink } from '../../../session/handler-port.js';
import { formatCopyCsvRow, formatCopyTextRow, parseCopyCsv, parseCopyText, type CopyFromStdin } from '../../../sql/copy.js';
import { tokenize } from '../../../sql/lexer.js';
import type { HandlerContext, StatementHost } from './context.js';
import type { EngineRun } from './engine-run.js';
import type { LedgerAppends } from './ledger-append.js';
import type { CopyOutPlan, EnginePlan } from './plan.js';

/** COPY FROM STDIN collects its data before writing it; more than this is refused rather than held in memory. */
const COPY_LIMIT = 256 * 1024 * 1024;
/** Rows per INSERT (or per ledger evaluation) when the collected data is written. */
const COPY_CHUNK = 200;

/**
 * COPY ... FROM STDIN. The data is collected, then parsed and written at
 * CopyDone, all or nothing: into a ledger through the writer (one unit),
 * into any other table with INSERTs in one transaction.
 */
export async function copyIn(ctx: HandlerContext, appends: LedgerAppends, command: CopyFromStdin): Promise<CopyIn> {
  if (command.format === 'binary') {
    throw new PgError(SqlState.FeatureNotSupported, 'COPY FROM STDIN in binary format is not supported', { hint: 'Use FORMAT text or FORMAT csv.' });
  }
  const ledger = await ctx.services.ledgers.find(command.target);
  // The vector table is no chained ledger, yet only the server writes it.
  const serverOnly = ctx.access.isServerOnly(command.target[command.target.length - 1]) ? (command.target[command.target.length - 1] as string) : null;
  ctx.access.copyInto(command.targetText, ledger?.name ?? serverOnly);
  let columns: readonly string[];
  if (ledger !== null) {
    columns = command.columns ?? ledger.columns.filter((c) => !ledger.serverColumns.has(c.name)).map((c) => c.name);
  } else {
    const probe = await ctx.engine.prepare(`SELECT * FROM ${command.targetText} LIMIT 0`, []);
    columns = command.columns ?? (probe.columns ?? []).map((c) => c.name);
    probe.close();
  }
  const chunks: Buffer[] = [];
  let size = 0;
  return {
    columns: columns.length,
    write: async (data) => {
      size += data.length;
      if (size > COPY_LIMIT) {
        throw new PgError(SqlState.ProgramLimitExceeded, `COPY data exceeds ${COPY_LIMIT} bytes`, { hint: 'Split the data into several COPY statements.' });
      }
      chunks.push(Buffer.from(data));
    },
    finish: async () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const parsed =
        command.format === 'csv'
          ? parseCopyCsv(text, command.delimiter, command.nullString, command.quote, command.escape)
          : parseCopyText(text, command.delimiter, command.nullString);
      const rows = command.header ? parsed.slice(1) : parsed;
      rows.forEach((r, line) => {
        if (r.length !== columns.length) {
          throw new PgError(
            '22P04',
            r.length > columns.length ? 'extra data after last expected column' : `missing data for column "${columns[r.length] ?? ''}"`,
            {
              detail: `COPY ${command.targetText}, line ${line + 1 + (command.header ? 1 : 0)}`,
            },
          );
        }
      });
      ctx.tx.wrote();
      const n = ledger !== null ? await copyIntoLedger(ctx, appends, ledger, command, columns, rows) : await copyIntoTable(ctx, command, columns, rows);
      return `COPY ${n}`;
    },
    abort: async () => {
      chunks.length = 0;
    },
  };
}

async function copyIntoLedger(
  ctx: HandlerContext,
  appends: LedgerAppends,
  table: LedgerTable,
  command: CopyFromStdin,
  columns: readonly string[],
  rows: (string | null)[][],
): Promise<number> {
  const evaluated: (string | null)[][] = [];
  for (let i = 0; i < rows.length; i += COPY_CHUNK) {
    evaluated.push(...(await appends.evaluateCopied(table, command, columns, rows.slice(i, i + COPY_CHUNK))));
  }
  await ctx.calls.wait((signal) => ctx.tx.append({ table, rows: evaluated }, signal));
  return evaluated.length;
}

async function copyIntoTable(ctx: HandlerContext, command: CopyFromStdin, columns: readonly string[], rows: (string | null)[][]): Promise<number> {
  const schema = command.target.length > 1 ? (command.target.at(-2) as string) : 'main';
  const table = { schema: schema === 'public' ? 'main' : schema, table: command.target.at(-1) as string };
  // The rows' foreign keys are checked once they are all in (foreign-keys.ts).
  const copied = keyWork(null, () => ({ kind: 'insert', tables: [table], sets: [], cascade: false }));
  await keepingKeys(ctx, copied, () =>
    ctx.tx.atomically(async () => {
      for (let i = 0; i < rows.length; i += COPY_CHUNK) {
        const chunk = rows.slice(i, i + COPY_CHUNK);
        let p = 0;
        const sql = `INSERT INTO ${command.targetText} (${columns.map(quoteIdent).join(', ')}) VALUES ${chunk
          .map(() => `(${columns.map(() => `$${++p}`).join(', ')})`)
          .join(', ')}`;
        await ctx.access.copyRows(sql, tokenize(sql), command.targetText);
        await ctx.engine.query(sql, chunk.flat());
      }
    }),
  );
  return rows.length;
}

/**
 * COPY ... TO STDOUT runs its query through the same path as a SELECT
 * (guard, roles, timeout, cancel, backpressure) and reformats each row.
 */
export async function copyOut(host: StatementHost, run: EngineRun, plan: CopyOutPlan, sink: ResultSink): Promise<string> {
  const { copy, query } = plan;
  const inner = query.plan as EnginePlan;
  const fields = query.fields ?? [];
  const line =
    copy.format === 'csv'
      ? (cells: readonly (string | null)[]) => formatCopyCsvRow(cells, copy.delimiter, copy.nullString, copy.quote, copy.escape)
      : (cells: readonly (string | null)[]) => formatCopyTextRow(cells, copy.delimiter, copy.nullString);
  let rows = 0;
  // Not a spread of `sink`: its rowFrame would send a served read's stored DataRow messages into the COPY stream.
  const lines: ResultSink = {
    notice: (notice) => sink.notice(notice),
    flushIfFull: () => sink.flushIfFull(),
    copyOutStart: (columns) => sink.copyOutStart(columns),
    copyData: (data) => sink.copyData(data),
    copyDone: () => sink.copyDone(),
    row: (cells) => {
      sink.copyData(line(cells.map((c) => (c === null || typeof c === 'string' ? c : Buffer.from(c).toString('utf8')))));
      rows++;
    },
  };
  const portal = await host.bindPortal(query, []);
  try {
    sink.copyOutStart(fields.length);
    if (copy.header) sink.copyData(line(fields.map((f) => f.name)));
    await run.execute(portal, inner, 0, lines);
  } finally {
    host.closePortal(portal);
  }
  sink.copyDone();
  return `COPY ${rows}`;
}
