import type { SqlConnection } from '../../../engine/port.js';
import { canonicalTextSql, type LedgerTable, qualifiedName } from '../../../ledger/chain/schema.js';
import type { StepStore, StepTexts } from './store.js';

/** Steps read from the ledger per transaction of the store. */
const FILL_BATCH = 20_000;

/** The steps with from < ledger_seq <= to, as their canonical texts in table column order. */
export type LedgerSteps = (from: bigint, to: bigint) => Promise<StepTexts[]>;

/** The query `LedgerSteps` runs: the canonical texts verification hashes, over a range of ledger_seq ($1, $2]. */
export function ledgerStepsSql(steps: LedgerTable): string {
  const columns = steps.columns.map((c) => canonicalTextSql(c.name, c.type)).join(', ');
  return `SELECT ${columns} FROM ${qualifiedName(steps)} WHERE ledger_seq > CAST($1 AS BIGINT) AND ledger_seq <= CAST($2 AS BIGINT)`;
}

/**
 * Brings the store up to the ledger: the steps with a ledger_seq above
 * what the store holds, up to `upTo` (the writer's last durable seq when
 * the store began to take its appends). The engine reads the next range
 * while the store writes this one. Then the store answers reads.
 */
export async function fillStepStore(
  store: StepStore,
  read: LedgerSteps,
  upTo: bigint,
  visible: (seq: bigint) => Promise<void>,
  stopped: () => boolean,
): Promise<number> {
  const next = async (from: bigint): Promise<{ readonly to: bigint; readonly rows: StepTexts[] }> => {
    const to = from + BigInt(FILL_BATCH) < upTo ? from + BigInt(FILL_BATCH) : upTo;
    await visible(to);
    // ledger_seq is shared by every ledger table: a range may hold fewer steps than its width.
    return { to, rows: await read(from, to) };
  };
  let done = 0;
  let pending = store.filled < upTo ? next(store.filled) : null;
  while (pending !== null) {
    const { to, rows } = await pending;
    if (stopped()) return done;
    pending = to < upTo ? next(to) : null;
    await store.filledFromLedger(rows, to);
    done += rows.length;
  }
  store.markComplete();
  return done;
}

/** Whether the store's last step is the ledger's row of the same ledger_seq. */
export async function storeMatchesLedger(store: StepStore, conn: SqlConnection): Promise<boolean> {
  const last = store.lastStep;
  if (last === null) return store.filled === 0n || (await ledgerHasNoStepsUpTo(store, conn));
  const rows = await conn.query(`SELECT CAST(current_hash AS VARCHAR) FROM ${qualifiedName(store.steps)} WHERE ledger_seq = ${last.seq}`);
  return rows.length === 1 && rows[0]?.[0] === last.hash;
}

async function ledgerHasNoStepsUpTo(store: StepStore, conn: SqlConnection): Promise<boolean> {
  const rows = await conn.query(`SELECT count(*) FROM ${qualifiedName(store.steps)} WHERE ledger_seq <= ${store.filled}`);
  return Number(rows[0]?.[0] ?? 0) === 0;
}
