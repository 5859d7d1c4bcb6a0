import { COMPAT_CATALOG } from '../catalog/catalog-sql.js';
import { schemaNamesSql } from '../catalog/snapshot.js';
import { AVAILABLE_EXTENSIONS, DECLARED_EXTENSIONS } from '../catalog/declared.js';
import { PgError } from '../../../errors/pg-error.js';
import { SqlState } from '../../../errors/sqlstate.js';
import { quoteIdent } from '../../../ledger/chain/schema.js';
import type { ResultSink } from '../../../session/handler-port.js';
import type { BackendHooks } from './backends.js';
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
    case 'create-extension':
      return createExtension(ctx, cmd.name, cmd.ifNotExists, cmd.schema, sink);
    case 'drop-extension':
      return dropExtensions(ctx, cmd.names, cmd.ifExists, sink);
    case 'unsupported':
      throw new PgError(SqlState.FeatureNotSupported, `${cmd.command} is not supported`, { hint: cmd.hint });
  }
}

/** Whether an extension has been created (CREATE EXTENSION, committed). */
async function extensionExists(ctx: HandlerContext, name: string): Promise<boolean> {
  return (await ctx.engine.query(`SELECT 1 FROM ${DECLARED_EXTENSIONS} WHERE name = $1`, [name])).length > 0;
}

function catalogChange(ctx: HandlerContext, operation: string): void {
  ctx.access.catalogCommand(operation, operation);
  if (ctx.tx.readOnly()) throw new PgError(SqlState.ReadOnlySqlTransaction, `cannot execute ${operation} in a read-only transaction`);
}

/**
 * CREATE EXTENSION of an extension whose functions cotwire has (declared.ts's
 * AVAILABLE_EXTENSIONS): nothing to install, so it is recorded for
 * pg_extension once the transaction commits. Any other is not available,
 * as PostgreSQL says of an extension it does not have.
 */
async function createExtension(ctx: HandlerContext, name: string, ifNotExists: boolean, schema: string | null, sink: ResultSink): Promise<string> {
  catalogChange(ctx, 'CREATE EXTENSION');
  if (AVAILABLE_EXTENSIONS[name] === undefined) {
    throw new PgError(SqlState.FeatureNotSupported, `extension "${name}" is not available`, {
      detail: `cotwire has the functions of these extensions only: ${Object.keys(AVAILABLE_EXTENSIONS).join(', ')}.`,
      hint: 'The extension must first be installed on the system where PostgreSQL is running.',
    });
  }
  if (await extensionExists(ctx, name)) {
    if (!ifNotExists) throw new PgError(SqlState.DuplicateObject, `extension "${name}" already exists`);
    sink.notice(new PgError(SqlState.DuplicateObject, `extension "${name}" already exists, skipping`, {}, 'NOTICE'));
    return 'CREATE EXTENSION';
  }
  const change = { op: 'extension', name, schema: schema ?? 'public' } as const;
  await ctx.tx.onCommit(() => ctx.services.declared.apply(ctx.engine, [change]));
  return 'CREATE EXTENSION';
}

async function dropExtensions(ctx: HandlerContext, names: readonly string[], ifExists: boolean, sink: ResultSink): Promise<string> {
  catalogChange(ctx, 'DROP EXTENSION');
  const present: string[] = [];
  for (const name of names) {
    if (await extensionExists(ctx, name)) present.push(name);
    else if (!ifExists) throw new PgError(SqlState.UndefinedObject, `extension "${name}" does not exist`);
    else sink.notice(new PgError(SqlState.SuccessfulCompletion, `extension "${name}" does not exist, skipping`, {}, 'NOTICE'));
  }
  const changes = present.map((name) => ({ op: 'drop-extension', name }) as const);
  if (changes.length > 0) await ctx.tx.onCommit(() => ctx.services.declared.apply(ctx.engine, changes));
  return 'DROP EXTENSION';
}

/**
 * What SQL functions reach of the session (backends.ts): set_config() inside
 * a larger query, which changes the setting while the engine evaluates the
 * query (search_path reaches the engine once the statement has run), and
 * what pg_stat_activity shows of it.
 */
export class SessionFunctions {
  private searchPathChanged = false;
  /** Each statement's text, for pg_stat_activity. */
  private readonly texts = new WeakMap<object, string>();
  private running = false;
  private lastQuery = '';

  constructor(private readonly ctx: HandlerContext) {}

  hooks(): BackendHooks {
    const { ctx } = this;
    return {
      user: ctx.info.user,
      role: ctx.info.role,
      setConfig: (name, value, local) => {
        if (!isKnownSetting(name)) ctx.access.engineSetting(name, value);
        // Local outside a block, it lasts as long as its own statement: the answer is still the new value.
        if (local && ctx.tx.status === 'I') return isKnownSetting(name) ? ctx.settings.normalize(name, value) : (value ?? '');
        const stored = ctx.settings.set(name, value, local);
        if (name.toLowerCase() === 'search_path') this.searchPathChanged = true;
        return stored;
      },
      activity: () => {
        const status = ctx.tx.status;
        const state = this.running ? 'active' : status === 'T' ? 'idle in transaction' : status === 'E' ? 'idle in transaction (aborted)' : 'idle';
        return { applicationName: ctx.settings.get('application_name') ?? '', state, query: this.lastQuery, clientAddr: ctx.info.remoteAddress };
      },
    };
  }

  prepared(statement: object, text: string): void {
    this.texts.set(statement, text);
  }

  started(statement: object): void {
    this.running = true;
    this.lastQuery = this.texts.get(statement) ?? this.lastQuery;
  }

  ended(): void {
    this.running = false;
  }

  /** After a statement: a search_path that set_config changed reaches the engine. */
  async settle(): Promise<void> {
    if (!this.searchPathChanged) return;
    this.searchPathChanged = false;
    await applySearchPath(this.ctx);
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
  const known = await sharedRelations(ctx);
  for (const parts of tables) {
    const path = parts.map((p, i) => (i === parts.length - 2 && p === 'public' ? 'main' : p));
    // pg_dump locks every table it dumps: one engine query per table cost a millisecond each.
    if (known !== null && path.length <= 2 && known.has(`${path.length === 2 ? path[0] : 'main'}.${path.at(-1)}`)) continue;
    await ctx.engine.query(`SELECT 1 FROM ${path.map(quoteIdent).join('.')} LIMIT 0`);
  }
  return 'LOCK TABLE';
}

/** The schema-qualified names of every table and view, read once per generation of the catalog, by the catalog's services. */
const relations = new WeakMap<object, { readonly epoch: number; readonly names: Promise<ReadonlySet<string>> }>();

/**
 * The tables and views every connection that sees the shared schema sees
 * (`main.orders`), for the catalog's present generation; null for a
 * connection with objects of its own (temporary tables, DDL in its
 * transaction), which asks the engine each time.
 */
async function sharedRelations(ctx: HandlerContext): Promise<ReadonlySet<string> | null> {
  if (!ctx.catalog.seesSharedSchema) return null;
  const epoch = ctx.services.catalogSnapshot.generation;
  let entry = relations.get(ctx.services);
  if (entry === undefined || entry.epoch !== epoch) {
    const read = ctx.services.catalogSnapshot.namesAt(epoch);
    const names =
      read !== null
        ? Promise.resolve(read.relations)
        : ctx.engine.query(schemaNamesSql(COMPAT_CATALOG).relations).then((rows) => new Set(rows.map((r) => String(r[0]))));
    entry = { epoch, names };
    relations.set(ctx.services, entry);
  }
  return entry.names.catch(() => null);
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
    .map((s) => (s === 'public' ? 'main' : s))
    // A schema of the server's (_cot_catalog) is never searched: its tables are the server's to write.
    .filter((s) => !ctx.access.isLedgerName(s.toLowerCase()));
  const usable: string[] = [];
  for (const s of schemas) {
    // Each entry is one schema's name, quoted: PostgreSQL reads 'system.main' as a schema so named (none),
    // where DuckDB would take it as the catalog system and make that the default, for good.
    const quoted = `"${s.replaceAll('"', '""')}"`;
    try {
      await ctx.engine.run(`SET search_path = '${quoted.replaceAll("'", "''")}'`);
      usable.push(quoted);
    } catch {
      // not a schema DuckDB knows
    }
  }
  const path = usable.length === 0 ? 'main' : usable.join(',');
  await ctx.engine.run(`SET search_path = '${path.replaceAll("'", "''")}'`);
}
