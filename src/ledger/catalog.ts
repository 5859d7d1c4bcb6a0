import type { EngineConnection } from '../engine/port.js';
import { CHAIN_COLUMNS, STEPS_SERVER_COLUMNS, STEPS_TABLE, type LedgerColumn, type LedgerTable } from './schema.js';

/**
 * The ledger tables in the database and their columns, read from the
 * catalog on a server-internal connection and cached until a ledger is
 * created.
 */
export class LedgerCatalog {
  private tables: Promise<LedgerTable[]> | null = null;
  /** Increases whenever the set of ledgers may have changed. */
  version = 0;

  constructor(
    private readonly conn: EngineConnection,
    private readonly isProtected: (name: string) => boolean,
  ) {}

  invalidate(): void {
    this.tables = null;
    this.version++;
  }

  all(): Promise<LedgerTable[]> {
    this.tables ??= this.load().catch((err: unknown) => {
      this.tables = null;
      throw err;
    });
    return this.tables;
  }

  /** The ledger a (possibly qualified) name refers to; an unqualified name matches by name, as ledger names are unique. */
  async find(parts: readonly string[]): Promise<LedgerTable | null> {
    const name = (parts[parts.length - 1] ?? '').toLowerCase();
    const schema = parts.length >= 2 ? (parts[parts.length - 2] as string).toLowerCase() : null;
    const catalog = parts.length >= 3 ? (parts[parts.length - 3] as string).toLowerCase() : null;
    const matches = (await this.all()).filter(
      (t) =>
        t.name.toLowerCase() === name && (schema === null || t.schema.toLowerCase() === schema) && (catalog === null || t.catalog.toLowerCase() === catalog),
    );
    return matches[0] ?? null;
  }

  private async load(): Promise<LedgerTable[]> {
    const [[mainCatalog]] = (await this.conn.query('SELECT current_database()')) as [[string]];
    const rows = await this.conn.query(
      `SELECT database_name, schema_name, table_name, column_name, data_type, column_default, NOT is_nullable
       FROM system.main.duckdb_columns() WHERE NOT internal ORDER BY database_name, schema_name, table_name, column_index`,
    );
    // Tables with constraints the writer does not check itself (CHECK, UNIQUE, keys).
    const constrained = new Set(
      (
        await this.conn.query(
          `SELECT DISTINCT database_name, schema_name, table_name FROM system.main.duckdb_constraints() WHERE constraint_type <> 'NOT NULL'`,
        )
      ).map((r) => `${String(r[0])}\u0000${String(r[1])}\u0000${String(r[2])}`),
    );
    const byTable = new Map<string, { catalog: string; schema: string; name: string; columns: LedgerColumn[] }>();
    for (const [catalog, schema, name, column, type, def, notNull] of rows as Array<[string, string, string, string, string, string | null, boolean]>) {
      if (!this.isProtected(name)) continue;
      const key = `${catalog}\u0000${schema}\u0000${name}`;
      let t = byTable.get(key);
      if (t === undefined) {
        t = { catalog, schema, name, columns: [] };
        byTable.set(key, t);
      }
      t.columns.push({ name: column, type, defaultSql: def, notNull });
    }
    const ledgers: LedgerTable[] = [];
    for (const t of byTable.values()) {
      const names = new Set(t.columns.map((c) => c.name));
      // Only tables with the chain columns are chained ledgers.
      if (!CHAIN_COLUMNS.every((c) => names.has(c.name))) continue;
      // The reasoning-step rules apply to the steps ledger's own schema, not to any table of its name.
      const isSteps = t.name === STEPS_TABLE && t.schema === 'main' && names.has('step_type');
      ledgers.push({
        ...t,
        chainKey: names.has('session_id') ? 'session_id' : null,
        serverColumns: isSteps ? STEPS_SERVER_COLUMNS : new Set(CHAIN_COLUMNS.map((c) => c.name)),
        isSteps,
        journaled: t.catalog === mainCatalog && !constrained.has(`${t.catalog}\u0000${t.schema}\u0000${t.name}`),
      });
    }
    return ledgers;
  }
}
