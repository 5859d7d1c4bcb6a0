import type { ExecuteOutcome, ResultSink } from '../session/handler-port.js';
import { commandTag } from './command-tag.js';
import type { HandlerContext } from './context.js';
import { executeLedgerCreate } from './ledger-create.js';
import { bindEngine, clientError, READ_KINDS, type ConnectionPortal, type EnginePlan } from './plan.js';

/**
 * Runs a prepared engine statement through a portal: one at a time, under
 * the session's statement_timeout, interruptible by CancelRequest, with
 * its rows streamed to the client as the protocol asks for them.
 */
export class EngineRun {
  private running = false;
  /** Settles when the running statement ends, so close() never frees the engine connection under it. */
  private runningDone: Promise<void> = Promise.resolve();
  private markDone: () => void = () => undefined;
  private cancelReason: 'user' | 'timeout' | null = null;

  constructor(private readonly ctx: HandlerContext) {}

  async execute(portal: ConnectionPortal, plan: EnginePlan, maxRows: number, sink: ResultSink): Promise<ExecuteOutcome> {
    const { ctx } = this;
    if (portal.done) return { done: true, tag: commandTag(plan.statement.kind, plan.tokens, 0) };
    ctx.tx.checkNotFailed();
    const timeoutMs = ctx.settings.statementTimeoutMs;
    const timer =
      timeoutMs > 0
        ? setTimeout(() => {
            this.cancelReason = 'timeout';
            ctx.engine.interrupt();
          }, timeoutMs)
        : null;
    this.running = true;
    this.runningDone = new Promise((resolve) => {
      this.markDone = resolve;
    });
    this.cancelReason = null;
    try {
      if (plan.createsLedger !== null && portal.cursor === null) {
        return await executeLedgerCreate(ctx, portal, plan, plan.createsLedger);
      }
      if (portal.cursor === null) {
        if (portal.statement.boundBy !== portal) bindEngine(portal, plan.statement);
        if (!READ_KINDS.has(plan.statement.kind)) ctx.tx.wrote();
        portal.cursor = await plan.statement.execute();
      }
      const cursor = portal.cursor;
      if (!cursor.returnsRows) {
        portal.done = true;
        return { done: true, tag: commandTag(plan.statement.kind, plan.tokens, cursor.rowsChanged) };
      }
      const { rows, done } = await cursor.fetch(maxRows, portal.formats, sink, { timeZone: ctx.settings.timeZone });
      if (!done) return { done: false };
      portal.done = true;
      return { done: true, tag: commandTag(plan.statement.kind, plan.tokens, rows) };
    } catch (err) {
      portal.done = true;
      portal.cursor?.close();
      throw clientError(err, plan.offset, plan.clientPosition, this.cancelReason);
    } finally {
      if (timer !== null) clearTimeout(timer);
      this.running = false;
      this.markDone();
    }
  }

  /** CancelRequest: interrupts the running statement, if any. */
  cancel(): void {
    if (!this.running) return;
    this.cancelReason = 'user';
    this.ctx.engine.interrupt();
  }

  /** Interrupts the running statement and waits until it has let go of the engine connection. */
  async stop(): Promise<void> {
    if (!this.running) return;
    this.ctx.engine.interrupt();
    await this.runningDone;
  }
}
