import { createHash } from 'node:crypto';

/**
 * Which steps of `_cot_steps` are embedded for semantic search, decided by
 * the writer when it chains the step and recorded in `has_embedding`, so the
 * choice is part of the hashed row.
 *
 * A step is selected when its type is one of `alwaysTypes`, or else when
 * its sample point is below `rate`. The sample point comes from the row
 * alone: the first six bytes of SHA-256("cotwire/embedding-sample/v1:" ||
 * trace_id in lower case), read as a big-endian integer and divided by
 * 2^48. An auditor who knows the rate recomputes every row's choice, and
 * raising the rate only adds steps.
 */

export interface EmbeddingSampleRule {
  /** 0 selects no step by sampling, 1 every step. */
  readonly rate: number;
  readonly alwaysTypes: ReadonlySet<string>;
}

const DOMAIN = 'cotwire/embedding-sample/v1:';

/** The step's sample point in [0, 1). */
export function samplePoint(traceId: string): number {
  return (
    createHash('sha256')
      .update(DOMAIN + traceId.toLowerCase())
      .digest()
      .readUIntBE(0, 6) /
    2 ** 48
  );
}

export function selectedForEmbedding(rule: EmbeddingSampleRule, stepType: string | null, traceId: string): boolean {
  if (stepType !== null && rule.alwaysTypes.has(stepType)) return true;
  return rule.rate > 0 && samplePoint(traceId) < rule.rate;
}
