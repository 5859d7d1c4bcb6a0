import { closeSync, existsSync, fsyncSync, openSync, readFileSync, renameSync, writeFileSync } from 'node:fs';

/** A ledger's identity and its columns (name and type, in table order): what its rows were hashed over. */
export interface LedgerShape {
  readonly schema: string;
  readonly name: string;
  readonly columns: ReadonlyArray<{ readonly name: string; readonly type: string }>;
  /** The hash specification its rows are chained with; absent in shapes recorded before versions were. */
  readonly hashVersion?: string;
}

/**
 * The shape of every ledger of the database file, as the server last saw it
 * intact, kept beside the database (`<db>.ledgers`) where SQL cannot reach.
 * A ledger is never dropped or altered through the server, so a ledger
 * missing from the database, or with other columns, was changed behind it:
 * the catalog reports it damaged, and it fails closed instead of every
 * connection failing with it (ledger/chain/catalog.ts). A file that does not
 * exist yet (a new database, or one from before this file) trusts what it
 * finds on first use.
 */
export class LedgerShapes {
  private shapes: LedgerShape[];

  private constructor(
    private readonly path: string | null,
    shapes: LedgerShape[],
    /** Whether shapes were recorded before this start. */
    readonly recorded: boolean,
  ) {
    this.shapes = shapes;
  }

  static pathFor(databasePath: string): string {
    return `${databasePath}.ledgers`;
  }

  /** The shapes recorded beside a database file; null keeps them in memory only (an in-memory database). */
  static open(path: string | null): LedgerShapes {
    if (path === null || !existsSync(path)) return new LedgerShapes(path, [], false);
    let parsed: unknown;
    try {
      parsed = JSON.parse(readFileSync(path, 'utf8'));
    } catch (err) {
      throw new Error(
        `the ledger shape file ${path} is not readable JSON (${(err as Error).message}); restore it, or remove it to trust the ledgers as they are now`,
      );
    }
    const ledgers = (parsed as { ledgers?: unknown }).ledgers;
    if (!Array.isArray(ledgers))
      throw new Error(`the ledger shape file ${path} has no "ledgers" list; restore it, or remove it to trust the ledgers as they are now`);
    return new LedgerShapes(path, ledgers as LedgerShape[], true);
  }

  /** The shape recorded for a ledger, if any. */
  expected(schema: string, name: string): LedgerShape | undefined {
    return this.shapes.find((s) => s.schema === schema && s.name === name);
  }

  all(): readonly LedgerShape[] {
    return this.shapes;
  }

  /** Records ledgers seen for the first time, and the hash version of those recorded before versions were. */
  add(shapes: readonly LedgerShape[]): void {
    const added = shapes.filter((s) => this.expected(s.schema, s.name) === undefined);
    const versioned = new Map(
      shapes
        .filter((s) => s.hashVersion !== undefined && this.expected(s.schema, s.name)?.hashVersion === undefined)
        .map((s) => [`${s.schema}\u0000${s.name}`, s]),
    );
    if (added.length === 0 && versioned.size === 0) return;
    this.shapes = [
      ...this.shapes.map((s) => {
        const version = versioned.get(`${s.schema}\u0000${s.name}`)?.hashVersion;
        return version === undefined ? s : { ...s, hashVersion: version };
      }),
      ...added,
    ];
    this.save();
  }

  /** Records a ledger the server itself created again under a recorded name. */
  replace(shape: LedgerShape): void {
    this.shapes = [...this.shapes.filter((s) => !(s.schema === shape.schema && s.name === shape.name)), shape];
    this.save();
  }

  /** The file is replaced whole, and synced. */
  private save(): void {
    if (this.path === null) return;
    const tmp = `${this.path}.tmp`;
    writeFileSync(tmp, `${JSON.stringify({ version: 1, ledgers: this.shapes }, null, 2)}\n`, { mode: 0o644 });
    const fd = openSync(tmp, 'r');
    try {
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, this.path);
  }
}

/** How a ledger's columns differ from its recorded shape, in words; null when they do not. */
export function shapeChange(expected: LedgerShape, actual: LedgerShape['columns']): string | null {
  const was = new Map(expected.columns.map((c) => [c.name, c.type]));
  const now = new Map(actual.map((c) => [c.name, c.type]));
  const changes: string[] = [];
  for (const [name, type] of now) {
    const before = was.get(name);
    if (before === undefined) changes.push(`column "${name}" ${type} was added`);
    else if (before !== type) changes.push(`column "${name}" is ${type}, was ${before}`);
  }
  for (const name of was.keys()) if (!now.has(name)) changes.push(`column "${name}" was dropped`);
  if (changes.length === 0 && expected.columns.map((c) => c.name).join('\u0000') !== actual.map((c) => c.name).join('\u0000')) {
    changes.push('its columns were reordered');
  }
  return changes.length === 0 ? null : changes.join('; ');
}
