import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DuckDBEngine } from '../src/engines/duckdb/adapter/engine.js';
import { Journal } from '../src/engines/duckdb/ledger/journal.js';
import { leafHash } from '../src/ledger/log/merkle.js';
import { STEPS_DDL } from '../src/ledger/chain/schema.js';
import { LedgerWriter } from '../src/engines/duckdb/ledger/writer.js';
import { writerRow } from './dataset.js';
import { openNodeFile, nodeFilePath } from '../src/engines/duckdb/log/node-file.js';
import { duckdbLedgers } from '../src/engines/duckdb/ledger/catalog-source.js';

/**
 * The global log's cost on the append path: the same appends through the
 * ledger writer (journal on, as the server runs it), 16 concurrent units of
 * one step each, with the log and without it. In-process, so the
 * difference is the writer's own work and not the wire's.
 */
export async function appendRate(withLog: boolean, steps: number): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), 'cotwire-bench-log-'));
  const path = join(dir, 'log.duckdb');
  const engine = await DuckDBEngine.open({ path });
  const conn = await engine.connect();
  const log = withLog ? openNodeFile(nodeFilePath(path)) : undefined;
  try {
    await conn.run(STEPS_DDL);
    const catalog = duckdbLedgers(conn, (name) => name.startsWith('_cot'));
    const table = await catalog.find(['_cot_steps']);
    if (table === null) throw new Error('no _cot_steps');
    const writer = await LedgerWriter.open(engine, catalog, { journalPath: Journal.pathFor(path), ...(log === undefined ? {} : { log }) });
    const row = (i: number): Array<string | null> => writerRow(`s-${i % 64}`, i);
    const t = performance.now();
    let next = 0;
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (next < steps) await writer.append([{ table, rows: [row(next++)] }]);
      }),
    );
    const rate = steps / ((performance.now() - t) / 1000);
    await writer.close();
    return rate;
  } finally {
    log?.close();
    conn.close();
    await engine.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Proofs from the node file at `leaves` leaves: median microseconds of an inclusion and of a consistency proof. */
export function proofMicros(leaves: number, samples: number): { inclusion: number; consistency: number; buildSeconds: number } {
  const dir = mkdtempSync(join(tmpdir(), 'cotwire-bench-proof-'));
  const log = openNodeFile(join(dir, 'proof.merkle'));
  try {
    const t = performance.now();
    const BATCH = 10_000;
    for (let i = 0; i < leaves; i += BATCH) {
      log.append(Array.from({ length: Math.min(BATCH, leaves - i) }, (_, j) => leafHash(Buffer.from(`step ${i + j}`))));
    }
    const buildSeconds = (performance.now() - t) / 1000;
    const time = (f: () => void): number => {
      const s = performance.now();
      f();
      return (performance.now() - s) * 1000;
    };
    const inclusion: number[] = [];
    const consistency: number[] = [];
    for (let k = 0; k < samples; k++) {
      const index = Math.floor(Math.random() * leaves);
      inclusion.push(time(() => log.inclusion(index, leaves)));
      consistency.push(time(() => log.consistency(index + 1, leaves)));
    }
    const median = (xs: number[]): number => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;
    return { inclusion: median(inclusion), consistency: median(consistency), buildSeconds };
  } finally {
    log.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
