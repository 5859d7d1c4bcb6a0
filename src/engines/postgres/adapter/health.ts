import pg from 'pg';

/** What reports the engine's reachability: the server's logger, or anything shaped like it. */
export interface HealthLog {
  error(fields: object, message: string): void;
  info(fields: object, message: string): void;
}

/** The first wait between two probes of an unreachable engine; it doubles up to MAX_PROBE_MS. */
const FIRST_PROBE_MS = 100;
const MAX_PROBE_MS = 2000;
/** How long one probe may take to connect, or to answer. */
const PROBE_TIMEOUT_MS = 5000;

/**
 * Whether the PostgreSQL engine can be reached, shared by every connection
 * the server holds to it. The first failure (a refused connection, a
 * backend terminated, a socket cut) marks the engine down and is logged
 * once; from then on a probe connects with a bounded backoff until the
 * engine answers, which is logged once too. While the engine is down the
 * server's connections fail at once instead of each trying its own
 * connection, and /healthz answers 503.
 */
export class EngineHealth {
  private downSince: number | null = null;
  private probe: NodeJS.Timeout | null = null;
  private probeMs = FIRST_PROBE_MS;
  private reason = '';
  private waiters: Array<() => void> = [];
  private stopped = false;
  private checking = false;

  constructor(
    /** Where the probe connects: the server's own role, which can always log in. */
    private readonly url: string,
    private readonly log: HealthLog,
    /** Where the log says the engine is, with no password. */
    private readonly shownUrl: string,
  ) {}

  get reachable(): boolean {
    return this.downSince === null;
  }

  /** Why the engine is down, for the errors of the calls that fail meanwhile. */
  get why(): string {
    return this.reason;
  }

  /** A connection to the engine failed or broke: unless already known, the engine is down until a probe reaches it. */
  lost(err: Error): void {
    if (this.stopped || this.downSince !== null) return;
    this.downSince = Date.now();
    this.reason = err.message;
    this.probeMs = FIRST_PROBE_MS;
    this.log.error({ engine: this.shownUrl, err: err.message }, 'the PostgreSQL engine is unreachable; retrying with backoff until it answers');
    this.schedule();
  }

  /**
   * A backend went (terminated, or its socket closed): the engine may be
   * down, or only that backend. One probe now tells which, so that a
   * terminated backend is not reported as an engine down.
   */
  suspect(err: Error): void {
    if (this.stopped || this.downSince !== null || this.checking) return;
    this.checking = true;
    void this.reach()
      .then(
        () => undefined,
        (probeErr: unknown) => this.lost(new Error(`${err.message}; then ${(probeErr as Error).message}`)),
      )
      .finally(() => {
        this.checking = false;
      });
  }

  /** Resolves once the engine is reachable (at once if it is). */
  whenReachable(): Promise<void> {
    if (this.downSince === null || this.stopped) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  stop(): void {
    this.stopped = true;
    if (this.probe !== null) clearTimeout(this.probe);
    this.probe = null;
    for (const w of this.waiters.splice(0)) w();
  }

  private schedule(): void {
    if (this.stopped) return;
    this.probe = setTimeout(() => void this.tryOnce(), this.probeMs);
    this.probe.unref();
    this.probeMs = Math.min(this.probeMs * 2, MAX_PROBE_MS);
  }

  private async tryOnce(): Promise<void> {
    this.probe = null;
    try {
      await this.reach();
      this.recovered();
    } catch (err) {
      this.reason = (err as Error).message;
      this.schedule();
    }
  }

  /** Connects once and asks whether the server takes writes; rejects if not. */
  private async reach(): Promise<void> {
    // Bounded at every step: a probe that hung would keep the engine's state from ever changing.
    const client = new pg.Client({
      connectionString: this.url,
      application_name: 'cotwire probe',
      connectionTimeoutMillis: PROBE_TIMEOUT_MS,
      query_timeout: PROBE_TIMEOUT_MS,
    });
    client.on('error', () => undefined);
    try {
      await client.connect();
      // A server in recovery (a replica not yet promoted) accepts connections but cannot take the ledgers' writes.
      const r = await client.query('SELECT pg_catalog.pg_is_in_recovery() AS standby');
      if ((r.rows[0] as { standby: boolean }).standby) throw new Error('the server at the engine URL is a standby in recovery');
    } finally {
      await client.end().catch(() => undefined);
    }
  }

  private recovered(): void {
    if (this.downSince === null) return;
    const seconds = (Date.now() - this.downSince) / 1000;
    this.downSince = null;
    this.log.info({ engine: this.shownUrl, downSeconds: seconds }, 'the PostgreSQL engine is reachable again');
    for (const w of this.waiters.splice(0)) w();
  }
}
