import { EmbeddingError, type Embedder } from '../../../embedding/provider.js';
import * as bin from '../../../engine/pg-binary.js';
import type { LedgerTable } from '../../../ledger/chain/schema.js';
import { embeddingText } from '../../../ledger/embeddings.js';
import { pgArray } from '../ledger/writer.js';
import { VECTORS } from './search-sql.js';

/** The worker's connection: its vectors go as a binary parameter. */
interface VectorConnection {
  query(sql: string, params?: readonly (string | Uint8Array | null)[]): Promise<unknown[][]>;
}

/** Selected steps embedded per round. */
const BATCH = 64;
/** How long an idle worker waits before it looks for new steps. */
const POLL_MS = 250;
/** The first wait after a failure; it doubles up to a minute. */
const FIRST_RETRY_MS = 1000;
/** How long the embedding lease lasts; its holder renews it when half is spent. */
export const EMBEDDER_LEASE_MS = 30_000;
/** How often an instance without the lease asks for it again. */
const LEASE_RETRY_MS = 2000;

/** The lease that makes one instance at a time the embedder (cotwire.embedder). */
export interface EmbedderLease {
  take(): Promise<boolean>;
  release(): Promise<void>;
}

/**
 * Embeds the steps selected for an embedding (has_embedding) in the
 * background, on a PostgreSQL engine shared by several instances. It walks
 * the steps by ledger_seq, which is given out in commit order, so a cursor
 * never passes a step that commits later; the first round starts from the
 * oldest step without a vector. One instance at a time embeds, the
 * holder of a lease: each would otherwise embed every step (twice the CPU
 * on the built-in embedder, twice the bill on a paid provider). Vectors are
 * written with ON CONFLICT DO NOTHING, so that the steps an instance and a
 * successor that took over an expired lease both embed are stored once.
 */
export class PgEmbeddingWorker {
  private cursor = 0;
  private stopped = false;
  private running: Promise<void> | null = null;
  private wake: (() => void) | null = null;
  private failing = false;
  /** Until when (performance.now()) this instance holds the lease without asking again; 0 when it does not hold it. */
  private leaseUntil = 0;

  constructor(
    private readonly conn: VectorConnection,
    private readonly steps: () => Promise<LedgerTable | null>,
    private readonly embedder: Embedder,
    private readonly lease: EmbedderLease,
    private readonly events: {
      readonly onUnavailable: (err: EmbeddingError, retryInMs: number) => void;
      readonly onError: (err: unknown) => void;
      readonly onRecovered: () => void;
    },
  ) {}

  start(): void {
    this.running = this.loop();
  }

  /** New steps were committed: look at once. */
  poke(): void {
    this.wake?.();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.wake?.();
    await this.running;
    if (this.leaseUntil > 0) await this.lease.release().catch(() => undefined);
  }

  private async loop(): Promise<void> {
    let retryMs = FIRST_RETRY_MS;
    let first = true;
    while (!this.stopped) {
      let found = 0;
      try {
        if (!(await this.leads())) {
          // Another instance embeds; its successor starts from the oldest step it left without a vector.
          first = true;
          await this.pause(LEASE_RETRY_MS);
          continue;
        }
        const steps = await this.steps();
        if (steps !== null) {
          if (first) this.cursor = await this.oldestWithout(steps);
          first = false;
          found = await this.round(steps);
        }
        if (this.failing) this.events.onRecovered();
        this.failing = false;
        retryMs = FIRST_RETRY_MS;
      } catch (err) {
        if (err instanceof EmbeddingError) this.events.onUnavailable(err, retryMs);
        else this.events.onError(err);
        this.failing = true;
        await this.pause(retryMs);
        retryMs = Math.min(retryMs * 2, 60_000);
        continue;
      }
      if (found < BATCH) await this.pause(POLL_MS);
    }
  }

  /** Whether this instance embeds now: the lease, renewed once half of it is spent. */
  private async leads(): Promise<boolean> {
    const now = performance.now();
    if (now < this.leaseUntil) return true;
    this.leaseUntil = 0;
    if (!(await this.lease.take())) return false;
    this.leaseUntil = now + EMBEDDER_LEASE_MS / 2;
    return true;
  }

  /** The ledger_seq just before the oldest selected step with no vector (where the first round starts). */
  private async oldestWithout(steps: LedgerTable): Promise<number> {
    const [[seq]] = (await this.conn.query(
      `SELECT coalesce(min(s.ledger_seq), (SELECT coalesce(max(ledger_seq), 0) + 1 FROM ${steps.relation}))
       FROM ${steps.relation} s WHERE s.has_embedding AND NOT EXISTS (SELECT 1 FROM ${VECTORS} e WHERE e.trace_id = s.trace_id)`,
    )) as [[bigint]];
    return Number(seq) - 1;
  }

  /** Embeds the next selected steps after the cursor; answers how many it looked at. */
  private async round(steps: LedgerTable): Promise<number> {
    const rows = (await this.conn.query(
      `SELECT s.ledger_seq, s.trace_id::text, s.session_id, s.agent_id, s.step_type, s.created_at::text, s.content, s.input_data::text, s.output_data::text
       FROM ${steps.relation} s WHERE s.ledger_seq > $1::int8 AND s.has_embedding ORDER BY s.ledger_seq LIMIT ${BATCH}`,
      [String(this.cursor)],
    )) as Array<[bigint, string, string, string | null, string, string, string | null, string | null, string | null]>;
    if (rows.length === 0) return 0;
    const vectors = await this.embedder.embed(rows.map((r) => embeddingText(r[6], r[7], r[8])));
    await this.conn.query(
      `INSERT INTO ${VECTORS} (trace_id, session_id, agent_id, step_type, step_created_at, model, dimensions, vector, created_at)
       SELECT t::uuid, s, a, ty, c::timestamptz, $6, $7::int4, ($8::real[])[(n - 1) * $7::int4 + 1 : n * $7::int4], pg_catalog.now()
       FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[]) WITH ORDINALITY AS x(t, s, a, ty, c, n)
       ON CONFLICT (trace_id) DO NOTHING`,
      [
        pgArray(rows.map((r) => r[1])),
        pgArray(rows.map((r) => r[2])),
        pgArray(rows.map((r) => r[3])),
        pgArray(rows.map((r) => r[4])),
        pgArray(rows.map((r) => r[5])),
        this.embedder.model,
        String(this.embedder.dimensions),
        // Every vector, one after another, in binary: PostgreSQL's own float4s, exact, where a text of each (what
        // toPrecision(9) made) cost this process 4 ms of every 64 rows.
        bin.float4Array(vectors),
      ],
    );
    this.cursor = Number(rows[rows.length - 1]?.[0] ?? this.cursor);
    return rows.length;
  }

  private pause(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      timer.unref();
      this.wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }
}
