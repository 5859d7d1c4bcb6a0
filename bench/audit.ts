import type pg from 'pg';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DuckDBEngine } from '../src/engines/duckdb/adapter/engine.js';
import { LedgerAuditor } from '../src/engines/duckdb/log/auditor.js';
import type { LedgerCatalog } from '../src/ledger/chain/catalog.js';
import { Journal } from '../src/engines/duckdb/ledger/journal.js';
import type { MerkleLog } from '../src/ledger/log/merkle-log.js';
import { reconcile } from '../src/engines/duckdb/log/reconcile.js';
import { observeFingerprint } from '../src/engines/duckdb/ledger/fingerprint.js';
import { STEPS_DDL, type LedgerTable } from '../src/ledger/chain/schema.js';
import { chainVerifier } from '../src/engines/duckdb/dialect/verify.js';
import { LedgerWriter } from '../src/engines/duckdb/ledger/writer.js';
import { NO_OBSERVER } from '../src/observe/observer.js';
import { writerRow } from './dataset.js';
import { openNodeFile, nodeFilePath } from '../src/engines/duckdb/log/node-file.js';
import { duckdbLedgers } from '../src/engines/duckdb/ledger/catalog-source.js';

/** A step's client columns, in the table order of `_cot_steps` (the server's left out). */
function clientRow(i: number): Array<string | null> {
  return writerRow(`s-${i % 2000}`, i);
}

interface Ledger {
  readonly engine: DuckDBEngine;
  readonly writer: LedgerWriter;
  readonly catalog: LedgerCatalog;
  readonly table: LedgerTable;
  readonly log: MerkleLog;
  close(): Promise<void>;
}

/** A file-backed ledger of `steps` steps in 2,000 sessions, appended through the writer with the global log on. */
async function ledgerOf(steps: number): Promise<Ledger> {
  const dir = mkdtempSync(join(tmpdir(), 'cotwire-bench-audit-'));
  const path = join(dir, 'audit.duckdb');
  const engine = await DuckDBEngine.open({ path });
  const conn = await engine.connect();
  await conn.run(STEPS_DDL);
  const catalog = duckdbLedgers(conn, (name) => name.startsWith('_cot'));
  const table = await catalog.find(['_cot_steps']);
  if (table === null) throw new Error('no _cot_steps');
  const log = openNodeFile(nodeFilePath(path));
  const writer = await LedgerWriter.open(engine, catalog, { journalPath: Journal.pathFor(path), log });
  const BATCH = 20_000;
  for (let i = 0; i < steps; i += BATCH) {
    await writer.append([{ table, rows: Array.from({ length: Math.min(BATCH, steps - i) }, (_, j) => clientRow(i + j)) }]);
  }
  await writer.visible();
  return {
    engine,
    writer,
    catalog,
    table,
    log,
    async close() {
      await writer.close();
      log.close();
      conn.close();
      await engine.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export interface AuditCost {
  /** Holding every row against the global log, seconds. */
  readonly reconcileSeconds: number;
  /** Recomputing every chain's hashes, seconds. */
  readonly chainsSeconds: number;
  /** One look of the watch (the fingerprint of every row), seconds. */
  readonly watchSeconds: number;
  readonly buildSeconds: number;
}

/** The two halves of one audit over `steps` steps, timed apart. */
export async function auditCost(steps: number): Promise<AuditCost> {
  const t = performance.now();
  const ledger = await ledgerOf(steps);
  const buildSeconds = (performance.now() - t) / 1000;
  const conn = await ledger.engine.connect();
  try {
    await conn.run('BEGIN TRANSACTION READ ONLY');
    const r0 = performance.now();
    const r = await reconcile(conn, [ledger.table], ledger.log, {
      applied: ledger.writer.appliedSeq,
      integrated: () => ledger.writer.settledSeq(),
      heads: [],
    });
    const reconcileSeconds = (performance.now() - r0) / 1000;
    const c0 = performance.now();
    const verdicts = await chainVerifier(conn, ledger.catalog).verify(null);
    const chainsSeconds = (performance.now() - c0) / 1000;
    await conn.run('ROLLBACK');
    const w0 = performance.now();
    await observeFingerprint(conn, ledger.table, ledger.writer.appliedSeq);
    const watchSeconds = (performance.now() - w0) / 1000;
    if (r.findings.length > 0 || verdicts.some((v) => !v.valid)) throw new Error('the benchmark ledger does not verify');
    return { reconcileSeconds, chainsSeconds, watchSeconds, buildSeconds };
  } finally {
    conn.close();
    await ledger.close();
  }
}

/**
 * Appends through the writer (16 concurrent one-step units, journal and
 * log on) over one ledger of `steps` steps, `runs` times each way,
 * alternating: with audits running back to back the whole time, and with
 * none. Steps per second.
 */
export async function appendRatesWhileAuditing(steps: number, appends: number, runs: number): Promise<{ during: number[]; without: number[] }> {
  const ledger = await ledgerOf(steps);
  const auditConn = await ledger.engine.connect();
  const auditor = new LedgerAuditor(
    auditConn,
    ledger.catalog,
    {
      log: ledger.log,
      appliedSeq: () => ledger.writer.appliedSeq,
      integratedSeq: () => ledger.writer.settledSeq(),
      knownHeads: () => ledger.writer.knownHeads(),
      logStopped: () => null,
    },
    NO_OBSERVER,
    () => undefined,
    () => undefined,
  );
  let written = steps;
  const rate = async (auditing: boolean): Promise<number> => {
    let stop = false;
    const audits = auditing
      ? (async () => {
          while (!stop) await auditor.audit();
        })()
      : Promise.resolve();
    const t = performance.now();
    let next = 0;
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (next++ < appends) await ledger.writer.append([{ table: ledger.table, rows: [clientRow(written++)] }]);
      }),
    );
    const perSecond = appends / ((performance.now() - t) / 1000);
    stop = true;
    await audits;
    return perSecond;
  };
  try {
    const out = { during: [] as number[], without: [] as number[] };
    for (let r = 0; r < runs; r++) {
      out.without.push(await rate(false));
      out.during.push(await rate(true));
    }
    return out;
  } finally {
    await auditor.stop();
    auditConn.close();
    await ledger.close();
  }
}

/**
 * Waits for a server's first audit (cot_audit() says 'pending' until it ends), at most
 * `seconds`; returns the seconds waited, or null when it had not ended by then.
 */
export async function startupAudit(seconds: number, c: pg.Client): Promise<number | null> {
  const t = performance.now();
  while (performance.now() - t < seconds * 1000) {
    const r = await c.query("SELECT count(*)::int AS n FROM cot_audit() WHERE kind = 'pending'");
    if (r.rows[0].n === 0) return (performance.now() - t) / 1000;
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
  return null;
}
