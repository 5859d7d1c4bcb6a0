/**
 * What the server reports about itself. Modules call this interface; the
 * Prometheus implementation lives in server/metrics.ts, and a no-op one
 * serves where nothing listens.
 */
export interface Observer {
  connectionOpened(): void;
  connectionClosed(): void;
  /** A statement finished: its kind (SELECT, INSERT, ...) and whether it succeeded. */
  statement(kind: string, ok: boolean): void;
  /** The guard or a role refused a statement. */
  refusal(operation: string, reason: string): void;
  /** The writer committed a group: how many units and rows, and how long the oldest unit waited. */
  appendsCommitted(units: number, rows: number, seconds: number): void;
  /** An audit recomputed `chains` chains and found these problems (engines/duckdb/log/reconcile.ts names the kinds). */
  audited(chains: number, findings: ReadonlyArray<{ readonly kind: string }>): void;
  /** Steps selected for an embedding that have no vector yet. */
  embeddingQueue(depth: number): void;
  /** Vectors written. */
  stepsEmbedded(count: number): void;
  /** The embedding provider failed: `retry` (a request, tried again), `unavailable` (a batch, after every retry), `rejected` (one step's text, skipped). */
  embeddingFailed(kind: 'retry' | 'unavailable' | 'rejected'): void;
  /** One request to the embedding provider, for the steps or for a search. */
  embeddingRequest(seconds: number, ok: boolean): void;
}

export const NO_OBSERVER: Observer = {
  connectionOpened: () => undefined,
  connectionClosed: () => undefined,
  statement: () => undefined,
  refusal: () => undefined,
  appendsCommitted: () => undefined,
  audited: () => undefined,
  embeddingQueue: () => undefined,
  stepsEmbedded: () => undefined,
  embeddingFailed: () => undefined,
  embeddingRequest: () => undefined,
};
