import type { ExecuteOutcome, ResultSink } from '../../../session/handler-port.js';
import { runErasure } from '../../../engine/erasure-call.js';
import type { ErasureCall } from '../../../sql/erasure-call.js';
import type { HandlerContext } from './context.js';
import type { ConnectionPortal } from './plan.js';

export { erasureFields, erasureParamTypes } from '../../../engine/erasure-call.js';

/** cot_redact() and cot_retain() on this engine: the shared call (engine/erasure-call.ts) with this connection's parts. */
export async function executeErasure(
  ctx: HandlerContext,
  portal: ConnectionPortal,
  call: ErasureCall,
  statement: string,
  sink: ResultSink,
): Promise<ExecuteOutcome> {
  const tag = await runErasure(
    call,
    { values: portal.params, formats: portal.paramFormats, types: portal.statement.paramTypes },
    { user: ctx.info.user, role: ctx.info.role, inBlock: ctx.tx.status !== 'I' },
    ctx.access,
    ctx.services.erasure,
    statement,
    sink,
  );
  return { done: true, tag };
}
