import type { RelayBackend } from '../../../engine/port.js';
import type { HandlerFactory, SessionInfo, ConnectionHandler } from '../../../session/handler-port.js';
import { parseOptions } from '../../../session/startup-options.js';
import { type CatalogColumns, catalogColumns, ProxyAccess, type ProxyAccessServices } from './access.js';
import { ProxyConnection, type ProxyServices } from './connection.js';
import type { LedgerTable } from '../../../ledger/chain/schema.js';

/** Startup parameters that are PostgreSQL settings of the session, passed on to its backend. */
const NOT_SETTINGS = new Set(['user', 'database', 'replication', 'options', 'application_name']);

/**
 * Opens one backend per client connection, as its cotwire role's PostgreSQL role, with the
 * client's startup settings (DateStyle, TimeZone, extra_float_digits, ...)
 * applied as PostgreSQL would apply them; a reader's transactions are
 * read-only in PostgreSQL too.
 */
export class ProxyHandlerFactory implements HandlerFactory {
  constructor(
    /** A backend as the PostgreSQL role of the client's cotwire role, knowing who the client is. */
    private readonly openBackend: (info: SessionInfo, applicationName: string) => Promise<RelayBackend>,
    private readonly access: ProxyAccessServices,
    private readonly services: ProxyServices,
    /** limits.statementTimeoutMs: every backend's statement_timeout to begin with. */
    private readonly statementTimeoutMs: number,
  ) {}

  /** The ledgers as last read, for the scoped users' filters; read again, in the background, when the catalog moves on. */
  private tenantLedgers: { version: number; list: readonly LedgerTable[] } = { version: -1, list: [] };
  /** The columns of the catalog relations whose counts of ledgers' rows are hidden, read at the first scoped user's connection. */
  private catalogColumns: CatalogColumns | null = null;
  private readingLedgers: Promise<void> | null = null;

  private ledgersNow(): readonly LedgerTable[] {
    if (this.tenantLedgers.version !== this.services.ledgers.version) void this.readLedgers();
    return this.tenantLedgers.list;
  }

  private readLedgers(): Promise<void> {
    this.readingLedgers ??= (async () => {
      try {
        const version = this.services.ledgers.version;
        this.tenantLedgers = { version, list: await this.services.ledgers.all() };
      } catch {
        // Read again at the next statement; until then the filters keep the last list.
      } finally {
        this.readingLedgers = null;
      }
    })();
    return this.readingLedgers;
  }

  async open(info: SessionInfo): Promise<ConnectionHandler> {
    const applicationName = info.startupParameters.get('application_name') ?? '';
    const backend = await this.openBackend(info, applicationName);
    try {
      const settings = [...info.startupParameters].filter(([k]) => !NOT_SETTINGS.has(k.toLowerCase()));
      // `options` (libpq's PGOPTIONS: -c name=value) sets what PostgreSQL would set at its own start.
      const options = info.startupParameters.get('options');
      if (options !== undefined) settings.push(...parseOptions(options));
      if (info.role === 'reader') settings.push(['default_transaction_read_only', 'on']);
      if (this.statementTimeoutMs > 0 && !info.startupParameters.has('statement_timeout')) settings.push(['statement_timeout', `${this.statementTimeoutMs}ms`]);
      for (const [name, value] of settings) {
        await backend.openPortal('', 'SELECT pg_catalog.set_config($1, $2, false)', [25, 25], [name, value], []);
        await backend.fetch('', 0, () => undefined);
      }
      if (settings.length > 0) await backend.sync();
      backend.takeParameterChanges();
    } catch (err) {
      await backend.sync().catch(() => undefined);
      await backend.close();
      throw err;
    }
    // The refusals record the application as it names itself now (SET application_name is reported).
    const currentName = (): string => backend.reportedSettings().find(([k]) => k === 'application_name')?.[1] ?? applicationName;
    const org = info.identity.org_id;
    if (org !== undefined && this.tenantLedgers.version !== this.services.ledgers.version) await this.readLedgers();
    if (org !== undefined && this.catalogColumns === null) {
      // Without them a scoped user would read the catalog's counts unmasked: the connection fails instead.
      this.catalogColumns = await catalogColumns(backend).catch(async (err: unknown) => {
        await backend.sync().catch(() => undefined);
        await backend.close();
        throw err;
      });
    }
    const tenant = org === undefined ? null : { org, ledgers: () => this.ledgersNow(), catalogColumns: this.catalogColumns ?? new Map() };
    return new ProxyConnection(backend, new ProxyAccess(this.access, info, currentName, tenant), this.services);
  }
}
