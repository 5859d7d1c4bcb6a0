import { loadModule } from 'libpg-query';
import { SqlState } from '../../../errors/sqlstate.js';
import type { StatementKind } from '../../../engine/port.js';
import { classify, preclassify, type CatalogCheck, type ClassifyInput, type Decision, type GuardPolicy } from './classify.js';
import type { Refusal } from '../../../guard/refusal.js';
import { ProtectedNames } from '../../../guard/names.js';
import { fingerprint, GuardRefusal } from '../../../guard/refusal.js';
import type { ParsedStatement } from '../../../sql/parsed.js';

/** What the guard needs to know about the catalog, asked of the client's own engine connection. */
export interface GuardCatalog {
  /** Names of the tables in `schema` (any catalog). */
  tablesInSchema(schema: string): Promise<string[]>;
  /** The table that index `index` belongs to, or null. */
  tableOfIndex(index: string): Promise<string | null>;
  /** Schemas holding a table named `name` (case-insensitive). */
  schemasWithTable(name: string): Promise<string[]>;
  /** The schema unqualified names are created in. */
  currentSchema(): Promise<string>;
}

/** A decision that lets a statement run. */
export type Allowed = Extract<Decision, { allow: true }>;

const CACHE_LIMIT = 10_000;

/** The statement kind DuckDB gives statements that start with these words. */
const KIND_BY_FIRST_WORD: Readonly<Record<string, StatementKind>> = {
  UPDATE: 'UPDATE',
  DELETE: 'DELETE',
  TRUNCATE: 'DELETE',
  INSERT: 'INSERT',
  MERGE: 'MERGE_INTO',
  DROP: 'DROP',
  ALTER: 'ALTER',
  COMMENT: 'ALTER',
  CREATE: 'CREATE',
  PREPARE: 'PREPARE',
  EXPLAIN: 'EXPLAIN',
};

/** A name no client statement may mention, and what the refusal says of it. */
export interface ReservedName {
  readonly name: string;
  /** After the quoted name: "is reserved for ...". */
  readonly message: string;
  readonly hint: string;
}

/**
 * The append-only guard. Every statement a client sends is classified here
 * before the engine runs it; the decision is cached by statement text, so a
 * repeated statement costs one map lookup (plus any catalog question its
 * decision depends on, which is asked every time).
 */
export class Guard {
  private readonly cache = new Map<string, Decision>();
  private readonly policy: GuardPolicy;

  private constructor(
    policy: GuardPolicy,
    private readonly engineSettings: ReadonlySet<string>,
    private readonly reservedNames: ReadonlyMap<string, ReservedName>,
  ) {
    this.policy = policy;
  }

  /** Loads PostgreSQL's parser (WebAssembly) once. */
  static async create(opts: {
    prefixes: readonly string[];
    reservedFunctions: ReadonlySet<string>;
    engineSettings: ReadonlySet<string>;
    /** Names no client statement may mention: the server's own catalog database, its records of foreign keys. */
    reservedNames?: readonly ReservedName[];
  }): Promise<Guard> {
    await loadModule();
    return new Guard(
      { names: new ProtectedNames(opts.prefixes), reservedFunctions: opts.reservedFunctions },
      opts.engineSettings,
      new Map((opts.reservedNames ?? []).map((n) => [n.name.toLowerCase(), n])),
    );
  }

  /**
   * A client statement that names the server's catalog database is refused
   * before anything else: its views are shared by every connection, and
   * only the server's own rewrites refer to them.
   */
  refuseReservedNames(text: string, tokens: ClassifyInput['tokens']): void {
    if (this.reservedNames.size === 0) return;
    for (const t of tokens) {
      // A string that spells a name counts too, part by part: DuckDB takes one where a table's name goes.
      const body = t.kind === 'string' ? t.text.replace(/^[eE]?'|'$/g, '') : '';
      const names =
        t.kind === 'word' || t.kind === 'quoted'
          ? [(t.kind === 'quoted' ? t.text.slice(1, -1).replaceAll('""', '"') : t.text).toLowerCase()]
          : /^[\w$."]+$/.test(body)
            ? body.toLowerCase().replaceAll('"', '').split('.')
            : [];
      const reserved = names.map((n) => this.reservedNames.get(n)).find((r) => r !== undefined);
      if (reserved === undefined) continue;
      throw new GuardRefusal(
        { reason: 'shadow', operation: 'name', target: reserved.name, message: `"${reserved.name}" ${reserved.message}`, hint: reserved.hint },
        fingerprint(text),
      );
    }
  }

  /**
   * SET of one of the engine's own settings: they are global to the
   * process (threads, memory_limit, default_order ...), so no client may
   * change them. Returns the refusal to throw, or null for other names.
   */
  refuseEngineSetting(name: string, statement: string): GuardRefusal | null {
    if (!this.engineSettings.has(name.toLowerCase())) return null;
    return new GuardRefusal(
      {
        reason: 'setting',
        operation: 'SET',
        target: name,
        message: `cannot change engine setting "${name}": it is shared by every connection`,
        hint: 'Per-connection settings are the PostgreSQL parameters listed by SHOW ALL, and SET VARIABLE.',
      },
      fingerprint(statement),
    );
  }

  get names(): ProtectedNames {
    return this.policy.names;
  }

  /** Before the engine sees the statement: throws a GuardRefusal for what needs no engine to refuse. */
  precheck(text: string, tokens: ClassifyInput['tokens']): void {
    const decision = preclassify(tokens);
    if (decision !== null && !decision.allow) throw new GuardRefusal(decision.refusal, fingerprint(text));
  }

  /** Throws a GuardRefusal (42501) when the statement may not run; otherwise returns what was allowed. */
  async check(input: ClassifyInput, catalog: GuardCatalog): Promise<Allowed> {
    const decision = this.decide(input);
    if (!decision.allow) throw new GuardRefusal(decision.refusal, fingerprint(input.text));
    for (const check of decision.checks) {
      const refusal = await this.answer(check, catalog);
      if (refusal !== null) throw new GuardRefusal(refusal, fingerprint(input.text));
    }
    return decision;
  }

  /**
   * The refusal for an append to a ledger that would run on the engine:
   * only the ledger writer appends, so an INSERT into a ledger that the
   * writer's path did not take (a WITH before INSERT, SQL-level PREPARE, a
   * name in a form the writer does not read) never runs.
   */
  engineAppendRefusal(ledger: string, text: string, tokens: ClassifyInput['tokens']): GuardRefusal {
    const first = tokens[0]?.text.toUpperCase();
    const hint =
      first === 'WITH'
        ? 'Put the WITH clause inside the INSERT: INSERT INTO <ledger> (columns) WITH ... SELECT ...'
        : first === 'PREPARE'
          ? "Prepare the INSERT through the protocol (your driver's prepared statements), not with SQL PREPARE."
          : first === 'EXPLAIN'
            ? 'EXPLAIN the INSERT without ANALYZE.'
            : 'Write INSERT INTO <ledger> [(columns)] VALUES ... | SELECT ... [RETURNING ...], naming the ledger with an identifier.';
    return new GuardRefusal(
      {
        reason: 'ledger',
        operation: 'INSERT INTO',
        target: ledger,
        message: `cannot append to ledger table "${ledger}" with this statement: only the ledger writer appends, and it takes a plain INSERT`,
        hint,
      },
      fingerprint(text),
    );
  }

  /**
   * For a statement DuckDB could not prepare (so it has no kind): the
   * refusal the guard would give it under the kind its first word names,
   * or null. Nothing runs either way; this only decides which error the
   * client sees.
   */
  refusalWithoutEngine(parsed: ParsedStatement, engineCode: string | undefined): GuardRefusal | null {
    const { text, tokens } = parsed;
    const first = tokens[0]?.text.toUpperCase() ?? '';
    // WITH starts any of the writes; each reading is tried.
    const named = KIND_BY_FIRST_WORD[first];
    const kinds: readonly StatementKind[] = first === 'WITH' ? ['INSERT', 'UPDATE', 'DELETE', 'MERGE_INTO'] : named !== undefined ? [named] : [];
    for (const kind of kinds) {
      const decision = this.decide({ text, tokens, kind, parsed });
      if (!decision.allow) return new GuardRefusal(decision.refusal, fingerprint(text));
      // An append to a table that does not exist, or that is not valid SQL, is answered as PostgreSQL answers it.
      if (decision.appendsTo != null && engineCode !== SqlState.UndefinedTable && engineCode !== SqlState.SyntaxError) {
        return this.engineAppendRefusal(decision.appendsTo, text, tokens);
      }
    }
    return null;
  }

  /** The cached decision for a statement text. */
  decide(input: ClassifyInput): Decision {
    const key = `${input.kind}\u0000${input.text}`;
    let decision = this.cache.get(key);
    if (decision === undefined) {
      decision = classify(input, this.policy);
      if (this.cache.size >= CACHE_LIMIT) this.cache.clear();
      this.cache.set(key, decision);
    }
    return decision;
  }

  private async answer(check: CatalogCheck, catalog: GuardCatalog): Promise<Refusal | null> {
    const names = this.policy.names;
    switch (check.kind) {
      case 'schema-holds-ledger': {
        const ledgers = (await catalog.tablesInSchema(check.schema)).filter((t) => names.isProtected(t));
        if (ledgers.length === 0) return null;
        return {
          reason: 'ledger',
          operation: check.operation,
          target: check.schema,
          message: `cannot ${check.operation} "${check.schema}": it holds ledger table "${ledgers[0] as string}", and ledger tables are append-only`,
          hint: 'A schema that holds a ledger table cannot be dropped, replaced or renamed.',
        };
      }
      case 'index-on-ledger': {
        const table = await catalog.tableOfIndex(check.index);
        if (table === null || !names.isProtected(table)) return null;
        return {
          reason: 'ledger',
          operation: check.operation,
          target: table,
          message: `cannot ${check.operation} "${check.index}": it belongs to ledger table "${table}", and ledger tables are append-only`,
          hint: 'Indexes of ledger tables are managed by the server.',
        };
      }
      case 'ledger-name-elsewhere': {
        const target = (check.schema ?? (await catalog.currentSchema())).toLowerCase();
        const others = (await catalog.schemasWithTable(check.name)).filter((s) => s.toLowerCase() !== target);
        if (others.length === 0) return null;
        return {
          reason: 'shadow',
          operation: 'CREATE TABLE',
          target: check.name,
          message: `cannot create ledger table "${check.name}" in schema "${target}": schema "${others[0] as string}" already has a ledger of that name`,
          hint: 'Ledger names are unique across schemas, so that every audit names exactly one ledger.',
        };
      }
    }
  }
}
