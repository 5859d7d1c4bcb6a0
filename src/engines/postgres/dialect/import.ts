import type { SqlConnection } from '../../../engine/port.js';
import { PgError } from '../../../errors/pg-error.js';
import { SqlState } from '../../../errors/sqlstate.js';
import { RETENTION_TABLE } from '../../../ledger/erasure/retention-sql.js';
import { orderedLeaves, transferRows, type LedgerExport } from '../../../ledger/transfer.js';
import { recordHashVersionSql } from '../../../ledger/chain/hash-version.js';
import { nodeHash, type Hash } from '../../../ledger/log/merkle.js';
import { pgTypeName } from './verify-sql.js';
import { ledgerFunctions } from '../../../ledger/dialect.js';
import { postgresDialect } from './dialect.js';
import { PG_SCHEMA, type PgRoles } from '../ledger/names.js';
import { pgRelation } from '../ledger/catalog.js';
import { fromCanonicalSql, pgArray } from '../ledger/writer.js';
import { ledgerWallSql } from '../ledger/install.js';
import { quoteIdent, type LedgerTable } from '../../../ledger/chain/schema.js';

/**
 * Moving ledgers from a DuckDB file into a PostgreSQL engine, keeping every
 * hash: each row is copied as its canonical texts (the values the hashes
 * were computed from), so PostgreSQL holds the same values and recomputes
 * the same hashes; the global log is rebuilt from the same leaves (their
 * schema is `main` on both engines), so every signed checkpoint of the file
 * still verifies against it, and each chain's head is where the file left
 * it, so appends go on from there. Everything happens in one transaction:
 * the engine holds all of it or none.
 */

export interface ImportReport {
  readonly ledgers: ReadonlyArray<{ readonly name: string; readonly rows: number; readonly created: boolean }>;
  readonly leaves: number;
  /** The log's root over every leaf, base64. */
  readonly root: string;
}

const ROWS_PER_BATCH = 5000;

export async function importIntoPostgres(
  source: LedgerExport,
  target: SqlConnection,
  targetLedgers: readonly LedgerTable[],
  roles: PgRoles,
): Promise<ImportReport> {
  const [[size]] = (await target.query(`SELECT size FROM ${PG_SCHEMA}.log_head`)) as [[bigint]];
  if (Number(size) !== 0) {
    throw new PgError(SqlState.ObjectNotInPrerequisiteState, `the PostgreSQL engine already holds ${size} ledger rows: import into one that holds none`, {
      hint: 'Import into a new database after `cotwire init-postgres`; merging two histories would give one log two orders.',
    });
  }
  const sourceLedgers = source.ledgers;
  for (const t of sourceLedgers) {
    if (t.schema !== 'main')
      throw new PgError(SqlState.FeatureNotSupported, `ledger ${t.schema}.${t.name} is outside schema main, which a PostgreSQL engine cannot hold`);
    for (const c of t.columns) pgTypeName(c.type);
  }
  const report: Array<{ name: string; rows: number; created: boolean }> = [];
  const leaves = new Map<number, Hash>();
  const heads = new Map<string, { ledger: string; key: string; index: number; hash: string }>();
  await target.run('BEGIN');
  try {
    await target.run(`SET LOCAL ROLE ${quoteIdent(roles.owner)}`);
    for (const t of sourceLedgers) {
      const existing = targetLedgers.find((x) => x.name === t.name);
      let created = false;
      if (existing === undefined) {
        const columns = t.columns.map((c) => `${quoteIdent(c.name)} ${pgTypeName(c.type)}${c.notNull ? ' NOT NULL' : ''}`);
        await target.run(`CREATE TABLE ${pgRelation(t.name)} (${columns.join(', ')})`);
        for (const sql of ledgerWallSql(
          t.name,
          t.chainKey,
          roles,
          t.columns.some((c) => c.name === 'org_id'),
        ))
          await target.run(sql);
        created = true;
      } else {
        const shape = (x: LedgerTable): string => x.columns.map((c) => `${c.name} ${c.type}`).join(', ');
        if (shape(existing) !== shape(t)) {
          throw new PgError(SqlState.DatatypeMismatch, `ledger ${t.name} has other columns in the engine (${shape(existing)}) than in the file (${shape(t)})`);
        }
      }
      // The file's hash version travels with the rows: a v1 ledger stays v1.
      await target.run(recordHashVersionSql({ catalog: '', schema: '', name: t.name, relation: pgRelation(t.name) }, t.hashVersion));
      const names = t.columns.map((c) => c.name);
      const at = (name: string): number => names.indexOf(name);
      const cols = t.columns.map((_, i) => `c${i}`);
      const rows = await transferRows(source, t, leaves, async (batch) => {
        await target.query(
          `INSERT INTO ${pgRelation(t.name)} (${names.map(quoteIdent).join(', ')})
           SELECT ${t.columns.map((c, i) => fromCanonicalSql(`u.${cols[i]}`, c.type)).join(', ')}
           FROM unnest(${cols.map((_, i) => `$${i + 1}::text[]`).join(', ')}) AS u(${cols.join(', ')})`,
          t.columns.map((_, i) => pgArray(batch.map((r) => r[i] ?? null))),
        );
        for (const r of batch) {
          const key = t.chainKey === null ? '' : (r[at(t.chainKey)] ?? '');
          const index = Number(r[at('step_index')]);
          const id = `main.${t.name}\u0000${key}`;
          if ((heads.get(id)?.index ?? -1) < index) heads.set(id, { ledger: `main.${t.name}`, key, index, hash: r[at('current_hash')] as string });
          // A chain whose first steps retention removed goes on from its record, as on DuckDB.
          if (t.name === RETENTION_TABLE) {
            const ledger = r[at('ledger')] as string;
            const retainedKey = r[at('chain_key')] as string;
            const last = Number(r[at('last_step_index')]);
            const retainedId = `${ledger}\u0000${retainedKey}`;
            if ((heads.get(retainedId)?.index ?? -1) < last)
              heads.set(retainedId, { ledger, key: retainedKey, index: last, hash: r[at('final_hash')] as string });
          }
        }
      });
      // The same functions as a ledger created on the engine.
      for (const sql of ledgerFunctions(postgresDialect(roles), { ...t, relation: pgRelation(t.name) })) await target.run(sql);
      report.push({ name: t.name, rows, created });
    }
    const ordered = await orderedLeaves(source, leaves);
    const count = ordered.length;
    // The log's complete subtrees in the order appends complete them, which is their position.
    const nodes: Hash[] = [];
    const frontier: Hash[] = [];
    for (const [index, leaf] of ordered.entries()) {
      nodes.push(leaf);
      let hash = leaf;
      let i = index;
      let level = 0;
      while (i % 2 === 1) {
        hash = nodeHash(frontier[level] as Hash, hash);
        nodes.push(hash);
        i = (i - 1) / 2;
        level++;
      }
      frontier[level] = hash;
    }
    for (let from = 0; from < nodes.length; from += ROWS_PER_BATCH * 4) {
      const part = nodes.slice(from, from + ROWS_PER_BATCH * 4);
      await target.query(`INSERT INTO ${PG_SCHEMA}.log_nodes (position, hash) SELECT p, decode(h, 'hex') FROM unnest($1::int8[], $2::text[]) AS x(p, h)`, [
        pgArray(part.map((_, k) => String(from + k))),
        pgArray(part.map((h) => h.toString('hex'))),
      ]);
    }
    await target.query(`UPDATE ${PG_SCHEMA}.log_head SET size = $1::int8`, [String(count)]);
    const all = [...heads.values()];
    if (all.length > 0) {
      await target.query(
        `INSERT INTO ${PG_SCHEMA}.chain_heads (ledger, chain_key, step_index, current_hash)
         SELECT * FROM unnest($1::text[], $2::text[], $3::int4[], $4::text[])
         ON CONFLICT (ledger, chain_key) DO UPDATE SET step_index = excluded.step_index, current_hash = excluded.current_hash`,
        [pgArray(all.map((h) => h.ledger)), pgArray(all.map((h) => h.key)), pgArray(all.map((h) => String(h.index))), pgArray(all.map((h) => h.hash))],
      );
    }
    const [[root]] = (await target.query('SELECT public.cot_log_root($1)', [String(count)])) as [[string]];
    await target.run('COMMIT');
    return { ledgers: report, leaves: count, root };
  } catch (err) {
    await target.run('ROLLBACK').catch(() => undefined);
    throw err;
  }
}
