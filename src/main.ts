import type { Config } from './config/schema.js';
import type { RunningServer as RunningDuckdbServer, ServerRuntime } from './engines/duckdb/start.js';
import type { RunningPostgresServer } from './engines/postgres/start.js';
import type { Logger } from './log/logger.js';

/** A started server of either engine; `kind` tells which, and with it the engine's own parts. */
export type RunningServer = RunningDuckdbServer | RunningPostgresServer;

/**
 * Starts the wing that `engine.kind` names: the embedded DuckDB file (the
 * default) or PostgreSQL. Only that wing is loaded, so a server on one
 * engine never loads the other's driver.
 */
export async function startServer(config: Config, log: Logger, runtime?: ServerRuntime): Promise<RunningServer> {
  if (config.engine.kind === 'postgres') {
    const { startPostgresServer } = await import('./engines/postgres/start.js');
    return startPostgresServer(config, log);
  }
  const { startServer: startDuckdbServer } = await import('./engines/duckdb/start.js');
  return startDuckdbServer(config, log, runtime);
}
