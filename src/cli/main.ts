import { Command, CommanderError, Option } from 'commander';
import { COTWIRE_VERSION } from '../version.js';
import { UsageError } from './usage.js';

/*
 * Each command loads what it needs when it runs: `cotwire --version` and
 * `--help` load neither engine, nor the SQL parser, nor the server.
 */

const out = (t: string): void => {
  process.stdout.write(t);
};

/** Exit codes: 0 success, 1 a failed check or start, 2 a usage error. */
function program(setCode: (code: number) => void): Command {
  const cli = new Command('cotwire')
    .description('A PostgreSQL wire server over embedded DuckDB, with hash-chained ledgers for agents')
    .version(COTWIRE_VERSION, '-v, --version')
    .exitOverride()
    .configureOutput({ writeErr: (t) => process.stderr.write(t) });
  addServerCommands(cli, setCode);
  addVerifyCommands(cli, setCode);
  addFileCommands(cli, setCode);
  return cli;
}

/** Running the server, setting up its PostgreSQL engine, moving ledgers between the engines, and the users' verifiers. */
function addServerCommands(cli: Command, setCode: (code: number) => void): void {
  cli
    .command('serve')
    .description('run the server (environment: COTWIRE_HOST, COTWIRE_PORT, COTWIRE_DB, COTWIRE_CONFIG, ...)')
    .option('--host <host>', 'listen address (default 127.0.0.1)')
    .option('--port <port>', 'listen port (default 5433)')
    .option('--db <file>', 'database file, or :memory: (default ./data/cotwire.duckdb)')
    .option('--config <file>', 'configuration file (YAML or JSON)')
    .option('--log-level <level>', 'trace, debug, info, warn, error, fatal or silent')
    .option('--tls-key <file>', 'PEM private key')
    .option('--tls-cert <file>', 'PEM certificate')
    .option('--http-port <port>', 'the HTTP listener: /healthz, /metrics, OTLP at /v1/traces, the viewer (default 4318; off to turn it off)')
    .option('--http-host <host>', 'where the HTTP listener listens (default 127.0.0.1; beyond loopback it needs users with tokens, and TLS)')
    .option('--metrics-port <port>', 'the older name of --http-port')
    .option('--checkpoint-key <file>', 'the checkpoint signing key file (from `cotwire keygen`)')
    .option('--engine-url <url>', 'run on this PostgreSQL instead of the DuckDB file (postgres://...; COTWIRE_ENGINE_URL)')
    .action(async (opts: Record<string, string>) => setCode(await serve(opts)));

  cli
    .command('import')
    .description(
      "copy every ledger of a stopped server's DuckDB file into an empty PostgreSQL engine (--db), or of a PostgreSQL engine into a new DuckDB file (--into), keeping every hash, the log and the chains' heads",
    )
    .option('--db <file>', 'the DuckDB file to copy from (stop its server first)')
    .option('--into <file>', 'or the new DuckDB file to copy the PostgreSQL engine into')
    .option('--url <url>', 'the PostgreSQL engine (default: COTWIRE_ENGINE_URL)')
    .option('--config <file>', 'configuration file (its engine.url, engine.rolePrefix and database.compression)')
    .action(async (opts: { db?: string; into?: string; url?: string; config?: string }) => {
      if ((opts.db === undefined) === (opts.into === undefined))
        throw new UsageError('import needs --db <file> (into PostgreSQL) or --into <file> (from PostgreSQL), one of them');
      const { loadConfig } = await import('../config/load.js');
      const { importCommand, importIntoFileCommand } = await import('./postgres-commands.js');
      const config = loadConfig({
        argv: { ...(opts.config === undefined ? {} : { config: opts.config }), ...(opts.url === undefined ? {} : { 'engine-url': opts.url }) },
        env: process.env,
      });
      if (config.engine.url === null) throw new UsageError('import needs --url (or COTWIRE_ENGINE_URL, or engine.url in --config)');
      if (opts.into !== undefined) {
        setCode(
          await importIntoFileCommand(
            { url: config.engine.url, into: opts.into, rolePrefix: config.engine.rolePrefix, compression: config.database.compression },
            out,
          ),
        );
      } else setCode(await importCommand({ db: opts.db as string, url: config.engine.url, rolePrefix: config.engine.rolePrefix }, out));
    });

  cli
    .command('init-postgres')
    .description("create cotwire's roles, ledgers, triggers and functions in a PostgreSQL database (idempotent; every start does it too)")
    .option('--url <url>', 'postgres://USER[:PASSWORD]@HOST:PORT/DB, a role that may create roles (default: COTWIRE_ENGINE_URL)')
    .option('--config <file>', 'configuration file (its engine.url and engine.rolePrefix)')
    .action(async (opts: { url?: string; config?: string }) => {
      const { loadConfig } = await import('../config/load.js');
      const { initPostgresCommand } = await import('./postgres-commands.js');
      const config = loadConfig({
        argv: { ...(opts.config === undefined ? {} : { config: opts.config }), ...(opts.url === undefined ? {} : { 'engine-url': opts.url }) },
        env: process.env,
      });
      if (config.engine.url === null) throw new UsageError('init-postgres needs --url (or COTWIRE_ENGINE_URL, or engine.url in --config)');
      setCode(await initPostgresCommand({ url: config.engine.url, rolePrefix: config.engine.rolePrefix }, out));
    });

  cli
    .command('passwd')
    .description('print a SCRAM-SHA-256 verifier for a user, to paste into the configuration')
    .argument('<user>', 'the user name')
    .action(async (user: string) => setCode(await passwd(user)));

  cli
    .command('token')
    .description("make a bearer token for a user's requests to the HTTP listener: the token to give the client, and its hash for users[].token")
    .argument('<user>', 'the user name')
    .action(async (user: string) => {
      const { newToken, tokenHash } = await import('../session/bearer-token.js');
      const token = newToken();
      process.stdout.write(
        `# The token, for the client (cotwire keeps only its hash), as an OTLP exporter takes it:\n` +
          `OTEL_EXPORTER_OTLP_HEADERS="Authorization=Bearer ${token}"\n` +
          `# ${user}'s users[].token in the configuration:\n${tokenHash(token)}\n`,
      );
      setCode(0);
    });
}

/** Verification offline, and the keys and receipts it rests on. */
function addVerifyCommands(cli: Command, setCode: (code: number) => void): void {
  cli
    .command('verify')
    .description('verify every chain offline; exit 0 when intact, 1 when any is broken')
    .option('--db <file>', 'database file (the server need not run)')
    .option('--url <url>', 'or a PostgreSQL engine: postgres://USER[:PASSWORD]@HOST:PORT/DB, a role that may read the ledgers')
    .option('--role-prefix <prefix>', 'with --url: engine.rolePrefix (default cotwire)')
    .option('--session <id>', 'verify one chain key only')
    .option('--prefix <prefix>', 'an extra protected prefix, as in guard.protectedPrefixes')
    .option('--json', 'print the report as JSON')
    .option('--checkpoint <files...>', 'saved checkpoints (files or sink directories) to verify the global log against')
    .option(
      '--key <verifier>',
      'the verifier key that signs the checkpoints (the key text, or a file holding it); again for a key the log records as rotated to after a lost one',
      (value: string, previous: string[]) => [...previous, value],
      [] as string[],
    )
    .action(
      async (opts: {
        db?: string;
        url?: string;
        rolePrefix?: string;
        session?: string;
        prefix?: string;
        json?: boolean;
        checkpoint?: string[];
        key: string[];
      }) => {
        if ((opts.db === undefined) === (opts.url === undefined)) throw new UsageError('verify needs --db <file> or --url <postgres url>, one of them');
        if (opts.url !== undefined) {
          const { verifyPostgresCommand } = await import('./postgres-commands.js');
          setCode(await verifyPostgresCommand({ ...opts, url: opts.url }, out));
        } else {
          const { verifyCommand } = await import('./ledger-commands.js');
          setCode(await verifyCommand({ ...opts, db: opts.db as string }, out));
        }
      },
    );

  cli
    .command('keygen')
    .description(
      "create a checkpoint signing key file and print its verifier key; with --rotate, also record in a stopped server's log that checkpoints are signed by it from now on",
    )
    .option('--name <name>', "the key name, which is also the checkpoints' origin (for example example.com/agents; with --rotate, the old key's by default)")
    .requiredOption('--out <file>', 'the key file to create (never overwritten; keep it off the database disk)')
    .option('--rotate', "record the rotation in the log of --db's file, and sign a checkpoint with the new key (stop the server first)")
    .option('--db <file>', 'with --rotate: the DuckDB file')
    .option('--url <url>', 'with --rotate: or the PostgreSQL engine (postgres://...; stop every instance first)')
    .option('--config <file>', "with --rotate: the server's configuration file (its database, checkpoint sinks)")
    .option('--old-key <file>', 'with --rotate: the key file that signed the last checkpoint, which signs the rotation')
    .option('--reason <text>', 'with --rotate and no --old-key: why the old key is lost, recorded in the log', '')
    .action(async (opts: { name?: string; out: string; rotate?: boolean; db?: string; url?: string; config?: string; oldKey?: string; reason: string }) => {
      const commands = await import('./log-commands.js');
      if (opts.rotate !== true) {
        if (opts.name === undefined) throw new UsageError("keygen needs --name: the key name, which is also the checkpoints' origin");
        if (opts.db !== undefined || opts.url !== undefined || opts.oldKey !== undefined || opts.config !== undefined)
          throw new UsageError('--db, --url, --config and --old-key go with --rotate');
        setCode(commands.keygenCommand({ name: opts.name, out: opts.out }, out));
        return;
      }
      setCode(await commands.rotateKeyCommand(opts, out));
    });

  cli
    .command('accept-loss')
    .description(
      "record in a stopped server's log that acknowledged appends are lost (the start names them) or that chains were cut behind it, signed and chained; the server then starts, appends go on, and every later audit and verification shows the gap",
    )
    .option('--db <file>', 'the DuckDB file')
    .option('--url <url>', 'a PostgreSQL engine (postgres://...)')
    .option('--config <file>', "the server's configuration file (its database, checkpoint key and sinks)")
    .requiredOption('--reason <text>', 'why they are lost, for the record (what happened to the journal or the database)')
    .action(async (opts: { db?: string; url?: string; config?: string; reason: string }) =>
      setCode(await (await import('./log-commands.js')).acceptLossCommand(opts, out)),
    );

  cli
    .command('prove')
    .description("write a step's receipt: its row, leaf index, inclusion proof and signed checkpoint")
    .requiredOption('--db <file>', 'database file (the server need not run)')
    .requiredOption('--trace <id>', "the step's trace_id")
    .option('--out <file>', 'write the receipt here instead of to standard output')
    .action(async (opts: { db: string; trace: string; out?: string }) => setCode(await (await import('./log-commands.js')).proveCommand(opts, out)));

  cli
    .command('evidence')
    .description(
      "save a session's evidence bundle from a running server's HTTP listener: its steps' receipts against the latest signed checkpoint, the verifier key and the commands that check it (tools/check_evidence.py)",
    )
    .requiredOption('--session <id>', 'the session')
    .option('--since <tree_size>', 'add a consistency proof from your earlier checkpoint of this many leaves')
    .option('--url <url>', 'the HTTP listener (default http://127.0.0.1:4318)')
    .option('--token <token>', "a user's token, when users are configured (default: COTWIRE_TOKEN)")
    .option('--out <file>', 'write the bundle here instead of to standard output')
    .action(async (opts: { session: string; since?: string; url?: string; token?: string; out?: string }) =>
      setCode(await (await import('./evidence-command.js')).evidenceCommand({ ...opts, token: opts.token ?? process.env.COTWIRE_TOKEN }, out)),
    );

  cli
    .command('check-receipt')
    .description('verify a receipt offline, with no database; exit 0 when it verifies, 1 when not')
    .argument('<receipt>', 'the receipt file from `cotwire prove`')
    .requiredOption('--key <verifier>', 'the verifier key (the key text, or a file holding it)')
    .action(async (receipt: string, opts: { key: string }) =>
      setCode((await import('./log-commands.js')).checkReceiptCommand({ receipt, key: opts.key }, out)),
    );
}

/** Reading and maintaining a stopped server's database file, and the MCP bridge for agents. */
function addFileCommands(cli: Command, setCode: (code: number) => void): void {
  cli
    .command('replay')
    .description("print a session's steps, in order")
    .requiredOption('--db <file>', 'database file')
    .requiredOption('--session <id>', 'the session')
    .action(async (opts: { db: string; session: string }) => setCode(await (await import('./ledger-commands.js')).replayCommand(opts, out)));

  cli
    .command('sessions')
    .description('list sessions with step counts and chain status; exit 1 when any chain is broken')
    .requiredOption('--db <file>', 'database file')
    .option('--agent <id>', 'only this agent_id')
    .option('--json', 'print JSON')
    .action(async (opts: { db: string; agent?: string; json?: boolean }) => setCode(await (await import('./ledger-commands.js')).sessionsCommand(opts, out)));

  cli
    .command('export')
    .description('export the reasoning steps to a file, offline (clients cannot write files)')
    .requiredOption('--db <file>', 'database file')
    .addOption(new Option('--format <format>', 'output format').choices(['parquet', 'csv', 'jsonl']).makeOptionMandatory())
    .requiredOption('--out <path>', 'the file to write')
    .option('--session <id>', 'one session only')
    .action(async (opts: { db: string; format: 'parquet' | 'csv' | 'jsonl'; out: string; session?: string }) =>
      setCode(await (await import('./ledger-commands.js')).exportCommand(opts, out)),
    );

  cli
    .command('retain')
    .description('remove the sessions whose last step is older than --days (or ledger.retentionDays), recording each one; stop the server first')
    .requiredOption('--db <file>', 'database file (stop the server first)')
    .option('--config <file>', 'configuration file (its checkpoint key and sinks sign the records)')
    .option('--days <n>', 'the age in days, at least ledger.retentionFloorDays (default: ledger.retentionDays)')
    .option('--dry-run', 'only list what would be removed')
    .option('--json', 'print JSON')
    .action(async (opts: { db: string; config?: string; days?: string; dryRun?: boolean; json?: boolean }) => {
      const { loadConfig } = await import('../config/load.js');
      const { retainCommand } = await import('./erasure-commands.js');
      const config = loadConfig({ argv: { ...(opts.config === undefined ? {} : { config: opts.config }), db: opts.db }, env: process.env });
      setCode(await retainCommand(config, opts, out));
    });

  cli
    .command('compact')
    .description('rewrite the database file so that no redacted value or removed row survives in its free blocks; stop the server first')
    .requiredOption('--db <file>', 'database file (stop the server first)')
    .option('--config <file>', 'configuration file (its database.compression)')
    .action(async (opts: { db: string; config?: string }) => {
      const { loadConfig } = await import('../config/load.js');
      const { compactCommand } = await import('./erasure-commands.js');
      const config = loadConfig({ argv: { ...(opts.config === undefined ? {} : { config: opts.config }), db: opts.db }, env: process.env });
      setCode(await compactCommand(config, out));
    });

  cli
    .command('reembed')
    .description('make the vectors of the steps selected for an embedding again, offline, with another model (or fill in the missing ones)')
    .requiredOption('--db <file>', 'database file (stop the server first)')
    .option('--config <file>', 'configuration file: its embedding section is the default')
    .option('--model <name>', 'the model (embedding.model)')
    .addOption(new Option('--provider <provider>', 'embedding.provider').choices(['builtin', 'openai']))
    .option('--url <url>', 'for openai: the embeddings endpoint (embedding.url)')
    .option('--dimensions <n>', 'the length of the vectors (embedding.dimensions)')
    .option('--force', 'drop every vector first, even of the same model')
    .action(async (opts: { db: string; config?: string; model?: string; provider?: string; url?: string; dimensions?: string; force?: boolean }) => {
      const env: Record<string, string | undefined> = { ...process.env };
      if (opts.provider !== undefined) env.COTWIRE_EMBEDDING_PROVIDER = opts.provider;
      if (opts.url !== undefined) env.COTWIRE_EMBEDDING_URL = opts.url;
      if (opts.model !== undefined) env.COTWIRE_EMBEDDING_MODEL = opts.model;
      if (opts.dimensions !== undefined) env.COTWIRE_EMBEDDING_DIMENSIONS = opts.dimensions;
      const { loadConfig } = await import('../config/load.js');
      const { reembedCommand } = await import('./embedding-commands.js');
      const config = loadConfig({ argv: { ...(opts.config === undefined ? {} : { config: opts.config }), db: opts.db }, env });
      setCode(await reembedCommand(opts.db, config.embedding, opts.force === true, out));
    });

  cli
    .command('mcp')
    .description('serve the reasoning-trace tools to an agent over MCP (stdio), as a client of a running cotwire')
    .requiredOption('--url <url>', 'postgres://USER[:PASSWORD]@HOST:PORT/DB of the running cotwire (PGPASSWORD works too)')
    .action(async (opts: { url: string }) => setCode(await mcp(opts.url)));
}

/** Runs a command; returns the exit code. User errors print one line, never a stack trace. */
export async function main(args: readonly string[]): Promise<number> {
  let code = 0;
  const cli = program((c) => {
    code = c;
  });
  if (args.length === 0) {
    cli.outputHelp();
    return 2;
  }
  try {
    await cli.parseAsync([...args], { from: 'user' });
    return code;
  } catch (err) {
    if (err instanceof CommanderError) {
      // --help and --version end here too, with code 0.
      return err.exitCode === 0 ? 0 : 2;
    }
    if (err instanceof UsageError) {
      process.stderr.write(`cotwire: ${err.message}\n`);
      return 2;
    }
    // Loaded only on an error: --version and --help need neither.
    const [{ ConfigError }, { StartupError }] = await Promise.all([import('../config/load.js'), import('../server/startup.js')]);
    if (err instanceof ConfigError || err instanceof StartupError) {
      process.stderr.write(`cotwire: ${err.message}\n`);
      return 1;
    }
    throw err;
  }
}

async function serve(flags: Record<string, string>): Promise<number> {
  const argv: Record<string, string> = {};
  const names: Record<string, string> = {
    logLevel: 'log-level',
    tlsKey: 'tls-key',
    tlsCert: 'tls-cert',
    metricsPort: 'metrics-port',
    httpPort: 'http-port',
    httpHost: 'http-host',
    checkpointKey: 'checkpoint-key',
    engineUrl: 'engine-url',
  };
  for (const [k, v] of Object.entries(flags)) argv[names[k] ?? k] = v;
  const [{ loadConfig, redactUrl }, { createFinalLogger, createLogger }, { startServer }] = await Promise.all([
    import('../config/load.js'),
    import('../log/logger.js'),
    import('../main.js'),
  ]);
  const config = loadConfig({ argv, env: process.env });
  const log = createLogger(config.log.level, process.stdout.isTTY === true);
  // cli.ts sized libuv's pool before anything could start it (4 is libuv's own default).
  const running = await startServer(config, log, { threadPoolSize: Number(process.env.UV_THREADPOOL_SIZE ?? 4) || 4 });
  const { address, port } = running.address;
  const host = address.includes(':') ? `[${address}]` : address;
  const user = config.users[0]?.name ?? 'cotwire';
  log.info(
    {
      address: `${host}:${port}`,
      database: config.engine.url === null ? config.database.path : redactUrl(config.engine.url),
      http: running.httpAddress?.port ?? null,
    },
    `cotwire ${COTWIRE_VERSION} listening on ${host}:${port}; connect with: psql -h ${address} -p ${port} -U ${user} ${config.database.name}`,
  );
  return new Promise<number>((resolve) => {
    let stoppingSince: number | null = null;
    const stop = (signal: string): void => {
      if (stoppingSince !== null) {
        // One Ctrl-C under `npm start` arrives twice: from the terminal to the process group, and forwarded by npm.
        // A second signal means "now" only when someone sent it after the first.
        if (performance.now() - stoppingSince < SIGNAL_REPEAT_MS) return;
        createFinalLogger(config.log.level).warn({ signal }, 'second signal: exiting without waiting');
        // Not process.exit(): its clean-up waits for the engine's running statements, which is what a second signal
        // refuses to wait for. Every acknowledged append is already durable (the journal is written synchronously), so
        // the process ends as the signal's default ends it.
        process.removeAllListeners(signal);
        process.kill(process.pid, signal);
        return;
      }
      stoppingSince = performance.now();
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
    // \`on\`, not \`once\`: a second signal must reach stop() to be logged and obeyed, not kill the process unannounced.
    process.on('SIGINT', () => stop('SIGINT'));
    process.on('SIGTERM', () => stop('SIGTERM'));
  });
}

/** Signals closer together than this are one: a terminal's and npm's copies of the same Ctrl-C. */
const SIGNAL_REPEAT_MS = 1000;

async function passwd(user: string): Promise<number> {
  const [{ readPassword }, { makeScramVerifier }] = await Promise.all([import('./password.js'), import('../session/scram.js')]);
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

async function mcp(url: string): Promise<number> {
  if (!/^postgres(ql)?:\/\//.test(url)) throw new UsageError(`--url must be a postgres:// URL, not "${url}"`);
  // Loaded on demand: the other commands need none of the MCP SDK.
  const { runMcpServer } = await import('../mcp/server.js');
  await runMcpServer({ url });
  return 0;
}
