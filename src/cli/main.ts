import { ConfigError, loadConfig } from '../config/load.js';
import { createLogger } from '../log/logger.js';
import { startServer, StartupError } from '../main.js';
import { makeScramVerifier } from '../session/scram.js';
import { COTWIRE_VERSION } from '../version.js';
import { readPassword } from './password.js';
import { replayCommand, UsageError, verifyCommand } from './ledger-commands.js';

const USAGE = `cotwire ${COTWIRE_VERSION}: a PostgreSQL wire server over embedded DuckDB

Usage:
  cotwire serve [--host H] [--port P] [--db FILE] [--config FILE] [--log-level L] [--metrics-port P]
  cotwire passwd USER        print a SCRAM-SHA-256 verifier for the configuration file
  cotwire verify --db FILE [--session ID] [--json]   verify every chain offline (exit 0 intact, 1 broken)
  cotwire replay --db FILE --session ID              print a session's steps
  cotwire --version

Environment: COTWIRE_HOST, COTWIRE_PORT, COTWIRE_DB, COTWIRE_CONFIG, COTWIRE_LOG_LEVEL.
`;

const FLAGS = new Set(['host', 'port', 'db', 'config', 'log-level', 'tls-key', 'tls-cert', 'metrics-port']);

function parseFlags(args: readonly string[]): Record<string, string> {
  const flags: Record<string, string> = {};
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string;
    const m = /^--([a-z-]+)(?:=(.*))?$/.exec(arg);
    if (m === null || !FLAGS.has(m[1] as string)) throw new ConfigError(`unknown argument ${arg}\n\n${USAGE}`);
    const value = m[2] ?? args[++i];
    if (value === undefined) throw new ConfigError(`--${m[1]} needs a value`);
    flags[m[1] as string] = value;
  }
  return flags;
}

/** Runs a command; returns the exit code. User errors print one line, never a stack trace. */
export async function main(args: readonly string[]): Promise<number> {
  const [command, ...rest] = args;
  try {
    switch (command) {
      case 'serve':
        return await serve(parseFlags(rest));
      case 'passwd':
        return await passwd(rest);
      case 'verify':
        return await verifyCommand(rest, (t) => process.stdout.write(t));
      case 'replay':
        return await replayCommand(rest, (t) => process.stdout.write(t));
      case '--version':
      case 'version':
        process.stdout.write(`${COTWIRE_VERSION}\n`);
        return 0;
      case undefined:
      case '--help':
      case 'help':
        process.stdout.write(USAGE);
        return command === undefined ? 2 : 0;
      default:
        process.stderr.write(`cotwire: unknown command "${command}"\n\n${USAGE}`);
        return 2;
    }
  } catch (err) {
    if (err instanceof UsageError) {
      process.stderr.write(`cotwire: ${err.message}\n`);
      return 2;
    }
    if (err instanceof ConfigError || err instanceof StartupError) {
      process.stderr.write(`cotwire: ${err.message}\n`);
      return 1;
    }
    throw err;
  }
}

async function serve(flags: Record<string, string>): Promise<number> {
  const config = loadConfig({ argv: flags, env: process.env });
  const log = createLogger(config.log.level, process.stdout.isTTY === true);
  const running = await startServer(config, log);
  const { address, port } = running.address;
  const host = address.includes(':') ? `[${address}]` : address;
  const user = config.users[0]?.name ?? 'cotwire';
  log.info(
    { address: `${host}:${port}`, database: config.database.path },
    `cotwire ${COTWIRE_VERSION} listening on ${host}:${port}; connect with: psql -h ${address} -p ${port} -U ${user} ${config.database.name}`,
  );
  return new Promise<number>((resolve) => {
    let stopping = false;
    const stop = (signal: string): void => {
      if (stopping) {
        log.warn({ signal }, 'second signal: exiting without waiting');
        process.exit(1);
      }
      stopping = true;
      log.info({ signal }, 'shutting down: draining connections');
      running.close().then(
        () => {
          log.info({}, 'shut down cleanly');
          resolve(0);
        },
        (err: unknown) => {
          log.error({ err }, 'shutdown failed');
          resolve(1);
        },
      );
    };
    process.once('SIGINT', () => stop('SIGINT'));
    process.once('SIGTERM', () => stop('SIGTERM'));
  });
}

async function passwd(args: readonly string[]): Promise<number> {
  const user = args[0];
  if (user === undefined || args.length > 1) {
    process.stderr.write('usage: cotwire passwd USER\n');
    return 2;
  }
  const password = await readPassword(`Password for ${user}: `);
  if (password === '') {
    process.stderr.write('cotwire: the password is empty\n');
    return 1;
  }
  if (process.stdin.isTTY === true) {
    const again = await readPassword('Repeat it: ');
    if (again !== password) {
      process.stderr.write('cotwire: the passwords differ\n');
      return 1;
    }
  }
  process.stdout.write(`users:\n  - name: ${JSON.stringify(user)}\n    password: ${makeScramVerifier(password)}\n`);
  return 0;
}
