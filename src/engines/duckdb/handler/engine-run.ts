import { PgError } from '../../../errors/pg-error.js';
import type { EngineCursor, RowSink } from '../../../engine/port.js';
import type { ExecuteOutcome, ResultSink } from '../../../session/handler-port.js';
import { commandTag } from './command-tag.js';
import type { HandlerContext } from './context.js';
import { dropOrphanedSequences, executeColumnAlter, executeConstraintAdd, executeDropEach, executeSerialCreate, HandledStatement } from './table-create.js';
import { keepingKeys } from './foreign-keys.js';
import { executeLedgerCreate } from './ledger-create.js';
import { bindEngine, clientError, READ_KINDS, type ConnectionPortal, type EnginePlan, wireParams } from './plan.js';
import { declaredCells } from './result-sources.js';

/** The bound values of cot_search()'s query-text parameters (text and binary text are both UTF-8). */
function searchTexts(portal: ConnectionPortal, params: readonly number[]): string[] {
  return params.flatMap((n) => {
    const v = portal.params[n - 1];
    return v === null || v === undefined ? [] : [v.toString('utf8')];
  });
}

/**
 * Runs a prepared engine statement through a portal, as one engine call
 * (engine-calls.ts: statement_timeout, CancelRequest), with its rows
 * streamed to the client as the protocol asks for them.
 */
export class EngineRun {
  constructor(private readonly ctx: HandlerContext) {}

  /** `formats`: what the rows are sent in, the portal's own unless a FETCH's portal says otherwise. */
  async execute(
    portal: ConnectionPortal,
    plan: EnginePlan,
    maxRows: number,
    sink: ResultSink,
    formats: readonly (0 | 1)[] = portal.formats,
  ): Promise<ExecuteOutcome> {
    const { ctx } = this;
    if (portal.done) return { done: true, tag: commandTag(plan.statement.kind, plan.tokens, 0) };
    ctx.tx.checkNotFailed();
    const session = ctx.info.processId;
    let gaveUp = false;
    try {
      const outcome = await ctx.calls.run(async (): Promise<ExecuteOutcome> => {
        if (plan.advisoryWaits.length > 0 && portal.cursor === null) await this.waitForLocks(plan, () => gaveUp);
        if (portal.cursor === null) {
          const params = { types: plan.statement.paramTypes, values: wireParams(portal) };
          const handled = await keepingKeys(ctx, plan.keys, (materialize) => this.start(portal, plan, materialize), params);
          if (handled !== null) return handled;
        }
        const cursor = portal.cursor as EngineCursor;
        if (!cursor.returnsRows) {
          portal.done = true;
          return { done: true, tag: commandTag(plan.statement.kind, plan.tokens, cursor.rowsChanged) };
        }
        const { rows, done } = await cursor.fetch(maxRows, formats, declaredSink(portal, formats, sink), { timeZone: ctx.settings.timeZone });
        if (!done) return { done: false };
        portal.done = true;
        return { done: true, tag: commandTag(plan.statement.kind, plan.tokens, rows) };
      });
      if (outcome.done === true && plan.declares.length > 0) {
        await ctx.tx.onCommit(async () => {
          await ctx.services.declared.apply(ctx.engine, plan.declares);
          ctx.services.catalogSnapshot.changed();
        });
      }
      if (outcome.done === true && DDL_KINDS.has(plan.statement.kind)) {
        ctx.catalog.ddlRan(plan.tokens);
      }
      return outcome;
    } catch (err) {
      gaveUp = true;
      portal.done = true;
      portal.cursor?.close();
      // A function that reached the session (backends.ts) says why it failed, with its SQLSTATE; the engine cannot.
      throw clientError(ctx.services.backends.takeError(session) ?? err, plan.offset, plan.clientPosition);
    } finally {
      for (const notice of ctx.services.backends.takeNotices(session)) sink.notice(notice);
      if (plan.advisoryWaits.length > 0) ctx.services.advisoryLocks.unreserve(session);
      // A statement outside a transaction block is its own transaction: its transaction-level locks end with it.
      if (ctx.tx.status === 'I' && !ctx.tx.implicitOpen && portal.done) ctx.services.advisoryLocks.releaseTransaction(session);
    }
  }

  /**
   * The portal's first execution: a statement the handler carries out
   * itself (its outcome), or the engine's, whose cursor the portal then
   * holds (null). `materialize`: the whole result is read before this
   * returns, so that the keys can be checked after it (foreign-keys.ts).
   */
  private async start(portal: ConnectionPortal, plan: EnginePlan, materialize: boolean): Promise<ExecuteOutcome | null> {
    const { ctx } = this;
    if (plan.createsLedger !== null) return executeLedgerCreate(ctx, portal, plan, plan.createsLedger);
    if (plan.createsSequences !== null) return executeSerialCreate(ctx, portal, plan, plan.createsSequences);
    if (plan.addsConstraint !== null) return executeConstraintAdd(ctx, portal, plan, plan.addsConstraint);
    if (plan.altersIndexedColumns !== null) return executeColumnAlter(ctx, portal, plan, plan.altersIndexedColumns);
    if (plan.dropsEach !== null) return executeDropEach(ctx, portal, plan, plan.dropsEach);
    if (plan.statement instanceof HandledStatement) {
      // Its work was the keys' alone (ALTER TABLE ... ADD FOREIGN KEY, DROP CONSTRAINT).
      portal.done = true;
      return { done: true, tag: commandTag(plan.statement.kind, plan.tokens, 0) };
    }
    if (plan.searchParams.length > 0) await ctx.services.search.vectors.prepare(searchTexts(portal, plan.searchParams));
    if (portal.statement.boundBy !== portal) bindEngine(portal, plan.statement);
    if (!READ_KINDS.has(plan.statement.kind)) ctx.tx.wrote();
    portal.cursor = await plan.statement.execute(materialize ? { materialize: true } : undefined);
    if (plan.statement.kind === 'DROP') await dropOrphanedSequences(ctx);
    return null;
  }

  /**
   * pg_advisory_lock(k) on a constant key waits, as in PostgreSQL, until no
   * other session holds k (the engine function cannot wait), up to
   * lock_timeout; statement_timeout and CancelRequest end it too.
   */
  private async waitForLocks(plan: EnginePlan, gaveUp: () => boolean): Promise<void> {
    const { ctx } = this;
    const timeout = ctx.settings.lockTimeoutMs;
    const deadline = timeout > 0 ? Date.now() + timeout : Number.POSITIVE_INFINITY;
    for (const wait of plan.advisoryWaits) {
      const got = await ctx.services.advisoryLocks.waitFor(ctx.info.processId, wait.key, wait.shared ? 'shared' : 'exclusive', deadline, gaveUp);
      if (!got && !gaveUp()) throw new PgError('55P03', 'canceling statement due to lock timeout');
    }
  }

  /** CancelRequest: interrupts the running statement, if any. */
  cancel(): void {
    this.ctx.calls.cancel();
  }

  /** Interrupts the running statement and waits until it has let go of the engine connection. */
  async stop(): Promise<void> {
    await this.ctx.calls.stop();
  }
}

/** Statements after which what was read of the catalog may be stale. */
const DDL_KINDS: ReadonlySet<string> = new Set(['CREATE', 'CREATE_FUNC', 'ALTER', 'DROP', 'ATTACH', 'DETACH', 'MULTI']);

/** The sink for a portal's rows: the same, with declared types' cells printed as PostgreSQL prints them (jsonb, char(n)). */
function declaredSink(portal: ConnectionPortal, formats: readonly (0 | 1)[], sink: RowSink): RowSink {
  const fix = declaredCells(portal.fields, formats);
  if (fix === null) return sink;
  return { row: (cells) => sink.row(fix(cells)), flushIfFull: () => sink.flushIfFull() };
}
