import { existsSync, rmSync } from 'node:fs';
import { DuckDBEngine } from '../engines/duckdb/adapter/engine.js';
import type { EngineConnection } from '../engine/port.js';
import { Journal } from '../engines/duckdb/ledger/journal.js';
import { LedgerWriter } from '../engines/duckdb/ledger/writer.js';
import { duckdbLedgers } from '../engines/duckdb/ledger/catalog-source.js';
import { UsageError } from './usage.js';

/**
 * Opens a stopped server's file, read-only unless `writable` (the derived
 * vector table's rebuild); `files` lets the administrator's export write
 * its output. Steps a crashed server acknowledged from its
 * journal and had not yet applied are applied first, as the server's next
 * start would.
 */
export async function withDatabase<T>(path: string, files: boolean, fn: (conn: EngineConnection) => Promise<T>, writable = false): Promise<T> {
  let engine: DuckDBEngine;
  try {
    if (writable && !existsSync(path)) throw new Error('no such file');
    await applyJournal(path);
    engine = await DuckDBEngine.open({ path, readOnly: !writable, allowFiles: files });
  } catch (err) {
    throw new UsageError(`cannot open the database file ${path}: ${(err as Error).message.split('\n')[0] ?? ''}`);
  }
  try {
    const conn = await engine.connect();
    try {
      return await fn(conn);
    } finally {
      conn.close();
    }
  } finally {
    await engine.close();
  }
}

async function applyJournal(path: string): Promise<void> {
  const journalPath = Journal.pathFor(path);
  if (!existsSync(journalPath)) return;
  const engine = await DuckDBEngine.open({ path });
  try {
    const conn = await engine.connect();
    try {
      // Any table with the chain columns is a ledger the journal may name, whatever the server's prefixes were.
      const writer = await LedgerWriter.open(
        engine,
        duckdbLedgers(conn, () => true),
        { journalPath },
      );
      await writer.close();
    } finally {
      conn.close();
    }
  } finally {
    await engine.close();
  }
}

/**
 * Creates a new database file (refused when one exists) and runs `fn` on
 * it, with the server's compression; the file is removed if `fn` fails, so
 * a failed import leaves nothing half-written.
 */
export async function withNewDatabase<T>(path: string, compression: 'fast-reads' | 'small', fn: (conn: EngineConnection) => Promise<T>): Promise<T> {
  if (existsSync(path)) throw new UsageError(`${path} exists: the import makes a new database file`);
  const engine = await DuckDBEngine.open({ path, compression });
  let ok = false;
  try {
    const conn = await engine.connect();
    try {
      const result = await fn(conn);
      ok = true;
      return result;
    } finally {
      conn.close();
    }
  } finally {
    await engine.checkpoint().catch(() => undefined);
    await engine.close();
    if (!ok) for (const f of [path, `${path}.wal`]) rmSync(f, { force: true });
  }
}
