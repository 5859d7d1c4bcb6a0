import { PgError } from '../../../errors/pg-error.js';
import { SqlState } from '../../../errors/sqlstate.js';
import { quoteIdent } from '../../../ledger/chain/schema.js';
import type { ResultSink } from '../../../session/handler-port.js';
import type { SessionCommand } from './commands.js';
import type { HandlerContext } from './context.js';
import type { Cursors } from './cursors.js';
import { isKnownSetting } from './settings.js';

/**
 * The statements the handler answers itself, as PostgreSQL would: the
 * transaction's (BEGIN, COMMIT, savepoints, SET TRANSACTION), the session's
 * settings (SET, RESET, SHOW, DISCARD), DEALLOCATE and the cursors'.
 */
export async function runCommand(
  ctx: HandlerContext,
  cursors: Cursors,
  cmd: SessionCommand,
  sink: ResultSink,
  /** The result formats of the portal running the command: what a FETCH's rows are sent in. */
  formats: readonly (0 | 1)[] = [],
): Promise<string> {
  if (ctx.tx.status === 'E' && !['commit', 'rollback', 'rollback-to'].includes(cmd.kind)) ctx.tx.checkNotFailed();
  switch (cmd.kind) {
    case 'begin':
      await ctx.tx.begin(cmd.readOnly ?? null, sink);
      return 'BEGIN';
    case 'commit':
      return ctx.tx.commit(sink);
    case 'rollback':
      await ctx.tx.rollback(sink);
      return 'ROLLBACK';
    case 'savepoint':
      ctx.tx.savepoint(cmd.name);
      return 'SAVEPOINT';
    case 'release':
      ctx.tx.release(cmd.name);
      return 'RELEASE';
    case 'rollback-to':
      await ctx.tx.rollbackTo(cmd.name);
      return 'ROLLBACK';
    case 'set': {
      if (cmd.name.toLowerCase() === 'transaction_read_only') {
        // Outside a block the SET's own one-statement transaction is all it would change.
        const readOnly = ctx.settings.normalize('transaction_read_only', cmd.value) === 'on';
        if (ctx.tx.inBlock) await ctx.tx.setReadOnly(readOnly, sink);
        return 'SET';
      }
      if (!isKnownSetting(cmd.name)) ctx.access.engineSetting(cmd.name, cmd.value);
      await setParameter(ctx, cmd.name, cmd.value, cmd.local);
      return 'SET';
    }
    case 'set-transaction':
      if (cmd.readOnly !== null) {
        if (cmd.session) ctx.settings.set('default_transaction_read_only', cmd.readOnly ? 'on' : 'off');
        else await ctx.tx.setReadOnly(cmd.readOnly, sink);
      }
      return 'SET';
    case 'reset':
      if (cmd.name === null) {
        ctx.settings.resetAll();
        await applySearchPath(ctx);
      } else {
        await setParameter(ctx, cmd.name, null, false);
      }
      return 'RESET';
    case 'show':
      if (cmd.name === 'all') {
        for (const row of ctx.settings.all()) sink.row(row);
        return 'SHOW';
      }
      {
        const value = cmd.name.toLowerCase() === 'transaction_read_only' ? (ctx.tx.readOnly() ? 'on' : 'off') : ctx.settings.get(cmd.name);
        if (value === undefined) {
          throw new PgError(SqlState.UndefinedObject, `unrecognized configuration parameter "${cmd.name}"`);
        }
        sink.row([value]);
      }
      return 'SHOW';
    case 'discard':
      if (ctx.tx.status !== 'I') {
        throw new PgError(SqlState.ActiveSqlTransaction, `DISCARD ${cmd.what} cannot run inside a transaction block`);
      }
      if (cmd.what === 'ALL') {
        ctx.settings.resetAll();
        await applySearchPath(ctx);
        cursors.closeAll();
        await deallocateEngine(ctx, null);
      }
      return `DISCARD ${cmd.what}`;
    case 'deallocate':
      await deallocateEngine(ctx, cmd.name);
      return cmd.name === null ? 'DEALLOCATE ALL' : 'DEALLOCATE';
    case 'declare':
      return cursors.declare(cmd);
    case 'fetch':
      return cursors.fetch(cmd, sink, formats);
    case 'close':
      cursors.close(cmd.name);
      return 'CLOSE CURSOR';
    case 'set-config': {
      // As SET: an engine setting is refused by the same rule, and the new value is the answer.
      if (!isKnownSetting(cmd.name)) ctx.access.engineSetting(cmd.name, cmd.value);
      await setParameter(ctx, cmd.name, cmd.value, cmd.local);
      // Local outside a block, it lasts as long as its own statement: the answer is still the new value.
      const local = cmd.local && ctx.tx.status === 'I';
      sink.row([local && isKnownSetting(cmd.name) ? ctx.settings.normalize(cmd.name, cmd.value) : (ctx.settings.get(cmd.name) ?? cmd.value)]);
      return 'SELECT 1';
    }
    case 'lock':
      return lockTables(ctx, cmd.tables, cmd.mode);
    case 'temp-function':
      if (cmd.insert === null) {
        ctx.tempFunctions.delete(cmd.name);
        return 'DROP FUNCTION';
      }
      ctx.tempFunctions.set(cmd.name, cmd.insert);
      return 'CREATE FUNCTION';
    case 'unsupported':
      throw new PgError(SqlState.FeatureNotSupported, `${cmd.command} is not supported`, { hint: cmd.hint });
  }
}

/** The lock modes that only keep a table from being altered or dropped while it is read. */
const READ_LOCKS = new Set(['ACCESS SHARE', 'ROW SHARE']);

/**
 * LOCK TABLE (pg_dump locks each table it dumps IN ACCESS SHARE MODE). The
 * engine has no table locks; a transaction's snapshot already keeps what it
 * reads as it was, so the read modes are accepted once the tables are found.
 * A mode that would keep other writers out cannot be honoured, and is refused.
 */
async function lockTables(ctx: HandlerContext, tables: ReadonlyArray<readonly string[]>, mode: string): Promise<string> {
  if (ctx.tx.status === 'I') throw new PgError(SqlState.NoActiveSqlTransaction, 'LOCK TABLE can only be used in transaction blocks');
  if (!READ_LOCKS.has(mode)) {
    throw new PgError(SqlState.FeatureNotSupported, `LOCK TABLE IN ${mode} MODE is not supported`, {
      hint: 'cotwire takes no table locks: ACCESS SHARE and ROW SHARE are accepted, as the transaction reads one snapshot.',
    });
  }
  for (const parts of tables) {
    const name = parts
      .map((p, i) => (i === parts.length - 2 && p === 'public' ? 'main' : p))
      .map(quoteIdent)
      .join('.');
    await ctx.engine.query(`SELECT 1 FROM ${name} LIMIT 0`);
  }
  return 'LOCK TABLE';
}

/** SQL-level prepared statements (PREPARE) live in the engine; DEALLOCATE ALL removes every one. */
async function deallocateEngine(ctx: HandlerContext, name: string | null): Promise<void> {
  const names = name !== null ? [name] : (await ctx.engine.query('SELECT name FROM system.main.duckdb_prepared_statements()')).map((r) => String(r[0]));
  for (const n of names) await ctx.engine.run(`DEALLOCATE ${quoteIdent(n)}`);
}

async function setParameter(ctx: HandlerContext, name: string, value: string | null, local: boolean): Promise<void> {
  if (local && ctx.tx.status === 'I') {
    // PostgreSQL warns and does nothing outside a transaction block.
    return;
  }
  ctx.settings.set(name, value, local);
  if (name.toLowerCase() === 'search_path') await applySearchPath(ctx);
}

/**
 * search_path is the one setting the engine needs. PostgreSQL's "public"
 * is DuckDB's "main"; "$user" and pg_catalog have no DuckDB counterpart,
 * and schemas that do not exist are skipped, as PostgreSQL ignores them.
 */
export async function applySearchPath(ctx: HandlerContext): Promise<void> {
  const value = ctx.settings.get('search_path') ?? '';
  const schemas = value
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '' && s !== '"$user"' && s !== '$user' && s.toLowerCase() !== 'pg_catalog')
    .map((s) => (s.startsWith('"') ? s.slice(1, -1).replaceAll('""', '"') : s))
    .map((s) => (s === 'public' ? 'main' : s));
  const usable: string[] = [];
  for (const s of schemas) {
    try {
      await ctx.engine.run(`SET search_path = '${s.replaceAll("'", "''")}'`);
      usable.push(s);
    } catch {
      // not a schema DuckDB knows
    }
  }
  const path = usable.length === 0 ? 'main' : usable.join(',');
  await ctx.engine.run(`SET search_path = '${path.replaceAll("'", "''")}'`);
}
