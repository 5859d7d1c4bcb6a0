import pg from 'pg';
import type { PgServer } from '../server/server.js';

/**
 * Connections of the wire, opened inside the process for the HTTP listener's authenticated users: a request
 * reads and appends as its user would over the wire, through the same handler, guard and writer. A few are kept
 * idle per user and client address, so that a burst of requests does not open a connection each.
 */

const IDLE_PER_KEY = 4;
const IDLE_MS = 30_000;
/**
 * Connections the listener holds at once, all users together: each takes one of the wire's authenticated slots
 * (limits.maxConnections), so a flood of requests waits here rather than crowd out the wire's clients.
 */
const MAX_OPEN = 16;
/** How long a request waits for one of them before it is answered 503. */
const WAIT_MS = 10_000;

interface Idle {
  readonly client: pg.Client;
  readonly timer: NodeJS.Timeout;
}

/** No connection for the request now: the server is stopping, or every one stayed busy. Answered 503. */
export class WireBusy extends Error {}

export interface WireLease {
  readonly client: pg.Client;
  /** Back to the idle set, or closed when the call left it in doubt (an error of the connection, a transaction open). */
  release(broken?: boolean): void;
}

export class WireClients {
  private readonly idle = new Map<string, Idle[]>();
  private readonly open = new Set<pg.Client>();
  /** Requests waiting for a connection, first come first served. */
  private readonly waiting: Array<() => void> = [];
  private leased = 0;
  private closed = false;

  constructor(
    private readonly server: PgServer,
    private readonly database: string,
  ) {}

  async acquire(user: string, address: string): Promise<WireLease> {
    if (this.closed) throw new WireBusy('the server is stopping');
    if (this.leased >= MAX_OPEN) await this.turn();
    this.leased++;
    try {
      return await this.connection(user, address);
    } catch (err) {
      this.leased--;
      this.next();
      throw err;
    }
  }

  /** Waits until a lease is given back, or WAIT_MS. */
  private turn(): Promise<void> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        const at = this.waiting.indexOf(go);
        if (at >= 0) this.waiting.splice(at, 1);
        reject(new WireBusy(`all ${MAX_OPEN} of the HTTP listener's connections stayed busy for ${WAIT_MS / 1000} s`));
      }, WAIT_MS);
      const go = (): void => {
        clearTimeout(timer);
        resolve();
      };
      this.waiting.push(go);
    });
  }

  private next(): void {
    if (this.leased < MAX_OPEN) this.waiting.shift()?.();
  }

  private async connection(user: string, address: string): Promise<WireLease> {
    const k = `${user}\0${address}`;
    const kept = this.idle.get(k)?.pop();
    if (kept !== undefined) {
      clearTimeout(kept.timer);
      return this.lease(k, kept.client);
    }
    const client = new pg.Client({
      user,
      database: this.database,
      application_name: 'cotwire-http',
      stream: () => this.server.connectInProcess(user, address),
    });
    client.on('error', () => undefined);
    this.open.add(client);
    client.once('end', () => this.open.delete(client));
    try {
      await client.connect();
    } catch (err) {
      this.open.delete(client);
      throw err;
    }
    return this.lease(k, client);
  }

  private lease(k: string, client: pg.Client): WireLease {
    let released = false;
    return {
      client,
      release: (broken = false) => {
        if (released) return;
        released = true;
        this.leased--;
        this.next();
        const list = this.idle.get(k) ?? [];
        if (broken || this.closed || list.length >= IDLE_PER_KEY) {
          void client.end().catch(() => undefined);
          return;
        }
        const timer = setTimeout(() => {
          const at = list.findIndex((i) => i.client === client);
          if (at >= 0) list.splice(at, 1);
          void client.end().catch(() => undefined);
        }, IDLE_MS);
        timer.unref();
        list.push({ client, timer });
        this.idle.set(k, list);
      },
    };
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const list of this.idle.values()) for (const i of list) clearTimeout(i.timer);
    this.idle.clear();
    await Promise.all([...this.open].map((c) => c.end().catch(() => undefined)));
  }
}
