import { randomUUID } from 'node:crypto';
import { PgError } from '../../errors/pg-error.js';
import { SqlState } from '../../errors/sqlstate.js';
import type { LedgerAppender } from '../chain/append.js';
import { columnDigest } from '../chain/canonical.js';
import { commitment, SaltKeys } from '../chain/commitments.js';
import type { LedgerCatalog } from '../chain/catalog.js';
import { committedPlaces, HASH_VERSION_V3, quoteIdent, SALT_COLUMN, STEPS_TABLE, type LedgerTable } from '../chain/schema.js';
import { markerOf, REDACTIONS_TABLE, unredactable } from './redactions.js';
import type { ErasureStore } from './store.js';
import type { RedactionAsk as RedactionRequest, RedactionResult as RedactionRecord } from '../../engine/erasure-call.js';
import { OneAtATime } from './one-at-a-time.js';

/** Which value to redact: a step of `_cot_steps` by trace_id, or a row of any ledger by its ledger_seq. */
export type RedactionTarget = { readonly traceId: string } | { readonly ledger: string; readonly seq: string };

/** What is asked, and one redaction as its record holds it: the shapes either wing's handler answers cot_redact() with. */
export type { RedactionAsk as RedactionRequest, RedactionResult as RedactionRecord } from '../../engine/erasure-call.js';

export interface RedactorHooks {
  /** A chain's rows changed: caches of it are stale. */
  changed(table: LedgerTable, chainKey: string): void;
  /** Values left the ledgers: what else held them (a journal, a file to rewrite) is told. */
  erased(): void | Promise<void>;
  /**
   * Values are about to leave the ledgers: said before the engine's change, so that a crash between
   * the change and `erased` still leaves a file to rewrite marked (the old bytes linger in freed blocks).
   */
  erasing?(): void | Promise<void>;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * Carries out redactions, one at a time: the record is appended (chained,
 * in the global log) and in the engine before the value is replaced, so a
 * crash in between leaves a row that still holds its value and verifies,
 * and the next start finishes the redaction (complete()).
 */
export class Redactor {
  private readonly runs = new OneAtATime();

  /** Resolves once the runs asked for so far have ended. */
  idle(): Promise<void> {
    return this.runs.idle();
  }

  constructor(
    private readonly store: ErasureStore,
    private readonly catalog: LedgerCatalog,
    private readonly writer: LedgerAppender,
    private readonly hooks: RedactorHooks,
  ) {}

  redact(request: RedactionRequest): Promise<RedactionRecord> {
    return this.runs.run(() => this.redactOne(request));
  }

  private async redactOne(request: RedactionRequest): Promise<RedactionRecord> {
    const { column } = request;
    const reason = request.reason.trim();
    if (reason === '')
      throw new PgError(SqlState.InvalidParameterValue, 'a redaction needs a reason', {
        hint: 'Say why, for the record: cot_redact(trace_id, column, reason).',
      });
    const table = await this.ledgerOf(request.target);
    const refusal = unredactable(table, column);
    if (refusal !== null) {
      const code = table.columns.some((c) => c.name === column) ? SqlState.FeatureNotSupported : SqlState.UndefinedColumn;
      throw new PgError(code, `cannot redact ${table.schema}.${table.name}.${column}: ${refusal}`);
    }
    const records = await this.records();
    // The target row must be in the engine, not only in the writer's journal.
    await this.writer.visible();
    const where = 'traceId' in request.target ? 'trace_id = CAST($1 AS UUID)' : 'ledger_seq = CAST($1 AS BIGINT)';
    const key = table.chainKey === null ? `''` : `CAST(${quoteIdent(table.chainKey)} AS VARCHAR)`;
    const traceId = table.columns.some((c) => c.name === 'trace_id') ? 'CAST(trace_id AS VARCHAR)' : 'NULL';
    const c = table.columns.find((x) => x.name === column);
    const rows = (await this.store.conn.query(
      `SELECT CAST(ledger_seq AS VARCHAR), ${key}, step_index, ${traceId}, ${this.store.textSql(column, c?.type ?? 'VARCHAR')} FROM ${this.store.relation(table)} WHERE ${where}`,
      ['traceId' in request.target ? request.target.traceId : request.target.seq],
    )) as Array<[string, string, number, string | null, string | null]>;
    const row = rows[0];
    if (row === undefined || rows.length > 1) {
      throw new PgError(
        SqlState.NoDataFound,
        `no row of ${table.schema}.${table.name} has ${'traceId' in request.target ? `trace_id ${request.target.traceId}` : `ledger_seq ${request.target.seq}`}`,
      );
    }
    const [seq, chainKey, stepIndex, trace, text] = row;
    const ledger = `${table.schema}.${table.name}`;
    const [existing] = (await this.store.conn.query(
      `SELECT CAST(redaction_id AS VARCHAR), value_digest, reason, redacted_by, CAST(ledger_seq AS VARCHAR) FROM ${this.store.relation(records)}
       WHERE ledger = $1 AND target_seq = CAST($2 AS BIGINT) AND column_name = $3 ORDER BY ledger_seq LIMIT 1`,
      [ledger, seq, column],
    )) as Array<[string, string, string, string, string]>;
    const base = { ledger, targetSeq: seq, chainKey, stepIndex: Number(stepIndex), traceId: trace, column };
    if (existing !== undefined) {
      await this.apply(table, seq, column, chainKey, trace);
      return {
        ...base,
        opening: null,
        redactionId: existing[0],
        valueDigest: existing[1],
        reason: existing[2],
        redactedBy: existing[3],
        recordSeq: existing[4],
        applied: false,
      };
    }
    if (text === null) throw new PgError(SqlState.InvalidParameterValue, `${ledger}.${column} is NULL there: there is nothing to redact`);
    const marker = markerOf(c as NonNullable<typeof c>);
    if (marker !== null && text === marker.text) {
      throw new PgError(SqlState.InvalidParameterValue, `${ledger}.${column} there holds the redaction marker itself, with no redaction record`, {
        hint: 'A value written as the marker is not a redacted one; there is nothing to redact.',
      });
    }
    const redactionId = randomUUID();
    const committed = table.hashVersion === HASH_VERSION_V3 ? await this.commitmentOf(table, seq, column, text) : null;
    const valueDigest = committed?.commitment ?? columnDigest(text).toString('hex');
    const [appended] = await this.writer.append([
      { table: records, rows: [[redactionId, ledger, seq, chainKey, String(stepIndex), trace, column, valueDigest, reason, request.actor]] },
    ]);
    await this.writer.visible();
    await this.apply(table, seq, column, chainKey, trace);
    return {
      ...base,
      redactionId,
      valueDigest,
      reason,
      redactedBy: request.actor,
      recordSeq: String(appended?.firstSeq ?? ''),
      applied: true,
      opening: committed?.opening ?? null,
    };
  }

  /**
   * A v3 value's commitment, from the key its row's salt gives it, and the
   * opening that proves the value later: the value's text and that key,
   * which the redaction erases from the row (README, "cotwire/v3").
   */
  private async commitmentOf(table: LedgerTable, seq: string, column: string, text: string): Promise<{ commitment: string; opening: string }> {
    const keys = SaltKeys.parse(await this.saltOf(table, seq));
    const key = keys?.keyOf(committedPlaces(table.columns.map((c) => c.name)).get(column) ?? -1, column) ?? null;
    if (key === null)
      throw new PgError(SqlState.DataCorrupted, `${table.schema}.${table.name} row ${seq} has no key for ${column}: its ${SALT_COLUMN} is damaged`);
    const c = commitment(key, text).toString('hex');
    return { commitment: c, opening: JSON.stringify({ column, text, key: key.toString('hex'), commitment: c }) };
  }

  private async saltOf(table: LedgerTable, seq: string): Promise<string | null> {
    const [row] = (await this.store.conn.query(`SELECT ${quoteIdent(SALT_COLUMN)} FROM ${this.store.relation(table)} WHERE ledger_seq = CAST($1 AS BIGINT)`, [
      seq,
    ])) as Array<[string | null]>;
    return row?.[0] ?? null;
  }

  /**
   * Finishes redactions whose record was appended but whose value was not
   * replaced (a crash in between); returns how many.
   */
  async complete(): Promise<number> {
    const records = await this.catalog.find(['main', REDACTIONS_TABLE]);
    if (records === null) return 0;
    const pending = (await this.store.conn.query(
      `SELECT DISTINCT ledger, CAST(target_seq AS VARCHAR), column_name FROM ${this.store.relation(records)}`,
    )) as Array<[string, string, string]>;
    let done = 0;
    for (const [ledger, seq, column] of pending) {
      const [schema, name] = ledger.split('.') as [string, string];
      const table = await this.catalog.find([schema, name]).catch(() => null);
      const c = table?.columns.find((x) => x.name === column);
      const marker = c === undefined ? null : markerOf(c);
      if (table === null || table === undefined || marker === null) continue;
      const [[holds]] = (await this.store.conn.query(
        `SELECT count(*) FILTER (WHERE ${this.store.textSql(column, (c as NonNullable<typeof c>).type)} IS DISTINCT FROM $2) FROM ${this.store.relation(table)} WHERE ledger_seq = CAST($1 AS BIGINT)`,
        [seq, marker.text],
      )) as [[bigint]];
      if (Number(holds) === 0) continue;
      await this.apply(table, seq, column, null, null);
      done++;
    }
    return done;
  }

  /** Replaces the value with its marker, and what was derived from it. */
  private async apply(table: LedgerTable, seq: string, column: string, chainKey: string | null, traceId: string | null): Promise<void> {
    const c = table.columns.find((x) => x.name === column);
    const marker = c === undefined ? null : markerOf(c);
    if (marker === null) return;
    const statements = [
      { sql: `UPDATE ${this.store.relation(table)} SET ${quoteIdent(column)} = ${marker.sql} WHERE ledger_seq = CAST($1 AS BIGINT)`, params: [seq] },
    ];
    if (table.hashVersion === HASH_VERSION_V3) {
      // The salt goes with the value: the row keeps the keys of its other committed columns, and no key of this one.
      const keys = SaltKeys.parse(await this.saltOf(table, seq));
      if (keys !== null) {
        const others = [...committedPlaces(table.columns.map((c) => c.name))].filter(([c]) => c !== column);
        statements.push({
          sql: `UPDATE ${this.store.relation(table)} SET ${quoteIdent(SALT_COLUMN)} = $2 WHERE ledger_seq = CAST($1 AS BIGINT)`,
          params: [seq, keys.listing(others)],
        });
      }
    }
    // A vector computed from the value says something about it.
    const vectors = table.isSteps && traceId !== null ? await this.store.vectors() : null;
    if (vectors !== null) statements.push({ sql: `DELETE FROM ${vectors} WHERE trace_id = CAST($1 AS UUID)`, params: [traceId as string] });
    await this.hooks.erasing?.();
    await this.store.change([table], statements);
    if (chainKey !== null) this.hooks.changed(table, chainKey);
    await this.hooks.erased();
  }

  private async records(): Promise<LedgerTable> {
    const records = await this.catalog.find(['main', REDACTIONS_TABLE]);
    if (records === null) throw new PgError(SqlState.FeatureNotSupported, `the database has no ${REDACTIONS_TABLE} ledger to record redactions in`);
    return records;
  }

  private async ledgerOf(target: RedactionTarget): Promise<LedgerTable> {
    if ('traceId' in target) {
      if (!UUID.test(target.traceId)) throw new PgError(SqlState.InvalidTextRepresentation, `invalid input syntax for type uuid: "${target.traceId}"`);
      const steps = await this.catalog.find(['main', STEPS_TABLE]);
      if (steps === null) throw new PgError(SqlState.UndefinedTable, `relation "${STEPS_TABLE}" does not exist`);
      return steps;
    }
    if (!/^[0-9]{1,19}$/.test(target.seq)) throw new PgError(SqlState.InvalidTextRepresentation, `invalid input syntax for type bigint: "${target.seq}"`);
    const parts = target.ledger.split('.');
    const table = await this.catalog.find(parts);
    if (table === null) throw new PgError(SqlState.UndefinedTable, `ledger "${target.ledger}" does not exist`);
    return table;
  }
}
