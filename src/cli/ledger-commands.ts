import { withDatabase } from './database.js';
import { UsageError } from './usage.js';
import { ProtectedNames } from '../guard/names.js';
import type { EngineConnection } from '../engine/port.js';
import { REDACTIONS_TABLE } from '../ledger/erasure/redactions.js';
import { quoteLiteral, STEPS_TABLE } from '../ledger/chain/schema.js';
import { chainVerifier } from '../engines/duckdb/dialect/verify.js';
import { verifySql } from '../engines/duckdb/dialect/verify-sql.js';
import { verifyLogOffline } from './log-commands.js';
import { printVerifyReport, type RedactionListing } from './verify-report.js';
import { duckdbLedgers } from '../engines/duckdb/ledger/catalog-source.js';

/**
 * A large ledger is verified in slices of whole chains, as the audit does, without its pauses:
 * in one query, recomputing every chain held all of a ledger whose sessions are interleaved in
 * memory at once (1.3 GB of RSS for 1M steps; with slices of 250k steps, 0.76 GB), and the
 * benchmark's run over 11M such steps failed there, most likely for memory.
 */
const WHOLE_CHAINS_IN_SLICES = { rowsPerSlice: 1_000_000, pause: async () => undefined };

type Out = (s: string) => void;

/**
 * `cotwire verify`: every chain, and with --checkpoint and --key the global
 * log against saved checkpoints; exit 0 when intact, 1 when anything broke.
 */
export async function verifyCommand(
  opts: { db: string; session?: string; prefix?: string; json?: boolean; checkpoint?: string[]; key: readonly string[] },
  out: Out,
): Promise<number> {
  const checkpoints = opts.checkpoint ?? [];
  if (checkpoints.length > 0 && opts.key.length === 0) throw new UsageError('--checkpoint needs --key: the verifier key that signed them');
  if (opts.key.length > 0 && checkpoints.length === 0) throw new UsageError('--key needs --checkpoint: the checkpoint files or directories to verify against');
  return withDatabase(opts.db, false, async (conn) => {
    const names = new ProtectedNames(opts.prefix === undefined ? [] : [opts.prefix]);
    const verdicts = await chainVerifier(
      conn,
      duckdbLedgers(conn, (n) => names.isProtected(n)),
      WHOLE_CHAINS_IN_SLICES,
    ).verify(opts.session ?? null);
    const log = checkpoints.length === 0 ? null : await verifyLogOffline(conn, opts.db, checkpoints, opts.key);
    return printVerifyReport({ verdicts, log, redactions: await redactionsOf(conn, opts.session ?? null) }, opts.json === true, out);
  });
}

/** The redactions recorded, each with the record that authorised it: verification checked the row's other columns in full. */
async function redactionsOf(conn: EngineConnection, chainKey: string | null): Promise<RedactionListing[]> {
  const [[exists]] = (await conn.query(
    `SELECT count(*) > 0 FROM system.main.duckdb_tables() WHERE database_name = current_database() AND schema_name = 'main' AND table_name = '${REDACTIONS_TABLE}'`,
  )) as [[boolean]];
  if (!exists) return [];
  const rows = (await conn.query(
    `SELECT ledger, target_chain_key, target_step_index, column_name, CAST(redaction_id AS VARCHAR), reason, redacted_by, CAST(created_at AS VARCHAR)
     FROM main.${REDACTIONS_TABLE} WHERE $1 IS NULL OR target_chain_key = $1 ORDER BY ledger_seq`,
    [chainKey],
  )) as Array<[string, string, number, string, string, string, string, string]>;
  return rows.map(([ledger, key, step, column, id, reason, by, at]) => ({
    ledger,
    chainKey: key,
    stepIndex: Number(step),
    column,
    redactionId: id,
    reason,
    redactedBy: by,
    redactedAt: at,
  }));
}

/** `cotwire replay`: a session's steps, readably; exit 1 when it has none. */
export async function replayCommand(opts: { db: string; session: string }, out: Out): Promise<number> {
  return withDatabase(opts.db, false, async (conn) => {
    const rows = await conn.query(
      `SELECT step_index, step_type, CAST(created_at AS VARCHAR), agent_id, confidence, content, current_hash
       FROM main.${STEPS_TABLE} WHERE session_id = $1 ORDER BY step_index`,
      [opts.session],
    );
    if (rows.length === 0) {
      out(`no steps for session "${opts.session}"\n`);
      return 1;
    }
    for (const [index, type, at, agent, confidence, content, hash] of rows) {
      const conf = confidence === null ? '' : ` confidence=${String(confidence)}`;
      out(`#${String(index)} ${String(type)} ${String(at)}${agent === null ? '' : ` agent=${String(agent)}`}${conf} ${String(hash).slice(0, 12)}\n`);
      if (content !== null) out(`    ${String(content).replaceAll('\n', '\n    ')}\n`);
    }
    return 0;
  });
}

/** `cotwire sessions`: one line per session with its step count, time span and chain status. */
export async function sessionsCommand(opts: { db: string; agent?: string; json?: boolean }, out: Out): Promise<number> {
  return withDatabase(opts.db, false, async (conn) => {
    const catalog = duckdbLedgers(conn, (n) => new ProtectedNames().isProtected(n));
    const steps = (await catalog.all()).find((t) => t.isSteps);
    if (steps === undefined) throw new UsageError(`${opts.db} has no ${STEPS_TABLE} ledger`);
    const rows = await conn.query(
      `WITH v AS (${verifySql(steps, `$1 IS NULL OR session_id IN (SELECT session_id FROM main.${STEPS_TABLE} WHERE agent_id = $1)`)})
       SELECT s.session_id, any_value(s.agent_id), count(*), CAST(min(s.created_at) AS VARCHAR), CAST(max(s.created_at) AS VARCHAR), any_value(v.valid)
       FROM main.${STEPS_TABLE} s JOIN v ON v.chain_key = s.session_id
       WHERE $1 IS NULL OR s.agent_id = $1
       GROUP BY s.session_id ORDER BY min(s.created_at)`,
      [opts.agent ?? null],
    );
    const sessions = rows.map(([session, agent, count, first, last, valid]) => ({
      session_id: String(session),
      agent_id: agent === null ? null : String(agent),
      step_count: Number(count),
      first_step_at: String(first),
      last_step_at: String(last),
      chain_valid: valid === true,
    }));
    if (opts.json === true) out(`${JSON.stringify(sessions, null, 2)}\n`);
    else {
      for (const s of sessions) {
        out(
          `${s.chain_valid ? 'ok    ' : 'BROKEN'} ${s.session_id}  steps=${s.step_count}  agent=${s.agent_id ?? '-'}  ${s.first_step_at} .. ${s.last_step_at}\n`,
        );
      }
      out(`${sessions.length} sessions\n`);
    }
    return sessions.every((s) => s.chain_valid) ? 0 : 1;
  });
}

/** `cotwire export`: the administrator's way to get steps out; clients cannot write files. */
export async function exportCommand(opts: { db: string; format: 'parquet' | 'csv' | 'jsonl'; out: string; session?: string }, out: Out): Promise<number> {
  return withDatabase(opts.db, true, async (conn) => {
    const where = opts.session === undefined ? '' : ` WHERE session_id = ${quoteLiteral(opts.session)}`;
    const format = opts.format === 'parquet' ? 'FORMAT parquet' : opts.format === 'csv' ? 'FORMAT csv, HEADER' : 'FORMAT json';
    const [[count]] = (await conn.query(`SELECT count(*) FROM main.${STEPS_TABLE}${where}`)) as [[bigint]];
    await conn.run(`COPY (SELECT * FROM main.${STEPS_TABLE}${where} ORDER BY session_id, step_index) TO ${quoteLiteral(opts.out)} (${format})`);
    out(`exported ${String(count)} steps to ${opts.out}\n`);
    return 0;
  });
}
