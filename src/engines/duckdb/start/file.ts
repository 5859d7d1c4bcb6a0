import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import type { Engine } from '../../../engine/port.js';
import type { Logger } from '../../../log/logger.js';
import { StartupError } from '../../../server/startup.js';
import { DuckDBEngine, rewriteDatabaseFile, type EngineCompression } from '../adapter/engine.js';
import { engineSetup } from '../catalog/compat.js';
import { removeStepStore, stepStorePath } from '../steps-store/store.js';

/** The database file: opening it, and rewriting it after an erasure so that erased bytes leave it. */

export async function openEngine(
  path: string,
  compression: EngineCompression,
  memory?: { readonly memoryMB: number; readonly spillMB: number },
): Promise<Engine> {
  if (path !== ':memory:') {
    try {
      mkdirSync(dirname(path), { recursive: true });
    } catch (err) {
      throw new StartupError(`cannot create the directory for the database file ${path}: ${(err as Error).message}`);
    }
  }
  try {
    return await DuckDBEngine.open({ path, setup: engineSetup(), compression, ...(memory ?? {}) });
  } catch (err) {
    const reason = (err as Error).message.split('\n')[0] ?? 'unknown error';
    throw new StartupError(`cannot open the database file ${path}: ${reason}`);
  }
}

/** Rewrites a stopped server's database file now, and clears a pending rewrite. */
export async function compactDatabaseFile(
  path: string,
  compression: EngineCompression,
): Promise<{ readonly bytesBefore: number; readonly bytesAfter: number }> {
  removeStepStore(stepStorePath(path));
  const result = await rewriteDatabaseFile(path, compression);
  rmSync(`${path}.erased`, { force: true });
  return result;
}

/** Marks the database file for a rewrite: values were redacted or rows removed, and their bytes may linger in freed blocks. */
export function markErased(path: string): void {
  if (path === ':memory:') return;
  const marker = `${path}.erased`;
  if (!existsSync(marker)) writeFileSync(marker, `${new Date().toISOString()}\n`, { mode: 0o600 });
}

/**
 * Rewrites the database file when something was erased from it: at the
 * stop, and at the start after a stop that did not get to it.
 */
export async function rewriteIfErased(path: string, compression: EngineCompression, log: Logger): Promise<void> {
  const marker = `${path}.erased`;
  if (!existsSync(marker)) return;
  // The row store of steps held the erased values too: it is rebuilt from the rewritten ledger.
  removeStepStore(stepStorePath(path));
  if (!existsSync(path)) {
    rmSync(marker, { force: true });
    return;
  }
  try {
    const { bytesBefore, bytesAfter } = await rewriteDatabaseFile(path, compression);
    rmSync(marker, { force: true });
    log.info({ database: path, bytesBefore, bytesAfter }, 'rewrote the database file, so that no redacted value or removed row survives in its freed blocks');
  } catch (err) {
    log.error(
      { err, database: path },
      `rewriting the database file after an erasure failed; it is retried at the next stop or start, or run \`cotwire compact --db ${path}\``,
    );
    throw err;
  }
}
