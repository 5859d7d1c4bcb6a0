import { PgError } from '../errors/pg-error.js';
import { PostgresConnection } from '../engines/postgres/adapter/connection.js';
import { PG_SCHEMA, pgRoles } from '../engines/postgres/ledger/names.js';
import { installPostgres, sharedSignerKey } from '../engines/postgres/ledger/install.js';
import { ProtectedNames } from '../guard/names.js';
import { LedgerCatalog } from '../ledger/chain/catalog.js';
import { verifyLog } from '../ledger/log/log-verify.js';
import { CHECKPOINTS_TABLE } from '../ledger/log/checkpoint-schema.js';
import { keyBreak, keyIdText, noteSigners } from '../ledger/log/key-continuity.js';
import { parseSigner } from '../ledger/log/note.js';
import { readKeyFile } from '../ledger/log/signing-key.js';
import { readPostgresTables } from '../engines/postgres/ledger/catalog.js';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { importIntoPostgres } from '../engines/postgres/dialect/import.js';
import { withDatabase, withNewDatabase } from './database.js';
import { UsageError } from './usage.js';
import { importIntoDuckdb } from '../engines/duckdb/dialect/import.js';
import { duckdbExport } from '../engines/duckdb/dialect/export.js';
import { postgresExport } from '../engines/postgres/dialect/export.js';
import { chainVerifier as duckdbChainVerifier } from '../engines/duckdb/dialect/verify.js';
import { chainVerifier as pgChainVerifier } from '../engines/postgres/dialect/verify.js';
import { readCheckpoints, readVerifier } from './log-commands.js';
import { printImportVerdict, printVerifyReport } from './verify-report.js';
import { redactUrl } from '../config/load.js';
import { openNodeFile, nodeFilePath } from '../engines/duckdb/log/node-file.js';
import { duckdbLedgers } from '../engines/duckdb/ledger/catalog-source.js';

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
    out(
      `readers' statements run as ${roles.reader}, writers' as ${roles.writer}, admins' as ${roles.admin}; ledger appends as ${roles.server}; ${roles.owner} owns the ledgers\n`,
    );
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
  opts: { url: string; rolePrefix?: string; session?: string; prefix?: string; json?: boolean; checkpoint?: string[]; key: readonly string[] },
  out: (text: string) => void,
): Promise<number> {
  const checkpoints = opts.checkpoint ?? [];
  if (checkpoints.length > 0 !== opts.key.length > 0)
    throw new UsageError('--checkpoint and --key go together: saved checkpoints and the verifier key that signed them');
  const conn = await connectOrSay(opts.url, 'cotwire verify');
  if (conn === null) return 1;
  try {
    const names = new ProtectedNames(opts.prefix === undefined ? [] : [opts.prefix]);
    const catalog = new LedgerCatalog(conn, (n) => names.isProtected(n), null, readPostgresTables(opts.rolePrefix ?? 'cotwire'));
    const verdicts = await pgChainVerifier(conn, catalog).verify(opts.session ?? null);
    const log =
      checkpoints.length === 0
        ? null
        : await verifyLog(
            conn,
            await new LedgerCatalog(conn, () => true, null, readPostgresTables(opts.rolePrefix ?? 'cotwire')).all(),
            readCheckpoints(checkpoints),
            opts.key.map(readVerifier),
            null,
          );
    return printVerifyReport({ verdicts, log, redactions: null }, opts.json === true, out);
  } finally {
    conn.close();
  }
}

/**
 * `cotwire import --db <file> --url <url>`: every ledger of a stopped
 * server's DuckDB file into an empty PostgreSQL engine, with every hash,
 * the global log and the chains' heads as they were (engines/postgres/dialect/import.ts);
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
      const nodeFile = existsSync(nodeFilePath(opts.db)) ? openNodeFile(nodeFilePath(opts.db), true) : null;
      try {
        // Every table with the chain columns is a ledger, whatever the server's prefixes were.
        return await importIntoPostgres(duckdbExport(duck, await duckdbLedgers(duck, () => true).all(), nodeFile), conn, targetLedgers, roles);
      } finally {
        nodeFile?.close();
      }
    });
    for (const l of report.ledgers) out(`${l.created ? 'created' : 'filled'} ${l.name}: ${l.rows} rows\n`);
    out(await carryKeyToEngine(conn, `${opts.db}.key`));
    const verdicts = await pgChainVerifier(conn, new LedgerCatalog(conn, () => true, null, readPostgresTables(opts.rolePrefix))).verify(null);
    return printImportVerdict(
      verdicts,
      (chains, broken) => `${report.leaves} leaves, log root ${report.root}; ${chains} chains verified by PostgreSQL, ${broken} broken`,
      out,
    );
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
 * (engines/duckdb/dialect/import.ts); then the file's chains are verified by DuckDB.
 */
export async function importIntoFileCommand(
  opts: { readonly url: string; readonly into: string; readonly rolePrefix: string; readonly compression: 'fast-reads' | 'small' },
  out: (text: string) => void,
): Promise<number> {
  const conn = await connectOrSay(opts.url, 'cotwire import');
  if (conn === null) return 1;
  try {
    const ledgers = await new LedgerCatalog(conn, () => true, null, readPostgresTables(opts.rolePrefix)).all();
    const nodePath = nodeFilePath(opts.into);
    if (existsSync(nodePath)) throw new UsageError(`${nodePath} exists: the import makes a new database file and its node file`);
    const report = await withNewDatabase(opts.into, opts.compression, async (duck) => {
      const log = openNodeFile(nodePath);
      let done = false;
      try {
        const imported = await importIntoDuckdb(postgresExport(conn, ledgers), duck, log);
        done = true;
        return imported;
      } finally {
        log.close();
        if (!done) rmSync(nodePath, { force: true });
      }
    });
    for (const l of report.ledgers) out(`created ${l.name}: ${l.rows} rows\n`);
    out(await carryKeyToFile(conn, `${opts.into}.key`));
    const verdicts = await withDatabase(opts.into, false, (duck) =>
      duckdbChainVerifier(
        duck,
        duckdbLedgers(duck, () => true),
      ).verify(null),
    );
    return printImportVerdict(
      verdicts,
      (chains, broken) => `${report.leaves} leaves in ${nodePath}; ${chains} chains verified by DuckDB, ${broken} broken`,
      out,
    );
  } catch (err) {
    if (err instanceof UsageError) throw err;
    process.stderr.write(`cotwire: import failed, nothing was imported: ${(err as Error).message}\n`);
    return 1;
  } finally {
    conn.close();
  }
}

/**
 * The key that signed the file's checkpoints goes with its ledgers: the key file beside it becomes the
 * engine's shared key, so that instances without checkpoint.keyFile sign on with it (a server signs only
 * with the key that signed the last checkpoint). A key kept elsewhere is named, for checkpoint.keyFile.
 */
async function carryKeyToEngine(conn: PostgresConnection, besideFile: string): Promise<string> {
  const last = await lastCheckpointNote(conn);
  if (last === null) return '';
  const signedBy = noteSigners(last)[0];
  const beside = existsSync(besideFile) ? readKeyFile(besideFile) : null;
  if (beside !== null && signedBy !== undefined && beside.name === signedBy.name && beside.keyHash === signedBy.keyHash) {
    if ((await sharedSignerKey(conn, null)) === null) {
      await conn.query(`INSERT INTO ${PG_SCHEMA}.secrets (name, value) VALUES ('checkpoint_key', $1) ON CONFLICT (name) DO NOTHING`, [
        readFileSync(besideFile, 'utf8').trim(),
      ]);
      return `the checkpoint key beside the file (${besideFile}) is now the engine's shared key: instances without checkpoint.keyFile sign with it\n`;
    }
  }
  return `the checkpoints were signed by ${signedBy === undefined ? 'an unknown key' : keyIdText(signedBy)}: start every instance with checkpoint.keyFile set to that key\n`;
}

/** The way back: the engine's shared key, when it signed the last checkpoint, goes beside the new file. */
async function carryKeyToFile(conn: PostgresConnection, besideFile: string): Promise<string> {
  const last = await lastCheckpointNote(conn);
  if (last === null) return '';
  const shared = await sharedSignerKey(conn, null).catch(() => null);
  if (shared !== null && keyBreak(last, parseSigner(shared)) === null && !existsSync(besideFile)) {
    writeFileSync(besideFile, `${shared}\n`, { mode: 0o600, flag: 'wx' });
    return `the engine's shared checkpoint key is in ${besideFile}, where the server looks without checkpoint.keyFile\n`;
  }
  const signedBy = noteSigners(last)[0];
  return `the checkpoints were signed by ${signedBy === undefined ? 'an unknown key' : keyIdText(signedBy)}: start the server with checkpoint.keyFile set to that key\n`;
}

async function lastCheckpointNote(conn: PostgresConnection): Promise<string | null> {
  const rows = (await conn.query(`SELECT checkpoint FROM public.${CHECKPOINTS_TABLE} ORDER BY ledger_seq DESC LIMIT 1`)) as Array<[string]>;
  return rows[0]?.[0] ?? null;
}
