import type { FieldDescription } from '../../../protocol/messages.js';
import { PgError } from '../../../errors/pg-error.js';
import { SqlState } from '../../../errors/sqlstate.js';
import type { ResultSink } from '../../../session/handler-port.js';
import { lexStatement, type StatementText } from '../../../sql/lexer.js';
import type { SessionCommand } from './commands.js';
import type { HandlerContext, StatementHost } from './context.js';
import type { EngineRun } from './engine-run.js';
import { READ_KINDS, type ConnectionPortal, type Statement } from './plan.js';
import type { Planner } from './planner.js';

interface Cursor {
  readonly statement: Statement;
  readonly portal: ConnectionPortal;
}

/**
 * DECLARE / FETCH / MOVE / CLOSE. A cursor is a portal over a prepared
 * query, named in SQL instead of in the protocol: psycopg's named cursors
 * and server-side cursors use them. They scan forward only, and live until
 * the end of their transaction.
 */
export class Cursors {
  private readonly open = new Map<string, Cursor>();

  constructor(
    private readonly ctx: HandlerContext,
    private readonly planner: Planner,
    private readonly host: StatementHost,
    private readonly run: EngineRun,
  ) {}

  portal(name: string): ConnectionPortal | null {
    return this.open.get(name)?.portal ?? null;
  }

  /** The columns a FETCH from the cursor returns. */
  fields(name: string): readonly FieldDescription[] | null {
    return this.cursor(name).portal.fields;
  }

  async declare(cmd: Extract<SessionCommand, { kind: 'declare' }>): Promise<string> {
    this.ctx.tx.checkNotFailed();
    if (cmd.hold) {
      throw new PgError(SqlState.FeatureNotSupported, 'cursors WITH HOLD are not supported', {
        hint: 'Declare the cursor WITHOUT HOLD, inside a transaction block.',
      });
    }
    if (cmd.scroll) {
      throw new PgError(SqlState.FeatureNotSupported, 'scrollable cursors are not supported', {
        hint: 'Declare the cursor NO SCROLL; it can be read forward.',
      });
    }
    if (this.ctx.tx.autocommit) {
      throw new PgError(SqlState.NoActiveSqlTransaction, 'DECLARE CURSOR can only be used in transaction blocks');
    }
    if (this.open.has(cmd.name)) throw new PgError(SqlState.DuplicateCursor, `cursor "${cmd.name}" already exists`);
    const statement = await this.planner.prepare({ ...lexStatement(cmd.query), offset: cmd.queryOffset } as StatementText, []);
    if (statement.plan.kind !== 'engine' || statement.fields === null || !READ_KINDS.has(statement.plan.statement.kind)) {
      this.host.closeStatement(statement);
      throw new PgError(SqlState.InvalidCursorDefinition, 'DECLARE CURSOR must be a query that returns rows', {
        hint: 'Use SELECT, VALUES, TABLE or WITH ... SELECT after FOR.',
      });
    }
    const portal = await this.host.bindPortal(statement, cmd.binary ? [1] : []);
    this.open.set(cmd.name, { statement, portal });
    return 'DECLARE CURSOR';
  }

  /**
   * FETCH's rows go out in the formats of the portal that runs the FETCH,
   * which its RowDescription announced (a BINARY cursor's, when the client
   * gave none): psycopg 3 asks for binary rows this way.
   */
  async fetch(cmd: Extract<SessionCommand, { kind: 'fetch' }>, sink: ResultSink, formats: readonly (0 | 1)[] = []): Promise<string> {
    this.ctx.tx.checkNotFailed();
    const cursor = this.cursor(cmd.name);
    const verb = cmd.move ? 'MOVE' : 'FETCH';
    if (cmd.backward) {
      throw new PgError(SqlState.ObjectNotInPrerequisiteState, 'cursor can only scan forward', {
        hint: 'cotwire cursors read forward only: FETCH NEXT, FETCH n, FETCH FORWARD n or FETCH ALL.',
      });
    }
    if (cmd.count === 0 || cursor.statement.plan.kind !== 'engine') return `${verb} 0`;
    let rows = 0;
    const counting: ResultSink = {
      row: (cells) => {
        rows++;
        if (!cmd.move) sink.row(cells);
      },
      notice: (n) => sink.notice(n),
      flushIfFull: () => sink.flushIfFull(),
      copyOutStart: (c) => sink.copyOutStart(c),
      copyData: (d) => sink.copyData(d),
      copyDone: () => sink.copyDone(),
    };
    await this.run.execute(cursor.portal, cursor.statement.plan, cmd.count ?? 0, counting, formats.length === 0 ? cursor.portal.formats : formats);
    return `${verb} ${rows}`;
  }

  /** CLOSE name, or CLOSE ALL (null). */
  close(name: string | null): void {
    if (name === null) this.closeAll();
    else this.closeOne(this.cursor(name), name);
  }

  /** At the end of a transaction every cursor closes (none is WITH HOLD), and at CLOSE ALL and DISCARD ALL. */
  closeAll(): void {
    for (const [name, cursor] of [...this.open]) this.closeOne(cursor, name);
  }

  private cursor(name: string): Cursor {
    const cursor = this.open.get(name);
    if (cursor === undefined) throw new PgError(SqlState.InvalidCursorName, `cursor "${name}" does not exist`);
    return cursor;
  }

  private closeOne(cursor: Cursor, name: string): void {
    this.open.delete(name);
    this.host.closePortal(cursor.portal);
    this.host.closeStatement(cursor.statement);
  }
}
