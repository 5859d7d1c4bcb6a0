import { appendFileSync, closeSync, fsyncSync, openSync } from 'node:fs';

/** Rows of one ledger, full (every column's text, in the table order of its recorded shape). */
export interface QuarantinedRows {
  readonly schema: string;
  readonly name: string;
  readonly rows: ReadonlyArray<ReadonlyArray<string | null>>;
}

/**
 * Where acknowledged rows go when their ledger can no longer take them (it
 * was dropped or reshaped behind the server after they were journaled):
 * `<db>.quarantine`, one JSON line per ledger and batch, synced before the
 * rows leave the journal. They are the rows exactly as chained; the audit
 * reports their ledger_seq as missing from the ledger, and an operator can
 * restore them once the ledger is repaired.
 */
export class Quarantine {
  private constructor(readonly path: string | null) {}

  static pathFor(databasePath: string): string {
    return `${databasePath}.quarantine`;
  }

  /** Null: an in-memory database, whose rows die with the process anyway. */
  static at(path: string | null): Quarantine {
    return new Quarantine(path);
  }

  /** Writes the rows durably; throws when they could not be written (the caller keeps them). */
  keep(parts: readonly QuarantinedRows[], reason: string): void {
    if (this.path === null || parts.length === 0) return;
    const at = new Date().toISOString();
    const lines = parts
      .map((p) =>
        JSON.stringify({
          quarantined_at: at,
          schema: p.schema,
          name: p.name,
          reason,
          rows: p.rows,
        }),
      )
      .join('\n');
    appendFileSync(this.path, `${lines}\n`, { mode: 0o600 });
    const fd = openSync(this.path, 'r');
    try {
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
  }
}
