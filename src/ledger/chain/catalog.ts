import type { SqlConnection } from '../../engine/port.js';
import { PgError } from '../../errors/pg-error.js';
import { SqlState } from '../../errors/sqlstate.js';
import { REDACTIONS_TABLE } from '../erasure/redactions.js';
import { RETENTION_TABLE } from '../erasure/retention-sql.js';
import { LOG_EVENTS_TABLE } from '../log/log-events.js';
import { CHAIN_COLUMNS, HASH_VERSION, qualifiedName, serverColumnsOf, STEPS_TABLE, type LedgerColumn, type LedgerTable } from './schema.js';
import { hashVersionOf } from './hash-version.js';
import { shapeChange, type LedgerShapes } from './shapes.js';

/** A table whose name makes it a ledger, as the engine's catalog describes it. */
export interface CatalogTable {
  readonly catalog: string;
  readonly schema: string;
  readonly name: string;
  /** The SQL that names it in the engine, where that is not catalog.schema.name. */
  readonly relation?: string;
  readonly columns: LedgerColumn[];
  readonly comment: string | null;
  /** It has constraints the writer does not check itself (CHECK, UNIQUE, keys). */
  readonly constrained: boolean;
}

/** Reads the tables with protected names, and the catalog that is the database itself. */
export type CatalogSource = (
  conn: SqlConnection,
  isProtected: (name: string) => boolean,
) => Promise<{ readonly mainCatalog: string; readonly tables: readonly CatalogTable[] }>;

/** A ledger dropped or reshaped behind the server: it fails closed, and the audit reports it. */
export interface LedgerDamage {
  readonly schema: string;
  readonly name: string;
  readonly kind: 'ledger_missing' | 'ledger_changed';
  readonly reason: string;
}

interface CatalogState {
  readonly ledgers: LedgerTable[];
  readonly damaged: LedgerDamage[];
}

/**
 * The ledger tables in the database and their columns, read from the
 * catalog on a server-internal connection and cached until a ledger is
 * created or something asks for a fresh look (the audit, a failed apply).
 * With recorded shapes (ledger/chain/shapes.ts), a ledger of the database file
 * that is gone or has other columns is not served as a ledger: it is
 * listed as damaged, and appending to it is refused with an error naming
 * it, while every other ledger keeps working.
 */
export class LedgerCatalog {
  private state: Promise<CatalogState> | null = null;
  /** Names of ledgers the server created whose shape is to be recorded when they are next seen. */
  private readonly recreated = new Set<string>();
  /** Increases whenever the set of ledgers may have changed. */
  version = 0;

  constructor(
    private readonly conn: SqlConnection,
    private readonly isProtected: (name: string) => boolean,
    private readonly shapes: LedgerShapes | null = null,
    /** Where the tables are read from: each engine's own catalog. */
    private readonly source: CatalogSource,
  ) {}

  /**
   * The server created a ledger of this name (CREATE TABLE through a client):
   * the shape it has once committed is its recorded shape, even if a ledger
   * of the name was recorded before and dropped behind the server.
   */
  created(name: string): void {
    this.recreated.add(name.toLowerCase());
    this.invalidate();
  }

  invalidate(): void {
    this.state = null;
    this.version++;
  }

  /** The ledgers that can be served: present, and shaped as recorded. */
  async all(): Promise<LedgerTable[]> {
    return (await this.load()).ledgers;
  }

  /** The ledgers of the database file that are gone or changed shape behind the server. */
  async damaged(): Promise<LedgerDamage[]> {
    return (await this.load()).damaged;
  }

  /**
   * The ledger a (possibly qualified) name refers to; an unqualified name
   * matches by name, as ledger names are unique. Null when no ledger has the
   * name; a damaged ledger's name is refused (XX001), so that it fails closed.
   */
  async find(parts: readonly string[]): Promise<LedgerTable | null> {
    const name = (parts[parts.length - 1] ?? '').toLowerCase();
    const schema = parts.length >= 2 ? (parts[parts.length - 2] as string).toLowerCase() : null;
    const catalog = parts.length >= 3 ? (parts[parts.length - 3] as string).toLowerCase() : null;
    const state = await this.load();
    const matches = state.ledgers.filter(
      (t) =>
        t.name.toLowerCase() === name && (schema === null || t.schema.toLowerCase() === schema) && (catalog === null || t.catalog.toLowerCase() === catalog),
    );
    if (matches[0] !== undefined) return matches[0];
    const damage = state.damaged.find((d) => d.name.toLowerCase() === name && (schema === null || d.schema.toLowerCase() === schema));
    if (damage !== undefined) throw damagedLedgerError(damage);
    return null;
  }

  private load(): Promise<CatalogState> {
    this.state ??= this.read().catch((err: unknown) => {
      this.state = null;
      throw err;
    });
    return this.state;
  }

  private async read(): Promise<CatalogState> {
    const { mainCatalog, tables } = await this.source(this.conn, this.isProtected);
    const byTable = new Map(tables.map((t) => [`${t.catalog}\u0000${t.schema}\u0000${t.name}`, t] as const));
    const comments = new Map(tables.map((t) => [`${t.catalog}\u0000${t.schema}\u0000${t.name}`, t.comment] as const));
    const constrained = new Set(tables.filter((t) => t.constrained).map((t) => `${t.catalog}\u0000${t.schema}\u0000${t.name}`));
    const ledgers: LedgerTable[] = [];
    const damaged: LedgerDamage[] = [];
    for (const t of byTable.values()) {
      const inFile = t.catalog === mainCatalog;
      let recorded = inFile ? this.shapes?.expected(t.schema, t.name) : undefined;
      if (this.recreated.delete(t.name.toLowerCase()) && recorded !== undefined) {
        const hashVersion = hashVersionOf(comments.get(`${t.catalog}\u0000${t.schema}\u0000${t.name}`));
        this.shapes?.replace({
          schema: t.schema,
          name: t.name,
          columns: t.columns.map((c) => ({ name: c.name, type: c.type })),
          ...(hashVersion === undefined ? {} : { hashVersion }),
        });
        recorded = undefined;
      }
      if (recorded !== undefined) {
        const change = shapeChange(recorded, t.columns);
        if (change !== null) {
          damaged.push({ schema: t.schema, name: t.name, kind: 'ledger_changed', reason: `its columns changed behind the server: ${change}` });
          continue;
        }
      }
      const comment = comments.get(`${t.catalog}\u0000${t.schema}\u0000${t.name}`) ?? null;
      const hashVersion = hashVersionOf(comment);
      if (hashVersion === undefined || (recorded?.hashVersion !== undefined && recorded.hashVersion !== hashVersion)) {
        damaged.push({
          schema: t.schema,
          name: t.name,
          kind: 'ledger_changed',
          reason: `its hash version changed behind the server: the table comment says ${JSON.stringify(comment)}${recorded?.hashVersion === undefined ? '' : `, recorded ${recorded.hashVersion}`}`,
        });
        continue;
      }
      const names = new Set(t.columns.map((c) => c.name));
      // Only tables with the chain columns are chained ledgers.
      if (!CHAIN_COLUMNS.every((c) => names.has(c.name))) continue;
      // The reasoning-step rules apply to the steps ledger's own schema, not to any table of its name.
      const isSteps = t.name === STEPS_TABLE && t.schema === 'main' && names.has('step_type');
      ledgers.push({
        catalog: t.catalog,
        schema: t.schema,
        name: t.name,
        columns: t.columns,
        ...(t.relation === undefined ? {} : { relation: t.relation }),
        chainKey: names.has('session_id') ? 'session_id' : null,
        serverColumns: serverColumnsOf(isSteps, hashVersion),
        isSteps,
        journaled: inFile && !constrained.has(`${t.catalog}\u0000${t.schema}\u0000${t.name}`),
        hashVersion,
        redactions: null,
        retention: null,
      });
    }
    // Redactions stand in for values of the database file's v2 ledgers only.
    // Only a record ledger that holds records is joined by verification: an empty one would cost every
    // cot_verify() a join for nothing. The server invalidates the catalog after each erasure.
    const own = async (name: string): Promise<string | null> => {
      const t = ledgers.find((l) => l.catalog === mainCatalog && l.schema === 'main' && l.name === name);
      if (t === undefined) return null;
      const [[any]] = (await this.conn.query(`SELECT EXISTS (SELECT 1 FROM ${qualifiedName(t)})`)) as [[boolean]];
      return any ? qualifiedName(t) : null;
    };
    const [redactions, retention] = [await own(REDACTIONS_TABLE), await own(RETENTION_TABLE)];
    const events = ledgers.find((l) => l.catalog === mainCatalog && l.schema === 'main' && l.name === LOG_EVENTS_TABLE);
    const [[anyLoss]] =
      events === undefined
        ? [[false]]
        : ((await this.conn.query(`SELECT EXISTS (SELECT 1 FROM ${qualifiedName(events)} WHERE kind = 'appends lost')`)) as [[boolean]]);
    const losses = anyLoss ? qualifiedName(events as LedgerTable) : null;
    for (const [i, t] of ledgers.entries()) {
      if (t.catalog !== mainCatalog) continue;
      ledgers[i] = { ...t, redactions: t.hashVersion === HASH_VERSION ? null : redactions, retention, losses };
    }
    if (this.shapes !== null) {
      for (const s of this.shapes.all()) {
        if (![...byTable.values()].some((t) => t.catalog === mainCatalog && t.schema === s.schema && t.name === s.name)) {
          damaged.push({ schema: s.schema, name: s.name, kind: 'ledger_missing', reason: 'it was dropped behind the server' });
        }
      }
      this.shapes.add(
        ledgers
          .filter((t) => t.catalog === mainCatalog)
          .map((t) => ({ schema: t.schema, name: t.name, columns: t.columns.map((c) => ({ name: c.name, type: c.type })), hashVersion: t.hashVersion })),
      );
    }
    return { ledgers, damaged };
  }
}

/** What a client that appends to a damaged ledger is told. */
export function damagedLedgerError(d: LedgerDamage): PgError {
  return new PgError(SqlState.DataCorrupted, `ledger "${d.schema}.${d.name}" is damaged: ${d.reason}; appends to it are refused`, {
    hint: 'SELECT * FROM cot_audit() lists what the audit found; docs/security.md ("Damaged ledgers") says how to recover. Other ledgers are not affected.',
  });
}
