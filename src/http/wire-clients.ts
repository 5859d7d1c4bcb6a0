import pg from 'pg';
import type { PgServer } from '../server/server.js';

/**
 * Connections of the wire, opened inside the process for the HTTP listener's authenticated users: a request
 * reads and appends as its user would over the wire, through the same handler, guard and writer. A few are kept
 * idle per user and client address, so that a burst of requests does not open a connection each.
 */

const IDLE_PER_KEY = 4;
const IDLE_MS = 30_000;

interface Idle {
  readonly client: pg.Client;
  readonly timer: NodeJS.Timeout;
}

export interface WireLease {
  readonly client: pg.Client;
  /** Back to the idle set, or closed when the call left it in doubt (an error of the connection, a transaction open). */
  release(broken?: boolean): void;
}

export class WireClients {
  private readonly idle = new Map<string, Idle[]>();
  private readonly open = new Set<pg.Client>();
  private closed = false;

  constructor(
    private readonly server: PgServer,
    private readonly database: string,
  ) {}

  async acquire(user: string, address: string): Promise<WireLease> {
    if (this.closed) throw new Error('the server is stopping');
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
