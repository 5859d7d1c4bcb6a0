/**
 * For the sessions spans were lately ingested into, which spans their steps came from (trace and span id → the
 * step's trace_id): the check that makes a retried export append nothing, without reading every step's metadata
 * at every batch. Under the session's advisory lock the index is brought up to date by the session's step count,
 * which reads no JSON: only steps appended since (by this ingest, by another instance, by an agent's own INSERT)
 * are read, and a session holding fewer steps than the index knows (retention removed it) is read again whole.
 */

interface Entry {
  /** Steps the session held when last read: steps are appended with step_index 0, 1, ... and never moved. */
  count: number;
  readonly spans: Map<string, string>;
}

export interface IndexClient {
  query(text: string, values?: unknown[]): Promise<{ rows: Array<Record<string, unknown>> }>;
}

export class SpanIndex {
  /** By the reading user and session, least recently used first. */
  private readonly entries = new Map<string, Entry>();
  private spans = 0;

  constructor(private readonly maxSpans = 200_000) {}

  /** The session's spans as `user` reads them, up to date: call it under the session's lock. */
  async of(client: IndexClient, user: string, session: string): Promise<Map<string, string>> {
    const k = `${user}\0${session}`;
    let entry = this.entries.get(k);
    this.entries.delete(k);
    const r = await client.query('SELECT count(*) AS n FROM _cot_steps WHERE session_id = $1', [session]);
    const count = Number(r.rows[0]?.['n'] ?? 0);
    if (entry !== undefined && count < entry.count) {
      this.spans -= entry.spans.size;
      entry = undefined;
    }
    entry ??= { count: 0, spans: new Map() };
    if (count > entry.count) {
      const rows = await client.query(
        `SELECT CAST(trace_id AS text) AS step, metadata->'otel'->>'trace_id' AS trace, metadata->'otel'->>'span_id' AS span
         FROM _cot_steps WHERE session_id = $1 AND step_index >= $2`,
        [session, entry.count],
      );
      for (const row of rows.rows) {
        if (typeof row['trace'] !== 'string' || typeof row['span'] !== 'string') continue;
        if (!entry.spans.has(spanKey(row['trace'], row['span']))) this.spans++;
        entry.spans.set(spanKey(row['trace'], row['span']), String(row['step']));
      }
      entry.count = count;
    }
    this.entries.set(k, entry);
    this.evict(k);
    return entry.spans;
  }

  /**
   * Steps the ingest has just appended to the session, under its lock: the index follows without reading them.
   * Its count moves past them only when they came right after what it had read; when another writer's step came
   * between (an agent's own INSERT takes no lock), the next read starts where it stood and finds that one too.
   */
  appended(user: string, session: string, steps: ReadonlyArray<readonly [span: string, step: string, stepIndex: number]>): void {
    const entry = this.entries.get(`${user}\0${session}`);
    if (entry === undefined) return;
    for (const [span, step] of steps) {
      if (!entry.spans.has(span)) this.spans++;
      entry.spans.set(span, step);
    }
    const indices = steps.map(([, , i]) => i).sort((a, b) => a - b);
    if (indices.every((i, at) => i === entry.count + at)) entry.count += indices.length;
  }

  private evict(keep: string): void {
    for (const [k, e] of this.entries) {
      if (this.spans <= this.maxSpans || k === keep) break;
      this.entries.delete(k);
      this.spans -= e.spans.size;
    }
  }
}

export function spanKey(traceId: string, spanId: string): string {
  return `${traceId}/${spanId}`;
}
