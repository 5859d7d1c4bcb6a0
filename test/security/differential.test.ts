import { writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type pg from 'pg';
import type { EngineConnection } from '../../src/engine/port.js';
import { makeScramVerifier } from '../../src/session/scram.js';
import type { TestServer } from '../fixtures/server.js';
import { startFixtureServer } from './fixture.js';
import { fillGaps, separatorLike, StatementGrammar, SWEEP_ATTACKS } from './differential/grammar.js';
import { BareOracle, BUILTINS, LEDGER_TABLES, protectedStateSql } from './differential/oracle.js';

/**
 * The differential fuzz: generated statements run on bare DuckDB first, to
 * see what they really do; cotwire must refuse every statement that changed
 * a ledger, a macro, the catalog database or a setting there, as admin,
 * writer and reader, over the simple and the extended protocol. `npm test`
 * runs a seeded sample (every character for two attacks, 2,000 generated); `npm run fuzz` runs COTWIRE_FUZZ_COUNT (100k)
 * with the Unicode sweep in every single gap, and writes what it found to
 * COTWIRE_FUZZ_REPORT. COTWIRE_FUZZ_RESUME=n goes on with a stopped run of
 * the same seed and count at its statement n (the report's `done`), each
 * statement still going to the role and protocol it had in the whole run.
 */

const COUNT = Number(process.env['COTWIRE_FUZZ_COUNT'] ?? 2000);
const SEED = Number(process.env['COTWIRE_FUZZ_SEED'] ?? 20261124);
const REPORT = process.env['COTWIRE_FUZZ_REPORT'];
const FULL_SWEEP = COUNT > 10_000;
const CHECK_EVERY = Number(process.env['COTWIRE_FUZZ_CHECK_EVERY'] ?? 500);
const RESUME = Number(process.env['COTWIRE_FUZZ_RESUME'] ?? 0);
/** A statement takes about 60 ms here, on bare DuckDB and through cotwire, over three roles: room for a slower machine. */
const TIMEOUT_MS = Math.max(3_600_000, (COUNT + 12_000) * 200);

const verifier = makeScramVerifier('pw');
const users = [
  { name: 'cotwire', password: verifier, role: 'admin', agentId: null, orgId: null },
  { name: 'bi', password: verifier, role: 'reader', agentId: null, orgId: null },
  { name: 'planner', password: verifier, role: 'writer', agentId: null, orgId: null },
];
const ROLES = ['admin', 'writer', 'reader'] as const;

let server: TestServer;
let internal: EngineConnection;
const clients = new Map<string, pg.Client>();
let oracle: BareOracle;
let baseline: string;
/** The writer's sequence when the fuzz began: rows up to it are the fixture's, and must never change. */
let fixtureSeq = 0n;

/** cotwire's protected state, read past the server: the fixture's rows, definitions, macros, catalog, settings. */
async function cotwireState(): Promise<string> {
  await server.running.writer.visible();
  const q = (sql: string): Promise<string> =>
    internal.query(sql).then(
      (r) => String(r[0]?.[0]),
      (e: unknown) => `error: ${(e as Error).message}`,
    );
  const rows = await q(protectedStateSql(`ledger_seq <= ${fixtureSeq}`, BUILTINS));
  // A row a client put in a ledger outside the writer has no chain, or one it chose.
  const forged = await Promise.all(
    LEDGER_TABLES.map((t) =>
      q(
        `SELECT count(*) FROM ${t} WHERE current_hash IS NULL OR prev_hash IS NULL OR step_index IS NULL OR created_at IS NULL OR ledger_seq IS NULL OR current_hash = 'f0rged' OR ledger_seq = 999`,
      ),
    ),
  );
  return `${rows} | forged ${forged.join(',')}`;
}

beforeAll(async () => {
  ({ server, internal } = await startFixtureServer({ users }, { password: 'pw' }));
  clients.set('admin', await server.client({ password: 'pw' }));
  clients.set('writer', await server.client({ user: 'planner', password: 'pw' }));
  clients.set('reader', await server.client({ user: 'bi', password: 'pw' }));
  await internal.run('CREATE SEQUENCE s1');
  fixtureSeq = BigInt(String((await internal.query('SELECT max(ledger_seq) FROM test.main._cot_steps'))[0]?.[0] ?? 0));
  for (const t of LEDGER_TABLES) {
    const max = BigInt(String((await internal.query(`SELECT coalesce(max(ledger_seq), 0) FROM ${t}`))[0]?.[0] ?? 0));
    if (max > fixtureSeq) fixtureSeq = max;
  }
  baseline = await cotwireState();
  oracle = new BareOracle();
});

afterAll(async () => {
  oracle.close();
  internal.close();
  await server[Symbol.asyncDispose]();
});

interface Hole {
  readonly sql: string;
  readonly role: string;
  readonly protocol: string;
}

/** Every separator-like character in the gaps of a few core attacks: all gaps at once, and (in the full run) each gap alone. */
function sweep(): string[] {
  const out: string[] = [];
  for (const c of separatorLike()) {
    const ch = String.fromCodePoint(c);
    for (const attack of FULL_SWEEP ? SWEEP_ATTACKS : SWEEP_ATTACKS.filter((_, i) => i === 0 || i === 2)) {
      out.push(fillGaps(attack, () => ch));
      if (!FULL_SWEEP) continue;
      const gaps = attack.split(' ').length - 1;
      for (let g = 0; g < gaps; g++) out.push(fillGaps(attack, (i) => (i === g ? ch : ' ')));
    }
  }
  return out;
}

async function runOnCotwire(client: pg.Client, sql: string, extended: boolean): Promise<string> {
  const outcome = await client.query(extended ? ({ text: sql, values: [], queryMode: 'extended' } as pg.QueryConfig) : sql).then(
    () => 'ok',
    (e: unknown) => (e as { code?: string }).code ?? 'error',
  );
  await client.query('ROLLBACK').catch(() => undefined);
  await client.query('DEALLOCATE ALL').catch(() => undefined);
  return outcome;
}

describe('the differential fuzz', () => {
  it(
    `refuses every statement that changes protected state on bare DuckDB (seed ${SEED}, ${COUNT} generated)`,
    async () => {
      const grammar = new StatementGrammar(SEED);
      const statements = [...sweep(), ...Array.from({ length: COUNT }, () => grammar.next())];
      const holes: Hole[] = [];
      const breaks: Array<{ readonly after: number; readonly window: readonly string[] }> = [];
      const outcomes = new Map<string, number>();
      let effective = 0;
      const timing = { bare: 0, cotwire: 0 };
      let window: string[] = [];
      const report = (done: number): void => {
        if (REPORT === undefined) return;
        const summary = {
          seed: SEED,
          statements: statements.length,
          resumedAt: RESUME,
          done,
          sweep: statements.length - COUNT,
          effectiveOnBareDuckDB: effective,
          milliseconds: timing,
          outcomes: Object.fromEntries(outcomes),
          holes,
          breaks,
        };
        writeFileSync(REPORT, `${JSON.stringify(summary, null, 2)}\n`);
      };
      for (let i = RESUME; i < statements.length; i++) {
        const sql = statements[i] as string;
        const t0 = performance.now();
        const bare = await oracle.changes(sql);
        const t1 = performance.now();
        timing.bare += t1 - t0;
        if (bare.changed) effective++;
        const role = ROLES[i % 3] as string;
        const extended = Math.floor(i / 3) % 2 === 1;
        const outcome = await runOnCotwire(clients.get(role) as pg.Client, sql, extended);
        timing.cotwire += performance.now() - t1;
        outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1);
        if (bare.changed && outcome === 'ok' && (await oracle.confirm(sql)).changed) holes.push({ sql, role, protocol: extended ? 'extended' : 'simple' });
        window.push(`${role}/${extended ? 'extended' : 'simple'}: ${sql}`);
        if (i % CHECK_EVERY === CHECK_EVERY - 1 || i === statements.length - 1) {
          const state = await cotwireState();
          if (state !== baseline) {
            breaks.push({ after: i, window, state, baseline } as never);
            baseline = state;
          }
          window = [];
          // Written as it goes: a long run that is stopped still leaves what it found.
          report(i + 1);
        }
      }
      report(statements.length);
      expect(holes).toEqual([]);
      expect(breaks).toEqual([]);
      // The generator must really attack: a fuzz whose statements change nothing proves nothing.
      expect(effective).toBeGreaterThan((statements.length - RESUME) / 8);
      expect((await clients.get('admin')?.query('SELECT 1 AS one'))?.rows).toEqual([{ one: 1 }]);
    },
    TIMEOUT_MS,
  );
});
