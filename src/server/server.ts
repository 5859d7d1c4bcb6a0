import { randomInt } from 'node:crypto';
import net from 'node:net';
import tls from 'node:tls';
import { PgError } from '../errors/pg-error.js';
import { SqlState } from '../errors/sqlstate.js';
import { BackendWriter } from '../protocol/encode.js';
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
  readonly maxConnections: number;
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

/**
 * Accepts connections and wires each socket through a framer to a session.
 * It also owns the cancel registry (process id and secret key → session) and
 * the graceful shutdown.
 */
export class PgServer {
  private readonly server: net.Server;
  private readonly sessions = new Map<number, Entry>();
  private nextProcessId = 1;
  private listening = false;

  constructor(private readonly opts: ServerOptions) {
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

  get connectionCount(): number {
    return this.sessions.size;
  }

  get isListening(): boolean {
    return this.listening;
  }

  /** Stops accepting, lets running statements finish within `graceMs`, then closes every connection. */
  async close(graceMs: number): Promise<void> {
    this.listening = false;
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    await Promise.all([...this.sessions.values()].map((e) => e.session.shutdown(graceMs)));
    await closed;
  }

  private accept(socket: net.Socket): void {
    socket.setNoDelay(true);
    socket.setKeepAlive(true, 60_000);
    const remoteAddress = socket.remoteAddress ?? 'unknown';
    if (this.sessions.size >= this.opts.maxConnections) {
      const out = new BackendWriter().errorResponse(new PgError(SqlState.TooManyConnections, 'sorry, too many clients already', {}, 'FATAL'));
      socket.end(out.take());
      socket.on('error', () => undefined);
      this.opts.log.warn({ remote: remoteAddress, max: this.opts.maxConnections }, 'connection refused: too many clients');
      return;
    }
    const processId = this.nextProcessId++;
    const secretKey = randomInt(-2147483648, 2147483647);
    const log = this.opts.log.child({ conn: processId, remote: remoteAddress });
    const framer = new Framer(this.opts.maxMessageSize);
    let stream: net.Socket | tls.TLSSocket = socket;
    let upgrading = false;

    const transport: Transport = {
      remoteAddress,
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
        this.opts.tls === null
          ? null
          : () =>
              new Promise<void>((resolve, reject) => {
                if (framer.hasPartial) {
                  reject(new PgError(SqlState.ProtocolViolation, 'received unencrypted data after SSL request', {}, 'FATAL'));
                  return;
                }
                upgrading = true;
                socket.off('data', onData);
                const secure = new tls.TLSSocket(socket, { isServer: true, secureContext: this.opts.tls as tls.SecureContext });
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
        if (!stream.destroyed) stream.end();
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
      onClose: () => {
        this.sessions.delete(processId);
        this.opts.observer.connectionClosed();
        log.info({}, 'connection closed');
      },
    });
    this.sessions.set(processId, { session, secretKey });
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
