import { PgError } from '../errors/pg-error.js';
import { PostgresConnection } from '../engine/postgres/connection.js';
import { pgRoles } from '../ledger/pg-names.js';
import { installPostgres } from '../ledger/postgres-schema.js';
import { ProtectedNames } from '../guard/names.js';
import { LedgerCatalog } from '../ledger/catalog.js';
import { verifyLog } from '../ledger/log-verify.js';
import { readPostgresTables } from '../ledger/pg-catalog.js';
import { existsSync, rmSync } from 'node:fs';
import { MerkleLog } from '../ledger/merkle-log.js';
import { importIntoPostgres } from '../ledger/pg-import.js';
import { UsageError, withDatabase, withNewDatabase } from './database.js';
import { importIntoDuckdb } from '../ledger/duckdb-import.js';
import { verifyLedgers, verifyPgLedgers } from '../ledger/verify.js';
import { printLogReport, readCheckpoints, readVerifier } from './log-commands.js';
import { redactUrl } from '../config/load.js';

/** A connection to the engine, or null once the reason it failed is printed in one line. */
async function connectOrSay(url: string, applicationName: string): Promise<PostgresConnection | null> {
  try {
    return await PostgresConnection.open(url, applicationName);
  } catch (err) {
    process.stderr.write(`cotwire: cannot connect to ${redactUrl(url)}: ${(err as Error).message}\n`);
    return null;
  }
}

/**
 * `cotwire init-postgres`: creates cotwire's roles, ledgers, triggers and
 * functions in a PostgreSQL database, and says what it did. Running it again
 * does nothing and says so; every start of a server does the same.
 */
export async function initPostgresCommand(opts: { readonly url: string; readonly rolePrefix: string }, out: (text: string) => void): Promise<number> {
  const conn = await connectOrSay(opts.url, 'cotwire init-postgres');
  if (conn === null) return 1;
  try {
    const report = await installPostgres(conn, opts.rolePrefix);
    out(`PostgreSQL ${report.serverVersion} at ${redactUrl(opts.url)}\n`);
    if (report.actions.length === 0) out('everything was in place; nothing to do\n');
    for (const a of report.actions) out(`- ${a}\n`);
    const roles = pgRoles(opts.rolePrefix);
    out(`clients' statements run as ${roles.client}, ledger appends as ${roles.writer}; ${roles.owner} owns the ledgers\n`);
    return 0;
  } catch (err) {
    const e = err as Error;
    process.stderr.write(`cotwire: init-postgres failed: ${e.message}${err instanceof PgError && err.hint !== undefined ? `\nhint: ${err.hint}` : ''}\n`);
    return 1;
  } finally {
    conn.close();
  }
}

/**
 * `cotwire verify --url`: every chain of a PostgreSQL engine, recomputed by
 * PostgreSQL from the README's specification (the SQL, not the installed
 * functions, which whoever can change the database could change too), and
 * with --checkpoint and --key the global log rebuilt from the rows and held
 * against saved signed checkpoints, as for a DuckDB file.
 */
export async function verifyPostgresCommand(
  opts: { url: string; rolePrefix?: string; session?: string; prefix?: string; json?: boolean; checkpoint?: string[]; key?: string },
  out: (text: string) => void,
): Promise<number> {
  const checkpoints = opts.checkpoint ?? [];
  if (checkpoints.length > 0 !== (opts.key !== undefined))
    throw new UsageError('--checkpoint and --key go together: saved checkpoints and the verifier key that signed them');
  const conn = await connectOrSay(opts.url, 'cotwire verify');
  if (conn === null) return 1;
  try {
    const names = new ProtectedNames(opts.prefix === undefined ? [] : [opts.prefix]);
    const catalog = new LedgerCatalog(conn, (n) => names.isProtected(n), null, readPostgresTables(opts.rolePrefix ?? 'cotwire'));
    const verdicts = await verifyPgLedgers(conn, catalog, opts.session ?? null);
    const broken = verdicts.filter((v) => !v.valid);
    const log =
      checkpoints.length === 0
        ? null
        : await verifyLog(
            conn,
            await new LedgerCatalog(conn, () => true, null, readPostgresTables(opts.rolePrefix ?? 'cotwire')).all(),
            readCheckpoints(checkpoints),
            readVerifier(opts.key as string),
            null,
          );
    const valid = broken.length === 0 && (log === null || log.breaks.length === 0);
    if (opts.json === true) {
      out(`${JSON.stringify({ valid, chains: verdicts.length, broken, ...(log === null ? {} : { log }) }, null, 2)}\n`);
    } else {
      for (const v of broken) {
        out(
          `BROKEN ${v.table} chain "${v.chainKey}": step ${v.firstBrokenIndex ?? '?'} ${v.breakKind ?? ''}; expected ${v.expectedHash ?? ''}, found ${v.actualHash ?? ''}\n`,
        );
      }
      if (log !== null) printLogReport(log, out);
      const steps = verdicts.reduce((n, v) => n + v.stepCount, 0);
      out(
        `${valid ? 'OK' : 'FAILED'}: ${verdicts.length} chains, ${steps} steps, ${broken.length} broken${log === null ? '' : `; log ${log.breaks.length === 0 ? 'intact' : 'BROKEN'}`}\n`,
      );
    }
    return valid ? 0 : 1;
  } finally {
    conn.close();
  }
}

/**
 * `cotwire import --db <file> --url <url>`: every ledger of a stopped
 * server's DuckDB file into an empty PostgreSQL engine, with every hash,
 * the global log and the chains' heads as they were (ledger/pg-import.ts);
 * then PostgreSQL verifies every chain it now holds.
 */
export async function importCommand(
  opts: { readonly db: string; readonly url: string; readonly rolePrefix: string },
  out: (text: string) => void,
): Promise<number> {
  const conn = await connectOrSay(opts.url, 'cotwire import');
  if (conn === null) return 1;
  try {
    await installPostgres(conn, opts.rolePrefix);
    const roles = pgRoles(opts.rolePrefix);
    const targetLedgers = await new LedgerCatalog(conn, () => true, null, readPostgresTables(opts.rolePrefix)).all();
    const report = await withDatabase(opts.db, false, async (duck) => {
      const nodeFile = existsSync(MerkleLog.pathFor(opts.db)) ? MerkleLog.openFile(MerkleLog.pathFor(opts.db), true) : null;
      try {
        // Every table with the chain columns is a ledger, whatever the server's prefixes were.
        return await importIntoPostgres(duck, await new LedgerCatalog(duck, () => true).all(), nodeFile, conn, targetLedgers, roles);
      } finally {
        nodeFile?.close();
      }
    });
    for (const l of report.ledgers) out(`${l.created ? 'created' : 'filled'} ${l.name}: ${l.rows} rows\n`);
    const verdicts = await verifyPgLedgers(conn, new LedgerCatalog(conn, () => true, null, readPostgresTables(opts.rolePrefix)), null);
    const broken = verdicts.filter((v) => !v.valid);
    for (const v of broken) out(`BROKEN ${v.table} chain "${v.chainKey}": step ${v.firstBrokenIndex ?? '?'} ${v.breakKind ?? ''}\n`);
    out(
      `${broken.length === 0 ? 'OK' : 'FAILED'}: ${report.leaves} leaves, log root ${report.root}; ${verdicts.length} chains verified by PostgreSQL, ${broken.length} broken\n`,
    );
    return broken.length === 0 ? 0 : 1;
  } catch (err) {
    if (err instanceof UsageError) throw err;
    process.stderr.write(
      `cotwire: import failed, nothing was imported: ${(err as Error).message}${err instanceof PgError && err.hint !== undefined ? `\nhint: ${err.hint}` : ''}\n`,
    );
    return 1;
  } finally {
    conn.close();
  }
}

/**
 * `cotwire import --url <url> --into <file>`: the way back, every ledger of
 * a PostgreSQL engine into a new DuckDB file, with its node file
 * (ledger/duckdb-import.ts); then the file's chains are verified by DuckDB.
 */
export async function importIntoFileCommand(
  opts: { readonly url: string; readonly into: string; readonly rolePrefix: string; readonly compression: 'fast-reads' | 'small' },
  out: (text: string) => void,
): Promise<number> {
  const conn = await connectOrSay(opts.url, 'cotwire import');
  if (conn === null) return 1;
  try {
    const ledgers = await new LedgerCatalog(conn, () => true, null, readPostgresTables(opts.rolePrefix)).all();
    const nodePath = MerkleLog.pathFor(opts.into);
    if (existsSync(nodePath)) throw new UsageError(`${nodePath} exists: the import makes a new database file and its node file`);
    const report = await withNewDatabase(opts.into, opts.compression, async (duck) => {
      const log = MerkleLog.openFile(nodePath);
      let done = false;
      try {
        const imported = await importIntoDuckdb(conn, ledgers, duck, log);
        done = true;
        return imported;
      } finally {
        log.close();
        if (!done) rmSync(nodePath, { force: true });
      }
    });
    for (const l of report.ledgers) out(`created ${l.name}: ${l.rows} rows\n`);
    const verdicts = await withDatabase(opts.into, false, (duck) => verifyLedgers(duck, new LedgerCatalog(duck, () => true), null));
    const broken = verdicts.filter((v) => !v.valid);
    for (const v of broken) out(`BROKEN ${v.table} chain "${v.chainKey}": step ${v.firstBrokenIndex ?? '?'} ${v.breakKind ?? ''}\n`);
    out(
      `${broken.length === 0 ? 'OK' : 'FAILED'}: ${report.leaves} leaves in ${nodePath}; ${verdicts.length} chains verified by DuckDB, ${broken.length} broken\n`,
    );
    return broken.length === 0 ? 0 : 1;
  } catch (err) {
    if (err instanceof UsageError) throw err;
    process.stderr.write(`cotwire: import failed, nothing was imported: ${(err as Error).message}\n`);
    return 1;
  } finally {
    conn.close();
  }
}
