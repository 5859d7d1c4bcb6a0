import { randomBytes } from 'node:crypto';
import type { EngineFunction } from '../../../engine/port.js';
import { PgError } from '../../../errors/pg-error.js';
import { SqlState } from '../../../errors/sqlstate.js';

/**
 * The server's backends as SQL sees them: what PostgreSQL's functions about
 * a session ask of it or do to it from inside a query. statement_timestamp()
 * reads the start of the session's statement, set_config() in a larger
 * query changes the session's settings, pg_cancel_backend() and
 * pg_terminate_backend() signal another session. Each is a per-connection
 * macro (engines/duckdb/catalog/compat.ts) over one engine function,
 * cot_backend(op, session, secret, a, b, c), which runs synchronously while
 * the engine evaluates the query: what it cannot say in a value (a
 * WARNING, an error with its SQLSTATE) is kept for the session's handler,
 * which sends it with the statement's answer (engine-run.ts).
 */

/** What pg_stat_activity shows of a session. */
export interface BackendActivity {
  readonly applicationName: string;
  /** active, idle, idle in transaction, idle in transaction (aborted). */
  readonly state: string;
  /** The statement it runs, or last ran. */
  readonly query: string;
  readonly clientAddr: string;
}

/** What a session lets SQL functions reach. */
export interface BackendHooks {
  readonly user: string;
  /** reader, writer or admin: an admin is a superuser. */
  readonly role: string;
  activity(): BackendActivity;
  /** set_config(name, value, is_local) in a query: the value it answers (null value: the default); throws a PgError. */
  setConfig(name: string, value: string | null, local: boolean): string;
}

export type BackendSignal = 'cancel' | 'terminate';

interface Backend {
  readonly hooks: BackendHooks;
  /** Each session's own macros pass it: a client that calls cot_backend itself cannot act as another session. */
  readonly secret: string;
  /** When its current statement started, in microseconds since the epoch. */
  statementStart: bigint;
  readonly backendStart: bigint;
  notices: PgError[];
  error: PgError | null;
}

const nowMicros = (): bigint => BigInt(Math.round((performance.timeOrigin + performance.now()) * 1000));

export class Backends {
  private readonly backends = new Map<number, Backend>();
  /** Signals a session by its process ID (the wire server's, attached once it exists); false when it has none. */
  private signal: (pid: number, signal: BackendSignal) => boolean = () => false;

  attach(signal: (pid: number, signal: BackendSignal) => boolean): void {
    this.signal = signal;
  }

  /** A new session: its secret, for its macros. */
  register(pid: number, hooks: BackendHooks): string {
    const secret = randomBytes(16).toString('hex');
    const now = nowMicros();
    this.backends.set(pid, { hooks, secret, statementStart: now, backendStart: now, notices: [], error: null });
    return secret;
  }

  end(pid: number): void {
    this.backends.delete(pid);
  }

  /** A statement of the session starts: statement_timestamp() is now, and nothing is left of the last one. */
  statementStarted(pid: number): void {
    const b = this.backends.get(pid);
    if (b === undefined) return;
    b.statementStart = nowMicros();
    b.notices = [];
    b.error = null;
  }

  /** A notice the server raises for the session's statement (a DROP's cascade), sent with its functions'. */
  notice(pid: number, notice: PgError): void {
    this.backends.get(pid)?.notices.push(notice);
  }

  /** The WARNINGs the session's functions raised since the last call. */
  takeNotices(pid: number): PgError[] {
    const b = this.backends.get(pid);
    if (b === undefined || b.notices.length === 0) return [];
    const out = b.notices;
    b.notices = [];
    return out;
  }

  /** The error a function of the session's statement failed with, which the engine reports without its SQLSTATE. */
  takeError(pid: number): PgError | null {
    const b = this.backends.get(pid);
    const err = b?.error ?? null;
    if (b !== undefined) b.error = null;
    return err;
  }

  /**
   * pg_cancel_backend and pg_terminate_backend, as PostgreSQL decides them:
   * a superuser (cotwire's admin role) may signal any session, anyone else
   * only their own user's and never a superuser's. An unknown process ID is
   * a WARNING and false.
   */
  private signalBackend(caller: Backend, target: number, signal: BackendSignal): string | null {
    const other = this.backends.get(target);
    if (other === undefined) {
      caller.notices.push(new PgError(SqlState.Warning, `PID ${target} is not a PostgreSQL backend process`, {}, 'WARNING'));
      return 'f';
    }
    const admin = caller.hooks.role === 'admin';
    if (!admin && other.hooks.role === 'admin') {
      caller.error = new PgError(
        SqlState.InsufficientPrivilege,
        signal === 'cancel' ? 'must be a superuser to cancel superuser query' : 'must be a superuser to terminate superuser process',
      );
      return null;
    }
    if (!admin && other.hooks.user !== caller.hooks.user) {
      caller.error = new PgError(
        SqlState.InsufficientPrivilege,
        signal === 'cancel'
          ? 'must be a member of the role whose query is being canceled or member of pg_signal_backend'
          : 'must be a member of the role whose process is being terminated or member of pg_signal_backend',
      );
      return null;
    }
    return this.signal(target, signal) ? 't' : 'f';
  }

  /**
   * pg_stat_activity's rows, as JSON: every session, and what it is doing to
   * a superuser and to the session's own user; to anyone else, as in
   * PostgreSQL, only who it is (its query `<insufficient privilege>`).
   */
  private activity(caller: Backend): string {
    const rows = [...this.backends].map(([pid, b]) => {
      const a = b.hooks.activity();
      const shown = caller.hooks.role === 'admin' || caller.hooks.user === b.hooks.user;
      return {
        pid,
        usename: b.hooks.user,
        application_name: a.applicationName,
        client_addr: shown ? a.clientAddr : null,
        backend_start: shown ? String(b.backendStart) : null,
        query_start: shown ? String(b.statementStart) : null,
        state: shown ? a.state : null,
        query: shown ? a.query : '<insufficient privilege>',
      };
    });
    return JSON.stringify(rows);
  }

  private setConfig(caller: Backend, name: string, value: string, local: string, valueIsNull: boolean): string | null {
    try {
      return caller.hooks.setConfig(name, valueIsNull ? null : value, local === 'true');
    } catch (err) {
      caller.error = err instanceof PgError ? err : new PgError(SqlState.InternalError, (err as Error).message);
      return null;
    }
  }

  /** The engine function the per-connection macros call. */
  engineFunction(): EngineFunction {
    return {
      name: 'cot_backend',
      parameters: ['VARCHAR', 'BIGINT', 'VARCHAR', 'VARCHAR', 'VARCHAR', 'VARCHAR'],
      volatile: true,
      call: ([op, session, secret, a, b, c]) => {
        const caller = this.backends.get(Number(session));
        // Not this session's macros: nothing happens (the macro answers an error or null).
        if (caller === undefined || caller.secret !== String(secret)) return null;
        switch (String(op)) {
          case 'statement_start':
            return String(caller.statementStart);
          case 'activity':
            return this.activity(caller);
          case 'cancel':
          case 'terminate': {
            const target = Number(a);
            return Number.isSafeInteger(target) ? this.signalBackend(caller, target, String(op) as BackendSignal) : 'f';
          }
          case 'set_config':
            // c: is_local, and whether the value is NULL (the engine passes no NULL to the function).
            return this.setConfig(caller, String(a), String(b), String(c).split(':')[0] ?? 'false', String(c).endsWith(':null'));
          default:
            return null;
        }
      },
    };
  }
}
