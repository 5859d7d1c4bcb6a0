import type { Config } from '../../../config/schema.js';
import type { Engine } from '../../../engine/port.js';
import type { LedgerTable } from '../../../ledger/chain/schema.js';
import type { Logger } from '../../../log/logger.js';
import type { DisposeStack } from '../../../server/dispose-stack.js';
import type { TableRows } from '../ledger/applier.js';
import type { LedgerWriter } from '../ledger/writer.js';
import { statementRows } from '../handler/context.js';
import { fillStepStore, ledgerStepsSql, storeMatchesLedger } from '../steps-store/fill.js';
import { StepStore, stepStorePath, type StepTexts } from '../steps-store/store.js';
import { printFingerprint, type StepPrinter } from '../steps-store/stored-row.js';
import { layoutOf } from '../handler/steps-reads.js';
import { dataRowFrames } from '../../../protocol/encode.js';
import { qualifiedName } from '../../../ledger/chain/schema.js';

export interface OpenedStepStore {
  readonly store: StepStore;
  /** What the writer's durable commits feed (a failure turns the store off, never the commit). */
  readonly appended: (tables: readonly TableRows[]) => void;
  /** Fills the store from the ledger in the background; call once the writer feeds `appended`. */
  readonly startFill: () => void;
}

/**
 * Opens the row store of `_cot_steps` (steps-store/store.ts) beside a
 * file-backed database, emptied when it does not match the ledger. Until
 * its fill from the ledger is done, and after any failure to write it,
 * reads go to the engine: the store is a shortcut, never the record.
 */
export async function openStepStore(
  config: Config,
  log: Logger,
  engine: Engine,
  writer: LedgerWriter,
  steps: LedgerTable | undefined,
  stack: DisposeStack,
): Promise<OpenedStepStore | null> {
  if (steps === undefined || !config.ledger.stepStore || config.database.path === ':memory:') return null;
  const conn = stack.use(await engine.connect(), (c) => c.close());
  // The rows are printed as a replay's statement prints them: `SELECT *` of the table, in UTC.
  const shape = await conn.prepare(`SELECT * FROM ${qualifiedName(steps)} LIMIT 0`, []);
  stack.defer(() => shape.close());
  const print: StepPrinter['print'] = (rows) => {
    const cells = shape.renderCanonical?.(rows, { timeZone: 'UTC' }) ?? null;
    return cells === null ? null : dataRowFrames(cells);
  };
  const printer: StepPrinter = { layout: layoutOf(shape.columns), fingerprint: printFingerprint(steps, print), print };
  let store = await StepStore.open({ path: stepStorePath(config.database.path), steps, printer });
  const last = store.lastStep;
  // A store that goes further than the ledger's durable appends was not made from this ledger.
  const beyond = last !== null && last.seq > writer.durableSeq;
  if (last !== null && !beyond) await writer.visible(last.seq);
  if (beyond || !(await storeMatchesLedger(store, conn))) {
    log.warn({ path: store.path }, 'the row store of _cot_steps does not match the ledger (the database file was replaced?): it is rebuilt');
    store = await store.reset();
  }
  // Read through a prepared statement's text cells: the engine's fast path for strings.
  const statement = await conn.prepare(ledgerStepsSql(steps), []);
  stack.defer(() => statement.close());
  const read = (from: bigint, to: bigint): Promise<StepTexts[]> =>
    statementRows(
      statement,
      [from, to].map((seq) => ({ value: Buffer.from(String(seq), 'utf8'), format: 0 as const, typeOid: 0 })),
    );
  let stopping = false;
  let failed = false;
  let filling: Promise<unknown> = Promise.resolve();
  const opened = store;
  opened.onError = (err) => {
    failed = true;
    log.error({ err }, 'writing the row store of _cot_steps failed: reads of steps go to the engine until the next start');
  };
  stack.defer(async () => {
    stopping = true;
    await filling;
    await opened.close();
  });
  return {
    store,
    appended: (tables) => {
      if (failed) return;
      try {
        opened.appended(tables);
      } catch (err) {
        // The next start fills what this run could not write.
        failed = true;
        opened.disable();
        log.error({ err }, 'writing the row store of _cot_steps failed: reads of steps go to the engine until the next start');
      }
    },
    startFill: () => {
      const upTo = writer.durableSeq;
      const from = opened.filled;
      const began = performance.now();
      filling = fillStepStore(
        opened,
        read,
        upTo,
        (seq) => writer.visible(seq) ?? Promise.resolve(),
        () => stopping || failed,
      ).then(
        (read) => {
          if (read > 0 || from > 0n) {
            log.info(
              { steps: read, durationMs: Math.round(performance.now() - began) },
              `the row store of _cot_steps holds the ledger up to ledger_seq ${upTo}; cold step and session reads are served from it`,
            );
          }
        },
        (err: unknown) => {
          failed = true;
          opened.disable();
          log.error({ err }, 'filling the row store of _cot_steps failed: reads of steps go to the engine until the next start');
        },
      );
    },
  };
}
