import type { EngineConnection } from '../engine/port.js';
import type { Observer } from '../observe/observer.js';
import type { LedgerCatalog } from './catalog.js';
import { verifyLedgers, type ChainVerdict } from './verify.js';

/**
 * Verifies every chain in the background, at start-up and then every
 * interval, so that an edit to the database file made behind the server's
 * back shows up in the metrics and the log without anyone asking.
 */
export class ChainAuditor {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private stopped = false;

  constructor(
    private readonly conn: EngineConnection,
    private readonly catalog: LedgerCatalog,
    private readonly observer: Observer,
    private readonly onBroken: (verdict: ChainVerdict) => void,
    private readonly onError: (err: unknown) => void,
  ) {}

  /** Starts auditing; `intervalMs` 0 audits once, at start-up only. */
  start(intervalMs: number): void {
    const run = (): void => {
      if (this.stopped || this.running !== null) return;
      this.running = this.audit()
        .then(() => undefined, this.onError)
        .finally(() => {
          this.running = null;
        });
    };
    run();
    if (intervalMs > 0) {
      this.timer = setInterval(run, intervalMs);
      this.timer.unref();
    }
  }

  async audit(): Promise<ChainVerdict[]> {
    const verdicts = await verifyLedgers(this.conn, this.catalog, null);
    const broken = verdicts.filter((v) => !v.valid);
    for (const v of broken) this.onBroken(v);
    this.observer.chainsVerified(verdicts.length, broken.length);
    return verdicts;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer !== null) clearInterval(this.timer);
    await this.running;
  }
}
