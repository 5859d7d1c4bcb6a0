import { randomInt } from 'node:crypto';
import net from 'node:net';
import tls from 'node:tls';
import { PgError } from '../errors/pg-error.js';
import { SqlState } from '../errors/sqlstate.js';
import { BackendWriter } from '../protocol/encode.js';
import { inProcessPair, InProcessEnd } from './in-process.js';
import { SharedMessageMemory } from './message-memory.js';
import { Framer, STARTUP_FRAME } from '../protocol/framer.js';
import { StartupCode } from '../protocol/codes.js';
import type { AuthPolicy } from '../session/auth.js';
import type { HandlerFactory } from '../session/handler-port.js';
import { Session, type SessionLog, type Transport } from '../session/session.js';
import type { Observer } from '../observe/observer.js';

export interface ServerOptions {
  readonly host: string;
  readonly port: number;
  readonly maxMessageSize: number;
  /** What every connection's large messages being received may hold together, in bytes (limits.memoryMB's server share). */
  readonly messageMemoryBytes?: number;
  /** Authenticated connections; one more gets 53300 after its StartupMessage. */
  readonly maxConnections: number;
  /** Connections not yet authenticated, all together and from one address: they never take an authenticated client's slot. */
  readonly maxStartupConnections: number;
  readonly maxStartupConnectionsPerAddress: number;
  readonly tls: tls.SecureContext | null;
  readonly auth: AuthPolicy;
  readonly handlers: HandlerFactory;
  readonly log: SessionLog;
  readonly observer: Observer;
  readonly slowStatementMs: number;
  /** From accepting a connection to ReadyForQuery, in milliseconds. */
  readonly startupTimeoutMs: number;
  readonly maxPreparedStatements: number;
  readonly maxPortals: number;
}

interface Entry {
  readonly session: Session;
  readonly secretKey: number;
}

interface Starting {
  readonly session: Session;
  readonly address: string;
  readonly since: number;
}

/**
 * A client still in startup this long has stalled: when the startup places are full, the oldest such is closed to
 * make room. Every driver finishes its startup in a few round trips, far below it.
 */
const STARTUP_STALL_MS = 1000;
/** How long a closed connection may take to read its last message before its socket is destroyed. */
const LINGER_MS = 5000;
/** Past the grace period, how long a stop waits for sessions to close before it destroys their sockets. */
const HARD_STOP_MS = 2000;
/** One line per kind of refusal at most this often. */
const REFUSAL_LOG_MS = 10_000;

/**
 * Accepts connections and wires each socket through a framer to a session.
 * It also owns the cancel registry (process id and secret key → session) and
 * the graceful shutdown.
 */
export class PgServer {
  private readonly server: net.Server;
  private readonly sessions = new Map<number, Entry>();
  /** Sessions in startup or authentication, in the order they connected. */
  private readonly starting = new Map<number, Starting>();
  private authenticatedCount = 0;
  /** Every accepted socket until it closes, refused ones included: a stop destroys what is left. */
  private readonly sockets = new Set<net.Socket | InProcessEnd>();
  private nextProcessId = 1;
  private listening = false;
  /** Refusals are logged at most once per REFUSAL_LOG_MS each, with how many there were since: a flood of clients must not become a flood of log lines. */
  private readonly refusalsLogged = new Map<string, { at: number; since: number }>();
  /** What every connection's large messages being received hold together. */
  private readonly messageMemory: SharedMessageMemory | null;

  constructor(private readonly opts: ServerOptions) {
    this.messageMemory = opts.messageMemoryBytes === undefined ? null : new SharedMessageMemory(opts.messageMemoryBytes);
    this.server = net.createServer((socket) => this.accept(socket));
  }

  /** Resolves with the bound address once listening; rejects on EADDRINUSE and the like. */
  listen(): Promise<net.AddressInfo> {
    return new Promise((resolve, reject) => {
      const onError = (err: Error): void => reject(err);
      this.server.once('error', onError);
      this.server.listen({ host: this.opts.host, port: this.opts.port }, () => {
        this.server.off('error', onError);
        this.listening = true;
        resolve(this.server.address() as net.AddressInfo);
      });
    });
  }

  /** Connections open, in startup or authenticated. */
  get connectionCount(): number {
    return this.sessions.size;
  }

  get isListening(): boolean {
    return this.listening;
  }

  /**
   * Stops accepting, closes clients still in startup, lets running statements finish within `graceMs`, then closes
   * every connection. It ends by `graceMs` + HARD_STOP_MS + LINGER_MS at the latest, whatever the clients do: a socket
   * that is left (a refused client that never reads, a session whose handler does not close) is destroyed.
   */
  async close(graceMs: number): Promise<void> {
    this.listening = false;
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    for (const s of [...this.starting.values()]) s.session.evict();
    const sessionsClosed = Promise.all([...this.sessions.values()].map((e) => e.session.shutdown(graceMs)));
    await within(sessionsClosed, graceMs + HARD_STOP_MS);
    // Each session wrote its 57P01 and ended its socket: give the clients a moment to read it and close.
    await within(this.socketsClosed(), LINGER_MS);
    for (const socket of this.sockets) socket.destroy();
    await closed;
  }

  private socketsClosed(): Promise<void> {
    return Promise.all([...this.sockets].map((s) => new Promise<void>((resolve) => (s.closed ? resolve() : s.once('close', () => resolve()))))).then(
      () => undefined,
    );
  }

  /**
   * Whether a new connection may start: when startup places are full (all together, or from its address), the
   * oldest client that has stalled makes room. A client that makes progress is never closed for another.
   */
  private makeRoomToStart(address: string): boolean {
    const fromAddress = [...this.starting.values()].filter((s) => s.address === address);
    if (fromAddress.length >= this.opts.maxStartupConnectionsPerAddress && !evictStalled(fromAddress)) return false;
    if (this.starting.size >= this.opts.maxStartupConnections && !evictStalled([...this.starting.values()])) return false;
    return true;
  }

  /** 53300 after the StartupMessage when the authenticated slots are full, as PostgreSQL answers it. */
  private admit(): PgError | null {
    if (this.authenticatedCount < this.opts.maxConnections) return null;
    this.logRefusal('connection refused: too many clients', { max: this.opts.maxConnections });
    return new PgError(SqlState.TooManyConnections, 'sorry, too many clients already', {}, 'FATAL');
  }

  private logRefusal(message: string, fields: object): void {
    const now = performance.now();
    const last = this.refusalsLogged.get(message);
    if (last !== undefined && now - last.at < REFUSAL_LOG_MS) {
      last.since++;
      return;
    }
    this.refusalsLogged.set(message, { at: now, since: 0 });
    this.opts.log.warn({ ...fields, ...(last === undefined || last.since === 0 ? {} : { alsoRefusedSinceLastLine: last.since }) }, message);
  }

  private accept(socket: net.Socket): void {
    socket.setNoDelay(true);
    socket.setKeepAlive(true, 60_000);
    this.sockets.add(socket);
    socket.once('close', () => this.sockets.delete(socket));
    socket.on('error', () => undefined);
    const remoteAddress = socket.remoteAddress ?? 'unknown';
    if (!this.listening) {
      socket.destroy();
      return;
    }
    if (!this.makeRoomToStart(remoteAddress)) {
      // Every place is held by a client that is still making progress: this one is told so, before it says a word.
      const out = new BackendWriter().errorResponse(new PgError(SqlState.TooManyConnections, 'sorry, too many clients in startup already', {}, 'FATAL'));
      socket.end(out.take());
      lingerThenDestroy(socket);
      this.logRefusal('connection refused: too many clients in startup', {
        remote: remoteAddress,
        max: this.opts.maxStartupConnections,
        maxPerAddress: this.opts.maxStartupConnectionsPerAddress,
      });
      return;
    }
    this.open(socket, remoteAddress);
  }

  /**
   * A connection from inside the process, already authenticated as `user` by the HTTP listener: the client end is
   * handed to node-postgres as its stream. It takes an authenticated slot like any client, and the stop closes it.
   */
  connectInProcess(user: string, clientAddress: string): InProcessEnd {
    const { client, server } = inProcessPair(clientAddress);
    if (!this.listening) {
      queueMicrotask(() => client.destroy(new Error('the server is not accepting connections')));
      return client;
    }
    this.sockets.add(server);
    server.once('close', () => this.sockets.delete(server));
    server.on('error', () => undefined);
    this.open(server, clientAddress, user);
    return client;
  }

  /** A session for an admitted socket: its transport (TLS upgrade included), framing, and the server's registries. */
  private open(socket: net.Socket | InProcessEnd, remoteAddress: string, authenticatedUser?: string): void {
    const processId = this.nextProcessId++;
    const secretKey = randomInt(-2147483648, 2147483647);
    const log = this.opts.log.child({ conn: processId, remote: remoteAddress });
    const framer = new Framer(this.opts.maxMessageSize, this.messageMemory);
    let stream: net.Socket | tls.TLSSocket | InProcessEnd = socket;
    let upgrading = false;

    const transport: Transport = {
      remoteAddress,
      ...(authenticatedUser === undefined ? {} : { authenticatedUser }),
      get tls() {
        return stream !== socket;
      },
      write: (data) => (stream.destroyed ? true : stream.write(data)),
      writev: (chunks) => {
        if (stream.destroyed) return true;
        // Written together on uncork: one writev for all of them.
        stream.cork();
        let ok = true;
        for (const chunk of chunks) ok = stream.write(chunk);
        stream.uncork();
        return ok;
      },
      drain: () =>
        new Promise((resolve) => {
          if (stream.destroyed || !stream.writableNeedDrain) {
            resolve();
            return;
          }
          const done = (): void => {
            stream.off('drain', done);
            stream.off('close', done);
            resolve();
          };
          stream.on('drain', done);
          stream.on('close', done);
        }),
      startTls:
        this.opts.tls === null || socket instanceof InProcessEnd
          ? null
          : () =>
              new Promise<void>((resolve, reject) => {
                if (framer.hasPartial) {
                  reject(new PgError(SqlState.ProtocolViolation, 'received unencrypted data after SSL request', {}, 'FATAL'));
                  return;
                }
                upgrading = true;
                socket.off('data', onData);
                const secure = new tls.TLSSocket(socket as net.Socket, { isServer: true, secureContext: this.opts.tls as tls.SecureContext });
                secure.once('secure', () => {
                  upgrading = false;
                  stream = secure;
                  secure.on('data', onData);
                  secure.on('error', onError);
                  secure.on('close', onClose);
                  resolve();
                });
                secure.once('error', (err) => {
                  log.info({ err: err.message }, 'TLS handshake failed');
                  reject(new PgError(SqlState.ProtocolViolation, 'TLS handshake failed', {}, 'FATAL'));
                  socket.destroy();
                });
              }),
      pauseInput: () => stream.pause(),
      resumeInput: () => stream.resume(),
      end: () => {
        if (stream.destroyed) return;
        stream.end();
        lingerThenDestroy(stream);
      },
    };

    const session = new Session(transport, {
      processId,
      secretKey,
      auth: this.opts.auth,
      handlers: this.opts.handlers,
      log,
      onCancelRequest: (pid, key) => this.cancel(pid, key, log),
      slowStatementMs: this.opts.slowStatementMs,
      startupTimeoutMs: this.opts.startupTimeoutMs,
      maxPreparedStatements: this.opts.maxPreparedStatements,
      maxPortals: this.opts.maxPortals,
      admit: () => this.admit(),
      authenticated: () => {
        this.starting.delete(processId);
        this.authenticatedCount++;
      },
      onClose: () => {
        framer.release();
        this.sessions.delete(processId);
        if (!this.starting.delete(processId)) this.authenticatedCount--;
        this.opts.observer.connectionClosed();
        log.info({}, 'connection closed');
      },
    });
    this.sessions.set(processId, { session, secretKey });
    this.starting.set(processId, { session, address: remoteAddress, since: performance.now() });
    this.opts.observer.connectionOpened();

    function onData(chunk: Buffer): void {
      let frames: ReturnType<typeof framer.push>;
      try {
        frames = framer.push(chunk);
      } catch (err) {
        log.info({ err: (err as Error).message }, 'malformed message');
        session.fail(err instanceof PgError ? err : new PgError(SqlState.ProtocolViolation, 'invalid message', {}, 'FATAL'));
        return;
      }
      for (let i = 0; i < frames.length; i++) {
        const frame = frames[i] as (typeof frames)[number];
        // Bytes that arrive after an SSLRequest in the same packet were sent in
        // plaintext before the handshake; accepting them would let a man in the
        // middle inject commands (CVE-2021-23214).
        if (frame.code === STARTUP_FRAME && frame.body.length === 4 && frame.body.readInt32BE(0) === StartupCode.SSLRequest && i < frames.length - 1) {
          session.fail(new PgError(SqlState.ProtocolViolation, 'received unencrypted data after SSL request', {}, 'FATAL'));
          return;
        }
        session.receive(frame);
      }
    }
    function onError(err: Error): void {
      log.debug({ err: err.message }, 'socket error');
      session.disconnected();
    }
    function onClose(): void {
      if (!upgrading) session.disconnected();
    }
    socket.on('data', onData);
    socket.on('error', onError);
    socket.on('close', onClose);
    log.debug({}, 'connection received');
  }

  /**
   * pg_cancel_backend and pg_terminate_backend, once the caller is allowed: the session with this process ID has its
   * statement cancelled, or is closed with 57P01 (after the calling statement's own engine call has returned, as the
   * caller may be the session itself). False when no authenticated session has the ID.
   */
  signal(processId: number, signal: 'cancel' | 'terminate'): boolean {
    const entry = this.sessions.get(processId);
    if (entry === undefined || this.starting.has(processId) || entry.session.isClosed) return false;
    this.opts.log.info({ target: processId, signal }, signal === 'cancel' ? 'pg_cancel_backend' : 'pg_terminate_backend');
    if (signal === 'cancel') entry.session.cancel();
    else setImmediate(() => entry.session.terminate());
    return true;
  }

  private cancel(processId: number, secretKey: number, log: SessionLog): void {
    const entry = this.sessions.get(processId);
    if (entry === undefined || entry.secretKey !== secretKey) {
      log.info({ target: processId }, 'cancel request with an unknown key ignored');
      return;
    }
    log.info({ target: processId }, 'cancel request');
    entry.session.cancel();
  }
}

/** Closes the oldest of `candidates` (in connection order) that has stalled in startup; false when none has. */
function evictStalled(candidates: readonly Starting[]): boolean {
  const now = performance.now();
  const stalled = candidates.find((s) => now - s.since >= STARTUP_STALL_MS);
  if (stalled === undefined) return false;
  stalled.session.evict();
  return true;
}

/** A socket ended by us closes when the client reads its last bytes and closes too; one that never does is destroyed. */
function lingerThenDestroy(socket: net.Socket | InProcessEnd): void {
  const timer = setTimeout(() => socket.destroy(), LINGER_MS);
  timer.unref();
  socket.once('close', () => clearTimeout(timer));
}

/** Waits for `p`, or `ms` at most. */
function within(p: Promise<unknown>, ms: number): Promise<void> {
  return new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, ms);
    p.then(
      () => {
        clearTimeout(timer);
        resolve();
      },
      () => {
        clearTimeout(timer);
        resolve();
      },
    );
  });
}
